"""Losses as SpicyMKL's inner problem sees them: conjugates and augmented-Lagrangian terms.

The inner objective of one outer step (eq. 25 of Suzuki & Tomioka) is a function of the dual
vector ``rho``. Every loss contributes a separable term ``psi(rho) = sum_i psi_i(rho_i)``:

* logistic: ``psi = L*(-rho)``, the negative entropy of ``s = y rho`` in (0, 1) (eq. 16); the
  Newton line search keeps ``s`` inside the open interval;
* squared ``(y - z)^2 / 2``: ``psi = -y rho + rho^2 / 2``;
* hinge: the slack augmented Lagrangian of §3.4.1 (eq. 32). The box ``0 <= y rho <= 1`` is relaxed
  with multipliers ``xi`` (primal hinge slacks) and ``zeta``, updated after every inner solve
  (eqs. 30-31);
* epsilon-insensitive: §3.4.2 with the conjugate ``-y rho + eps |rho|`` on ``|rho| <= 1`` written as
  ``min_t {eps t : t >= rho, t >= -rho}``; four constraints, four multiplier vectors; ``t`` is
  eliminated in closed form. The signs are derived here with every constraint written as
  ``c(rho, t) <= 0`` and updated as ``xi <- max(0, xi + gamma c)`` (the printed eq. 40 and Table 2
  disagree on a sign).

All losses use the primal convention of ``streammkl.core.losses``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["DAL_LOSSES", "DalLoss", "make_loss"]


def _xlogx(s: np.ndarray) -> np.ndarray:
    out = np.zeros_like(s)
    pos = s > 0
    out[pos] = s[pos] * np.log(s[pos])
    return out


class DalLoss:
    """Interface; ``y`` is the label vector (+/-1 for classification)."""

    name = ""
    classification = True
    n_multipliers = 0  # rows of the augmented-Lagrangian state
    free_domain = False  # L* finite everywhere (the gap centres rho instead of rescaling)

    def primal(self, z: np.ndarray, y: np.ndarray) -> float:
        raise NotImplementedError

    def init_rho(self, y: np.ndarray) -> np.ndarray:
        """``-loss'(y, 0)``: the dual point of the all-zero primal start."""
        return np.zeros_like(y)

    def init_state(self, n: int) -> np.ndarray:
        return np.zeros((self.n_multipliers, n))

    def inner(
        self, rho: np.ndarray, y: np.ndarray, state: np.ndarray, gamma: float
    ) -> tuple[float, np.ndarray, np.ndarray]:
        """``(psi(rho), grad psi, diag of the (generalised) Hessian)``."""
        raise NotImplementedError

    def max_step(self, rho: np.ndarray, d: np.ndarray, y: np.ndarray) -> float:
        """Largest c with ``rho + c d`` strictly inside the domain of psi (inf if unbounded)."""
        return np.inf

    def update_state(
        self, rho: np.ndarray, y: np.ndarray, state: np.ndarray, gamma: float
    ) -> np.ndarray:
        return state

    def project_domain(self, rho: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Clip rho into the closed domain of ``L*(-rho)`` (for the dual point of the gap)."""
        return rho

    def dual(self, rho: np.ndarray, y: np.ndarray) -> float:
        """``-L*(-rho)`` at a point of the domain."""
        raise NotImplementedError


class Logistic(DalLoss):
    name = "logistic"

    def primal(self, z, y):
        return float(np.sum(np.logaddexp(0.0, -y * z)))

    def init_rho(self, y):
        return 0.5 * y

    def inner(self, rho, y, state, gamma):
        s = y * rho
        ls, l1s = np.log(s), np.log1p(-s)
        value = float(np.sum(s * ls + (1.0 - s) * l1s))
        return value, y * (ls - l1s), 1.0 / (s * (1.0 - s))

    def max_step(self, rho, d, y):
        s, ds = y * rho, y * d
        with np.errstate(divide="ignore"):
            up = np.where(ds > 0, (1.0 - s) / ds, np.inf)
            down = np.where(ds < 0, -s / ds, np.inf)
        return float(min(up.min(initial=np.inf), down.min(initial=np.inf)))

    def project_domain(self, rho, y):
        return y * np.clip(y * rho, 0.0, 1.0)

    def dual(self, rho, y):
        s = np.clip(y * rho, 0.0, 1.0)
        return -float(np.sum(_xlogx(s) + _xlogx(1.0 - s)))


class Squared(DalLoss):
    name = "squared"
    classification = False
    free_domain = True

    def primal(self, z, y):
        return 0.5 * float(np.sum((y - z) ** 2))

    def init_rho(self, y):
        return y.astype(float).copy()

    def inner(self, rho, y, state, gamma):
        return float(np.sum(0.5 * rho * rho - y * rho)), rho - y, np.ones_like(rho)

    def dual(self, rho, y):
        return float(np.sum(y * rho - 0.5 * rho * rho))


class Hinge(DalLoss):
    """State rows: ``xi`` (multiplier of ``y rho - 1 <= 0``), ``zeta`` (of ``-y rho <= 0``)."""

    name = "hinge"
    n_multipliers = 2

    def primal(self, z, y):
        return float(np.sum(np.maximum(0.0, 1.0 - y * z)))

    def init_rho(self, y):
        return y.astype(float).copy()

    def inner(self, rho, y, state, gamma):
        s = y * rho
        e1 = np.maximum(0.0, state[0] + gamma * (s - 1.0))
        e2 = np.maximum(0.0, state[1] - gamma * s)
        value = float(np.sum(-s) + (np.sum(e1 * e1) + np.sum(e2 * e2)) / (2.0 * gamma))
        hess = gamma * ((e1 > 0).astype(float) + (e2 > 0))
        return value, y * (e1 - e2 - 1.0), hess

    def update_state(self, rho, y, state, gamma):
        s = y * rho
        return np.stack(
            [np.maximum(0.0, state[0] + gamma * (s - 1.0)), np.maximum(0.0, state[1] - gamma * s)]
        )

    def project_domain(self, rho, y):
        return y * np.clip(y * rho, 0.0, 1.0)

    def dual(self, rho, y):
        return float(np.sum(y * rho))


class EpsilonInsensitive(DalLoss):
    """State rows: multipliers of ``rho - 1``, ``-rho - 1``, ``rho - t``, ``-rho - t`` (<= 0)."""

    name = "epsilon_insensitive"
    classification = False
    n_multipliers = 4

    def __init__(self, eps: float = 0.1):
        if not (eps >= 0 and np.isfinite(eps)):
            raise ValueError(f"epsilon-insensitive loss: eps must be finite and >= 0, got {eps!r}")
        self.eps = float(eps)

    def primal(self, z, y):
        return float(np.sum(np.maximum(0.0, np.abs(y - z) - self.eps)))

    def init_rho(self, y):
        return np.where(np.abs(y) > self.eps, np.sign(y), 0.0)

    def _t_terms(self, rho, state, gamma):
        """Excesses ``e3, e4`` of the two |rho| constraints at the optimal t, and ``gamma t``."""
        eps = self.eps
        a = state[2] + gamma * rho
        c = state[3] - gamma * rho
        if eps == 0.0:  # eps |rho| vanishes: the t-constraints are inactive at t -> infinity
            z = np.zeros_like(rho)
            return z, z, np.zeros_like(rho, dtype=bool), z
        both = np.abs(a - c) < eps
        tau = np.where(both, 0.5 * (a + c - eps), np.maximum(a, c) - eps)  # tau = gamma t
        e3 = np.maximum(0.0, a - tau)
        e4 = np.maximum(0.0, c - tau)
        return e3, e4, both, tau

    def inner(self, rho, y, state, gamma):
        eps = self.eps
        e1 = np.maximum(0.0, state[0] + gamma * (rho - 1.0))
        e2 = np.maximum(0.0, state[1] - gamma * (rho + 1.0))
        e3, e4, both, tau = self._t_terms(rho, state, gamma)
        # r(rho) = min_t eps t + (1/2g)[(a - g t)_+^2 + (c - g t)_+^2]; e3, e4 are the excesses
        r = (eps * tau + 0.5 * (e3 * e3 + e4 * e4)) / gamma
        value = float(np.sum(-y * rho + r) + (np.sum(e1 * e1) + np.sum(e2 * e2)) / (2 * gamma))
        grad = -y + e1 - e2 + e3 - e4
        hess = gamma * ((e1 > 0).astype(float) + (e2 > 0) + 2.0 * both)
        return value, grad, hess

    def update_state(self, rho, y, state, gamma):
        e3, e4, _, _ = self._t_terms(rho, state, gamma)
        return np.stack(
            [
                np.maximum(0.0, state[0] + gamma * (rho - 1.0)),
                np.maximum(0.0, state[1] - gamma * (rho + 1.0)),
                e3,
                e4,
            ]
        )

    def project_domain(self, rho, y):
        return np.clip(rho, -1.0, 1.0)

    def dual(self, rho, y):
        return float(np.sum(y * rho - self.eps * np.abs(rho)))


DAL_LOSSES = ("logistic", "hinge", "squared", "epsilon_insensitive")


def make_loss(loss: object, epsilon: float = 0.1) -> DalLoss:
    """Map a name (``DAL_LOSSES``) or a ``streammkl.core.losses`` object to a DAL loss."""
    if isinstance(loss, DalLoss):
        return loss
    if not isinstance(loss, str):
        kind = type(loss).__name__
        if kind == "EpsilonInsensitive":
            return EpsilonInsensitive(float(loss.eps))  # type: ignore[attr-defined]
        table = {"Logistic": "logistic", "Hinge": "hinge", "Squared": "squared"}
        if kind not in table:
            raise ValueError(
                f"loss: {kind} is not supported by the batch solver; use one of Logistic, Hinge, "
                "Squared, EpsilonInsensitive (or the names " + ", ".join(DAL_LOSSES) + ")"
            )
        loss = table[kind]
    key = str(loss).lower().replace("-", "_")
    if key in ("eps_insensitive", "epsilon", "svr"):
        key = "epsilon_insensitive"
    if key == "logistic":
        return Logistic()
    if key == "hinge":
        return Hinge()
    if key == "squared":
        return Squared()
    if key == "epsilon_insensitive":
        return EpsilonInsensitive(epsilon)
    raise ValueError(f"loss: unknown loss {loss!r}; expected one of {DAL_LOSSES}")
