"""Explicit feature maps (product maps, random Fourier features) and the vector loops over them."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from streammkl.core._jit import JIT, JIT_INLINE
from streammkl.core._numba.codes import (
    MAP_ADDITIVE,
    MAP_BINNING,
    MAP_GATHER,
    MAP_LANDMARK,
    MAP_LINEAR,
    MAP_STUMPS,
)  # fmt: skip
from streammkl.core._numba.kernels import fast_exp
from streammkl.core._numba.lanes import lane_dot

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

MAP_COS_ERROR = 4.0e-16  # map_cos's largest absolute error against cos for |x| <= FAST_COS_LIMIT


def _map_cos(x):
    """The random-feature maps' cosine: cos(x) within ``MAP_COS_ERROR`` (2.2e-16 measured, 1
    ulp of 1) for |x| <= FAST_COS_LIMIT, and exactly 1 at 0 (an additive block's free
    components, offset 0, frequency 0 and anchor 1, must map to exactly 0), cheaper than
    ``fast_cos`` in a vectorised loop: one polynomial instead of two and a quadrant select.
    With ``k = floor(x / pi)``, ``x = (2k + 1) pi/2 + r`` (Cody-Waite, two parts of pi/2: exact
    products for |2k + 1| < 2^20), r in [-pi/2, pi/2], and ``cos(x) = (-1)^(k + 1) sin(r)``,
    the sine as ``r + r^3 p(r^2)`` of degree 17. ``p`` was made once with mpmath at 60 digits:
    ``chebyfit(lambda s: (sin(sqrt(s)) - sqrt(s)) / s**1.5, [0, (pi/2)**2], 8)`` (degree 7 in
    ``s = r^2``; its error 3.4e-19, 1.3e-18 on the sine), each coefficient rounded to the
    nearest double. The frequency draws keep ``fast_cos`` (their numbers are the model)."""
    k = np.floor(x * 0.31830988618379067154)
    m = 2.0 * k + 1.0
    r = x - m * 1.57079632673412561417e00
    r = r - m * 6.07710050630396597660e-11
    s = r * r
    p = -1.6666666666666666e-01 + s * (8.333333333333316e-03 + s * (
        -1.9841269841254974e-04 + s * (2.7557319219163234e-06 + s * (
            -2.5052107616996182e-08 + s * (1.6058977312464087e-10 + s * (
                -7.643970296798572e-13 + s * 2.7314447669863995e-15)))))
    )  # fmt: skip
    v = r + r * s * p
    odd = k - 2.0 * np.floor(k * 0.5)  # k mod 2: the sign is + for odd k, - for even k
    return v * (2.0 * odd - 1.0)


map_cos = njit(**JIT_INLINE)(_map_cos)


def _cosines(phi, a, e, c):
    """``phi[j] = c cos(phi[j])`` for j in [a, e): one vectorised loop of ``map_cos``, or
    libm's cosine when an argument is beyond the reduction's exact range."""
    ua = np.uint64(a)
    ue = np.uint64(e)
    if absmax(phi, a, e) > FAST_COS_LIMIT:
        for j in range(ua, ue):
            phi[j] = c * math.cos(phi[j])
    else:
        for j in range(ua, ue):
            phi[j] = c * map_cos(phi[j])


cosines = njit(**JIT_INLINE)(_cosines)


def _projected(phi, a, e, kind, phi_src):
    """The map of a projection block (random Fourier, ``MAP_RFF``, or landmarks,
    ``MAP_LANDMARK``) from its projections ``phi[a:e]`` (offsets plus rows times the inputs), in
    place: the cosines ``sqrt(2 / D) cos(.)`` of a Fourier block; a landmark block's ``exp(s_j
    - max_k s_k)`` normalised to unit norm, times its factor ``phi_src[2, a]`` (0 while it has
    no landmarks), the exponentials by ``kernels.fast_exp`` (within 2 ulp of libm's, 0 below
    ``EXP_FLOOR``; a loop that vectorises where libm's exp is a call per landmark). Both
    routes (``explicit_phi`` and the sparse round's ``wide_features``) call
    this one function, so their maps agree bit for bit."""
    n = e - a
    if n <= 0:
        return
    if kind == MAP_LANDMARK:
        ua = np.uint64(a)
        un = np.uint64(n)
        top = -math.inf
        for j in range(un):
            top = max(top, phi[ua + j])
        for j in range(un):  # one vectorised loop (libm's exp is a call per element)
            phi[ua + j] = fast_exp(phi[ua + j] - top)
        sq = 0.0
        for j in range(un):
            sq += phi[ua + j] * phi[ua + j]
        inv = phi_src[2, a] / math.sqrt(sq) if sq > 0.0 else 0.0  # 0: no landmarks
        for j in range(un):
            phi[ua + j] *= inv
    else:
        cosines(phi, a, e, math.sqrt(2.0 / n))


projected = njit(**JIT_INLINE)(_projected)


def _cos_of(b):
    """``map_cos`` of every entry of ``b`` (a new array): the additive map's anchors, the
    same numbers the rounds compute at an input of 0."""
    out = np.empty(b.shape[0])
    for j in range(b.shape[0]):
        out[j] = map_cos(b[j])
    return out


cos_of = njit(**JIT)(_cos_of)


def _gather_value(x, d, phi_src, j):
    """Column ``j`` of a gathered block (linear, quadratic): ``x[src]`` (1 for the constant
    column, 0 for an input the record lacks), times ``x[src2]`` for a product, times the
    column's weight ``phi_src[2, j]``."""
    src = int(phi_src[0, j])
    v = x[src] if 0 <= src < d else (1.0 if src < 0 else 0.0)
    src2 = int(phi_src[1, j])
    if src2 >= 0:
        v *= x[src2] if src2 < d else 0.0
    return v * phi_src[2, j]


gather_value = njit(**JIT_INLINE)(_gather_value)


def _stump_value(c, t, v):
    """A stump column at threshold ``t`` for the value ``v``, anchored at 0: ``c`` when
    ``0 < t <= v``, ``-c`` when ``v < t <= 0``, else 0."""
    return c if (t > 0.0 and v >= t) else (-c if (t <= 0.0 and v < t) else 0.0)


stump_value = njit(**JIT_INLINE)(_stump_value)


_M32 = np.uint64(0xFFFFFFFF)
_BIN_MIX1 = np.uint64(0x85EBCA6B)  # MurmurHash3's 32-bit finaliser (fmix32)
_BIN_MIX2 = np.uint64(0xC2B2AE35)
_S13 = np.uint64(13)
_S16 = np.uint64(16)
_CELL_MAX = 2147483647.0  # a cell index beyond +-2**31 is clamped (an input of 1e300)


def _binning_hash(h):
    """MurmurHash3's 32-bit finaliser of ``h`` (a uint64 below 2**32): every output bit
    depends on every input bit, so a bucket taken modulo B sees all of the cell's hash. Each
    product is of two 32-bit values (below 2**64: the same numbers compiled and in Python)."""
    h = h ^ (h >> _S16)
    h = (h * _BIN_MIX1) & _M32
    h = h ^ (h >> _S13)
    h = (h * _BIN_MIX2) & _M32
    return h ^ (h >> _S16)


binning_hash = njit(**JIT_INLINE)(_binning_hash)


def _binning_column(x, nz, nnz, rff_wt, r0, R, B, r):
    """The column (within its block) of the cell that grid ``r`` of a random binning block
    (``MAP_BINNING``) puts ``x`` in: ``r B + fmix32(h) mod B`` with the cell's hash ``h = sum_i
    c_i m_i mod 2**32`` over the inputs i, ``c_i = floor(x_i / delta_i - s_i) - floor(-s_i)``
    the index of x_i's interval in the grid's axis i counted from the interval of 0 (pitch
    ``delta_i``, shift ``s_i delta_i``, ``s_i`` in [0, 1)), ``m_i`` the axis' odd multiplier.
    Input i's numbers are its row of ``rff_wt``: ``1 / delta_i`` at column ``r0 + r``, ``s_i``
    at ``r0 + R + r``, ``m_i`` at ``r0 + 2 R + r``.

    An input at 0 has ``c_i = 0``: it adds nothing to the hash, so the sum runs over the
    record's non-zeros alone, in any order (a sum modulo 2**32): ``nz[:nnz]`` (ascending) when
    ``nnz >= 0`` (the sparse round), else every input of ``x`` that is not 0 (the dense
    round); both give the same column. An input the layout has no row for yet (beyond
    ``rff_wt``'s rows) counts as 0, as do the inputs a record lacks."""
    ur = np.uint64(r0 + r)
    us = np.uint64(r0 + R + r)
    um = np.uint64(r0 + 2 * R + r)
    rows = rff_wt.shape[0]
    n = nnz if nnz >= 0 else x.shape[0]
    h = np.uint64(0)
    for q in range(n):
        i = nz[q] if nnz >= 0 else q
        xi = x[i]
        if xi == 0.0:
            continue
        if i >= rows:
            break
        ui = np.uint64(i)
        s = rff_wt[ui, us]
        c = np.floor(xi * rff_wt[ui, ur] - s) + (1.0 if s > 0.0 else 0.0)
        c = min(max(c, -_CELL_MAX), _CELL_MAX)
        c32 = np.uint64(np.int64(c) & np.int64(0xFFFFFFFF))
        h = (h + ((c32 * np.uint64(rff_wt[ui, um])) & _M32)) & _M32
    return r * B + np.int64(binning_hash(h) % np.uint64(B))


binning_column = njit(**JIT_INLINE)(_binning_column)


def _explicit_phi(x, ex_blocks, ex_off, ex_kind, ex_norm, phi_src, rff_wt, rff_b, phi):
    """Feature maps of all explicit blocks, concatenated into ``phi``.

    Product maps (linear, exact quadratic) read ``phi_src`` as three rows: first input index,
    second input index (-1: none) and a constant factor, so phi_j = c_j x[i_j] x[k_j]. A random
    Fourier block reads the contiguous rows ``r0 = phi_src[0, a], r0 + 1, ...`` of the offsets and
    of the *transposed* frequencies ``rff_wt`` (d, R), so that every loop over the block's
    components runs contiguously with unsigned indices: numba then drops the negative-index
    checks and LLVM vectorises them (measured: 4.5 -> 0.8 us for the default bank's 384
    components on 2 inputs), and no view is made. An additive block (``MAP_ADDITIVE``) reads
    its components sparsely from ``phi_src``: input index, offset, frequency and anchor, so
    ``phi_j = c (cos(w_j x[i_j] + b_j) - cos(b_j))`` (the map anchored at 0: an input of 0 has
    no feature, so a sparse record's map is sparse) costs one product per component and no
    frequency matrix (which would be O(d^2)); ``c = sqrt(2 / n)`` over the n components of the
    inputs laid out (a free column of the layout's capacity reads no input). A sparse record
    (fewer than a quarter of its inputs non-zero) computes the cosines of its non-zeros only,
    the other components being exactly 0, and the Fourier projection skips its zeros: its
    features cost O(nnz(x) D), not O(d D).
    A stumps block (``MAP_STUMPS``) reads input index and threshold the same way: ``phi_j =
    c`` if ``x[i_j] >= t_j > 0``, ``-c`` if ``x[i_j] < t_j <= 0``, else 0 (``(sign(x - t) -
    sign(-t)) / sqrt(n)``: the sign map anchored at 0 like the additive map), ``c = 2 /
    sqrt(n)``.
    A landmark block (``MAP_LANDMARK``) projects like a Fourier block (its rows hold ``2 gamma
    z_j`` and its offsets ``-gamma ||z_j||^2`` for the landmarks ``z_j``, so ``s_j = -gamma
    ||x - z_j||^2 + gamma ||x||^2``), then ``phi_j = exp(s_j - max_k s_k)`` normalised to unit
    norm: the profile ``k(x, z_j) / ||k(x, Z)||`` (the common factor ``exp(-gamma ||x||^2)``
    cancels, and the shift by the largest ``s`` keeps the nearest landmark at 1: nothing
    overflows and a far input is never all zeros), times the factor ``phi_src[2, a]`` (1; 0
    while the block has no landmarks: its map is 0).
    A random binning block (``MAP_BINNING``; ``phi_src[0, a]`` its first row of draws,
    ``phi_src[1, a]`` its R grids, ``phi_src[2, a]`` its factor) is 0 but for one column per
    grid, the cell ``x`` falls in (``binning_column``), at ``1 / sqrt(R)``: unit norm.
    """
    d = x.shape[0]
    nnz = 0
    for i in range(d):
        nnz += x[i] != 0.0
    sparse = 4 * nnz < d  # mostly zeros: the additive map's cosines of the non-zeros only
    for m in ex_blocks:
        a = ex_off[m]
        e = ex_off[m + 1]
        if ex_kind[m] == MAP_LINEAR:
            for j in range(a, e):
                src = int(phi_src[0, j])
                phi[j] = x[src] if src < d else 0.0
        elif ex_kind[m] == MAP_ADDITIVE:
            n = e - a
            ua = np.uint64(a)
            used = 0
            for j in range(np.uint64(n)):
                used += int(phi_src[0, ua + j]) < d
            c = math.sqrt(2.0 / used) if used else 0.0
            if sparse:  # a component of an input at 0 is 0: the cosines of the non-zeros only
                for j in range(np.uint64(n)):
                    i = int(phi_src[0, ua + j])
                    xi = x[i] if i < d else 0.0
                    if xi == 0.0:
                        phi[ua + j] = 0.0
                        continue
                    z = phi_src[1, ua + j] + phi_src[2, ua + j] * xi
                    cz = map_cos(z) if abs(z) <= FAST_COS_LIMIT else math.cos(z)
                    phi[ua + j] = c * cz - c * phi_src[3, ua + j]
            else:
                for j in range(np.uint64(n)):
                    i = int(phi_src[0, ua + j])
                    xi = x[i] if i < d else 0.0
                    phi[ua + j] = phi_src[1, ua + j] + phi_src[2, ua + j] * xi
                cosines(phi, a, e, c)
                for j in range(np.uint64(n)):  # anchored at 0: minus c cos(b) (~0 at x_i = 0)
                    phi[ua + j] -= c * phi_src[3, ua + j]
        elif ex_kind[m] == MAP_STUMPS:  # anchored at 0: 0 unless t lies between 0 and x
            n = e - a
            used = 0
            for j in range(a, e):
                used += int(phi_src[0, j]) < d
            c = 2.0 / math.sqrt(used) if used else 0.0
            for j in range(a, e):
                i = int(phi_src[0, j])
                phi[j] = stump_value(c, phi_src[1, j], x[i] if i < d else 0.0)
        elif ex_kind[m] == MAP_GATHER:
            for j in range(a, e):
                phi[j] = gather_value(x, d, phi_src, j)
        elif ex_kind[m] == MAP_BINNING:  # one cell per grid, its column 1 / sqrt(R)
            for j in range(a, e):
                phi[j] = 0.0
            R = int(phi_src[1, a]) if e > a else 0
            if R > 0:
                B = (e - a) // R
                row = int(phi_src[0, a])  # (not r0: the projection's r0 is unsigned)
                c = phi_src[2, a] / math.sqrt(R)
                for r in range(R):
                    phi[a + binning_column(x, ex_blocks, -1, rff_wt, row, R, B, r)] = c
        else:
            n = e - a
            ua = np.uint64(a)
            un = np.uint64(n)
            r0 = np.uint64(phi_src[0, a]) if n else np.uint64(0)
            for j in range(un):
                phi[ua + j] = rff_b[r0 + j]
            for i in range(min(d, rff_wt.shape[0])):  # z = b + sum_i x_i W[:, i], i in order
                xi = x[i]
                if xi == 0.0:  # a sparse input costs its non-zeros (same z after the cosine)
                    continue
                ui = np.uint64(i)
                for j in range(un):
                    phi[ua + j] += rff_wt[ui, r0 + j] * xi
            projected(phi, a, e, ex_kind[m], phi_src)
        if ex_norm[m]:
            sq = 0.0
            for j in range(a, e):
                sq += phi[j] * phi[j]
            if sq > 0.0:
                inv = 1.0 / math.sqrt(sq)
                for j in range(a, e):
                    phi[j] *= inv


explicit_phi = njit(**JIT_INLINE)(_explicit_phi)


def _explicit_phi_of(x, ex_blocks, ex_off, ex_kind, ex_norm, phi_src, rff_wt, rff_b, phi, phi_x,
                     phi_valid):  # fmt: skip
    """``explicit_phi`` unless ``phi`` already holds the maps of this very ``x`` (the input
    ``phi_x[:d]`` they were computed for, ``phi_valid[0] = d + 1``; 0: none): a prediction then
    the round on the same input featurise once, the same numbers (the maps are a function of
    x)."""
    d = x.shape[0]
    if phi_valid[0] == d + 1:
        same = True
        for j in range(d):
            if x[j] != phi_x[j]:
                same = False
                break
        if same:
            return
    explicit_phi(x, ex_blocks, ex_off, ex_kind, ex_norm, phi_src, rff_wt, rff_b, phi)
    if phi_x.shape[0] >= d:
        for j in range(d):
            phi_x[j] = x[j]
        phi_valid[0] = d + 1


explicit_phi_of = njit(**JIT_INLINE)(_explicit_phi_of)


def _dot4(a, b, lo, hi):
    """sum_{j in [lo, hi)} a[j] b[j] in ``lane_dot``'s fixed order (16 partial sums, read four
    doubles at a time; no reassoc fastmath needed). Every explicit score, norm and average is
    this sum, so a prediction and the learning round's scores agree bit for bit. (Named for
    the four partial sums it had before ``lane_dot``.)"""
    lo, hi = np.int64(lo), np.int64(hi)
    return lane_dot(a, lo, b, lo, hi - lo)


dot4 = njit(**JIT_INLINE)(_dot4)


def _dot4_pair(z, X, s, d):
    """``(dot4(z, X[s], 0, d), dot4(z, X[s + 1], 0, d))`` bit for bit (the same sum per row),
    without views."""
    w = X.shape[1]
    s = np.int64(s)
    d = np.int64(d)
    return lane_dot(z, 0, X, s * w, d), lane_dot(z, 0, X, (s + 1) * w, d)


dot4_pair = njit(**JIT_INLINE)(_dot4_pair)


# Unsigned indices: an index numba knows to be >= 0 needs no negative-index check (which stops
# LLVM from vectorising a loop), and reading a block through whole arrays makes no view: a view
# costs a reference-count increment and decrement (two calls and two atomic operations), which
# made a third of the default round's time when made per block and row.
_U1 = np.uint64(1)
_U2 = np.uint64(2)
_U3 = np.uint64(3)
_U4 = np.uint64(4)


def _dot4_rows(A, r0, r1, v, lo, hi):
    """``(dot4(A[r0], v, lo, hi), dot4(A[r1], v, lo, hi))`` bit for bit (the same sum per
    row), without views."""
    w = A.shape[1]
    r0, r1, lo, hi = np.int64(r0), np.int64(r1), np.int64(lo), np.int64(hi)
    n = hi - lo
    return lane_dot(A, r0 * w + lo, v, lo, n), lane_dot(A, r1 * w + lo, v, lo, n)


dot4_rows = njit(**JIT_INLINE)(_dot4_rows)


def _dot4_rows_sq(A, r0, r1, v, lo, hi):
    """``dot4_rows`` and ``dot4(v, v, lo, hi)`` (the squared norm of v's block), each bit for
    bit."""
    w = A.shape[1]
    r0, r1, lo, hi = np.int64(r0), np.int64(r1), np.int64(lo), np.int64(hi)
    n = hi - lo
    return (
        lane_dot(A, r0 * w + lo, v, lo, n),
        lane_dot(A, r1 * w + lo, v, lo, n),
        lane_dot(v, lo, v, lo, n),
    )


dot4_rows_sq = njit(**JIT_INLINE)(_dot4_rows_sq)


def _dot4_row_sq(A, r0, v, lo, hi):
    """``(dot4(A[r0], v, lo, hi), dot4(v, v, lo, hi))``, bit for bit."""
    r0, lo, hi = np.int64(r0), np.int64(lo), np.int64(hi)
    n = hi - lo
    return lane_dot(A, r0 * A.shape[1] + lo, v, lo, n), lane_dot(v, lo, v, lo, n)


dot4_row_sq = njit(**JIT_INLINE)(_dot4_row_sq)


def _dot4_row(A, r0, v, lo, hi):
    """``dot4(A[r0], v, lo, hi)`` bit for bit, without a view."""
    r0, lo, hi = np.int64(r0), np.int64(lo), np.int64(hi)
    return lane_dot(A, r0 * A.shape[1] + lo, v, lo, hi - lo)


dot4_row = njit(**JIT_INLINE)(_dot4_row)


def _rows_dot4(R, v, lo, hi, out):
    """``out[r] = dot4(R[r], v, lo, hi)`` for every row r of R, bit for bit, two rows per
    call (``dot4_rows``)."""
    n = R.shape[0]
    r = 0
    while r + 2 <= n:
        out[r], out[r + 1] = dot4_rows(R, r, r + 1, v, lo, hi)
        r += 2
    if r < n:
        out[r] = dot4_row(R, r, v, lo, hi)


rows_dot4 = njit(**JIT_INLINE)(_rows_dot4)


def _absmax(p, lo, hi):
    """max |p[j]| over j in [lo, hi) (0 when empty) with four running maxima (one chain is
    latency-bound); the same value as one running maximum."""
    lo = np.uint64(lo)
    hi = np.uint64(hi)
    nq = (hi - lo) // _U4
    m0 = m1 = m2 = m3 = 0.0
    for q in range(nq):
        j = lo + _U4 * q
        m0 = max(m0, abs(p[j]))
        m1 = max(m1, abs(p[j + _U1]))
        m2 = max(m2, abs(p[j + _U2]))
        m3 = max(m3, abs(p[j + _U3]))
    for j in range(lo + _U4 * nq, hi):
        m0 = max(m0, abs(p[j]))
    return max(max(m0, m1), max(m2, m3))


absmax = njit(**JIT_INLINE)(_absmax)


def _axpby_sqnorm_row(A, r, phi, a, g, lo, hi):
    """``axpby_sqnorm(A[r], phi, a, g, lo, hi)`` bit for bit, without a view."""
    r = np.uint64(r)
    lo = np.uint64(lo)
    hi = np.uint64(hi)
    nq = (hi - lo) // _U4
    a0 = a1 = a2 = a3 = 0.0
    for q in range(nq):
        j = lo + _U4 * q
        w0 = a * A[r, j] + g * phi[j]
        w1 = a * A[r, j + _U1] + g * phi[j + _U1]
        w2 = a * A[r, j + _U2] + g * phi[j + _U2]
        w3 = a * A[r, j + _U3] + g * phi[j + _U3]
        A[r, j] = w0
        A[r, j + _U1] = w1
        A[r, j + _U2] = w2
        A[r, j + _U3] = w3
        a0 += w0 * w0
        a1 += w1 * w1
        a2 += w2 * w2
        a3 += w3 * w3
    for j in range(lo + _U4 * nq, hi):
        w0 = a * A[r, j] + g * phi[j]
        A[r, j] = w0
        a0 += w0 * w0
    return (a0 + a1) + (a2 + a3)


axpby_sqnorm_row = njit(**JIT_INLINE)(_axpby_sqnorm_row)


def _negate_row(A, src, dst, lo, hi):
    """``A[dst, lo:hi] = -A[src, lo:hi]`` (one vectorised loop, no views)."""
    src = np.uint64(src)
    dst = np.uint64(dst)
    for j in range(np.uint64(lo), np.uint64(hi)):
        A[dst, j] = -A[src, j]


negate_row = njit(**JIT_INLINE)(_negate_row)


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
