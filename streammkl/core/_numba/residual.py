"""The Nadaraya-Watson mean of a window of past residuals (``streammkl.core.residual_memory``).

- ``nw_mean``: ``sum_i w_i v_i / sum_i w_i`` over the first ``m`` rows of a ring of raw inputs,
  ``w_i = exp(-gamma d2_i - max)``, ``d2_i = sum_j weights_j (rows_ij - z_j)^2``: one pass for
  the distances, one for the exponentials. Exact arithmetic (``JIT_EXACT``: no fastmath), so that
  it agrees with the study's numpy head (``benchmarks/regression_votes.py``) to rounding: 78 ->
  see ``benchmarks/results/memory_regressor.md`` for the measured cost.
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
