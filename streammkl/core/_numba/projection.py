"""Budget maintenance by projection (Projectron: Orabona, Keshet & Caputo, ICML 2008 / JMLR 2009):
a removed support pair is replaced by its projection onto the span of the others.

The support pairs of block m are the vectors ``psi_s = phi_m(x_s) (x) v_s`` (an output direction
per pair, shared by the blocks), with Gram matrix ``G[s, t] = k_m(x_s, x_t) <v_s, v_t>``. Each
implicit block keeps ``G`` and ``Q = A^-1``, ``A = G + diag(eps G_ss + tiny)`` (a relative
diagonal loading keeps Q bounded when pairs nearly repeat), over the support slots, both updated
incrementally in O(|S|^2): a new pair borders them (block inverse), a removed pair is projected
out. Removing pair r with ``d = -Q[:, r] / Q[r, r]`` (the ridge solution of
``A_{-r} d = G[-r, r]``) replaces ``c_r psi_r`` by ``c_r sum_t d_t psi_t``; the pair removed is
the one whose projection loses least, ``argmin_r sum_m a_mr^2 / Q_m[r, r]``. The block norm is
updated exactly from G whatever Q's rounding (``||theta + c_r e||^2`` with ``e = d - 1_r``, one
product ``G e``), and the residual of the solve checked on the way: when Q has drifted it is
rebuilt from G by a Cholesky inverse.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from streammkl.core._jit import JIT
from streammkl.core._numba.features import dot4
from streammkl.core._numba.kernels import kernel_value, view_dot

EPS = 1e-6  # relative diagonal loading of the Gram matrices
_TINY = 1e-200  # absolute loading: a zero vector (k(x, x) = 0) still has an invertible A
_RESIDUAL = 1e-7  # relative residual of the projection solve above which Q is rebuilt from G


def _loaded(G, t):
    return G[t, t] * (1.0 + EPS) + _TINY


loaded = njit(**JIT)(_loaded)


def _refresh_inverse(G, Q, n):
    """``Q[:n, :n] = (G + diag(eps G_tt + tiny))^-1`` by a Cholesky factorisation, O(n^3)."""
    L = np.zeros((n, n))
    for j in range(n):
        acc = loaded(G, j)
        for k in range(j):
            acc -= L[j, k] * L[j, k]
        piv = math.sqrt(max(acc, _TINY))
        L[j, j] = piv
        for i in range(j + 1, n):
            acc = G[i, j]
            for k in range(j):
                acc -= L[i, k] * L[j, k]
            L[i, j] = acc / piv
    inv = np.zeros((n, n))  # L^-1, lower triangular, column by column
    for j in range(n):
        inv[j, j] = 1.0 / L[j, j]
        for i in range(j + 1, n):
            acc = 0.0
            for k in range(j, i):
                acc -= L[i, k] * inv[k, j]
            inv[i, j] = acc / L[i, i]
    for i in range(n):  # Q = L^-T L^-1
        for j in range(i, n):
            acc = 0.0
            for k in range(j, n):
                acc += inv[k, i] * inv[k, j]
            Q[i, j] = acc
            Q[j, i] = acc


refresh_inverse = njit(**JIT)(_refresh_inverse)


def _gram_insert(G, Q, r, col, diag, n):
    """Border G and Q with the pair in slot r (< n): ``col[t] = G[t, r]`` for the other slots
    t < n (whose rows and columns of Q hold the inverse over them; row and column r are zero),
    ``diag = G[r, r]``."""
    col[r] = 0.0
    for t in range(n):
        G[t, r] = col[t]
        G[r, t] = col[t]
    G[r, r] = diag
    b = np.zeros(n)
    for t in range(n):
        acc = 0.0
        row = Q[t]
        for u in range(n):
            acc += row[u] * col[u]
        b[t] = acc
    cb = 0.0
    for t in range(n):
        cb += col[t] * b[t]
    delta = loaded(G, r) - cb
    if not delta > 0.5 * (loaded(G, r) - diag):  # Q has drifted: the Schur complement is lost
        refresh_inverse(G, Q, n)
        return
    inv = 1.0 / delta
    for t in range(n):
        bt = b[t] * inv
        if bt == 0.0:
            continue
        row = Q[t]
        for u in range(n):
            row[u] += bt * b[u]
    for t in range(n):
        Q[t, r] = -b[t] * inv
        Q[r, t] = -b[t] * inv
    Q[r, r] = inv


gram_insert = njit(**JIT)(_gram_insert)


def _cheapest_projection(n, im_blocks, coef, scale, gram):
    """The slot whose projection onto the others loses least, ``sum_m a_mr^2 / Q_m[r, r]``."""
    victim = 0
    best = np.inf
    for s in range(n):
        tot = 0.0
        for b in range(im_blocks.shape[0]):
            a = scale[im_blocks[b]] * coef[im_blocks[b], s]
            if a != 0.0:
                tot += a * a / gram[b, 1, s, s]
        if tot < best:
            best = tot
            victim = s
    return victim


cheapest_projection = njit(**JIT)(_cheapest_projection)


def _solve_projection(G, Q, r, n, d, Ge):
    """``d = -Q[:, r] / Q[r, r]`` (d_r = 0) and ``Ge = G e`` with ``e = d - 1_r``; returns the
    relative residual of ``A_{-r} d = G[-r, r]``."""
    qrr = Q[r, r]
    for t in range(n):
        d[t] = -Q[t, r] / qrr
    d[r] = 0.0
    for t in range(n):
        acc = -G[t, r]
        row = G[t]
        for u in range(n):
            acc += row[u] * d[u]
        Ge[t] = acc
    res = 0.0
    ref = 0.0
    for t in range(n):
        if t == r:
            continue
        e = Ge[t] + (loaded(G, t) - G[t, t]) * d[t]  # (A_{-r} d - G[-r, r])_t
        res += e * e
        ref += G[t, r] * G[t, r]
    return math.sqrt(res / ref) if ref > 0.0 else 0.0


solve_projection = njit(**JIT)(_solve_projection)


def _project_out(r, n, im_blocks, coef, scale, norms, gram, dense, tc):
    """Replace pair r by its projection onto the other pairs in every implicit block: exact
    block norms, Q and G downdated (row and column r zeroed). ``dense[m, t]`` receives the change
    of block m's scaled coefficients and ``tc[m]`` the removed pair's (negated) one."""
    d = np.zeros(n)
    Ge = np.zeros(n)
    for b in range(im_blocks.shape[0]):
        m = im_blocks[b]
        G = gram[b, 0]
        Q = gram[b, 1]
        cr = coef[m, r]
        if solve_projection(G, Q, r, n, d, Ge) > _RESIDUAL:
            refresh_inverse(G, Q, n)
            solve_projection(G, Q, r, n, d, Ge)
        if cr != 0.0:
            s = scale[m]
            cGe = 0.0
            eGe = -Ge[r]
            for t in range(n):
                cGe += coef[m, t] * Ge[t]
                eGe += d[t] * Ge[t]
            n2 = norms[m] * norms[m] + s * s * cr * (2.0 * cGe + cr * eGe)
            norms[m] = math.sqrt(n2) if n2 > 0.0 else 0.0
            for t in range(n):
                coef[m, t] += cr * d[t]
                dense[m, t] = s * cr * d[t]
            coef[m, r] = 0.0
            tc[m] = -s * cr
        qrr = Q[r, r]
        for t in range(n):
            qt = Q[t, r] / qrr
            if qt == 0.0 or t == r:
                continue
            row = Q[t]
            for u in range(n):
                row[u] -= qt * Q[r, u]
        for t in range(n):
            Q[t, r] = 0.0
            Q[r, t] = 0.0
            G[t, r] = 0.0
            G[r, t] = 0.0


project_out = njit(**JIT)(_project_out)


def _gram_border(x, xsq, v, slot, n, im_blocks, view_of, masks, view_full, kinds, kp,
                 sx, ssq, sv, gram):  # fmt: skip
    """Border every implicit block's Gram matrix and inverse with the pair (x, v) in ``slot``
    (the other slots < n hold pairs)."""
    K = sv.shape[1]
    n_views = masks.shape[0]
    dots = np.empty((n, n_views))
    vdot = np.empty(n)
    for t in range(n):
        for vw in range(n_views):
            if view_full[vw]:
                dots[t, vw] = dot4(x, sx[t], 0, x.shape[0])
            else:
                dots[t, vw] = view_dot(x, sx[t], masks[vw], False)
        acc = 0.0
        for k in range(K):
            acc += sv[t, k] * v[k]
        vdot[t] = acc
    vv = 0.0
    for k in range(K):
        vv += v[k] * v[k]
    col = np.zeros(n)
    for b in range(im_blocks.shape[0]):
        m = im_blocks[b]
        vw = view_of[m]
        kind = kinds[m]
        p0 = kp[m, 0]
        p1 = kp[m, 1]
        nrm = kp[m, 2] != 0.0
        for t in range(n):
            col[t] = 0.0
            if t != slot and vdot[t] != 0.0:
                dt = dots[t, vw]
                col[t] = vdot[t] * kernel_value(
                    kind, p0, p1, nrm, dt, xsq[vw] + ssq[t, vw] - 2.0 * dt, xsq[vw], ssq[t, vw]
                )
        diag = vv * kernel_value(kind, p0, p1, nrm, xsq[vw], 0.0, xsq[vw], xsq[vw])
        gram_insert(gram[b, 0], gram[b, 1], slot, col, diag, n)


gram_border = njit(**JIT)(_gram_border)
