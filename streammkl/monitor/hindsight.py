"""Hindsight comparators for the windowed regret: fit the best fixed hypothesis on a window.

- :class:`EpochComparator` (default): the learner's own composite-proximal algorithm run for many
  epochs over the window (``epoch_fit.fit_comparator``), warm-started from the previous window's
  fit, with the learner's configuration — the same kernels, regularizer, radius and *budget*. Its
  objective is that of a real hypothesis, so it upper-bounds the window minimum and the regret
  estimated against it is a **lower bound** on the true windowed regret. With a budget, the
  comparator is also restricted to hypotheses with at most ``budget`` support pairs (bounded memory
  and time), which can only raise its objective: still a lower bound.
- :class:`ExactComparator`: the batch optimum by SpicyMKL's DAL iteration
  (:func:`streammkl.batch.window_optimum.fit_window_comparator`), within a relative duality gap
  ``tol`` above the minimum. Only for configurations it solves exactly: one regularizer it
  supports, a loss it supports, exact kernels (no random Fourier blocks), no feature selection by
  name, and no radius that could cut the optimum.

A comparator's ``fit`` runs on the monitor's worker thread and touches only its arguments.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from streammkl.batch.window_optimum import fit_window_comparator
from streammkl.core import OnlineMKL, bandwidth, kernels, losses, regularizers
from streammkl.monitor import theory
from streammkl.monitor.epoch_fit import fit_comparator

__all__ = ["ComparatorResult", "EpochComparator", "ExactComparator"]


class ComparatorResult(NamedTuple):
    objective: float  # sum over the window of lambda Omega(theta) + L(theta; x_t, y_t)
    epochs: int  # epochs (EpochComparator) or solver iterations (ExactComparator)


class EpochComparator:
    """Many warm-started epochs of the learner's algorithm (an upper bound on the minimum).

    Parameters
    ----------
    max_epochs, rel_tol, patience, eta0
        Passed to :func:`streammkl.monitor.epoch_fit.fit_comparator`.
    warm_start
        Start each fit from the previous one (the windows overlap), when the bank is unchanged.
    resume_schedule
        With a warm start, continue the previous fit's step-size schedule instead of restarting it
        at eta0: more precise on stationary streams, but slow to follow a window that moved (the
        default restarts: measured on kernel-drift windows, resuming left the comparator up to
        32% worse).
    seed
        Seeds the epoch shuffles (fit ``i`` uses ``seed + i``).

    ``pace``, if set, is called between epochs (``fit_comparator``'s ``between_epochs``): the
    daemon's duty-cycle throttle sleeps there, so a fit's CPU is spread over its duration; with
    ``pace_rounds`` set too, also every ``pace_rounds`` rounds within an epoch (``chunk``: the
    same fit, in shorter stretches of work).
    """

    method = "epochs"
    exact = False

    def __init__(
        self,
        max_epochs: int = 100,
        rel_tol: float = 1e-5,
        patience: int = 5,
        eta0: float | None = None,
        warm_start: bool = True,
        resume_schedule: bool = False,
        seed: int = 0,
    ) -> None:
        self.max_epochs = int(max_epochs)
        self.rel_tol = float(rel_tol)
        self.patience = int(patience)
        self.eta0 = eta0
        self.warm_start = bool(warm_start)
        self.resume_schedule = bool(resume_schedule)
        self.seed = int(seed)
        self.n_fits = 0
        self.pace: Callable[[], None] | None = None
        self.pace_rounds: int | None = None
        self._previous: OnlineMKL | None = None

    def fit(
        self, config: dict[str, Any], feature_keys: Sequence[str], X: np.ndarray, Y: np.ndarray
    ) -> ComparatorResult:
        warm = self._previous if self.warm_start else None
        bank = [kernels.from_spec(k) for k in config["kernels"]]
        if warm is not None and bandwidth.bank_key(warm.kernels) != bandwidth.bank_key(bank):
            warm = None  # the bank (or a fitted bandwidth) changed: start over
        result = fit_comparator(
            config,
            X,
            Y,
            max_epochs=self.max_epochs,
            rel_tol=self.rel_tol,
            patience=self.patience,
            eta0=self.eta0,
            seed=self.seed + self.n_fits,
            warm_start=warm,
            feature_keys=feature_keys,
            warm_start_t=warm.schedule.t if (warm is not None and self.resume_schedule) else 0,
            between_epochs=self.pace,
            chunk=self.pace_rounds,
        )
        self.n_fits += 1
        self._previous = result.model
        return ComparatorResult(result.objective, result.epochs)


class ExactComparator:
    """The batch optimum on the window by SpicyMKL (DAL), to a relative duality gap ``tol``.

    :meth:`check` raises ``ValueError`` (naming the setting) for configurations it cannot solve
    exactly.
    """

    method = "exact"
    exact = True

    def __init__(self, tol: float = 1e-6, max_iter: int = 200) -> None:
        self.tol = float(tol)
        self.max_iter = int(max_iter)

    @staticmethod
    def check(model: OnlineMKL) -> None:
        """Raise ValueError if the learner's configuration has no exact batch counterpart."""
        if len(model.regularizers) != 1:
            raise ValueError(
                f"exact comparator: one regularizer needed, got {model.regularizers!r}"
            )
        for k in model.kernels:
            if isinstance(k, kernels.RBF | kernels.MedianRBF) and not k.implicit:
                raise ValueError(
                    f"exact comparator: kernel {k.name!r} is a random Fourier approximation; the "
                    "batch solver would use the exact Gaussian (another hypothesis class)"
                )
            if k.features is not None and any(isinstance(f, str) for f in k.features):
                raise ValueError(f"exact comparator: kernel {k.name!r} selects features by name")
        if isinstance(model.loss, losses.MulticlassHinge | losses.Softmax | losses.Huber):
            raise ValueError(f"exact comparator: loss {model.loss!r} is not supported")
        if isinstance(model.regularizers[0], regularizers.Ball):
            raise ValueError("exact comparator: a Ball constraint has no batch counterpart")
        r = model.radius if model.radius else math.inf
        prop9 = theory.prop9_norm(model)
        if r < math.inf and not r >= prop9:
            raise ValueError(
                f"exact comparator: radius={r:g} may cut the unconstrained optimum (Prop. 9 "
                f"guarantees only ||theta*|| <= {prop9:g}); use comparator='epochs'"
            )

    def fit(
        self, config: dict[str, Any], feature_keys: Sequence[str], X: np.ndarray, Y: np.ndarray
    ) -> ComparatorResult:
        model = OnlineMKL(**config)
        self.check(model)
        fitted = fit_window_comparator(
            X,
            Y,
            model.kernels,
            model.loss,
            None,
            regularizer=model.regularizers[0],
            fit_intercept=model.fit_intercept,
            tol=self.tol,
            max_iter=self.max_iter,
            return_result=True,
        )
        assert isinstance(fitted, tuple)  # return_result=True
        value, res = fitted
        return ComparatorResult(float(value) * X.shape[0], int(res.n_iter))
