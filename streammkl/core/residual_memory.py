"""A local memory of a regressor's past mistakes: the last W raw inputs with their targets and the
regressor's residuals, and the Nadaraya-Watson mean of those residuals near a new input.

:class:`ResidualMemory` is the neighbour half of issue 27's hedged regression vote
(``benchmarks/regression_votes.py``, its head "hedge abs eta 4 share 0.002 residual parzen
16/median W=1000 eta2"; ``benchmarks/results/regression_votes.md``): added to the regressor's
prediction, the residual mean corrects it locally (Friedman 1.4214 -> 1.1312 MAE). The memory
computes exactly the study's ``NeighbourMean`` (the same numpy operations in the same order):

- the rows are kept **raw** and their squared differences are scaled by each input's CURRENT
  variance (Welford over every input stored; the mean cancels in a difference), so that an input
  that trends (TrumpApproval's ``ordinal_date``) keeps its meaning, where rows standardised when
  they joined go stale (kNN alone 0.70 against 0.48 MAE there);
- the squared distance is weighted per input by its **correlation ratio** eta^2 with the target
  over the window (the fraction of the target's variance removed by cutting the standardised
  input into 8 bins at -2 .. 2, less its bias under independence, (bins - 1) / (m - 1), floored at
  0, scaled to mean 1; all 1 while no input scores), refreshed every ``period`` pairs;
- ``gamma = scale / median`` scaled squared distance over pairs of the last 100 inputs, taken at
  100 pairs and at every refresh after (``scale / 2 d`` before).

The inputs are numbers in a fixed order given by the caller. The mean is compiled
(``streammkl.core._numba.residual``); the upkeep (every ``period`` pairs) stays in numpy. No
river here.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from streammkl.core._numba import residual as _residual
from streammkl.core.jit import entry_point

#: The bandwidth's median is taken once this many pairs are stored, then at each refresh.
MEDIAN_AFTER = 100
#: Cuts of a standardised input into 8 bins for the correlation ratio.
RELEVANCE_EDGES = np.linspace(-2.0, 2.0, 7)

#: The compiled entry points of the mean and the store (resolved on first use: they skip the
#: dispatcher's typing of their arguments; every call passes exactly these types).
_ENTRY: dict[str, Any] = {}


def _call(name: str, args: tuple) -> Any:
    call = _ENTRY.get(name)
    if call is None:
        call = _ENTRY[name] = entry_point(getattr(_residual, name), args)
    return call(*args)


def correlation_ratio(Z: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-input distance weights from standardised inputs ``Z`` (m x d) and targets ``y``: each
    input's correlation ratio eta^2 (8 bins at ``RELEVANCE_EDGES``) less (bins used - 1) / (m -
    1), floored at 0, scaled to mean 1 (all 1 when no input scores above its bias)."""
    m, d = Z.shape
    r = np.zeros(d)
    total = float(((y - y.mean()) ** 2).sum())
    for j in range(d):
        b = np.searchsorted(RELEVANCE_EDGES, Z[:, j])
        count = np.bincount(b, minlength=len(RELEVANCE_EDGES) + 1)
        s = np.bincount(b, weights=y, minlength=len(RELEVANCE_EDGES) + 1)
        used = count > 0
        between = float((s[used] ** 2 / count[used]).sum()) - float(y.sum()) ** 2 / m
        eta2 = between / total if total > 0 else 0.0
        r[j] = max(eta2 - (int(used.sum()) - 1) / (m - 1), 0.0)
    total_r = r.sum()
    return r * (d / total_r) if total_r > 0 else np.ones(d)


