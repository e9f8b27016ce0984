"""The same objective as ``RandomizedMKL`` with every product kernel explicit (the Kloft baseline).

All ``C(r + D, D)`` distinct monomial kernels of the per-variable linear base kernels are formed as
features (``K_u = phi_u phi_u^T``, so memory is ``n x C(r+D, D)``, not ``C(r+D, D)`` Gram matrices),
and J is minimised by exact alternating minimisation (block coordinate descent on the jointly
convex ``J(w, theta)``): kernel ridge for w, then the closed form
``theta_u ∝ (rho_u ||w_u||)^(2/3)`` on the unit l2 ball — Kloft et al.'s analytic update for
their p = 2 (= p 4/3 here, ν = 2).

The randomized method works over *ordered* multi-indices; a distinct kernel u of degree d with
``c_u`` orderings is equivalent (same optimum value) to one coordinate with
``rho_u^2 = rho_d^2 / sqrt(c_u)``: at the symmetric optimum the c_u ordered weights are equal, and
``psi_u = sqrt(c_u) theta_ordered`` has ``||psi||_2 = ||theta||_2``. So both report the same J*.
"""

from __future__ import annotations

import itertools
import math
import time
from collections import Counter
from collections.abc import Sequence

import numpy as np
import scipy.linalg

__all__ = ["ExplicitPolynomialMKL", "monomial_indices"]


def monomial_indices(r: int, degree: int) -> list[tuple[int, ...]]:
    """Sorted multi-indices of every distinct monomial of degree 0..D in r variables."""
    out: list[tuple[int, ...]] = []
    for d in range(degree + 1):
        out.extend(itertools.combinations_with_replacement(range(r), d))
    return out


def _orderings(index: tuple[int, ...]) -> int:
    count = math.factorial(len(index))
    for mult in Counter(index).values():
        count //= math.factorial(mult)
    return count


class ExplicitPolynomialMKL:
    """All degree-<=D monomial kernels explicitly; alternating exact minimisation of J.

    Parameters
    ----------
    degree, lam, rho_squared
        As in ``RandomizedMKL``.
    n_iter
        Alternating (w, theta) rounds.
    tol
        Stop when J decreases by less than this (relative) in a round.
    max_bytes
        Refuse (ValueError) when the feature matrices would exceed this many bytes.
    """

    def __init__(
        self,
        degree: int = 3,
        lam: float = 1e-3,
        rho_squared: Sequence[float] | None = None,
        n_iter: int = 200,
        tol: float = 1e-9,
        max_bytes: float = 2e9,
    ):
        self.degree = degree
        self.lam = lam
        self.rho_squared = rho_squared
        self.n_iter = n_iter
        self.tol = tol
        self.max_bytes = max_bytes

    def _features(self, X: np.ndarray) -> np.ndarray:
        out = np.empty((X.shape[0], len(self.indices_)))
        for col, index in enumerate(self.indices_):
            out[:, col] = np.prod(X[:, list(index)], axis=1) if index else 1.0
        return out

    def fit(self, X, y) -> ExplicitPolynomialMKL:
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        n, r = X.shape
        D = int(self.degree)
        rho2 = np.ones(D + 1) if self.rho_squared is None else np.asarray(self.rho_squared, float)
        n_kernels = math.comb(r + D, D)
        need = 8.0 * n_kernels * n * 3
        if need > self.max_bytes:
            raise ValueError(
                f"ExplicitPolynomialMKL: {n_kernels} kernels x {n} samples need "
                f"~{need / 1e9:.1f} GB "
                f"(max_bytes={self.max_bytes:.3g}); this baseline does not fit in memory"
            )
        t0 = time.perf_counter()
        self.indices_ = monomial_indices(r, D)
        Phi = self._features(X)
        rho_u = np.array([rho2[len(u)] / math.sqrt(_orderings(u)) for u in self.indices_])
        theta = np.full(len(self.indices_), 1.0 / math.sqrt(len(self.indices_)))
        ridge = n * float(self.lam) * np.eye(n)
        self.objective_history_: list[float] = []
        self.time_history_: list[float] = []
        a = np.zeros(n)
        for _ in range(int(self.n_iter)):
            a = scipy.linalg.cho_solve(
                scipy.linalg.cho_factor((Phi * (theta / rho_u)) @ Phi.T + ridge), y
            )
            J = 0.5 * float(self.lam) * float(y @ a)
            self.time_history_.append(time.perf_counter() - t0)
            done = bool(self.objective_history_) and (
                self.objective_history_[-1] - J <= self.tol * abs(J)
            )
            self.objective_history_.append(J)
            if done:
                break
            proj = Phi.T @ a
            new = np.cbrt(theta * theta * proj * proj / rho_u)  # (rho_u ||w_u||)^(2/3), up to scale
            theta = new / np.linalg.norm(new)
        else:  # no break: a belongs to the previous theta
            a = scipy.linalg.cho_solve(
                scipy.linalg.cho_factor((Phi * (theta / rho_u)) @ Phi.T + ridge), y
            )
            self.objective_history_.append(0.5 * float(self.lam) * float(y @ a))
            self.time_history_.append(time.perf_counter() - t0)
        self.theta_ = theta
        self.rho_u_ = rho_u
        self.dual_coef_ = a
        self.objective_ = self.objective_history_[-1]
        self.X_fit_ = X
        self._Phi = Phi
        self.fit_time_ = time.perf_counter() - t0
        return self

    def decision_function(self, X) -> np.ndarray:
        Phi_test = self._features(np.asarray(X, dtype=np.float64))
        return (Phi_test * (self.theta_ / self.rho_u_)) @ (self._Phi.T @ self.dual_coef_)

    def predict(self, X) -> np.ndarray:
        return self.decision_function(X)
