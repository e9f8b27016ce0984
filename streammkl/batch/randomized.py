"""``RandomizedMKL``: randomized mirror descent over all product kernels of degree <= D.

Afkanpour, György, Szepesvári & Bowling (arXiv 1205.0288v2), Alg. 2 with the Alg. 3 sampler.
Objective (eq. 1-3, squared loss, group p-norm with p = 4/3):

    J(theta) = min_w (1/(2n)) sum_t (f_w(x_t) - y_t)^2 + (lam/2) sum_I rho_|I|^2 ||w_I||^2 / theta_I

over theta in Delta_2 = {theta >= 0, ||theta||_2 <= 1}. For fixed theta it is kernel ridge
regression
with ``K_theta = sum_I theta_I / rho_|I|^2 K_I``: ``a = (K_theta + n lam I)^-1 y``,
``J = (lam/2) y^T a`` and

    dJ/dtheta_I = -(lam / 2) a^T K_I a / rho_|I|^2.

(ERRATUM: the paper's eq. 12/24 drop the 1/2 — the derivative of ``rho^2 ||w||^2 / (2 theta)`` in
theta is ``-rho^2 ||w||^2 / (2 theta^2)``; checked by finite differences in the tests. The factor
does not change the sampling distribution, only the scale of the step.)

Each iteration draws one multi-index I with probability ``|g_I| / ||g||_1`` (Alg. 3), moves
``theta_I += eta ||g||_1`` (the importance-sampled gradient ``g_I / q_I = -||g||_1``), and projects
on
Delta_2 (a rescaling). theta is a sparse dict ``multi-index -> weight``; no kernel outside the
sampled ones is ever formed. ``sampler="uniform"`` draws I uniformly from the |I| ordered indices
instead (``g_hat = |I| g_I``): the uniform coordinate sampling baseline of §5.1.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import scipy.linalg

from streammkl.batch.grams import gram_stack
from streammkl.batch.polysampler import GramBase, LinearBase, PolynomialSampler, n_ordered_indices

__all__ = ["RandomizedMKL"]


class _SparseTheta:
    """theta = scale * u over the sampled indices, with the running sum of the iterates."""

    def __init__(self) -> None:
        self.u: dict[tuple[int, ...], float] = {}
        self.acc: dict[tuple[int, ...], float] = {}
        self.start: dict[tuple[int, ...], float] = {}
        self.scale, self.ss, self.P = 1.0, 0.0, 0.0

    def add(self, key: tuple[int, ...], delta: float) -> None:
        old = self.u.get(key, 0.0)
        if key in self.u:
            self.acc[key] += old * (self.P - self.start[key])
        else:
            self.acc[key] = 0.0
        self.start[key] = self.P
        new = old + delta / self.scale
        self.u[key] = new
        self.ss += new * new - old * old

    def norm(self) -> float:
        return self.scale * np.sqrt(max(self.ss, 0.0))

    def rescale(self, factor: float) -> None:
        self.scale *= factor
        if self.scale < 1e-150:  # fold the scale into u (closing every running-sum interval)
            for key, val in self.u.items():
                self.acc[key] += val * (self.P - self.start[key])
                self.start[key] = self.P
                self.u[key] = val * self.scale
            self.ss *= self.scale**2
            self.scale = 1.0

    def end_step(self) -> None:
        self.P += self.scale

    def last(self) -> dict[tuple[int, ...], float]:
        return {k: v * self.scale for k, v in self.u.items()}

    def average(self, n_steps: int) -> dict[tuple[int, ...], float]:
        return {
            k: (self.acc[k] + v * (self.P - self.start[k])) / n_steps for k, v in self.u.items()
        }


class RandomizedMKL:
    """Projected stochastic gradient on the kernel weights theta (p = 4/3), importance sampled.

    Parameters
    ----------
    degree
        Maximum degree D of the product kernels (degree 0 = constant offset kernel).
    lam
        Ridge regularisation (mean squared loss / 2 + lam/2 * penalty).
    rho_squared
        Prior scalings ``rho_d^2``, d = 0..D (default all 1; the paper's prior: (1, 1, 1, 4)).
    n_iter
        Number of stochastic gradient steps T.
    step_size
        With ``schedule="normalized"`` each step moves ``theta_I`` by
        ``step_size * sqrt(2/T) * |g_hat_I| / ||g||_1`` — Corollary 3.3's ``eta = 1/sqrt(BT)``
        with B re-estimated every step (importance sampling: exactly ``step_size * sqrt(2/T)``);
        with ``schedule="constant"`` eta = step_size (Alg. 2 as printed).
    sampler
        ``"importance"`` (Alg. 3, q ∝ |g|) or ``"uniform"`` (uniform over ordered multi-indices).
    average
        Predict with the average of the iterates theta^(1..T) (Theorem 3.1) instead of the last.
    kernels
        Base kernel objects (``gram(X, Y)``); None: the paper's per-variable linear kernels
        ``x_j x'_j`` (rank one, handled without forming Grams).
    seed
        Seeds the sampler.

    Attributes
    ----------
    theta_
        ``{ordered multi-index: weight}`` (only sampled indices appear).
    kernel_weights_
        ``{sorted multi-index: sum of theta / rho^2 over its orderings}`` — the coefficient of each
        distinct product kernel in ``K_theta``.
    objective_, objective_history_, time_history_, gradient_l1_history_
        J at the returned theta; J(theta^(k-1)), elapsed seconds and ``||grad J||_1`` per step.
    """

    def __init__(
        self,
        degree: int = 3,
        lam: float = 1e-3,
        rho_squared: Sequence[float] | None = None,
        n_iter: int = 500,
        step_size: float = 1.0,
        schedule: str = "normalized",
        sampler: str = "importance",
        average: bool = False,
        kernels: Sequence[object] | None = None,
        seed: int = 0,
    ):
        self.degree = degree
        self.lam = lam
        self.rho_squared = rho_squared
        self.n_iter = n_iter
        self.step_size = step_size
        self.schedule = schedule
        self.sampler = sampler
        self.average = average
        self.kernels = kernels
        self.seed = seed

    def _validate(self, X, y):
        if int(self.degree) != self.degree or self.degree < 0:
            raise ValueError(f"degree must be an integer >= 0, got {self.degree!r}")
        if not (self.lam > 0 and np.isfinite(self.lam)):
            raise ValueError(f"lam must be a finite number > 0, got {self.lam!r}")
        rho2 = np.ones(self.degree + 1) if self.rho_squared is None else np.array(self.rho_squared)
        if rho2.shape != (self.degree + 1,) or not np.all(rho2 > 0):
            raise ValueError(f"rho_squared: need {self.degree + 1} positive values (d = 0..D)")
        if self.sampler not in ("importance", "uniform"):
            raise ValueError(f"sampler: expected 'importance' or 'uniform', got {self.sampler!r}")
        if self.schedule not in ("normalized", "constant"):
            raise ValueError(
                f"schedule: expected 'normalized' or 'constant', got {self.schedule!r}"
            )
        if int(self.n_iter) < 1 or not self.step_size > 0:
            raise ValueError("n_iter must be >= 1 and step_size > 0")
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        if X.ndim != 2 or y.shape != (X.shape[0],):
            raise ValueError(f"X must be (n, d) and y (n,), got {X.shape} and {y.shape}")
        if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
            raise ValueError("X and y must be finite")
        return X, y, rho2

    def _base(self, X):
        if self.kernels is None:
            return LinearBase(X)
        return GramBase(gram_stack(self.kernels, X))

    def fit(self, X, y) -> RandomizedMKL:
        X, y, rho2 = self._validate(X, y)
        t0 = time.perf_counter()
        base = self._base(X)
        n, r, D = base.n, base.r, int(self.degree)
        sampler = PolynomialSampler(base, D, rho2)
        rng = np.random.default_rng(self.seed)
        T, lam = int(self.n_iter), float(self.lam)
        n_index = n_ordered_indices(r, D)
        p_degree = np.array([float(r) ** d for d in range(D + 1)]) / n_index
        theta = _SparseTheta()
        K_theta, K_sum = np.zeros((n, n)), np.zeros((n, n))
        ridge = n * lam * np.eye(n)
        self.objective_history_, self.time_history_, self.gradient_l1_history_ = [], [], []
        for _ in range(T):
            a = scipy.linalg.cho_solve(scipy.linalg.cho_factor(K_theta + ridge), y)
            delta = sampler.delta(a)
            grad_l1 = 0.5 * lam * float(delta.sum())  # ||grad J||_1 = sum_d delta(d) * lam / 2
            self.objective_history_.append(0.5 * lam * float(y @ a))
            self.gradient_l1_history_.append(grad_l1)
            if self.sampler == "importance":
                index, _ = sampler.sample(a, rng, delta)
                K_index = base.product(index)
                g_hat = grad_l1  # |g_I| / q_I
            else:
                d = int(rng.choice(D + 1, p=p_degree))
                index = tuple(int(j) for j in rng.integers(0, r, size=d))
                K_index = base.product(index)
                g_hat = 0.5 * lam * float(a @ K_index @ a) / rho2[d] * n_index
            eta = self.step_size
            if self.schedule == "normalized":
                eta = self.step_size * np.sqrt(2.0 / T) / max(grad_l1, 1e-300)
            step = eta * g_hat
            theta.add(index, step)
            K_theta += (step / rho2[len(index)]) * K_index
            norm = theta.norm()
            if norm > 1.0:  # projection on the positive quadrant of the unit l2 ball
                theta.rescale(1.0 / norm)
                K_theta /= norm
            theta.end_step()
            if self.average:
                K_sum += K_theta
            self.time_history_.append(time.perf_counter() - t0)
        final = theta.average(T) if self.average else theta.last()
        K_final = K_sum / T if self.average else K_theta
        self.dual_coef_ = scipy.linalg.cho_solve(scipy.linalg.cho_factor(K_final + ridge), y)
        self.objective_ = 0.5 * lam * float(y @ self.dual_coef_)
        self.theta_ = final
        weights: dict[tuple[int, ...], float] = {}
        for key, val in final.items():
            canon = tuple(sorted(key))
            weights[canon] = weights.get(canon, 0.0) + val / rho2[len(key)]
        self.kernel_weights_ = weights
        self.n_ordered_kernels_ = n_index
        self.X_fit_ = X
        self._rho2 = rho2
        self.fit_time_ = time.perf_counter() - t0
        return self

    def cross_kernel(self, X) -> np.ndarray:
        """``K_theta(X, X_fit)`` over the distinct kernels with nonzero weight."""
        if not hasattr(self, "dual_coef_"):
            raise RuntimeError("RandomizedMKL: call fit before predicting")
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.X_fit_.shape[1]:
            raise ValueError(f"X must have {self.X_fit_.shape[1]} columns, got shape {X.shape}")
        keys = [k for k, w in self.kernel_weights_.items() if w > 0]
        w = np.array([self.kernel_weights_[k] for k in keys])
        if self.kernels is None:
            base = LinearBase(self.X_fit_)
            if not keys:
                return np.zeros((X.shape[0], self.X_fit_.shape[0]))
            left = np.stack([base.feature(k, X) for k in keys], axis=1)
            right = np.stack([base.feature(k) for k in keys], axis=1)
            return (left * w) @ right.T
        cross = gram_stack(self.kernels, X, self.X_fit_)
        out = np.zeros((X.shape[0], self.X_fit_.shape[0]))
        for key, weight in zip(keys, w, strict=True):
            prod = np.full_like(out, weight)
            for j in key:
                prod *= cross[j]
            out += prod
        return out

    def decision_function(self, X) -> np.ndarray:
        return self.cross_kernel(X) @ self.dual_coef_

    def predict(self, X) -> np.ndarray:
        return self.decision_function(X)
