"""A projection bound that lets B1-spline blocks skip the support pairs outside their support.

The B1-spline kernel is 0 beyond distance h; with h at the 5th percentile of the pair distances,
95% of the support pairs contribute nothing, yet an exact evaluation has to read both inputs to
know it. For an orthonormal basis ``U`` (r x d, r < d) of part of a view,
``||U z - U x_s|| <= ||z - x_s||``, so a pair whose projected distance already exceeds h is
skipped after r operations instead of d. With ``U`` the top principal directions of the support
inputs most far pairs are caught: on the digit-strings characters (d = 64, h at 95% zeros)
r = 16 skips about 90% of the pairs, r = 8 about 76% (``benchmarks/b1_support.py``). Cheaper
bounds that need no fitted basis catch almost nothing there (measured on the same pairs: the norm
bound ``| ||z|| - ||x_s|| | >= h`` 0%, 8 row norms 0.2%, 8 pivot distances 6%), and stopping a
coordinate-wise distance once it passes h^2 read ~16 of 64 coordinates per pair but was no
faster than the plain inner product (gathers and unpredictable branches).

The basis and the projections are a derived cache, never saved: the compiled scorer
(``b1_pruned_expansion``, in the core's compiled package) evaluates every pair it does not skip
exactly as the plain path does, so the scores are the same bit for bit whatever the basis
(tested in tests/test_structured_pruning.py), and a model resumed from its state refits the
basis.
"""

from __future__ import annotations

import numpy as np

from streammkl.core import compiled as cnb
from streammkl.core.state import BlockState, Layout

RANK = 16  # projected coordinates per B1 view
MIN_SUPPORT = 4 * RANK  # support pairs before the first fit (fewer: the plain path)
SAMPLE = 1024  # at most this many support inputs (evenly strided) fit the basis


class B1Pruning:
    """Principal-direction bases of the B1-only views and the projected support inputs.

    A view qualifies when every implicit block on it is a B1-spline (another kernel on the view
    pays for the inner products anyway) and it reads at least ``2 * RANK`` features. The basis is
    fitted on the support inputs once there are ``MIN_SUPPORT`` of them and refitted whenever the
    support set has doubled since; a support slot's projection is recomputed when its insertion
    stamp (``BlockState.age``) changes, i.e. after the slot was (re)filled.
    """

    def __init__(self, layout: Layout):
        self.layout = layout
        has_b1 = np.zeros(layout.n_views, dtype=bool)
        only_b1 = np.ones(layout.n_views, dtype=bool)
        for m in layout.im_blocks:
            if layout.kinds[m] == cnb.K_B1:
                has_b1[layout.view_of[m]] = True
            else:
                only_b1[layout.view_of[m]] = False
        wide = layout.masks.sum(axis=1) >= 2 * RANK
        self.views = np.flatnonzero(has_b1 & only_b1 & wide)
        on = np.isin(layout.view_of[layout.im_blocks], self.views)
        self.pruned = np.ascontiguousarray(layout.im_blocks[on])
        self.dense = np.ascontiguousarray(layout.im_blocks[~on])
        d = layout.masks.shape[1]
        self.basis = np.zeros((layout.n_views, RANK, d))
        self.sproj = np.zeros((layout.n_views, 0, RANK))
        self.stamp = np.zeros(0, dtype=np.int64)
        self.fitted_at = 0  # support-set size at the last fit (0: never fitted)

    def arrays(self, state: BlockState) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(im_blocks, im_pruned, basis, sproj)`` for ``sequence_scores``, brought up to date."""
        n = state.n_support
        if self.pruned.size == 0 or n < MIN_SUPPORT:
            return self.layout.im_blocks, self.pruned[:0], self.basis, self.sproj
        if n >= 2 * self.fitted_at:
            self._fit(state)
        self._sync(state)
        return self.dense, self.pruned, self.basis, self.sproj

    def _fit(self, state: BlockState) -> None:
        n = state.n_support
        rows = state.sx[: n : max(1, n // SAMPLE)]
        for v in self.views:
            idx = np.flatnonzero(self.layout.masks[v])
            sub = rows[:, idx] - rows[:, idx].mean(axis=0)
            vt = np.linalg.svd(sub, full_matrices=False)[2][:RANK]
            self.basis[v] = 0.0
            self.basis[v][: vt.shape[0], idx] = vt
        self.fitted_at = n
        self.stamp[:] = -1  # every projection is stale

    def _sync(self, state: BlockState) -> None:
        cap = state.capacity
        if self.stamp.shape[0] != cap:
            keep = min(cap, self.stamp.shape[0])
            sproj = np.zeros((self.layout.n_views, cap, RANK))
            sproj[:, :keep] = self.sproj[:, :keep]
            stamp = np.full(cap, -1, dtype=np.int64)
            stamp[:keep] = self.stamp[:keep]
            self.sproj, self.stamp = sproj, stamp
        n = state.n_support
        stale = np.flatnonzero(self.stamp[:n] != state.age[:n])
        if stale.size:
            for v in self.views:
                self.sproj[v, stale] = state.sx[stale] @ self.basis[v].T
            self.stamp[stale] = state.age[stale]
