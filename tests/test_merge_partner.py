"""``merge_partner`` computes what depends on pair i alone (``|v_i|``, each block's weight along
``v_i``) once, before its pass over the partners: the same partner and the same estimate, bit
for bit, as the pass that called ``direction_cosine`` for every candidate (kept here, compiled
with the same options) on states of every kind: one or several blocks, Gaussian or not, vector
outputs with acute, obtuse, orthogonal, parallel and zero directions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import njit

from streammkl.core import _numba as nb
from streammkl.core._jit import JIT
from streammkl.core._numba.merge import segment_kernels, table_loss


def _partner_before(i, n, im_blocks, view_of, masks, view_full, kinds, kp, sx, ssq, sv, coef,
                    kself, scale, drow):  # fmt: skip
    """``merge_partner`` as it was before the hoisting (a copy of main's code at 83753df)."""
    nb.support_dots(sx[i], masks, view_full, sx, n, drow)
    best = np.inf
    partner = -1
    for j in range(n):
        if j == i:
            continue
        rho, ni_v, nj_v = nb.direction_cosine(sv, i, j)
        if rho <= 0.0:
            continue
        ortho2 = 1.0 - rho * rho
        loss = 0.0
        for m in im_blocks:
            vw = view_of[m]
            dij = drow[j, vw]
            ai = scale[m] * coef[m, i] * ni_v
            aj_full = scale[m] * coef[m, j] * nj_v
            aj = aj_full * rho
            loss += aj_full * aj_full * ortho2 * kself[j, m]
            if kinds[m] == nb.K_RBF:
                tot = ai + aj
                if tot == 0.0:
                    continue
                dist = max(ssq[i, vw] + ssq[j, vw] - 2.0 * dij, 0.0)
                loss += tot * tot * table_loss(ai / tot, kp[m, 0] * dist)
            else:
                tot = ai + aj
                h = ai / tot if tot != 0.0 else 0.5
                kiz, kjz, kzz = segment_kernels(
                    kinds[m], kp[m, 0], kp[m, 1], kp[m, 2] != 0.0, h, ssq[i, vw], ssq[j, vw], dij
                )
                kij = nb.kernel_value(
                    kinds[m], kp[m, 0], kp[m, 1], kp[m, 2] != 0.0, dij,
                    ssq[i, vw] + ssq[j, vw] - 2.0 * dij, ssq[i, vw], ssq[j, vw],
                )  # fmt: skip
                full = ai * ai * kself[i, m] + aj * aj * kself[j, m] + 2.0 * ai * aj * kij
                kept = (ai * kiz + aj * kjz) ** 2 / kzz if kzz > 0.0 else 0.0
                loss += max(full - kept, 0.0)
            if loss >= best:
                break
        if loss < best:
            best = loss
            partner = j
    return partner, best


partner_before = njit(**JIT)(_partner_before)


def _state(rng: np.random.Generator, K: int, kinds: list[int], n: int, d: int) -> tuple:
    """A support set of n pairs over d inputs: two views (every input; the first two), blocks
    of ``kinds`` on alternate views, directions drawn to be acute, obtuse, orthogonal,
    parallel (to pair 0's) or zero."""
    M = len(kinds)
    masks = np.zeros((2, d))
    masks[0] = 1.0
    masks[1, :2] = 1.0
    view_full = np.array([True, False])
    view_of = np.array([m % 2 for m in range(M)], dtype=np.int64)
    kp = np.zeros((M, 3))
    for m, kind in enumerate(kinds):
        kp[m] = (0.1 + 0.4 * m, 1.0, 0.0) if kind != nb.K_POLY else (2.0, 1.0, 1.0)
    sx = rng.normal(size=(n, d))
    ssq = np.stack([(sx * sx) @ masks[v] for v in range(2)], axis=1)
    sv = rng.normal(size=(n, K))
    for s in range(n):
        pick = s % 5
        if pick == 1:
            sv[s] = 2.5 * sv[0]  # parallel to pair 0's
        elif pick == 2:
            sv[s] = -sv[0]  # opposite
        elif pick == 3:
            sv[s] = 0.0  # zero
        elif pick == 4 and K > 1:
            sv[s] = np.zeros(K)
            sv[s, 0], sv[s, 1] = -sv[0, 1], sv[0, 0]  # orthogonal to pair 0's
    coef = rng.normal(size=(M, n)) * 0.3
    scale = rng.uniform(0.5, 2.0, size=M)
    kself = np.ones((n, M))
    for m, kind in enumerate(kinds):
        for s in range(n):
            q = ssq[s, view_of[m]]
            kself[s, m] = nb.kernel_value(kind, kp[m, 0], kp[m, 1], kp[m, 2] != 0.0, q, 0.0, q, q)
    geo = (np.arange(M, dtype=np.int64), view_of, masks, view_full, np.array(kinds), kp)
    return geo, (sx, ssq, sv, coef, kself), scale


@pytest.mark.parametrize("K", [1, 2, 3])
@pytest.mark.parametrize(
    "kinds",
    [[nb.K_RBF], [nb.K_RBF, nb.K_RBF], [nb.K_RBF, nb.K_POLY], [nb.K_B1, nb.K_RBF, nb.K_LINEAR]],
)
def test_the_partner_and_its_estimate_are_the_per_candidate_passs_bit_for_bit(K, kinds):
    rng = np.random.default_rng(K * 31 + len(kinds))
    n, d = 40, 4
    geo, pairs, scale = _state(rng, K, kinds, n, d)
    found = 0
    for i in range(n):
        a, b = np.zeros((n, 2)), np.zeros((n, 2))
        got = nb.merge_partner(i, n, *geo, *pairs, scale, a)
        want = partner_before(i, n, *geo, *pairs, scale, b)
        assert got[0] == want[0]
        assert got[1] == want[1] or (math.isinf(got[1]) and math.isinf(want[1]))
        np.testing.assert_array_equal(a, b)
        found += got[0] >= 0
    assert found > n // 2  # (most pairs have a partner: the comparison is not of -1s)
