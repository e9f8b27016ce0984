"""The per-position loops of the sequence learner's joint-kernel blocks (streammkl.structured)."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from streammkl.core._jit import JIT
from streammkl.core._numba.budget import budget_step, gram_border, shift_scores
from streammkl.core._numba.codes import _PRUNE_MARGIN, K_B1
from streammkl.core._numba.features import dot4, explicit_phi
from streammkl.core._numba.kernels import kernel_value, view_dot
from streammkl.core._numba.scores import block_scores, explicit_sqnorm

# ----------------------------------------------------------------------------- joint-kernel blocks
# The unigram blocks reuse the core's block layout and state (``core.state``): a position x_i with
# label-indexed direction v_i is one support pair (x_i, v_i), exactly as one example is in the
# core, so scoring and budget maintenance are the core's compiled functions, called once per
# position.


def _b1_pruned_expansion(
    m, vw, z, nz, zp, masks, view_full, h, sx, ssq, sproj, sv, coef, n_support, out,
):  # fmt: skip
    """``out[m, :] = sum_s coef[m, s] k(x_s, z) v_s`` for a B1-spline block, skipping the pairs
    that a projection bound puts outside the kernel's support (unscaled).

    ``zp`` and ``sproj[vw, s]`` are the coordinates of z and x_s in an orthonormal basis of part
    of the view, so ``||zp - sproj[vw, s]||^2 <= ||z - x_s||^2``: a pair whose projected squared
    distance exceeds ``h^2`` (plus a relative slack ``_PRUNE_MARGIN``, far above rounding) has
    ``k = 0`` exactly, also as ``kernel_value`` computes it, and costs ``len(zp)`` operations
    instead of a full inner product. The other pairs are evaluated exactly as in
    ``support_expansion``, so the result is the same bit for bit, whatever the basis. Two passes
    (bound for every pair, then the kept pairs) keep the first loop free of unpredictable branches.
    """
    K = out.shape[1]
    r = zp.shape[0]
    cap = h * h * (1.0 + _PRUNE_MARGIN)
    for k in range(K):
        out[m, k] = 0.0
    keep = np.empty(n_support, dtype=np.int64)  # pass 1: the pairs the bound cannot skip
    n_keep = 0
    for s in range(n_support):
        a0 = a1 = a2 = a3 = 0.0
        j = 0
        while j + 4 <= r:
            t0 = zp[j] - sproj[vw, s, j]
            t1 = zp[j + 1] - sproj[vw, s, j + 1]
            t2 = zp[j + 2] - sproj[vw, s, j + 2]
            t3 = zp[j + 3] - sproj[vw, s, j + 3]
            a0 += t0 * t0
            a1 += t1 * t1
            a2 += t2 * t2
            a3 += t3 * t3
            j += 4
        while j < r:
            t0 = zp[j] - sproj[vw, s, j]
            a0 += t0 * t0
            j += 1
        keep[n_keep] = s  # branch-free: the slot is overwritten unless the pair is kept
        lb = (a0 + a1) + (a2 + a3)
        n_keep += (lb <= cap + _PRUNE_MARGIN * (nz + ssq[s, vw])) & (coef[m, s] != 0.0)
    full = view_full[vw]
    for i in range(n_keep):  # pass 2: exactly support_expansion's terms
        s = keep[i]
        ns = ssq[s, vw]
        if full:
            d = dot4(z, sx[s], 0, z.shape[0])
        else:
            d = view_dot(z, sx[s], masks[vw], False)
        kv = kernel_value(K_B1, h, 0.0, False, d, nz + ns - 2.0 * d, nz, ns)
        if kv == 0.0:
            continue
        c = coef[m, s] * kv
        for k in range(K):
            out[m, k] += c * sv[s, k]


b1_pruned_expansion = njit(**JIT)(_b1_pruned_expansion)


def _sequence_scores(
    X, kinds, kp, view_of, masks, view_full, ex_blocks, im_blocks,
    ex_off, ex_kind, ex_norm, phi_src, rff_wt, rff_b,
    w, scale, sx, ssq, sv, coef, n_support, phis, scores, xsqs, dots,
    im_pruned, basis, sproj, zp,
):  # fmt: skip
    """Per-position block scores ``scores[i, m, :] = f_m(x_i)`` and feature maps ``phis[i]``.

    ``xsqs[i, v]`` receives the squared norm of ``x_i`` on view ``v`` of the implicit blocks.
    ``im_blocks`` are the implicit blocks scored by ``support_expansion``; ``im_pruned`` are B1
    blocks scored by ``b1_pruned_expansion`` with the basis ``basis[v]`` (r, d) of their view
    and the projected support inputs ``sproj[v]`` (cap, r); ``zp`` (r,) is scratch.
    """
    for i in range(X.shape[0]):
        explicit_phi(X[i], ex_blocks, ex_off, ex_kind, ex_norm, phi_src, rff_wt, rff_b, phis[i])
        block_scores(
            X[i], phis[i], w, scale, ex_blocks, ex_off, im_blocks, view_of, masks, view_full,
            kinds, kp, sx, ssq, sv, coef, n_support, xsqs[i], dots, scores[i],
        )  # fmt: skip
        for vw in range(masks.shape[0]):
            xsqs[i, vw] = view_dot(X[i], X[i], masks[vw], view_full[vw])
        for m in im_pruned:
            vw = view_of[m]
            for j in range(zp.shape[0]):
                zp[j] = dot4(basis[vw, j], X[i], 0, X.shape[1])
            b1_pruned_expansion(
                m, vw, X[i], xsqs[i, vw], zp, masks, view_full, kp[m, 0],
                sx, ssq, sproj, sv, coef, n_support, scores[i],
            )  # fmt: skip
            for k in range(scores.shape[2]):
                scores[i, m, k] *= scale[m]


sequence_scores = njit(**JIT)(_sequence_scores)


def _pair_kernel(m, vw, xi, xj, xsq_i, xsq_j, kinds, kp, masks, view_full):
    dot = view_dot(xi, xj, masks[vw], view_full[vw])
    return kernel_value(
        kinds[m], kp[m, 0], kp[m, 1], kp[m, 2] != 0.0, dot, xsq_i + xsq_j - 2.0 * dot, xsq_i, xsq_j
    )


pair_kernel = njit(**JIT)(_pair_kernel)


def _sequence_step(
    X, V, active, eta,
    kinds, kp, view_of, masks, view_full, ex_blocks, im_blocks, ex_off, policy, capacity,
    w, scale, norms, sx, ssq, sv, coef, kself, sage, counters, gram, phis, scores, xsqs,
):  # fmt: skip
    """Gradient step ``theta_m += eta * sum_i phi_m(x_i) (x) V_i`` on every unigram block.

    Explicit blocks: ``W += (eta / scale) V^T Phi`` and the exact norm from W. Implicit blocks:
    one support pair per active position, added in order; the block norm follows erratum E1
    generalised to a sum over positions, one pair at a time,
    ``||theta + eta phi(x_i) (x) V_i||^2 = ||theta||^2 + 2 eta <f(x_i), V_i> + eta^2 K_ii |V_i|^2``
    with ``f`` updated for the later positions after each pair (``f(x_j) += eta K_ji V_i``); the
    terms add up to ``2 eta sum_i <f(x_i), V_i> + eta^2 sum_ij K_ij <V_i, V_j>``. With a budget,
    a full support set first takes one of the core's budget steps (``budget_step``: removal,
    merge or projection, exact norms), and the scores of the later positions are corrected for
    what it changed (``shift_scores``); the projection policy's Gram matrices (``gram``) are
    bordered with every inserted position. ``scores`` (T, M, K) must
    hold the block scores at theta_t on entry; it is scratch afterwards.
    """
    T = X.shape[0]
    K = V.shape[1]
    for m in ex_blocks:
        a = ex_off[m]
        e = ex_off[m + 1]
        g = eta / scale[m]
        for i in range(T):
            if not active[i]:
                continue
            for k in range(K):
                gk = g * V[i, k]
                if gk != 0.0:
                    for j in range(a, e):
                        w[k, j] += gk * phis[i, j]
        norms[m] = scale[m] * math.sqrt(explicit_sqnorm(w, a, e))
    if im_blocks.shape[0] == 0:
        return
    for i in range(T):
        if not active[i]:
            continue
        vv = 0.0
        for k in range(K):
            vv += V[i, k] * V[i, k]
        n = counters[0]
        if n >= capacity:
            slot, nt, tx, tsq, tc, tv, dense = budget_step(
                policy, X[i], xsqs[i], im_blocks, view_of, masks, view_full, kinds, kp,
                sx, ssq, sv, coef, kself, sage, counters, scale, norms, gram, scores[i],
            )  # fmt: skip
            for j in range(i + 1, T):
                if active[j]:
                    shift_scores(X[j], xsqs[j], nt, tx, tsq, tc, tv, dense, n, im_blocks, view_of,
                                 masks, view_full, kinds, kp, sx, ssq, sv, scores[j])  # fmt: skip
        else:
            slot = n
            counters[0] = n + 1
        if gram.shape[2] > 0:
            gram_border(X[i], xsqs[i], V[i], slot, counters[0], im_blocks, view_of, masks,
                        view_full, kinds, kp, sx, ssq, sv, gram)  # fmt: skip
        for j in range(X.shape[1]):
            sx[slot, j] = X[i, j]
        for vw in range(masks.shape[0]):
            ssq[slot, vw] = xsqs[i, vw]
        for k in range(K):
            sv[slot, k] = V[i, k]
        sage[slot] = counters[1]
        counters[1] += 1
        for m in im_blocks:  # corrected block-norm update (erratum E1), position i
            vw = view_of[m]
            kxx = kernel_value(
                kinds[m], kp[m, 0], kp[m, 1], kp[m, 2] != 0.0,
                xsqs[i, vw], 0.0, xsqs[i, vw], xsqs[i, vw],
            )  # fmt: skip
            fv = 0.0
            for k in range(K):
                fv += scores[i, m, k] * V[i, k]
            n2 = norms[m] * norms[m] + 2.0 * eta * fv + eta * eta * kxx * vv
            norms[m] = math.sqrt(n2) if n2 > 0.0 else 0.0
            kself[slot, m] = kxx
            coef[m, slot] = eta / scale[m]
        for j in range(i + 1, T):  # f_m(x_j) at the updated theta
            if not active[j]:
                continue
            for m in im_blocks:
                vw = view_of[m]
                kv = pair_kernel(m, vw, X[j], X[i], xsqs[j, vw], xsqs[i, vw],
                                 kinds, kp, masks, view_full)  # fmt: skip
                if kv == 0.0:
                    continue
                for k in range(K):
                    scores[j, m, k] += eta * kv * V[i, k]


sequence_step = njit(**JIT)(_sequence_step)
