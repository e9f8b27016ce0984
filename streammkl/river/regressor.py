"""MKLRegressor: online multiple kernel regression for river."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from river import base

from streammkl.core import losses as losses_mod
from streammkl.core.model import MAX_ABS_INPUT
from streammkl.river import defaults
from streammkl.river._base import MKLLearner
from streammkl.river._features import check_numeric
from streammkl.river._minibatch import as_list, first_row, frame_columns, frame_rows
from streammkl.river._scaling import TargetScale


class MKLRegressor(MKLLearner, base.MiniBatchRegressor):
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
        ``defaults.AVERAGES``, ``()`` = the last iterate only. Of the explicit blocks: a bank
        with kernelized blocks keeps them under ``FTRL`` only (per-block schedules), else None
        means ``()``.
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
    MAE: 0.380381

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
        self._target = TargetScale(standardize_target)
        self._init_rounds(self._target)

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

    def learn_one(self, x: Mapping, y: float) -> None:
        rounds = self._rounds
        lane = rounds.learn_lane
        if lane is not None and lane(x, y):
            return
        y = _finite_target(y)
        if rounds.learn_known(x, y, counted=True) is not None:
            if rounds.learn_lane is None and rounds.record_round is not None:
                rounds.make_counted_lane(self._target)  # (the same round, one Python frame)
            return
        check_numeric(x)
        vec = rounds.vector(x, learn=True, validated=True)  # if it refuses, nothing changed
        assert vec is not None
        rounds.learn(vec, self._target.advance(y))

    def learn_predict_one(self, x: Mapping, y: float | None) -> float:
        """``predict_one(x)`` *then* ``learn_one(x, y)``: the recommended prequential round.
        Returns the prediction made *before* learning; a target of ``None`` predicts only.

        When the model exists and ``x`` brings no new feature, the prediction is read from the
        learning round's own score (one featurization, one compiled call); otherwise it is the
        two calls. Either way the learner ends bit for bit where the two calls leave it, and
        the prediction is the same number. A refused ``learn_one`` raises, having changed
        nothing.
        """
        rounds = self._rounds
        lane = rounds.known_lane
        if lane is not None:
            prediction = lane(x, y)
            if prediction is not None:
                return prediction
        if y is None:
            return self.predict_one(x)
        value = _finite_target(y)
        center, scale = self._target.center_scale()
        fx = rounds.learn_known(x, value, counted=True)
        if fx is not None:
            if rounds.known_lane is None and rounds.record_round is not None:
                rounds.make_counted_lane(self._target, predict=True)
            return center + scale * fx.item(0)
        model = rounds.model
        if model is None or not model.feature_keys or not rounds.knows_features(x):
            prediction = self.predict_one(x)
            self.learn_one(x, y)
            return prediction
        check_numeric(x)
        y = _finite_target(y)
        center, scale = self._target.center_scale()
        vec = rounds.scale(rounds.features.vector(x, validated=True), learn=True)
        rounds.learn(vec, self._target.advance(y))
        return center + scale * float(model.last_scores[0])

    def predict_one(self, x: Mapping) -> float:
        rounds = self._rounds
        lane = rounds.label_lane
        if lane is not None:
            prediction = lane(x)
            if prediction is not None:
                return prediction
        target = self._target
        center, scale = target.center_scale()
        fx = rounds.predict_known(x)
        if fx is not None:
            if lane is None:  # (the lane: the same call and formula, one Python frame)
                rounds.make_predict_lane(target.prediction, label=True)
            return center + scale * fx.item(0)
        vec = rounds.vector(x, learn=False)
        if vec is None:
            return center
        assert rounds.model is not None
        return center + scale * float(rounds.model.decision_prepared(vec)[0])

    # --- river's mini-batch API (pandas frames) ---------------------------------------------
    def learn_many(self, X: Any, y: Any) -> None:
        """Learn the rows of X in order, as a loop of ``learn_one`` would (the running target
        statistics advance row by row; the rounds run in one compiled loop)."""
        names = frame_columns(X)
        ys = [float(v) for v in as_list(y)]
        if len(ys) != len(X):
            raise ValueError(f"{len(X)} rows but {len(ys)} targets")
        if not all(-MAX_ABS_INPUT <= v <= MAX_ABS_INPUT for v in ys):
            raise ValueError(f"regression targets must be finite within +-{MAX_ABS_INPUT:g}")
        if not ys:
            return
        rounds = self._rounds
        start = 0
        if rounds.model is None or any(name not in rounds.features.index for name in names):
            self.learn_one(first_row(X.iloc[:1], names), ys[0])  # declares the new inputs
            start = 1
        if start == len(ys):
            return
        rows = frame_rows(X.iloc[start:], names, rounds.features.index, rounds.n_features)
        targets = np.array([self._target.advance(v) for v in ys[start:]], dtype=np.float64)
        assert rounds.model is not None
        rounds.model.learn_many_prepared(rounds.prepare_rows(rows), targets)

    def predict_many(self, X: Any) -> Any:
        import pandas as pd

        names = frame_columns(X)
        center, scale = self._target.center_scale()
        rounds = self._rounds
        if rounds.model is None or not rounds.n_features or not len(X):
            return pd.Series(center, index=X.index, dtype=float)
        rows = frame_rows(X, names, rounds.features.index, rounds.n_features)
        scores = rounds.model.decision_many(rounds.scale_rows(rows))
        return pd.Series(center + scale * scores[:, 0], index=X.index)

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


def _finite_target(y: Any) -> float:
    y = float(y)
    if not -MAX_ABS_INPUT <= y <= MAX_ABS_INPUT:
        raise ValueError(f"regression target must be finite within +-{MAX_ABS_INPUT:g}, got {y!r}")
    return y
