"""The message schema between producers and the daemon: ``decode(bytes) -> Record | DecodeError``.

A record is one JSON object::

    {"x": {"name": number, ...} | [number, ...] | [{...} | [...], ...],
     "y": label | [label, ...],  "id": "optional string",  "ts": optional number}

``x`` is a feature dict, a dense vector, or a *sequence* (a list of dicts or of vectors, one per
token, for sequence labelling); in a feature object ``null`` means the feature is missing (as
for the river learners), in a vector it is an error. No ``"y"`` (or ``"y": null``) means predict
only. ``ts`` is the event time in seconds since the epoch.

With ``kind="sentence"`` (dependency parsing) ``x`` is a *sentence*: a list of words, each an
object of CoNLL-U columns (``{"form": "Ev", "upos": "NOUN", "feats": "Case=Loc"}``: strings,
numbers or null, or an object of strings for ``feats``/``misc``), and ``y`` its heads, one
integer per word in 0..n (0 = the root). Whether the heads form a tree (no cycle, one root arc)
is the parser's to check.

:func:`decode` never raises: every rejection is a :class:`DecodeError` whose ``reason`` is one of
:data:`REASONS` (a bounded set, safe as a metric label) and whose ``message`` names the offending
field. This module imports nothing from streammkl (DESIGN.md).

Examples
--------
>>> rec = decode(b'{"x": {"a": 1, "b": 2.5}, "y": true, "id": "e1"}')
>>> rec.x, rec.y, rec.id
({'a': 1.0, 'b': 2.5}, True, 'e1')
>>> decode(b'{"x": [1, NaN]}').reason
'non_finite'
>>> decode(b'{"x": [1, 2, 3]}', dim=2).message
'x has 3 values, expected 2 (the configured dimension)'
>>> decode(encode(Record(x=[0.5, 1.0], y="cat"))).y
'cat'

Every record is bounded (:class:`Limits`): bytes, distinct feature names, tokens, vector length,
and the lengths of names, labels and ids; a record beyond a limit is a :class:`DecodeError`
whose reason names the limit, so one hostile record costs at most a bounded amount of work.

>>> decode(b'{"x": {"a": 1, "b": 2, "c": 3}}', limits=Limits(max_features=2)).reason
'too_many_features'
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

__all__ = [
    "DEFAULT_LIMITS",
    "DEFAULT_MAX_BYTES",
    "REASONS",
    "DecodeError",
    "Limits",
    "Record",
    "decode",
    "encode",
]

DEFAULT_MAX_BYTES = 1 << 20

#: Every rejection reason :func:`decode` can return, with what it means.
REASONS: dict[str, str] = {
    "too_large": "the record is larger than the size limit",
    "invalid_utf8": "the bytes are not valid UTF-8",
    "invalid_json": "the text is not valid JSON",
    "not_an_object": "the JSON value is not an object",
    "unknown_field": "a top-level key other than x, y, id, ts (strict mode only)",
    "missing_x": "there is no x",
    "bad_x": "x is not an object, an array of numbers or an array of tokens, or is empty",
    "non_numeric": "a feature value is not a number",
    "non_finite": "a feature value or a numeric label is NaN or infinite",
    "value_too_large": "a feature value beyond the magnitude limit",
    "wrong_dim": "a vector's length differs from the configured dimension",
    "bad_sequence": "a sequence mixes token kinds, or its labels do not match its tokens",
    "wrong_kind": "a sequence where vectors are expected, or the reverse",
    "bad_label": "y is not a string, number or boolean (or a list of them for a sequence; of "
    "integers for a sentence)",
    "bad_token": "a word of a sentence is not an object of CoNLL-U columns",
    "unknown_class": "y is not one of the configured classes (strict mode only)",
    "bad_id": "id is not a string",
    "bad_ts": "ts is not a finite number",
    "too_many_features": "more distinct feature names than the limit (a sequence: over its tokens)",
    "too_many_tokens": "a sequence with more tokens than the limit",
    "vector_too_long": "a dense vector longer than the limit",
    "name_too_long": "a feature name longer than the limit",
    "label_too_long": "a label longer than the limit (a number: its decimal digits)",
    "id_too_long": "an id longer than the limit",
}


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on one record, beyond which :func:`decode` rejects it (every count is inclusive).

    Parameters
    ----------
    max_features
        Distinct feature names of a record (of all the tokens of a sequence together).
    max_tokens
        Tokens of a sequence.
    max_vector_length
        Values of a dense vector (of each token's vector in a sequence).
    max_name_length
        Characters of a feature name.
    max_label_length
        Characters of a string label, digits of an integer label.
    max_id_length
        Characters of the record's id.
    max_abs_value
        Magnitude of a feature value. Beyond ~1e77 the fourth powers a quadratic kernel takes
        overflow and every kernel loses all precision: such a value is a unit error or an
        attack, not data (standardise inputs).
    """

    max_features: int = 1_000
    max_tokens: int = 1_000
    max_vector_length: int = 4_096
    max_name_length: int = 256
    max_label_length: int = 256
    max_id_length: int = 256
    max_abs_value: float = 1e30
    #: A record of at most this many bytes cannot hold a string over any length limit (the
    #: checks of lengths are skipped for it: the common, small record pays nothing for them).
    short_record: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        shortest = min(self.max_name_length, self.max_label_length, self.max_id_length)
        object.__setattr__(self, "short_record", shortest)