class ResidualMemory:
    """The last ``window`` (raw input, target, residual) triples and the Nadaraya-Watson mean of
    the residuals near a query.

    Parameters
    ----------
    window
        How many of the last triples are kept (W).
    scale
        The bandwidth: ``gamma = scale / median scaled squared distance``.
    period
        Refresh the eta^2 weights and the bandwidth every this many triples.
    """

    def __init__(self, window: int = 1000, scale: float = 16.0, period: int = 250):
        if isinstance(window, bool) or not isinstance(window, int) or window < 2:
            raise ValueError(f"window must be an int >= 2, got {window!r}")
        if not (isinstance(scale, int | float) and math.isfinite(scale) and scale > 0):
            raise ValueError(f"scale must be a finite number > 0, got {scale!r}")
        if isinstance(period, bool) or not isinstance(period, int) or period < 1:
            raise ValueError(f"period must be an int >= 1, got {period!r}")
        self.window = window
        self.scale = float(scale)
        self.period = period
        self.rows = np.zeros((0, 0))  # W x d raw inputs (a ring)
        self.values = np.zeros((window, 2))  # target, residual
        self.count = 0  # triples stored so far
        self.gamma = math.nan  # NaN until the median is taken
        self.relevance = np.zeros(0)  # mean 1
        self.means = np.zeros(0)  # running input means and sums of squared deviations
        self.sq_dev = np.zeros(0)
        self._scratch = np.zeros(window)  # the compiled mean's exponents
        self._weights = np.zeros(0)  # the compiled mean's distance weights

    def _ensure(self, d: int) -> None:
        if self.rows.shape[1] != d:
            self.rows = np.zeros((self.window, d))
            self.relevance, self.means, self.sq_dev = np.ones(d), np.zeros(d), np.zeros(d)
        if self._weights.shape[0] != d:
            self._weights = np.zeros(d)

    def distance_weights(self) -> np.ndarray:
        """Per-input weights of the squared differences: relevance / current variance (1 where
        the variance is 0; the relevance alone before 2 triples)."""
        if self.count < 2:
            return self.relevance
        var = self.sq_dev / self.count
        return self.relevance / np.where(var > 0, var, 1.0)

    def residual_mean(self, row: np.ndarray) -> float:
        """The Nadaraya-Watson mean of the stored residuals at ``row`` (nan while empty)."""
        if self.count == 0:
            return math.nan
        self._ensure(len(row))
        m = min(self.count, self.window)
        gamma = self.gamma if not math.isnan(self.gamma) else self.scale / (2.0 * len(row))
        # (the distance weights computed in the call: their numpy form cost ~3 allocations a
        # round; the same operations, JIT_EXACT)
        args = (
            self.rows, self.values, m, np.ascontiguousarray(row, dtype=np.float64),
            self.relevance, self.sq_dev, self.count, float(gamma), self._scratch, self._weights,
        )  # fmt: skip
        return float(_call("nw_mean_at", args))

    def add(self, row: np.ndarray, target: float, residual: float) -> None:
        """Store one triple (the oldest leaves a full window), then the periodic upkeep."""
        self._ensure(len(row))
        at = self.count % self.window
        self.count += 1
        # (one compiled call for the store and the Welford step, in place: their numpy form
        # was most of the wrapper's every-round cost, the same operations)
        args = (
            self.rows, self.values, at, np.ascontiguousarray(row, dtype=np.float64),
            float(target), float(residual), self.means, self.sq_dev, self.count,
        )  # fmt: skip
        _call("store", args)
        if self.count % self.period == 0:
            self.refresh_relevance()
        if self.count == MEDIAN_AFTER or (
            self.count > MEDIAN_AFTER and self.count % self.period == 0
        ):
            self.refit_bandwidth()

    def refresh_relevance(self) -> None:
        """eta^2 of every input over the window, standardised by the current running moments."""
        m = min(self.count, self.window)
        sd = np.sqrt(self.sq_dev / self.count)
        Z = (self.rows[:m] - self.means) / np.where(sd > 0, sd, 1.0)
        self.relevance = correlation_ratio(Z, self.values[:m, 0])

    def refit_bandwidth(self) -> None:
        """``gamma = scale / median`` of the scaled squared distances of the last 100 rows."""
        m = min(self.count, self.window)
        last = (self.count - 1 - np.arange(min(MEDIAN_AFTER, m))) % self.window
        Z = self.rows[last]
        d2 = ((Z[:, None, :] - Z[None, :, :]) ** 2) @ self.distance_weights()
        med = float(np.median(d2[np.triu_indices(len(Z), 1)]))
        if med > 0:
            self.gamma = self.scale / med

    # --- persistence ------------------------------------------------------------------------
    def to_state(self, prefix: str = "") -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """(JSON-able meta, named arrays, each name prefixed by ``prefix``)."""
        meta = {
            "window": self.window, "scale": self.scale, "period": self.period,
            "count": self.count, "gamma": None if math.isnan(self.gamma) else self.gamma,
        }  # fmt: skip
        arrays = {
            "rows": self.rows, "values": self.values, "relevance": self.relevance,
            "means": self.means, "sq_dev": self.sq_dev,
        }  # fmt: skip
        return meta, {prefix + k: v.copy() for k, v in arrays.items()}

    @classmethod
    def from_state(
        cls, meta: dict[str, Any], arrays: dict[str, np.ndarray], prefix: str = ""
    ) -> ResidualMemory:
        """The memory :meth:`to_state` gave ``(meta, arrays)`` for."""
        memory = cls(int(meta["window"]), float(meta["scale"]), int(meta["period"]))
        memory.count = int(meta["count"])
        memory.gamma = math.nan if meta["gamma"] is None else float(meta["gamma"])
        for name in ("rows", "values", "relevance", "means", "sq_dev"):
            setattr(memory, name, np.array(arrays[prefix + name], dtype=np.float64))
        if memory.values.shape != (memory.window, 2) or memory.rows.shape[0] not in (
            0,
            memory.window,
        ):
            raise ValueError("residual memory state: arrays do not match the window")
        return memory
