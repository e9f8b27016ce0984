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
from collections.abc import Mapping
from typing import Any

import numpy as np

from streammkl.core._numba import parzen as _parzen
from streammkl.core.jit import entry_point

#: The bandwidth's median is taken once this many pairs are stored, then at each refresh.
MEDIAN_AFTER = 100
#: Cuts of a standardised input into 8 bins for the relevance weights.
RELEVANCE_EDGES = np.linspace(-2.0, 2.0, 7)

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
        self.columns = np.zeros((0, window), dtype=np.float32)  # inputs x slots
        self.labels = np.zeros(window, dtype=np.int32)
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

    @property
    def width(self) -> int:
        """How many inputs the memory has columns for."""
        return int(self.columns.shape[0])

    @property
    def size(self) -> int:
        """How many pairs vote now: ``min(count, window)``."""
        return min(self.count, self.window)

    def fit_width(self, width: int) -> None:
        """Columns for ``width`` inputs (new ones 0 in every stored pair, relevance 1)."""
        extra = width - self.width
        if extra > 0:
            self.columns = np.concatenate(
                [self.columns, np.zeros((extra, self.window), dtype=np.float32)]
            )
            self.relevance = np.concatenate([self.relevance, np.ones(extra)])
            self._weights = self.relevance.astype(np.float32)

    def bandwidth(self) -> float:
        """gamma now: ``scale / median`` once taken, ``scale / 2d`` before."""
        if math.isnan(self.gamma):
            return self.scale / (2.0 * max(self.width, 1))
        return self.gamma

    def _args(self, z: np.ndarray, m: int) -> tuple:
        return (
            self.columns, self.labels, m, z, self._weights, self.bandwidth(),
            self._dist, self._bits, self._out,
        )  # fmt: skip

    def vote(self, z: np.ndarray) -> np.ndarray | None:
        """The vote's class fractions for the input ``z`` (entries beyond :attr:`width` are not
        read: no stored pair has them), one per class index ``0 .. n_classes - 1``, or None
        while no pair is stored. A buffer of the memory's, overwritten by the next call: copy
        to keep."""
        if self.count == 0:
            return None
        args = self._args(np.ascontiguousarray(z, dtype=np.float64), self.size)
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
        if z is not self._checked or label >= self.n_classes:
            if (
                label >= self.n_classes
                or z.shape[0] > self.columns.shape[0]
                or z.dtype is not _FLOAT64
                or not z.flags.c_contiguous
            ):
                z = self._prepare(z, label)
            self._checked = z
        count = self.count
        store = _ENTRY.get("store")
        if store is None:
            args = (self.columns, self.labels, count % self.window, z, label)
            store = _ENTRY["store"] = entry_point(_parzen.store, args)
        store(self.columns, self.labels, count % self.window, z, label)
        self.count = count = count + 1
        if count == MEDIAN_AFTER or (self.relevance_every and count % self.relevance_every == 0):
            self._upkeep()

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
        if z.shape[0] > self.columns.shape[0]:
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
        med = float(_parzen.median_distance(self.columns, slots, weights))
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
        r = np.zeros(self.width)
        _parzen.relevance(self.columns, self.labels, m, self.n_classes, RELEVANCE_EDGES, r)
        total = float(r.sum())
        self.relevance = r * (len(r) / total) if total > 0 else np.ones(len(r))
        self._weights = self.relevance.astype(np.float32)
        last = (self.count - 1 - np.arange(min(MEDIAN_AFTER, m))) % self.window
        self._fit_gamma(last, self.relevance)

    # --- state --------------------------------------------------------------------------------
    def to_state(self, prefix: str = "") -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """(JSON-able meta, named arrays, copies): the whole memory, without pickle; array
        names start with ``prefix``."""
        meta: dict[str, Any] = {
            "window": self.window,
            "scale": self.scale,
            "relevance_every": self.relevance_every,
            "count": self.count,
            "n_classes": self.n_classes,
            "gamma": None if math.isnan(self.gamma) else self.gamma,
        }
        arrays: dict[str, np.ndarray] = {
            f"{prefix}columns": self.columns.copy(),
            f"{prefix}labels": self.labels.copy(),
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
        memory.columns = np.ascontiguousarray(columns)
        memory.labels = np.ascontiguousarray(labels)
        memory.relevance = relevance.copy()
        memory.count = int(meta["count"])
        memory.n_classes = int(meta["n_classes"])
        gamma = meta.get("gamma")
        memory.gamma = math.nan if gamma is None else float(gamma)
        memory._scratch()
        return memory
