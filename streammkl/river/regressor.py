"""MKLRegressor: online multiple kernel regression for river."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from river import base

from streammkl.core import losses as losses_mod
from streammkl.river import defaults
from streammkl.river._base import MKLMixin
from streammkl.river._features import check_numeric
from streammkl.river._minibatch import RegressorBatches


class MKLRegressor(MKLMixin, RegressorBatches, base.MiniBatchRegressor):
    """Online multiple kernel learning regressor.

    Same algorithm as ``MKLClassifier`` with a regression loss. Targets are standardised online
    (running mean and variance) before the loss is applied, so the default step sizes suit any
    target scale; predictions are mapped back.

    Parameters
    ----------
    kernels
        Tuple of ``streammkl.core.kernels`` objects; None = the default bank.
    loss
        None = ``Huber(1.0)`` on the standardised target; also ``Squared()``,
        ``EpsilonInsensitive(eps)``.
    regularizer
        None = ``SquaredGroupLasso(1e-4)`` (sparse MKL).
    schedule
        None = ``InvSqrt(0.3)``.
    radius
        Projection radius (None or a number).
    budget
        Maximum number of support vectors of the kernelized blocks.
    budget_policy
        ``"merge"`` (default), ``"project"``, ``"smallest"`` or ``"oldest"``: what a full support
        set does to make room (see ``MKLClassifier`` and ``streammkl.core.budget``).
    seed
        Seeds random feature maps.
    averages
        Horizons of exponential averages of the iterates whose predictions compete with the
        last iterate's (the one with the smallest discounted prequential loss predicts); None =
        ``defaults.AVERAGES``, ``()`` = the last iterate only. Explicit blocks only.
    fit_intercept
        Learn an unregularized bias.
    standardize_target
        Learn on ``(y - mean) / std`` with running statistics.
    standardize
        Standardise every input online (see ``MKLClassifier``); the daemon's default.

    Examples
    --------
    >>> from river import datasets, evaluate, metrics, preprocessing
    >>> from streammkl.river import MKLRegressor
    >>> model = preprocessing.StandardScaler() | MKLRegressor()
    >>> evaluate.progressive_val_score(datasets.TrumpApproval(), model, metrics.MAE())
    MAE: 0.38359

    """

    def __init__(
        self,
        kernels: tuple | None = None,
        loss: Any = None,
        regularizer: Any = None,
        schedule: Any = None,
        radius: float | None = None,
        budget: int | None = defaults.BUDGET,
        budget_policy: str = "merge",
        seed: int = 0,
        fit_intercept: bool = True,
        averages: tuple | None = None,
        standardize_target: bool = True,
        standardize: bool = False,
    ):
        self.kernels = kernels
        self.loss = loss
        self.regularizer = regularizer
        self.schedule = schedule
        self.radius = radius
        self.budget = budget
        self.budget_policy = budget_policy
        self.seed = seed
        self.fit_intercept = fit_intercept
        self.averages = averages
        self.standardize_target = standardize_target
        self.standardize = standardize
        self._init_state()
        self._n = 0
        self._mean = 0.0
        self._m2 = 0.0

    @property
    def _is_stochastic(self) -> bool:
        return False

    def _default_schedule(self, regs: Any = ()) -> Any:
        return defaults.regression_schedule()

    def _default_regularizer(self) -> Any:
        return defaults.regression_regularizer()

    def _core_loss(self) -> losses_mod.Loss:
        if self.loss is None:
            return losses_mod.Huber(defaults.HUBER_DELTA)
        loss = losses_mod.from_spec(self.loss)
        if loss.task != "regression":
            raise ValueError(f"{loss!r} is not a regression loss")
        return loss

    def _std(self) -> float:
        if not self.standardize_target or self._n < 2:
            return 1.0
        var = self._m2 / (self._n - 1)
        return math.sqrt(var) if var > 1e-24 else 1.0

    def advance_target(self, y: float) -> float:
        """Count the target in the running statistics (Welford) and return it standardised
        as the core learns it."""
        if self.standardize_target:
            self._n += 1
            delta = y - self._mean
            self._mean += delta / self._n
            self._m2 += delta * (y - self._mean)
        center = self._mean if self.standardize_target else 0.0
        return (y - center) / self._std()

    def target_scale(self) -> tuple[float, float]:
        """(center, scale): a core score s predicts ``center + scale * s``."""
        return (self._mean if self.standardize_target else 0.0), self._std()

    def learn_one(self, x: Mapping, y: float) -> None:
        check_numeric(x)
        y = float(y)
        if not math.isfinite(y):
            raise ValueError(f"regression target must be finite, got {y!r}")
        vec = self._vector(x, learn=True, validated=True)  # if it refuses, nothing changed
        assert vec is not None and self._model is not None
        self.last_loss = self._model.learn_prepared(vec, self.advance_target(y))

    def learn_predict_one(self, x: Mapping, y: float | None) -> float:
        """``predict_one(x)`` *then* ``learn_one(x, y)``: the recommended prequential round.
        Returns the prediction made *before* learning; a target of ``None`` predicts only.

        When the model exists and ``x`` brings no new feature, the prediction is read from the
        learning round's own score (one featurization, one compiled call); otherwise it is the
        two calls. Either way the learner ends bit for bit where the two calls leave it, and
        the prediction is the same number. A refused ``learn_one`` raises, having changed
        nothing.
        """
        if y is None:
            return self.predict_one(x)
        model = self._model
        if model is None or not model.feature_keys or not self.knows_features(x):
            prediction = self.predict_one(x)
            self.learn_one(x, y)
            return prediction
        check_numeric(x)
        y = float(y)
        if not math.isfinite(y):
            raise ValueError(f"regression target must be finite, got {y!r}")
        center, scale = self.target_scale()
        vec = self._scale(self._features.vector(x, validated=True), learn=True)
        self.last_loss = model.learn_prepared(vec, self.advance_target(y))
        return center + scale * float(model.last_scores[0])

    def predict_one(self, x: Mapping) -> float:
        vec = self._vector(x, learn=False)
        center = self._mean if self.standardize_target else 0.0
        if vec is None:
            return center
        assert self._model is not None
        return center + self._std() * float(self._model.decision_prepared(vec)[0])

    def _extra_meta(self) -> dict[str, Any]:
        return {"n": self._n, "mean": self._mean, "m2": self._m2}

    def _restore_extra(self, extra: Mapping[str, Any]) -> None:
        self._n = int(extra.get("n", 0))
        self._mean = float(extra.get("mean", 0.0))
        self._m2 = float(extra.get("m2", 0.0))

    @classmethod
    def _unit_test_params(cls):
        from streammkl.core import kernels, losses

        yield {}
        yield {
            "kernels": (kernels.Linear(), kernels.RBF(0.5, n_components=16)),
            "loss": losses.Huber(1.0),
            "budget": None,
            "standardize_target": False,
        }
        yield {
            "kernels": (kernels.Linear(), kernels.RBF(0.5)),
            "budget": 16,
            "budget_policy": "project",
        }
        yield {
            "kernels": (kernels.Linear(), kernels.RBF(0.5, n_components=16)),
            "standardize": True,
        }
