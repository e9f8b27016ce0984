"""Compiled runs under the monitor: :func:`learn_runs` learns rows in compiled loops that cross
the multiples of the stride and observes them, going back to a saved point when a restart falls
inside a run (:meth:`streammkl.monitor.Monitor.learn_runs` is its public door)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

if TYPE_CHECKING:
    from streammkl.monitor.facade import Monitor


class Segment(NamedTuple):
    """Rows ``[start, stop)`` of a :meth:`Monitor.learn_runs` call, learned and observed."""

    start: int
    stop: int
    losses: np.ndarray  # prequential, one per row
    scores: np.ndarray  # prequential, (rows, outputs)
    rises: list[int]  # example indices of the rises detected in these rows


def learn_runs(
    monitor: Monitor,
    X: Any,
    Y: Any,
    learn: Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[Any, Any]] | None,
    cut: int | None,
) -> Iterator[Segment]:
    """:meth:`Monitor.learn_runs` (see there)."""
    model = monitor.model
    X = np.ascontiguousarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    if learn is None:

        def learn(Xr: np.ndarray, Yr: np.ndarray, norms: np.ndarray) -> tuple[Any, Any]:
            return model.learn_many(Xr, Yr, block_norms=norms)

    speculate = monitor.detector is not None and monitor.restart_on_drift
    i, n = 0, X.shape[0]
    while i < n:
        to_boundary = monitor.rows_to_boundary()
        j = min(n, i + to_boundary) if monitor.restart_pending else n
        point = model.save_point() if speculate and j - i > to_boundary else None
        norms = np.empty((j - i, len(model.kernels)))
        losses, scores = learn(X[i:j], Y[i:j], norms)
        losses, scores = np.asarray(losses, dtype=np.float64), np.asarray(scores)
        first = monitor.n
        kept, rises = monitor._detect(Y[i:j], losses, scores, first, stop=point is not None)
        if kept < j - i:  # a restart falls inside the run: learn up to it again
            assert point is not None
            model.restore_point(point)
            learn(X[i : i + kept], Y[i : i + kept], np.empty((kept, norms.shape[1])))
            monitor.n_relearned += kept
        regs = model.regularization_values(norms[:kept])
        etas = etas_of(model.schedule, kept)  # no restart inside
        a = 0
        while a < kept:
            b = kept if cut is None else min(kept, a + cut - (first + a) % cut)
            rows, part = slice(i + a, i + b), slice(a, b)
            after = norms[b] if b < norms.shape[0] else model.block_norms
            monitor._account(
                X[rows], Y[rows], losses[part], regs[part], etas[part], norms[part], after
            )
            if b == kept:
                if rises and monitor.restart_on_drift:
                    monitor.restart_pending = True
                monitor._boundary()
            ends = [r for r in rises if first + a <= r < first + b]
            monitor._ahead, monitor._now = kept - b, after
            yield Segment(i + a, i + b, losses[part], scores[part], ends)
            a = b
        i += kept
    monitor._ahead = 0


def etas_of(schedule: Any, n: int) -> np.ndarray:
    """The global steps of the last ``n`` rounds (NaN for the adaptive schedules, whose steps
    differ per block: the window bound then reads +Inf, none being derived for them)."""
    if schedule.adaptive:
        return np.full(n, math.nan)
    return schedule.etas(schedule.t - n + 1, n)
