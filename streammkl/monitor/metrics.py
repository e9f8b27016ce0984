"""What each value of ``Monitor.snapshot()`` means: Prometheus names, types and help texts.

The daemon exports ``snapshot()[key]`` as ``METRICS[key].name``; the help texts are exact
statements of what is measured (see ``docs/monitor.md`` for the derivations). Conventions:
``NaN`` = not computed yet (or disabled); ``+Inf`` for a bound = no bound applies to this
configuration. "Example index" counts the examples the monitor has observed, from 0.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["DEPRECATED_HELP", "METRICS", "MetricSpec"]


class MetricSpec(NamedTuple):
    name: str  # Prometheus metric name
    type: str  # "gauge" | "counter"
    help: str
    #: A counter's former name as a gauge, still exported beside it for one release
    #: (:data:`DEPRECATED_HELP`); empty: none.
    deprecated: str = ""


#: The help text of a deprecated gauge kept beside the counter that replaces it.
DEPRECATED_HELP = "DEPRECATED, removed in the next release: use the counter {name}. {help}"


_OBJ = "lambda*Omega(theta_t) + L(theta_t; x_t, y_t), prequential (theta_t before its update)"
_WIN = "the last window of examples (streammkl_window_size of them, ending at streammkl_window_end)"
_CMP = (
    "the comparator fitted on the window (the learner's own algorithm for many warm-started "
    "epochs: its objective upper-bounds the window minimum, so the regret is a lower bound, "
    "unless streammkl_window_comparator_exact is 1)"
)

METRICS: dict[str, MetricSpec] = {
    "examples": MetricSpec(
        "streammkl_monitor_examples_total",
        "counter",
        "Examples observed by the regret/drift monitor.",
        deprecated="streammkl_monitor_examples",
    ),
    "online_objective": MetricSpec(
        "streammkl_online_objective",
        "gauge",
        f"Cumulative online objective: sum over all observed examples of {_OBJ}.",
    ),
    "online_loss": MetricSpec(
        "streammkl_online_loss",
        "gauge",
        "Cumulative prequential loss: sum over all observed examples of L(theta_t; x_t, y_t).",
    ),
    "nonfinite_terms": MetricSpec(
        "streammkl_nonfinite_objective_terms_total",
        "counter",
        "Examples whose loss or regularization value was NaN/Inf (left out of every sum).",
        deprecated="streammkl_nonfinite_objective_terms",
    ),
    "window_regret": MetricSpec(
        "streammkl_window_regret",
        "gauge",
        f"Regret on {_WIN} against the best fixed hypothesis in hindsight on that window: sum "
        f"over the window of {_OBJ}, minus the same sum for {_CMP}. NaN before the first fit.",
    ),
    "window_regret_per_example": MetricSpec(
        "streammkl_window_regret_per_example",
        "gauge",
        "streammkl_window_regret divided by streammkl_window_size.",
    ),
    "window_size": MetricSpec(
        "streammkl_window_size",
        "gauge",
        "Examples in the window of the latest regret estimate (W, or fewer early on).",
    ),
    "window_end": MetricSpec(
        "streammkl_window_end",
        "gauge",
        "Example count at which the latest regret window was cut (it covers [end - size, end)).",
    ),
    "window_regret_lag": MetricSpec(
        "streammkl_window_regret_lag",
        "gauge",
        "Examples observed since the window of the latest regret estimate ended "
        "(streammkl_monitor_examples_total - streammkl_window_end); NaN before the first estimate.",
    ),
    "window_regret_stale": MetricSpec(
        "streammkl_window_regret_stale",
        "gauge",
        "1 when the latest windowed-regret estimate is older than the refresh schedule allows "
        "(monitor.refresh_examples examples behind, or a window waiting monitor.refresh_seconds "
        "for its fit: a loaded machine; the comparator then skips its pauses until it catches "
        "up; also before the first estimate, once one is that late), else 0 (always 0 or 1; "
        "0 without a windowed regret).",
    ),
    "window_online_objective": MetricSpec(
        "streammkl_window_online_objective",
        "gauge",
        f"Sum over {_WIN} of {_OBJ}.",
    ),
    "window_comparator_objective": MetricSpec(
        "streammkl_window_comparator_objective",
        "gauge",
        "Sum over the window of lambda*Omega(theta) + L(theta; x_t, y_t) at the comparator theta.",
    ),
    "window_comparator_exact": MetricSpec(
        "streammkl_window_comparator_exact",
        "gauge",
        "1 if the window comparator is the batch optimum (SpicyMKL, within its duality gap); 0 if "
        "it is a fitted hypothesis whose objective upper-bounds the optimum (regret lower bound).",
    ),
    "window_regret_bound": MetricSpec(
        "streammkl_window_regret_bound",
        "gauge",
        "Upper bound on streammkl_window_regret from the lemma of Prop. 3 summed over the window: "
        "F^2/2 (1/eta_s + sum of rises of 1/eta_t) + G^2/2 sum eta_t + lambda*Omega(theta_s); "
        "+Inf without a bounded feasible set or Lipschitz loss.",
    ),
    "comparator_fits_skipped": MetricSpec(
        "streammkl_comparator_fits_skipped_total",
        "counter",
        "Windows not fitted because a newer window replaced them while the worker was busy.",
        deprecated="streammkl_comparator_fits_skipped",
    ),
    "comparator_errors": MetricSpec(
        "streammkl_comparator_errors_total",
        "counter",
        "Comparator fits that failed (see the log).",
        deprecated="streammkl_comparator_errors",
    ),
    "shadow_regret": MetricSpec(
        "streammkl_shadow_regret",
        "gauge",
        "Regret against the best single kernel: cumulative prequential loss of this learner minus "
        "that of the best of the single-kernel shadow learners (same configuration, one kernel "
        "each, same stream). Negative: the combination beats every kernel alone. NaN if disabled.",
    ),
    "regret_bound": MetricSpec(
        "streammkl_regret_bound",
        "gauge",
        "Prop. 3 bound for the configured schedule on the regret of the rounds since the last "
        "schedule (re)start against the best fixed hypothesis on those rounds (constant eta: "
        "eta T G^2/2 + ||theta*||^2/(2 eta); eta0/sqrt(t): (F^2/(2 eta0) + G^2 eta0) sqrt(T), "
        "F = 2 radius; 1/(sigma t): G^2 (1 + log T)/(2 sigma) + sigma ||theta*||^2/2; AdaGrad "
        "per block (Duchi, Hazan & Singer 2011, Thm. 5): sum_m (F^2/(2 eta0) + eta0) "
        "sqrt(delta + sum_t ||g_m,t||^2)), G from the largest ||phi(x)|| seen. +Inf when the "
        "configuration has no proven bound (no bounded feasible set, an intercept, or FTRL, whose "
        "sequential prox and projection are not covered by a bound proven here).",
    ),
    "regret_bound_rounds": MetricSpec(
        "streammkl_regret_bound_rounds",
        "gauge",
        "T of streammkl_regret_bound: rounds since the last schedule (re)start.",
    ),
    "feature_norm_max": MetricSpec(
        "streammkl_feature_norm_max",
        "gauge",
        "Largest ||phi(x)|| = sqrt(sum_m k_m(x, x)) over the observed examples (G / Lipschitz).",
    ),
    "drift_detections": MetricSpec(
        "streammkl_drift_detections_total",
        "counter",
        "Drift detections of a rise of the prequential loss; each restarts the learning-rate "
        "schedule (unless the monitor runs with restarts disabled).",
    ),
    "drift_ignored": MetricSpec(
        "streammkl_drift_decreases_total",
        "counter",
        "Detector firings on a decrease of the prequential loss (no restart).",
    ),
    "last_drift_example": MetricSpec(
        "streammkl_last_drift_example",
        "gauge",
        "Example index of the last drift detection (a rise of the loss); -1 if none.",
    ),
    "beta_movement": MetricSpec(
        "streammkl_beta_movement",
        "gauge",
        "Total-variation distance 1/2 sum_m |beta_m(now) - beta_m(then)| between the kernel "
        "weights now and streammkl_beta_movement_span examples ago, in [0, 1].",
    ),
    "beta_movement_span": MetricSpec(
        "streammkl_beta_movement_span",
        "gauge",
        "How many examples back streammkl_beta_movement looks (the configured lag once reached).",
    ),
}
