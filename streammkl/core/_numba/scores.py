"""Block scores: explicit dot products and kernel expansions over the shared support set."""

from __future__ import annotations

import numpy as np
from numba import njit

from streammkl.core._jit import JIT, JIT_INLINE
from streammkl.core._numba.features import dot4
from streammkl.core._numba.kernels import kernel_value, view_dot


def _support_expansion(
    z, zsq, im_blocks, view_of, masks, view_full, kinds, kp, sx, ssq, sv, coef, n_support, out,
):  # fmt: skip
    """``out[m, :] = sum_s coef[m, s] k_m(x_s, z) v_s`` for the implicit blocks (unscaled).

    Two passes: the inner products of z with every support input (per view), then one loop per
    block whose kernel kind is loop-invariant (branch-free inner loop).
    """
    K = out.shape[1]
    n_views = masks.shape[0]
    dots = np.empty((n_support, n_views))
    for s in range(n_support):
        for vw in range(n_views):
            if view_full[vw]:
                dots[s, vw] = dot4(z, sx[s], 0, z.shape[0])
            else:
                dots[s, vw] = view_dot(z, sx[s], masks[vw], False)
    for m in im_blocks:
        vw = view_of[m]
        kind = kinds[m]
        p0 = kp[m, 0]
        p1 = kp[m, 1]
        normalize = kp[m, 2] != 0.0
        nz = zsq[vw]
        for k in range(K):
            out[m, k] = 0.0
        for s in range(n_support):
            c = coef[m, s]
            if c == 0.0:
                continue
            d = dots[s, vw]
            ns = ssq[s, vw]
            kv = kernel_value(kind, p0, p1, normalize, d, nz + ns - 2.0 * d, nz, ns)
            if kv == 0.0:  # e.g. B1 outside its support: the terms would add zeros
                continue
            c *= kv
            for k in range(K):
                out[m, k] += c * sv[s, k]


support_expansion = njit(**JIT)(_support_expansion)


def _block_scores(
    x, phi, w, scale, ex_blocks, ex_off, im_blocks, view_of, masks, view_full,
    kinds, kp, sx, ssq, sv, coef, n_support, xsq, dots, scores,
):  # fmt: skip
    """Per-block scores ``scores[m, :] = f_m(x)`` (explicit: W phi; implicit: kernel expansion)."""
    K = scores.shape[1]
    for m in ex_blocks:
        a = ex_off[m]
        e = ex_off[m + 1]
        for k in range(K):
            scores[m, k] = scale[m] * dot4(w[k], phi, a, e)
    if im_blocks.shape[0] == 0:
        return
    n_views = masks.shape[0]
    for vw in range(n_views):
        xsq[vw] = view_dot(x, x, masks[vw], view_full[vw])
    support_expansion(
        x, xsq, im_blocks, view_of, masks, view_full, kinds, kp, sx, ssq, sv, coef,
        n_support, scores,
    )  # fmt: skip
    for m in im_blocks:
        for k in range(K):
            scores[m, k] *= scale[m]


block_scores = njit(**JIT_INLINE)(_block_scores)


def _zero_or_fold_block(m, is_explicit, w, ex_off, coef, n_support, scale, zero):
    """Zero block ``m`` (0/0 := 0 of Prop. 1), or fold its underflowing lazy scale into storage."""
    f = 0.0 if zero else scale[m]
    if is_explicit:
        for k in range(w.shape[0]):
            for j in range(ex_off[m], ex_off[m + 1]):
                w[k, j] *= f
    else:
        for s in range(n_support):
            coef[m, s] *= f
    scale[m] = 1.0


zero_or_fold_block = njit(**JIT)(_zero_or_fold_block)


def _explicit_sqnorm(w, a, e):
    acc = 0.0
    for k in range(w.shape[0]):
        acc += dot4(w[k], w[k], a, e)
    return acc


explicit_sqnorm = njit(**JIT)(_explicit_sqnorm)
