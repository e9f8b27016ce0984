"""Explicit blocks over hashed sparse features: the sparse path of the core's explicit blocks.

``HashedBlocks`` holds M explicit blocks of fixed widths (a hashing trick: block ``m`` owns the
coordinates ``off[m]..off[m + 1]``), with the core's lazy per-block scale and exactly tracked block
norms. One round (:meth:`step`) is Alg. 1 on a sparse direction: the gradient step writes only the
coordinates the direction names (``core._numba.sparse.sparse_step``), the J prox steps of the
regularizers run on the vector of block norms (each regularizer's ``prox_norms``, then the optional
projection), and Prop. 1's rescale is O(1) per block — a block pruned to zero clears only the
coordinates this round wrote when it was zero before. Tens of millions of coordinates therefore
cost only the non-zeros a round touches. The running average of the iterates (Prop. 4) is kept
sparsely as well. The state serialises to its non-zeros (``to_arrays``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from streammkl.core import _numba as nb
from streammkl.core import regularizers as regs_mod
from streammkl.core.regularizers import Regularizer

__all__ = ["HashedBlocks", "check_block_regularizers"]


def check_block_regularizers(regularizers: Sequence[Regularizer]) -> None:
    """Hashed blocks take regularizers of the block norms only (``norm_only``)."""
    for r in regularizers:
        if not r.norm_only:
            raise ValueError(
                f"regularizer {r!r} acts on single coordinates: on hashed blocks it would touch "
                "every coordinate each round; use a regularizer of the block norms (L2, "
                "GroupLasso, SquaredGroupLasso, GroupLq, ElasticNetMKL, Ball)"
            )


class HashedBlocks:
    """M hashed explicit blocks (widths ``sizes``) learned by sparse rounds of Alg. 1."""

    def __init__(
        self,
        sizes: Sequence[int] | np.ndarray,
        regularizers: Sequence[Regularizer],
        radius: float | None = None,
        average: bool = False,
    ):
        check_block_regularizers(regularizers)
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.off = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        self.regularizers = tuple(regularizers)
        self.projection = None if radius is None else regs_mod.Ball(float(radius))
        self.average = bool(average)
        M, P = self.sizes.shape[0], int(self.off[-1])
        self.w = np.zeros(P)
        self.scale = np.ones(M)
        self.norms = np.zeros(M)
        self.since_exact = np.zeros(M, dtype=np.int64)
        self.u = np.zeros(P if average else 0)  # running average: sum_t theta_t = cum w - u
        self.cum = np.zeros(M if average else 0)
        self.ever = np.zeros(M, dtype=np.bool_)  # blocks ever non-zero (live in the average)
        self.rounds = 0

    # --- one round --------------------------------------------------------------------------
    def step(self, idx: np.ndarray, blk: np.ndarray, val: np.ndarray, n: int, eta: float) -> None:
        """theta += eta * sum_i val[i] e_{idx[i]} (i < n), then the prox steps and projection."""
        was_zero = self.norms == 0.0
        nb.sparse_step(idx, blk, val, n, eta, self.w, self.scale, self.norms, self.off,
                       self.since_exact, self.u, self.cum)  # fmt: skip
        self.ever |= self.norms > 0.0
        b = self.norms.copy()
        for reg in self.regularizers:
            b = reg.prox_norms(b, eta)
        if self.projection is not None:
            b = self.projection.prox_norms(b, eta)
        nb.sparse_rescale(b, idx, blk, n, was_zero, self.w, self.scale, self.norms, self.off,
                          self.u, self.cum)  # fmt: skip
        self.rounds += 1

    # --- scoring views ----------------------------------------------------------------------
    def scoring(self, averaged: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(live, coef, u)``: score = sum over live blocks of ``coef[m] w_j - u_j``.

        The current iterate: ``coef = scale``, ``u`` empty. The average (up to the factor
        1/rounds, which changes no argmax): ``coef = cum``, ``u`` the correction.
        """
        if averaged and self.average and self.rounds:
            return self.ever, self.cum, self.u
        return self.norms > 0.0, self.scale, np.zeros(0)

    def averaged_weights(self) -> np.ndarray:
        """theta-bar (P,), the mean of the iterates after each round (dense)."""
        if not self.average:
            raise ValueError("averaged_weights needs average=True")
        if not self.rounds:
            return np.zeros_like(self.w)
        coef = np.repeat(self.cum, self.sizes)
        return (coef * self.w - self.u) / self.rounds

    def weights(self) -> np.ndarray:
        """theta (P,) of the current iterate (dense)."""
        return np.repeat(self.scale, self.sizes) * self.w

    @property
    def n_nonzero(self) -> int:
        return int(np.count_nonzero(self.w))

    def nonzero_per_block(self) -> np.ndarray:
        nz = (self.w != 0.0).astype(np.int64)
        return np.add.reduceat(nz, self.off[:-1]) if nz.size else np.zeros(0, dtype=np.int64)

    # --- regularization and weights ---------------------------------------------------------
    def regularization_value(self) -> float:
        return float(sum(r.value(self.norms) for r in self.regularizers))

    def kernel_weights(self) -> np.ndarray:
        return regs_mod.kernel_weights(self.regularizers, self.norms)

    # --- persistence ------------------------------------------------------------------------
    def to_arrays(self) -> dict[str, np.ndarray]:
        """The state as its non-zeros (a hashed block is mostly zeros)."""
        nz = np.flatnonzero(self.w)
        out = {
            "w_index": nz.astype(np.int64),
            "w_value": self.w[nz].copy(),
            "scale": self.scale.copy(),
            "norms": self.norms.copy(),
            "since_exact": self.since_exact.copy(),
            "ever": self.ever.copy(),
            "rounds": np.array([self.rounds], dtype=np.int64),
        }
        if self.average:
            unz = np.flatnonzero(self.u)
            out.update(u_index=unz.astype(np.int64), u_value=self.u[unz].copy(),
                       cum=self.cum.copy())  # fmt: skip
        return out

    def load_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Inverse of :meth:`to_arrays`; ValueError for arrays that do not fit these blocks.

        The tracked norms are kept (so a resumed model continues bit for bit) after checking them
        against a recount from the weights.
        """
        M, P = self.sizes.shape[0], int(self.off[-1])
        w = _scatter(arrays, "w", P)
        scale = _vector(arrays, "scale", M)
        norms = _vector(arrays, "norms", M)
        if np.any(scale <= 0.0):
            raise ValueError("array 'scale' must be > 0")
        exact = np.zeros(M)
        nb.exact_norms(w, scale, self.off, exact)
        if not np.allclose(norms, exact, rtol=1e-6, atol=1e-12):
            raise ValueError("array 'norms' does not match the weights")
        since = _integers(arrays, "since_exact", (M,))
        ever = np.asarray(arrays.get("ever", np.zeros(0)))
        if ever.shape != (M,) or ever.dtype != np.bool_:
            raise ValueError(f"array 'ever' missing or not {M} booleans")
        rounds = _integers(arrays, "rounds", (1,))
        if self.average:
            self.u = _scatter(arrays, "u", P)
            self.cum = _vector(arrays, "cum", M)
        self.w, self.scale, self.norms = w, scale, norms
        self.since_exact, self.ever, self.rounds = since, ever.copy(), int(rounds[0])


def _integers(arrays: dict[str, np.ndarray], name: str, shape: tuple[int, ...]) -> np.ndarray:
    arr = np.asarray(arrays.get(name, np.zeros(0)))
    if arr.shape != shape or arr.dtype.kind != "i" or np.any(arr < 0):
        raise ValueError(f"array {name!r} missing or not integers >= 0 of shape {shape}")
    return np.array(arr, dtype=np.int64)


def _vector(arrays: dict[str, np.ndarray], name: str, size: int) -> np.ndarray:
    arr = np.asarray(arrays.get(name, np.zeros(0)))
    if arr.shape != (size,) or arr.dtype.kind != "f" or not np.all(np.isfinite(arr)):
        raise ValueError(f"array {name!r} missing, not finite or not of shape ({size},)")
    return np.array(arr, dtype=np.float64)


def _scatter(arrays: dict[str, np.ndarray], name: str, size: int) -> np.ndarray:
    index = np.asarray(arrays.get(f"{name}_index", np.zeros(0, dtype=np.int64)))
    value = np.asarray(arrays.get(f"{name}_value", np.zeros(0)))
    if index.dtype.kind != "i" or value.dtype.kind != "f" or index.shape != value.shape:
        raise ValueError(f"arrays {name}_index/{name}_value missing or mismatched")
    if index.size and (index.min() < 0 or index.max() >= size):
        raise ValueError(f"array {name}_index points outside the {size} coordinates")
    if not np.all(np.isfinite(value)):
        raise ValueError(f"array {name}_value holds NaN or Inf")
    out = np.zeros(size)
    out[index] = value
    return out
