"""A whole support set at once (for merging members' support sets, ``core.support_merge``):
per-pair view norms and self-kernel values, exact block norms from the Gram quadratic form, and
the budget policy applied until the set fits.

Block m of the set is ``theta_m = sum_s scale_m coef[m, s] phi_m(x_s) (x) v_s``, so
``||theta_m||^2 = scale_m^2 sum_{s,t} coef[m, s] coef[m, t] k_m(x_s, x_t) <v_s, v_t>``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from streammkl.core._jit import JIT
from streammkl.core._numba.budget import budget_step
from streammkl.core._numba.kernels import kernel_value, view_dot


def _pair_views(n, im_blocks, view_of, masks, view_full, kinds, kp, sx, ssq, kself):
    """``ssq[s, v] = <x_s, x_s>`` on every view and ``kself[s, m] = k_m(x_s, x_s)`` for the
    first n pairs (what the round stores with a pair)."""
    for s in range(n):
        for vw in range(masks.shape[0]):
            ssq[s, vw] = view_dot(sx[s], sx[s], masks[vw], view_full[vw])
        for m in im_blocks:
            q = ssq[s, view_of[m]]
            kself[s, m] = kernel_value(kinds[m], kp[m, 0], kp[m, 1], kp[m, 2] != 0.0, q, 0.0, q, q)


pair_views = njit(**JIT)(_pair_views)


def _support_sqnorms(n, im_blocks, view_of, masks, view_full, kinds, kp, sx, ssq, sv, coef, out):
    """``out[m] = sum_{s,t} coef[m, s] coef[m, t] k_m(x_s, x_t) <v_s, v_t>`` over the first n
    pairs (the unscaled squared block norms), O(n^2) kernel values per block."""
    K = sv.shape[1]
    n_views = masks.shape[0]
    dots = np.empty(n_views)
    for m in im_blocks:
        out[m] = 0.0
    for s in range(n):
        for t in range(s + 1):
            vst = 0.0
            for k in range(K):
                vst += sv[s, k] * sv[t, k]
            if vst == 0.0:
                continue
            for vw in range(n_views):
                dots[vw] = view_dot(sx[s], sx[t], masks[vw], view_full[vw])
            weight = 1.0 if s == t else 2.0
            for m in im_blocks:
                c = coef[m, s] * coef[m, t]
                if c == 0.0:
                    continue
                vw = view_of[m]
                d = dots[vw]
                ns, nt = ssq[s, vw], ssq[t, vw]
                kv = kernel_value(kinds[m], kp[m, 0], kp[m, 1], kp[m, 2] != 0.0, d,
                                  ns + nt - 2.0 * d, ns, nt)  # fmt: skip
                out[m] += weight * c * kv * vst


support_sqnorms = njit(**JIT)(_support_sqnorms)


def _move_pair(src, dst, sx, ssq, sv, coef, kself, age, gram):
    """Slot ``src``'s pair into slot ``dst`` (src is then free), Gram rows and columns too."""
    sx[dst] = sx[src]
    ssq[dst] = ssq[src]
    sv[dst] = sv[src]
    coef[:, dst] = coef[:, src]
    coef[:, src] = 0.0
    kself[dst] = kself[src]
    age[dst] = age[src]
    if gram.shape[2] == 0:  # no Gram matrices kept (every policy but projection)
        return
    for b in range(gram.shape[0]):
        for g in range(2):
            G = gram[b, g]
            for t in range(G.shape[0]):
                G[dst, t] = G[src, t]
            for t in range(G.shape[0]):
                G[t, dst] = G[t, src]
            G[dst, dst] = G[src, src]
            for t in range(G.shape[0]):
                G[src, t] = 0.0
                G[t, src] = 0.0


move_pair = njit(**JIT)(_move_pair)


def _shrink_support(policy, target, im_blocks, view_of, masks, view_full, kinds, kp,
                    sx, ssq, sv, coef, kself, age, counters, scale, norms, gram):  # fmt: skip
    """Budget steps of ``policy`` until at most ``target`` pairs remain (each frees one slot,
    filled by the last pair): block norms updated exactly as in learning, and, for the
    projection policy, the Gram matrices and inverses (``gram``, over every slot) downdated.
    Returns the number of steps."""
    d = sx.shape[1]
    x = np.zeros(d)
    xsq = np.zeros(masks.shape[0])
    scores = np.zeros((coef.shape[0], sv.shape[1]))
    steps = 0
    while counters[0] > target:
        slot = budget_step(policy, x, xsq, im_blocks, view_of, masks, view_full, kinds, kp,
                           sx, ssq, sv, coef, kself, age, counters, scale, norms, gram,
                           scores)[0]  # fmt: skip
        last = counters[0] - 1
        if slot != last:
            move_pair(last, slot, sx, ssq, sv, coef, kself, age, gram)
        else:
            coef[:, last] = 0.0
        counters[0] = last
        steps += 1
    return steps


shrink_support = njit(**JIT)(_shrink_support)
