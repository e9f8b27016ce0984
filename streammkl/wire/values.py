"""Checking a record's values: feature dicts, dense vectors, sequences of tokens, sentences of
CoNLL-U words, labels and heads, each within the record's :class:`~streammkl.wire.Limits`;
a value refused raises the :class:`~streammkl.wire.schema._Reject` that :func:`decode` turns
into a :class:`~streammkl.wire.DecodeError` naming it.
"""

from __future__ import annotations

import math
from typing import Any

from streammkl.labels import self_unequal
from streammkl.wire.schema import _INT64, _UNBOUNDED, Label, Limits, _kind, _Reject, _too_long


def _number(value: Any, where: str, bound: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Reject("non_numeric", f"{where} is {_kind(value)}, not a number")
    out = float(value)  # ints beyond float range raise OverflowError
    if not math.isfinite(out):
        raise _Reject("non_finite", f"{where} is {value!r}")
    if not -bound <= out <= bound:
        raise _Reject("value_too_large", f"{where} is {out:g}, beyond +-{bound:g} (the limit)")
    return out


def _floats(values: Any, bound: float = math.inf) -> list[float] | None:
    """Fast path: every value an int or a float, all finite and within ``+-bound`` -> the
    floats; else ``None`` (the caller then walks the values one by one to name the offending
    one)."""
    for v in values:
        kind = type(v)
        if kind is not float and kind is not int:  # bool, str, None, ...: slow path
            return None
    try:
        out = [float(v) for v in values]
    except OverflowError:
        return None
    total = sum(out)
    if total - total != 0.0:  # NaN/Inf anywhere (or an overflowing sum)
        return None
    return out if out and max(out) <= bound and min(out) >= -bound else None


def _vector(value: list[Any], dim: int | None, where: str, limits: Limits) -> list[float]:
    if not value:
        raise _Reject("bad_x", f"{where} is an empty array")
    if len(value) > limits.max_vector_length:
        raise _Reject(
            "vector_too_long",
            f"{where} has {len(value)} values, the limit is {limits.max_vector_length}",
        )
    if dim is not None and len(value) != dim:
        raise _Reject(
            "wrong_dim",
            f"{where} has {len(value)} values, expected {dim} (the configured dimension)",
        )
    bound = limits.max_abs_value
    fast = _floats(value, bound)
    if fast is not None:
        return fast
    try:
        return [_number(v, f"{where}[{i}]", bound) for i, v in enumerate(value)]
    except OverflowError:
        raise _Reject("non_finite", f"{where} holds an integer too large for a float") from None


_FLOAT_ONLY = {float}


def _mapping(value: dict[str, Any], where: str, limits: Limits) -> dict[str, float]:
    if len(value) > limits.max_features:
        raise _Reject(
            "too_many_features",
            f"{where} has {len(value)} features, the limit is {limits.max_features}",
        )
    if limits.max_name_length < _UNBOUNDED and max(map(len, value)) > limits.max_name_length:
        longest = max(map(len, value))
        name = next(k for k in value if len(k) > limits.max_name_length)
        raise _Reject(
            "name_too_long",
            f"{where} has a feature name of {longest} characters ({name[:40]!r}...), "
            f"the limit is {limits.max_name_length}",
        )
    values = value.values()
    bound = limits.max_abs_value
    if set(map(type, values)) == _FLOAT_ONLY:  # the common case: the parsed dict as it is
        total = sum(values)
        if total - total == 0.0 and max(values) <= bound and min(values) >= -bound:
            return value
    fast = _floats(values, bound)
    if fast is not None:
        return dict(zip(value, fast, strict=True))
    if None in values:  # null = a missing feature, as for the river learners (one rule)
        value = {k: v for k, v in value.items() if v is not None}
        if not value:
            raise _Reject("bad_x", f"{where} has no feature with a value (every one is null)")
        return _mapping(value, where, limits)
    prefix = "" if where == "x" else f"{where} "
    try:
        return {k: _number(v, f"{prefix}feature {k!r}", bound) for k, v in value.items()}
    except OverflowError:
        raise _Reject("non_finite", f"{where} holds an integer too large for a float") from None


def _features(x: Any, dim: int | None, limits: Limits) -> tuple[Any, bool]:
    if isinstance(x, dict):
        if not x:
            raise _Reject("bad_x", "x is an empty object")
        return _mapping(x, "x", limits), False
    if not isinstance(x, list):
        raise _Reject("bad_x", f"x must be an object or an array, got {_kind(x)}")
    if not x:
        raise _Reject("bad_x", "x is an empty array")
    first = x[0]
    if not isinstance(first, dict | list):
        return _vector(x, dim, "x", limits), False
    if len(x) > limits.max_tokens:
        raise _Reject("too_many_tokens", f"x has {len(x)} tokens, the limit is {limits.max_tokens}")
    tokens: list[Any] = []
    names: set[str] = set()
    for i, tok in enumerate(x):
        where = f"x[{i}]"
        if type(tok) is not type(first):
            raise _Reject("bad_sequence", f"{where} is {_kind(tok)} but x[0] is {_kind(first)}")
        if isinstance(tok, dict):
            if not tok:
                raise _Reject("bad_x", f"{where} is an empty object")
            tokens.append(_mapping(tok, where, limits))
            names.update(tok)
            if len(names) > limits.max_features:
                raise _Reject(
                    "too_many_features",
                    f"x has more than {limits.max_features} distinct feature names over its "
                    f"tokens (the limit), counted up to {where}",
                )
        else:
            tokens.append(_vector(tok, dim, where, limits))
    return tokens, True


def _label(value: Any, where: str, classes: Any, numeric: bool, limits: Limits) -> Label:
    # the learners' rule for a label (NaN != NaN); of JSON's values only a float can break it
    if type(value) is float and self_unequal(value):
        raise _Reject("non_finite", f"{where} is {value!r}, which is not equal to itself")
    if isinstance(value, float) and math.isinf(value):  # JSON cannot carry it portably
        raise _Reject("non_finite", f"{where} is {value!r}")
    if isinstance(value, str) and len(value) > limits.max_label_length:
        raise _too_long("label_too_long", where, len(value), limits.max_label_length)
    big = type(value) is int and not -_INT64 <= value < _INT64  # only big ones pay for str()
    if big and limits.max_label_length < _UNBOUNDED:
        digits = len(str(abs(value)))
        if digits > limits.max_label_length:
            raise _Reject(
                "label_too_long",
                f"{where} is an integer of {digits} digits, the limit is {limits.max_label_length}",
            )
    if numeric:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _Reject("bad_label", f"{where} must be a number, got {_kind(value)}")
    elif not isinstance(value, str | int | float | bool):
        raise _Reject(
            "bad_label", f"{where} must be a string, number or boolean, got {_kind(value)}"
        )
    if classes is not None and value not in classes:
        raise _Reject("unknown_class", f"{where} = {value!r} is not a configured class")
    return value


def _labels(y: Any, tokens: list[Any] | None, classes: Any, numeric: bool, limits: Limits) -> Any:
    if tokens is None:
        if isinstance(y, list):
            raise _Reject("bad_label", "y is an array but x is not a sequence")
        return _label(y, "y", classes, numeric, limits)
    if not isinstance(y, list):
        raise _Reject("bad_sequence", f"x is a sequence, so y must be an array, got {_kind(y)}")
    if len(y) != len(tokens):
        raise _Reject("bad_sequence", f"y has {len(y)} labels for {len(tokens)} tokens")
    return [_label(v, f"y[{i}]", classes, numeric, limits) for i, v in enumerate(y)]


_CELL = (str, int, float)


def _sentence(x: Any, limits: Limits) -> list[dict[str, Any]]:
    """A sentence: a non-empty list of words, each an object of CoNLL-U columns."""
    if not isinstance(x, list) or not x:
        raise _Reject("bad_x", f"x must be a non-empty array of words, got {_kind(x)}")
    if len(x) > limits.max_tokens:
        raise _Reject("too_many_tokens", f"x has {len(x)} words, the limit is {limits.max_tokens}")
    for i, word in enumerate(x):
        if not isinstance(word, dict):
            raise _Reject("bad_token", f"x[{i}] is {_kind(word)}, not an object of columns")
        for column, value in word.items():
            if value is None or (type(value) in _CELL and value == value):  # NaN != NaN
                continue
            if isinstance(value, dict) and all(type(v) is str for v in value.values()):
                continue  # feats / misc as an object of strings
            raise _Reject("bad_token", f"x[{i}][{column!r}] is {_kind(value)}")
    return x


def _heads(y: Any, n: int) -> list[int]:
    """The heads of a sentence of n words: n integers in 0..n (whether they form a tree, without
    cycles and with one root arc, is the parser's to check: its refusal names the cycle)."""
    if not isinstance(y, list):
        raise _Reject("bad_sequence", f"x is a sentence, so y must be an array, got {_kind(y)}")
    if len(y) != n:
        raise _Reject("bad_sequence", f"y has {len(y)} heads for {n} words")
    for i, h in enumerate(y):
        if type(h) is not int:
            raise _Reject("bad_label", f"y[{i}] must be an integer head, got {_kind(h)}")
        if not 0 <= h <= n:
            raise _Reject("bad_label", f"y[{i}] = {h} is not a head index (0 = root, 1..{n})")
    return y
