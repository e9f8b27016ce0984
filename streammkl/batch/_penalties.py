"""Block penalties ``sum_m g~(||f_m||)`` (and the squared block 1-norm) for the DAL solver.

Everything acts on the vector ``s`` of block norms (Prop. 1 of Martins et al.; §4.2 of Suzuki &
Tomioka): the prox of ``gamma * penalty`` maps ``s -> pi(s)`` and each block is rescaled by
``pi_m / s_m``. The inner objective needs ``H(s) = sum_m (s_m pi_m - pi_m^2 / 2) - gamma G(pi)``
(``= 1/2 ||s||^2 - Moreau envelope``; its gradient in ``s`` is ``pi``) and the Jacobian of ``pi``,
``diag(dpi) - coef * 1_A 1_A^T`` on the active set A (coef = 0 for separable penalties).

The dual side (for the duality gap) is ``sum_m g~*(||rho||_{K_m})``; for the block 1-norm the
conjugate is an indicator and the dual point is rescaled into the ball instead (§6.1).
"""

from __future__ import annotations

import numpy as np

__all__ = ["BlockLq", "ElasticNet", "Penalty", "SquaredL1", "make_penalty"]


class Penalty:
    separable = True
    sparse = True  # prox maps small norms to exactly zero

    def value(self, norms: np.ndarray) -> float:
        raise NotImplementedError

    def threshold(self, known: np.ndarray, gamma: float) -> float:
        """Lower bound on the activation threshold: ``s_m <=`` it implies ``pi_m = 0``.

        ``known`` are exact norms of some blocks (all blocks not in it are below the threshold);
        non-separable penalties use them, separable ones ignore them.
        """
        raise NotImplementedError

    def prox(self, s: np.ndarray, gamma: float) -> tuple[np.ndarray, np.ndarray, float]:
        """``(pi, dpi, coef)``: prox of the norms, diagonal Jacobian, rank-one correction."""
        raise NotImplementedError

    def envelope(self, s: np.ndarray, pi: np.ndarray, gamma: float) -> float:
        return float(np.sum(s * pi - 0.5 * pi * pi)) - gamma * self.value(pi)

    def dual_scale(self, norms: np.ndarray) -> float:
        """Divide the dual point by this (>= 1) to make the conjugate finite."""
        return 1.0

    def conjugate(self, norms: np.ndarray) -> float:
        raise NotImplementedError

    def weights(self, norms: np.ndarray) -> np.ndarray:
        """Kernel weights ``d_m`` (up to a constant), from the block norms."""
        return np.asarray(norms, dtype=float).copy()


class ElasticNet(Penalty):
    """``C ((1 - mix) s + mix s^2 / 2)`` per block; mix = 0 is the block 1-norm (eq. 4, eq. 43)."""

    def __init__(self, C: float, mix: float = 0.0):
        self.C = float(C)
        self.mix = float(mix)

    def value(self, norms):
        n = np.abs(norms)
        return self.C * ((1.0 - self.mix) * float(np.sum(n)) + 0.5 * self.mix * float(n @ n))

    def threshold(self, known, gamma):
        return gamma * self.C * (1.0 - self.mix)

    def prox(self, s, gamma):
        scale = 1.0 / (1.0 + gamma * self.C * self.mix)
        excess = s - gamma * self.C * (1.0 - self.mix)
        pi = np.maximum(0.0, excess) * scale
        return pi, np.where(excess > 0, scale, 0.0), 0.0

    def dual_scale(self, norms):
        if self.mix > 0 or norms.size == 0:
            return 1.0
        return max(1.0, float(np.max(norms)) / self.C)

    def conjugate(self, norms):
        if self.mix == 0:
            return 0.0  # after dual_scale the point is inside the ball
        ex = np.maximum(0.0, norms - self.C * (1.0 - self.mix))
        return float(ex @ ex) / (2.0 * self.C * self.mix)

    def weights(self, norms):
        n = np.abs(np.asarray(norms, dtype=float))
        return n / ((1.0 - self.mix) + self.mix * n)


