"""The round of explicit FTRL banks on wide sparse records: a cost linear in the record's
non-zeros, the same numbers as the dense round (``rounds.explicit_round``) up to rounding.

A record with few non-zero inputs has few non-zero features in the blocks that grow with the
inputs: a linear block's columns of its non-zeros, an additive block's components of them, the
quadratic map's constant, squares and products of the non-zeros (exact for the inputs it lays
out, as the dense map: the first ``max_inputs``; later inputs have no column there, in either
route). A projection block (random Fourier, landmarks) is dense in its D components whatever
the record (D is fixed): its projections cost O(nnz D) (the rows of the record's non-zeros,
each contiguous: a landmark block's ``2 gamma z_j`` and offsets ``-gamma ||z_j||^2``, so
``||x||^2`` never needs computing, it cancels in the normalisation) and the block is swept
whole, as in the dense round, whose map (``features.projected``) it shares.
The dense round nevertheless sweeps every column of
every block three times: the scores, FTRL's store step ``u_m <- (1 + sigma_m s_m) u_m + v (x)
phi_m`` (the rescale touches every column) and the averaged iterates ``a <- (1 - r) a + r s_m
u_m`` (and their scores). Here each of those is a scalar update per block plus writes at the
record's columns.

The lazy representation (``lazy``, (2 + 2E, M): a state array, ``BlockState.lazy``), per
explicit block m and for every output row k alike:

- ``u_m = alpha_m * w_m`` (``w``: the stored array, ``alpha_m = lazy[0, m]``): the rescale is
  ``alpha_m <- (1 + sigma_m s_m) alpha_m`` (O(1)) and the gradient step ``w_m += (v_k /
  alpha_m) phi_m`` touches only the columns where ``phi_m != 0``; then ``u_m = alpha_m' (w_m +
  v phi / alpha_m') = (1 + sigma s) u_m + v phi``, the dense round's step.
- ``||u_m||^2 = alpha_m^2 ||w_m||^2`` with ``||w_m||^2`` moved by ``sum (w_j + d_j)^2 - w_j^2``
  over the written columns; recounted exactly when the columns written since the last recount
  (``lazy[1, m]``) reach the block's width (O(1) amortised per write), or when the sum drops
  below 1e-6 of its value (cancellation), so rounding cannot build up.
- every average e: ``a_em = P_em * abar_em + Q_em * w_m`` (``abar``: the stored ``avg_w``;
  ``P_em = lazy[2 + e, m]``, ``Q_em = lazy[2 + E + e, m]``). The average's update ``a <- (1 -
  r) a + r s_m u_m = (1 - r) P abar + ((1 - r) Q + r s_m alpha_m) w`` is ``P <- (1 - r) P``,
  ``Q <- (1 - r) Q + r s_m alpha_m`` (O(1)); a write ``w_j += d_j`` keeps ``a`` when ``abar_j
  -= (Q / P) d_j`` (O(E) per written column). When P falls below ``P_FLOOR`` (r = 1 at the
  averages' first update makes it 0) the block's average is folded: ``abar <- P abar + Q w``, P
  = 1, Q = 0 (O(width), amortised over the ~horizon * 69 updates P takes to fall that far).
- scores are sparse dots: ``<theta_m, phi> = s_m alpha_m <w_m, phi>`` and ``<a_em, phi> = P_em
  <abar_em, phi> + Q_em <w_m, phi>`` over the record's columns.

``alpha_m`` is folded into ``w_m`` (and Q divided by it: ``a`` unchanged) before it would leave
[1e-100, 1e100]; under FTRL's growing steps it only grows, slowly (about as the square root of
the accumulated squared gradients). ``settle`` folds everything (``w = alpha w``, ``avg_w = P
abar + Q w``; identity factors ``alpha = 1, P = 1, Q = 0``): the dense round, the dense
prediction, a saved state and every reader of the state see the settled arrays. With
``mirror`` (two rows, the second the first's negation) the first row is computed and the second
set to its negation, as in the dense round.

The route: a record takes the sparse round when the columns it touches in the blocks that grow
with the inputs are fewer than a quarter of the columns those blocks fill (``wide_plan``); a
dense record takes the dense round (after ``settle``, a no-op unless the previous records were
sparse).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from streammkl.core._jit import JIT, JIT_INLINE
from streammkl.core._numba.averages import leader
from streammkl.core._numba.codes import (
    MAP_ADDITIVE,
    MAP_BINNING,
    MAP_GATHER,
    MAP_LANDMARK,
    MAP_LINEAR,
    MAP_RFF,
    MAP_STUMPS,
)  # fmt: skip
from streammkl.core._numba.features import (
    binning_column,
    cosines,
    dot4,
    dot4_row,
    gather_value,
    projected,
    stump_value,
)
from streammkl.core._numba.losses import loss_grad
from streammkl.core._numba.pack import explicit_view
from streammkl.core._numba.prox import prox_blockwise_steps
from streammkl.core._numba.rounds import (
    BAD_X,
    MAX_ABS_INPUT,
    block_steps,
    check_target,
    explicit_decision,
    explicit_round,
    ftrl_scales,
)

ALPHA_LO, ALPHA_HI = 1e-100, 1e100  # alpha is folded into the stored block before leaving these
P_FLOOR = 1e-30  # an average's factor P below this: the block's average is folded
RECOUNT_DROP = 1e-6  # ||w_m||^2 falling below this fraction of itself in one step: recounted
SPARSE_SHARE = 4  # the sparse route when 4 x (columns touched) < columns filled
_U0 = np.uint64(0)
_U1 = np.uint64(1)
_U2 = np.uint64(2)
_U3 = np.uint64(3)
_U4 = np.uint64(4)


def _settle_block(m, w, avg_w, ex_off, lazy):
    """Block m's factors folded into its stored arrays (``avg_w = P avg_w + Q w``, then ``w =
    alpha w``): the same theta and averages, identity factors. Two rows that are each other's
    negation (column by column) stay so exactly."""
    a = ex_off[m]
    e_ = ex_off[m + 1]
    K = w.shape[0]
    E = avg_w.shape[0]
    alpha = lazy[0, m]
    for e in range(E):
        P = lazy[2 + e, m]
        Q = lazy[2 + E + e, m]
        if P == 1.0 and Q == 0.0:
            continue
        for j in range(a, e_):
            neg = K == 2 and w[1, j] == -w[0, j] and avg_w[e, 1, j] == -avg_w[e, 0, j]
            for k in range(1 if neg else K):
                avg_w[e, k, j] = P * avg_w[e, k, j] + Q * w[k, j]
            if neg:
                avg_w[e, 1, j] = -avg_w[e, 0, j]
        lazy[2 + e, m] = 1.0
        lazy[2 + E + e, m] = 0.0
    if alpha != 1.0:
        for k in range(K):
            for j in range(a, e_):
                w[k, j] *= alpha
        lazy[0, m] = 1.0


settle_block = njit(**JIT_INLINE)(_settle_block)


def _settle(w, avg_w, ex_blocks, ex_off, lazy):
    """Every block's factors folded (``settle_block``); O(1) per block when already settled."""
    E = avg_w.shape[0]
    for m in ex_blocks:
        todo = lazy[0, m] != 1.0
        for e in range(E):
            todo = todo or lazy[2 + e, m] != 1.0 or lazy[2 + E + e, m] != 0.0
        if todo:
            settle_block(m, w, avg_w, ex_off, lazy)


