"""ONE round of Alg. 1 / Alg. 3 on a (Layout, BlockState): the Python edge of the compiled loop.

``RoundArgs`` packs every array the compiled round needs, once, so a call costs one dispatch.
It must be rebuilt whenever the state's arrays are reallocated (new inputs, classes or capacity).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from streammkl.core import _numba as nb
from streammkl.core.losses import Loss
from streammkl.core.regularizers import Regularizer
from streammkl.core.state import BlockState, Layout


def step_arrays(
    regularizers: Sequence[Regularizer], n_blocks: int, names: Sequence[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The J prox steps of a composite regularizer as (codes, params, block masks)."""
    steps = [s for reg in regularizers for s in reg.steps(n_blocks, names)]
    codes = np.array([s[0] for s in steps], dtype=np.int64)
    params = np.array([[s[1], s[2]] for s in steps], dtype=np.float64).reshape(len(steps), 2)
    groups = np.array([s[3] for s in steps], dtype=np.bool_).reshape(len(steps), n_blocks)
    return codes, params, groups


class RoundArgs:
    """The argument tuples of ``learn_round`` / ``decision`` for one layout and state."""

    def __init__(
        self,
        layout: Layout,
        state: BlockState,
        loss: Loss,
        steps: tuple[np.ndarray, np.ndarray, np.ndarray],
        radius: float,
        policy: int,
        capacity: int,
        bias_lr: float,
    ):
        L, S = layout, state
        K = S.w.shape[0]
        M = L.kinds.shape[0]
        self.phi = np.zeros(L.width)
        self.scores = np.zeros((M, K))
        self.fx = np.zeros(K)
        self.v = np.zeros(K)
        self.xsq = np.zeros(L.n_views)
        self.dots = np.zeros(L.n_views)
        self.newnorms = np.zeros(M)
        config = (L.kinds, L.kp, L.is_explicit, L.view_of, L.masks, L.view_full)
        config += (L.ex_blocks, L.im_blocks, L.ex_off, L.ex_kind, L.ex_norm, L.phi_src)
        config += (L.rff_w, L.rff_b, loss.code, loss.param, *steps, radius, policy, capacity)
        arrays = (S.w, S.scale, S.norms, S.sx, S.ssq, S.sv, S.coef, S.kself, S.age, S.counters)
        arrays += (S.bias, bias_lr)
        buffers = (self.phi, self.scores, self.fx, self.v, self.xsq, self.dots, self.newnorms)
        self.learn = config + arrays + buffers
        self.decide = (
            L.kinds, L.kp, L.view_of, L.masks, L.view_full, L.ex_blocks, L.im_blocks,
            L.ex_off, L.ex_kind, L.ex_norm, L.phi_src, L.rff_w, L.rff_b,
            S.w, S.scale, S.sx, S.ssq, S.sv, S.coef,
        )  # fmt: skip
        self.decide_tail = (S.bias, self.phi, self.scores, self.fx, self.xsq, self.dots)
        self.state = S

    def learn_round(self, x: np.ndarray, y: float, eta: float) -> float:
        return float(nb.learn_round(x, y, eta, *self.learn))

    def decision(self, x: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
        """Scores at ``x`` into ``self.fx``; ``w`` replaces the explicit weights (averaging)."""
        args = self.decide
        if w is not None:
            args = (*args[:13], w, np.ones_like(self.state.scale), *args[15:])
        nb.decision(x, *args, self.state.n_support, *self.decide_tail)
        return self.fx

    def decision_many(self, X: np.ndarray) -> np.ndarray:
        out = np.empty((X.shape[0], self.fx.shape[0]))
        nb.decision_many(X, *self.decide, self.state.n_support, *self.decide_tail, out)
        return out

    def block_scores(self) -> np.ndarray:
        """Per-block scores of the last ``decision``/``learn_round`` call."""
        return self.scores
