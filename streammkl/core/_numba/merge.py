"""Budget maintenance by merging two support pairs into one (budgeted SGD: Wang, Crammer &
Vucetic, "Breaking the Curse of Kernelization", JMLR 13, 2012), for blocks that share the support
set and for vector outputs.

Block m holds the terms ``a_ms phi_m(x_s) (x) v_s`` (``a_ms = scale_m coef[m, s]``). Merging pairs
i and j replaces, in every implicit block at once, ``X_m = a_mi phi_m(x_i) (x) v_i +
a_mj phi_m(x_j) (x) v_j`` by one term ``c_m phi_m(z) (x) v_z`` with ``z = h x_i + (1 - h) x_j``
on the segment (for a Gaussian kernel the best merge point lies there) and one output direction
``v_z`` shared by the blocks. For a given z, block m's best term has output
``u_m = a_mi k_m(x_i, z) v_i + a_mj k_m(x_j, z) v_j`` (divided by ``k_m(z, z)``), so the best
shared direction is the top eigenvector of ``S = sum_m u_m u_m^T / k_m(z, z)`` (a 2 x 2 problem in
span(v_i, v_j)), ``c_m = <u_m, v_z> / (k_m(z, z) |v_z|^2)``, and the merge loses
``sum_m ||X_m||^2 - lambda_max(S)``: a golden-section search maximises ``lambda_max(S)`` over
h in each half of [0, 1]. With parallel directions (binary losses, two classes) ``v_z = v_i`` and
this is exactly the paper's merge; with a single Gaussian block, exactly its 1-D search.

As in the paper, the pair with the smallest contribution is merged with the partner that loses
least. Partners are ranked in O(|S|) without a search: for a Gaussian block the loss of merging
two parallel terms is ``(a_i + a_j)^2 D(m, t)`` with ``m = a_i / (a_i + a_j)`` and
``t = gamma ||x_i - x_j||^2``, read from a table of D computed once (a lookup as in Glasmachers &
Qaadan, "Speeding Up Budgeted Stochastic Gradient Descent SVM Training with Precomputed Golden
Section Search", 2018); other kernels are evaluated at the weighted mean ``h = m``, and the part
of ``v_j`` orthogonal to ``v_i`` is counted as lost. Only partners whose direction makes an acute
angle with ``v_i`` are candidates (for binary outputs: the same sign, the paper's same-label rule).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from streammkl.core._jit import JIT
from streammkl.core._numba.codes import K_RBF
from streammkl.core._numba.kernels import kernel_value, view_dot
from streammkl.core._numba.scores import support_dots

N_WEIGHT = 129  # table rows: weight m = i / 128
N_DIST = 161  # table columns: gamma ||x_i - x_j||^2 = j / 8, up to 20 (kappa = e^-20 ~ 2e-9)
DIST_STEP = 0.125
_GOLDEN = 0.6180339887498949
_SEARCH_STEPS = 16  # golden-section steps per half of [0, 1]: h to 0.5 * 0.618^16 ~ 2e-4
_PARALLEL = 1e-12  # 1 - cos(angle) below this: the two directions are taken as parallel


def merge_loss_table(n_weight: int = N_WEIGHT, n_dist: int = N_DIST) -> np.ndarray:
    """``D[i, j]`` for ``m = i / (n_weight - 1)`` and ``t = j * DIST_STEP``: the normalised loss
    ``m^2 + (1-m)^2 + 2 m (1-m) kappa - max_h (m kappa^((1-h)^2) + (1-m) kappa^(h^2))^2`` of
    merging two Gaussian terms of weights m and 1 - m whose kernel value is ``kappa = e^-t``
    (golden-section search in each half of [0, 1], endpoints included). Indexed by t rather
    than kappa so that ranking partners needs no exponential."""
    m = np.linspace(0.0, 1.0, n_weight)[:, None]
    t = (np.arange(n_dist) * DIST_STEP)[None, :]

    def g(h: np.ndarray) -> np.ndarray:
        return m * np.exp(-t * (1 - h) ** 2) + (1 - m) * np.exp(-t * h**2)

    best = np.maximum(g(np.zeros_like(m * t)), g(np.ones_like(m * t)))
    for lo0, hi0 in ((0.0, 0.5), (0.5, 1.0)):
        lo = np.full(best.shape, lo0)
        hi = np.full(best.shape, hi0)
        for _ in range(60):
            a = hi - _GOLDEN * (hi - lo)
            b = lo + _GOLDEN * (hi - lo)
            left = g(a) >= g(b)
            hi = np.where(left, b, hi)
            lo = np.where(left, lo, a)
        best = np.maximum(best, g(0.5 * (lo + hi)))
    D = m**2 + (1 - m) ** 2 + 2 * m * (1 - m) * np.exp(-t) - best**2
    return np.ascontiguousarray(np.maximum(D, 0.0))


_TABLE = merge_loss_table()  # a global array: numba compiles it in as a constant


def _table_loss(m, t):
    """Bilinear interpolation of the merge-loss table at weight m in [0, 1] and
    ``t = gamma ||x_i - x_j||^2 >= 0`` (clamped to the table's last column, where the two
    Gaussians no longer overlap)."""
    nm = _TABLE.shape[0] - 1
    nd = _TABLE.shape[1] - 1
    fm = min(max(m, 0.0), 1.0) * nm
    fd = min(max(t, 0.0) / DIST_STEP, float(nd))
    i = min(int(fm), nm - 1)
    j = min(int(fd), nd - 1)
    tm = fm - i
    td = fd - j
    return (1.0 - tm) * ((1.0 - td) * _TABLE[i, j] + td * _TABLE[i, j + 1]) + tm * (
        (1.0 - td) * _TABLE[i + 1, j] + td * _TABLE[i + 1, j + 1]
    )


table_loss = njit(**JIT)(_table_loss)


def _segment_kernels(kind, p0, p1, normalize, h, ni, nj, dij):
    """``(k(x_i, z), k(x_j, z), k(z, z))`` for ``z = h x_i + (1 - h) x_j`` from the view's inner
    products ``ni = <x_i, x_i>``, ``nj = <x_j, x_j>``, ``dij = <x_i, x_j>``."""
    g = 1.0 - h
    dist = max(ni + nj - 2.0 * dij, 0.0)
    nz = h * h * ni + g * g * nj + 2.0 * h * g * dij
    kiz = kernel_value(kind, p0, p1, normalize, h * ni + g * dij, g * g * dist, ni, nz)
    kjz = kernel_value(kind, p0, p1, normalize, h * dij + g * nj, h * h * dist, nj, nz)
    kzz = kernel_value(kind, p0, p1, normalize, nz, 0.0, nz, nz)
    return kiz, kjz, kzz


segment_kernels = njit(**JIT)(_segment_kernels)


def _top_direction(s11, s12, s22):
    """Largest eigenvalue of [[s11, s12], [s12, s22]] and its unit eigenvector (alpha, beta)."""
    half = 0.5 * (s11 - s22)
    lam = 0.5 * (s11 + s22) + math.sqrt(half * half + s12 * s12)
    if s12 != 0.0:
        a, b = lam - s22, s12
        nrm = math.sqrt(a * a + b * b)
        return lam, a / nrm, b / nrm
    if s11 >= s22:
        return lam, 1.0, 0.0
    return lam, 0.0, 1.0


top_direction = njit(**JIT)(_top_direction)


def _merge_energy(h, ai, aj, ni_v, nj_v, rho, ortho, ssq_i, ssq_j, dij, im_blocks, view_of,
                  kinds, kp):  # fmt: skip
    """What the best shared term at ``z = h x_i + (1 - h) x_j`` keeps: ``lambda_max(S)`` and its
    direction (alpha, beta) in the orthonormal basis (v_i / |v_i|, e2) of span(v_i, v_j)."""
    s11 = 0.0
    s12 = 0.0
    s22 = 0.0
    for b in range(im_blocks.shape[0]):
        m = im_blocks[b]
        vw = view_of[m]
        kiz, kjz, kzz = segment_kernels(
            kinds[m], kp[m, 0], kp[m, 1], kp[m, 2] != 0.0, h, ssq_i[vw], ssq_j[vw], dij[vw]
        )
        if kzz <= 0.0:
            continue
        p = ai[b] * kiz
        q = aj[b] * kjz
        u1 = p * ni_v + q * nj_v * rho
        u2 = q * nj_v * ortho
        s11 += u1 * u1 / kzz
        s12 += u1 * u2 / kzz
        s22 += u2 * u2 / kzz
    return top_direction(s11, s12, s22)


merge_energy = njit(**JIT)(_merge_energy)


def _best_merge_point(ai, aj, ni_v, nj_v, rho, ortho, ssq_i, ssq_j, dij, im_blocks, view_of,
                      kinds, kp):  # fmt: skip
    """h in [0, 1] maximising ``merge_energy``: golden-section search in each half, endpoints
    compared too. Returns (h, lambda_max, alpha, beta)."""
    best_h = 1.0
    best, al, be = merge_energy(1.0, ai, aj, ni_v, nj_v, rho, ortho, ssq_i, ssq_j, dij,
                                im_blocks, view_of, kinds, kp)  # fmt: skip
    e0, a0, b0 = merge_energy(0.0, ai, aj, ni_v, nj_v, rho, ortho, ssq_i, ssq_j, dij,
                              im_blocks, view_of, kinds, kp)  # fmt: skip
    if e0 > best:
        best_h, best, al, be = 0.0, e0, a0, b0
    for half in range(2):
        lo = 0.5 * half
        hi = lo + 0.5
        x1 = hi - _GOLDEN * (hi - lo)
        x2 = lo + _GOLDEN * (hi - lo)
        f1 = merge_energy(x1, ai, aj, ni_v, nj_v, rho, ortho, ssq_i, ssq_j, dij, im_blocks,
                          view_of, kinds, kp)[0]  # fmt: skip
        f2 = merge_energy(x2, ai, aj, ni_v, nj_v, rho, ortho, ssq_i, ssq_j, dij, im_blocks,
                          view_of, kinds, kp)[0]  # fmt: skip
        for _ in range(_SEARCH_STEPS):
            if f1 >= f2:
                hi = x2
                x2 = x1
                f2 = f1
                x1 = hi - _GOLDEN * (hi - lo)
                f1 = merge_energy(x1, ai, aj, ni_v, nj_v, rho, ortho, ssq_i, ssq_j, dij,
                                  im_blocks, view_of, kinds, kp)[0]  # fmt: skip
            else:
                lo = x1
                x1 = x2
                f1 = f2
                x2 = lo + _GOLDEN * (hi - lo)
                f2 = merge_energy(x2, ai, aj, ni_v, nj_v, rho, ortho, ssq_i, ssq_j, dij,
                                  im_blocks, view_of, kinds, kp)[0]  # fmt: skip
        h = 0.5 * (lo + hi)
        e, a, b = merge_energy(h, ai, aj, ni_v, nj_v, rho, ortho, ssq_i, ssq_j, dij, im_blocks,
                               view_of, kinds, kp)  # fmt: skip
        if e > best:
            best_h, best, al, be = h, e, a, b
    return best_h, best, al, be


best_merge_point = njit(**JIT)(_best_merge_point)


def _direction_cosine(sv, i, j):
    """(cos angle(v_i, v_j), |v_i|, |v_j|)."""
    vij = 0.0
    vii = 0.0
    vjj = 0.0
    for k in range(sv.shape[1]):
        vij += sv[i, k] * sv[j, k]
        vii += sv[i, k] * sv[i, k]
        vjj += sv[j, k] * sv[j, k]
    ni = math.sqrt(vii)
    nj = math.sqrt(vjj)
    if ni == 0.0 or nj == 0.0:
        return 0.0, ni, nj
    rho = vij / (ni * nj)
    if rho > 1.0 - _PARALLEL:
        rho = 1.0
    return rho, ni, nj


direction_cosine = njit(**JIT)(_direction_cosine)


def _merge_partner(i, n, im_blocks, view_of, masks, view_full, kinds, kp, sx, ssq, sv, coef,
                   kself, scale, drow):  # fmt: skip
    """The partner j of pair i with the smallest estimated merge loss (-1 if none has an acute
    direction) and that estimate. ``drow`` (>= n, V) receives the inner products of x_i with
    every support input (``support_dots``: ``merge_pairs`` reuses them).

    What depends on i alone is computed once, before the pass over the partners: ``|v_i|`` and
    each block's weight along ``v_i / |v_i|`` (``direction_cosine``'s and the loop's own
    operations, so the same numbers; the pass ~11 -> ~7-8 µs over 256 pairs, measured in a
    compiled loop on the kernelized river row's states)."""
    support_dots(sx[i], masks, view_full, sx, n, drow)
    K = sv.shape[1]
    vii = 0.0
    for k in range(K):
        vii += sv[i, k] * sv[i, k]
    ni_v = math.sqrt(vii)
    n_im = im_blocks.shape[0]
    a_i = np.empty(n_im)  # weights along v_i / |v_i|
    for b in range(n_im):
        m = im_blocks[b]
        a_i[b] = scale[m] * coef[m, i] * ni_v
    best = np.inf
    partner = -1
    for j in range(n):
        if j == i:
            continue
        vij = 0.0
        vjj = 0.0
        for k in range(K):
            vij += sv[i, k] * sv[j, k]
            vjj += sv[j, k] * sv[j, k]
        if ni_v == 0.0 or vjj == 0.0:  # (direction_cosine's rho = 0: not acute)
            continue
        nj_v = math.sqrt(vjj)
        rho = vij / (ni_v * nj_v)
        if rho <= 0.0:
            continue
        if rho > 1.0 - _PARALLEL:
            rho = 1.0
        ortho2 = 1.0 - rho * rho
        loss = 0.0
        for b in range(n_im):
            m = im_blocks[b]
            vw = view_of[m]
            dij = drow[j, vw]
            ai = a_i[b]
            aj_full = scale[m] * coef[m, j] * nj_v
            aj = aj_full * rho
            loss += aj_full * aj_full * ortho2 * kself[j, m]  # the part orthogonal to v_i
            if kinds[m] == K_RBF:
                tot = ai + aj
                if tot == 0.0:
                    continue
                dist = max(ssq[i, vw] + ssq[j, vw] - 2.0 * dij, 0.0)
                loss += tot * tot * table_loss(ai / tot, kp[m, 0] * dist)
            else:
                tot = ai + aj
                h = ai / tot if tot != 0.0 else 0.5
                kiz, kjz, kzz = segment_kernels(
                    kinds[m], kp[m, 0], kp[m, 1], kp[m, 2] != 0.0, h, ssq[i, vw], ssq[j, vw], dij
                )
                kij = kernel_value(
                    kinds[m], kp[m, 0], kp[m, 1], kp[m, 2] != 0.0, dij,
                    ssq[i, vw] + ssq[j, vw] - 2.0 * dij, ssq[i, vw], ssq[j, vw],
                )  # fmt: skip
                full = ai * ai * kself[i, m] + aj * aj * kself[j, m] + 2.0 * ai * aj * kij
                kept = (ai * kiz + aj * kjz) ** 2 / kzz if kzz > 0.0 else 0.0
                loss += max(full - kept, 0.0)
            if loss >= best:
                break
        if loss < best:
            best = loss
            partner = j
    return partner, best


