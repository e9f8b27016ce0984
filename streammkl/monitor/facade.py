"""``Monitor``: regret, bounds and kernel drift of one ``OnlineMKL``, for the daemon.

The monitor observes; it never changes the learner. Per example, after ``loss =
model.learn(x, y)`` with ``reg = model.regularization_value()`` read just before it, call
``monitor.observe(x, y, loss, reg)``; for a compiled loop of rounds, :meth:`Monitor.observe_run`.
``snapshot()`` returns plain floats keyed as in :data:`streammkl.monitor.metrics.METRICS`, whose
help texts say what each one measures. :class:`streammkl.monitor.loop.MonitoredLoop` is the loop
that learns, runs the shadow learners beside the model and applies the restarts the monitor asks
for (the daemon's step uses it).

**Restarts.** On a detected rise of the prequential loss the monitor asks for a restart of the
learner's schedule (unless ``restart_on_drift=False``) **at the next multiple of the stride B**
(after example kB - 1, before example kB, counting from 0): ``observe`` returns True there (and
``observe_run`` ends its rows there), the caller calls ``model.restart_schedule()`` then
``monitor.restarted()``. The detector is fed every loss, in order, and a detection waits for the
boundary, so rounds between two multiples of B never see a restart: a caller may learn them in
one compiled loop and observe them afterwards, and the model does not depend on how the stream
is cut into chunks. The monitor reads, on the calling thread: ``kernels``, ``feature_keys``,
``schedule``, ``config()`` every ``every`` examples, and the block norms every β stride (a
multiple of B). Everything else (comparator fits) happens on a worker thread that only sees
copies.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from streammkl.core import OnlineMKL
from streammkl.monitor import theory
from streammkl.monitor.drift import BetaMovement, LossDriftDetector
from streammkl.monitor.metrics import METRICS
from streammkl.monitor.objective import OnlineObjective
from streammkl.monitor.regret import WindowedRegret
from streammkl.monitor.theory import etas_of

__all__ = ["Monitor", "Observed", "RunTerms"]

NAN = math.nan


class Observed(NamedTuple):
    """What :meth:`Monitor.observe_run` made of a run of rounds."""

    kept: int  # rows observed (all, or up to the boundary where a restart falls due)
    rises: list[int]  # example indices of the rises detected in them
    restart: bool  # restart the learner's schedule now (after the kept rows)


class RunTerms(NamedTuple):
    """What :meth:`Monitor.run_terms` computes once for a whole compiled run, for the
    :meth:`Monitor.observe_run` calls that observe it piece by piece (row k: the run's k-th)."""

    first: int  # the monitor's example count at the run's first row
    phi_sq: np.ndarray  # ||phi(x)||^2 of each row
    beta: dict[int, list[float]]  # β at each multiple of the β stride the run reaches


def _rows(X: Any, Y: Any, losses: Any, regs: Any) -> tuple[np.ndarray, ...]:
    X = np.ascontiguousarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    losses = np.asarray(losses, dtype=np.float64)
    regs = np.asarray(regs, dtype=np.float64)
    n = losses.shape[0]
    if not (X.ndim == 2 and X.shape[0] == Y.shape[0] == regs.shape[0] == n):
        raise ValueError("observe_run needs X (n, d) and n targets, losses and regs")
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
    detector
        ``"adwin"`` (default), ``"page-hinkley"``, a river drift detector, or None (no detection).
    restart_on_drift
        Ask for a restart of the learner's schedule on a detected rise of the loss (False: only
        count); the caller applies it (:class:`~streammkl.monitor.loop.MonitoredLoop` does).
    detector_input
        ``"loss"`` (the prequential loss) or ``"error"`` (prequential 0/1 error from ``scores``,
        classification only).
    beta_lag, beta_stride
        β movement over the last ``beta_lag`` examples, sampled each time the example count is
        a multiple of ``beta_stride`` (a multiple of ``stride``; default: ``beta_lag // 50``
        rounded up to one).
    stride
        B: schedule restarts are asked for (and β sampled) only when the example count is a
        multiple of B. 1 asks right after the example that triggered the detection.
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
        self.shadow_regret = NAN  # as the shadow learners beside the model report it
        self.detector = (
            None if detector is None else LossDriftDetector(detector, memory=detector_memory)
        )
        self.restart_on_drift = bool(restart_on_drift)
        self.detector_input = detector_input
        self.beta = BetaMovement(beta_lag, beta_stride)
        self.stride = stride
        self.n = 0
        self.restart_pending = False  # a detected rise waiting for the next multiple of B
        self.theta_start_norm = 0.0  # ||theta|| and lambda Omega where the schedule (re)started
        self.reg_start = 0.0
        self.rounds = model.schedule.t  # rounds observed since the schedule's last (re)start
        self._now: np.ndarray | None = None  # block norms as of example n (None: the model's)
        self._beta_now: list[float] | None = None  # β sampled at example n by a run's terms

    # --- hot path -----------------------------------------------------------------------------
    def observe(self, x: Any, y: Any, loss: float, reg: float, scores: Any = None) -> bool:
        """Account one example learned just before; True when the caller should restart the
        learner's schedule now, before the next round (a rise detected at this example or
        earlier, due at this multiple of the stride; see :meth:`restarted`).

        ``x``, ``y``: the learner's input vector and target (core conventions); ``loss``: the
        prequential loss ``learn`` returned; ``reg``: ``lambda Omega(theta_t)`` read before
        ``learn``; ``scores``: the prequential scores (only for ``detector_input="error"``).
        """
        model = self.model
        index = self.n
        self.n += 1
        self.rounds += 1
        self._now = self._beta_now = None
        x = np.asarray(x, dtype=np.float64)
        y = float(y)
        self.objective.update(loss, reg)
        phi_sq = self.norms.update(model, x)
        t = model.schedule.t
        eta = model.schedule.eta(t) if t >= 1 and not model.schedule.adaptive else NAN
        if self.regret is not None:
            self.regret.observe(x, y, loss, reg, eta, phi_sq)
        if self.detector is not None:
            value = loss if self.detector_input == "loss" else self._error(y, scores)
            if self.detector.update(value, index) and self.restart_on_drift:
                self.restart_pending = True
        if self.beta.due(self.n):
            self._sample_beta(self.n, model.block_norms)
        return self._restart_due()

    def observe_run(
        self,
        X: Any,
        Y: Any,
        losses: Any,
        regs: Any,
        scores: Any = None,
        norms: np.ndarray | None = None,
        ahead: int = 0,
        terms: RunTerms | None = None,
    ) -> Observed:
        """Account rounds learned just before in one compiled loop (e.g. ``learn_many(X, Y,
        block_norms)``, ``regs = model.regularization_values(block_norms)``), in order, with no
        schedule restart among them: the same state and values as :meth:`observe` row by row.

        ``norms`` (n + 1, kernels): the block norms before each round and after the last
        (needed where β falls due inside the rows; None: the model's block norms are the
        after-state and β must not fall due before the end). ``ahead``: rounds the model
        learned after these rows in the same loop (a caller observing a long run piece by
        piece; they fix the rows' step sizes).

        ``terms``: :meth:`run_terms` of the whole run these rows are part of (they start at
        its row ``self.n - terms.first``): the feature norms and β are read from it, and the
        windowed regret is not fed here -- the caller feeds it the run's observed rows in one
        :meth:`observe_window` call, before a restart it is asked for.

        A rise whose restart falls due inside the rows ends the observation there: the
        returned :class:`Observed` says how many rows were ``kept``; the model must be taken
        back to that row (the rounds after it were learned without the restart), then
        restarted (``restart``). With the detector off or ``restart_on_drift=False`` every row
        is kept.
        """
        X, Y, losses, regs = _rows(X, Y, losses, regs)
        n = losses.shape[0]
        if n == 0:
            return Observed(0, [], False)
        if norms is not None and norms.shape[0] != n + 1:
            raise ValueError(f"norms needs {n + 1} rows (before each round, after the last)")
        limit = min(n, self.rows_to_boundary()) if self.restart_pending else n
        fed, rises = self._detect(Y[:limit], losses[:limit], scores, self.n,
                                  stop=self.restart_on_drift)  # fmt: skip
        kept = fed if (rises and self.restart_on_drift) or self.restart_pending else n
        after = self.model.block_norms if norms is None else norms[kept]
        if terms is None:
            etas = etas_of(self.model.schedule, kept, ahead + n - kept)
            self._account(X[:kept], Y[:kept], losses[:kept], regs[:kept], etas,
                          None if norms is None else norms[:kept], after)  # fmt: skip
            self._beta_now = None
        else:
            if norms is None:
                raise ValueError("observe_run with run terms needs the rows' block norms")
            self._account_terms(losses[:kept], regs[:kept], terms)
        self._now = None if norms is None or (ahead == 0 and kept == n) else after
        if rises and self.restart_on_drift:
            self.restart_pending = True
        return Observed(kept, rises, self._restart_due())

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
        objective, feature norms, window, and β at the multiples of the β stride they reach
        (row k of ``norms``: the block norms before round k; ``after``: after the last round)."""
        model = self.model
        first, n = self.n, losses.shape[0]
        self.objective.update_many(losses, regs)
        phi_sq = self.norms.update_many(model, X)
        if self.regret is not None:
            self.regret.observe_many(X, Y, losses, regs, etas, phi_sq)
        self.n = first + n
        self.rounds += n
        step = self.beta.stride
        due = range(first + step - first % step, first + n + 1, step)
        if not due:
            return
        if due[0] < first + n and norms is None:
            raise ValueError("β falls due inside these rows: their block norms are needed")
        rows = [after if k == first + n else norms[k - first] for k in due]  # type: ignore[index]
        names, update = model.names, self.beta.update
        for k, weights in zip(due, model.kernel_weights_of(np.array(rows)).tolist(), strict=True):
            update(k, dict(zip(names, weights, strict=True)))  # as _sample_beta, β of all at once

    def run_terms(self, X: Any, norms: np.ndarray) -> RunTerms:
        """The per-row terms of a compiled run about to be observed (from the monitor's
        current example on), computed once for the whole run: ``||phi(x)||^2`` of each row of
        ``X`` and β at each multiple of the β stride in it (``norms`` (n + 1, kernels): the
        block norms before each round and after the last). Elementwise, so the same numbers
        as :meth:`observe_run` computes piece by piece."""
        X = np.ascontiguousarray(X, dtype=np.float64)
        model, first, n = self.model, self.n, X.shape[0]
        step = self.beta.stride
        due = range(first + step - first % step, first + n + 1, step)
        beta: dict[int, list[float]] = {}
        if due:
            weights = model.kernel_weights_of(norms[[k - first for k in due]]).tolist()
            beta = dict(zip(due, weights, strict=True))
        return RunTerms(first, self.norms.norm_sq_many(model, X), beta)

    def observe_window(
        self, X: Any, Y: Any, losses: Any, regs: Any, terms: RunTerms, ahead: int = 0
    ) -> None:
        """Feed the windowed regret the rows of a run observed with ``terms`` (its first rows,
        in one call: the same chunks and fit requests as row by row); ``ahead``: rounds the
        model learned after these rows in the same loop (they fix the rows' step sizes)."""
        if self.regret is None:
            return
        X, Y, losses, regs = _rows(X, Y, losses, regs)
        n = losses.shape[0]
        if n:
            etas = etas_of(self.model.schedule, n, ahead)
            self.regret.observe_many(X, Y, losses, regs, etas, terms.phi_sq[:n])

    def _account_terms(self, losses: np.ndarray, regs: np.ndarray, terms: RunTerms) -> None:
        """:meth:`_account` of rows of a run whose per-row terms are computed (:meth:`run_terms`;
        the windowed regret fed apart, :meth:`observe_window`)."""
        first, n = self.n, losses.shape[0]
        self.objective.update_many(losses, regs)
        if n:
            start = first - terms.first
            top = float(np.fmax.reduce(terms.phi_sq[start : start + n]))  # as update_many
            if top > self.norms.max_sq:
                self.norms.max_sq = top
        self.n = first + n
        self.rounds += n
        step = self.beta.stride
        names, update, beta = self.model.names, self.beta.update, terms.beta
        for k in range(first + step - first % step, first + n + 1, step):
            update(k, dict(zip(names, beta[k], strict=True)))
        self._beta_now = beta.get(first + n)  # (kernel_weights() then reads it)

    def rows_to_boundary(self) -> int:
        """How many more examples until the next multiple of the stride (1..B): where a
        pending restart falls due."""
        return self.stride - self.n % self.stride

    def kernel_weights(self) -> np.ndarray:
        """β as of the last observed example (the model itself may be ahead, inside a run
        observed piece by piece); the run's β sample when one fell there (the same numbers:
        each row of ``kernel_weights_of`` is summed alone)."""
        if self._beta_now is not None:
            return np.array(self._beta_now)
        return self.model.kernel_weights_of(
            self.model.block_norms if self._now is None else self._now
        )

    def note_shadow_regret(self, value: float) -> None:
        """The regret against the best single kernel, as the shadow learners run beside the
        learner measure it (:class:`~streammkl.monitor.shadows.ShadowLearners`)."""
        self.shadow_regret = float(value)

    def _sample_beta(self, index: int, block_norms: np.ndarray) -> None:
        weights = self.model.kernel_weights_of(block_norms).tolist()
        self.beta.update(index, dict(zip(self.model.names, weights, strict=True)))

    def _restart_due(self) -> bool:
        """At a multiple of the stride with a rise pending: the restart is due now."""
        if self.n % self.stride or not self.restart_pending:
            return False
        self.restart_pending = False
        return True

    def restarted(self) -> None:
        """The caller restarted the learner's schedule as :meth:`observe` /
        :meth:`observe_run` asked (the model as of the last observed example): its state is the
        start of the next Prop. 3 segment."""
        model = self.model
        self.theta_start_norm = theory.theta_norm(model)
        self.reg_start = model.regularization_value()
        self._now = self._beta_now = None
        self.rounds = 0

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

    # --- reading ------------------------------------------------------------------------------
    def prop3_bound(self) -> float:
        """Prop. 3 for the rounds since the schedule's last (re)start (inf if none applies)."""
        return theory.prop3_bound(
            self.model,
            self.norms.max_sq,
            theta_start_norm=self.theta_start_norm,
            reg_start=self.reg_start,
            rounds=self.rounds,
        )

    def snapshot(self) -> dict[str, float]:
        """Every monitored value as a float (keys and meanings: ``metrics.METRICS``)."""
        regret = self.regret
        est = regret.latest if regret is not None else None
        # always 0 or 1, so that an alert can fire on it: before the first estimate too (a
        # backlog that never let a fit finish is exactly when it must say 1); 0 without one
        stale = 0.0 if regret is None else float(regret.check(self.n))
        det = self.detector
        out = {
            "examples": float(self.n),
            "online_objective": self.objective.total,
            "online_loss": self.objective.loss,
            "nonfinite_terms": float(self.objective.n_nonfinite),
            "window_regret": est.regret if est else NAN,
            "window_regret_per_example": est.regret_per_example if est else NAN,
            "window_size": float(est.window) if est else 0.0,
            "window_end": float(est.end) if est else 0.0,
            "window_regret_lag": regret.lag(self.n) if regret is not None else NAN,
            "window_regret_stale": stale,
            "window_online_objective": est.online_objective if est else NAN,
            "window_comparator_objective": est.comparator_objective if est else NAN,
            "window_comparator_exact": float(est.exact) if est else NAN,
            "window_regret_bound": est.bound if est else NAN,
            "comparator_fits_skipped": float(self.regret.n_skipped) if self.regret else 0.0,
            "comparator_errors": float(self.regret.n_errors) if self.regret else 0.0,
            "shadow_regret": self.shadow_regret,
            "regret_bound": self.prop3_bound(),
            "regret_bound_rounds": float(self.rounds),
            "feature_norm_max": math.sqrt(self.norms.max_sq),
            "drift_detections": float(det.n_restarts) if det else 0.0,
            "drift_ignored": float(det.n_ignored) if det else 0.0,
            "last_drift_example": float(det.last_restart) if det else -1.0,
            "beta_movement": self.beta.value,
            "beta_movement_span": float(self.beta.span),
        }
        assert out.keys() == METRICS.keys()
        return out

    # --- control ------------------------------------------------------------------------------
    def wait(self, timeout: float | None = None) -> bool:
        """Block until the comparator worker is idle (False on timeout)."""
        return True if self.regret is None else self.regret.wait(timeout)

    def close(self, timeout: float | None = None) -> None:
        """Stop the comparator worker."""
        if self.regret is not None:
            self.regret.close(timeout)

    def to_state(self) -> dict[str, Any]:
        """JSON-able counters, the pending restart and the β samples, to checkpoint beside the
        model (windows and the detector are rebuilt)."""
        det = self.detector
        return {
            "n": self.n,
            "objective": self.objective.to_state(),
            "feature_norm_max_sq": self.norms.max_sq,
            "drift_detections": det.n_restarts if det else 0,
            "drift_ignored": det.n_ignored if det else 0,
            "last_drift_example": det.last_restart if det else -1,
            "theta_start_norm": self.theta_start_norm,
            "reg_start": self.reg_start,
            "restart_pending": self.restart_pending,
            "rounds": self.rounds,
            "beta_movement": self.beta.to_state(),
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Continue the counters of :meth:`to_state` (call on a fresh monitor)."""
        self.n = int(state["n"])
        self.objective = OnlineObjective.from_state(state["objective"])
        self.norms.max_sq = float(state["feature_norm_max_sq"])
        if self.detector is not None:
            self.detector.n_restarts = int(state["drift_detections"])
            self.detector.n_ignored = int(state["drift_ignored"])
            self.detector.last_restart = int(state["last_drift_example"])
        self.theta_start_norm = float(state["theta_start_norm"])
        self.reg_start = float(state["reg_start"])
        self.restart_pending = bool(state.get("restart_pending", False))
        self.rounds = int(state.get("rounds", self.model.schedule.t))
        if "beta_movement" in state:
            self.beta.restore(state["beta_movement"])
