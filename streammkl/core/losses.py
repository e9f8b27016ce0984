"""Losses of the scores: value, subgradient, Lipschitz constant (w.r.t. the scores).

Binary losses take ``y`` in {-1, +1}; regression losses a float; multiclass losses an integer class
index. The compiled round (``_numba.loss_grad``) uses the integer ``code`` and ``param``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from streammkl.core import _numba as nb
from streammkl.core._spec import Spec, build

__all__ = [
    "EpsilonInsensitive",
    "Hinge",
    "Huber",
    "Logistic",
    "Loss",
    "MulticlassHinge",
    "Softmax",
    "Squared",
    "from_spec",
]


class Loss(Spec):
    code: int = -1
    task: str = "binary"  # "binary" | "regression" | "multiclass"

    @property
    def param(self) -> float:
        return 0.0

    @property
    def multiclass(self) -> bool:
        return self.task == "multiclass"

    @property
    def lipschitz(self) -> float | None:
        """Lipschitz constant of the loss w.r.t. the score vector (None if unbounded)."""
        return 1.0

    def value_grad(self, scores: np.ndarray, y: float) -> tuple[float, np.ndarray]:
        """``(L(scores, y), dL/dscores)``; a multiclass ``y`` must index ``scores``."""
        scores = np.ascontiguousarray(np.atleast_1d(scores), dtype=np.float64)
        if self.multiclass and not (0 <= y < scores.shape[0] and float(y).is_integer()):
            raise ValueError(f"class index {y!r} outside the {scores.shape[0]} scores")
        v = np.empty_like(scores)
        loss = nb.loss_grad(self.code, self.param, scores, float(y), v)
        return loss, -v

    def value(self, scores: np.ndarray, y: float) -> float:
        return self.value_grad(scores, y)[0]

    def gradient(self, scores: np.ndarray, y: float) -> np.ndarray:
        return self.value_grad(scores, y)[1]

    def params(self) -> dict[str, Any]:
        return {}


class Hinge(Loss):
    """``max(0, 1 - y f)``, y in {-1, +1}."""

    code = nb.L_HINGE


class Logistic(Loss):
    """``log(1 + exp(-y f))``, y in {-1, +1}."""

    code = nb.L_LOGISTIC


class Squared(Loss):
    """``(y - f)^2 / 2``."""

    code = nb.L_SQUARED
    task = "regression"

    @property
    def lipschitz(self) -> float | None:
        return None


class EpsilonInsensitive(Loss):
    """``max(0, |y - f| - eps)``."""

    code = nb.L_EPS
    task = "regression"

    def __init__(self, eps: float = 0.1):
        if eps < 0:
            raise ValueError(f"EpsilonInsensitive: eps must be >= 0, got {eps!r}")
        self.eps = float(eps)

    @property
    def param(self) -> float:
        return self.eps

    def params(self) -> dict[str, Any]:
        return {"eps": self.eps}


class Huber(Loss):
    """Quadratic within ``delta`` of the target, linear beyond."""

    code = nb.L_HUBER
    task = "regression"

    def __init__(self, delta: float = 1.0):
        if not delta > 0:
            raise ValueError(f"Huber: delta must be > 0, got {delta!r}")
        self.delta = float(delta)

    @property
    def param(self) -> float:
        return self.delta

    @property
    def lipschitz(self) -> float | None:
        return self.delta

    def params(self) -> dict[str, Any]:
        return {"delta": self.delta}


class MulticlassHinge(Loss):
    """Crammer-Singer: ``max_k (f_k + [k != y]) - f_y`` (0/1 cost, loss-augmented argmax)."""

    code = nb.L_MC_HINGE
    task = "multiclass"

    @property
    def lipschitz(self) -> float | None:
        return math.sqrt(2.0)


class Softmax(Loss):
    """Multinomial logistic: ``log sum_k exp(f_k) - f_y``."""

    code = nb.L_SOFTMAX
    task = "multiclass"

    @property
    def lipschitz(self) -> float | None:
        return math.sqrt(2.0)


_TYPES: dict[str, type[Loss]] = {
    c.__name__: c
    for c in (Hinge, Logistic, Squared, EpsilonInsensitive, Huber, MulticlassHinge, Softmax)
}


def from_spec(spec: Mapping[str, Any] | Loss) -> Loss:
    """Build a loss from ``{"type": "Huber", "delta": 1.0}``."""
    return build(spec, Loss, _TYPES, "loss")