settle = njit(**JIT)(_settle)


def _per_input(m, ex_used, blk_inputs):
    """Columns per input of an additive or stumps block (0 before its first input)."""
    return ex_used[m] // blk_inputs[m] if blk_inputs[m] > 0 else 0


per_input = njit(**JIT_INLINE)(_per_input)


def _wide_route(nnz, ex_blocks, ex_off, ex_kind, ex_used, blk_inputs):
    """For a record of ``nnz`` non-zero inputs: (a bound on the columns the sparse round
    touches, whether it takes the sparse route); ``wide_plan`` without the scan."""
    total = 0
    narrow = 0
    filled = 0
    for m in ex_blocks:
        kind = ex_kind[m]
        if kind == MAP_RFF or kind == MAP_LANDMARK or kind == MAP_BINNING:  # fixed width
            total += ex_off[m + 1] - ex_off[m]  # (binning: one column per grid, a bound)
            continue
        filled += ex_used[m]
        if kind == MAP_LINEAR:
            narrow += nnz
        elif kind == MAP_ADDITIVE or kind == MAP_STUMPS:
            narrow += per_input(m, ex_used, blk_inputs) * nnz
        elif kind == MAP_GATHER:
            narrow += 1 + 2 * nnz + nnz * (nnz - 1) // 2
        else:
            narrow += ex_off[m + 1] - ex_off[m]
    return total + narrow, SPARSE_SHARE * narrow < filled


wide_route = njit(**JIT_INLINE)(_wide_route)


def _wide_plan(x, nz, ex_blocks, ex_off, ex_kind, ex_used, blk_inputs):
    """The record's non-zero inputs into ``nz`` (ascending); returns (their count, a bound on
    the columns the sparse round touches, whether it takes the sparse route)."""
    nnz = 0
    for i in range(x.shape[0]):
        if x[i] != 0.0:
            nz[nnz] = i
            nnz += 1
    n_cols, sparse = wide_route(nnz, ex_blocks, ex_off, ex_kind, ex_used, blk_inputs)
    return nnz, n_cols, sparse


