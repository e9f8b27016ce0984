"""A local memory: the last W inputs and their classes, and their Parzen vote for a new input.

:class:`ParzenMemory` is what a kernel machine of a few fixed bandwidths lacks on moving or
multi-modal classes (issue 27, ``benchmarks/results/knn_votes.md``): the class fractions of the
Gaussian-weighted vote of the last ``window`` (input, class) pairs, ``sum_i exp(-gamma d2(z,
x_i)) [y_i = c] / sum_i exp(-gamma d2(z, x_i))``, where

- the squared distance is weighted per input, ``d2 = sum_j r_j (z_j - x_ij)^2``: ``r_j`` is
  input j's binned mutual information with the class over the window (8 bins of a standardised
  value, less its bias under independence, scaled to mean 1; all 1 while no input informs the
  class), refreshed every ``relevance_every`` pairs, so that inputs that do not inform the class
  stop deciding who is a neighbour (Agrawal: the vote alone from -17.5 to +2.0 points against
  the default learner);
- ``gamma = scale / median d2`` over pairs of the first 100 inputs (``2 d / scale`` stands in
  for the median before), refitted to the weighted distances of the last 100 inputs at each
  refresh.

The inputs are meant to be standardised (the bins are cut at -2 .. 2). The window is stored by
columns in float32 (the compiled vote's loops run over contiguous slots and vectorise); an
input first seen late gets a column that is 0 in the pairs stored before it. The memory
serves numbers only: classes are indices 0, 1, ... given by the caller. No river here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from streammkl.core._numba import parzen as _parzen
from streammkl.core.jit import entry_point

#: The bandwidth's median is taken once this many pairs are stored, then at each refresh.
MEDIAN_AFTER = 100
#: Cuts of a standardised input into 8 bins for the relevance weights.
RELEVANCE_EDGES = np.linspace(-2.0, 2.0, 7)

#: At most this many pairs wait in a stager's queue (:meth:`ParzenMemory.stager`) before they
#: are written into the window.
STAGED_MAX = 64
#: The compiled entry points of the vote and the store (resolved on first use: they skip the
#: dispatcher's typing of 11 arguments a call; every call passes exactly these types).
_ENTRY: dict[str, Any] = {}
_FLOAT64 = np.dtype(np.float64)


class ParzenMemory:
    """The last ``window`` (input, class) pairs and their Parzen vote.

    Parameters
    ----------
    window
        How many of the last pairs vote (W).
    scale
        The bandwidth: ``gamma = scale / median squared distance``.
    relevance_every
        Refresh the per-input distance weights every this many pairs (0: never; all 1).
    """

    def __init__(self, window: int = 1000, scale: float = 16.0, relevance_every: int = 250):
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be an int >= 1, got {window!r}")
        if not (isinstance(scale, int | float) and math.isfinite(scale) and scale > 0):
            raise ValueError(f"scale must be a finite number > 0, got {scale!r}")
        if (
            isinstance(relevance_every, bool)
            or not isinstance(relevance_every, int)
            or relevance_every < 0
        ):
            raise ValueError(f"relevance_every must be an int >= 0, got {relevance_every!r}")
        self.window = window
        self.scale = float(scale)
        self.relevance_every = relevance_every
        self._columns = np.zeros((0, window), dtype=np.float32)  # inputs x slots
        self._labels = np.zeros(window, dtype=np.int32)
        self.count = 0  # pairs stored so far (the window holds the last min(count, W))
        self.n_classes = 0
        self.relevance = np.ones(0)  # r, mean 1
        self.gamma = math.nan  # NaN until the median is taken
        self._scratch()

    def _scratch(self) -> None:
        self._checked: np.ndarray | None = None  # the input :meth:`add` last checked
        self._weights = self.relevance.astype(np.float32)
        self._dist = np.zeros(self.window, dtype=np.float32)
        self._bits = np.zeros(self.window, dtype=np.int32)
        self._out = np.zeros(self.n_classes)
        #: Pairs a stager (:meth:`stager`) counted but did not yet write into the window: the
        #: first ``_staged`` rows of ``_queue`` (float64, one row per pair, as wide as the
        #: window) and of ``_queue_labels``; :attr:`count` counts them, ``_stored`` not.
        self._staged = 0
        self._stored = self.count
        self._new_queue()

    def _new_queue(self) -> None:
        self._queue = np.zeros((min(STAGED_MAX, self.window), self.width))
        self._queue_labels = np.zeros(self._queue.shape[0], dtype=np.int32)
        #: the queue's rows and classes as memoryviews (a row's copy without numpy's indexing)
        self._queue_rows = [row.data for row in self._queue]
        self._queue_classes = self._queue_labels.data

    def __getstate__(self) -> dict[str, Any]:
        self.flush()
        state = self.__dict__.copy()
        del state["_queue_rows"], state["_queue_classes"]  # (views: made again)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._new_queue()

    @property
    def columns(self) -> np.ndarray:
        """The stored inputs, inputs x window slots (float32; slot ``i`` holds pair ``i``
        modulo the window)."""
        self.flush()
        return self._columns

    @property
    def labels(self) -> np.ndarray:
        """The class index of each slot (int32)."""
        self.flush()
        return self._labels

    @property
    def width(self) -> int:
        """How many inputs the memory has columns for."""
        return int(self._columns.shape[0])

    @property
    def size(self) -> int:
        """How many pairs vote now: ``min(count, window)``."""
        return min(self.count, self.window)

    def fit_width(self, width: int) -> None:
        """Columns for ``width`` inputs (new ones 0 in every stored pair, relevance 1)."""
        extra = width - self.width
        if extra > 0:
            self.flush()  # (the queued inputs have the old width)
            self._columns = np.concatenate(
                [self._columns, np.zeros((extra, self.window), dtype=np.float32)]
            )
            self.relevance = np.concatenate([self.relevance, np.ones(extra)])
            self._weights = self.relevance.astype(np.float32)
            self._new_queue()

    def bandwidth(self) -> float:
        """gamma now: ``scale / median`` once taken, ``scale / 2d`` before."""
        if math.isnan(self.gamma):
            return self.scale / (2.0 * max(self.width, 1))
        return self.gamma

    def _args(self, z: np.ndarray, m: int) -> tuple:
        return (
            self._columns, self._labels, m, z, self._weights, self.bandwidth(),
            self._dist, self._bits, self._out,
        )  # fmt: skip

    def vote(self, z: np.ndarray) -> np.ndarray | None:
        """The vote's class fractions for the input ``z`` (entries beyond :attr:`width` are not
        read: no stored pair has them), one per class index ``0 .. n_classes - 1``, or None
        while no pair is stored. A buffer of the memory's, overwritten by the next call: copy
        to keep."""
        if self.count == 0:
            return None
        return self._vote(np.ascontiguousarray(z, dtype=np.float64))

    def _vote(self, z: np.ndarray) -> np.ndarray:
        """:meth:`vote` of a float64 contiguous ``z`` once a pair is stored."""
        if self._staged:
            self.flush()
        args = self._args(z, self.size)
        call = _ENTRY.get("vote")
        if call is None:
            call = _ENTRY["vote"] = entry_point(_parzen.parzen_vote, args)
        call(*args)
        return self._out

    def add(self, z: np.ndarray, label: int) -> None:
        """Store the pair (``z``, class index ``label``) in place of the oldest (the input's
        new entries get columns), then the bandwidth's median after the first 100 pairs and
        the relevance every ``relevance_every`` pairs."""
        # (every round of a learner stores its input, most often the learner's same buffer:
        # the array last checked (an array's dtype, layout and shape do not change, and the
        # columns only grow) skips the checks; the call 1.69 -> 1.05 µs, load 2.8)
        if self._staged:
            self.flush()
        if z is not self._checked or label >= self.n_classes:
            if (
                label >= self.n_classes
                or z.shape[0] > self._columns.shape[0]
                or z.dtype is not _FLOAT64
                or not z.flags.c_contiguous
            ):
                z = self._prepare(z, label)
            self._checked = z
        count = self.count
        store = _ENTRY.get("store")
        if store is None:
            args = (self._columns, self._labels, count % self.window, z, label)
            store = _ENTRY["store"] = entry_point(_parzen.store, args)
        store(self._columns, self._labels, count % self.window, z, label)
        self.count = self._stored = count = count + 1
        if count == MEDIAN_AFTER or (self.relevance_every and count % self.relevance_every == 0):
            self._upkeep()

    def stager(self, z: np.ndarray) -> Callable[..., np.ndarray | None] | None:
        """``stage(label)``: :meth:`add` of ``(z, label)`` as ``z`` holds now (``stage(label,
        True)``: :meth:`vote_and_add`, its answer), for a caller that
        stores the same buffer ``z`` every round (a learner's core input), at a fraction of
        :meth:`add`'s cost: the input is copied into a queue and the queued pairs written into
        the window in one compiled call when the queue is full (:data:`STAGED_MAX`), when an
        upkeep is due and before anything reads the window (:meth:`flush`: the same float32
        numbers in the same slots as :meth:`add`). A class index the memory has no vote slot
        for yet takes :meth:`add`. None when ``z`` is not a float64 contiguous vector of at
        least :attr:`width` entries; valid while the memory's width is ``z``'s (a wider
        input stored since makes a call raise ``ValueError``, changing nothing)."""
        if z.dtype is not _FLOAT64 or z.ndim != 1 or not z.flags.c_contiguous:
            return None
        if z.shape[0] < self.width:
            return None
        self.fit_width(z.shape[0])
        view = z.data
        every, memory = self.relevance_every, self

        def stage(label: int, vote: bool = False) -> np.ndarray | None:
            if label >= memory.n_classes:
                if vote:
                    return memory.vote_and_add(z, label)
                memory.add(z, label)
                return None
            out = memory._vote(z) if vote and memory.count else None
            n = memory._staged
            memory._queue_rows[n][:] = view
            memory._queue_classes[n] = label
            memory._staged = n = n + 1
            memory.count = count = memory.count + 1
            if count == MEDIAN_AFTER or (every and count % every == 0):
                memory.flush()
                memory._upkeep()
            elif n == len(memory._queue_rows):
                memory.flush()
            return out

        return stage

    def flush(self) -> None:
        """Write the pairs a stager queued (:meth:`stager`) into the window."""
        n = self._staged
        if not n:
            return
        args = (self._columns, self._labels, self._stored % self.window, self._queue,
                self._queue_labels, n)  # fmt: skip
        call = _ENTRY.get("store_rows")
        if call is None:
            call = _ENTRY["store_rows"] = entry_point(_parzen.store_rows, args)
        call(*args)
        self._staged = 0
        self._stored = self.count

    def vote_and_add(self, z: np.ndarray, label: int) -> np.ndarray | None:
        """:meth:`vote` of ``z`` then :meth:`add` of ``(z, label)``: the vote's fractions
        before ``z`` joined (one per class index including ``label``'s), or None if no pair
        was stored before. Two compiled calls, not one fused: a fused kernel is vectorised
        otherwise and its float32 sums differ in their last bits, which flipped a near tie of
        the prequential prediction against ``vote`` + ``add`` (``learn_one``'s path)."""
        if self.count == 0:
            self.add(z, label)
            return None
        z = self._prepare(z, label)
        self.vote(z)
        self.add(z, label)
        return self._out

    def _prepare(self, z: np.ndarray, label: int) -> np.ndarray:
        """``z`` as a float64 contiguous vector, with columns for its inputs and a vote slot
        for the class ``label``."""
        z = np.ascontiguousarray(z, dtype=np.float64)
        if z.shape[0] > self._columns.shape[0]:
            self.fit_width(z.shape[0])
        if label >= self.n_classes:
            self.n_classes = label + 1
            self._out = np.zeros(self.n_classes)
        return z

    def _upkeep(self) -> None:
        """A pair was just stored: the bandwidth's first median, and the relevance, when
        due."""
        count = self.count
        if count == MEDIAN_AFTER:
            first = np.arange(min(MEDIAN_AFTER, self.window))
            self._fit_gamma(first, np.ones(self.width), reset=True)
        every = self.relevance_every
        if every and count % every == 0:
            self.refresh()

    def _fit_gamma(self, slots: np.ndarray, weights: np.ndarray, reset: bool = False) -> None:
        """gamma := scale / the median weighted squared distance between the slots; when the
        median is 0 (or there are fewer than two slots) gamma is kept, or with ``reset``
        (the first median) set back to NaN: ``scale / 2d`` stands in."""
        if slots.shape[0] < 2:
            if reset:
                self.gamma = math.nan
            return
        med = float(_parzen.median_distance(self._columns, slots, weights))
        if med > 0:
            self.gamma = self.scale / med
        elif reset:
            self.gamma = math.nan

    def refresh(self) -> None:
        """The per-input distance weights from the window (the bias-corrected binned mutual
        information, scaled to mean 1; all 1 when no input informs the class), then gamma
        refitted to the weighted distances of the last 100 pairs."""
        m = self.size
        if m == 0 or self.width == 0:
            return
        self.flush()
        r = np.zeros(self.width)
        _parzen.relevance(self._columns, self._labels, m, self.n_classes, RELEVANCE_EDGES, r)
        total = float(r.sum())
        self.relevance = r * (len(r) / total) if total > 0 else np.ones(len(r))
        self._weights = self.relevance.astype(np.float32)
        last = (self.count - 1 - np.arange(min(MEDIAN_AFTER, m))) % self.window
        self._fit_gamma(last, self.relevance)

    # --- state --------------------------------------------------------------------------------
    def to_state(self, prefix: str = "") -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """(JSON-able meta, named arrays, copies): the whole memory, without pickle; array
        names start with ``prefix``."""
        self.flush()
        meta: dict[str, Any] = {
            "window": self.window,
            "scale": self.scale,
            "relevance_every": self.relevance_every,
            "count": self.count,
            "n_classes": self.n_classes,
            "gamma": None if math.isnan(self.gamma) else self.gamma,
        }
        arrays: dict[str, np.ndarray] = {
            f"{prefix}columns": self._columns.copy(),
            f"{prefix}labels": self._labels.copy(),
            f"{prefix}relevance": self.relevance.copy(),
        }
        return meta, arrays

    @classmethod
    def from_state(
        cls, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray], prefix: str = ""
    ) -> ParzenMemory:
        """The memory :meth:`to_state` gave ``(meta, arrays)`` for."""
        memory = cls(int(meta["window"]), float(meta["scale"]), int(meta["relevance_every"]))
        columns = np.asarray(arrays[f"{prefix}columns"], dtype=np.float32)
        labels = np.asarray(arrays[f"{prefix}labels"], dtype=np.int32)
        relevance = np.asarray(arrays[f"{prefix}relevance"], dtype=np.float64)
        if columns.shape[1:] != (memory.window,) or labels.shape != (memory.window,):
            raise ValueError("Parzen memory state: arrays do not match the window")
        if relevance.shape != (columns.shape[0],):
            raise ValueError("Parzen memory state: one relevance weight per input")
        memory._columns = np.ascontiguousarray(columns)
        memory._labels = np.ascontiguousarray(labels)
        memory.relevance = relevance.copy()
        memory.count = int(meta["count"])
        memory.n_classes = int(meta["n_classes"])
        gamma = meta.get("gamma")
        memory.gamma = math.nan if gamma is None else float(gamma)
        memory._scratch()
        return memory
