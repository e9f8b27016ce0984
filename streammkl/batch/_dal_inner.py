"""The inner problem of one SpicyMKL outer step: evaluation on candidate kernels and Newton.

``phi(rho) = psi(rho) + (b + gamma sum rho)^2 / (2 gamma) + H(s(rho)) / gamma`` with
``s_m(rho) = ||alpha_m + gamma rho||_{K_m}`` (eq. 25 / 32 / 41 of Suzuki & Tomioka); gradient and
Hessian as eqs. 26-27, generalised to any block penalty (``_penalties``) and loss (``_dal_losses``).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

__all__ = ["Inner", "inner_solve"]


class Inner:
    """Evaluates phi on candidate kernels; holds the screening reference."""

    def __init__(self, K, lmax_sqrt, y, loss, pen, bias, screening, res):
        self.K, self.lsq, self.y, self.loss, self.pen = K, lmax_sqrt, y, loss, pen
        self.bias, self.screening, self.res = bias, screening, res
        self.M, self.N = K.shape[0], K.shape[1]

    def full_pass(self, R: np.ndarray) -> np.ndarray:
        """``K_m R`` for every m (R is N x k): one GEMM over the stacked Grams."""
        self.res.touches_full += self.M
        return (self.K.reshape(self.M * self.N, self.N) @ R).reshape(self.M, self.N, -1)

    def set_outer(self, alpha, U, A, b, state, gamma, rho_ref, W_ref):
        self.alpha, self.U, self.A, self.b, self.state, self.gamma = alpha, U, A, b, state, gamma
        self.set_reference(rho_ref, W_ref)
        self.prev_active = np.nonzero(A > 0)[0]

    def set_reference(self, rho_ref, W_ref):
        g = self.gamma
        s2 = self.A + 2 * g * (self.U @ rho_ref) + g * g * (W_ref @ rho_ref)
        self.rho_ref, self.s_ref = rho_ref.copy(), np.sqrt(np.maximum(s2, 0.0))

    def _norms(self, rho, idx):
        g = self.gamma
        if len(idx) == 0:
            return np.zeros(0), np.zeros((0, self.N))
        if 3 * len(idx) > self.M:  # many candidates: one stacked GEMV beats a Python loop
            w = (self.K.reshape(self.M * self.N, self.N) @ rho).reshape(self.M, self.N)[idx]
            self.res.touches_inner += self.M
            self.res.touched_kernels.update(range(self.M))
        else:
            w = np.stack([self.K[m] @ rho for m in idx])
            self.res.touches_inner += len(idx)
            self.res.touched_kernels.update(int(m) for m in idx)
        s2 = self.A[idx] + 2 * g * np.einsum("ij,j->i", self.U[idx], rho) + g * g * (w @ rho)
        return np.sqrt(np.maximum(s2, 0.0)), w

    def candidates(self, rho):
        """Kernels computed exactly at rho, with their norms and ``K_m rho``."""
        if not self.screening:
            w = self.full_pass(rho[:, None])[:, :, 0]
            self.res.touches_full -= self.M  # counted as inner touches instead
            self.res.touches_inner += self.M
            self.res.touched_kernels.update(range(self.M))
            g = self.gamma
            s2 = self.A + 2 * g * (self.U @ rho) + g * g * (w @ rho)
            return np.arange(self.M), np.sqrt(np.maximum(s2, 0.0)), w
        ub = self.s_ref + self.gamma * self.lsq * float(np.linalg.norm(rho - self.rho_ref))
        idx = np.union1d(self.prev_active, np.nonzero(ub > self.pen.threshold((), self.gamma))[0])
        s, w = self._norms(rho, idx)
        while not self.pen.separable:  # the threshold grows with the known norms: iterate
            thr = self.pen.threshold(s, self.gamma)
            extra = np.setdiff1d(np.nonzero(ub > thr)[0], idx)
            if extra.size == 0:
                break
            s2, w2 = self._norms(rho, extra)
            idx, s, w = np.concatenate([idx, extra]), np.concatenate([s, s2]), np.vstack([w, w2])
        if not self.pen.separable:
            thr = self.pen.threshold(s, self.gamma)
            keep = (ub[idx] > thr) | np.isin(idx, self.prev_active)
            idx, s, w = idx[keep], s[keep], w[keep]
        return idx, s, w

    def evaluate(self, rho):
        g = self.gamma
        psi, dpsi, hpsi = self.loss.inner(rho, self.y, self.state, g)
        idx, s, w = self.candidates(rho)
        pi, dpi, coef = self.pen.prox(s, g)
        value = psi + self.pen.envelope(s, pi, g) / g
        grad = dpsi.copy()
        if self.bias:
            shift = self.b + g * float(np.sum(rho))
            value += shift * shift / (2 * g)
            grad += shift
        act = pi > 0
        kv = (self.U[idx[act]] + g * w[act]) / s[act, None]  # K_m v_m / s_m
        grad += pi[act] @ kv
        self.res.n_evals += 1
        self.res.inner_candidates += len(idx)
        self.res.inner_active += int(act.sum())
        return (
            value,
            grad,
            dict(idx=idx, s=s, w=w, pi=pi, dpi=dpi, coef=coef, act=act, kv=kv, hpsi=hpsi),
        )

    def hessian(self, cache):
        g = self.gamma
        H = np.diag(cache["hpsi"])
        if self.bias:
            H += g
        act, kv = cache["act"], cache["kv"]
        ratio = cache["pi"][act] / cache["s"][act]
        for m, c in zip(cache["idx"][act], ratio, strict=True):
            H += (g * c) * self.K[m]
        self.res.touches_inner += int(act.sum())
        H += (kv.T * (g * (cache["dpi"][act] - ratio))) @ kv
        if cache["coef"] and act.any():
            ksum = kv.sum(axis=0)
            H -= g * cache["coef"] * np.outer(ksum, ksum)
        return H


def _newton_direction(H: np.ndarray, grad: np.ndarray) -> np.ndarray:
    jitter = 1e-12 * (float(np.max(np.abs(np.diag(H)))) + 1e-300)
    for _ in range(6):
        try:
            c = scipy.linalg.cho_factor(H + jitter * np.eye(H.shape[0]), check_finite=False)
            return -scipy.linalg.cho_solve(c, grad, check_finite=False)
        except np.linalg.LinAlgError:
            jitter *= 100.0
    return -np.linalg.lstsq(H, grad, rcond=None)[0]


def inner_solve(ev: Inner, rho, tol, max_newton, res):
    """Newton with Armijo backtracking, damped Levenberg-Marquardt style when steps get cut.

    The damping ``mu = theta * ||grad||_inf`` vanishes at the solution (so the local rate stays
    Newton's); it grows when the line search has to cut the step (semismooth kinks of the hinge /
    epsilon-insensitive terms) and shrinks when the full step is accepted.
    """
    value, grad, cache = ev.evaluate(rho)
    theta = 0.0
    converged = False
    for _ in range(max_newton):
        gnorm = float(np.max(np.abs(grad)))
        if gnorm <= tol:
            converged = True
            break
        H = ev.hessian(cache)
        if float(np.max(np.diag(H))) <= 1e-12 * gnorm:  # no curvature at all (e.g. hinge, rho = 0)
            theta = max(theta, 1.0)
        if theta > 0:
            H[np.diag_indices_from(H)] += theta * gnorm
        d = _newton_direction(H, grad)
        slope = float(grad @ d)
        if slope >= 0:  # numerical trouble: fall back to steepest descent
            d, slope = -grad, -float(grad @ grad)
        c = min(1.0, 0.99 * ev.loss.max_step(rho, d, ev.y))
        res.n_newton += 1
        while True:
            new = rho + c * d
            v2, g2, c2 = ev.evaluate(new)
            if v2 <= value + 1e-4 * c * slope or c < 1e-12:
                break
            # near the solution the change of phi drowns in rounding (phi ~ N, steps ~ 1/gamma):
            # then accept a step that reduces the gradient
            if abs(v2 - value) <= 1e-12 * max(abs(value), 1.0) and np.max(np.abs(g2)) < gnorm:
                break
            # backtrack to the minimiser of the quadratic through value, slope and v2 (safeguarded)
            curv = v2 - value - slope * c
            c = (
                float(np.clip(-slope * c * c / (2.0 * curv), 0.1 * c, 0.5 * c))
                if curv > 0
                else 0.5 * c
            )
        if c < 1e-12 and v2 > value:  # the model is useless here: damp harder and retry
            if theta >= 1e12:
                break
            theta = max(100.0 * theta, 1.0)
            continue
        if c == 1.0:
            theta /= 4.0
        elif c < 0.25:
            theta = max(4.0 * theta, 1e-4)
        rho, value, grad, cache = new, v2, g2, c2
        if ev.screening and len(cache["idx"]) > 2 * int(cache["act"].sum()) + 10:
            ev.set_reference(rho, ev.full_pass(rho[:, None])[:, :, 0])
    cache["gnorm"] = float(np.max(np.abs(grad)))
    cache["converged"] = converged or cache["gnorm"] <= tol
    return rho, cache
