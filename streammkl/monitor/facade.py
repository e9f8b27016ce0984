"""``Monitor``: regret, bounds and kernel drift of one ``OnlineMKL``, for the daemon.

Per example, after ``loss = model.learn(x, y)`` with ``reg = model.regularization_value()`` read
just before it, call ``monitor.observe(x, y, loss, reg)`` on the learning thread (or use
:meth:`Monitor.learn_one`, which does the three steps). ``snapshot()`` returns plain floats keyed
as in :data:`streammkl.monitor.metrics.METRICS`, whose help texts say what each one measures.

What the monitor does to the learner: on a detected rise of the prequential loss it calls
``model.restart_schedule()`` (unless ``restart_on_drift=False``). It reads, on the calling thread:
``kernels``, ``feature_keys``, ``schedule``, ``config()`` every ``every`` examples, and
``kernel_weights`` every β stride. Everything else (comparator fits) happens on a worker thread
that only sees copies.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from streammkl.core import OnlineMKL
from streammkl.monitor import theory
from streammkl.monitor.drift import BetaMovement, LossDriftDetector
from streammkl.monitor.metrics import METRICS
from streammkl.monitor.objective import OnlineObjective
from streammkl.monitor.regret import WindowedRegret
from streammkl.monitor.shadows import ShadowLearners

__all__ = ["Monitor"]

NAN = math.nan


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
        (:mod:`streammkl.monitor.comparators`).
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
        β movement over the last ``beta_lag`` examples, sampled every ``beta_stride``.
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
    ) -> None:
        if not isinstance(model, OnlineMKL):
            raise TypeError(
                f"Monitor needs a streammkl.core.OnlineMKL (river learners: .core), got {model!r}"
            )
        if detector_input not in ("loss", "error"):
            raise ValueError(f"detector_input must be 'loss' or 'error', got {detector_input!r}")
        if detector_input == "error" and model.loss.task == "regression":
            raise ValueError("detector_input='error' needs a classification loss")
        self.model = model
        self.objective = OnlineObjective()
        self.norms = theory.FeatureNorms()
        self.regret = (
            None
            if window is None
            else WindowedRegret(model, window, every, comparator, background=background)
        )
        self.shadows = ShadowLearners(model, shadow_batch) if shadows else None
        self.detector = None if detector is None else LossDriftDetector(detector)
        self.restart_on_drift = bool(restart_on_drift)
        self.detector_input = detector_input
        self.beta = BetaMovement(beta_lag, beta_stride)
        self.n = 0
        self._theta_start_norm = 0.0  # ||theta|| and lambda Omega where the schedule (re)started
        self._reg_start = 0.0

    # --- hot path -----------------------------------------------------------------------------
    def observe(self, x: Any, y: Any, loss: float, reg: float, scores: Any = None) -> bool:
        """Account one example learned just before; True if it triggered a schedule restart.

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
        eta = model.schedule.eta(t) if t >= 1 else NAN
        if self.regret is not None:
            self.regret.observe(x, y, loss, reg, eta, phi_sq)
        if self.shadows is not None:
            self.shadows.observe(x, y, loss)
        restarted = False
        if self.detector is not None:
            value = loss if self.detector_input == "loss" else self._error(y, scores)
            if self.detector.update(value, index) and self.restart_on_drift:
                self._theta_start_norm = theory.theta_norm(model)
                self._reg_start = model.regularization_value()
                model.restart_schedule()
                restarted = True
        if self.beta.due(index):
            weights = model.kernel_weights.tolist()
            self.beta.update(index, dict(zip(model.names, weights, strict=True)))
        return restarted

    def _error(self, y: float, scores: Any) -> float:
        if scores is None:
            raise ValueError("detector_input='error' needs the prequential scores in observe()")
        s = np.atleast_1d(np.asarray(scores, dtype=np.float64))
        if s.shape[0] == 1:
            return float(y * s[0] <= 0.0)
        return float(int(np.argmax(s)) != int(y))

    def learn_one(self, x: Any, y: Any) -> float:
        """``reg = regularization_value(); loss = learn(x, y); observe(...)``; returns the loss."""
        reg = self.model.regularization_value()
        loss = self.model.learn(x, y)
        self.observe(x, y, loss, reg)
        return loss

    # --- reading ------------------------------------------------------------------------------
    def prop3_bound(self) -> float:
        """Prop. 3 for the rounds since the schedule's last (re)start (inf if none applies)."""
        return theory.prop3_bound(
            self.model,
            self.norms.max_sq,
            theta_start_norm=self._theta_start_norm,
            reg_start=self._reg_start,
        )

    def snapshot(self) -> dict[str, float]:
        """Every monitored value as a float (keys and meanings: ``metrics.METRICS``)."""
        if self.shadows is not None:
            self.shadows.flush()
        est = self.regret.latest if self.regret is not None else None
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
            "window_online_objective": est.online_objective if est else NAN,
            "window_comparator_objective": est.comparator_objective if est else NAN,
            "window_comparator_exact": float(est.exact) if est else NAN,
            "window_regret_bound": est.bound if est else NAN,
            "comparator_fits_skipped": float(self.regret.n_skipped) if self.regret else 0.0,
            "comparator_errors": float(self.regret.n_errors) if self.regret else 0.0,
            "shadow_regret": self.shadows.regret if self.shadows is not None else NAN,
            "regret_bound": self.prop3_bound(),
            "regret_bound_rounds": float(self.model.schedule.t),
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
        """Stop the comparator worker and flush the shadows."""
        if self.shadows is not None:
            self.shadows.flush()
        if self.regret is not None:
            self.regret.close(timeout)

    def to_state(self) -> dict[str, Any]:
        """JSON-able counters to checkpoint beside the model (windows/detector are rebuilt)."""
        det = self.detector
        return {
            "n": self.n,
            "objective": self.objective.to_state(),
            "feature_norm_max_sq": self.norms.max_sq,
            "drift_detections": det.n_restarts if det else 0,
            "drift_ignored": det.n_ignored if det else 0,
            "last_drift_example": det.last_restart if det else -1,
            "theta_start_norm": self._theta_start_norm,
            "reg_start": self._reg_start,
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
        self._theta_start_norm = float(state["theta_start_norm"])
        self._reg_start = float(state["reg_start"])
