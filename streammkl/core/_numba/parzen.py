"""The Parzen vote of a window of past inputs and its upkeep (``streammkl.core.parzen_memory``).

The window is stored by columns (``columns``: inputs x window slots, float32), so that every
loop over the window is an inner loop over contiguous memory:

- ``parzen_vote``: the class fractions of the Gaussian-weighted (Parzen) vote of the first ``m``
  slots for one input, its squared distances weighted per input (``weights``), each weight
  ``exp(-gamma d2)`` by a bit-trick exp in float32 (``QUADRATIC_EXP_C``: within 0.27 % of exp),
  the class sums as one masked pass per class. Research prototype ``_numba_parzen_fast(
  quadratic=True)`` of ``benchmarks/knn_votes.py`` (runs 12-14: 1.65 µs against 3.92 µs with
  ``expf`` and a scatter, W = 1,000 on Bananas): the scatter ``out[y[i]] += w`` and the call of
  expf per slot are what kept the loops from vectorising;
- ``store``: one input and its class written into a slot (``store_rows``: several in turn);
- ``relevance``: per input, its binned mutual information with the class over the window, less
  its bias under independence;
- ``median_distance``: the median of the pairwise weighted squared distances of some slots (the
  bandwidth's median heuristic).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from streammkl.core._jit import JIT, JIT_VOTE

# exp(x) for x <= 0 as float32 bits: x / ln 2 = n + f (n = floor), 2^f ~ 1 + f (1 - c + c f),
# the quadratic through 2^0 and 2^1 of the smallest relative error (c = 0.33977: within
# 0.27 %), written into the exponent and mantissa bits; below -87 the result is ~1.8e-38
QUADRATIC_EXP_C = np.float32(0.33977)
EXP_FLOOR = np.float32(-87.0)
_LOG2E = np.float32(1.0 / math.log(2.0))
_ONE = np.float32(1.0)
_TWO23 = np.float32(2**23)


def _parzen_vote(columns, labels, m, z, weights, gamma, dist, bits, out):
    """Class fractions of the Parzen vote of slots ``0..m-1`` (``labels``: int32 classes, each
    below ``out.shape[0]``) for the input ``z`` (float64; only its first ``columns.shape[0]``
    entries are read: the window holds no other input) into ``out`` (float64, one entry per
    class, summing to 1). ``dist`` (float32) and ``bits`` (int32): scratch of a window's
    length. The weights are shifted by the nearest slot's, so that the vote is exp(-gamma d2)
    normalised whatever the distances' scale."""
    d = min(columns.shape[0], z.shape[0])
    for i in range(m):
        dist[i] = 0.0
    for j in range(d):
        zj = np.float32(z[j])
        rj = np.float32(weights[j] * gamma)
        col = columns[j]
        for i in range(m):
            t = col[i] - zj
            dist[i] -= rj * t * t
    top = np.float32(-np.inf)
    for i in range(m):
        top = max(top, dist[i])
    for i in range(m):
        t = max(dist[i] - top, EXP_FLOOR) * _LOG2E
        n = np.floor(t)
        f = t - n
        mantissa = f * ((_ONE - QUADRATIC_EXP_C) + QUADRATIC_EXP_C * f)
        bits[i] = ((np.int32(n) + 127) << 23) + np.int32(mantissa * _TWO23)
    w = bits.view(np.float32)
    total = 0.0
    for c in range(out.shape[0]):
        acc = np.float32(0.0)
        for i in range(m):
            acc += w[i] if labels[i] == c else np.float32(0.0)
        out[c] = acc
        total += out[c]
    for c in range(out.shape[0]):
        out[c] /= total


parzen_vote = njit(**JIT_VOTE)(_parzen_vote)


def _store(columns, labels, slot, z, label):
    """Slot ``slot`` := the input ``z`` (its first ``columns.shape[0]`` entries; zeros beyond
    ``z``) and its class ``label``."""
    d = min(columns.shape[0], z.shape[0])
    for j in range(d):
        columns[j, slot] = z[j]
    for j in range(d, columns.shape[0]):
        columns[j, slot] = 0.0
    labels[slot] = label


store = njit(**JIT)(_store)


def _store_rows(columns, labels, first, rows, classes, n):
    """``_store`` of each of the first ``n`` rows of ``rows`` (its class in ``classes``) in
    turn, into the slots ``first, first + 1, ...`` modulo the window."""
    window = labels.shape[0]
    for i in range(n):
        store(columns, labels, (first + i) % window, rows[i], classes[i])


store_rows = njit(**JIT)(_store_rows)


def _relevance(columns, labels, m, n_classes, edges, out):
    """Per input j, into ``out``: the mutual information (nats) between input j cut into
    ``len(edges) + 1`` bins (bin b: ``edges[b - 1] < x <= edges[b]``) and the class, over slots
    ``0..m-1``, less its bias under independence, ``(bins used - 1)(classes present - 1) /
    2m``, floored at 0."""
    nb = edges.shape[0] + 1
    joint = np.zeros((nb, n_classes))
    py = np.zeros(n_classes)
    for i in range(m):
        py[labels[i]] += 1.0
    present = 0
    for c in range(n_classes):
        present += py[c] > 0
        py[c] /= m
    for j in range(columns.shape[0]):
        joint[:, :] = 0.0
        col = columns[j]
        for i in range(m):
            x = np.float64(col[i])
            b = 0
            while b < nb - 1 and edges[b] < x:
                b += 1
            joint[b, labels[i]] += 1.0
        mi = 0.0
        used = 0
        for b in range(nb):
            pb = 0.0
            for c in range(n_classes):
                pb += joint[b, c]
            if pb == 0.0:
                continue
            used += 1
            pb /= m
            for c in range(n_classes):
                if joint[b, c] > 0.0:
                    p = joint[b, c] / m
                    mi += p * np.log(p / (pb * py[c]))
        out[j] = max(mi - (used - 1) * (present - 1) / (2.0 * m), 0.0)


relevance = njit(**JIT)(_relevance)


def _median_distance(columns, slots, weights):
    """The median of the squared distances, weighted per input by ``weights``, between every
    two of the slots ``slots`` (at least two)."""
    k = slots.shape[0]
    d2 = np.empty(k * (k - 1) // 2)
    p = 0
    for a in range(k):
        for b in range(a + 1, k):
            s = 0.0
            for j in range(columns.shape[0]):
                t = np.float64(columns[j, slots[a]]) - np.float64(columns[j, slots[b]])
                s += weights[j] * t * t
            d2[p] = s
            p += 1
    return np.median(d2)


median_distance = njit(**JIT)(_median_distance)
