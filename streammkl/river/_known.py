"""A dict record as the core's one-call round takes it (:class:`KnownRecord`): its values in
the dict's order and each one's column, the columns remembered for the last record's keys.

A dense stream sends the same keys in every record: the columns of a key tuple are looked up
once and reused while the inputs stay the same, so a record costs a tuple of its keys, a list
of its values and one typed copy into a kept buffer (no per-record array, no per-key lookup).
Anything unusual answers None and the caller takes its general path: a value that is not a
plain ``float`` or ``int`` (``None``, ``bool``, numpy scalars, strings), an ``int`` beyond a
float's range, a name of another type than ``str`` or ``int``; when learning, a name the model
does not know. Values out of range are the compiled call's to refuse (``OnlineMKL.learn_bound``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Collection, Mapping

import numpy as np

from streammkl.river._features import FeatureIndex

_NUMBER = frozenset({float, int})
_NONE = np.zeros(0)


class KnownRecord:
    """The columns of the last record's keys and the buffers of the one-call round."""

    #: The value types a record may bring (:meth:`fill`'s check, for a caller that inlines
    #: it with :attr:`pack`).
    NUMBERS = _NUMBER

    def __init__(self) -> None:
        self._keys: tuple | None = None
        self._index: dict | None = None  # the name -> column map they were looked up in
        self._width = -1  # the inputs known when the columns were looked up
        self._complete = False  # every key had a column
        self.cols = np.zeros(0, dtype=np.int64)
        self._bind(_NONE)
        #: The record over the model's inputs, and standardised (buffers of its width).
        self.raw = _NONE
        self.xs = _NONE
        #: Called whenever a buffer (:attr:`vals`, :attr:`cols`, :attr:`raw`, :attr:`xs`) is
        #: replaced by another (whoever bound them elsewhere binds them again); not pickled.
        self.on_replace: Callable[[], None] | None = None

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
        return self.fill(x.values())  # (a view: no list per record)

    @property
    def pack(self) -> Callable[..., None]:
        """:meth:`fill`'s write, ``pack(vals, 0, *values)`` into :attr:`vals` (raising
        ``OverflowError`` or ``struct.error`` where :meth:`fill` answers None): valid while
        :attr:`vals` is the buffer (a replacement is reported, :attr:`on_replace`)."""
        return self._pack

    @property
    def keys(self) -> tuple | None:
        """The keys whose columns are looked up (those of the last record :meth:`values`
        took), or None."""
        return self._keys

    def fill(self, values: Collection) -> np.ndarray | None:
        """The buffer of :meth:`values` holding ``values`` (those of a record of :attr:`keys`,
        in their order), or None for the general path (a value not a plain number, an int
        beyond a float's range, another length)."""
        if not _NUMBER.issuperset(map(type, values)):
            return None
        try:  # into vals: a struct's copy costs ~0.3 µs less than ``vals[:] = values``
            self._pack(self.vals, 0, *values)  # type: ignore[arg-type]  # (a buffer: numpy's)
        except (OverflowError, struct.error):  # an int beyond a float's range, another length
            return None
        return self.vals

    def _bind(self, vals: np.ndarray) -> None:
        """``vals`` becomes the values' buffer, written by a ``struct`` of as many float64 (C
        doubles: a float as it is, an int as ``float(int)``, as numpy converts them)."""
        self.vals = vals
        self._pack = struct.Struct(f"{vals.shape[0]}d").pack_into

    def _replaced(self) -> None:
        """Report that a buffer was replaced (:attr:`on_replace`)."""
        if self.on_replace is not None:
            self.on_replace()

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        del state["_pack"]  # (a struct does not pickle: made again from the buffer)
        del state["on_replace"]  # (its owner's: set again by it)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._bind(self.vals)
        self.on_replace = None

    def _look_up(self, keys: tuple, features: FeatureIndex, width: int) -> None:
        get = features.index.get
        found = [
            get(key) if type(key) is str else get(str(key)) if type(key) is int else -2
            for key in keys
        ]
        complete = None not in found
        if not complete:
            found = [-1 if col is None else col for col in found]
        if -2 in found:  # a name of another type: the general path, every time
            self._keys, self._index, self._width, self._complete = None, None, -1, False
            self._bind(_NONE)
            self.cols = self.cols[:0]
            self._replaced()
            return
        self._keys, self._index, self._width, self._complete = keys, features.index, width, complete
        self.cols = np.array(found, dtype=np.int64)
        if self.vals.shape[0] != len(keys):
            self._bind(np.zeros(len(keys)))
        if self.raw.shape[0] != width:
            self.raw, self.xs = np.zeros(width), np.zeros(width)
        self._replaced()  # (cols at least: a new array)
