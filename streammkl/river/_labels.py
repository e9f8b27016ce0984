"""The classes of :class:`~streammkl.river.MKLClassifier` and their map to the core: labels in
registration order become the core's targets, the core's scores become labels and probabilities.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from streammkl.core import losses as losses_mod
from streammkl.labels import check_label
from streammkl.river._probas import probas_of_rows, two_class_probas

_exp = math.exp  # (one global read per call instead of a global and an attribute)


def _softmax_of_two(c0: Any, c1: Any, fx: list[float]) -> dict[Any, float]:
    """The probabilities of the two classes ``c0``, ``c1`` of a multiclass loss from their
    scores ``fx[0]``, ``fx[1]``: :func:`probas_of_rows`' formula for two classes (the same
    operations)."""
    a, b = fx[0], fx[1]
    top = a if a >= b else b
    ea, eb = _exp(a - top), _exp(b - top)
    total = ea + eb
    return {c0: ea / total, c1: eb / total}


class Classes:
    """The class registry of a classifier: ``labels`` in the order met and the conversions
    between labels, the core's targets and the core's scores.

    Parameters
    ----------
    owner
        The classifier: its ``loss`` parameter (None, a loss or its spec) is read when needed
        (a binary loss, ``Hinge`` or ``Logistic``, has one score and admits two classes; the
        others one score per class).
    labels
        The list to register labels in (the classifier's ``classes_``, shared, appended to).
    """

    def __init__(self, owner: Any, labels: list[Any]) -> None:
        self.owner = owner
        self.labels = labels
        self.index: dict[Any, int] = {c: i for i, c in enumerate(labels)}
        self._shape_of: tuple[Any, tuple[bool, float]] | None = None
        #: Called when a label is registered (whoever holds a :meth:`proba_function` of the
        #: labels before drops it); not pickled.
        self.on_register: Callable[[], None] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["on_register"]  # (its owner's: set again by it)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        # (the names interned, as pickle's default does: a pickle of the copy is the same bytes)
        self.__dict__.update({sys.intern(k): v for k, v in state.items()})
        self.on_register = None

    def __len__(self) -> int:
        return len(self.labels)

    def shape(self) -> tuple[bool, float]:
        """(binary loss, scale from the score to the logit) of ``loss``; cached per loss object
        (building it from its spec costs microseconds per call)."""
        spec = self.owner.loss
        cached = self._shape_of
        if cached is not None and cached[0] is spec:
            return cached[1]
        if spec is None:
            shape = (False, 1.0)
        else:
            loss = losses_mod.from_spec(spec)
            shape = (loss.task == "binary", 1.0 if isinstance(loss, losses_mod.Logistic) else 2.0)
        self._shape_of = (spec, shape)
        return shape

    @property
    def binary(self) -> bool:
        """Whether the loss is binary (one score; the second class is the positive one)."""
        return self.shape()[0]

    def register(self, y: Any) -> int:
        """The index of class ``y``, registering it (and, for a boolean, both booleans) when new;
        a third class under a binary loss is refused (nothing registered)."""
        y = plain_label(y)
        check_label(y)  # NaN would be a new class at every call
        if y not in self.index:
            new = [False, True] if isinstance(y, bool) else [y]
            for label in new:
                if label not in self.index:
                    if self.binary and len(self.labels) == 2:
                        raise ValueError(
                            f"a third class {label!r} arrived but loss {self.owner.loss!r} is "
                            "binary; use loss=None (multiclass hinge) or Softmax()"
                        )
                    self.index[label] = len(self.labels)
                    self.labels.append(label)
                    if self.on_register is not None:
                        self.on_register()
        return self.index[y]

    def declare(self, labels: Sequence[Any]) -> None:
        """Register labels (in this order) before they are met, so that learners that must
        agree on the class order (the members of a group) do."""
        for label in labels:
            self.register(label)

    def known(self, y: Any) -> bool:
        """Whether ``y`` is a registered class (learning it would register nothing)."""
        return plain_label(y) in self.index

    def target_of(self, k: int) -> float:
        """The core's target for class index ``k`` (+-1 for a binary loss, else ``k``)."""
        return (1.0 if k == 1 else -1.0) if self.binary else float(k)

    def target(self, label: Any) -> float:
        """The core's target for a registered class."""
        return self.target_of(self.index[plain_label(label)])

    def label_of(self, scores: np.ndarray) -> Any:
        """The class ``predict_one`` gives for the core's scores (a row of ``decision_many``)."""
        labels = self.labels
        if self.binary:
            if len(labels) == 2:
                return labels[1] if scores[0] > 0 else labels[0]
            return labels[0]
        if len(labels) == 2:  # np.argmax of two scores by two comparisons (timeit: 2.7 -> 0.2 µs)
            s0, s1 = scores[0], scores[1]  # (its ties and NaN: the first; a NaN beats a number)
            return labels[1] if s1 > s0 or (s1 != s1 and s0 == s0) else labels[0]
        return labels[int(np.argmax(scores[: len(labels)]))]

    def proba(self, fx: list[float]) -> dict[Any, float]:
        """Probabilities from the core's scores (Python floats: the same digits for one example
        or for a row of a compiled run); two classes of a multiclass loss inline the formula of
        :func:`probas_of_rows` (the same operations)."""
        labels = self.labels
        cached = self._shape_of  # (``shape()`` read inline while the loss object stays)
        shape = cached[1] if cached is not None and cached[0] is self.owner.loss else self.shape()
        if len(labels) == 2 and not shape[0]:
            c0, c1 = labels
            return _softmax_of_two(c0, c1, fx)
        return self.probas([fx])[0]

    def proba_function(self) -> Callable[[list[float]], dict[Any, float]]:
        """:meth:`proba` for the labels and the loss now, as one callable (two classes of a
        multiclass loss: their formula with the labels bound): valid until a label is
        registered (:attr:`on_register`) or the labels are replaced."""
        labels = self.labels
        if len(labels) == 2 and not self.shape()[0]:
            return partial(_softmax_of_two, *labels)
        return self.proba

    def softmax_pair(self) -> tuple[Any, Any] | None:
        """The two labels when :meth:`proba_function` is the softmax of the first two scores
        (two classes of a multiclass loss), for a caller that computes it in compiled code
        (the same operations); else None. Valid as :meth:`proba_function`."""
        labels = self.labels
        if len(labels) == 2 and not self.shape()[0]:
            return labels[0], labels[1]
        return None

    def core_targets(self) -> dict[Any, float]:
        """The core's target of every registered label (:meth:`target_of` of its index), for
        the labels now (valid as :meth:`proba_function`)."""
        return {label: self.target_of(k) for label, k in self.index.items()}

    def probas(self, rows: list[list[float]]) -> list[dict[Any, float]]:
        """:meth:`proba` of every row (the one formula: :func:`probas_of_rows`)."""
        binary, scale = self.shape()
        return probas_of_rows(self.labels, binary, scale, rows)

    def probas_of_scores(self, scores: np.ndarray) -> list[dict[Any, float]]:
        """The probabilities of rows of scores (a compiled run's), through the compiled
        two-class formula when it applies (the same numbers)."""
        pair = self.two_class(scores)
        if pair is None:
            return self.probas(scores.tolist())
        return self.probas_of_pair(*pair)

    def probas_of_pair(self, p0: np.ndarray, p1: np.ndarray) -> list[dict[Any, float]]:
        """The probability dicts of :meth:`two_class`'s arrays (two classes known)."""
        c0, c1 = self.labels
        return [{c0: a, c1: b} for a, b in zip(p0.tolist(), p1.tolist(), strict=True)]

    def predictions_of_pair(
        self, p0: np.ndarray, p1: np.ndarray
    ) -> list[tuple[Any, dict[Any, float]]]:
        """``(predict_one, predict_proba_one)`` of each row of :meth:`two_class`'s arrays: the
        first most probable class (the second only when strictly more probable) and the
        probability dict, made in one pass (no second loop over the dicts to find the maximum)."""
        c0, c1 = self.labels
        return [(c1 if b > a else c0, {c0: a, c1: b})
                for a, b in zip(p0.tolist(), p1.tolist(), strict=True)]  # fmt: skip

    def two_class(self, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """For two classes, the probabilities of each (arrays) from rows of scores, computed in
        one compiled loop (the numbers of :meth:`probas`); ``None`` otherwise."""
        binary, scale = self.shape()
        if len(self.labels) != 2 or scores.ndim != 2 or scores.shape[1] < (1 if binary else 2):
            return None
        return two_class_probas(scores, binary, scale)


def plain_label(y: Any) -> Any:
    """numpy scalars -> Python scalars, so labels compare, hash and serialise predictably."""
    if isinstance(y, np.generic):
        return y.item()
    return y
