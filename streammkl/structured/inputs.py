"""Inputs of a sequence labeler: feature sequences to arrays, labels to indices and back to JSON.

A sequence ``xs`` is either a (T x d) array (or a list of equal-length numeric rows), or a list of
T feature dicts ``{name: number}`` (missing names are 0). A labeler takes one kind for its whole
life; dict feature names are appended to its feature keys in order of first appearance.
Labels are any hashable value except None (and NaN); they are indexed in order of first
appearance and compared as dict keys (so ``1``, ``1.0`` and ``True`` are one label, ``"1"``
another). They are persisted as JSON with type tags (``bool``, ``int``, ``float``, ``str``,
``tuple``), so each comes back with its own type.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from streammkl.labels import check_label

__all__ = ["decode_label", "encode_label", "sequence_matrix"]


def sequence_matrix(xs: Any, keys: list[str], mode: str | None) -> tuple[np.ndarray, str, list]:
    """``(X (T x d'), mode, new_keys)`` for a feature sequence.

    ``keys`` are the labeler's feature keys so far (not modified); ``new_keys`` are the names
    this sequence adds (dict mode) or the column keys beyond ``len(keys)`` (array mode).
    ``mode`` is ``"dict"``, ``"array"`` or None (not yet fixed).
    """
    if isinstance(xs, np.ndarray):
        rows_are_dicts = False
    else:
        if isinstance(xs, Mapping | str | bytes) or not isinstance(xs, Sequence):
            raise TypeError(
                f"xs must be a list of feature dicts or a (T x d) array, got {type(xs).__name__}"
            )
        if len(xs) == 0:
            raise ValueError("xs is an empty sequence; a sequence needs at least one position")
        rows_are_dicts = isinstance(xs[0], Mapping)
    kind = "dict" if rows_are_dicts else "array"
    if mode is not None and kind != mode:
        raise ValueError(f"xs: this labeler was fed {mode} sequences; got a {kind} sequence")
    if kind == "array":
        return _array_matrix(xs, keys), kind, []
    return _dict_matrix(xs, keys)


def _array_matrix(xs: Any, keys: list[str]) -> np.ndarray:
    try:
        X = np.array(xs, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"xs: not a numeric (T x d) array ({exc})") from None
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"xs must be a non-empty (T x d) array, got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        i, j = np.argwhere(~np.isfinite(X))[0]
        raise ValueError(f"xs[{i}][{j}] = {X[i, j]} is not finite")
    if keys and X.shape[1] < len(keys):
        raise ValueError(f"xs has {X.shape[1]} features per position; the model has {len(keys)}")
    return np.ascontiguousarray(X)


def _dict_matrix(xs: Sequence[Any], keys: list[str]) -> tuple[np.ndarray, str, list[str]]:
    index = {k: j for j, k in enumerate(keys)}
    new: list[str] = []
    cells: list[tuple[int, int, float]] = []
    for i, row in enumerate(xs):
        if not isinstance(row, Mapping):
            raise TypeError(f"xs[{i}] is a {type(row).__name__}; every position must be a dict")
        for name, value in row.items():
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise ValueError(f"xs[{i}][{name!r}] = {value!r} is not a number")
            value = float(value)
            if not math.isfinite(value):
                raise ValueError(f"xs[{i}][{name!r}] = {value} is not finite")
            key = str(name)
            j = index.get(key)
            if j is None:
                j = index[key] = len(index)
                new.append(key)
            cells.append((i, j, value))
    X = np.zeros((len(xs), len(index)))
    for i, j, value in cells:
        X[i, j] = value
    return X, "dict", new


def check_labels(ys: Any, T: int) -> list[Hashable]:
    """The label sequence as a list, checked against the input length."""
    if isinstance(ys, str | bytes | Mapping) or not isinstance(ys, Sequence | np.ndarray):
        raise TypeError(f"ys must be a sequence of labels, got {type(ys).__name__}")
    ys = list(ys.tolist() if isinstance(ys, np.ndarray) else ys)
    if len(ys) != T:
        raise ValueError(f"ys has {len(ys)} labels but xs has {T} positions")
    for i, y in enumerate(ys):
        if y is None:
            raise ValueError(f"ys[{i}] is None; None is reserved for 'no prediction'")
        check_label(y, f"ys[{i}]")
        try:
            hash(y)
        except TypeError:
            raise TypeError(f"ys[{i}] = {y!r} is not hashable") from None
    return ys


def encode_label(y: Any) -> list:
    """JSON form ``[tag, value]`` of a label; TypeError (naming it) for unsupported types."""
    if isinstance(y, np.generic):
        y = y.item()
    if isinstance(y, bool):
        return ["bool", y]
    if isinstance(y, int):
        return ["int", y]
    if isinstance(y, float):
        if not math.isfinite(y):
            raise TypeError(f"label {y!r} cannot be saved: not a finite float")
        return ["float", y]
    if isinstance(y, str):
        return ["str", y]
    if isinstance(y, tuple):
        return ["tuple", [encode_label(v) for v in y]]
    raise TypeError(
        f"label {y!r} of type {type(y).__name__} cannot be saved; labels must be bool, int, "
        "float, str or tuples of those"
    )


def decode_label(item: Any) -> Hashable:
    """Inverse of :func:`encode_label`; ValueError for a malformed entry."""
    if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
        raise ValueError(f"malformed label entry {item!r}")
    tag, value = item
    if tag == "tuple" and isinstance(value, list):
        return tuple(decode_label(v) for v in value)
    types = {"bool": bool, "int": int, "float": float, "str": str}
    expected = types.get(tag)
    if expected is None or not (type(value) is expected or (tag == "float" and type(value) is int)):
        raise ValueError(f"malformed label entry {item!r}")
    return expected(value)