wide_plan = njit(**JIT_INLINE)(_wide_plan)


def _add_run(rs, rl, n, first, j, length):
    """Columns ``[j, j + length)`` appended to the runs ``rs[:n]`` (starts), ``rl[:n]``
    (lengths) of a block whose first run is ``first``: merged into the last run when they
    continue it. Returns the new number of runs."""
    if n > first and rs[n - 1] + rl[n - 1] == j:
        rl[n - 1] += length
        return n
    rs[n] = j
    rl[n] = length
    return n + 1


add_run = njit(**JIT_INLINE)(_add_run)


def _project_rows(phi, ua, un, rff_wt, r0, x, nz, nnz):
    """``phi[ua + j] += sum_q rff_wt[nz[q], r0 + j] x[nz[q]]`` for j in [0, un), the non-zeros
    in order (ascending; those past ``rff_wt``'s rows have no frequencies), four rows per sweep
    of ``phi``: each entry takes the same additions in the same order as one row at a time (bit
    for bit), but four rows stream from memory at once and ``phi`` is read and written once per
    four (a record's rows are mostly not in cache: a 5,000-word vocabulary's frequencies are
    tens of MB)."""
    rows = rff_wt.shape[0]
    nv = 0
    while nv < nnz and nz[nv] < rows:
        nv += 1
    q = 0
    while q + 4 <= nv:
        u0 = np.uint64(nz[q])
        u1 = np.uint64(nz[q + 1])
        u2 = np.uint64(nz[q + 2])
        u3 = np.uint64(nz[q + 3])
        x0 = x[u0]
        x1 = x[u1]
        x2 = x[u2]
        x3 = x[u3]
        for j in range(un):
            c = r0 + j
            acc = phi[ua + j]
            acc += rff_wt[u0, c] * x0
            acc += rff_wt[u1, c] * x1
            acc += rff_wt[u2, c] * x2
            acc += rff_wt[u3, c] * x3
            phi[ua + j] = acc
        q += 4
    while q < nv:
        ui = np.uint64(nz[q])
        xi = x[ui]
        for j in range(un):
            phi[ua + j] += rff_wt[ui, r0 + j] * xi
        q += 1


project_rows = njit(**JIT_INLINE)(_project_rows)


