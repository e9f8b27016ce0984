"""Learning-rate schedules; each counts its own rounds and supports ``restart()`` (kernel drift).

Global schedules give every block the same step ``eta_t`` (the paper's Alg. 1): ``Constant``,
``InvSqrt``, ``InvT``. Adaptive schedules give every block its own step from the squared
gradient norms that block has received, so that blocks of very different scales (a linear
kernel on many inputs, a normalised Gaussian) each get a step that fits them:

- ``AdaGrad``: composite mirror descent (Duchi, Hazan & Singer, JMLR 2011) with one scalar per
  block, ``eta_m,t = eta0 / sqrt(delta + sum_s ||g_m,s||^2)``; the prox steps run in that
  metric (closed forms: ``core.regularizers``);
- ``FTRL``: FTRL-proximal (McMahan 2011) with the same per-block rates, on explicit blocks: the
  regularizer is applied to the accumulated gradients (``t Omega``), which zeroes a block whose
  average gradient stays below the regularizer's threshold: sparser kernel weights. Kernelized
  blocks in its bank (support vectors) take AdaGrad's step in the same round: per-block
  schedules, exact for a block-separable regularizer (see ``FTRL``).

The adaptive schedules keep their accumulators in the model's state (``OnlineMKL``); the
schedule object holds the round count and the constants.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from streammkl.core import _numba as nb
from streammkl.core._spec import Spec, build

__all__ = ["FTRL", "AdaGrad", "Constant", "InvSqrt", "InvT", "Schedule", "from_spec"]


class Schedule(Spec):
    code: int = -1
    adaptive = False  # per-block steps from the model's accumulators (no single eta_t)

    def __init__(self) -> None:
        self.t = 0  # rounds since the last restart

    @property
    def param(self) -> float:
        raise NotImplementedError

    @property
    def constants(self) -> np.ndarray:
        """The numbers the compiled round reads (the parameter; AdaGrad: eta0, delta, forget)."""
        return np.array([self.param, 0.0, 1.0])

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


class _PerBlock(Schedule):
    """What AdaGrad and FTRL share: ``eta_m,t = eta0 / sqrt(delta + sum_s ||g_m,s||^2)``."""

    adaptive = True

    def __init__(self, eta0: float = 1.0, delta: float = 1e-8):
        name = type(self).__name__
        if not (eta0 > 0 and np.isfinite(eta0)):
            raise ValueError(f"{name}: eta0 must be a finite number > 0, got {eta0!r}")
        if not (delta > 0 and np.isfinite(delta)):
            raise ValueError(f"{name}: delta must be a finite number > 0, got {delta!r}")
        super().__init__()
        self.eta0 = float(eta0)
        self.delta = float(delta)

    @property
    def param(self) -> float:
        return self.eta0

    @property
    def constants(self) -> np.ndarray:
        return np.array([self.eta0, self.delta, 1.0])

    def eta(self, t: int) -> float:
        raise TypeError(
            f"{type(self).__name__} gives every block its own step; read "
            "OnlineMKL.block_steps instead of a single eta_t"
        )

    def _etas(self, t: np.ndarray) -> np.ndarray:
        return self.eta(1)  # type: ignore[return-value]  # raises

    def params(self) -> dict[str, Any]:
        return {"eta0": self.eta0, "delta": self.delta}


class AdaGrad(_PerBlock):
    """Composite mirror descent with one AdaGrad step per block (Duchi, Hazan & Singer 2011):
    ``eta_m,t = eta0 / sqrt(delta + sum_s ||g_m,s||^2)``, prox steps in that metric.

    With a projection radius F/2 on theta, regret <= sum_m (F^2 / (2 eta0) + eta0)
    sqrt(delta + sum_t ||g_m,t||^2) (their Thm. 5, one scalar per block). ``restart()`` (drift)
    also clears the accumulators, so the next steps are large again.

    ``forget < 1`` discounts old gradients (``acc <- forget acc + ||g||^2``, as RMSProp does):
    the steps stop shrinking, at about ``eta0 sqrt(1 - forget) / ||g||``, so the learner keeps
    tracking a drifting stream; the regret bound above then no longer applies (none is
    exported).
    """

    code = nb.S_ADAGRAD

    def __init__(self, eta0: float = 1.0, delta: float = 1e-8, forget: float = 1.0):
        super().__init__(eta0, delta)
        if not 0.0 < forget <= 1.0:
            raise ValueError(f"AdaGrad: forget must be in (0, 1], got {forget!r}")
        self.forget = float(forget)

    @property
    def constants(self) -> np.ndarray:
        return np.array([self.eta0, self.delta, self.forget])

    def params(self) -> dict[str, Any]:
        return {**super().params(), "forget": self.forget}


class FTRL(_PerBlock):
    """FTRL-proximal (McMahan 2011) with AdaGrad's per-block steps, on explicit blocks.

    ``theta_t+1 = argmin <z_t, theta> + t Omega(theta) + sum_m ||theta_m||^2 / (2 eta_m,t)``
    with ``z_t`` the gradients so far minus the proximal centering terms; closed form through
    the prox of ``Omega`` on the block norms. A block stays at exactly zero while its
    accumulated gradient is below the regularizer's threshold. ``restart()`` re-centres the
    accumulated gradients on the current theta and restarts the count t (the regularizer's
    weight), keeping the steps.

    **Per-block schedules.** A kernelized block (a support set: ``RBF(gamma)``,
    ``MedianRBF(scale, n_components=None)``, ...) has no accumulated gradient to keep: in a bank
    with one, the explicit blocks take FTRL and every kernelized block AdaGrad's composite
    mirror descent (a new support vector with coefficient ``eta_m v``, then the prox of
    ``Omega`` in the metric ``eta_m``), in the same round and at the same per-block rates. This
    is exact, not an approximation of either, when the regularizer is block-separable,
    ``Omega(theta) = sum_m omega_m(||theta_m||)`` (``GroupLasso``, ``L2``, ``GroupLq``, and
    tuples of them): the loss gradient is taken once at theta_t, and both updates are then sums
    of one problem per block, so each block's proximal step is independent of the others'. A
    penalty that couples blocks (``SquaredGroupLasso``, ``ElasticNetMKL``: ``(sum_m
    ||theta_m||)^2``; ``OverlappingGroupLasso``'s groups; a ``Ball`` or the projection
    ``radius``) would weigh the explicit blocks' norms by ``t`` and the kernelized ones' by 1
    in one prox: refused at construction (use ``AdaGrad`` for the whole bank). A restart
    re-centres the explicit blocks' duals and leaves the support sets as they are.
    """

    code = nb.S_FTRL


_TYPES: dict[str, type[Schedule]] = {
    c.__name__: c for c in (Constant, InvSqrt, InvT, AdaGrad, FTRL)
}


def from_spec(spec: Mapping[str, Any] | Schedule) -> Schedule:
    """Build a schedule from ``{"type": "InvSqrt", "eta0": 1.0}`` (a fresh one, t = 0)."""
    return build(spec, Schedule, _TYPES, "schedule")
