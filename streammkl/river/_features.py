"""Dict inputs as river streams them -> dense vectors for the core.

Feature names get a column when first seen (a batch of new names is sorted, so the order of keys
in a dict never matters); a missing feature is 0; ``None`` means missing; a non-numeric value,
a non-finite one or one beyond ``+-MAX_ABS_INPUT`` (1e100) is an error naming the feature. The
vector is a fresh array: the learner never keeps a reference to the caller's dict.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping

import numpy as np

from streammkl.core.model import MAX_ABS_INPUT


class FeatureIndex:
    """Name -> column map that only grows."""

    def __init__(self, names: list[str] | None = None):
        self.names: list[str] = list(names or [])
        self.index: dict[str, int] = {n: i for i, n in enumerate(self.names)}
        self._ints: dict[int, int] = {}  # int name -> column (the column of its str)

    def __len__(self) -> int:
        return len(self.names)

    def new_names(self, x: Mapping) -> list[str]:
        return sorted({_key(k) for k in x if _key(k) not in self.index})

    def add(self, names: list[str]) -> None:
        for name in names:
            if name not in self.index:
                self.index[name] = len(self.names)
                self.names.append(name)

    def vector(self, x: Mapping, validated: bool = False) -> np.ndarray:
        """Dense vector over the known columns (unknown names are ignored: add them first).

        ``validated``: the values already passed ``check_numeric`` (skip the per-value checks).
        """
        out = np.zeros(len(self.names))
        index = self.index
        for key, value in x.items():
            col = index.get(key if type(key) is str else _key(key))
            if col is None or value is None:
                continue
            out[col] = value if validated else _number(key, value)
        return out

    def known_vector(self, x: Mapping, learn: bool) -> np.ndarray | None:
        """``x`` as :meth:`vector` gives it, in one pass, when every value is a plain ``float`` or
        ``int`` within ``+-MAX_ABS_INPUT`` (or ``None``) under a ``str`` key; None when another
        case needs the full path (nothing changed). ``learn``: an unknown name also answers None
        (it would get a column); else it is ignored, as predictions ignore it."""
        out = np.zeros(len(self.names))
        index = self.index
        for key, value in x.items():
            kind = type(value)
            if kind is float or kind is int:
                if not -MAX_ABS_INPUT <= value <= MAX_ABS_INPUT:  # NaN, +-Inf, too large:
                    return None  # the full path names it
            elif value is not None:
                return None
            col = index.get(key)
            if col is None and type(key) is int:  # river's synthetic streams: int names
                col = self._int_column(key)
            if col is None:
                if learn or type(key) is not str:
                    return None
            elif value is not None:
                out[col] = value
        return out

    def _int_column(self, key: int) -> int | None:
        """The column of an ``int`` name (its ``str``'s), remembered once found."""
        col = self._ints.get(key)
        if col is None:
            col = self.index.get(str(key))
            if col is not None:
                self._ints[key] = col
        return col


def _key(key: object) -> str:
    return key if isinstance(key, str) else str(key)


def _number(key: object, value: object) -> float:
    kind = type(value)
    if kind is float or kind is int:  # the common case, without the ABC machinery
        v = float(value) if kind is float else _int_value(key, value)  # type: ignore[arg-type]
        if not -MAX_ABS_INPUT <= v <= MAX_ABS_INPUT:
            raise _out_of_range(key, value)
        return v
    if isinstance(value, bool | np.bool_):
        return float(value)
    if not isinstance(value, numbers.Real):
        raise TypeError(
            f"feature {key!r} has a non-numeric value {value!r} ({type(value).__name__}); "
            "encode it first (e.g. river.preprocessing.OneHotEncoder)"
        )
    v = float(value)
    if not -MAX_ABS_INPUT <= v <= MAX_ABS_INPUT:
        raise _out_of_range(key, value)
    return v


def _int_value(key: object, value: int) -> float:
    try:
        return float(value)
    except OverflowError:  # an int beyond float's range
        raise ValueError(f"feature {key!r} has a value beyond +-{MAX_ABS_INPUT:g}") from None


def _out_of_range(key: object, value: object) -> ValueError:
    """The error for a value a model refuses: NaN, +-Inf, or beyond ``+-MAX_ABS_INPUT``."""
    if math.isfinite(float(value)):  # type: ignore[arg-type]
        return ValueError(
            f"feature {key!r} has a value {value!r} beyond +-{MAX_ABS_INPUT:g} (the largest "
            "magnitude a streammkl model takes: rescale the feature)"
        )
    return ValueError(f"feature {key!r} has a non-finite value {value!r}")


def check_numeric(x: Mapping) -> None:
    """Validate every value of x before the model is touched (bad input changes nothing)."""
    for key, value in x.items():
        if value is not None:
            _number(key, value)
