"""Hindsight comparator: the best fixed hypothesis on a window, fitted off the hot path.

``fit_comparator`` runs the learner's own composite-proximal algorithm for many epochs over the
window (seeded shuffles, eta0/sqrt(t) continuing across epochs, optionally warm-started from a
previous fit) until the window objective ``sum_t [lambda Omega(theta) + L(theta; x_t, y_t)]``
stops improving. The returned objective is that of a real hypothesis, so it upper-bounds the true
minimum: regret estimated against it is a lower bound on the true regret.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streammkl.core import OnlineMKL, schedules


@dataclass
class ComparatorFit:
    objective: float  # sum over the window of lambda*Omega + loss at the fitted theta
    epochs: int
    model: OnlineMKL
    history: list[float] = field(default_factory=list)


def window_objective(model: OnlineMKL, X: np.ndarray, Y: np.ndarray) -> float:
    """``sum_t [lambda Omega(theta) + L(theta; x_t, y_t)]`` for the model's current theta."""
    return float(np.sum(model.losses_many(X, Y)) + len(X) * model.regularization_value())


def fit_comparator(
    config: dict[str, Any],
    X: np.ndarray,
    Y: np.ndarray,
    *,
    max_epochs: int = 200,
    rel_tol: float = 1e-4,
    patience: int = 5,
    eta0: float | None = None,
    seed: int = 0,
    warm_start: OnlineMKL | None = None,
    feature_keys: Sequence[str] | None = None,
    warm_start_t: int = 0,
    between_epochs: Callable[[], None] | None = None,
    chunk: int | None = None,
) -> ComparatorFit:
    """Fit the hindsight comparator on (X, Y) with the learner configuration ``config``.

    Stops when the best objective has not improved by ``rel_tol`` (relative) for ``patience``
    epochs, or after ``max_epochs``. ``feature_keys`` names the columns of X as the learner does
    (needed when kernels select features by name). A warm-started fit resumes its step-size
    schedule at round ``warm_start_t`` (0: from eta0 again). ``between_epochs``, if given, is
    called before every epoch but the first (a pacer sleeps there); with ``chunk``, also within
    an epoch, after every ``chunk`` rounds and before the epoch's objective, so that no stretch
    of work between two calls is longer than ``chunk`` rounds or one objective. An epoch learned
    in chunks is the same rounds in the same order: the fit is the same, bit for bit.
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    cfg = dict(config)
    base = cfg.get("schedule")
    if eta0 is None:
        eta0 = float(getattr(schedules.from_spec(base), "eta0", 1.0)) if base else 1.0
    cfg["schedule"] = schedules.InvSqrt(eta0)
    if warm_start is not None:
        meta, arrays = warm_start.to_state()
        meta = copy.deepcopy(meta)
        meta["config"]["schedule"] = cfg["schedule"].to_spec()
        meta["schedule_t"] = int(warm_start_t)
        model = OnlineMKL.from_state(meta, arrays)
    else:
        model = OnlineMKL(**cfg)
    if feature_keys:
        model.declare_features(feature_keys)
    rng = np.random.default_rng(seed)
    best = window_objective(model, X, Y) if warm_start is not None else np.inf
    best_state = model.to_state() if warm_start is not None else None
    history: list[float] = []
    stale = 0
    epochs = 0
    for epochs in range(1, max_epochs + 1):
        if between_epochs is not None and epochs > 1:
            between_epochs()
        order = rng.permutation(len(X))
        Xo, Yo = X[order], np.asarray(Y)[order]
        if between_epochs is None or chunk is None or chunk >= len(X):
            model.learn_many(Xo, Yo)
        else:
            for start in range(0, len(X), chunk):
                if start:
                    between_epochs()
                model.learn_many(Xo[start : start + chunk], Yo[start : start + chunk])
            between_epochs()
        obj = window_objective(model, X, Y)
        history.append(obj)
        if obj < best - rel_tol * abs(best if np.isfinite(best) else obj):
            best, best_state, stale = obj, model.to_state(), 0
        else:
            stale += 1
            if stale >= patience:
                break
    assert best_state is not None
    fitted = OnlineMKL.from_state(*best_state)
    return ComparatorFit(objective=float(best), epochs=epochs, model=fitted, history=history)
