"""Sampling product kernels ∝ |gradient| without materialising them (Alg. 3 of Afkanpour et al.).

The kernel set is every ordered multi-index ``(r_1, ..., r_d)``, ``0 <= d <= D``, of r base kernels,
``K_{r_1..r_d} = K_{r_1} o ... o K_{r_d}`` (Hadamard products; d = 0 is the all-ones kernel).
With ``M = a a^T`` the gradient coordinate is ``g_I = -(c / rho_d^2) <M, K_I>`` (c > 0 a constant),
and ``(sum_j K_j)^{o d} = sum_{|I| = d} K_I`` gives the per-degree totals
``delta(d) = rho_d^-2 <M, S^{o d}>`` whose sum is ``||g||_1 / c``. Sampling d from delta and then
the
indices one at a time with ``pi(j) ∝ <M o K_{z_1..z_{i-1}}, S^{o (d-i)} o K_j>`` draws I with
probability exactly ``|g_I| / ||g||_1`` (§4.1 of the paper) in O(r n^2 D).

Base kernels are either a stack of Gram matrices or, for the paper's per-variable linear kernels
``k_j(x, x') = x_j x'_j``, the data matrix itself (rank-one Grams, never formed).
"""

from __future__ import annotations

import numpy as np

__all__ = ["GramBase", "LinearBase", "PolynomialSampler", "n_ordered_indices"]


def n_ordered_indices(r: int, degree: int) -> int:
    """``|I| = sum_{d=0}^D r^d`` (ordered multi-indices)."""
    return int(sum(r**d for d in range(degree + 1)))


class GramBase:
    """Base kernels given as Grams ``K`` of shape (r, n, n)."""

    def __init__(self, K: np.ndarray):
        self.K = np.ascontiguousarray(K, dtype=np.float64)
        self.r, self.n = self.K.shape[0], self.K.shape[1]
        self._flat = self.K.reshape(self.r, -1)

    def sum(self) -> np.ndarray:
        return self.K.sum(axis=0)

    def start(self, a: np.ndarray) -> np.ndarray:
        """The sampler's running matrix ``M = a a^T``."""
        return np.outer(a, a)

    def scores(self, M: np.ndarray, P: np.ndarray) -> np.ndarray:
        """``<M o P, K_j>`` for every j."""
        return self._flat @ (M * P).ravel()

    def advance(self, M: np.ndarray, j: int) -> np.ndarray:
        return M * self.K[j]

    def product(self, index: tuple[int, ...]) -> np.ndarray:
        out = np.ones((self.n, self.n))
        for j in index:
            out *= self.K[j]
        return out


class LinearBase:
    """Per-variable linear base kernels ``K_j = x_j x_j^T`` from the data matrix X (n, r)."""

    def __init__(self, X: np.ndarray):
        self.X = np.ascontiguousarray(X, dtype=np.float64)
        self.n, self.r = self.X.shape

    def sum(self) -> np.ndarray:
        return self.X @ self.X.T

    def start(self, a: np.ndarray) -> np.ndarray:
        """``M = a a^T o K_z1 o ... = b b^T`` stays rank one: keep the vector b."""
        return np.array(a, dtype=np.float64)

    def scores(self, b: np.ndarray, P: np.ndarray) -> np.ndarray:
        """``<b b^T o P, x_j x_j^T> = (b o x_j)^T P (b o x_j)`` for every j: one GEMM."""
        B = b[:, None] * self.X
        return np.einsum("ij,ij->j", P @ B, B)

    def advance(self, b: np.ndarray, j: int) -> np.ndarray:
        return b * self.X[:, j]

    def feature(self, index: tuple[int, ...], X: np.ndarray | None = None) -> np.ndarray:
        """The monomial ``prod_i x_{r_i}`` (K_I = phi phi^T)."""
        X = self.X if X is None else X
        out = np.ones(X.shape[0])
        for j in index:
            out = out * X[:, j]
        return out

    def product(self, index: tuple[int, ...]) -> np.ndarray:
        phi = self.feature(index)
        return np.outer(phi, phi)


class PolynomialSampler:
    """Alg. 3: draw a multi-index with probability ``|g_I| / ||g||_1`` given the dual vector a."""

    def __init__(self, base, degree: int, rho_squared: np.ndarray):
        self.base, self.degree = base, int(degree)
        self.rho2 = np.asarray(rho_squared, dtype=np.float64)
        S = base.sum()
        self.powers = [np.ones_like(S)]
        for _ in range(self.degree):
            self.powers.append(self.powers[-1] * S)  # S^{o d}: O(D n^2), once per fit

    def delta(self, a: np.ndarray) -> np.ndarray:
        """``delta(d) = rho_d^-2 a^T S^{o d} a``, d = 0..D (their sum is ||g||_1 / c)."""
        return np.array([a @ P @ a for P in self.powers]) / self.rho2

    def _conditional(self, Mw: np.ndarray, remaining: int) -> np.ndarray:
        pi = np.maximum(self.base.scores(Mw, self.powers[remaining]), 0.0)
        total = pi.sum()
        if not total > 0:
            return np.full(self.base.r, 1.0 / self.base.r)
        return pi / total

    def sample(self, a: np.ndarray, rng: np.random.Generator, delta=None):
        """``(index, probability)``; the probability is that of this exact ordered index."""
        delta = self.delta(a) if delta is None else delta
        p_d = np.maximum(delta, 0.0) / max(float(np.sum(np.maximum(delta, 0.0))), 1e-300)
        d = int(rng.choice(self.degree + 1, p=p_d))
        prob = float(p_d[d])
        Mw = self.base.start(a)
        index = []
        for i in range(1, d + 1):
            pi = self._conditional(Mw, d - i)
            z = int(rng.choice(self.base.r, p=pi))
            prob *= float(pi[z])
            index.append(z)
            Mw = self.base.advance(Mw, z)
        return tuple(index), prob

    def probability(self, a: np.ndarray, index: tuple[int, ...]) -> float:
        """Exact probability that ``sample`` returns ``index`` (same conditionals)."""
        delta = np.maximum(self.delta(a), 0.0)
        d = len(index)
        prob = float(delta[d] / delta.sum())
        Mw = self.base.start(a)
        for i, z in enumerate(index, start=1):
            prob *= float(self._conditional(Mw, d - i)[z])
            Mw = self.base.advance(Mw, z)
        return prob
