"""Gram matrices for the batch solvers: from kernel objects or precomputed, validated.

Kernels are any objects with ``gram(X, Y) -> ndarray`` and a ``name`` (``streammkl.core.kernels``).
Stacks have shape ``(M, n_rows, n_cols)``: ``K[m, i, j] = k_m(row_i, col_j)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["check_precomputed", "gram_stack", "kernel_names", "trace_scales"]


def kernel_names(kernels: Sequence[object] | None, n_kernels: int) -> list[str]:
    if kernels is None:
        return [f"kernel_{m}" for m in range(n_kernels)]
    return [str(getattr(k, "name", f"kernel_{m}")) for m, k in enumerate(kernels)]


def gram_stack(
    kernels: Sequence[object], X: np.ndarray, Y: np.ndarray | None = None, which=None
) -> np.ndarray:
    """``K[m] = kernels[m].gram(X, Y)`` for m in ``which`` (default: all)."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X: expected a 2-d array (n_samples, n_features), got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError("X contains NaN or infinite values")
    idx = range(len(kernels)) if which is None else which
    mats = []
    for m in idx:
        kernel = kernels[m]
        if not hasattr(kernel, "gram"):
            raise TypeError(f"kernels[{m}] ({kernel!r}) has no gram(X, Y) method")
        mats.append(np.asarray(kernel.gram(X, Y), dtype=np.float64))
    n_rows = X.shape[0]
    n_cols = n_rows if Y is None else np.asarray(Y).shape[0]
    if not mats:
        return np.zeros((0, n_rows, n_cols))
    return np.ascontiguousarray(np.stack(mats))


def check_precomputed(K: object, n_cols: int | None = None, square: bool = True) -> np.ndarray:
    """Validate a precomputed stack: a 3-d array or a list of 2-d Gram matrices."""
    if isinstance(K, list | tuple):
        K = np.stack([np.asarray(k, dtype=np.float64) for k in K])
    K = np.ascontiguousarray(K, dtype=np.float64)
    if K.ndim == 2:
        K = K[None]
    if K.ndim != 3:
        raise ValueError(f"precomputed Grams: expected shape (n_kernels, n, n), got {K.shape}")
    if square and K.shape[1] != K.shape[2]:
        raise ValueError(f"precomputed Grams must be square for fit, got {K.shape[1:]} per kernel")
    if n_cols is not None and K.shape[2] != n_cols:
        raise ValueError(
            f"precomputed Grams: {K.shape[2]} columns, but the model was fitted on {n_cols} samples"
        )
    if not np.isfinite(K.sum()):  # cheap screen, then find the culprit
        bad = np.nonzero(~np.all(np.isfinite(K), axis=(1, 2)))[0]
        raise ValueError(f"precomputed Grams: kernel {int(bad[0])} contains NaN or inf")
    if square:
        for m in range(K.shape[0]):  # per kernel: no full-size temporaries
            Km = K[m]
            if np.max(np.abs(Km - Km.T)) > 1e-8 * max(1.0, float(np.max(np.abs(Km)))):
                raise ValueError(f"precomputed Grams: kernel {m} is not symmetric")
    return K


def trace_scales(K: np.ndarray, names: Sequence[str]) -> np.ndarray:
    """``1 / trace(K_m)`` (unit-trace normalisation, §6.1 of the SpicyMKL paper)."""
    tr = np.trace(K, axis1=1, axis2=2)
    bad = np.nonzero(~(tr > 0))[0]
    if bad.size:
        m = int(bad[0])
        raise ValueError(
            f"kernel {names[m]!r}: trace {tr[m]:g} <= 0, cannot normalise to unit trace"
        )
    return 1.0 / tr
