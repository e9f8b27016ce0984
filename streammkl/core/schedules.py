"""Learning-rate schedules; each counts its own rounds and supports ``restart()`` (kernel drift)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from streammkl.core import _numba as nb
from streammkl.core._spec import Spec, build

__all__ = ["Constant", "InvSqrt", "InvT", "Schedule", "from_spec"]


class Schedule(Spec):
    code: int = -1

    def __init__(self) -> None:
        self.t = 0  # rounds since the last restart

    @property
    def param(self) -> float:
        raise NotImplementedError

    def eta(self, t: int) -> float:
        """Learning rate of round ``t >= 1`` (counted from the last restart)."""
        if t < 1:
            raise ValueError(f"round numbers start at 1, got {t}")
        return float(nb.schedule_eta(self.code, self.param, t))

    def etas(self, first: int, n: int) -> np.ndarray:
        """``eta(first), eta(first + 1), ...``: n learning rates at once (the same numbers as
        :meth:`eta`, vectorised; ``tests/test_monitor_runs.py`` checks it)."""
        if first < 1:
            raise ValueError(f"round numbers start at 1, got {first}")
        return self._etas(np.arange(first, first + n, dtype=np.float64))

    def _etas(self, t: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def step(self) -> float:
        """Advance one round and return its learning rate."""
        self.t += 1
        return self.eta(self.t)

    def restart(self) -> None:
        """Start the schedule again (e.g. after a detected drift): the next round is t = 1."""
        self.t = 0

    def params(self) -> dict[str, Any]:
        raise NotImplementedError


class Constant(Schedule):
    """``eta_t = eta`` — tracks drift; regret O(T) against a fixed comparator unless tuned to T."""

    code = nb.S_CONSTANT

    def __init__(self, eta: float = 0.1):
        if not eta > 0:
            raise ValueError(f"Constant: eta must be > 0, got {eta!r}")
        super().__init__()
        self.eta0 = float(eta)

    @property
    def param(self) -> float:
        return self.eta0

    def _etas(self, t: np.ndarray) -> np.ndarray:
        return np.full(t.shape, self.eta0)

    def params(self) -> dict[str, Any]:
        return {"eta": self.eta0}


class InvSqrt(Schedule):
    """``eta_t = eta0 / sqrt(t)`` — Prop. 3.2: regret <= (F^2/(2 eta0) + G^2 eta0) sqrt(T)."""

    code = nb.S_INVSQRT

    def __init__(self, eta0: float = 1.0):
        if not eta0 > 0:
            raise ValueError(f"InvSqrt: eta0 must be > 0, got {eta0!r}")
        super().__init__()
        self.eta0 = float(eta0)

    @property
    def param(self) -> float:
        return self.eta0

    def _etas(self, t: np.ndarray) -> np.ndarray:
        return self.eta0 / np.sqrt(t)

    def params(self) -> dict[str, Any]:
        return {"eta0": self.eta0}


class InvT(Schedule):
    """``eta_t = 1 / (sigma t)`` for sigma-strongly convex objectives (Pegasos: sigma = lambda)."""

    code = nb.S_INVT

    def __init__(self, sigma: float = 1.0):
        if not sigma > 0:
            raise ValueError(f"InvT: sigma must be > 0, got {sigma!r}")
        super().__init__()
        self.sigma = float(sigma)

    @property
    def param(self) -> float:
        return self.sigma

    def _etas(self, t: np.ndarray) -> np.ndarray:
        return 1.0 / (self.sigma * t)

    def params(self) -> dict[str, Any]:
        return {"sigma": self.sigma}


_TYPES: dict[str, type[Schedule]] = {c.__name__: c for c in (Constant, InvSqrt, InvT)}


def from_spec(spec: Mapping[str, Any] | Schedule) -> Schedule:
    """Build a schedule from ``{"type": "InvSqrt", "eta0": 1.0}`` (a fresh one, t = 0)."""
    return build(spec, Schedule, _TYPES, "schedule")
