"""ONE round of Alg. 1 / Alg. 3 on a (Layout, BlockState): the Python edge of the compiled loop.

``RoundArgs`` packs every array the compiled round needs, once, so a call costs one dispatch.
It must be rebuilt whenever the state's arrays are reallocated (new inputs, classes or capacity).

Per-example calls go through numba's compiled entry point once the argument types are known:
the dispatcher's type resolution costs ~0.2 us per argument, i.e. several microseconds for the
50 arrays of a round (measured in ``benchmarks/core_update.py``). Every argument except ``x`` is
owned by this object and keeps its type; ``x`` is checked (float64, C-contiguous, writeable) by
the caller. Set ``STREAMMKL_NO_FASTCALL=1`` to always go through the dispatcher.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from streammkl.core import _numba as nb
from streammkl.core.losses import Loss
from streammkl.core.regularizers import Regularizer
from streammkl.core.schedules import Schedule
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


_FASTCALL = os.environ.get("STREAMMKL_NO_FASTCALL", "") in ("", "0")


def _entry_point(dispatcher: Any, args: tuple) -> Callable | None:
    """The compiled entry point for exactly these argument types (None if unavailable)."""
    if not _FASTCALL:
        return None
    try:
        sig = tuple(dispatcher.typeof_pyval(a) for a in args)
        result = dispatcher.overloads.get(sig)
        return None if result is None else result.entry_point
    except Exception:  # pragma: no cover - numba internals changed: stay on the dispatcher
        return None


class RoundArgs:
    """The argument tuples of ``learn_round`` / ``decision`` for one layout and state."""

    def __init__(
        self,
        layout: Layout,
        state: BlockState,
        loss: Loss,
        schedule: Schedule,
        steps: tuple[np.ndarray, np.ndarray, np.ndarray],
        radius: float,
        policy: int,
        capacity: int,
        bias_lr: float,
        horizons: np.ndarray,
        discount: float,
        every: int,
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
        self.fsq = np.zeros(M)
        self.etas = np.zeros(M + 1)  # this round's per-block steps (then the bias step)
        self.sched: tuple[Any, ...] = (
            schedule.code, schedule.constants, S.step_acc, self.etas, S.step_prev, S.stored_norms,
        )  # fmt: skip
        config: tuple[Any, ...] = (L.kinds, L.kp, L.is_explicit, L.view_of, L.masks, L.view_full)
        config += (L.ex_blocks, L.im_blocks, L.ex_off, L.ex_kind, L.ex_norm, L.phi_src)
        config += (L.rff_wt, L.rff_b, loss.code, loss.param, *steps, radius, policy, capacity)
        arrays: tuple[Any, ...] = (S.w, S.scale, S.norms, S.sx, S.ssq, S.sv, S.coef, S.kself)
        arrays += (S.age, S.counters, S.gram)
        arrays += (S.bias, bias_lr)
        buffers = (self.phi, self.scores, self.fx, self.v, self.xsq, self.dots, self.newnorms)
        self.pred = np.zeros(K)  # the prediction (the leader among the averaged iterates)
        averages: tuple[Any, ...] = (S.avg_w, S.avg_bias, S.avg_loss, S.avg_count, horizons)
        averages += (float(discount), int(every))
        work = (self.pred, np.zeros(K), np.zeros(K))
        self.learn = config + arrays + buffers + (self.fsq,) + averages + work
        self.decide = (
            L.kinds, L.kp, L.view_of, L.masks, L.view_full, L.ex_blocks, L.im_blocks,
            L.ex_off, L.ex_kind, L.ex_norm, L.phi_src, L.rff_wt, L.rff_b,
            S.w, S.scale, S.sx, S.ssq, S.sv, S.coef,
        )  # fmt: skip
        self.decide_tail: tuple[np.ndarray, ...] = (
            S.bias, self.phi, self.scores, self.fx, self.xsq, self.dots,
            S.avg_w, S.avg_bias, S.avg_loss,
        )  # fmt: skip
        self.no_averages = (np.zeros((0, K, 0)), np.zeros((0, K)), np.zeros(1))
        self.state = S
        self._learn_fast: Callable | None = None
        self._decide_fast: Callable | None = None

    def learn_round(self, x: np.ndarray, y: float, t: int) -> float:
        """One round at round number ``t`` since the schedule's last restart."""
        fast = self._learn_fast
        if fast is not None and x.flags.writeable:
            return float(fast(x, float(y), int(t), *self.sched, *self.learn))
        args = (x, float(y), int(t), *self.sched, *self.learn)
        loss = float(nb.learn_round(*args))
        if x.flags.writeable:
            self._learn_fast = _entry_point(nb.learn_round, args)
        return loss

    def decision(self, x: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
        """Scores at ``x`` into ``self.fx``; ``w`` replaces the explicit weights (averaging)."""
        args = self.decide
        if w is not None:
            args = (*args[:13], w, np.ones_like(self.state.scale), *args[15:])
            nb.decision(x, *args, self.state.n_support, *self.decide_tail[:6], *self.no_averages)
            return self.fx
        fast = self._decide_fast
        if fast is not None and x.flags.writeable:
            fast(x, *args, self.state.n_support, *self.decide_tail)
            return self.fx
        full = (x, *args, self.state.n_support, *self.decide_tail)
        nb.decision(*full)
        if x.flags.writeable:
            self._decide_fast = _entry_point(nb.decision, full)
        return self.fx

    def decision_many(self, X: np.ndarray) -> np.ndarray:
        out = np.empty((X.shape[0], self.fx.shape[0]))
        nb.decision_many(X, *self.decide, self.state.n_support, *self.decide_tail, out)
        return out

    def block_scores(self) -> np.ndarray:
        """Per-block scores of the last ``decision``/``learn_round`` call."""
        return self.scores
