"""Block scores: explicit dot products and kernel expansions over the shared support set."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from streammkl.core._jit import JIT, JIT_INLINE
from streammkl.core._numba.codes import K_B1, K_POLY, K_RBF
from streammkl.core._numba.features import (
    dot4,
    dot4_pair,
    dot4_row,
    dot4_row_sq,
    dot4_rows,
    dot4_rows_sq,
)
from streammkl.core._numba.kernels import exp_many, kernel_value, view_dot


def _support_dots(z, masks, view_full, sx, n_support, dots):
    """``dots[s, v] = <z, x_s>`` on view v for every support input s < n_support (a full view:
    ``dot4``'s value, two rows per pass)."""
    d = z.shape[0]
    for vw in range(masks.shape[0]):
        if view_full[vw]:
            s = 0
            while s + 2 <= n_support:
                dots[s, vw], dots[s + 1, vw] = dot4_pair(z, sx, s, d)
                s += 2
            if s < n_support:
                dots[s, vw] = dot4(z, sx[s], 0, d)
        else:
            for s in range(n_support):
                dots[s, vw] = view_dot(z, sx[s], masks[vw], False)


support_dots = njit(**JIT)(_support_dots)


def _kernel_row(kind, p0, p1, normalize, nz, dots, vw, ssq, n_support, kvals):
    """``kvals[s] = k(x_s, z)`` for s < n_support from z's inner products ``dots[s, vw]`` with
    the support inputs and ``nz`` = <z, z> on view vw: the values ``kernel_value`` computes, in
    loops without branches that vectorise (a Gaussian block's exponentials by ``exp_many``; a
    linear or polynomial block with kernel_value's own operations, so the same bits)."""
    if kind == K_RBF:
        for s in range(n_support):
            kvals[s] = -p0 * max(nz + ssq[s, vw] - 2.0 * dots[s, vw], 0.0)
        exp_many(kvals, kvals, n_support)
    elif kind == K_B1:
        for s in range(n_support):
            d = dots[s, vw]
            ns = ssq[s, vw]
            kvals[s] = kernel_value(kind, p0, p1, normalize, d, nz + ns - 2.0 * d, nz, ns)
    else:  # linear, polynomial
        shift = p1 if kind == K_POLY else 0.0
        for s in range(n_support):
            base = dots[s, vw] + shift
            if normalize:
                den = math.sqrt((nz + shift) * (ssq[s, vw] + shift))
                base = base / den if den > 0.0 else 0.0
            kvals[s] = base
        if kind == K_POLY and int(p0) > 1:  # base^degree by repeated products
            bases = kvals[:n_support].copy()
            for _ in range(int(p0) - 1):
                for s in range(n_support):
                    kvals[s] *= bases[s]


kernel_row = njit(**JIT)(_kernel_row)


def _dots_expansion(
    zsq, dots, im_blocks, view_of, kinds, kp, ssq, sv, coef, n_support, out, kvals,
):  # fmt: skip
    """``out[m, :] = sum_s coef[m, s] k_m(x_s, z) v_s`` for the implicit blocks (unscaled), from
    the inner products ``dots`` (n, V) of z with the support inputs and ``zsq`` (V,) = <z, z>.

    One pass per block over the pairs: the kernel values first (``kernel_row``) into the scratch
    ``kvals`` (n,), then the sum; a B1-spline block skips the pairs outside its support.
    """
    K = out.shape[1]
    for m in im_blocks:
        vw = view_of[m]
        kind = kinds[m]
        p0 = kp[m, 0]
        p1 = kp[m, 1]
        normalize = kp[m, 2] != 0.0
        nz = zsq[vw]
        if kind != K_B1:
            kernel_row(kind, p0, p1, normalize, nz, dots, vw, ssq, n_support, kvals)
            for s in range(n_support):
                kvals[s] = coef[m, s] * kvals[s]
            for k in range(K):  # sums in registers, in the order of the pairs
                acc = 0.0
                for s in range(n_support):
                    acc += kvals[s] * sv[s, k]
                out[m, k] = acc
            continue
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


dots_expansion = njit(**JIT)(_dots_expansion)


def _support_expansion(
    z, zsq, im_blocks, view_of, masks, view_full, kinds, kp, sx, ssq, sv, coef, n_support, out,
):  # fmt: skip
    """``out[m, :] = sum_s coef[m, s] k_m(x_s, z) v_s`` for the implicit blocks (unscaled).

    Two passes: the inner products of z with every support input (per view), then the blocks'
    kernel loops (``dots_expansion``).
    """
    dots = np.empty((n_support, masks.shape[0]))
    support_dots(z, masks, view_full, sx, n_support, dots)
    dots_expansion(
        zsq, dots, im_blocks, view_of, kinds, kp, ssq, sv, coef, n_support, out,
        np.empty(n_support),
    )  # fmt: skip


support_expansion = njit(**JIT)(_support_expansion)


def _explicit_scores(phi, w, scale, ex_blocks, ex_off, scores, fsq, mirror):
    """``scores[m, k] = scale[m] dot4(w[k], phi_m)`` for the explicit blocks, two rows per pass
    (``dot4_rows``: the same sums as one row at a time); with a non-empty ``fsq`` (M,) also
    ``fsq[m] = ||phi_m||^2`` (``dot4(phi_m, phi_m)``), in the pass of the last rows. With
    ``mirror`` (two rows, ``w[1] = -w[0]`` exactly: see ``rounds.learn_round``) only the first
    row is computed and the second is its negation: the same numbers, half the work."""
    K = w.shape[0]
    want = fsq.shape[0] > 0
    for m in ex_blocks:
        a = ex_off[m]
        e = ex_off[m + 1]
        s = scale[m]
        if mirror:
            if want:
                d0, sq = dot4_row_sq(w, 0, phi, a, e)
                fsq[m] = sq
            else:
                d0 = dot4_row(w, 0, phi, a, e)
            scores[m, 0] = s * d0
            scores[m, 1] = -scores[m, 0]
            continue
        k = 0
        while k + 2 <= K:
            if want and k + 2 == K:  # the last two rows with phi itself
                d0, d1, sq = dot4_rows_sq(w, k, k + 1, phi, a, e)
                fsq[m] = sq
            else:
                d0, d1 = dot4_rows(w, k, k + 1, phi, a, e)
            scores[m, k] = s * d0
            scores[m, k + 1] = s * d1
            k += 2
        if k < K:
            if want:
                d0, sq = dot4_row_sq(w, k, phi, a, e)
                fsq[m] = sq
            else:
                d0 = dot4_row(w, k, phi, a, e)
            scores[m, k] = s * d0
        elif want and K == 0:
            fsq[m] = dot4(phi, phi, a, e)


explicit_scores = njit(**JIT_INLINE)(_explicit_scores)


def _implicit_scores(
    x, im_blocks, view_of, masks, view_full, kinds, kp, sx, ssq, sv, coef, n_support, xsq,
    scale, scores,
):  # fmt: skip
    """Per-block scores of the implicit blocks (kernel expansions over the support set); ``xsq``
    receives <x, x> per view."""
    if im_blocks.shape[0] == 0:
        return
    K = scores.shape[1]
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


implicit_scores = njit(**JIT_INLINE)(_implicit_scores)


def _block_scores(
    x, phi, w, scale, ex_blocks, ex_off, im_blocks, view_of, masks, view_full,
    kinds, kp, sx, ssq, sv, coef, n_support, xsq, dots, scores,
):  # fmt: skip
    """Per-block scores ``scores[m, :] = f_m(x)`` (explicit: W phi; implicit: kernel expansion)."""
    explicit_scores(phi, w, scale, ex_blocks, ex_off, scores, phi[:0], False)
    implicit_scores(
        x, im_blocks, view_of, masks, view_full, kinds, kp, sx, ssq, sv, coef, n_support, xsq,
        scale, scores,
    )  # fmt: skip


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
