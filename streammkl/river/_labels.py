"""The classes of :class:`~streammkl.river.MKLClassifier` and their map to the core: labels in
registration order become the core's targets, the core's scores become labels and probabilities."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from streammkl.core import losses as losses_mod
from streammkl.labels import check_label
from streammkl.river._probas import probas_of_rows, two_class_probas


class LabelMap:
    """The class registry of a classifier (``classes_`` in the order met, ``_class_index``) and
    the conversions between labels, the core's targets and the core's scores. The classifier
    sets ``loss``, ``classes_`` and ``_class_index`` in its ``__init__``."""

    loss: Any
    classes_: list
    _class_index: dict

    @property
    def _binary_loss(self) -> bool:
        return self._loss_shape()[0]

    def _loss_shape(self) -> tuple[bool, float]:
        """(binary loss, scale from the score to the logit) of the constructor's ``loss``;
        cached per loss object (building it from its spec costs microseconds per call)."""
        cached = self.__dict__.get("_loss_shape_cache")
        if cached is not None and cached[0] is self.loss:
            return cached[1]
        if self.loss is None:
            shape = (False, 1.0)
        else:
            loss = losses_mod.from_spec(self.loss)
            shape = (loss.task == "binary", 1.0 if isinstance(loss, losses_mod.Logistic) else 2.0)
        self.__dict__["_loss_shape_cache"] = (self.loss, shape)
        return shape

    def _register(self, y: Any) -> int:
        y = plain_label(y)
        check_label(y)  # NaN would be a new class at every call
        if y not in self._class_index:
            new = [False, True] if isinstance(y, bool) else [y]
            for label in new:
                if label not in self._class_index:
                    if self._binary_loss and len(self.classes_) == 2:
                        raise ValueError(
                            f"a third class {label!r} arrived but loss {self.loss!r} is binary; "
                            "use loss=None (multiclass hinge) or Softmax()"
                        )
                    self._class_index[label] = len(self.classes_)
                    self.classes_.append(label)
        return self._class_index[y]

    def declare_classes(self, labels: Sequence[Any]) -> None:
        """Register labels (in this order) before they are met, so that learners that must
        agree on the class order (the members of a group) do."""
        for label in labels:
            self._register(label)

    def core_target(self, label: Any) -> float:
        """The core's target for a known class (+-1 for a binary loss, else its index)."""
        k = self._class_index[label]
        return (1.0 if k == 1 else -1.0) if self._binary_loss else float(k)

    def label_of(self, scores: np.ndarray) -> Any:
        """The class ``predict_one`` gives for the core's scores (a row of ``decision_many``)."""
        if self._binary_loss:
            if len(self.classes_) == 2:
                return self.classes_[1] if scores[0] > 0 else self.classes_[0]
            return self.classes_[0]
        return self.classes_[int(np.argmax(scores[: len(self.classes_)]))]

    def known_class(self, y: Any) -> bool:
        """Whether ``y`` is a class the learner has seen (``learn_one`` would not add one)."""
        return plain_label(y) in self._class_index

    def _proba(self, fx: list[float]) -> dict:
        """Probabilities from the core's scores (Python floats: the same digits for one example
        or for a row of :meth:`learn_predict_many`)."""
        return self._probas([fx])[0]

    def _probas(self, rows: list[list[float]]) -> list[dict]:
        """:meth:`_proba` of every row (the one formula: :func:`probas_of_rows`)."""
        binary, scale = self._loss_shape()
        return probas_of_rows(self.classes_, binary, scale, rows)

    def probas_from_scores(self, scores: np.ndarray) -> list[dict]:
        """``predict_proba_one``'s probabilities from rows of scores (:meth:`run_rounds`)."""
        pair = self.two_class_probas(scores)
        if pair is None:
            return self._probas(scores.tolist())
        return self.probas_from_pair(*pair)

    def probas_from_pair(self, p0: np.ndarray, p1: np.ndarray) -> list[dict]:
        """The probability dicts of :meth:`two_class_probas`'s arrays (two classes known)."""
        c0, c1 = self.classes_
        return [{c0: a, c1: b} for a, b in zip(p0.tolist(), p1.tolist(), strict=True)]

    def two_class_probas(self, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """For two classes, the probabilities of each (arrays) from rows of scores, computed in
        one compiled loop (the numbers of :meth:`_probas`); ``None`` otherwise."""
        binary, scale = self._loss_shape()
        if len(self.classes_) != 2 or scores.ndim != 2 or scores.shape[1] < (1 if binary else 2):
            return None
        return two_class_probas(scores, binary, scale)


def plain_label(y: Any) -> Any:
    """numpy scalars -> Python scalars, so labels compare, hash and serialise predictably."""
    if isinstance(y, np.generic):
        return y.item()
    return y
