"""Explicit feature maps (product maps, random Fourier features) and the vector loops over them."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from streammkl.core._jit import JIT_INLINE
from streammkl.core._numba.codes import MAP_ADDITIVE, MAP_GATHER, MAP_LINEAR

FAST_COS_LIMIT = 1.0e5  # |x| below this: Cody-Waite reduction by pi/2 is exact enough


def _fast_cos(x):
    """cos(x) within 2 ulp of the C library for |x| <= FAST_COS_LIMIT, without a call or a
    branch, so that a loop of them vectorises (numba has no SVML here: math.cos costs ~17 ns,
    this ~1 ns in a loop). Cody-Waite reduction by pi/2 (three parts), fdlibm's sine and
    cosine kernels on [-pi/4, pi/4], the quadrant chosen by selects."""
    k = np.floor(x * 0.63661977236758134308 + 0.5)
    r = x - k * 1.57079632673412561417e00
    r = r - k * 6.07710050630396597660e-11
    r = r - k * 2.02226624871116645580e-21
    z = r * r
    s = r + z * r * (
        -1.66666666666666324348e-01
        + z * (8.33333333332248946124e-03 + z * (-1.98412698298579493134e-04 + z * (
            2.75573137070700676789e-06 + z * (-2.50507602534068634195e-08
                                             + z * 1.58969099521155010221e-10))))
    )  # fmt: skip
    c = 1.0 - 0.5 * z + z * z * (
        4.16666666666666019037e-02
        + z * (-1.38888888888741095749e-03 + z * (2.48015872894767294178e-05 + z * (
            -2.75573143513906633035e-07 + z * (2.08757232129817482790e-09
                                              + z * -1.13596475577881948265e-11))))
    )  # fmt: skip
    q = k - 4.0 * np.floor(k * 0.25)  # the quadrant: 0, 1, 2, 3
    v = s if (q == 1.0 or q == 3.0) else c
    return -v if (q == 1.0 or q == 2.0) else v


fast_cos = njit(**JIT_INLINE)(_fast_cos)


def _explicit_phi(x, ex_blocks, ex_off, ex_kind, ex_norm, phi_src, rff_wt, rff_b, phi):
    """Feature maps of all explicit blocks, concatenated into ``phi``.

    Product maps (linear, exact quadratic) read ``phi_src`` as three rows: first input index,
    second input index (-1: none) and a constant factor, so phi_j = c_j x[i_j] x[k_j]. A random
    Fourier block reads the contiguous rows ``r0 = phi_src[0, a], r0 + 1, ...`` of the offsets and
    of the *transposed* frequencies ``rff_wt`` (d, R), so that every loop over the block's
    components runs on a contiguous view from index 0: numba then drops the negative-index
    checks and LLVM vectorises them (measured: 4.5 -> 0.8 us for the default bank's 384
    components on 2 inputs). An additive block (``MAP_ADDITIVE``) reads its components sparsely
    from ``phi_src``: input index, offset, frequency, so ``phi_j = c cos(w_j x[i_j] + b_j)``
    costs one product per component and no frequency matrix (which would be O(d^2)).
    """
    d = x.shape[0]
    for m in ex_blocks:
        a = ex_off[m]
        e = ex_off[m + 1]
        if ex_kind[m] == MAP_LINEAR:
            for j in range(a, e):
                src = int(phi_src[0, j])
                phi[j] = x[src] if src < d else 0.0
        elif ex_kind[m] == MAP_ADDITIVE:
            n = e - a
            c = math.sqrt(2.0 / n) if n else 0.0
            p = phi[a:e]
            src = phi_src[0, a:e]
            off = phi_src[1, a:e]
            freq = phi_src[2, a:e]
            big = 0.0
            for j in range(n):
                i = int(src[j])
                z = off[j] + (freq[j] * x[i] if i < d else 0.0)
                p[j] = z
                big = max(big, abs(z))
            if big > FAST_COS_LIMIT:
                for j in range(n):
                    p[j] = c * math.cos(p[j])
            else:
                for j in range(n):
                    p[j] = c * fast_cos(p[j])
        elif ex_kind[m] == MAP_GATHER:
            for j in range(a, e):
                src = int(phi_src[0, j])
                v = x[src] if 0 <= src < d else (1.0 if src < 0 else 0.0)
                src2 = int(phi_src[1, j])
                if src2 >= 0:
                    v *= x[src2] if src2 < d else 0.0
                phi[j] = v * phi_src[2, j]
        else:
            n = e - a
            c = math.sqrt(2.0 / n)
            p = phi[a:e]
            r0 = int(phi_src[0, a]) if n else 0
            b = rff_b[r0 : r0 + n]
            for j in range(n):
                p[j] = b[j]
            for i in range(min(d, rff_wt.shape[0])):  # z = b + sum_i x_i W[:, i], i in order
                xi = x[i]
                if xi == 0.0:  # a sparse input costs its non-zeros (same z after the cosine)
                    continue
                col = rff_wt[i, r0 : r0 + n]
                for j in range(p.shape[0]):
                    p[j] += col[j] * xi
            big = 0.0
            for j in range(p.shape[0]):
                big = max(big, abs(p[j]))
            if big > FAST_COS_LIMIT:  # beyond the reduction's exact range: the library cosine
                for j in range(p.shape[0]):
                    p[j] = c * math.cos(p[j])
            else:  # one vectorised loop
                for j in range(p.shape[0]):
                    p[j] = c * fast_cos(p[j])
        if ex_norm[m]:
            sq = 0.0
            for j in range(a, e):
                sq += phi[j] * phi[j]
            if sq > 0.0:
                inv = 1.0 / math.sqrt(sq)
                for j in range(a, e):
                    phi[j] *= inv


explicit_phi = njit(**JIT_INLINE)(_explicit_phi)


def _dot4(a, b, lo, hi):
    """sum_{j in [lo, hi)} a[j] b[j] with four accumulators (no reassoc fastmath needed), over
    views indexed from 0 (no negative-index checks in the loop)."""
    u = a[lo:hi]
    v = b[lo:hi]
    n = u.shape[0]
    a0 = a1 = a2 = a3 = 0.0
    for q in range(n // 4):
        j = 4 * q
        a0 += u[j] * v[j]
        a1 += u[j + 1] * v[j + 1]
        a2 += u[j + 2] * v[j + 2]
        a3 += u[j + 3] * v[j + 3]
    for j in range(n - n % 4, n):
        a0 += u[j] * v[j]
    return (a0 + a1) + (a2 + a3)


dot4 = njit(**JIT_INLINE)(_dot4)


def _dot4_pair(z, X, s, d):
    """``(dot4(z, X[s], 0, d), dot4(z, X[s + 1], 0, d))`` bit for bit (the same four
    accumulators per row) in one pass: two rows' chains interleave, and z is loaded once."""
    a0 = a1 = a2 = a3 = 0.0
    b0 = b1 = b2 = b3 = 0.0
    for q in range(d // 4):
        j = 4 * q
        a0 += z[j] * X[s, j]
        a1 += z[j + 1] * X[s, j + 1]
        a2 += z[j + 2] * X[s, j + 2]
        a3 += z[j + 3] * X[s, j + 3]
        b0 += z[j] * X[s + 1, j]
        b1 += z[j + 1] * X[s + 1, j + 1]
        b2 += z[j + 2] * X[s + 1, j + 2]
        b3 += z[j + 3] * X[s + 1, j + 3]
    for j in range(d - d % 4, d):
        a0 += z[j] * X[s, j]
        b0 += z[j] * X[s + 1, j]
    return (a0 + a1) + (a2 + a3), (b0 + b1) + (b2 + b3)


dot4_pair = njit(**JIT_INLINE)(_dot4_pair)


def _axpby_sqnorm(w, phi, a, g, lo, hi):
    """w[lo:hi] = a w[lo:hi] + g phi[lo:hi]; returns the new sum of squares (four accumulators)."""
    u = w[lo:hi]
    p = phi[lo:hi]
    n = u.shape[0]
    a0 = a1 = a2 = a3 = 0.0
    for q in range(n // 4):
        j = 4 * q
        w0 = a * u[j] + g * p[j]
        w1 = a * u[j + 1] + g * p[j + 1]
        w2 = a * u[j + 2] + g * p[j + 2]
        w3 = a * u[j + 3] + g * p[j + 3]
        u[j] = w0
        u[j + 1] = w1
        u[j + 2] = w2
        u[j + 3] = w3
        a0 += w0 * w0
        a1 += w1 * w1
        a2 += w2 * w2
        a3 += w3 * w3
    for j in range(n - n % 4, n):
        w0 = a * u[j] + g * p[j]
        u[j] = w0
        a0 += w0 * w0
    return (a0 + a1) + (a2 + a3)


axpby_sqnorm = njit(**JIT_INLINE)(_axpby_sqnorm)


def _axpy_sqnorm(w, phi, g, lo, hi):
    """w[lo:hi] += g phi[lo:hi]; returns the new sum of squares (``axpby_sqnorm`` with a = 1,
    inlined: the multiplication by the constant 1 folds away)."""
    return axpby_sqnorm(w, phi, 1.0, g, lo, hi)


axpy_sqnorm = njit(**JIT_INLINE)(_axpy_sqnorm)
