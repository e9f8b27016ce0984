"""Compiled runs of rounds of an ``OnlineMKL`` (a mixin of
:class:`streammkl.core.model.OnlineMKL`): ``learn_many`` learns the rows of a matrix in one
compiled loop, each row's prediction made before its own update, bit for bit the rounds
``learn`` would make one by one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from streammkl.core import bandwidth
from streammkl.core.kernels import Kernel
from streammkl.core.losses import Loss
from streammkl.core.schedules import Schedule
from streammkl.core.state import BlockState
from streammkl.core.update import RoundArgs


class ModelRuns:
    """``learn_many`` and its helpers (attributes: OnlineMKL's)."""

    kernels: tuple[Kernel, ...]
    loss: Loss
    schedule: Schedule
    feature_keys: list[str]
    n_outputs: int
    t: int
    _state: BlockState | None
    _args: RoundArgs | None
    _warmup: bandwidth.Reservoir | None
    hold_bandwidths: bool

    if TYPE_CHECKING:  # provided by OnlineMKL or another of its mixins

        def _prepare(self, x: Any) -> np.ndarray:
            raise NotImplementedError

        def _prepare_targets(self, Y: Any) -> np.ndarray:
            raise NotImplementedError

        def _ensure_room(self, incoming: int = 1) -> None:
            raise NotImplementedError

        def _swap_kernels(self, kernels: tuple[Kernel, ...]) -> None:
            raise NotImplementedError

    def learn_many(
        self, X: Any, Y: Any, block_norms: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Rounds over the rows of X in order, in one compiled loop.

        Returns the prequential losses (n,) and scores (n, K), each before its own update.
        ``block_norms``, if given, is a C-contiguous float64 (n, M) array that receives the
        block norms before each round (``regularization_values`` turns them into
        ``lambda Omega(theta_t)``, the monitor's objective terms).
        """
        X = np.ascontiguousarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D, got shape {X.shape}")
        self._check_norms_out(block_norms, X.shape[0])
        if X.shape[0] == 0:
            return np.zeros(0), np.zeros((0, self.n_outputs))
        self._prepare(X[0])
        if not np.all(np.isfinite(X)):
            raise ValueError("X contains NaN or Inf")
        if X.shape[1] != len(self.feature_keys):
            raise ValueError(f"X has {X.shape[1]} columns; the model has {len(self.feature_keys)}")
        return self._rounds(X, self._prepare_targets(Y), block_norms)

    def _check_norms_out(self, block_norms: np.ndarray | None, n: int) -> None:
        if block_norms is None:
            return
        shape = (n, len(self.kernels))
        if (
            block_norms.shape != shape
            or block_norms.dtype != np.float64
            or not block_norms.flags.c_contiguous
            or not block_norms.flags.writeable
        ):
            raise ValueError(f"block_norms must be a writeable C-contiguous float64 {shape} array")

    def learn_many_prepared(
        self, X: np.ndarray, Y: np.ndarray, block_norms: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``learn_many`` for callers that hold finite float64 rows of the model's width and
        targets the loss accepts (the river adapters): skips the per-row checks.

        Falls back to :meth:`learn_many` when the model is not built yet or the width differs,
        so a wrong call is still caught there.
        """
        if (
            self._state is None
            or X.ndim != 2
            or X.shape[1] != len(self.feature_keys)
            or Y.shape != (X.shape[0],)
        ):
            return self.learn_many(X, Y, block_norms)
        task = self.loss.task
        if task == "multiclass" and Y.size and Y.max() >= self.n_outputs:
            return self.learn_many(X, Y, block_norms)  # widens the model for the new class
        self._check_norms_out(block_norms, X.shape[0])
        X = np.ascontiguousarray(X, dtype=np.float64)
        return self._rounds(X, np.ascontiguousarray(Y, dtype=np.float64), block_norms)

    def _warm(self, X: np.ndarray) -> None:
        """Keep warm-up inputs; once there are enough, measure the Gaussian bandwidths."""
        assert self._warmup is not None
        self._warmup.add(X)
        if self._warmup.full and not self.hold_bandwidths:
            kernels = bandwidth.after_warmup(self.kernels, self._warmup.rows)
            self._warmup = None
            last = None if self._args is None else self._args.pred.copy()
            self._swap_kernels(kernels)
            if last is not None and self._args is not None:
                self._args.pred[:] = last  # the last round's prediction survives the new bank

    def _rounds(
        self, X: np.ndarray, Y: np.ndarray, block_norms: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The compiled loop over validated rows (see :meth:`learn_many`); a run that crosses
        the end of the bandwidth warm-up is cut there (the bank changes)."""
        if self._warmup is not None:
            cut = bandwidth.WARMUP - len(self._warmup)
            if 0 < cut < X.shape[0]:  # (0: full, kept for a group that decides)
                head = None if block_norms is None else block_norms[:cut]
                tail = None if block_norms is None else block_norms[cut:]
                losses, preds = self._rounds(X[:cut], Y[:cut], head)
                more, more_preds = self._rounds(X[cut:], Y[cut:], tail)
                return np.concatenate([losses, more]), np.concatenate([preds, more_preds])
            out = self._compiled_rounds(X, Y, block_norms)
            self._warm(X)
            return out
        return self._compiled_rounds(X, Y, block_norms)

    def _compiled_rounds(
        self, X: np.ndarray, Y: np.ndarray, block_norms: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        self._ensure_room(X.shape[0])
        assert self._args is not None
        losses, preds = self._args.learn_many(X, Y, self.schedule.t, self.t, block_norms)
        self.schedule.t += X.shape[0]
        self.t += X.shape[0]
        return losses, preds
