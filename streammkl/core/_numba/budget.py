"""Support-set budget maintenance with exact block norms: room for one more pair.

Below the capacity the next slot is taken. At the capacity one budget step frees a slot:

- ``B_OLDEST`` / ``B_SMALLEST``: remove the oldest pair / the pair with the smallest
  contribution ``sum_m ||a_ms phi_m(x_s) (x) v_s||^2``;
- ``B_MERGE``: merge the smallest pair with its best partner (chosen by ``merge.merge_plan``,
  applied by ``merge_pairs``), or remove it when no merge loses less than the removal;
- ``B_PROJECT``: project the pair whose projection loses least onto the others
  (``projection.py``; the Gram matrices and their inverses are bordered on every insertion).

Every step updates the block norms exactly (O(|S|) for removal and merge, O(|S|^2) for
projection) and reports what it changed in theta as up to three explicit terms
``tc[t, m] phi_m(tx[t]) (x) tv[t]`` plus, for projection, a change ``dense[m, s]`` of the scaled
coefficients of the pairs that stay, so that callers can correct scores they hold
(``shift_scores``); the scores at the incoming input are corrected here.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from streammkl.core._jit import JIT, JIT_INLINE
from streammkl.core._numba.codes import B_MERGE, B_OLDEST, B_PROJECT
from streammkl.core._numba.features import dot4
from streammkl.core._numba.kernels import kernel_value, view_dot
from streammkl.core._numba.merge import direction_cosine, merge_plan
from streammkl.core._numba.projection import cheapest_projection, gram_border, project_out
from streammkl.core._numba.scores import kernel_row, support_dots, support_expansion


def _smallest_pair(n, im_blocks, sv, coef, kself, scale):
    """The pair with the smallest ``sum_m ||a_ms phi_m(x_s) (x) v_s||^2`` and that value."""
    K = sv.shape[1]
    victim = 0
    best = np.inf
    for s in range(n):
        vv = 0.0
        for k in range(K):
            vv += sv[s, k] * sv[s, k]
        tot = 0.0
        for m in im_blocks:
            c = scale[m] * coef[m, s]
            tot += c * c * kself[s, m] * vv
        if tot < best:
            best = tot
            victim = s
    return victim, best


smallest_pair = njit(**JIT)(_smallest_pair)


def _remove_pair(victim, n, im_blocks, view_of, masks, view_full, kinds, kp,
                 sx, ssq, sv, coef, kself, scale, norms, tc):  # fmt: skip
    """Remove pair ``victim``: exact block norms (O(|S|)); ``tc[m]`` gets minus its scaled
    coefficient."""
    K = sv.shape[1]
    f_vic = np.zeros((coef.shape[0], K))  # f_m(x_victim) over the support set (unscaled)
    support_expansion(
        sx[victim], ssq[victim], im_blocks, view_of, masks, view_full, kinds, kp,
        sx, ssq, sv, coef, n, f_vic,
    )  # fmt: skip
    vv = 0.0
    for k in range(K):
        vv += sv[victim, k] * sv[victim, k]
    for m in im_blocks:
        c = scale[m] * coef[m, victim]
        if c == 0.0:
            continue
        fv = 0.0
        for k in range(K):
            fv += scale[m] * f_vic[m, k] * sv[victim, k]
        n2 = norms[m] * norms[m] - 2.0 * c * fv + c * c * kself[victim, m] * vv
        norms[m] = math.sqrt(n2) if n2 > 0.0 else 0.0
        tc[m] = -c
        coef[m, victim] = 0.0


remove_pair = njit(**JIT)(_remove_pair)


def _weighted_sum(a, b, c, n):
    """``sum_{s < n} (a[s] b[s]) c[s]`` with four accumulators (a latency chain a quarter as
    long as one running sum)."""
    a0 = a1 = a2 = a3 = 0.0
    for q in range(n // 4):
        s = 4 * q
        a0 += a[s] * b[s] * c[s]
        a1 += a[s + 1] * b[s + 1] * c[s + 1]
        a2 += a[s + 2] * b[s + 2] * c[s + 2]
        a3 += a[s + 3] * b[s + 3] * c[s + 3]
    for s in range(n - n % 4, n):
        a0 += a[s] * b[s] * c[s]
    return (a0 + a1) + (a2 + a3)


weighted_sum = njit(**JIT_INLINE)(_weighted_sum)


def _merge_pairs(i, j, h, alpha, beta, n, im_blocks, view_of, masks, view_full, kinds, kp,
                 sx, ssq, sv, coef, kself, scale, norms, tx, tsq, tc, tv, drow):  # fmt: skip
    """Merge pair j into pair i at ``z = h x_i + (1 - h) x_j`` with the shared direction
    (alpha, beta) of ``merge_energy``: slot i holds the merged pair, slot j is freed; exact block
    norms (O(|S|)). Terms 0 and 1 of (tx, tsq, tc, tv) receive the removed pairs, term 2 the new
    one. ``drow`` (>= n, V) holds x_i's inner products with the support inputs
    (``support_dots``, as ``merge_partner`` leaves them)."""
    K = sv.shape[1]
    M = coef.shape[0]
    n_views = masks.shape[0]
    rho, ni_v, nj_v = direction_cosine(sv, i, j)
    ortho = math.sqrt(max(1.0 - rho * rho, 0.0))
    if alpha + alpha * rho + beta * ortho < 0.0:  # orient v_z towards v_i + v_j
        alpha, beta = -alpha, -beta
    for k in range(K):
        ei = sv[i, k] / ni_v
        e2 = (sv[j, k] / nj_v - rho * ei) / ortho if ortho > 0.0 else 0.0
        tv[0, k] = sv[i, k]
        tv[1, k] = sv[j, k]
        tv[2, k] = ni_v * (alpha * ei + beta * e2)
    d = sx.shape[1]
    for q in range(d):
        tx[0, q] = sx[i, q]
        tx[1, q] = sx[j, q]
        tx[2, q] = h * sx[i, q] + (1.0 - h) * sx[j, q]
    for vw in range(n_views):
        tsq[0, vw] = ssq[i, vw]
        tsq[1, vw] = ssq[j, vw]
        tsq[2, vw] = view_dot(tx[2], tx[2], masks[vw], view_full[vw])
    # <f_m(p), u> over the support set (unscaled) for (p, u) = (x_i, v_i), (x_j, v_j), (z, v_z):
    # all the exact norm update needs; z's inner products combined from the two others' (the
    # segment), x_i's the partner search's (drow): one pass of inner products for three rows
    dots = np.empty((3, n, n_views))
    dots[0] = drow[:n]
    support_dots(tx[1], masks, view_full, sx, n, dots[1])
    for s in range(n):
        for vw in range(n_views):
            dots[2, s, vw] = h * dots[0, s, vw] + (1.0 - h) * dots[1, s, vw]
    vdir = np.empty((3, n))  # <v_s, u> for the three directions
    for s in range(n):
        a0 = 0.0
        a1 = 0.0
        a2 = 0.0
        for k in range(K):
            a0 += sv[s, k] * tv[0, k]
            a1 += sv[s, k] * tv[1, k]
            a2 += sv[s, k] * tv[2, k]
        vdir[0, s] = a0
        vdir[1, s] = a1
        vdir[2, s] = a2
    fu = np.zeros((3, M))
    kvals = np.empty(n)
    for m in im_blocks:
        vw = view_of[m]
        for t in range(3):
            kernel_row(kinds[m], kp[m, 0], kp[m, 1], kp[m, 2] != 0.0, tsq[t, vw], dots[t], vw,
                       ssq, n, kvals)  # fmt: skip
            fu[t, m] = weighted_sum(coef[m], kvals, vdir[t], n)
    vzz = 0.0
    vzi = 0.0
    vzj = 0.0
    vij = 0.0
    for k in range(K):
        vzz += tv[2, k] * tv[2, k]
        vzi += tv[2, k] * sv[i, k]
        vzj += tv[2, k] * sv[j, k]
        vij += sv[i, k] * sv[j, k]
    for m in im_blocks:
        vw = view_of[m]
        kind = kinds[m]
        p0 = kp[m, 0]
        p1 = kp[m, 1]
        nrm = kp[m, 2] != 0.0
        s = scale[m]
        ai = s * coef[m, i]
        aj = s * coef[m, j]
        dzi = view_dot(tx[2], tx[0], masks[vw], view_full[vw])
        dzj = view_dot(tx[2], tx[1], masks[vw], view_full[vw])
        dij = view_dot(tx[0], tx[1], masks[vw], view_full[vw])
        nz, ni, nj = tsq[2, vw], tsq[0, vw], tsq[1, vw]
        kzi = kernel_value(kind, p0, p1, nrm, dzi, nz + ni - 2.0 * dzi, nz, ni)
        kzj = kernel_value(kind, p0, p1, nrm, dzj, nz + nj - 2.0 * dzj, nz, nj)
        kij = kernel_value(kind, p0, p1, nrm, dij, ni + nj - 2.0 * dij, ni, nj)
        kzz = kernel_value(kind, p0, p1, nrm, nz, 0.0, nz, nz)
        c = 0.0
        if kzz > 0.0 and vzz > 0.0:
            c = (ai * kzi * vzi + aj * kzj * vzj) / (kzz * vzz)  # <u_m, v_z> / (k_zz |v_z|^2)
        cross = s * (c * fu[2, m] - ai * fu[0, m] - aj * fu[1, m])  # <theta_m, new - old>
        delta2 = (
            c * c * kzz * vzz + ai * ai * kself[i, m] * ni_v * ni_v
            + aj * aj * kself[j, m] * nj_v * nj_v - 2.0 * c * ai * kzi * vzi
            - 2.0 * c * aj * kzj * vzj + 2.0 * ai * aj * kij * vij
        )  # fmt: skip
        n2 = norms[m] * norms[m] + 2.0 * cross + delta2
        norms[m] = math.sqrt(n2) if n2 > 0.0 else 0.0
        tc[0, m] = -ai
        tc[1, m] = -aj
        tc[2, m] = c
        coef[m, i] = c / s
        coef[m, j] = 0.0
        kself[i, m] = kzz
    for q in range(d):
        sx[i, q] = tx[2, q]
    for vw in range(n_views):
        ssq[i, vw] = tsq[2, vw]
    for k in range(K):
        sv[i, k] = tv[2, k]


merge_pairs = njit(**JIT)(_merge_pairs)


def _add_pair(dots, ysq, psq, coefs, direction, im_blocks, view_of, kinds, kp, out):
    """``out[m, :] += coefs[m] k_m(p, y) direction`` for one pair input p, from its inner
    products ``dots`` (V,) with y and the squared norms ``ysq``, ``psq`` (V,)."""
    for m in im_blocks:
        c = coefs[m]
        if c == 0.0:
            continue
        vw = view_of[m]
        kv = kernel_value(
            kinds[m], kp[m, 0], kp[m, 1], kp[m, 2] != 0.0, dots[vw],
            ysq[vw] + psq[vw] - 2.0 * dots[vw], ysq[vw], psq[vw],
        )  # fmt: skip
        for k in range(out.shape[1]):
            out[m, k] += c * kv * direction[k]


add_pair = njit(**JIT)(_add_pair)


def _shift_scores(y, ysq, nt, tx, tsq, tc, tv, dense, n, im_blocks, view_of, masks, view_full,
                  kinds, kp, sx, ssq, sv, out):  # fmt: skip
    """``out[m, :] += f'_m(y) - f_m(y)`` for a change of theta reported by ``make_room``: the
    terms ``tc[t, m] phi_m(tx[t]) (x) tv[t]`` (t < nt) and the pairs' coefficient changes
    ``dense[m, s]`` (s < n; none when dense has no columns)."""
    n_views = masks.shape[0]
    dots = np.empty(n_views)
    for t in range(nt):
        for vw in range(n_views):
            dots[vw] = view_dot(y, tx[t], masks[vw], view_full[vw])
        add_pair(dots, ysq, tsq[t], tc[t], tv[t], im_blocks, view_of, kinds, kp, out)
    if dense.shape[1] == 0:
        return
    for s in range(n):
        for vw in range(n_views):
            if view_full[vw]:
                dots[vw] = dot4(y, sx[s], 0, y.shape[0])
            else:
                dots[vw] = view_dot(y, sx[s], masks[vw], False)
        add_pair(dots, ysq, ssq[s], dense[:, s], sv[s], im_blocks, view_of, kinds, kp, out)


shift_scores = njit(**JIT)(_shift_scores)


def _budget_step(
    policy, x, xsq, im_blocks, view_of, masks, view_full, kinds, kp,
    sx, ssq, sv, coef, kself, sage, counters, scale, norms, gram, scores,
):  # fmt: skip
    """One budget step of ``policy`` on a full support set (``counters[0]`` pairs), before the
    pair at x is inserted; returns ``(slot, nt, tx, tsq, tc, tv, dense)``: the freed slot and
    what the step changed in theta (see the module doc). The block norms stay exact and
    ``scores`` (M, K), the scaled block scores at x, are corrected."""
    M = coef.shape[0]
    K = sv.shape[1]
    d = sx.shape[1]
    n_views = masks.shape[0]
    n = counters[0]
    tx = np.zeros((3, d))
    tsq = np.zeros((3, n_views))
    tc = np.zeros((3, M))
    tv = np.zeros((3, K))
    dense = np.zeros((M, 0))
    nt = 0
    slot = -1
    if policy == B_PROJECT:
        slot = cheapest_projection(n, im_blocks, coef, scale, gram)
        dense = np.zeros((M, n))
        project_out(slot, n, im_blocks, coef, scale, norms, gram, dense, tc[0])
    elif policy == B_MERGE:
        i, removal = smallest_pair(n, im_blocks, sv, coef, kself, scale)
        drow = np.empty((n, n_views))  # x_i's inner products: the partner search's, reused
        j, h, alpha, beta = merge_plan(i, removal, n, im_blocks, view_of, masks, view_full, kinds,
                                       kp, sx, ssq, sv, coef, kself, scale, drow)  # fmt: skip
        if j >= 0:
            merge_pairs(i, j, h, alpha, beta, n, im_blocks, view_of, masks, view_full, kinds, kp,
                        sx, ssq, sv, coef, kself, scale, norms, tx, tsq, tc, tv, drow)  # fmt: skip
            sage[i] = counters[1]  # a new pair: a new insertion stamp
            counters[1] += 1
            slot = j
            nt = 3
        else:
            slot = i
    elif policy == B_OLDEST:
        slot = 0
        for s in range(1, n):
            if sage[s] < sage[slot]:
                slot = s
    else:
        slot = smallest_pair(n, im_blocks, sv, coef, kself, scale)[0]
    if nt == 0:  # a removal (or a projection): one term, the removed pair
        if policy != B_PROJECT:
            remove_pair(slot, n, im_blocks, view_of, masks, view_full, kinds, kp,
                        sx, ssq, sv, coef, kself, scale, norms, tc[0])  # fmt: skip
        for q in range(d):
            tx[0, q] = sx[slot, q]
        for vw in range(n_views):
            tsq[0, vw] = ssq[slot, vw]
        for k in range(K):
            tv[0, k] = sv[slot, k]
        nt = 1
    shift_scores(x, xsq, nt, tx, tsq, tc, tv, dense, n, im_blocks, view_of, masks,
                 view_full, kinds, kp, sx, ssq, sv, scores)  # fmt: skip
    return slot, nt, tx, tsq, tc, tv, dense


budget_step = njit(**JIT)(_budget_step)


def _make_room(
    policy, x, xsq, v, im_blocks, view_of, masks, view_full, kinds, kp,
    sx, ssq, sv, coef, kself, sage, counters, capacity, scale, norms, gram, scores,
):  # fmt: skip
    """The slot for the pair (x, v) about to be inserted: ``counters[0]`` (incremented) below
    ``capacity``, else the slot a ``budget_step`` frees (block norms exact, ``scores`` — the
    scaled block scores at x — corrected). With the projection policy every implicit block's
    Gram matrix and inverse (``gram``, (n_implicit, 2, cap, cap)) are bordered with (x, v).
    """
    n = counters[0]
    if n < capacity:
        slot = n
        counters[0] = n + 1
    else:
        slot = budget_step(
            policy, x, xsq, im_blocks, view_of, masks, view_full, kinds, kp,
            sx, ssq, sv, coef, kself, sage, counters, scale, norms, gram, scores,
        )[0]  # fmt: skip
    if gram.shape[2] > 0:
        gram_border(x, xsq, v, slot, counters[0], im_blocks, view_of, masks, view_full, kinds, kp,
                    sx, ssq, sv, gram)  # fmt: skip
    return slot


make_room = njit(**JIT)(_make_room)
