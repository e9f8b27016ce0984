"""MKLClassifier: a river classifier that learns which kernels matter while it learns."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from river import base

from streammkl.core import losses as losses_mod
from streammkl.river import defaults
from streammkl.river._base import MKLMixin
from streammkl.river._features import check_numeric
from streammkl.river._labels import LabelMap, plain_label
from streammkl.river._minibatch import ClassifierBatches
from streammkl.river._runs import known_run


class MKLClassifier(MKLMixin, LabelMap, ClassifierBatches, base.MiniBatchClassifier):
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
        ``AdaGrad(1.0)`` when it has kernelized blocks; ``Constant(eta)`` tracks drift.
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
        ``defaults.AVERAGES``, ``()`` = the last iterate only. Explicit blocks only.
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
    Accuracy: 90.63%
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
        self._init_state()
        self.classes_: list = []
        self._class_index: dict = {}

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
        if y is None:
            raise ValueError("learn_one needs a label; got None")
        check_numeric(x)  # validate everything before any state changes
        k = self._register(y)
        vec = self._vector(x, learn=True, validated=True)
        assert vec is not None and self._model is not None
        target = (1.0 if k == 1 else -1.0) if self._binary_loss else k
        self.last_loss = self._model.learn_prepared(vec, target)

    def _scores(self, x: Mapping) -> np.ndarray | None:
        vec = self._vector(x, learn=False)
        if vec is None or not self.classes_:
            return None
        assert self._model is not None
        fx = self._model.decision_prepared(vec)
        if self._binary_loss:
            f = float(fx[0])
            return np.array([-f, f]) if len(self.classes_) == 2 else np.array([f])
        return fx[: len(self.classes_)].copy()

    def predict_proba_one(self, x: Mapping, **kwargs: Any) -> dict:
        vec = self._vector(x, learn=False)
        if vec is None or not self.classes_:
            return {c: 1.0 / len(self.classes_) for c in self.classes_}
        assert self._model is not None
        return self._proba(self._model.decision_prepared(vec).tolist())

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
        model = self._model
        try:
            k = self._class_index.get(plain_label(y))
        except TypeError:  # unhashable: learn_one raises its own error
            k = None
        if (
            k is not None
            and model is not None
            and model.feature_keys
            and (k < 2 if self._binary_loss else k < model.n_outputs)
            and self.knows_features(x)
        ):
            check_numeric(x)
            vec = self._scale(self._features.vector(x, validated=True), learn=True)
            target = (1.0 if k == 1 else -1.0) if self._binary_loss else k
            self.last_loss = model.learn_prepared(vec, target)
            return self._proba(model.last_scores.tolist())
        proba = self.predict_proba_one(x)
        self.learn_one(x, y)
        return proba

    def learn_predict_many(
        self,
        xs: Sequence[Mapping],
        ys: Sequence[Any],
        validated: bool = False,
        on_error: Callable[[int, Exception], None] | None = None,
    ) -> list[dict | None]:
        """Prequential rounds in order: :meth:`learn_predict_one` of each example (a label of
        ``None``: predict only); returns the probabilities.

        The learner ends bit-for-bit where the loop of single calls ends, and the probabilities
        are the same numbers. Runs of labelled examples whose class and features are already
        known go through one compiled loop of the core (``learn_many``), whose scores before
        each update are the predictions: the daemon's hot path (measured on Bananas with the
        default bank, in ``benchmarks/daemon_throughput.py``). Other examples take the single
        calls.

        Parameters
        ----------
        xs, ys
            Examples and labels, in stream order.
        validated
            Every value of every ``x`` is already a finite number (e.g. decoded by
            :func:`streammkl.wire.decode`): skip the per-value checks.
        on_error
            Without it, an example the single calls refuse raises (as the loop of single calls
            would, with the earlier examples learned). With it, ``on_error(i, exc)`` is called
            and the loop goes on: a refused ``learn_one`` leaves example ``i`` predicted but not
            learned; a refused ``predict_proba_one`` gives ``None`` and skips the learning.
        """
        if len(xs) != len(ys):
            raise ValueError(f"{len(xs)} examples but {len(ys)} labels")
        out: list[dict | None] = []
        i, n = 0, len(xs)
        while i < n:
            j, X, Y = self.plan_run(xs, ys, i, validated)
            if j > i:
                out.extend(self.probas_from_scores(self.run_rounds(X, Y)))
                i = j
                continue
            x, y = xs[i], ys[i]
            try:
                out.append(self.learn_predict_one(x, y))
            except Exception as exc:  # learn_one changes nothing when it raises
                if on_error is None:
                    raise
                try:  # the prediction stands; only the learning was refused
                    out.append(self.predict_proba_one(x))
                except Exception:
                    out.append(None)
                on_error(i, exc)
            i += 1
        return out

    # The three phases of a compiled run, public for callers that overlap the compiled loop
    # with other work (the daemon runs it on a thread while it fetches the next batch).

    def plan_run(
        self, xs: Sequence[Mapping], ys: Sequence[Any], start: int = 0, validated: bool = False
    ) -> tuple[int, np.ndarray, np.ndarray]:
        """The longest run from ``start`` of labelled examples with a known class and no new
        feature, ready for :meth:`run_rounds`: ``(end, X, Y)`` (``end == start``: none).

        Reads the learner only; valid until the learner changes.
        """
        j, rows, targets = known_run(self, xs, ys, start, validated)
        if j == start:
            return start, np.zeros((0, 0)), np.zeros(0)
        return j, np.array(rows, dtype=np.float64), np.array(targets)

    def run_rounds(self, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        """Learn a planned run (:meth:`plan_run`) in one compiled loop; returns the scores of
        each example before its own update. The loop releases the GIL: other threads may run
        meanwhile, but none may touch this learner."""
        assert self._model is not None
        return self._model.learn_many_prepared(self.prepare_rows(X), Y)[1]

    def predict_one(self, x: Mapping, **kwargs: Any) -> Any:
        scores = self._scores(x)
        if scores is None:
            return self.classes_[0] if self.classes_ else None
        if self._binary_loss and len(self.classes_) == 2:
            return self.classes_[1] if scores[1] > 0 else self.classes_[0]
        return self.classes_[int(np.argmax(scores))]

    # --- persistence ------------------------------------------------------------------------
    def _extra_meta(self) -> dict[str, Any]:
        return {"classes": list(self.classes_)}

    def _restore_extra(self, extra: Mapping[str, Any]) -> None:
        self.classes_ = list(extra.get("classes", []))
        self._class_index = {c: i for i, c in enumerate(self.classes_)}

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
