"""Chain decoders for sequence labeling: Viterbi (plain and loss-augmented) and log-space
forward-backward."""

from __future__ import annotations

import numpy as np
from numba import njit

from streammkl.core._jit import JIT

# --- sequence labeling (streammkl.structured): chain decoders and position loops
#
# Conventions, shared by every function here:
#
# - ``unary`` is a (T, K) array: ``unary[i, k]`` is the score of label ``k`` at position ``i``;
# - ``trans`` is a (K, K) array: ``trans[a, b]`` is the score of label ``a`` at ``i`` followed by
#   label ``b`` at ``i + 1`` (the bigram block of the joint kernel, paper [001] §2.3);
# - a label sequence ``y`` scores ``sum_i unary[i, y_i] + sum_i trans[y_i, y_{i+1}]``;
# - ties in an argmax go to the smallest label index (strict ``>`` comparisons), so decoding is
#   deterministic;
# - T >= 1 and K >= 1 are checked by the Python callers, not here.


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
