"""The SpicyMKL iteration on arrays: DAL outer loop, inner Newton, exact kernel screening.

Outer step t (Table 1 / Table 2 of Suzuki & Tomioka): minimise the smooth inner objective
``phi(rho) = psi(rho) + (b + gamma sum rho)^2 / (2 gamma) + H(s(rho)) / gamma`` with
``s_m(rho) = ||alpha_m + gamma rho||_{K_m}`` by Newton's method with Armijo backtracking, then
``alpha_m <- (pi_m / s_m)(alpha_m + gamma rho)``, ``b <- b + gamma sum rho`` and the loss
multipliers, and grow gamma (the inner problem lives in ``_dal_inner``).

Only kernels that may be active are touched inside the inner loop. After every outer step one pass
over all kernels computes ``K_m rho`` (needed anyway for the duality gap); from then on
``s_m(rho) <= s_m(rho_ref) + gamma sqrt(lmax(K_m)) ||rho - rho_ref||`` screens kernels out exactly
(no approximation: a screened kernel provably has pi_m = 0). ``lmax`` is bounded by the smaller of
the Frobenius norm and the largest absolute row sum.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from streammkl.batch._dal_inner import Inner, inner_solve
from streammkl.batch._dal_losses import DalLoss
from streammkl.batch._penalties import Penalty

__all__ = ["DalResult", "dal_solve", "dual_point"]


@dataclass
class DalResult:
    alpha: np.ndarray
    intercept: float
    block_norms: np.ndarray
    primal: float
    dual: float
    gap_history: list[float] = field(default_factory=list)
    primal_history: list[float] = field(default_factory=list)
    active_history: list[int] = field(default_factory=list)
    time_history: list[float] = field(default_factory=list)
    n_iter: int = 0
    n_newton: int = 0
    n_evals: int = 0
    touches_inner: int = 0
    touches_full: int = 0
    inner_candidates: int = 0  # sum over inner evaluations of kernels computed exactly
    inner_active: int = 0  # sum over inner evaluations of kernels found active
    touched_kernels: set[int] = field(default_factory=set)
    inner_grad_history: list[float] = field(default_factory=list)
    inner_history: list[tuple[int, int, int]] = field(default_factory=list)  # evals, cand, active
    n_retries: int = 0
    converged: bool = False


def dual_point(rho, y, loss: DalLoss, bias: bool) -> np.ndarray:
    """A point satisfying the loss domain and ``sum rho = 0`` (bias), close to rho."""
    if not bias:
        return loss.project_domain(rho, y)
    if loss.free_domain:
        return rho - rho.mean()
    r = loss.project_domain(rho, y)
    pos, neg = float(r[r > 0].sum()), float(-r[r < 0].sum())
    if pos > neg > 0:
        r = np.where(r > 0, r * (neg / pos), r)
    elif neg > pos > 0:
        r = np.where(r < 0, r * (pos / neg), r)
    elif pos == 0 or neg == 0:
        r = np.zeros_like(r)
    return r


def dal_solve(
    K: np.ndarray,
    y: np.ndarray,
    loss: DalLoss,
    pen: Penalty,
    *,
    fit_intercept: bool = True,
    tol: float = 0.01,
    max_iter: int = 100,
    gamma0: float = 1.0,
    gamma_growth: float = 2.0,
    gamma_max: float | None = None,
    inner_tol: float = 1e-8,
    max_newton: int = 100,
    screening: bool = True,
    init_scale: bool = True,
) -> DalResult:
    M, N = K.shape[0], K.shape[1]
    t0 = time.perf_counter()
    # rigorous bounds on the largest eigenvalue: Frobenius norm and the max absolute row sum
    # (kernel by kernel: no temporary the size of the whole stack)
    lmax = np.array([min(np.sqrt(np.vdot(Km, Km)), np.abs(Km).sum(axis=1).max()) for Km in K])
    lmax_sqrt = np.sqrt(lmax)
    res = DalResult(np.zeros((M, N)), 0.0, np.zeros(M), np.inf, -np.inf)
    ev = Inner(K, lmax_sqrt, y, loss, pen, fit_intercept, screening, res)
    alpha, U, A = np.zeros((M, N)), np.zeros((M, N)), np.zeros(M)
    b, state, gamma = 0.0, loss.init_state(N), float(gamma0)
    rho = loss.init_rho(y)
    W = ev.full_pass(rho[:, None])[:, :, 0]
    if pen.sparse and init_scale and loss.n_multipliers == 0:
        # smooth conjugates: start dual feasible, every ||rho||_{K_m} in the flat region (fewer
        # kernels active in the first, most expensive inner solve; it slows the AL losses down)
        norms = np.sqrt(np.maximum(np.einsum("mi,i->m", W, rho), 0.0))
        thr = pen.threshold(norms, 1.0)
        top = float(norms.max(initial=0.0))
        if thr > 0 and top > thr:
            rho, W = rho * (thr / top), W * (thr / top)
    best = (np.inf, alpha, 0.0)
    # past ~1e6 gamma0 the inner problem is too ill-conditioned to solve to the accuracy the
    # update alpha + gamma rho needs; the iteration stays linearly (and fast) convergent there
    gamma_cap = 1e6 * gamma0 if gamma_max is None else float(gamma_max)
    for t in range(max_iter):
        marks = (res.n_evals, res.inner_candidates, res.inner_active)
        for attempt in range(4):  # an inner solve that fails is retried with a smaller gamma
            ev.set_outer(alpha, U, A, b, state, gamma, rho, W)
            rho_new, cache = inner_solve(ev, rho, inner_tol, max_newton, res)
            if cache["converged"] or attempt == 3 or gamma <= gamma0:
                break
            res.n_retries += 1
            gamma = max(gamma / gamma_growth**2, gamma0)
        rho = rho_new
        res.inner_grad_history.append(cache["gnorm"])
        res.inner_history.append(
            (res.n_evals - marks[0], res.inner_candidates - marks[1], res.inner_active - marks[2])
        )
        idx, act = cache["idx"], cache["act"]
        ratio = cache["pi"][act] / cache["s"][act]
        on = idx[act]
        new_alpha, new_U, new_A = np.zeros_like(alpha), np.zeros_like(U), np.zeros_like(A)
        new_alpha[on] = ratio[:, None] * (alpha[on] + gamma * rho)
        new_U[on] = ratio[:, None] * (U[on] + gamma * cache["w"][act])
        new_A[on] = cache["pi"][act] ** 2
        alpha, U, A = new_alpha, new_U, new_A
        if fit_intercept:
            b += gamma * float(np.sum(rho))
        state = loss.update_state(rho, y, state, gamma)
        # one pass over all kernels: K_m rho (next reference) and K_m rho_hat (duality gap)
        rho_hat = dual_point(rho, y, loss, fit_intercept)
        WW = ev.full_pass(np.stack([rho, rho_hat], axis=1))
        W, W_hat = WW[:, :, 0], WW[:, :, 1]
        norms = np.sqrt(A)
        z = U[on].sum(axis=0) + b
        primal = loss.primal(z, y) + pen.value(norms)
        hat_norms = np.sqrt(np.maximum(W_hat @ rho_hat, 0.0))
        scale = pen.dual_scale(hat_norms)
        dual = loss.dual(rho_hat / scale, y) - pen.conjugate(hat_norms / scale)
        gap = (primal - dual) / max(abs(primal), 1e-300)
        res.gap_history.append(float(gap))
        res.primal_history.append(float(primal))
        res.active_history.append(int(on.size))
        res.time_history.append(time.perf_counter() - t0)
        res.n_iter = t + 1
        res.dual = max(res.dual, float(dual))
        if primal < best[0]:
            best = (float(primal), alpha, float(b))
        if gap <= tol:
            res.converged = True
            break
        gamma = min(gamma * gamma_growth, gamma_cap)
    res.primal, res.alpha, res.intercept = best
    res.block_norms = np.sqrt(np.einsum("mi,mi->m", res.alpha, _apply(K, res.alpha)))
    return res


def _apply(K: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """``K_m alpha_m`` for the nonzero rows only."""
    out = np.zeros_like(alpha)
    for m in np.nonzero(np.any(alpha != 0, axis=1))[0]:
        out[m] = K[m] @ alpha[m]
    return out
