"""What can be read from an ``OnlineMKL`` without changing it: predictions, kernel weights,
block norms, support size, regularizer values, the schedule's steps (a mixin of
:class:`streammkl.core.model.OnlineMKL`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from streammkl.core import _numba as nb
from streammkl.core import regularizers as regs_mod
from streammkl.core.kernels import Kernel, MedianRBF
from streammkl.core.losses import Loss
from streammkl.core.regularizers import Regularizer
from streammkl.core.state import BlockState, Layout
from streammkl.core.update import RoundArgs


class ModelViews:
    """Read-only views of the model (attributes: :class:`~streammkl.core.OnlineMKL`'s)."""

    kernels: tuple[Kernel, ...]
    regularizers: tuple[Regularizer, ...]
    loss: Loss
    _names: tuple[tuple[Kernel, ...], list[str]] | None
    _layout: Layout | None
    _state: BlockState | None
    _args: RoundArgs | None

    feature_keys: list[str]
    n_outputs: int
    average: bool

    if TYPE_CHECKING:  # provided by OnlineMKL or another of its mixins

        def _prepare(self, x: Any) -> np.ndarray:
            raise NotImplementedError

        def _target(self, y: Any) -> float:
            raise NotImplementedError

        def _targets(self, Y: Any) -> np.ndarray:
            raise NotImplementedError

    # --- prediction -------------------------------------------------------------------------
    def decision(self, x: Any, averaged: bool = False) -> float | np.ndarray:
        """Scores at x: a float (binary/regression) or one score per class (multiclass)."""
        x = self._prepare(x)
        assert self._args is not None and self._state is not None
        if averaged and not self.average:
            raise ValueError("averaged=True needs OnlineMKL(average=True)")
        fx = self._args.decision(x, self._state.w_avg if averaged else None)
        return fx.copy() if self.loss.multiclass else float(fx[0])

    def decision_many(self, X: Any) -> np.ndarray:
        """Scores for every row of X, shape (n, K), in one compiled loop."""
        X = np.ascontiguousarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D, got shape {X.shape}")
        if X.shape[0] == 0:
            return np.zeros((0, self.n_outputs))
        self._prepare(X[0])
        if X.shape[1] != len(self.feature_keys) or not np.all(np.isfinite(X)):
            raise ValueError(f"X must be finite with {len(self.feature_keys)} columns")
        assert self._args is not None
        return self._args.decision_many(X)

    def losses_many(self, X: Any, Y: Any) -> np.ndarray:
        """Loss of the current model on every (x, y), without learning (one compiled loop).
        A class index the model has not met yet scores 0 (as after learning widens the model
        for it); the model's outputs are not widened."""
        targets = self._targets(Y)
        scores = self.decision_many(X)
        if len(targets) != scores.shape[0]:
            raise ValueError(f"{scores.shape[0]} rows but {len(Y)} targets")
        scores = _with_unseen_classes(scores, targets, self.loss.task)
        out = np.empty(scores.shape[0])
        scratch = np.empty(scores.shape[1])
        nb.loss_values(self.loss.code, self.loss.param, scores, targets, scratch, out)
        return out

    def block_decisions(self, x: Any) -> np.ndarray:
        """Per-block scores f_m(x), shape (M, K)."""
        self.decision(x)
        assert self._args is not None
        return self._args.block_scores().copy()

    def decision_prepared(self, x: np.ndarray) -> np.ndarray:
        """Scores (K,) for a finite float64 vector of the model's width; a view, copy to keep."""
        if self._state is None or x.shape[0] != len(self.feature_keys):
            return np.atleast_1d(self.decision(x))
        assert self._args is not None
        return self._args.decision(x)

    # --- the model ---------------------------------------------------------------------------

    @property
    def names(self) -> list[str]:
        cached = getattr(self, "_names", None)  # (absent from states pickled before it)
        if cached is None or cached[0] is not self.kernels:  # built once per bank
            cached = self._names = (self.kernels, [k.name for k in self.kernels])
        return list(cached[1])

    @property
    def kernel_bandwidths(self) -> dict[str, float]:
        """The bandwidths fitted to the data, by kernel name: gamma of every ``MedianRBF`` that
        has one (from its first input on). Model state: it changes at the warm-up and when the
        inputs grow, while the kernel's name (its configuration) stays."""
        return {k.name: k.fit.gamma for k in self.kernels if isinstance(k, MedianRBF) and k.fit}

    @property
    def built(self) -> bool:
        """Whether the model's arrays exist (after the first input or ``declare_features``)."""
        return self._state is not None

    @property
    def weight_power(self) -> float:
        for reg in self.regularizers:
            if not isinstance(reg, regs_mod.Ball):
                return float(reg.weight_power)
        return 1.0

    @property
    def block_norms(self) -> np.ndarray:
        if self._state is None:
            return np.zeros(len(self.kernels))
        return self._state.norms.copy()

    @property
    def kernel_weights(self) -> np.ndarray:
        return self.kernel_weights_of(self.block_norms)

    def kernel_weights_of(self, block_norms: np.ndarray) -> np.ndarray:
        """β for the block norms ``block_norms`` (M,) (e.g. a row ``learn_many`` recorded):
        what :attr:`kernel_weights` was when the model had those norms."""
        return regs_mod.kernel_weights(self.regularizers, block_norms)

    @property
    def n_support(self) -> int:
        return 0 if self._state is None else self._state.n_support

    @property
    def active_kernels(self) -> list[str]:
        return [n for n, b in zip(self.names, self.block_norms, strict=True) if b > 0]

    def l1_norm(self) -> float:
        """||theta||_1 over the explicit blocks."""
        if self._state is None or self._layout is None:
            return 0.0
        total = 0.0
        for m in self._layout.ex_blocks:
            a, e = self._layout.ex_off[m], self._layout.ex_off[m + 1]
            total += self._state.scale[m] * float(np.abs(self._state.w[:, a:e]).sum())
        return total

    @property
    def norm_only(self) -> bool:
        """Whether every regularizer is a function of the block norms alone (then
        :meth:`regularization_values` applies)."""
        return all(r.norm_only for r in self.regularizers)

    def regularization_value(self) -> float:
        """lambda * Omega(theta) at the current theta."""
        b = self.block_norms
        if self.norm_only:  # the same numbers as regularization_values on a run's rows
            return float(self.regularization_values(b[None, :])[0])
        l1 = self.l1_norm()
        return float(sum(r.value(b, l1) for r in self.regularizers))

    def regularization_values(self, block_norms: np.ndarray) -> np.ndarray:
        """``lambda * Omega`` for each row of block norms (n, M), e.g. those ``learn_many``
        recorded before each round. Row i's value does not depend on the other rows. Only for
        regularizers of the block norms alone (:attr:`norm_only`)."""
        if not self.norm_only:
            raise TypeError(
                "regularization_values needs regularizers of the block norms alone; "
                f"{[r for r in self.regularizers if not r.norm_only]} also need ||theta||_1"
            )
        B = np.asarray(block_norms, dtype=np.float64)
        if B.ndim != 2 or B.shape[1] != len(self.kernels):
            raise ValueError(f"block_norms must be (n, {len(self.kernels)}), got {B.shape}")
        regs = self.regularizers
        total = regs[0].values_norms(B, self.names)
        for r in regs[1:]:
            total = total + r.values_norms(B, self.names)
        return total

    def objective_terms(self, x: Any, y: Any) -> tuple[float, float]:
        """(loss, lambda * Omega) at the current theta, for regret accounting."""
        target = self._target(y)
        scores = np.atleast_1d(self.decision(x))
        scores = _with_unseen_classes(scores[None, :], np.array([target]), self.loss.task)[0]
        return self.loss.value(scores, target), self.regularization_value()

    @property
    def gradient_sq_sums(self) -> np.ndarray:
        """AdaGrad's and FTRL's accumulators: per block the sum of squared gradient norms
        ``sum_t ||g_m,t||^2`` since the last restart, then the bias's (zeros otherwise)."""
        if self._state is None:
            return np.zeros(len(self.kernels) + 1)
        return self._state.step_acc.copy()

    @property
    def block_steps(self) -> np.ndarray:
        """The step each block took in the last round (then the bias step): ``eta_t`` for every
        block with a global schedule, AdaGrad's per-block steps otherwise (zeros before)."""
        if self._args is None:
            return np.zeros(len(self.kernels) + 1)
        return self._args.etas.copy()


def _with_unseen_classes(scores: np.ndarray, targets: np.ndarray, task: str) -> np.ndarray:
    """Rows of scores (n, K) with a zero column for every class index among ``targets`` beyond
    K: what the model scores a class it has not met (its outputs start at zero). The compiled
    loss indexes the scores by the target, so a class beyond them must have its column."""
    if task != "multiclass" or not targets.size:
        return scores
    top = int(targets.max()) + 1
    if top <= scores.shape[1]:
        return scores
    return np.hstack([scores, np.zeros((scores.shape[0], top - scores.shape[1]))])