def _wide_features(x, nz, nnz, p, rs, rl, cs, ce, cached):
    """The feature maps at the record's columns: runs ``rs[q], rl[q]`` (start, length) for q in
    ``[cs[m], ce[m])`` list block m's columns that can be non-zero (distinct, ascending within
    a run) and ``phi`` holds their values (``explicit_phi``'s, column by column; the other
    columns of ``phi`` are stale and never read); ``p.fsq[m] = ||phi_m||^2``. A random Fourier
    block is one run of all its columns. With ``cached`` (``phi`` and ``p.fsq`` already hold
    this record's values: a prediction then the round on the same input) only the runs are
    built."""
    ex_blocks, ex_off, ex_kind, phi_src = p.ex_blocks, p.ex_off, p.ex_kind, p.phi_src
    in_pos, ex_used, blk_inputs, phi, fsq = p.in_pos, p.ex_used, p.blk_inputs, p.phi, p.fsq
    d = x.shape[0]
    n = 0
    for m in ex_blocks:
        a = ex_off[m]
        e = ex_off[m + 1]
        kind = ex_kind[m]
        first = n
        cs[m] = n
        if kind == MAP_LINEAR:
            for q in range(nnz):
                pos = in_pos[m, nz[q]]
                if pos >= 0:
                    j = a + pos
                    n = add_run(rs, rl, n, first, j, 1)
                    if not cached:
                        src = int(phi_src[0, j])
                        phi[j] = x[src] if src < d else 0.0
        elif kind == MAP_ADDITIVE:
            R = per_input(m, ex_used, blk_inputs)
            used = ex_used[m]
            c = math.sqrt(2.0 / used) if used else 0.0
            for q in range(nnz):
                pos = in_pos[m, nz[q]]
                if pos < 0:
                    continue
                lo = a + R * pos
                n = add_run(rs, rl, n, first, lo, R)
                if cached:
                    continue
                xi = x[nz[q]]
                for j in range(lo, lo + R):
                    phi[j] = phi_src[1, j] + phi_src[2, j] * xi
                cosines(phi, lo, lo + R, c)
                for j in range(lo, lo + R):  # anchored at 0: minus c cos(b)
                    phi[j] -= c * phi_src[3, j]
        elif kind == MAP_STUMPS:
            R = per_input(m, ex_used, blk_inputs)
            used = ex_used[m]
            c = 2.0 / math.sqrt(used) if used else 0.0
            for q in range(nnz):
                pos = in_pos[m, nz[q]]
                if pos < 0:
                    continue
                lo = a + R * pos
                n = add_run(rs, rl, n, first, lo, R)
                if cached:
                    continue
                v = x[nz[q]]
                for j in range(lo, lo + R):
                    phi[j] = stump_value(c, phi_src[1, j], v)
        elif kind == MAP_BINNING:  # the cell of each grid: a run of one column per grid
            R = int(phi_src[1, a]) if e > a else 0
            if R > 0:
                B = (e - a) // R
                row = int(phi_src[0, a])  # (not r0: the projection's r0 is unsigned)
                c = phi_src[2, a] / math.sqrt(R)
                for r in range(R):  # (grid r's columns are [a + r B, a + (r + 1) B): ascending)
                    j = a + binning_column(x, nz, nnz, p.rff_wt, row, R, B, r)
                    n = add_run(rs, rl, n, first, j, 1)
                    if not cached:
                        phi[j] = c
        elif kind == MAP_GATHER:
            lead = 1 if (e > a and phi_src[0, a] < 0.0) else 0
            if lead:
                n = add_run(rs, rl, n, first, a, 1)
            for q in range(nnz):
                pq = in_pos[m, nz[q]]
                if pq < 0:
                    continue
                base = a + lead * (1 + pq) + pq * (pq + 1) // 2
                if lead:
                    n = add_run(rs, rl, n, first, base, 1)
                for o in range(nnz):  # the products with the non-zeros laid out before it
                    po = in_pos[m, nz[o]]
                    if 0 <= po < pq:
                        n = add_run(rs, rl, n, first, base + lead + po, 1)
                n = add_run(rs, rl, n, first, base + lead + pq, 1)  # its square
            if not cached:
                for q in range(first, n):
                    for j in range(rs[q], rs[q] + rl[q]):
                        phi[j] = gather_value(x, d, phi_src, j)
        else:  # a projection block (random Fourier, landmarks): z = b + sum_i x_i W[:, i] over
            D = e - a  # the non-zeros, in order, then its map (the dense route's ``projected``)
            n = add_run(rs, rl, n, first, a, D)
            if not cached and D > 0:
                ua = np.uint64(a)
                un = np.uint64(D)
                r0 = np.uint64(phi_src[0, a])
                rff_wt, rff_b = p.rff_wt, p.rff_b
                for j in range(un):
                    phi[ua + j] = rff_b[r0 + j]
                project_rows(phi, ua, un, rff_wt, r0, x, nz, nnz)
                projected(phi, a, e, kind, phi_src)
        ce[m] = n
        if cached:
            continue
        sq = 0.0
        for q in range(first, n):
            sq += dot4(phi, phi, rs[q], rs[q] + rl[q])
        if p.ex_norm[m] and sq > 0.0:
            inv = 1.0 / math.sqrt(sq)
            sq = 0.0
            for q in range(first, n):
                for j in range(rs[q], rs[q] + rl[q]):
                    phi[j] *= inv
                sq += dot4(phi, phi, rs[q], rs[q] + rl[q])
        fsq[m] = sq


wide_features = njit(**JIT_INLINE)(_wide_features)


def _dot_avg(A, e, k, v, lo, hi):
    """``sum_j A[e, k, j] v[j]`` over [lo, hi): ``dot4_row`` on average e's rows (bit for bit
    ``dot4``)."""
    return dot4_row(A[e], k, v, lo, hi)


dot_avg = njit(**JIT_INLINE)(_dot_avg)


def _wide_scores(p, rs, rl, cs, ce, dt):
    """Block scores ``p.scores[m, k] = s_m alpha_m <w_mk, phi_m>`` over the record's columns
    (``dt[m, k] = <w_mk, phi_m>``) and ``p.fx`` = bias + their sum."""
    w, scale, lazy, scores, fx, bias, phi = p.w, p.scale, p.lazy, p.scores, p.fx, p.bias, p.phi
    K = fx.shape[0]
    rows = 1 if p.mirror else K
    for m in p.ex_blocks:
        f = scale[m] * lazy[0, m]
        for k in range(rows):
            acc = 0.0
            for q in range(cs[m], ce[m]):
                acc += dot4_row(w, k, phi, rs[q], rs[q] + rl[q])
            dt[m, k] = acc
            scores[m, k] = f * acc
        if p.mirror:
            dt[m, 1] = -dt[m, 0]
            scores[m, 1] = -scores[m, 0]
    for k in range(K):
        total = bias[k]
        for m in range(scores.shape[0]):
            total += scores[m, k]
        fx[k] = total