class BlockLq(Penalty):
    """``(C / q) s^q`` per block (eq. 42 with ``g(x) = x^(q/2) / q``), q > 1: not sparse."""

    sparse = False

    def __init__(self, C: float, q: float):
        self.C = float(C)
        self.q = float(q)

    def value(self, norms):
        return self.C / self.q * float(np.sum(np.abs(norms) ** self.q))

    def threshold(self, known, gamma):
        return 0.0

    def prox(self, s, gamma):
        c, q = gamma * self.C, self.q
        if q == 2.0:
            pi = s / (1.0 + c)
        else:  # root of pi + c pi^(q-1) = s in [0, s]: safeguarded Newton, vectorised
            lo, hi = np.zeros_like(s), s.copy()
            pi = s / (1.0 + c)
            for _ in range(100):
                f = pi + c * pi ** (q - 1.0) - s
                lo = np.where(f < 0, pi, lo)
                hi = np.where(f > 0, pi, hi)
                with np.errstate(divide="ignore", invalid="ignore"):
                    step = pi - f / (1.0 + c * (q - 1.0) * pi ** (q - 2.0))
                bad = ~((step > lo) & (step < hi))
                new = np.where(bad, 0.5 * (lo + hi), step)
                if np.all(np.abs(new - pi) <= 1e-15 * np.maximum(s, 1e-300)):
                    pi = new
                    break
                pi = new
        with np.errstate(divide="ignore"):
            dpi = np.where(pi > 0, 1.0 / (1.0 + c * (q - 1.0) * pi ** (q - 2.0)), 0.0)
        return pi, dpi, 0.0

    def conjugate(self, norms):
        r = self.q / (self.q - 1.0)
        return float(np.sum(self.C ** (1.0 - r) * np.abs(norms) ** r / r))

    def weights(self, norms):
        return np.abs(np.asarray(norms, dtype=float)) ** (2.0 - self.q)


def _alg2(x: np.ndarray, mu: float) -> tuple[float, int]:
    """Threshold and support size of Alg. 2 (prox of ``mu/2 (sum |z|)^2``) on ``x >= 0``."""
    if x.size == 0 or mu == 0.0:
        return 0.0, int(np.sum(x > 0))
    y = np.sort(x)[::-1]
    cums = np.cumsum(y)
    j = np.arange(1, y.size + 1)
    ok = y - mu / (1.0 + j * mu) * cums > 0
    if not ok.any():
        return float(y[0]), 0
    k = int(np.nonzero(ok)[0][-1]) + 1
    return mu / (1.0 + k * mu) * float(cums[k - 1]), k


class SquaredL1(Penalty):
    """``ct/2 (sum_m s_m)^2 + cr/2 sum_m s_m^2``: the squared block 1-norm of eq. 5 (cr = 0),
    and ``streammkl.core.regularizers.ElasticNetMKL`` / ``L2`` after the 1/N conversion."""

    separable = False

    def __init__(self, ct: float, cr: float = 0.0):
        if ct <= 0 and cr <= 0:
            raise ValueError("squared block norm: need ct > 0 or cr > 0")
        self.ct = float(ct)
        self.cr = float(cr)
        self.sparse = self.ct > 0

    def value(self, norms):
        n = np.abs(norms)
        return 0.5 * self.ct * float(np.sum(n)) ** 2 + 0.5 * self.cr * float(n @ n)

    def threshold(self, known, gamma):
        shrink = 1.0 + gamma * self.cr
        tau, _ = _alg2(np.asarray(known) / shrink, gamma * self.ct / shrink)
        return tau * shrink

    def prox(self, s, gamma):
        shrink = 1.0 + gamma * self.cr
        mu = gamma * self.ct / shrink
        x = s / shrink
        tau, k = _alg2(x, mu)
        pi = np.maximum(0.0, x - tau)
        dpi = np.where(pi > 0, 1.0 / shrink, 0.0)
        coef = gamma * self.ct / (shrink * (shrink + k * gamma * self.ct)) if k else 0.0
        return pi, dpi, coef

    def conjugate(self, norms):
        u = np.abs(np.asarray(norms, dtype=float))
        if u.size == 0:
            return 0.0
        if self.cr == 0.0:
            return float(np.max(u)) ** 2 / (2.0 * self.ct)
        x = u / self.cr
        tau, _ = _alg2(x, self.ct / self.cr)
        b = np.maximum(0.0, x - tau)
        inner = 0.5 * float((b - x) @ (b - x)) + 0.5 * self.ct / self.cr * float(np.sum(b)) ** 2
        return float(u @ u) / (2.0 * self.cr) - self.cr * inner


REGULARIZERS = ("l1", "elastic_net", "lq", "squared_l1")


def make_penalty(regularizer: str, C: float, mix: float = 0.5, q: float = 1.5) -> Penalty:
    """Penalty for ``SpicyMKL(regularizer=...)``; C multiplies the summed (not averaged) loss."""
    if not (C > 0 and np.isfinite(C)):
        raise ValueError(f"C must be a finite number > 0, got {C!r}")
    key = str(regularizer).lower().replace("-", "_")
    if key in ("l1", "block_l1", "group_lasso"):
        return ElasticNet(C, 0.0)
    if key in ("elastic_net", "elasticnet"):
        if not 0.0 <= mix <= 1.0:
            raise ValueError(f"elastic_mix must be in [0, 1], got {mix!r}")
        return ElasticNet(C, mix)
    if key in ("lq", "block_lq", "q_norm"):
        if not q > 1.0:
            raise ValueError(f"q must be > 1 for the block q-norm (q = 1 is 'l1'), got {q!r}")
        return BlockLq(C, q)
    if key in ("squared_l1", "squared_group_lasso"):
        return SquaredL1(C, 0.0)
    raise ValueError(f"regularizer: unknown {regularizer!r}; expected one of {REGULARIZERS}")
