"""``Monitor``: regret, bounds and kernel drift of one ``OnlineMKL``, for the daemon.

Per example, after ``loss = model.learn(x, y)`` with ``reg = model.regularization_value()`` read
just before it, call ``monitor.observe(x, y, loss, reg)`` on the learning thread (or use
:meth:`Monitor.learn_one`, which does the three steps). For compiled loops,
:meth:`Monitor.observe_many` takes a chunk of rounds up to the next multiple of the stride, and
:meth:`Monitor.learn_runs` (:meth:`Monitor.learn_many`) learns and observes whole runs.
``snapshot()`` returns plain floats keyed as in
:data:`streammkl.monitor.metrics.METRICS`, whose help texts say what each one measures.

What the monitor does to the learner: on a detected rise of the prequential loss it calls
``model.restart_schedule()`` (unless ``restart_on_drift=False``), **at the next multiple of the
stride B** (after example kB - 1, before example kB, counting from 0): the detector is fed every
loss, in order, and a detection waits for the boundary. So rounds between two multiples of B
never see a restart, and a caller may learn them in one compiled loop and observe them
afterwards: the model does not depend on how the stream is cut into chunks. It reads, on the
calling thread: ``kernels``, ``feature_keys``, ``schedule``, ``config()`` every ``every``
examples, and the block norms every β stride (a multiple of B). Everything else (comparator
fits) happens on a worker thread that only sees copies.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from streammkl.core import OnlineMKL
from streammkl.monitor import readout, runs, theory
from streammkl.monitor.drift import BetaMovement, LossDriftDetector
from streammkl.monitor.objective import OnlineObjective
from streammkl.monitor.regret import WindowedRegret
from streammkl.monitor.runs import Segment, etas_of
from streammkl.monitor.shadows import ShadowLearners

__all__ = ["Monitor", "Segment"]

NAN = math.nan


def _rows(X: Any, Y: Any, losses: Any, regs: Any) -> tuple[np.ndarray, ...]:
    X = np.ascontiguousarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    losses = np.asarray(losses, dtype=np.float64)
    regs = np.asarray(regs, dtype=np.float64)
    n = losses.shape[0]
    if not (X.ndim == 2 and X.shape[0] == Y.shape[0] == regs.shape[0] == n):
        raise ValueError("observe_many needs X (n, d) and n targets, losses and regs")
    return X, Y, losses, regs


class Monitor:
    """Online objective, windowed regret, shadow regret, Prop. 3 bound, drift and β movement.

    Parameters
    ----------
    model
        The learner (``MKLClassifier(...).core`` for the river learners, once it exists).
    window, every
        Windowed regret on the last ``window`` examples, re-estimated every ``every`` examples
        (None: disabled).
    comparator
        ``"epochs"`` (default), ``"exact"``, ``"auto"`` or a comparator object
        (:mod:`streammkl.monitor.hindsight`).
    background
        Fit comparators on a worker thread (default) or inline (blocking; tests/offline).
    shadows
        Run one single-kernel shadow learner per kernel (costs one round per kernel per example).
    shadow_batch
        Rows buffered before the shadows learn them.
    detector
        ``"adwin"`` (default), ``"page-hinkley"``, a river drift detector, or None (no detection).
    restart_on_drift
        Restart the learner's schedule on a detected rise of the loss (False: only count).
    detector_input
        ``"loss"`` (the prequential loss) or ``"error"`` (prequential 0/1 error from ``scores``,
        classification only).
    beta_lag, beta_stride
        β movement over the last ``beta_lag`` examples, sampled each time the example count is
        a multiple of ``beta_stride`` (a multiple of ``stride``; default: ``beta_lag // 50``
        rounded up to one).
    stride
        B: schedule restarts (and β samples) happen only when the example count is a multiple
        of B. 1 restarts right after the example that triggered the detection.
    detector_memory
        The detector keeps its inputs since its last detection, at most this many (see
        :class:`~streammkl.monitor.drift.LossDriftDetector`; None: no log).
    refresh_examples, refresh_seconds
        The windowed regret's refresh schedule (see
        :class:`~streammkl.monitor.regret.WindowedRegret`): past it the estimate is stale
        (``window_regret_stale``) and the comparator is hurried.
    """

    def __init__(
        self,
        model: OnlineMKL,
        *,
        window: int | None = 2000,
        every: int = 500,
        comparator: Any = "epochs",
        background: bool = True,
        shadows: bool = False,
        shadow_batch: int = 32,
        detector: Any = "adwin",
        restart_on_drift: bool = True,
        detector_input: str = "loss",
        beta_lag: int = 1000,
        beta_stride: int | None = None,
        stride: int = 1,
        detector_memory: int | None = None,
        refresh_examples: int | None = None,
        refresh_seconds: float | None = None,
    ) -> None:
        if not isinstance(model, OnlineMKL):
            raise TypeError(
                f"Monitor needs a streammkl.core.OnlineMKL (river learners: .core), got {model!r}"
            )
        if detector_input not in ("loss", "error"):
            raise ValueError(f"detector_input must be 'loss' or 'error', got {detector_input!r}")
        if detector_input == "error" and model.loss.task == "regression":
            raise ValueError("detector_input='error' needs a classification loss")
        if int(stride) != stride or stride < 1:
            raise ValueError(f"stride must be a positive integer, got {stride!r}")
        stride = int(stride)
        if stride > beta_lag:
            raise ValueError(f"beta_lag ({beta_lag}) must be at least the stride ({stride})")
        if beta_stride is None:
            beta_stride = -(-max(1, int(beta_lag) // 50) // stride) * stride
        elif int(beta_stride) % stride:
            raise ValueError(f"beta_stride ({beta_stride}) must be a multiple of stride ({stride})")
        self.model = model
        self.objective = OnlineObjective()
        self.norms = theory.FeatureNorms()
        self.regret = (
            None
            if window is None
            else WindowedRegret(
                model,
                window,
                every,
                comparator,
                background=background,
                refresh_examples=refresh_examples,
                refresh_seconds=refresh_seconds,
            )
        )
        self.shadows = ShadowLearners(model, shadow_batch) if shadows else None
        self.detector = (
            None if detector is None else LossDriftDetector(detector, memory=detector_memory)
        )
        self.restart_on_drift = bool(restart_on_drift)
        self.detector_input = detector_input
        self.beta = BetaMovement(beta_lag, beta_stride)
        self.stride = stride
        self.n = 0
        self.restart_pending = False  # a detected rise waiting for the next multiple of B
        self._theta_start_norm = 0.0  # ||theta|| and lambda Omega where the schedule (re)started
        self._reg_start = 0.0
        self._ahead = 0  # rounds the model learned beyond example n (inside learn_runs) ...
        self._now = np.zeros(0)  # ... and the block norms as of example n then
        self.n_relearned = 0  # rounds learn_runs learned twice (a restart inside a run)

    # --- hot path -----------------------------------------------------------------------------
    def observe(self, x: Any, y: Any, loss: float, reg: float, scores: Any = None) -> bool:
        """Account one example learned just before; True if the schedule restarted now (a
        rise detected at this example or earlier, applied at this multiple of the stride).

        ``x``, ``y``: the learner's input vector and target (core conventions); ``loss``: the
        prequential loss ``learn`` returned; ``reg``: ``lambda Omega(theta_t)`` read before
        ``learn``; ``scores``: the prequential scores (only for ``detector_input="error"``).
        """
        model = self.model
        index = self.n
        self.n += 1
        x = np.asarray(x, dtype=np.float64)
        y = float(y)
        self.objective.update(loss, reg)
        phi_sq = self.norms.update(model, x)
        t = model.schedule.t
        eta = model.schedule.eta(t) if t >= 1 and not model.schedule.adaptive else NAN
        if self.regret is not None:
            self.regret.observe(x, y, loss, reg, eta, phi_sq)
        if self.shadows is not None:
            self.shadows.observe(x, y, loss)
        if self.detector is not None:
            value = loss if self.detector_input == "loss" else self._error(y, scores)
            if self.detector.update(value, index) and self.restart_on_drift:
                self.restart_pending = True
        restarted = self._boundary()
        if self.beta.due(self.n):
            self._sample_beta(self.n, model.block_norms)
        return restarted

    def observe_many(
        self,
        X: Any,
        Y: Any,
        losses: Any,
        regs: Any,
        scores: Any = None,
    ) -> list[int]:
        """:meth:`observe` of each row, in order, for a chunk of rounds learned just before
        (e.g. one compiled loop, ``learn_many(X, Y, block_norms)`` with ``regs =
        model.regularization_values(block_norms)``): the same state and values.

        The chunk must not cross a multiple of the stride except at its end (a restart
        detected inside it waits for that boundary; see :meth:`rows_to_boundary`;
        :meth:`learn_runs` learns and observes longer runs). Returns the example indices of the
        rises detected in the chunk (the detector's ``n_restarts`` counts them).
        """
        X, Y, losses, regs = _rows(X, Y, losses, regs)
        n = losses.shape[0]
        if n == 0:
            return []
        if n > self.rows_to_boundary():
            raise ValueError(
                f"a chunk of {n} examples from example {self.n} crosses a multiple of the "
                f"stride ({self.stride}) before its end; cut it there"
            )
        model = self.model
        rises = self._detect(Y, losses, scores, self.n, stop=False)[1]
        etas = etas_of(model.schedule, n)  # no restart inside a chunk
        self._account(X, Y, losses, regs, etas, None, model.block_norms)
        if rises and self.restart_on_drift:
            self.restart_pending = True
        self._boundary()
        return rises

    def learn_runs(
        self,
        X: Any,
        Y: Any,
        learn: Callable[[np.ndarray, np.ndarray, np.ndarray], tuple[Any, Any]] | None = None,
        cut: int | None = None,
    ) -> Iterator[Segment]:
        """Learn the rows of X in order, in compiled runs that cross the multiples of the
        stride, and observe them: the model and monitor of :meth:`learn_one` row by row.

        A run goes as far as it can in one compiled loop (``learn(X, Y, block_norms) ->
        (losses, scores)``, by default ``model.learn_many``), the model saved before it. The
        detector then reads its losses in order; a rise whose restart falls inside the run
        (at the next multiple of the stride) takes the model back to the saved point and the
        rounds before the restart are learned again (the same rounds: the same numbers), the
        rest in the next run. Rises are rare, so the runs are long and the GIL is taken back
        once per run. The observed rows are yielded as :class:`Segment` s, cut at the
        multiples of ``cut`` (counted in examples; None: one per run), each already observed
        when yielded; :meth:`kernel_weights` is β as of the segment's end.
        """
        return runs.learn_runs(self, X, Y, learn, cut)

    def _detect(
        self, Y: np.ndarray, losses: np.ndarray, scores: Any, first: int, stop: bool
    ) -> tuple[int, list[int]]:
        """Feed the detector the rows' values from example ``first``; with ``stop``, up to the
        boundary of the first rise. (Rows fed, rises.)"""
        if self.detector is None:
            return losses.shape[0], []
        values = losses if self.detector_input == "loss" else self._errors(Y, scores)
        return self.detector.update_until(values, first, self.stride if stop else None)

    def _account(
        self,
        X: np.ndarray,
        Y: np.ndarray,
        losses: np.ndarray,
        regs: np.ndarray,
        etas: np.ndarray,
        norms: np.ndarray | None,
        after: np.ndarray,
    ) -> None:
        """All but the detector and restarts for rows learned with no restart among them:
        objective, feature norms, window, shadows, and β at the multiples of the β stride they
        reach (row k of ``norms``: the block norms before round k; ``after``: after the last
        round)."""
        model = self.model
        first, n = self.n, losses.shape[0]
        self.objective.update_many(losses, regs)
        phi_sq = self.norms.update_many(model, X)
        if self.regret is not None:
            self.regret.observe_many(X, Y, losses, regs, etas, phi_sq)
        if self.shadows is not None:
            self.shadows.observe_many(X, Y, losses)
        self.n = first + n
        step = self.beta.stride
        for k in range(first + step - first % step, first + n + 1, step):
            if k < first + n and norms is None:
                raise ValueError("β falls due inside these rows: their block norms are needed")
            self._sample_beta(k, after if k == first + n else norms[k - first])  # type: ignore[index]

    def rows_to_boundary(self) -> int:
        """How many more examples the next chunk may hold: up to the next multiple of the
        stride (1..B)."""
        return self.stride - self.n % self.stride

    def kernel_weights(self) -> np.ndarray:
        """β as of the last observed example (during :meth:`learn_runs`, the model itself may
        be ahead)."""
        return self.model.kernel_weights_of(self._now if self._ahead else self.model.block_norms)

    def _sample_beta(self, index: int, block_norms: np.ndarray) -> None:
        weights = self.model.kernel_weights_of(block_norms).tolist()
        self.beta.update(index, dict(zip(self.model.names, weights, strict=True)))

    def _boundary(self) -> bool:
        """At a multiple of the stride: apply a pending restart. Whether it restarted."""
        if self.n % self.stride or not self.restart_pending:
            return False
        model = self.model
        self._theta_start_norm = theory.theta_norm(model)
        self._reg_start = model.regularization_value()
        model.restart_schedule()
        self.restart_pending = False
        return True

    def _error(self, y: float, scores: Any) -> float:
        if scores is None:
            raise ValueError("detector_input='error' needs the prequential scores in observe()")
        s = np.atleast_1d(np.asarray(scores, dtype=np.float64))
        if s.shape[0] == 1:
            return float(y * s[0] <= 0.0)
        return float(int(np.argmax(s)) != int(y))

    def _errors(self, Y: np.ndarray, scores: Any) -> np.ndarray:
        """:meth:`_error` of each row."""
        if scores is None:
            raise ValueError("detector_input='error' needs the prequential scores")
        S = np.asarray(scores, dtype=np.float64).reshape(Y.shape[0], -1)
        if S.shape[1] == 1:
            return (Y * S[:, 0] <= 0.0).astype(np.float64)
        return (np.argmax(S, axis=1) != Y.astype(np.int64)).astype(np.float64)

    def learn_one(self, x: Any, y: Any) -> float:
        """``reg = regularization_value(); loss = learn(x, y); observe(...)``; returns the loss."""
        reg = self.model.regularization_value()
        loss = self.model.learn(x, y)
        self.observe(x, y, loss, reg)
        return loss

    def learn_many(self, X: Any, Y: Any) -> np.ndarray:
        """:meth:`learn_one` of each row, in compiled runs (:meth:`learn_runs`: the same model
        and monitor as row by row); returns the prequential losses.

        Needs regularizers of the block norms alone (``model.norm_only``); otherwise it goes
        row by row.
        """
        model = self.model
        X = np.ascontiguousarray(X, dtype=np.float64)
        if not model.norm_only:
            return np.array([self.learn_one(x, y) for x, y in zip(X, Y, strict=True)])
        out = np.empty(X.shape[0])
        for segment in self.learn_runs(X, Y):
            out[segment.start : segment.stop] = segment.losses
        return out

    # --- reading ------------------------------------------------------------------------------
    def prop3_bound(self) -> float:
        """Prop. 3 for the rounds since the schedule's last (re)start (inf if none applies)."""
        return theory.prop3_bound(
            self.model,
            self.norms.max_sq,
            theta_start_norm=self._theta_start_norm,
            reg_start=self._reg_start,
            rounds=self.model.schedule.t - self._ahead,
        )

    def snapshot(self) -> dict[str, float]:
        """Every monitored value as a float (keys and meanings: ``metrics.METRICS``)."""
        return readout.snapshot(self)

    # --- control ------------------------------------------------------------------------------
    def wait(self, timeout: float | None = None) -> bool:
        """Block until the comparator worker is idle (False on timeout)."""
        return True if self.regret is None else self.regret.wait(timeout)

    def close(self, timeout: float | None = None) -> None:
        """Stop the comparator worker and flush the shadows."""
        if self.shadows is not None:
            self.shadows.flush()
        if self.regret is not None:
            self.regret.close(timeout)

    def to_state(self) -> dict[str, Any]:
        """JSON-able counters, the pending restart and the β samples, to checkpoint beside the
        model (windows, shadows and the detector are rebuilt)."""
        return readout.to_state(self)

    def restore(self, state: dict[str, Any]) -> None:
        """Continue the counters of :meth:`to_state` (call on a fresh monitor)."""
        readout.restore(self, state)