wide_scores = njit(**JIT_INLINE)(_wide_scores)


def _wide_average_scores(p, e, rs, rl, cs, ce, dt, out):
    """Scores of average e at the record into ``out`` (K,): ``P <abar, phi> + Q <w, phi>`` per
    block over the record's columns, plus the average's bias."""
    avg_w, lazy, phi = p.avg_w, p.lazy, p.phi
    E = avg_w.shape[0]
    K = out.shape[0]
    for k in range(1 if p.mirror else K):
        acc = p.avg_bias[e, k]
        for m in p.ex_blocks:
            s = 0.0
            for q in range(cs[m], ce[m]):
                s += dot_avg(avg_w, e, k, phi, rs[q], rs[q] + rl[q])
            acc += lazy[2 + e, m] * s + lazy[2 + E + e, m] * dt[m, k]
        out[k] = acc
    if p.mirror:
        out[1] = -out[0]


wide_average_scores = njit(**JIT_INLINE)(_wide_average_scores)


def _block_sq(w, rows, a, e):
    """sum of w[k, j]^2 over the first ``rows`` rows and the columns [a, e)."""
    acc = 0.0
    for k in range(rows):
        acc += dot4_row(w, k, w[k], a, e)
    return acc


block_sq = njit(**JIT_INLINE)(_block_sq)


def _step_run(w, k, phi, g, lo, hi):
    """``w[k, lo:hi] += g phi[lo:hi]``; returns the change of their sum of squares (``sum new^2 -
    old^2``, four accumulators), unsigned indices."""
    nq = (hi - lo) // _U4
    a0 = a1 = a2 = a3 = 0.0
    for q in range(nq):
        j = lo + _U4 * q
        o0 = w[k, j]
        o1 = w[k, j + _U1]
        o2 = w[k, j + _U2]
        o3 = w[k, j + _U3]
        n0 = o0 + g * phi[j]
        n1 = o1 + g * phi[j + _U1]
        n2 = o2 + g * phi[j + _U2]
        n3 = o3 + g * phi[j + _U3]
        w[k, j] = n0
        w[k, j + _U1] = n1
        w[k, j + _U2] = n2
        w[k, j + _U3] = n3
        a0 += n0 * n0 - o0 * o0
        a1 += n1 * n1 - o1 * o1
        a2 += n2 * n2 - o2 * o2
        a3 += n3 * n3 - o3 * o3
    for j in range(lo + _U4 * nq, hi):
        o0 = w[k, j]
        n0 = o0 + g * phi[j]
        w[k, j] = n0
        a0 += n0 * n0 - o0 * o0
    return (a0 + a1) + (a2 + a3)


step_run = njit(**JIT_INLINE)(_step_run)


def _wide_store(p, t, rs, rl, cs, ce):
    """FTRL's store step (``rounds.ftrl_store``) on the lazy blocks: alpha rescaled, the
    gradient written at the record's columns (the averages' stored arrays corrected there),
    ``||u_m||`` kept incrementally; ``p.blk_c`` receives the norms to prox, ``p.blk_steps``
    the prox metric ``t eta_m``."""
    w, avg_w, lazy, phi, v = p.w, p.avg_w, p.lazy, p.phi, p.v
    etas, prev, scale, zn, c, steps = p.etas, p.prev, p.scale, p.zn, p.blk_c, p.blk_steps
    ex_off = p.ex_off
    M = p.norms.shape[0]
    K = w.shape[0]
    E = avg_w.shape[0]
    mirror = p.mirror
    rows = 1 if mirror else K
    for m in range(M):
        c[m] = 0.0
        steps[m] = t * etas[m]
    for m in p.ex_blocks:
        a = ex_off[m]
        e_ = ex_off[m + 1]
        sigma = 1.0 / etas[m] - 1.0 / prev[m] if prev[m] > 0.0 else 0.0
        keep = 1.0 + sigma * scale[m]
        alpha = lazy[0, m]
        new_alpha = alpha * keep
        exact = False
        if not ALPHA_LO < abs(new_alpha) < ALPHA_HI:
            settle_block(m, w, avg_w, ex_off, lazy)
            alpha = 1.0
            new_alpha = keep
            if not ALPHA_LO < abs(keep) < ALPHA_HI:  # a degenerate rescale: done on the block
                for k in range(K):
                    for j in range(a, e_):
                        w[k, j] *= keep
                new_alpha = 1.0
                exact = True
        if exact:
            sq = block_sq(w, rows, a, e_)
        else:
            sq = zn[m] / abs(alpha)
            sq = sq * sq
            if mirror:
                sq *= 0.5
        dsq = 0.0
        written = lazy[1, m]
        for q in range(cs[m], ce[m]):
            lo = np.uint64(rs[q])
            hi = np.uint64(rs[q] + rl[q])
            written += rl[q]
            for k in range(rows):
                g = v[k] / new_alpha
                if g == 0.0:
                    continue
                dsq += step_run(w, np.uint64(k), phi, g, lo, hi)
                for e in range(E):  # the averages keep their value: abar -= (Q / P) dw
                    f = lazy[2 + E + e, m] / lazy[2 + e, m] * g
                    ue = np.uint64(e)
                    uk = np.uint64(k)
                    for j in range(lo, hi):
                        avg_w[ue, uk, j] -= f * phi[j]
            if mirror:
                for j in range(lo, hi):
                    w[_U1, j] = -w[_U0, j]
                for e in range(E):
                    ue = np.uint64(e)
                    for j in range(lo, hi):
                        avg_w[ue, _U1, j] = -avg_w[ue, _U0, j]
        total = sq + dsq
        if written >= e_ - a or total <= RECOUNT_DROP * sq or total <= 0.0:
            total = block_sq(w, rows, a, e_)
            written = 0.0
        lazy[1, m] = written
        lazy[0, m] = new_alpha
        if mirror:
            total *= 2.0
        zn[m] = abs(new_alpha) * math.sqrt(total) if total > 0.0 else 0.0
        c[m] = etas[m] * zn[m]
        prev[m] = etas[m]


