"""Compiled decoders for first-order chain models (sequence labeling).

The sequence decoders live beside the structured package, not in ``core/_numba.py``, to keep the
core's compiled module small and free of structured-output code; they follow the same rules
(STYLE.md): every function is written undecorated as ``_f`` and compiled as
``f = njit(**JIT)(_f)`` with the project-wide options from :mod:`streammkl.core._jit`; they see
only contiguous float64/int64 arrays and scalars. An outer function calls the *compiled* inner
one (numba cannot call a plain Python function), so ``outer.py_func`` runs Python around a
compiled helper; each helper has its own parity test.

Conventions, shared by every function here:

- ``unary`` is a (T, K) array: ``unary[i, k]`` is the score of label ``k`` at position ``i``;
- ``trans`` is a (K, K) array: ``trans[a, b]`` is the score of label ``a`` at ``i`` followed by
  label ``b`` at ``i + 1`` (the bigram block of the joint kernel, paper [001] §2.3);
- a label sequence ``y`` scores ``sum_i unary[i, y_i] + sum_i trans[y_i, y_{i+1}]``;
- ties in an argmax go to the smallest label index (strict ``>`` comparisons), so decoding is
  deterministic;
- T >= 1 and K >= 1 are checked by the Python callers, not here.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from streammkl.core import _numba as cnb
from streammkl.core._jit import JIT


def _viterbi_cost(unary, trans, gold, cost):
    """Best label sequence of ``unary + cost * [k != gold_i]`` plus transitions.

    Parameters
    ----------
    unary
        (T, K) position scores.
    trans
        (K, K) transition scores.
    gold
        (T,) int64 gold label indices; ignored when ``cost == 0``. An entry < 0 adds the cost
        to every label at that position (no label is "gold" there).
    cost
        Hamming cost per wrong position (0.0 for plain Viterbi, 1.0 for loss-augmented).

    Returns
    -------
    path, score
        (T,) int64 argmax sequence and its augmented score (cost term included).
    """
    T, K = unary.shape
    delta = np.empty((T, K))
    back = np.zeros((T, K), dtype=np.int64)
    for k in range(K):
        c = cost if (cost != 0.0 and gold[0] != k) else 0.0
        delta[0, k] = unary[0, k] + c
    for i in range(1, T):
        for b in range(K):
            best = delta[i - 1, 0] + trans[0, b]
            arg = 0
            for a in range(1, K):
                v = delta[i - 1, a] + trans[a, b]
                if v > best:
                    best = v
                    arg = a
            c = cost if (cost != 0.0 and gold[i] != b) else 0.0
            delta[i, b] = best + unary[i, b] + c
            back[i, b] = arg
    path = np.empty(T, dtype=np.int64)
    best = delta[T - 1, 0]
    arg = 0
    for k in range(1, K):
        if delta[T - 1, k] > best:
            best = delta[T - 1, k]
            arg = k
    path[T - 1] = arg
    for i in range(T - 1, 0, -1):
        path[i - 1] = back[i, path[i]]
    return path, best


viterbi_cost = njit(**JIT)(_viterbi_cost)


def _viterbi(unary, trans):
    """Plain Viterbi: the highest-scoring label sequence and its score."""
    gold = np.zeros(unary.shape[0], dtype=np.int64)
    return viterbi_cost(unary, trans, gold, 0.0)


def _viterbi_hamming(unary, trans, gold):
    """Loss-augmented Viterbi: argmax_y score(y) + Hamming(y, gold), and that augmented score."""
    return viterbi_cost(unary, trans, gold, 1.0)


viterbi = njit(**JIT)(_viterbi)
viterbi_hamming = njit(**JIT)(_viterbi_hamming)


def _logsumexp_row(v):
    m = v[0]
    for j in range(1, v.shape[0]):
        if v[j] > m:
            m = v[j]
    if m == -np.inf:
        return m
    s = 0.0
    for j in range(v.shape[0]):
        s += np.exp(v[j] - m)
    return m + np.log(s)


logsumexp_row = njit(**JIT)(_logsumexp_row)


def _forward_backward(unary, trans):
    """Log-space forward-backward for a linear-chain CRF.

    Returns
    -------
    log_z, node_marginals, edge_marginals
        The log-partition ``log sum_y exp(score(y))``; (T, K) marginals ``p(y_i = k)``; and
        (max(T - 1, 0), K, K) marginals ``p(y_i = a, y_{i+1} = b)``.
    """
    T, K = unary.shape
    alpha = np.empty((T, K))
    beta = np.empty((T, K))
    tmp = np.empty(K)
    for k in range(K):
        alpha[0, k] = unary[0, k]
    for i in range(1, T):
        for b in range(K):
            for a in range(K):
                tmp[a] = alpha[i - 1, a] + trans[a, b]
            alpha[i, b] = logsumexp_row(tmp) + unary[i, b]
    for k in range(K):
        beta[T - 1, k] = 0.0
    for i in range(T - 2, -1, -1):
        for a in range(K):
            for b in range(K):
                tmp[b] = trans[a, b] + unary[i + 1, b] + beta[i + 1, b]
            beta[i, a] = logsumexp_row(tmp)
    log_z = logsumexp_row(alpha[T - 1])
    node = np.empty((T, K))
    for i in range(T):
        for k in range(K):
            node[i, k] = np.exp(alpha[i, k] + beta[i, k] - log_z)
    n_edges = T - 1 if T > 1 else 0
    edge = np.empty((n_edges, K, K))
    for i in range(n_edges):
        for a in range(K):
            for b in range(K):
                edge[i, a, b] = np.exp(
                    alpha[i, a] + trans[a, b] + unary[i + 1, b] + beta[i + 1, b] - log_z
                )
    return log_z, node, edge


forward_backward = njit(**JIT)(_forward_backward)


# ----------------------------------------------------------------------------- joint-kernel blocks
# The unigram blocks reuse the core's block layout and state (``core.state``): a position x_i with
# label-indexed direction v_i is one support pair (x_i, v_i), exactly as one example is in the
# core, so scoring and eviction are the core's compiled functions, called once per position.


def _sequence_scores(
    X, kinds, kp, view_of, masks, view_full, ex_blocks, im_blocks,
    ex_off, ex_kind, ex_norm, phi_src, rff_w, rff_b,
    w, scale, sx, ssq, sv, coef, n_support, phis, scores, xsqs, dots,
):  # fmt: skip
    """Per-position block scores ``scores[i, m, :] = f_m(x_i)`` and feature maps ``phis[i]``.

    ``xsqs[i, v]`` receives the squared norm of ``x_i`` on view ``v`` of the implicit blocks.
    """
    for i in range(X.shape[0]):
        cnb.explicit_phi(X[i], ex_blocks, ex_off, ex_kind, ex_norm, phi_src, rff_w, rff_b, phis[i])
        cnb.block_scores(
            X[i], phis[i], w, scale, ex_blocks, ex_off, im_blocks, view_of, masks, view_full,
            kinds, kp, sx, ssq, sv, coef, n_support, xsqs[i], dots, scores[i],
        )  # fmt: skip
        for vw in range(masks.shape[0]):
            xsqs[i, vw] = cnb.view_dot(X[i], X[i], masks[vw], view_full[vw])


sequence_scores = njit(**JIT)(_sequence_scores)


def _pair_kernel(m, vw, xi, xj, xsq_i, xsq_j, kinds, kp, masks, view_full):
    dot = cnb.view_dot(xi, xj, masks[vw], view_full[vw])
    return cnb.kernel_value(
        kinds[m], kp[m, 0], kp[m, 1], kp[m, 2] != 0.0, dot, xsq_i + xsq_j - 2.0 * dot, xsq_i, xsq_j
    )


pair_kernel = njit(**JIT)(_pair_kernel)


def _sequence_step(
    X, V, active, eta,
    kinds, kp, view_of, masks, view_full, ex_blocks, im_blocks, ex_off, policy, capacity,
    w, scale, norms, sx, ssq, sv, coef, kself, sage, counters, phis, scores, xsqs, dots,
):  # fmt: skip
    """Gradient step ``theta_m += eta * sum_i phi_m(x_i) (x) V_i`` on every unigram block.

    Explicit blocks: ``W += (eta / scale) V^T Phi`` and the exact norm from W. Implicit blocks:
    one support pair per active position, added in order; the block norm follows erratum E1
    generalised to a sum over positions, one pair at a time,
    ``||theta + eta phi(x_i) (x) V_i||^2 = ||theta||^2 + 2 eta <f(x_i), V_i> + eta^2 K_ii |V_i|^2``
    with ``f`` updated for the later positions after each pair (``f(x_j) += eta K_ji V_i``); the
    terms add up to ``2 eta sum_i <f(x_i), V_i> + eta^2 sum_ij K_ij <V_i, V_j>``. With a budget,
    a full support set first evicts a pair through the core's ``evict`` (exact norms), and the
    scores of the later positions are corrected for the removed term. ``scores`` (T, M, K) must
    hold the block scores at theta_t on entry; it is scratch afterwards.
    """
    T = X.shape[0]
    K = V.shape[1]
    for m in ex_blocks:
        a = ex_off[m]
        e = ex_off[m + 1]
        g = eta / scale[m]
        for i in range(T):
            if not active[i]:
                continue
            for k in range(K):
                gk = g * V[i, k]
                if gk != 0.0:
                    for j in range(a, e):
                        w[k, j] += gk * phis[i, j]
        norms[m] = scale[m] * math.sqrt(cnb.explicit_sqnorm(w, a, e))
    if im_blocks.shape[0] == 0:
        return
    M = norms.shape[0]
    old = np.zeros(M)
    for i in range(T):
        if not active[i]:
            continue
        vv = 0.0
        for k in range(K):
            vv += V[i, k] * V[i, k]
        n = counters[0]
        if n >= capacity:
            kept = coef[:, :n].copy()  # evict zeroes the victim's coefficients: keep them
            slot = cnb.evict(
                policy, X[i], im_blocks, view_of, masks, view_full, kinds, kp,
                sx, ssq, sv, coef, kself, sage, n, scale, norms, xsqs[i], dots, scores[i],
            )  # fmt: skip
            for m in im_blocks:
                old[m] = scale[m] * kept[m, slot]
            for j in range(i + 1, T):
                if not active[j]:
                    continue
                for m in im_blocks:
                    c = old[m]
                    if c == 0.0:
                        continue
                    vw = view_of[m]
                    kv = pair_kernel(m, vw, X[j], sx[slot], xsqs[j, vw], ssq[slot, vw],
                                     kinds, kp, masks, view_full)  # fmt: skip
                    for k in range(K):
                        scores[j, m, k] -= c * kv * sv[slot, k]
        else:
            slot = n
            counters[0] = n + 1
        for j in range(X.shape[1]):
            sx[slot, j] = X[i, j]
        for vw in range(masks.shape[0]):
            ssq[slot, vw] = xsqs[i, vw]
        for k in range(K):
            sv[slot, k] = V[i, k]
        sage[slot] = counters[1]
        counters[1] += 1
        for m in im_blocks:  # corrected block-norm update (erratum E1), position i
            vw = view_of[m]
            kxx = cnb.kernel_value(
                kinds[m], kp[m, 0], kp[m, 1], kp[m, 2] != 0.0,
                xsqs[i, vw], 0.0, xsqs[i, vw], xsqs[i, vw],
            )  # fmt: skip
            fv = 0.0
            for k in range(K):
                fv += scores[i, m, k] * V[i, k]
            n2 = norms[m] * norms[m] + 2.0 * eta * fv + eta * eta * kxx * vv
            norms[m] = math.sqrt(n2) if n2 > 0.0 else 0.0
            kself[slot, m] = kxx
            coef[m, slot] = eta / scale[m]
        for j in range(i + 1, T):  # f_m(x_j) at the updated theta
            if not active[j]:
                continue
            for m in im_blocks:
                vw = view_of[m]
                kv = pair_kernel(m, vw, X[j], X[i], xsqs[j, vw], xsqs[i, vw],
                                 kinds, kp, masks, view_full)  # fmt: skip
                if kv == 0.0:
                    continue
                for k in range(K):
                    scores[j, m, k] += eta * kv * V[i, k]


sequence_step = njit(**JIT)(_sequence_step)