#: The limits :func:`decode` applies when given none.
DEFAULT_LIMITS = Limits()

Features = dict[str, float] | list[float]
Label = str | int | float | bool

_FIELDS = frozenset({"x", "y", "id", "ts"})
_PLAIN_LABELS = frozenset({str, bool})  # labels that need no checks outside strict mode
_INT64 = 1 << 63
_UNBOUNDED = 1 << 62


@dataclass(slots=True)
class Record:
    """One decoded example (treat it as read-only; not frozen because a frozen dataclass costs
    0.6 us more per record to build, on the daemon's hot path).

    Parameters
    ----------
    x
        Features: a dict name -> float, a dense list of floats, or a sequence (list of either).
    y
        The label (a list of labels for a sequence); ``None`` means predict only.
    id
        Optional producer-side identifier, echoed in predictions.
    ts
        Optional event time (seconds since the epoch).
    raw
        The bytes the record was decoded from (kept for dead letters); empty when built in code.
    """

    x: Features | list[Features]
    y: Label | list[Label] | None = None
    id: str | None = None
    ts: float | None = None
    raw: bytes = field(default=b"", repr=False, compare=False)

    @property
    def labelled(self) -> bool:
        """Whether the record carries a label (and so is learned, not only predicted)."""
        return self.y is not None

    @property
    def is_sequence(self) -> bool:
        """Whether ``x`` is a sequence of tokens."""
        return isinstance(self.x, list) and bool(self.x) and isinstance(self.x[0], dict | list)


@dataclass(frozen=True, slots=True)
class DecodeError:
    """Why a record was rejected.

    Parameters
    ----------
    reason
        Stable machine code, one of :data:`REASONS`.
    message
        Human-readable explanation naming the offending field or feature.
    raw
        The rejected bytes, unchanged.
    """

    reason: str
    message: str
    raw: bytes = field(default=b"", repr=False)