wide_store = njit(**JIT_INLINE)(_wide_store)


def _wide_averages(p):
    """``averages.update_averages`` on the lazy factors: every ``every``-th round each average's
    (P, Q) per block and its bias; a block whose P falls below ``P_FLOOR`` is folded."""
    avg_w, lazy, w, scale, bias, avg_bias = p.avg_w, p.lazy, p.w, p.scale, p.bias, p.avg_bias
    count, every, horizons, ex_off = p.avg_count, p.every, p.horizons, p.ex_off
    E = avg_w.shape[0]
    K = w.shape[0]
    mirror = p.mirror
    count[0] += 1
    if int(count[0]) % every != 0:
        return
    n = count[0] // every
    rows = 1 if mirror else K
    for e in range(E):
        r = max(1.0 / n, 1.0 - (1.0 - 1.0 / horizons[e]) ** every)
        for m in p.ex_blocks:
            P = (1.0 - r) * lazy[2 + e, m]
            Q = (1.0 - r) * lazy[2 + E + e, m] + r * scale[m] * lazy[0, m]
            if P < P_FLOOR:
                for k in range(rows):
                    for j in range(ex_off[m], ex_off[m + 1]):
                        avg_w[e, k, j] = P * avg_w[e, k, j] + Q * w[k, j]
                if mirror:
                    for j in range(ex_off[m], ex_off[m + 1]):
                        avg_w[e, 1, j] = -avg_w[e, 0, j]
                P = 1.0
                Q = 0.0
            lazy[2 + e, m] = P
            lazy[2 + E + e, m] = Q
        for k in range(rows):
            avg_bias[e, k] += (bias[k] - avg_bias[e, k]) * r
        if mirror:
            avg_bias[e, 1] = -avg_bias[e, 0]


wide_averages = njit(**JIT_INLINE)(_wide_averages)


def _sparse_cached(p, x, nz, nnz):
    """Whether ``phi`` (and ``p.fsq``) hold the sparse features of this very ``x`` (the
    prediction just before the round, ``remember_sparse``: ``phi_valid[0] = -(d + 1)``), in
    O(nnz): the same non-zeros ``nz[:nnz]`` (ascending) with the same values, i.e. the same
    ``x`` (a zero of either sign reads as 0 in both)."""
    d = x.shape[0]
    if p.phi_valid[0] != -(d + 1):
        return False
    phi_x = p.phi_x
    if phi_x[0] != nnz:
        return False
    for q in range(nnz):
        i = nz[q]
        if phi_x[1 + q] != i or phi_x[1 + nnz + q] != x[i]:
            return False
    return True


sparse_cached = njit(**JIT_INLINE)(_sparse_cached)


def _remember_sparse(p, x, nz, nnz):
    """Mark ``phi`` as holding the sparse features of ``x`` (``sparse_cached``): ``phi_x``
    keeps its non-zeros, ``[nnz, their indices..., their values...]`` (O(nnz); none kept when
    they do not fit)."""
    phi_x = p.phi_x
    if phi_x.shape[0] < 1 + 2 * nnz:
        p.phi_valid[0] = 0
        return
    phi_x[0] = nnz
    for q in range(nnz):
        i = nz[q]
        phi_x[1 + q] = i
        phi_x[1 + nnz + q] = x[i]
    p.phi_valid[0] = -(x.shape[0] + 1)


