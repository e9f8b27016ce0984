"""The landmark refresh's check (``LandmarkRBF.within_reach``): an input's squared distance to
its nearest landmark, in one compiled call (a check every ``refresh`` rounds, cheap beside the
numpy expression it replaces: no temporaries, one pass)."""

from __future__ import annotations

import numpy as np
from numba import njit

from streammkl.core._jit import JIT


def _nearest_sq(Z, x, idx):
    """``min_j ||x[idx] - Z[j]||^2`` over the rows of ``Z`` (m x len(idx)); inf without rows."""
    best = np.inf
    for j in range(Z.shape[0]):
        s = 0.0
        for i in range(idx.shape[0]):
            d = x[idx[i]] - Z[j, i]
            s += d * d
        if s < best:
            best = s
    return best


nearest_sq = njit(**JIT)(_nearest_sq)
