"""What the monitor reports and keeps: :func:`snapshot` (every value as a float, keyed as in
:data:`~streammkl.monitor.metrics.METRICS`) and the counters it checkpoints beside the model
(:func:`to_state`, :func:`restore`); the :class:`~streammkl.monitor.Monitor` methods of the
same names call these."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from streammkl.monitor.metrics import METRICS
from streammkl.monitor.objective import OnlineObjective

if TYPE_CHECKING:
    from streammkl.monitor.facade import Monitor

NAN = math.nan


def snapshot(monitor: Monitor) -> dict[str, float]:
    """Every monitored value as a float (keys and meanings: ``metrics.METRICS``)."""
    regret = monitor.regret
    est = regret.latest if regret is not None else None
    stale = NAN if regret is None or est is None else float(regret.check(monitor.n))
    det = monitor.detector
    out = {
        "examples": float(monitor.n),
        "online_objective": monitor.objective.total,
        "online_loss": monitor.objective.loss,
        "nonfinite_terms": float(monitor.objective.n_nonfinite),
        "window_regret": est.regret if est else NAN,
        "window_regret_per_example": est.regret_per_example if est else NAN,
        "window_size": float(est.window) if est else 0.0,
        "window_end": float(est.end) if est else 0.0,
        "window_regret_lag": regret.lag(monitor.n) if regret is not None else NAN,
        "window_regret_stale": stale,
        "window_online_objective": est.online_objective if est else NAN,
        "window_comparator_objective": est.comparator_objective if est else NAN,
        "window_comparator_exact": float(est.exact) if est else NAN,
        "window_regret_bound": est.bound if est else NAN,
        "comparator_fits_skipped": float(monitor.regret.n_skipped) if monitor.regret else 0.0,
        "comparator_errors": float(monitor.regret.n_errors) if monitor.regret else 0.0,
        "shadow_regret": monitor.shadow_regret,
        "regret_bound": monitor.prop3_bound(),
        "regret_bound_rounds": float(monitor.rounds),
        "feature_norm_max": math.sqrt(monitor.norms.max_sq),
        "drift_detections": float(det.n_restarts) if det else 0.0,
        "drift_ignored": float(det.n_ignored) if det else 0.0,
        "last_drift_example": float(det.last_restart) if det else -1.0,
        "beta_movement": monitor.beta.value,
        "beta_movement_span": float(monitor.beta.span),
    }
    assert out.keys() == METRICS.keys()
    return out


def to_state(monitor: Monitor) -> dict[str, Any]:
    """JSON-able counters, the pending restart and the β samples, to checkpoint beside the
    model (windows and the detector are rebuilt)."""
    det = monitor.detector
    return {
        "n": monitor.n,
        "objective": monitor.objective.to_state(),
        "feature_norm_max_sq": monitor.norms.max_sq,
        "drift_detections": det.n_restarts if det else 0,
        "drift_ignored": det.n_ignored if det else 0,
        "last_drift_example": det.last_restart if det else -1,
        "theta_start_norm": monitor.theta_start_norm,
        "reg_start": monitor.reg_start,
        "restart_pending": monitor.restart_pending,
        "rounds": monitor.rounds,
        "beta_movement": monitor.beta.to_state(),
    }


def restore(monitor: Monitor, state: dict[str, Any]) -> None:
    """Continue the counters of :meth:`to_state` (call on a fresh monitor)."""
    monitor.n = int(state["n"])
    monitor.objective = OnlineObjective.from_state(state["objective"])
    monitor.norms.max_sq = float(state["feature_norm_max_sq"])
    if monitor.detector is not None:
        monitor.detector.n_restarts = int(state["drift_detections"])
        monitor.detector.n_ignored = int(state["drift_ignored"])
        monitor.detector.last_restart = int(state["last_drift_example"])
    monitor.theta_start_norm = float(state["theta_start_norm"])
    monitor.reg_start = float(state["reg_start"])
    monitor.restart_pending = bool(state.get("restart_pending", False))
    monitor.rounds = int(state.get("rounds", monitor.model.schedule.t))
    if "beta_movement" in state:
        monitor.beta.restore(state["beta_movement"])
