"""The learning loop under a monitor: :class:`MonitoredLoop` learns the model's rounds, runs the
shadow learners beside it, lets the :class:`~streammkl.monitor.Monitor` observe every round and
applies the schedule restarts the monitor asks for. The monitor itself never changes the model.

Compiled runs (:meth:`MonitoredLoop.runs`) go as far as they can in one compiled loop, the model
saved before it (``save_point``). The monitor then observes the run's rounds in order; a rise
whose restart falls inside the run ends the observation at that multiple of the stride, the loop
takes the model back to the saved point, learns the rounds up to the restart again (the same
rounds: the same numbers), restarts the schedule and goes on from there. Rises are rare, so runs
are long and the GIL is taken back once per run.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from typing import Any, NamedTuple

import numpy as np

from streammkl.core import OnlineMKL
from streammkl.monitor.facade import Monitor
from streammkl.monitor.shadows import ShadowLearners

__all__ = ["MonitoredLoop", "Segment"]

#: ``learn(X, Y, block_norms) -> (losses, scores)``: one compiled loop of rounds that writes the
#: block norms before each round into ``block_norms`` (``OnlineMKL.learn_many``'s contract).
Learn = Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[Any, Any]]


class Segment(NamedTuple):
    """Rows ``[start, stop)`` of a :meth:`MonitoredLoop.runs` call, learned and observed."""

    start: int
    stop: int
    losses: np.ndarray  # prequential, one per row
    scores: np.ndarray  # prequential, (rows, outputs)
    rises: list[int]  # example indices of the rises detected in these rows
    run_start: int  # the first row of the compiled run these rows are part of
    run_scores: np.ndarray  # that run's prequential scores, from run_start (judged once)


class MonitoredLoop:
    """Learn ``model``'s rounds with ``monitor`` observing them (and single-kernel shadow
    learners beside the model, with ``shadows``).

    Parameters
    ----------
    model
        The learner.
    monitor
        Its :class:`~streammkl.monitor.Monitor` (built on the same model).
    shadows
        Run one single-kernel shadow learner per kernel beside the model (costs one round per
        kernel per example); the monitor reports the regret against the best of them.
    shadow_batch
        Rows buffered before the shadows learn them.
    """

    def __init__(
        self, model: OnlineMKL, monitor: Monitor, shadows: bool = False, shadow_batch: int = 32
    ) -> None:
        if monitor.model is not model:
            raise ValueError("the monitor watches another model")
        self.model = model
        self.monitor = monitor
        self.shadows = ShadowLearners(model, shadow_batch) if shadows else None
        self.n_relearned = 0  # rounds learned twice (a restart fell inside a compiled run)

    # -- one round ----------------------------------------------------------------------------

    def learn_one(self, x: Any, y: Any) -> float:
        """``reg = regularization_value(); loss = learn(x, y)``, then :meth:`observe`; returns
        the loss."""
        reg = self.model.regularization_value()
        loss = self.model.learn(x, y)
        self.observe(x, y, loss, reg)
        return loss

    def observe(self, x: Any, y: Any, loss: float, reg: float, scores: Any = None) -> bool:
        """A round the model has just learned (here or by its owner, e.g. a river learner's
        ``learn_predict_one``): the shadows learn it, the monitor observes it, and the schedule
        restarts if the monitor asks. Whether it restarted."""
        if self.shadows is not None:
            fed = self.shadows.n_fed
            self.shadows.observe(x, y, loss)  # (it keeps its own float copy)
            if self.shadows.n_fed != fed:
                self.monitor.note_shadow_regret(self.shadows.regret)
        if self.monitor.observe(x, y, loss, reg, scores):
            self._restart()
            return True
        return False

    def _restart(self) -> None:
        self.model.restart_schedule()
        self.monitor.restarted()

    # -- compiled runs ------------------------------------------------------------------------

    def learn_many(self, X: Any, Y: Any) -> np.ndarray:
        """:meth:`learn_one` of each row, in compiled runs (:meth:`runs`: the same model and
        monitor as row by row); returns the prequential losses.

        Needs regularizers of the block norms alone (``model.norm_only``); otherwise it goes
        row by row.
        """
        X = np.ascontiguousarray(X, dtype=np.float64)
        if not self.model.norm_only:
            return np.array([self.learn_one(x, y) for x, y in zip(X, Y, strict=True)])
        out = np.empty(X.shape[0])
        for segment in self.runs(X, Y):
            out[segment.start : segment.stop] = segment.losses
        return out

    def runs(
        self, X: Any, Y: Any, learn: Learn | None = None, cut: int | None = None
    ) -> Iterator[Segment]:
        """Learn the rows of X in order, in compiled runs that cross the multiples of the
        stride, and observe them: the model and monitor of :meth:`learn_one` row by row.

        ``learn`` (by default ``model.learn_many``) is one compiled loop. The observed rows are
        yielded as :class:`Segment` s, cut at the multiples of ``cut`` (counted in examples;
        None: one per run), each already observed when yielded (``monitor.kernel_weights()``
        is β as of the segment's end).
        """
        model, monitor = self.model, self.monitor
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
            i = yield from self._run(X, Y, i, j, learn, cut, point)

    def _run(
        self,
        X: np.ndarray,
        Y: np.ndarray,
        i: int,
        j: int,
        learn: Learn,
        cut: int | None,
        point: Any,
    ) -> Generator[Segment, None, int]:
        """One compiled run of rows [i, j), observed segment by segment; returns where the
        next run starts (j, or the boundary of a restart inside the run)."""
        model, monitor = self.model, self.monitor
        rows = j - i
        norms = np.empty((rows + 1, len(model.kernels)))
        losses, scores = learn(X[i:j], Y[i:j], norms[:rows])
        losses, scores = np.asarray(losses, dtype=np.float64), np.asarray(scores)
        norms[rows] = model.block_norms
        regs = model.regularization_values(norms[:rows])
        # the per-row terms of the whole run at once; the window fed once, with the rows kept
        terms = monitor.run_terms(X[i:j], norms)
        first, a = monitor.n, 0
        while a < rows:
            b = rows if cut is None else min(rows, a + cut - (first + a) % cut)
            part = slice(a, b)
            seen = monitor.observe_run(X[i + a : i + b], Y[i + a : i + b], losses[part],
                                       regs[part], scores[part], norms[a : b + 1],
                                       ahead=rows - b, terms=terms)  # fmt: skip
            stop = a + seen.kept
            if self.shadows is not None and seen.kept:
                self.shadows.observe_many(X[i + a : i + stop], Y[i + a : i + stop], losses[a:stop])
                self.monitor.note_shadow_regret(self.shadows.regret)
            if seen.restart or stop == rows:
                monitor.observe_window(X[i : i + stop], Y[i : i + stop], losses[:stop],
                                       regs[:stop], terms, ahead=rows - stop)  # fmt: skip
            if seen.restart:
                if stop < rows:  # the rounds after the restart were learned without it
                    assert point is not None, "a restart inside a run that saved no point"
                    model.restore_point(point)
                    learn(X[i : i + stop], Y[i : i + stop], np.empty((stop, norms.shape[1])))
                    self.n_relearned += stop
                self._restart()
            yield Segment(i + a, i + stop, losses[a:stop], scores[a:stop], seen.rises, i, scores)
            if seen.restart:
                return i + stop
            a = b
        return j

    # -- reading ------------------------------------------------------------------------------

    def flush(self) -> None:
        """Feed the shadows their buffered rows (their regret is then current)."""
        if self.shadows is not None:
            self.shadows.flush()
            self.monitor.note_shadow_regret(self.shadows.regret)

    def snapshot(self) -> dict[str, float]:
        """The monitor's snapshot, the shadows flushed first."""
        self.flush()
        return self.monitor.snapshot()

    def close(self, timeout: float | None = None) -> None:
        """Flush the shadows and stop the monitor's comparator worker."""
        self.flush()
        self.monitor.close(timeout)
