"""Obviously-correct numpy/scipy references for the core (STYLE.md): exact Gram matrices,
brute-force proximity operators, block norms recomputed from scratch."""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from streammkl.core import regularizers as R


def gram(kernel, X, Y):
    """Kernel matrix from the textbook formulas (no shared code with the compiled kernels)."""
    idx = kernel.feature_indices(X.shape[1])
    A, B = X[:, idx], Y[:, idx]
    dot = A @ B.T
    na = (A * A).sum(1)[:, None]
    nb_ = (B * B).sum(1)[None, :]
    name = type(kernel).__name__
    if name == "Linear":
        k = dot
        if kernel.normalize:
            den = np.sqrt(na * nb_)
            k = np.divide(dot, den, out=np.zeros_like(dot), where=den > 0)
        return k
    if name == "Polynomial":
        c, p = kernel.coef0, kernel.degree
        k = (dot + c) ** p
        if kernel.normalize:
            k = k / np.sqrt((na + c) ** p * (nb_ + c) ** p)
        return k
    sq = np.maximum(na + nb_ - 2 * dot, 0.0)
    if name == "RBF":
        return np.exp(-kernel.gamma * sq)
    return np.maximum(0.0, 1.0 - np.sqrt(sq) / kernel.h)


def support_block_norms(model):
    """||theta_m|| recomputed from the whole support set / weight matrix (O(|S|^2))."""
    L, S = model._layout, model._state
    n = S.n_support
    out = np.zeros(len(model.kernels))
    for m, kernel in enumerate(model.kernels):
        if L.is_explicit[m]:
            a, e = L.ex_off[m], L.ex_off[m + 1]
            out[m] = S.scale[m] * np.linalg.norm(S.w[:, a:e])
            continue
        c = S.coef[m, :n]
        G = gram(kernel, S.sx[:n], S.sx[:n])
        V = S.sv[:n] @ S.sv[:n].T
        out[m] = S.scale[m] * np.sqrt(max(c @ (G * V) @ c, 0.0))
    return out


def _solve(fun, b, constraints=(), bounds=True):
    x0 = np.array(b, dtype=float)
    best = None
    for start in (x0, np.zeros_like(x0)) if constraints else (x0,):
        if constraints:
            res = minimize(
                fun, start, method="SLSQP", constraints=constraints,
                bounds=[(0, None)] * len(start) if bounds else None,
                options={"ftol": 1e-16, "maxiter": 2000},
            )  # fmt: skip
        else:
            res = minimize(
                fun, start, method="L-BFGS-B", bounds=[(0, None)] * len(start),
                options={"ftol": 1e-16, "gtol": 1e-13, "maxiter": 10000},
            )  # fmt: skip
        if constraints:  # polish
            res = minimize(
                fun, res.x, method="SLSQP", constraints=constraints,
                bounds=[(0, None)] * len(start), options={"ftol": 1e-16, "maxiter": 2000},
            )  # fmt: skip
        if best is None or res.fun < best.fun:
            best = res
    return best.x


def brute_prox_norms(reg, b, step, names=()):
    """argmin_{z >= 0} sum_m (z_m - b_m)^2 / (2 s_m) + Omega(z) by a generic scipy solver
    (b >= 0), with ``s = step`` a number (the paper's prox: ``1/2 ||z - b||^2 + step Omega``)
    or per-block steps (an array: AdaGrad's metric).

    Solved in units of S = max|b| (z = S u) so badly scaled inputs stay well conditioned.
    """
    b = np.asarray(b, dtype=float)
    M = b.size
    steps = np.broadcast_to(np.asarray(step, dtype=float), b.shape)
    s = max(float(np.max(np.abs(b))), 1e-12)
    bu = b / s
    # the objective divided by the mean step, so that its scale does not depend on the steps
    w = float(np.mean(steps)) / steps

    def quad(u):
        return 0.5 * np.sum(w * (u - bu) ** 2)

    mean = float(np.mean(steps))
    if isinstance(reg, R.GroupL1Ball):
        r = reg.radius / s
        return s * _solve(quad, bu, [{"type": "ineq", "fun": lambda u: r - u.sum()}])
    if isinstance(reg, R.Ball):
        r = reg.radius / s
        return s * _solve(quad, bu, [{"type": "ineq", "fun": lambda u: r**2 - u @ u}])
    if isinstance(reg, R.OverlappingGroupLasso):
        masks = reg.masks(M, names)

        def smoothed(u):  # sqrt(||u_G||^2 + 1e-24): within 1e-12 * step * lam of the true value
            pen = sum(lam * np.sqrt(u[m] @ u[m] + 1e-24) for lam, m in zip(reg.lam, masks))
            return quad(u) + mean / s * pen

        return s * _solve(smoothed, bu)
    return s * _solve(lambda u: quad(u) + mean * reg.value_norms(s * u) / s**2, bu)


def block_terms(model, m):
    """Block m of a kernelized model as (inputs (n, d), scaled coefficients (n,), directions)."""
    S = model._state
    n = S.n_support
    return S.sx[:n].copy(), S.scale[m] * S.coef[m, :n], S.sv[:n].copy()


def expansion_sqdist(kernel, first, second):
    """``||sum_s a_s phi(x_s) (x) v_s - sum_t b_t phi(y_t) (x) w_t||^2`` for two expansions
    ``(X, a, V)`` and ``(Y, b, W)``, from exact Gram matrices."""
    (X, a, V), (Y, b, W) = first, second
    g11 = gram(kernel, X, X) * (V @ V.T)
    g22 = gram(kernel, Y, Y) * (W @ W.T)
    g12 = gram(kernel, X, Y) * (V @ W.T)
    return float(a @ g11 @ a + b @ g22 @ b - 2.0 * a @ g12 @ b)


def support_gram(model, m):
    """``G[s, t] = k_m(x_s, x_t) <v_s, v_t>`` over the support pairs (block m's pair vectors)."""
    S = model._state
    n = S.n_support
    return gram(model.kernels[m], S.sx[:n], S.sx[:n]) * (S.sv[:n] @ S.sv[:n].T)


def best_merge_loss(kernel, xi, xj, ai, aj, v, starts=8, seed=0):
    """The least ``||ai phi(xi) (x) v + aj phi(xj) (x) v - c phi(z) (x) v||^2`` over every z in
    R^d and c (c optimal for each z), by Nelder-Mead from points on and off the segment."""
    from scipy.optimize import minimize

    vv = float(v @ v)
    full = vv * (ai * ai + aj * aj + 2 * ai * aj * gram(kernel, xi[None], xj[None])[0, 0])

    def loss(z):
        k = gram(kernel, np.vstack([xi, xj]), z[None])[:, 0]
        kzz = gram(kernel, z[None], z[None])[0, 0]
        return full - vv * (ai * k[0] + aj * k[1]) ** 2 / kzz

    rng = np.random.default_rng(seed)
    best = min(loss(xi), loss(xj))
    for h in np.linspace(0, 1, starts):
        z0 = h * xi + (1 - h) * xj + 0.1 * rng.normal(size=xi.shape) * np.linalg.norm(xi - xj)
        res = minimize(loss, z0, method="Nelder-Mead", options={"xatol": 1e-10, "fatol": 1e-14})
        best = min(best, float(res.fun))
    return best