remember_sparse = njit(**JIT_INLINE)(_remember_sparse)


def _wide_round(p, x, y, t, nz, nnz, n_cols):
    """``rounds.explicit_round`` on a sparse record (``wide_plan``), at a cost linear in its
    columns: the same operations in the same order on the lazy representation (see the
    module's docstring). Returns the loss; ``p.pred`` receives the prediction."""
    M = p.norms.shape[0]
    K = p.fx.shape[0]
    rs = np.empty(n_cols, dtype=np.int64)
    rl = np.empty(n_cols, dtype=np.int64)
    cs = np.zeros(M, dtype=np.int64)
    ce = np.zeros(M, dtype=np.int64)
    dt = np.zeros((M, K))
    wide_features(x, nz, nnz, p, rs, rl, cs, ce, sparse_cached(p, x, nz, nnz))
    p.phi_valid[0] = 0  # phi holds this record's columns only (and the round changes w)
    wide_scores(p, rs, rl, cs, ce, dt)
    fx, v, pred, avg_loss = p.fx, p.v, p.pred, p.avg_loss
    loss = loss_grad(p.loss_code, p.loss_p, fx, y, v)
    if p.mirror:
        v[1] = -v[0]
    E = p.avg_w.shape[0]
    for k in range(K):
        pred[k] = fx[k]
    if E > 0:
        best = leader(avg_loss)
        if int(p.avg_count[0]) % p.every != 0:
            if best > 0:
                wide_average_scores(p, best - 1, rs, rl, cs, ce, dt, pred)
        else:
            discount = p.rho**p.every
            avg_loss[0] = discount * avg_loss[0] + loss
            for e in range(E):
                out = p.ascores[e]
                wide_average_scores(p, e, rs, rl, cs, ce, dt, out)
                if best == e + 1:
                    for k in range(K):
                        pred[k] = out[k]
                value = loss_grad(p.loss_code, p.loss_p, out, y, p.scratch)
                avg_loss[e + 1] = discount * avg_loss[e + 1] + value
    vv = 0.0
    for k in range(K):
        vv += v[k] * v[k]
    etas = p.etas
    block_steps(p.sched, p.sched_p, t, p.acc, p.fsq, vv, etas)
    wide_store(p, t, rs, rl, cs, ce)
    c, steps, newnorms = p.blk_c, p.blk_steps, p.newnorms
    step_codes, step_p, step_groups = p.step_codes, p.step_p, p.step_groups
    prox_blockwise_steps(step_codes, step_p, step_groups, c, steps, newnorms)
    ftrl_scales(p.ex_blocks, p.norms, p.scale, p.zn, c)
    bias = p.bias
    for k in range(K):
        bias[k] += p.bias_lr * etas[M] * v[k]
    if E > 0:
        wide_averages(p)
    return loss


wide_round = njit(**JIT)(_wide_round)


def _wide_decision(p, x, nz, nnz, n_cols, leader_scores):
    """``rounds.explicit_decision`` on a sparse record: block scores into ``p.scores``, ``p.fx``
    the last iterate's scores or, with ``leader_scores``, the leader's."""
    M = p.norms.shape[0]
    K = p.fx.shape[0]
    rs = np.empty(n_cols, dtype=np.int64)
    rl = np.empty(n_cols, dtype=np.int64)
    cs = np.zeros(M, dtype=np.int64)
    ce = np.zeros(M, dtype=np.int64)
    dt = np.zeros((M, K))
    wide_features(x, nz, nnz, p, rs, rl, cs, ce, sparse_cached(p, x, nz, nnz))
    remember_sparse(p, x, nz, nnz)  # the round on the same record reuses these values
    wide_scores(p, rs, rl, cs, ce, dt)
    if leader_scores and p.avg_w.shape[0] > 0:
        best = leader(p.avg_loss)
        if best > 0:
            wide_average_scores(p, best - 1, rs, rl, cs, ce, dt, p.fx)


wide_decision = njit(**JIT)(_wide_decision)


def _learn_predict_wide(p, x, y, t, n):
    """``rounds.learn_predict_explicit`` for a bank with blocks that grow with the inputs
    (``p.wide``; never with the running average of Prop. 4): the sparse round on a sparse
    record, else the dense one on the settled state."""
    nz = np.empty(x.shape[0], dtype=np.int64)
    nnz = 0
    for i in range(x.shape[0]):  # the check of x (check_example's) and the non-zeros, in one pass
        v = x[i]
        if not abs(v) <= MAX_ABS_INPUT:  # NaN fails the comparison too
            return BAD_X
        if v != 0.0:
            nz[nnz] = i
            nnz += 1
    code = check_target(p, y)
    if code < 0.0:
        return code
    n_cols, sparse = wide_route(nnz, p.ex_blocks, p.ex_off, p.ex_kind, p.ex_used, p.blk_inputs)
    if sparse:
        return wide_round(p, x, y, t, nz, nnz, n_cols)
    settle(p.w, p.avg_w, p.ex_blocks, p.ex_off, p.lazy)
    return explicit_round(explicit_view(p), x, y, t)


