"""The arithmetic floor of the default round: what one round of the default bank must compute,
counted (operations and bytes), and the time a minimal compiled kernel doing exactly that
arithmetic takes on this machine (``benchmarks/core_update.py`` reports measured / floor).

The default round on ``d`` inputs, ``K`` score rows computed (the classes; one for two classes,
whose second row the round keeps as the first's negation), ``E`` averaged iterates and ``P``
explicit features (linear ``d``, additive Gaussian ``16 d``, three
random Fourier maps of 256, the exact quadratic map ``1 + d + d(d+1)/2`` on the first 128
inputs, ``L = 50`` Gaussian landmarks) must:

1. featurise: ``(768 + L) d`` multiply-adds for the Fourier and landmark projections, ``16 d``
   for the additive map, ``768 + 16 d`` cosines, the landmark profile (its largest value, ``L``
   exponentials (``fast_exp``, a loop that vectorises, as the round), their squared norm and
   ``L`` scalings), the quadratic map's products;
2. score the last iterate and the ``E`` averages: ``(1 + E) K P`` multiply-adds (and ``P`` for
   the squared norms of the feature maps that AdaGrad/FTRL's steps need);
3. update the last iterate (FTRL): ``K P`` scaled additions and ``K P`` squares (its norms);
4. update the averages: ``E K P`` subtract-and-multiply-adds;
5. for two classes, write the second rows as the negation of the first (``(1 + E) P`` stores)
   once at the end of a run of rounds, as ``learn_many`` does (``rounds.mirror_rows``), not
   every round.

The kernel below does exactly these passes, each in the fastest form numba compiles under the
project's JIT options (elementwise loops vectorised; the dot products as the round computes them:
``lane_dot``'s 16 partial sums, read four doubles at a time), with no bookkeeping: no prox, no
loss, no schedule, no leader. It is a floor for this arithmetic in this compiler, not for the
hardware: the same dot products in float32 would be faster still; the table says so.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from numba import njit

from streammkl.core import _numba as nb
from streammkl.core._numba.kernels import fast_exp
from streammkl.core.jit import JIT


@njit(**JIT)
def _floor_round(x, rff_wt, rff_b, add_f, add_b, add_src, land_wt, land_b, phi, w, avg,
                 rows_out, mirror, mirror_rows):  # fmt: skip
    """One round's arithmetic: featurise, score every row, update the last iterate and the
    averages. ``phi`` (P,) = [Fourier (R,), additive (A,), landmarks (L,), linear and quadratic
    (rest)]."""
    R = rff_b.shape[0]
    A = add_f.shape[0]
    L = land_b.shape[0]
    d = x.shape[0]
    for j in range(R):
        phi[j] = rff_b[j]
    for i in range(d):
        xi = x[i]
        for j in range(R):
            phi[j] += rff_wt[i, j] * xi
    for j in range(A):
        phi[R + j] = add_b[j] + add_f[j] * x[add_src[j]]
    c = 0.06
    nb.cosines(phi, 0, R + A, c)
    q = R + A
    for j in range(L):
        phi[q + j] = land_b[j]
    for i in range(d):
        xi = x[i]
        for j in range(L):
            phi[q + j] += land_wt[i, j] * xi
    if L:
        top = phi[q]
        for j in range(1, L):
            top = max(top, phi[q + j])
        for j in range(L):
            phi[q + j] = fast_exp(phi[q + j] - top)
        sq = 0.0
        for j in range(L):
            sq += phi[q + j] * phi[q + j]
        inv = 1.0 / math.sqrt(sq)
        for j in range(L):
            phi[q + j] *= inv
    q += L
    for i in range(d):
        phi[q] = x[i]
        q += 1
    for i in range(d):
        for k in range(i + 1):
            if q < phi.shape[0]:
                phi[q] = x[i] * x[k]
                q += 1
    P = phi.shape[0]
    K = w.shape[0]
    E = avg.shape[0] // K
    # scores: the last iterate's rows (with ||phi||^2 in the pass of the first), the averages'
    # rows, two per pass
    d0, sq = nb.dot4_row_sq(w, 0, phi, 0, P)
    nb.rows_dot4(w[1:], phi, 0, P, rows_out)
    nb.rows_dot4(avg, phi, 0, P, rows_out)
    g = 0.01 * d0 / (1.0 + sq)
    total = 0.0
    for k in range(K):
        total += nb.axpby_sqnorm_row(w, k, phi, 1.0, g * (k - 0.5), 0, P)
    s = 1.0 / (1.0 + 1e-3 * total)
    r = 0.01
    for e in range(E * K):
        ue = np.uint64(e)
        uk = np.uint64(e % K)
        for j in range(np.uint64(P)):
            avg[ue, j] += (s * w[uk, j] - avg[ue, j]) * r
    return s


@njit(**JIT)
def _floor_rounds(n, x, rff_wt, rff_b, add_f, add_b, add_src, land_wt, land_b, phi, w, avg,
                  rows_out, mirror, mirror_rows):  # fmt: skip
    """``n`` rounds in one compiled loop, as the measured round runs (no call per round)."""
    s = 0.0
    for _ in range(n):
        s += _floor_round(x, rff_wt, rff_b, add_f, add_b, add_src, land_wt, land_b, phi, w, avg,
                          rows_out, mirror, mirror_rows)  # fmt: skip
    if mirror:  # the second rows, negations of the first: once a run
        P = phi.shape[0]
        E = avg.shape[0] // w.shape[0]
        for _ in range(1 + E):
            nb.negate_row(mirror_rows, 0, 1, 0, P)
    return s


def counts(d: int, K: int, E: int, P: int, n_cos: int, n_rff: int, n_land: int = 0
           ) -> dict[str, float]:  # fmt: skip
    """Operations and bytes of one default round with ``K`` rows computed (module docstring):
    ``n_rff`` Fourier and ``n_land`` landmark projections of ``d`` inputs, ``n_cos`` cosines
    (Fourier and additive), ``n_land`` exponentials."""
    n_proj = n_rff + n_land
    macs = n_proj * d + (n_cos - n_rff) + n_land + (1 + E) * K * P + P + 2 * K * P
    macs += 2 * E * K * P
    touched = 8 * (d * n_proj + n_proj + 2 * K * P + 3 * E * K * P + 2 * P)
    return {"cosines": n_cos, "exponentials": n_land, "multiply-adds": macs, "bytes": touched}


def floor_time(d: int, classes: int, E: int, P_quad: int, n_rff: int = 768, per_input: int = 16,
               n_land: int = 50, rounds: int = 20_000, reps: int = 5
               ) -> tuple[float, dict[str, Any]]:  # fmt: skip
    """Median ns per round of the floor kernel on ``d`` inputs and ``classes`` classes (process
    CPU time of ``rounds`` rounds in one compiled loop, like the measured round's ``learn_many``:
    no Python call per round), and its counts."""
    rng = np.random.default_rng(0)
    mirror = classes == 2
    K = 1 if mirror else classes
    A = per_input * d
    P = n_rff + A + n_land + d + P_quad
    args = (
        rng.normal(size=d), rng.normal(size=(d, n_rff)) * 0.3, rng.uniform(0, 6.28, n_rff),
        rng.normal(size=A), rng.uniform(0, 6.28, A), np.repeat(np.arange(d), per_input),
        rng.normal(size=(d, n_land)), -rng.uniform(0, 2, n_land), np.zeros(P),
        rng.normal(size=(K, P)) * 0.01, rng.normal(size=(E * K, P)) * 0.01,
        np.zeros(E * K), mirror, np.zeros((2, P)),
    )  # fmt: skip
    _floor_rounds(1, *args)
    times = []
    for _ in range(reps):
        t0 = time.process_time_ns()
        _floor_rounds(rounds, *args)
        times.append((time.process_time_ns() - t0) / rounds)
    return float(np.median(times)), counts(d, K, E, P, n_rff + A, n_rff, n_land)
