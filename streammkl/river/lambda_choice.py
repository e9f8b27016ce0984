"""LambdaChoiceClassifier: one MKLClassifier configuration run at several group-lasso lambdas,
the one with the fewest recent errors predicting (choosing the sparsity of the bank online)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from river import base

from streammkl import statefile
from streammkl.core import regularizers
from streammkl.river._memory import memory_usage
from streammkl.river.classifier import MKLClassifier

FILE_FORMAT = "streammkl.river.lambda_choice"
FILE_VERSION = 1


class LambdaChoiceClassifier(base.Classifier):
    """Several copies of one ``MKLClassifier`` that differ only in the group-lasso lambda; the
    copy with the smallest discounted count of errors so far predicts.

    Every ``learn_one`` feeds every copy (``learn_predict_one``: each copy's prediction of ``x``
    just before it learns ``x`` counts as an error or not) and updates each copy's count as
    ``count = discount * count + error``; ``predict_one`` and ``predict_proba_one`` are those of
    the copy with the smallest count (ties to the first lambda given). Which kernels a stream
    needs is a property of the stream that a fixed lambda decides once for all (a smaller lambda
    keeps more kernels: it gains where the bank's non-linear kernels are needed and loses where a
    sparse model suffices); this chooses it as the stream goes, at one learner per lambda per
    call.

    Parameters
    ----------
    classifier
        The configuration every copy runs (its ``regularizer`` must be None: each copy gets
        ``GroupLasso(lam)``); None = ``MKLClassifier()``, the default learner.
    lambdas
        The group-lasso lambdas, each > 0, at least one; the default pairs the default
        learner's lambda (1e-2) with a weaker one (3e-3).
    discount
        Discount of the error counts per learned example, in (0, 1): about the last
        ``1 / (1 - discount)`` examples decide.

    Examples
    --------
    >>> from river import datasets, evaluate, metrics, preprocessing
    >>> from streammkl.river import LambdaChoiceClassifier
    >>> model = preprocessing.StandardScaler() | LambdaChoiceClassifier()
    >>> evaluate.progressive_val_score(datasets.Phishing(), model, metrics.Accuracy())
    Accuracy: 90.39%
    >>> model["LambdaChoiceClassifier"].chosen_lambda
    0.01
    """

    def __init__(
        self,
        classifier: MKLClassifier | None = None,
        lambdas: Sequence[float] = (1e-2, 3e-3),
        discount: float = 0.995,
    ):
        if classifier is not None and not isinstance(classifier, MKLClassifier):
            raise TypeError(f"classifier must be an MKLClassifier, got {type(classifier)!r}")
        if classifier is not None and classifier.regularizer is not None:
            raise ValueError(
                "classifier.regularizer must be None: each lambda gives its copy GroupLasso(lam)"
            )
        values = list(lambdas)
        if not values:
            raise ValueError("lambdas is empty; give at least one group-lasso lambda")
        for lam in values:
            if isinstance(lam, bool) or not isinstance(lam, int | float):
                raise TypeError(f"lambdas must be numbers, got {lam!r}")
            if not (math.isfinite(lam) and lam > 0):
                raise ValueError(f"every lambda must be a finite number > 0, got {lam!r}")
        if isinstance(discount, bool) or not isinstance(discount, int | float):
            raise TypeError(f"discount must be a number, got {discount!r}")
        if not 0 < discount < 1:
            raise ValueError(f"discount must lie in (0, 1), got {discount!r}")
        self.classifier = classifier
        self.lambdas = lambdas
        self.discount = discount
        template = MKLClassifier() if classifier is None else classifier
        self._learners = [
            template.clone({"regularizer": regularizers.GroupLasso(float(lam))}) for lam in values
        ]
        self._errors = [0.0] * len(values)

    # --- what it chose ----------------------------------------------------------------------
    @property
    def learners(self) -> list[MKLClassifier]:
        """The copies, one per lambda, in the order of ``lambdas``."""
        return list(self._learners)

    @property
    def errors(self) -> list[float]:
        """The discounted count of errors of each copy, in the order of ``lambdas``."""
        return list(self._errors)

    @property
    def chosen(self) -> int:
        """The index (into ``lambdas``) of the copy that predicts now."""
        errors = self._errors
        return errors.index(min(errors))  # ties to the first

    @property
    def chosen_lambda(self) -> float:
        """The lambda of the copy that predicts now."""
        return float(list(self.lambdas)[self.chosen])

    @property
    def _multiclass(self) -> bool:
        return True

    @property
    def _raw_memory_usage(self) -> int:
        """River's measure of the copies and the counts, without walking into compiled code
        (``streammkl.river._memory.memory_usage``)."""
        return memory_usage(self)

    # --- river API --------------------------------------------------------------------------
    def learn_one(self, x: Mapping, y: Any) -> None:
        self.learn_predict_one(x, y)

    def learn_predict_one(self, x: Mapping, y: Any) -> dict:
        """``predict_proba_one(x)`` *then* ``learn_one(x, y)`` in one pass over the copies (each
        copy's ``learn_predict_one``): the probabilities of the copy chosen before learning."""
        if y is None:
            raise ValueError("learn_one needs a label; got None")
        chosen = self.chosen
        discount = self.discount
        errors = []
        for learner, count in zip(self._learners, self._errors, strict=True):
            p = learner.learn_predict_one(x, y)
            errors.append(discount * count + (not p or max(p, key=p.__getitem__) != y))
            if len(errors) == chosen + 1:
                proba = p
        self._errors = errors
        return proba

    def predict_proba_one(self, x: Mapping, **kwargs: Any) -> dict:
        return self._learners[self.chosen].predict_proba_one(x)

    def predict_one(self, x: Mapping, **kwargs: Any) -> Any:
        return self._learners[self.chosen].predict_one(x)

    # --- persistence ------------------------------------------------------------------------
    def to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """(JSON-able meta, named arrays): every copy's state (``MKLClassifier.to_state``),
        the lambdas, the discount and the counts, without pickle."""
        metas, arrays = [], {}
        for i, learner in enumerate(self._learners):
            meta_i, arrays_i = learner.to_state()
            metas.append(meta_i)
            arrays.update({f"{i}.{name}": arr for name, arr in arrays_i.items()})
        meta = {
            "format": FILE_FORMAT,
            "version": FILE_VERSION,
            "class": type(self).__name__,
            "lambdas": [float(lam) for lam in self.lambdas],
            "discount": float(self.discount),
            "errors": list(self._errors),
            "learners": metas,
        }
        json.dumps(meta)  # fail here, clearly, if a label is not JSON-serialisable
        return meta, arrays

    @classmethod
    def from_state(
        cls, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]
    ) -> LambdaChoiceClassifier:
        """The learner :meth:`to_state` gave ``(meta, arrays)`` for."""
        statefile.check_header(meta, FILE_FORMAT, FILE_VERSION, "streammkl lambda choice")
        if meta.get("class") != cls.__name__:
            raise statefile.StateError(f"state holds a {meta.get('class')}, not a {cls.__name__}")
        metas, lambdas = meta["learners"], meta["lambdas"]
        if len(metas) != len(lambdas) or len(meta["errors"]) != len(lambdas):
            raise statefile.StateError("lambda choice state: one learner and count per lambda")
        learners = []
        for i, meta_i in enumerate(metas):
            prefix = f"{i}."
            arrays_i = {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}
            learners.append(MKLClassifier.from_state(meta_i, arrays_i))
        choice = cls(learners[0].clone({"regularizer": None}), lambdas, meta["discount"])
        choice._learners = learners
        choice._errors = [float(e) for e in meta["errors"]]
        return choice

    def save(self, path: str | os.PathLike) -> Path:
        """Write the learner to ``path`` (one :mod:`streammkl.statefile` file, atomically);
        returns the path."""
        return statefile.write(path, *self.to_state())

    @classmethod
    def load(cls, path: str | os.PathLike) -> LambdaChoiceClassifier:
        """The learner saved at ``path``; :class:`streammkl.statefile.StateError` (a
        ``ValueError``) for a truncated, corrupt, foreign or newer file."""
        return cls.from_state(*statefile.read(path, cls.__name__))

    @classmethod
    def _unit_test_params(cls):
        from streammkl.core import kernels

        yield {}
        yield {
            "classifier": MKLClassifier(
                kernels=(kernels.Linear(), kernels.RBF(0.5, n_components=16)), budget=None
            ),
            "lambdas": (1e-2, 1e-3, 1e-4),
            "discount": 0.9,
        }
