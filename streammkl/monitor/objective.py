"""The cumulative online objective ``sum_t [lambda Omega(theta_t) + L(theta_t; x_t, y_t)]``.

Prequential: each term is evaluated at theta_t, the model *before* its update on (x_t, y_t) —
``loss = model.learn(x, y)`` returns exactly that loss, and ``reg = model.regularization_value()``
read just before ``learn`` is ``lambda Omega(theta_t)``. This is the first term of the regret
([001] eq 14); the second (the hindsight minimum) is estimated in :mod:`streammkl.monitor.regret`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np


class OnlineObjective:
    """Accumulator fed with ``(loss, reg)`` per example, O(1).

    Non-finite terms (a diverged model) are not added: they are counted in ``n_nonfinite`` so the
    totals stay usable and the problem stays visible.

    Examples
    --------
    >>> acc = OnlineObjective()
    >>> for loss, reg in [(1.0, 0.0), (0.5, 0.1), (float("nan"), 0.2)]:
    ...     _ = acc.update(loss, reg)
    >>> acc.n, acc.loss, round(acc.total, 6), acc.n_nonfinite
    (2, 1.5, 1.6, 1)
    """

    def __init__(self) -> None:
        self.n = 0
        self.loss = 0.0
        self.regularization = 0.0
        self.n_nonfinite = 0

    def update(self, loss: float, reg: float) -> bool:
        """Add one prequential term; returns False (and counts it) if it is not finite."""
        loss, reg = float(loss), float(reg)
        if not (math.isfinite(loss) and math.isfinite(reg)):
            self.n_nonfinite += 1
            return False
        self.n += 1
        self.loss += loss
        self.regularization += reg
        return True

    def update_many(self, losses: np.ndarray, regs: np.ndarray) -> None:
        """:meth:`update` of each pair ``losses[i], regs[i]``, in order: the same totals to the
        last bit (the terms added one after the other)."""
        ls, rs = np.asarray(losses, dtype=np.float64).tolist(), np.asarray(regs).tolist()
        loss, reg = self.loss, self.regularization
        for v in ls:
            loss += v
        for v in rs:
            reg += v
        if math.isfinite(loss) and math.isfinite(reg):  # then every term was finite
            self.n += len(ls)
            self.loss, self.regularization = loss, reg
            return
        for v, r in zip(ls, rs, strict=True):
            self.update(v, r)

    @property
    def total(self) -> float:
        """``sum_t [lambda Omega(theta_t) + L(theta_t)]`` over the finite terms."""
        return self.loss + self.regularization

    @property
    def mean(self) -> float:
        """Average objective term (NaN before any)."""
        return self.total / self.n if self.n else math.nan

    def to_state(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "loss": self.loss,
            "regularization": self.regularization,
            "n_nonfinite": self.n_nonfinite,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> OnlineObjective:
        acc = cls()
        acc.n = int(state["n"])
        acc.loss = float(state["loss"])
        acc.regularization = float(state["regularization"])
        acc.n_nonfinite = int(state.get("n_nonfinite", 0))
        return acc
