"""MKLClassifier: a river classifier that learns which kernels matter while it learns."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from river import base

from streammkl.core import losses as losses_mod
from streammkl.river import defaults
from streammkl.river._base import MKLLearner
from streammkl.river._features import check_numeric
from streammkl.river._labels import Classes, plain_label
from streammkl.river._minibatch import as_list, first_row, frame_columns, frame_rows

_PLAIN = frozenset({str, bool, int, float})  # label types that hash as themselves


class MKLClassifier(MKLLearner, base.MiniBatchClassifier):
    """Online multiple kernel learning classifier (binary and multiclass, any hashable labels).

    One composite-proximal round (Martins et al., Alg. 1/3) per ``learn_one``: a subgradient
    step of the loss on every kernel's block, then the prox of the MKL regularizer on the block
    norms. With the default sparse-MKL regularizer, kernels that do not help are driven to
    exactly zero weight; ``kernel_weights`` shows beta per kernel.

    Parameters
    ----------
    kernels
        Tuple of ``streammkl.core.kernels`` objects; None = the default bank (linear; additive
        Gaussian; Gaussian kernels at 1, 4 and 16 times the inverse median squared distance of
        the first inputs, as 256-component random Fourier maps; normalised quadratic with its
        exact explicit map), made for standardised inputs (``streammkl.river.defaults``).
    loss
        None = ``Softmax`` (multinomial logistic: calibrated probabilities) over all classes
        seen, for binary and multiclass alike; ``MulticlassHinge`` (Crammer-Singer);
        ``Hinge``/``Logistic`` restrict the learner to two classes.
    regularizer
        None = ``GroupLasso(1e-2)`` (sparse MKL: ``lambda sum_m ||theta_m||``). A tuple applies
        several in order.
    schedule
        None = ``FTRL(1.0)`` (FTRL-proximal, one AdaGrad step per block) for an explicit bank,
        ``AdaGrad(1.0)`` when it has kernelized blocks (``FTRL(1.0)`` there gives per-block
        schedules: FTRL on the explicit blocks, AdaGrad on the kernelized ones, e.g. with
        ``defaults.kernelized_bank()``); ``Constant(eta)`` tracks drift.
    radius
        Projection radius (None, a number, or ``"auto"`` for the paper's sqrt(2 Lambda/lambda)).
    budget
        Maximum number of stored support vectors of the kernelized blocks (bounded memory).
    budget_policy
        What a full support set does to make room: ``"merge"`` (default; two support vectors
        merged into one, budgeted SGD), ``"project"`` (one projected onto the others, the
        Projectron; O(budget^2) per update), ``"smallest"`` or ``"oldest"`` (one removed). See
        ``streammkl.core.budget``; only kernelized blocks have support vectors.
    seed
        Seeds random feature maps (deterministic per kernel and feature name).
    averages
        Horizons of exponential averages of the iterates whose predictions compete with the
        last iterate's (the one with the smallest discounted prequential loss predicts); None =
        ``defaults.AVERAGES``, ``()`` = the last iterate only. Of the explicit blocks: a bank
        with kernelized blocks keeps them under ``FTRL`` only (each average then predicts with
        the kernelized blocks' current scores), else None means ``()``.
    fit_intercept
        Learn an unregularized bias per class.
    standardize
        Standardise every input online (running mean and variance; ``streammkl.river._scaling``)
        before the kernels see it: what ``preprocessing.StandardScaler() | MKLClassifier()``
        does, inside the learner (so its state is saved and restored with the model). The
        daemon turns it on by default.

    Notes
    -----
    ``predict_proba_one`` returns a probability for every class seen. With ``Softmax`` (the
    default) and ``Logistic`` losses these are the model's probabilities; with hinge losses they
    are the softmax of the class scores (``sigmoid(2 f)`` for the binary ``Hinge``): monotone
    in the margin, not calibrated. With boolean labels both ``False`` and ``True`` are known
    from the first example.

    Examples
    --------
    >>> from river import datasets, evaluate, metrics, preprocessing
    >>> from streammkl.river import MKLClassifier
    >>> model = preprocessing.StandardScaler() | MKLClassifier(seed=1)
    >>> evaluate.progressive_val_score(datasets.Phishing(), model, metrics.Accuracy())
    Accuracy: 90.55%
    >>> clf = model["MKLClassifier"]
    >>> sorted(clf.kernel_weights, key=clf.kernel_weights.get, reverse=True)[0]
    'linear'

    References
    ----------
    [^1]: Martins, Smith, Xing, Aguiar, Figueiredo (2011). Online Learning of Structured
          Predictors with Multiple Kernels. AISTATS.
    """

    def __init__(
        self,
        kernels: tuple | None = None,
        loss: Any = None,
        regularizer: Any = None,
        schedule: Any = None,
        radius: float | str | None = None,
        budget: int | None = defaults.BUDGET,
        budget_policy: str = "merge",
        seed: int = 0,
        fit_intercept: bool = True,
        averages: tuple | None = None,
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
        self.standardize = standardize
        self.classes_: list = []
        self._classes = Classes(self, self.classes_)
        self._init_rounds(self._classes)

    @property
    def _multiclass(self) -> bool:
        return True

    @property
    def _is_stochastic(self) -> bool:
        return False

    def _core_loss(self) -> losses_mod.Loss:
        if self.loss is None:
            return defaults.classifier_loss()
        loss = losses_mod.from_spec(self.loss)
        if loss.task == "regression":
            raise ValueError(
                f"{loss!r} is a regression loss; MKLClassifier needs a classifier loss"
            )
        return loss

    # --- river API --------------------------------------------------------------------------
    def learn_one(self, x: Mapping, y: Any) -> None:
        rounds = self._rounds
        lane = rounds.learn_lane
        if lane is not None and lane(x, y):
            return
        if y is None:
            raise ValueError("learn_one needs a label; got None")
        if self._learn_known(x, y) is not None:
            if rounds.learn_lane is None and rounds.record_round is not None:
                rounds.make_learn_lane(self._classes.core_targets())
            return
        check_numeric(x)  # validate everything before any state changes
        classes = self._classes
        k = classes.register(y)
        self._rounds.learn_record(x, classes.target_of(k))

    def _scores(self, x: Mapping) -> np.ndarray | None:
        rounds = self._rounds
        vec = rounds.vector(x, learn=False)
        if vec is None or not self.classes_:
            return None
        assert rounds.model is not None
        fx = rounds.model.decision_prepared(vec)
        if self._classes.binary:
            f = float(fx[0])
            return np.array([-f, f]) if len(self.classes_) == 2 else np.array([f])
        return fx[: len(self.classes_)].copy()

    def predict_proba_one(self, x: Mapping, **kwargs: Any) -> dict:
        rounds = self._rounds
        lane = rounds.predict_lane
        if lane is not None:
            proba = lane(x)
            if proba is not None:
                return proba
        if self.classes_:
            fx = rounds.predict_known(x)
            if fx is not None:
                proba = self._classes.proba(fx.tolist())
                if lane is None:  # (the lane: the same call and formula, one Python frame)
                    rounds.make_predict_lane(self._classes.proba_function())
                return proba
        vec = rounds.vector(x, learn=False)
        if vec is None or not self.classes_:
            return {c: 1.0 / len(self.classes_) for c in self.classes_}
        assert rounds.model is not None
        classes = self._classes
        return classes.proba(rounds.model.decision_prepared(vec).tolist())

    def learn_predict_one(self, x: Mapping, y: Any) -> dict:
        """``predict_proba_one(x)`` *then* ``learn_one(x, y)``: the recommended prequential
        round. Returns the probabilities the model gave *before* learning (``max(p,
        key=p.get)`` is ``predict_one``'s label); a label of ``None`` predicts only.

        When the model exists, the class is known and ``x`` brings no new feature, the
        prediction is read from the learning round's own scores (one featurization, one
        compiled call); otherwise it is the two calls. Either way the learner ends bit for bit
        where ``predict_proba_one`` + ``learn_one`` leave it, with the same numbers. A refused
        ``learn_one`` raises, having changed nothing.
        """
        if y is None:
            return self.predict_proba_one(x)
        lane = self._rounds.known_lane
        if lane is not None:
            proba = lane(x, y)
            if proba is not None:
                return proba
        fx = self._learn_known(x, y)
        if fx is not None:
            rounds = self._rounds
            if rounds.known_lane is None and rounds.record_round is not None:
                self._make_lane()
            return self._classes.proba(fx.tolist())
        rounds, classes = self._rounds, self._classes
        model = rounds.model
        try:
            k = classes.index.get(plain_label(y))
        except TypeError:  # unhashable: learn_one raises its own error
            k = None
        if (
            k is not None
            and model is not None
            and model.feature_keys
            and (k < 2 if classes.binary else k < model.n_outputs)
            and rounds.knows_features(x)
        ):
            check_numeric(x)
            vec = rounds.scale(rounds.features.vector(x, validated=True), learn=True)
            rounds.learn(vec, classes.target_of(k))
            return classes.proba(model.last_scores.tolist())
        proba = self.predict_proba_one(x)
        self.learn_one(x, y)
        return proba

    def _learn_known(self, x: Mapping, y: Any) -> np.ndarray | None:
        """The round of a known class on a known kind of ``x`` (:meth:`Rounds.learn_known`):
        the scores before the update (a view), or None (nothing changed) when the full path is
        needed."""
        classes = self._classes
        k = classes.index.get(y) if type(y) in _PLAIN else None
        if k is None:
            return None
        if classes.shape()[0]:  # a binary loss: targets +-1 (as ``Classes.target_of``)
            if k >= 2:
                return None
            return self._rounds.learn_known(x, 1.0 if k == 1 else -1.0)
        model = self._rounds.model
        if model is None or k >= model.n_outputs:
            return None
        return self._rounds.learn_known(x, float(k))

    def _make_lane(self) -> None:
        """After a known-class round through the bound buffers, :meth:`learn_predict_one`'s
        lane (:meth:`Rounds.make_lane`, dropped with the record round whose steps it takes):
        the decision of :meth:`_learn_known` with what it reads fixed while the lane lives
        (each class's target, :meth:`Classes.core_targets`), the probabilities
        (:meth:`Classes.proba_function`); dropped with them when a class is registered. None
        from the lane: nothing changed, the full path decides."""
        classes = self._classes
        self._rounds.make_lane(
            classes.core_targets(), classes.proba_function(), classes.softmax_pair()
        )

    def predict_one(self, x: Mapping, **kwargs: Any) -> Any:
        rounds = self._rounds
        lane = rounds.label_lane
        if lane is not None:
            label = lane(x)
            if label is not None:
                return label
        if self.classes_:
            fx = rounds.predict_known(x)
            if fx is not None:
                label = self._classes.label_of(fx)
                if lane is None:  # (the lane: the same call and decision, one Python frame)
                    rounds.make_predict_lane(self._classes.label_of, label=True)
                return label
        scores = self._scores(x)
        if scores is None:
            return self.classes_[0] if self.classes_ else None
        if self._classes.binary and len(self.classes_) == 2:
            return self.classes_[1] if scores[1] > 0 else self.classes_[0]
        return self.classes_[int(np.argmax(scores))]

    # --- river's mini-batch API (pandas frames) ---------------------------------------------
    def learn_many(self, X: Any, y: Any) -> None:
        """Learn the rows of X in order, as a loop of ``learn_one`` would (in compiled runs
        between rows that bring a new class)."""
        names = frame_columns(X)
        ys = as_list(y)
        if len(ys) != len(X):
            raise ValueError(f"{len(X)} rows but {len(ys)} labels")
        if any(v is None for v in ys):
            raise ValueError("learn_many needs a label for every row")
        rounds, classes = self._rounds, self._classes
        i, n = 0, len(ys)
        while i < n:
            label = ys[i]
            index = rounds.features.index
            new_input = any(name not in index for name in names)
            if rounds.model is None or new_input or not classes.known(label):
                self.learn_one(first_row(X.iloc[i : i + 1], names), label)  # one round
                i += 1
                continue
            j = i
            while j < n and classes.known(ys[j]):
                j += 1
            rows = frame_rows(X.iloc[i:j], names, index, len(rounds.features))
            targets = np.array([classes.target(v) for v in ys[i:j]], dtype=np.float64)
            rounds.model.learn_many_prepared(rounds.prepare_rows(rows), targets)
            i = j

    def _frame_scores(self, X: Any) -> np.ndarray | None:
        names = frame_columns(X)
        rounds = self._rounds
        if rounds.model is None or not rounds.n_features or not self.classes_ or not len(X):
            return None
        rows = frame_rows(X, names, rounds.features.index, rounds.n_features)
        return rounds.model.decision_many(rounds.scale_rows(rows))

    def predict_proba_many(self, X: Any) -> Any:
        import pandas as pd

        scores = self._frame_scores(X)
        classes = list(self.classes_)
        if scores is None:
            uniform = 1.0 / len(classes) if classes else 0.0
            return pd.DataFrame(uniform, index=X.index, columns=classes, dtype=float)
        probas = self._classes.probas_of_scores(scores)
        return pd.DataFrame(probas, index=X.index, columns=classes, dtype=float)

    def predict_many(self, X: Any) -> Any:
        import pandas as pd

        scores = self._frame_scores(X)
        if scores is None:
            first = self.classes_[0] if self.classes_ else None
            return pd.Series([first] * len(X), index=X.index, dtype=object)
        labels = [self._classes.label_of(row) for row in scores]
        return pd.Series(labels, index=X.index, dtype=object)

    @classmethod
    def _unit_test_params(cls):
        from streammkl.core import kernels, losses, regularizers, schedules

        yield {}
        yield {
            "kernels": (kernels.Linear(), kernels.RBF(0.5, n_components=16)),
            "loss": losses.Softmax(),
            "regularizer": regularizers.GroupLasso(1e-4),
            "schedule": schedules.Constant(0.1),
            "budget": None,
        }
        yield {
            "kernels": (kernels.RBF(0.1), kernels.B1Spline(3.0)),
            "budget": 32,
            "radius": "auto",
            "regularizer": regularizers.SquaredGroupLasso(1e-3),
            "loss": losses.MulticlassHinge(),  # bounded at theta = 0 for any number of classes
        }
        yield {
            "kernels": (kernels.Linear(), kernels.RBF(0.5, n_components=16)),
            "standardize": True,
        }
        yield {  # per-block schedules: FTRL on the explicit blocks, AdaGrad on the kernelized
            "kernels": (kernels.Linear(), kernels.RBF(0.5, n_components=16), kernels.RBF(0.5)),
            "schedule": schedules.FTRL(1.0),
            "budget": 16,
        }
