"""Support-set budget maintenance with exact block norms."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from streammkl.core._jit import JIT
from streammkl.core._numba.codes import B_OLDEST
from streammkl.core._numba.kernels import kernel_value, view_dot
from streammkl.core._numba.scores import support_expansion


def _evict(
    policy, x, im_blocks, view_of, masks, view_full, kinds, kp,
    sx, ssq, sv, coef, kself, sage, n_support, scale, norms, xsq, dots, scores,
):  # fmt: skip
    """Remove one support pair; keep ``norms`` exact (O(|S|)) and correct ``scores`` at ``x``.

    Returns the freed slot.
    """
    K = sv.shape[1]
    victim = 0
    if policy == B_OLDEST:
        for s in range(1, n_support):
            if sage[s] < sage[victim]:
                victim = s
    else:  # smallest contribution ||term_s||^2 summed over blocks
        best = np.inf
        for s in range(n_support):
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
    n_views = masks.shape[0]
    # f_m(x_victim) for every implicit block, over the current support set (unscaled)
    f_vic = np.zeros((coef.shape[0], K))
    support_expansion(
        sx[victim], ssq[victim], im_blocks, view_of, masks, view_full, kinds, kp,
        sx, ssq, sv, coef, n_support, f_vic,
    )  # fmt: skip
    for vw in range(n_views):
        dots[vw] = view_dot(x, sx[victim], masks[vw], view_full[vw])
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
        vw = view_of[m]
        kv = kernel_value(
            kinds[m], kp[m, 0], kp[m, 1], kp[m, 2] != 0.0, dots[vw],
            xsq[vw] + ssq[victim, vw] - 2.0 * dots[vw], xsq[vw], ssq[victim, vw],
        )  # fmt: skip
        for k in range(K):
            scores[m, k] -= c * kv * sv[victim, k]
        coef[m, victim] = 0.0
    return victim


evict = njit(**JIT)(_evict)