merge_partner = njit(**JIT)(_merge_partner)


def _merge_plan(i, removal, n, im_blocks, view_of, masks, view_full, kinds, kp, sx, ssq, sv,
                coef, kself, scale, drow):  # fmt: skip
    """The merge of pair i: ``(j, h, alpha, beta)`` for its best partner j (``merge_partner``,
    which leaves x_i's inner products in ``drow``), the merge point and the shared direction
    (``best_merge_point``), or j = -1 when no merge loses less than ``removal``, the loss of
    removing pair i."""
    n_views = masks.shape[0]
    dij = np.empty(n_views)
    j, estimate = merge_partner(i, n, im_blocks, view_of, masks, view_full, kinds, kp,
                                sx, ssq, sv, coef, kself, scale, drow)  # fmt: skip
    if j < 0 or estimate >= removal:
        return -1, 0.0, 0.0, 0.0
    rho, ni_v, nj_v = direction_cosine(sv, i, j)
    n_im = im_blocks.shape[0]
    ai = np.empty(n_im)
    aj = np.empty(n_im)
    for b in range(n_im):
        ai[b] = scale[im_blocks[b]] * coef[im_blocks[b], i]
        aj[b] = scale[im_blocks[b]] * coef[im_blocks[b], j]
    for vw in range(n_views):
        dij[vw] = view_dot(sx[i], sx[j], masks[vw], view_full[vw])
    ortho = math.sqrt(max(1.0 - rho * rho, 0.0))
    h, kept, alpha, beta = best_merge_point(ai, aj, ni_v, nj_v, rho, ortho, ssq[i], ssq[j], dij,
                                            im_blocks, view_of, kinds, kp)  # fmt: skip
    full = 0.0  # sum_m ||X_m||^2: what the merged pair replaces
    vij = rho * ni_v * nj_v
    for b in range(n_im):
        m = im_blocks[b]
        vw = view_of[m]
        kij = kernel_value(
            kinds[m], kp[m, 0], kp[m, 1], kp[m, 2] != 0.0, dij[vw],
            ssq[i, vw] + ssq[j, vw] - 2.0 * dij[vw], ssq[i, vw], ssq[j, vw],
        )  # fmt: skip
        full += (ai[b] * ai[b] * kself[i, m] * ni_v * ni_v
                 + aj[b] * aj[b] * kself[j, m] * nj_v * nj_v
                 + 2.0 * ai[b] * aj[b] * kij * vij)  # fmt: skip
    if full - kept >= removal:
        return -1, 0.0, 0.0, 0.0
    return j, h, alpha, beta


merge_plan = njit(**JIT)(_merge_plan)
