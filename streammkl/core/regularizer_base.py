"""What every regularizer shares (``Regularizer``): its compiled prox steps, its value on the
block norms (one vector, or each row of an array), the prox on the norms, and the checks and
row sums the regularizers use. The regularizers themselves are in
``streammkl.core.regularizers`` (which re-exports ``Regularizer``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from streammkl.core import _numba as nb
from streammkl.core._spec import Spec

__all__ = ["Regularizer", "Step", "all_blocks", "check_fraction", "check_nonneg", "row_sums"]

Step = tuple[int, float, float, np.ndarray]  # (code, p0, p1, boolean block mask)


class Regularizer(Spec):
    """Base class. ``norm_only`` regularizers depend on theta only through its block norms."""

    norm_only = True
    weight_power = 1.0  # kernel weights beta_m ∝ ||theta_m||^weight_power
    explicit_only = False  # acts on coordinates: explicit blocks only

    def steps(self, n_blocks: int, names: Sequence[str] = ()) -> list[Step]:
        raise NotImplementedError

    def value(self, block_norms: np.ndarray, l1_norm: float = 0.0) -> float:
        """``lambda * Omega(theta)`` from the block norms (and ||theta||_1 where needed)."""
        return self.value_norms(block_norms)

    def value_norms(self, b: np.ndarray) -> float:
        raise NotImplementedError

    def values_norms(self, B: np.ndarray, names: Sequence[str] = ()) -> np.ndarray:
        """:meth:`value_norms` of each row of ``B`` (n, M), vectorised over the rows.

        Sums over the blocks run column by column (:func:`row_sums`), so a row's value does
        not depend on the other rows (nor on their number); it agrees with ``value_norms`` to
        rounding. ``names`` (the kernel names) is for groups given by name.
        """
        raise TypeError(f"{type(self).__name__} is not a function of the block norms alone")

    def prox_norms(self, b: np.ndarray, step: float | np.ndarray) -> np.ndarray:
        """``argmin_z sum_m 1/(2 s_m) (z_m - b_m)^2 + value_norms(z)`` with ``s_m = step`` (the
        paper's prox) or per-block steps ``s = step`` (an array: AdaGrad's metric)."""
        if not self.norm_only:
            raise TypeError(f"{type(self).__name__} is not a function of the block norms alone")
        z = np.array(b, dtype=np.float64)
        steps = np.broadcast_to(np.asarray(step, dtype=np.float64), z.shape).copy()
        if not np.all(steps >= 0):
            raise ValueError(f"prox steps must be >= 0, got {step!r}")
        out = np.empty_like(z)
        for code, p0, p1, group in self.steps(z.shape[0]):
            nb.prox_norm_step(code, p0, p1, group, z, steps, out)
            z, out = out, z
        return z

    def strong_convexity(self) -> float:
        """c with Omega(theta) >= c/2 ||theta||^2 (0 if none) — used for radius='auto'."""
        return 0.0

    def params(self) -> dict[str, Any]:
        raise NotImplementedError


def all_blocks(n: int) -> np.ndarray:
    return np.ones(n, dtype=np.bool_)


def row_sums(A: np.ndarray) -> np.ndarray:
    """Sum of each row of A (n, M), adding the columns in order: the same operations for
    every row, whatever n (numpy's own row sums may pair terms differently)."""
    if A.shape[1] == 0:
        return np.zeros(A.shape[0])
    out = A[:, 0].copy()
    for m in range(1, A.shape[1]):
        out += A[:, m]
    return out


def check_nonneg(name: str, **values: float) -> None:
    for key, val in values.items():
        if not (val >= 0 and np.isfinite(val)):
            raise ValueError(f"{name}: {key} must be a finite number >= 0, got {val!r}")


def check_fraction(name: str, sigma: float) -> None:
    if not 0.0 <= sigma <= 1.0:
        raise ValueError(f"{name}: sigma must be in [0, 1], got {sigma!r}")
