"""One flat vector for the arrays a mixing merge touches (``core.mixing.merge_saved``).

A settled group's states share one layout: every state's merged arrays are then laid end to
end in one float64 vector at the same offsets, computed once per layout, and a merge is a few
whole-vector operations instead of one numpy call per array per state.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import ClassVar

import numpy as np

from streammkl.core import bandwidth
from streammkl.core.mixing_bandwidth import holds
from streammkl.core.model import OnlineMKL
from streammkl.core.state import BlockState

__all__ = ["FlatLayout"]


class FlatLayout:
    """Where a saved state's merged arrays sit in one flat vector, for one layout (computed
    once per layout, kept as long as the model whose layout it is lives, and no longer: a new
    layout, after new inputs, a kernel added or a bandwidth restart, gets its own). The
    *weighted* vector holds bias, avg_w, avg_bias, avg_loss and theta (``w`` times its block's
    scale, column by column); the *added* one step_acc and, under FTRL, the stored dual ``w``."""

    #: Each model's flat layout, kept while the model lives (a flat layout holds the model's
    #: layout, kernels and tables, never the model).
    _kept: ClassVar[weakref.WeakKeyDictionary[OnlineMKL, FlatLayout]] = weakref.WeakKeyDictionary()

    def __init__(self, shape: OnlineMKL):
        L = shape.layout
        assert L is not None
        self.layout = L
        self.K, self.P, self.E = shape.n_outputs, L.width, len(shape.averages)
        self.kernels = shape.kernels
        self.M = len(shape.kernels)
        K, P, E = self.K, self.P, self.E
        self.shapes = {
            "w": (K, P), "avg_w": (E, K, P), "bias": (K,), "avg_bias": (E, K),
            "avg_loss": (E + 1,), "step_acc": (self.M + 1,), "scale": (self.M,),
        }  # fmt: skip
        covered = np.zeros(P, dtype=bool)
        owner = np.zeros(P, dtype=np.int64)
        for m in range(self.M):
            a, e = int(L.ex_off[m]), int(L.ex_off[m + 1])
            covered[a:e] = True
            owner[a:e] = m
        self.columns = np.flatnonzero(covered)
        self.owner = owner[self.columns]
        #: The merged state's meta tables of this layout, built once and shared by every
        #: state merged on it (read, never changed in place, like the states' arrays).
        self.config = shape.config()
        self.bandwidths = bandwidth.saved(shape.kernels)
        #: Whether the group's bandwidth decision leaves a merged model on this layout as
        #: the merge made it (mixing_bandwidth.holds).
        self.settled = holds(shape.kernels, len(shape.feature_keys))
        empty = BlockState.empty(L, K, 0, shape.average, E)
        self.every_column = L.used_columns().size == P
        #: A merged state's arrays before the merge writes them, as to_arrays saves them (the
        #: support set, its Gram matrices and the running average empty), and its lazy factors.
        self.lazy = empty.lazy.copy()
        #: Whether the model of this layout passed ``core.mixing.check_mixable`` (set there).
        self.mixable = False
        self.blank = empty.to_arrays(L)
        cuts = np.cumsum([K, E * K * P, E * K, E + 1, K * P])
        self.cuts = [int(c) for c in cuts[:-1]]
        self.width = int(cuts[-1])
        self.added_width = self.M + 1 + K * P
        #: Work buffers of :meth:`merged`: the base's, a state's, its since's and a difference
        #: (weighted, then added vectors), and a block-scale row; kept warm between merges.
        self._work = np.zeros((4, self.width))
        self._work_added = np.zeros((4, self.added_width))
        self._block = np.zeros(P)
        self._lock = threading.Lock()

    @classmethod
    def of(cls, shape: OnlineMKL) -> FlatLayout | None:
        """``shape``'s flat layout, made at the first call and again after ``shape`` took
        another layout; None while its layout has room for inputs it does not know yet."""
        flat = cls._kept.get(shape)
        if flat is not None and flat.holds(shape):
            return flat
        L = shape.layout
        if L is None or L.capacity != len(shape.feature_keys):
            return None
        flat = cls._kept[shape] = cls(shape)
        return flat

    def holds(self, shape: OnlineMKL) -> bool:
        """Whether this is still ``shape``'s layout (a live model may have taken another
        layout, bank or outputs since; a kept model never does)."""
        return (
            shape.layout is self.layout
            and shape.kernels is self.kernels
            and shape.n_outputs == self.K
            and len(shape.feature_keys) == self.layout.capacity
        )

    def fits(self, arrays: Mapping[str, np.ndarray]) -> bool:
        """Whether a saved state's arrays have this layout's shapes (float64)."""
        for name, shape in self.shapes.items():
            a = arrays[name]
            if not isinstance(a, np.ndarray) or a.shape != shape or a.dtype != np.float64:
                return False
        return True

    def merged(
        self,
        base: Mapping[str, np.ndarray],
        members: Sequence[tuple[float, Mapping[str, np.ndarray], Mapping[str, np.ndarray] | None]],
        ftrl: bool,
        mean: bool,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(the weighted vector, the added vector) of a merge: the base's, plus, member by
        member (``(weight, its state's arrays, the arrays it learned from: None for the
        base)``), ``weight * (state - since)`` on the weighted vector and ``state - since``
        (``mean``: weighted too) on the added one: the numbers of ``out += w * (a - b)`` in
        that order, each state laid out in work buffers this layout keeps (no vector built
        per state). Two new arrays (the caller's)."""
        with self._lock:  # (the work buffers are this layout's: one merge at a time)
            out = np.empty(self.width)
            self._weighted_into(out, base)
            ref = self._work[0]
            np.copyto(ref, out)
            summed = np.empty(self.added_width if ftrl else self.M + 1)
            self._added_into(summed, base, ftrl)
            ref_added = self._work_added[0][: summed.size]
            np.copyto(ref_added, summed)
            state, since, tmp = self._work[1], self._work[2], self._work[3]
            state_added, since_added, tmp_added = (b[: summed.size] for b in self._work_added[1:])
            for w, arrays, old in members:
                self._weighted_into(state, arrays)
                start = ref
                if old is not None:
                    self._weighted_into(since, old)
                    start = since
                np.subtract(state, start, out=tmp)
                np.multiply(tmp, w, out=tmp)
                np.add(out, tmp, out=out)
                self._added_into(state_added, arrays, ftrl)
                start = ref_added
                if old is not None:
                    self._added_into(since_added, old, ftrl)
                    start = since_added
                np.subtract(state_added, start, out=tmp_added)
                if mean:
                    np.multiply(tmp_added, w, out=tmp_added)
                np.add(summed, tmp_added, out=summed)
            return out, summed

    def _weighted_into(self, v: np.ndarray, arrays: Mapping[str, np.ndarray]) -> None:
        """A state's weighted vector (bias, avg_w, avg_bias, avg_loss, theta) written into ``v``."""
        K, P, E = self.K, self.P, self.E
        a, b, c, d = self.cuts
        v[:a] = arrays["bias"]
        v[a:b].reshape(E, K, P)[...] = arrays["avg_w"]
        v[b:c].reshape(E, K)[...] = arrays["avg_bias"]
        v[c:d] = arrays["avg_loss"]
        np.multiply(arrays["w"], self._scale_row(arrays, self._block), out=v[d:].reshape(K, P))

    def _added_into(self, v: np.ndarray, arrays: Mapping[str, np.ndarray], ftrl: bool) -> None:
        """A state's added vector (step_acc; under FTRL the stored dual ``w`` after it) written
        into ``v``."""
        M = self.M + 1
        v[:M] = arrays["step_acc"]
        if ftrl:
            v[M:].reshape(self.K, self.P)[...] = arrays["w"]

    def theta(self, arrays: Mapping[str, np.ndarray]) -> np.ndarray:
        """A state's theta: ``w`` times its block's scale, column by column (a new array)."""
        return np.asarray(arrays["w"] * self._scale_row(arrays, np.zeros(self.P)))

    def _scale_row(self, arrays: Mapping[str, np.ndarray], row: np.ndarray) -> np.ndarray:
        """``row`` (zeros beyond the blocks' columns) with each block's column holding its
        block's scale: theta is ``w`` times it."""
        row[self.columns] = arrays["scale"][self.owner]
        return row

    def state(self, out: np.ndarray, summed: np.ndarray) -> BlockState:
        """A merged state of this layout, what ``BlockState.empty`` gives with the merge's
        biases, averages and squared-gradient sums (views of the vectors :meth:`merged` made:
        the state's own), its support set empty as a saved state has it (a merge of explicit
        blocks: no support set)."""
        bias, avg_w, avg_bias, avg_loss, _ = self.weighted_parts(out)
        given = {
            "bias": bias, "avg_w": avg_w, "avg_bias": avg_bias, "avg_loss": avg_loss,
            "step_acc": summed[: self.M + 1],
        }  # fmt: skip
        arrays = {
            name: given[name] if name in given else template.copy()
            for name, template in self.blank.items()
        }
        return BlockState(**arrays, lazy=self.lazy.copy())

    def saved(self, S: BlockState) -> dict[str, np.ndarray]:
        """What ``S.to_arrays(layout)`` gives for a merged state :meth:`state` made (settled,
        no support set), without copying its arrays again: the caller hands ``S`` over."""
        if not self.every_column or S.n_support:
            return S.to_arrays(self.layout)
        return {name: getattr(S, name) for name in BlockState.saved_names()}

    def weighted_parts(self, v: np.ndarray) -> tuple[np.ndarray, ...]:
        """(bias, avg_w, avg_bias, avg_loss, theta): views of a weighted vector."""
        K, P, E = self.K, self.P, self.E
        bias, avg_w, avg_bias, avg_loss, theta = np.split(v, self.cuts)
        return bias, avg_w.reshape(E, K, P), avg_bias.reshape(E, K), avg_loss, theta.reshape(K, P)

    def added_parts(self, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(step_acc, the stored dual: empty unless FTRL) of an added vector."""
        M = self.M + 1
        return v[:M], v[M:].reshape(self.K, -1)
