"""The Nadaraya-Watson mean of a window of past residuals (``streammkl.core.residual_memory``).

- ``nw_mean``: ``sum_i w_i v_i / sum_i w_i`` over the first ``m`` rows of a ring of raw inputs,
  ``w_i = exp(-gamma d2_i - max)``, ``d2_i = sum_j weights_j (rows_ij - z_j)^2``: one pass for
  the distances, one for the exponentials. Exact arithmetic (``JIT_EXACT``: no fastmath), so that
  it agrees with the study's numpy head (``benchmarks/regression_votes.py``) to rounding: 78 ->
  see ``benchmarks/results/memory_regressor.md`` for the measured cost;
- ``nw_mean_at``: ``nw_mean`` of the residuals with the memory's distance weights computed in
  the call (``ResidualMemory.distance_weights``'s operations);
- ``store``: one triple written into a slot and the running input moments updated (the
  numpy Welford step's operations, in place).
"""

from __future__ import annotations

import math

from numba import njit

from streammkl.core._jit import JIT_EXACT


def _nw_mean(rows, values, m, z, weights, gamma, scratch):
    """The weighted mean of ``values[:m]`` (float64 arrays; ``rows`` W x d C-contiguous,
    ``scratch`` a W buffer) at ``z``; ``m`` >= 1."""
    d = z.shape[0]
    top = -math.inf
    for i in range(m):
        s = 0.0
        for j in range(d):
            t = rows[i, j] - z[j]
            s += t * t * weights[j]
        s = -gamma * s
        scratch[i] = s
        if s > top:
            top = s
    num = 0.0
    den = 0.0
    for i in range(m):
        w = math.exp(scratch[i] - top)
        num += w * values[i]
        den += w
    return num / den


nw_mean = njit(**JIT_EXACT)(_nw_mean)


def _nw_mean_at(rows, values, m, z, relevance, sq_dev, count, gamma, scratch, weights):
    """``nw_mean`` of ``values[:, 1]`` with ``weights`` := ``relevance / var`` (``var =
    sq_dev / count``, 1 where it is not > 0; ``relevance`` itself before 2 triples), the
    operations of ``ResidualMemory.distance_weights``."""
    for j in range(relevance.shape[0]):
        if count < 2:
            weights[j] = relevance[j]
        else:
            var = sq_dev[j] / count
            weights[j] = relevance[j] / (var if var > 0 else 1.0)
    return nw_mean(rows, values[:, 1], m, z, weights, gamma, scratch)


nw_mean_at = njit(**JIT_EXACT)(_nw_mean_at)


def _store(rows, values, at, row, target, residual, means, sq_dev, count):
    """Slot ``at`` := (``row``, ``target``, ``residual``); then, ``count`` the triples stored
    with this one, the running means and squared deviations of the inputs updated in place:
    ``delta = row - means``, ``means += delta / count``, ``sq_dev += delta (row - means)``."""
    for j in range(row.shape[0]):
        rows[at, j] = row[j]
    values[at, 0] = target
    values[at, 1] = residual
    for j in range(row.shape[0]):
        delta = row[j] - means[j]
        means[j] = means[j] + delta / count
        sq_dev[j] = sq_dev[j] + delta * (row[j] - means[j])


store = njit(**JIT_EXACT)(_store)