learn_predict_wide = njit(**JIT)(_learn_predict_wide)


def _decision_wide(p, x, w, scale, leader_scores):
    """``rounds.decision_explicit`` for a ``p.wide`` bank (``w``, ``scale``: the pack's own)."""
    nz = np.empty(x.shape[0], dtype=np.int64)
    nnz, n_cols, sparse = wide_plan(x, nz, p.ex_blocks, p.ex_off, p.ex_kind, p.ex_used,
                                    p.blk_inputs)  # fmt: skip
    if sparse:
        wide_decision(p, x, nz, nnz, n_cols, leader_scores)
        return
    settle(p.w, p.avg_w, p.ex_blocks, p.ex_off, p.lazy)
    explicit_decision(explicit_view(p), x, w, scale, leader_scores)


decision_wide = njit(**JIT)(_decision_wide)


def _scatter_sparse(x, cols, vals):
    """The record ``vals`` at ``cols`` (in order: a later value of a column wins) written into
    the zero buffer ``x``, and its non-zero inputs, ascending, as ``wide_plan`` finds them in
    the dense record: ``(nz, nnz)`` (None, writing nothing, when a value is not finite within
    ``+-MAX_ABS_INPUT``). O(n log n) in the record's entries, never in ``x``'s width."""
    n = cols.shape[0]
    nz = np.empty(n, dtype=np.int64)
    for q in range(n):
        if not abs(vals[q]) <= MAX_ABS_INPUT:  # NaN fails the comparison too
            return nz, -1
    for q in range(n):
        x[cols[q]] = vals[q]
    order = np.sort(cols)
    nnz = 0
    prev = -1
    for q in range(n):
        c = order[q]
        if c != prev and x[c] != 0.0:
            nz[nnz] = c
            nnz += 1
        prev = c
    return nz, nnz


scatter_sparse = njit(**JIT_INLINE)(_scatter_sparse)


def _learn_sparse_wide(p, x, cols, vals, y, t, n):
    """``learn_predict_wide`` on a record given by its entries, in O(nnz) on the sparse route
    (the dense round on a record dense enough for it): ``vals`` (float64) at the columns
    ``cols`` (int64, each below the model's width; any order, a later value of a column wins,
    zeros allowed), ``x`` a buffer of the model's width holding zeros, which holds the record
    for the round and is left zero again (``wide_features`` reads the record at its non-zeros
    only). The same numbers as ``learn_predict_wide`` on the dense record: the same non-zeros
    in the same order, the same round. A refusal changes nothing."""
    code = check_target(p, y)
    if code < 0.0:
        return code
    nz, nnz = scatter_sparse(x, cols, vals)
    if nnz < 0:
        return BAD_X
    n_cols, sparse = wide_route(nnz, p.ex_blocks, p.ex_off, p.ex_kind, p.ex_used, p.blk_inputs)
    if sparse:
        loss = wide_round(p, x, y, t, nz, nnz, n_cols)
    else:
        settle(p.w, p.avg_w, p.ex_blocks, p.ex_off, p.lazy)
        loss = explicit_round(explicit_view(p), x, y, t)
    for q in range(cols.shape[0]):
        x[cols[q]] = 0.0
    return loss


learn_sparse_wide = njit(**JIT)(_learn_sparse_wide)


def _decision_sparse_wide(p, x, cols, vals, w, scale, leader_scores):
    """``decision_wide`` on a record given by its entries (as in ``learn_sparse_wide``; ``x``
    a zero buffer of the model's width, left zero). False, computing nothing, when a value is
    not finite within ``+-MAX_ABS_INPUT``."""
    nz, nnz = scatter_sparse(x, cols, vals)
    if nnz < 0:
        return False
    n_cols, sparse = wide_route(nnz, p.ex_blocks, p.ex_off, p.ex_kind, p.ex_used, p.blk_inputs)
    if sparse:
        wide_decision(p, x, nz, nnz, n_cols, leader_scores)
    else:
        settle(p.w, p.avg_w, p.ex_blocks, p.ex_off, p.lazy)
        explicit_decision(explicit_view(p), x, w, scale, leader_scores)
    for q in range(cols.shape[0]):
        x[cols[q]] = 0.0
    return True


decision_sparse_wide = njit(**JIT)(_decision_sparse_wide)
