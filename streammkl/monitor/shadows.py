"""Regret against the best single kernel: one shadow learner per kernel, on the same stream.

Each shadow is an ``OnlineMKL`` with the main learner's configuration (loss, regularizer,
schedule, radius, budget, seed, intercept) but a bank of one kernel. It sees every example the main
learner sees, in the same order, and its prequential loss (before its own update) is accumulated.
Then::

    shadow regret = sum_t L(theta_t; x_t, y_t) - min_m sum_t L(theta^m_t; x_t, y_t)

compares *cumulative prequential losses of online learners* (not objectives, not hindsight
optima): positive means learning the kernel combination cost more loss than running the best
single kernel alone; negative means the combination did better than every kernel alone. A kernel
added at run time gets a fresh shadow, compared over the examples since its addition.

Shadows cost one extra learner round per kernel and example; rows are buffered and fed in
``batch_size`` blocks (``learn_many``: one compiled loop; identical prequential losses).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from streammkl.core import OnlineMKL

__all__ = ["ShadowLearners"]


class ShadowLearners:
    """Single-kernel copies of a learner's configuration, fed the same stream.

    Parameters
    ----------
    model
        The main learner; its configuration and feature names are read on ``flush`` only.
    batch_size
        Rows buffered before they are fed to every shadow (1 = immediately).
    """

    def __init__(self, model: OnlineMKL, batch_size: int = 32) -> None:
        if int(batch_size) != batch_size or batch_size < 1:
            raise ValueError(f"shadow batch_size must be a positive integer, got {batch_size!r}")
        self.model = model
        self.batch_size = int(batch_size)
        self.shadows: dict[str, OnlineMKL] = {}
        self.shadow_loss: dict[str, float] = {}
        self.main_loss: dict[str, float] = {}  # main learner's loss over each shadow's lifetime
        self.n_fed = 0
        self._rows: list[tuple[np.ndarray, float, float]] = []
        self._sync()

    def _single(self, kernel_spec: dict[str, Any]) -> OnlineMKL:
        config = self.model.config()
        config["kernels"] = [kernel_spec]
        try:
            shadow = OnlineMKL(**config)
        except ValueError as exc:
            raise ValueError(f"shadow learner for kernel {kernel_spec!r}: {exc}") from exc
        if self.model.feature_keys:
            shadow.declare_features(self.model.feature_keys)
        return shadow

    def _sync(self) -> None:
        """Give every kernel of the main bank a shadow; drop shadows of removed kernels."""
        specs = {k.name: k.to_spec() for k in self.model.kernels}
        for name in list(self.shadows):
            if name not in specs:
                del self.shadows[name], self.shadow_loss[name], self.main_loss[name]
        for name, spec in specs.items():
            if name not in self.shadows:
                self.shadows[name] = self._single(spec)
                self.shadow_loss[name] = 0.0
                self.main_loss[name] = 0.0

    def observe(self, x: np.ndarray, y: float, main_loss: float) -> None:
        """Queue one example and the main learner's prequential loss on it."""
        self._rows.append((np.array(x, dtype=np.float64), float(y), float(main_loss)))
        if len(self._rows) >= self.batch_size:
            self.flush()

    def observe_many(self, X: np.ndarray, Y: np.ndarray, main_losses: np.ndarray) -> None:
        """:meth:`observe` of each row, in order (the same flushes at the same rows)."""
        rows = self._rows
        for x, y, loss in zip(X, Y.tolist(), main_losses.tolist(), strict=True):
            rows.append((np.array(x, dtype=np.float64), y, loss))
            if len(rows) >= self.batch_size:
                self.flush()
                rows = self._rows

    def flush(self) -> None:
        """Feed the queued rows to every shadow."""
        if not self._rows:
            return
        rows, self._rows = self._rows, []
        self._sync()
        d = max(len(self.model.feature_keys), max(r[0].shape[0] for r in rows))
        X = np.zeros((len(rows), d))
        for i, (x, _, _) in enumerate(rows):
            X[i, : x.shape[0]] = x
        Y = np.array([r[1] for r in rows])
        main = np.array([r[2] for r in rows])
        finite = np.isfinite(main)
        main_sum = float(main[finite].sum())
        for name, shadow in self.shadows.items():
            if len(self.model.feature_keys) > len(shadow.feature_keys):
                shadow.declare_features(self.model.feature_keys)
            losses, _ = shadow.learn_many(X, Y)
            self.shadow_loss[name] += float(losses[finite].sum())
            self.main_loss[name] += main_sum
        self.n_fed += len(rows)

    def regrets(self) -> dict[str, float]:
        """Main learner's cumulative loss minus each shadow's, over the shadow's lifetime."""
        return {n: self.main_loss[n] - self.shadow_loss[n] for n in self.shadows}

    @property
    def best(self) -> str | None:
        """The kernel whose shadow the main learner trails most (the best single kernel)."""
        r = self.regrets()
        return max(r, key=r.get) if r else None  # type: ignore[arg-type]

    @property
    def regret(self) -> float:
        """Regret against the best single kernel (NaN before anything was fed)."""
        r = self.regrets()
        return max(r.values()) if r and self.n_fed else math.nan
