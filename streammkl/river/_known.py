"""A dict record as the core's one-call round takes it (:class:`KnownRecord`): its values in
the dict's order and each one's column, the columns remembered for the last record's keys.

A dense stream sends the same keys in every record: the columns of a key tuple are looked up
once and reused while the inputs stay the same, so a record costs a tuple of its keys, a list
of its values and one typed copy into a kept buffer (no per-record array, no per-key lookup).
Anything unusual answers None and the caller takes its general path: a value that is not a
plain ``float`` or ``int`` (``None``, ``bool``, numpy scalars, strings), an ``int`` beyond a
float's range, a name of another type than ``str`` or ``int``; when learning, a name the model
does not know. Values out of range are the compiled call's to refuse (``OnlineMKL.learn_values``).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from streammkl.river._features import FeatureIndex

_NUMBER = frozenset({float, int})
_NONE = np.zeros(0)


class KnownRecord:
    """The columns of the last record's keys and the buffers of the one-call round."""

    def __init__(self) -> None:
        self._keys: tuple | None = None
        self._index: dict | None = None  # the name -> column map they were looked up in
        self._width = -1  # the inputs known when the columns were looked up
        self._complete = False  # every key had a column
        self.cols = np.zeros(0, dtype=np.int64)
        self.vals = _NONE
        #: The record over the model's inputs, and standardised (buffers of its width).
        self.raw = _NONE
        self.xs = _NONE

    def values(self, x: Mapping, features: FeatureIndex, learn: bool) -> np.ndarray | None:
        """``x``'s values as a float64 vector in the dict's order (their columns: :attr:`cols`,
        -1 for a name the model does not know), or None for the general path (see the module;
        with ``learn``, a name the model does not know too). The vector and :attr:`cols` are
        buffers, valid until the next call."""
        keys = tuple(x)
        width = len(features.names)
        if keys != self._keys or width != self._width or features.index is not self._index:
            self._look_up(keys, features, width)
        if learn and not self._complete:
            return None
        values = list(x.values())
        if not set(map(type, values)) <= _NUMBER:
            return None
        vals = self.vals
        try:
            vals[:] = values
        except (OverflowError, ValueError, TypeError):  # an int beyond a float's range
            return None
        return vals

    def _look_up(self, keys: tuple, features: FeatureIndex, width: int) -> None:
        index = features.index
        cols = np.empty(len(keys), dtype=np.int64)
        complete = True
        for i, key in enumerate(keys):
            kind = type(key)
            col = index.get(key) if kind is str else index.get(str(key)) if kind is int else None
            if col is None:
                complete = False
                col = -1 if kind is str or kind is int else -2
            cols[i] = col
        if (cols == -2).any():  # a name of another type: the general path, every time
            self._keys, self._index, self._width, self._complete = None, None, -1, False
            self.vals, self.cols = _NONE, cols[:0]
            return
        self._keys, self._index, self._width, self._complete = keys, index, width, complete
        self.cols = cols
        self.vals = np.zeros(len(keys))
        if self.raw.shape[0] != width:
            self.raw, self.xs = np.zeros(width), np.zeros(width)