class _Reject(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def encode(record: Record) -> bytes:
    """Serialise a record to compact JSON bytes (the inverse of :func:`decode`).

    Raises
    ------
    ValueError
        If a value is NaN or infinite (JSON cannot carry it portably).
    """
    obj: dict[str, Any] = {"x": record.x}
    if record.y is not None:
        obj["y"] = record.y
    if record.id is not None:
        obj["id"] = record.id
    if record.ts is not None:
        obj["ts"] = record.ts
    try:
        return json.dumps(obj, separators=(",", ":"), allow_nan=False).encode()
    except ValueError as exc:
        raise ValueError(f"record {record.id!r} holds NaN or infinity: {exc}") from exc


def decode(
    data: bytes,
    *,
    dim: int | None = None,
    classes: frozenset[Any] | set[Any] | tuple[Any, ...] | None = None,
    strict: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    kind: Literal["vector", "sequence", "sentence"] | None = None,
    numeric_label: bool = False,
    limits: Limits = DEFAULT_LIMITS,
) -> Record | DecodeError:
    """Decode one record; never raises.

    Parameters
    ----------
    data
        The message value.
    dim
        If set, a dense vector (or every vector token of a sequence) must have this length.
    classes
        The known labels. In strict mode a label outside them is rejected.
    strict
        Reject unknown top-level keys and labels outside ``classes``.
    max_bytes
        Size limit of the raw message.
    kind
        ``"vector"`` rejects sequences, ``"sequence"`` rejects non-sequences, ``None`` accepts both;
        ``"sentence"`` reads ``x`` as a sentence of CoNLL-U words and ``y`` as their heads.
    numeric_label
        Require numeric labels (regression).
    limits
        Bounds on the record's size and shape (:class:`Limits`).

    Returns
    -------
    A :class:`Record`, or a :class:`DecodeError` with a reason from :data:`REASONS`.
    """
    raw = bytes(data) if not isinstance(data, bytes) else data
    try:
        return _decode(raw, dim, classes, strict, max_bytes, kind, numeric_label, limits)
    except _Reject as rej:
        return DecodeError(rej.reason, rej.message, raw)
    except RecursionError:
        return DecodeError("invalid_json", "the JSON nests too deeply", raw)


def _decode(
    raw: bytes,
    dim: int | None,
    classes: Any,
    strict: bool,
    max_bytes: int,
    kind: str | None,
    numeric_label: bool,
    limits: Limits,
) -> Record:
    if len(raw) > max_bytes:
        raise _Reject("too_large", f"the record has {len(raw)} bytes, the limit is {max_bytes}")
    try:
        obj = orjson.loads(raw)  # 7x faster than json.loads on a typical record
    except orjson.JSONDecodeError:
        obj = _parse_slowly(raw)  # NaN literals, huge integers, or the precise error
    if not isinstance(obj, dict):
        raise _Reject("not_an_object", f"expected a JSON object, got {_kind(obj)}")
    if strict:
        extra = sorted(set(obj) - _FIELDS)
        if extra:
            raise _Reject("unknown_field", f"unknown field {extra[0]!r} (strict mode)")
    if "x" not in obj:
        raise _Reject("missing_x", "the record has no 'x'")
    if len(raw) <= limits.short_record:  # no string in it can be over a length limit
        twin = _NO_LENGTHS.get(id(limits))
        limits = twin[1] if twin is not None and twin[0] is limits else _without_lengths(limits)
    if kind == "sentence":
        x: Any = _sentence(obj["x"], limits)
        y = obj.get("y")
        return _finish(obj, x, None if y is None else _heads(y, len(x)), raw, limits)
    x, sequence = _features(obj["x"], dim, limits)
    if kind == "vector" and sequence:
        raise _Reject("wrong_kind", "x is a sequence of tokens but vectors are expected")
    if kind == "sequence" and not sequence:
        raise _Reject("wrong_kind", "x is a single vector but sequences are expected")
    y = obj.get("y")
    if y is not None and (sequence or strict or numeric_label or type(y) not in _PLAIN_LABELS):
        y = _labels(y, x if sequence else None, classes if strict else None, numeric_label, limits)
    elif type(y) is str and len(y) > limits.max_label_length:
        raise _too_long("label_too_long", "y", len(y), limits.max_label_length)
    return _finish(obj, x, y, raw, limits)


def _finish(obj: dict[str, Any], x: Any, y: Any, raw: bytes, limits: Limits) -> Record:
    rid = obj.get("id")
    if rid is not None:
        if not isinstance(rid, str):
            raise _Reject("bad_id", f"id must be a string, got {_kind(rid)}")
        if len(rid) > limits.max_id_length:
            raise _too_long("id_too_long", "id", len(rid), limits.max_id_length)
    ts = obj.get("ts")
    if ts is not None:
        if isinstance(ts, bool) or not isinstance(ts, int | float) or not math.isfinite(ts):
            raise _Reject("bad_ts", f"ts must be a finite number, got {ts!r}")
        ts = float(ts)
    return Record(x=x, y=y, id=rid, ts=ts, raw=raw)


def _parse_slowly(raw: bytes) -> Any:
    """The standard library's parse: it reads what orjson refuses (``NaN``/``Infinity``
    literals, integers beyond 64 bits) and names the error precisely; lone surrogate escapes
    (which orjson refuses too) stay refused: no name, label or id could be encoded."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Reject("invalid_utf8", f"not valid UTF-8 at byte {exc.start}") from None
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise _Reject("invalid_json", f"not valid JSON: {exc}") from None
    try:  # a \ud800-style escape decodes to a lone surrogate: not text anything can encode
        json.dumps(obj, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        raise _Reject("invalid_json", "a string holds a lone surrogate escape") from None
    return obj


_NO_LENGTHS: dict[int, tuple[Limits, Limits]] = {}  # id(limits) -> (limits, its twin)


def _without_lengths(limits: Limits) -> Limits:
    """``limits`` with unreachable string-length limits (for records too short to break them)."""
    big = _UNBOUNDED
    twin = Limits(
        limits.max_features, limits.max_tokens, limits.max_vector_length, big, big, big,
        limits.max_abs_value,
    )  # fmt: skip
    if len(_NO_LENGTHS) > 64:  # callers building Limits per call: keep the cache bounded
        _NO_LENGTHS.clear()
    _NO_LENGTHS[id(limits)] = (limits, twin)
    return twin


def _too_long(reason: str, where: str, length: int, limit: int) -> _Reject:
    return _Reject(reason, f"{where} has {length} characters, the limit is {limit}")


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"a number ({value!r})"
    return names.get(type(value), "null" if value is None else f"a {type(value).__name__}")


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
    if isinstance(value, float) and not math.isfinite(value):
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
