"""Regularizers as small objects: a value and prox steps (DESIGN.md table).

``value_norms(b)`` is ``lambda * Omega`` for a vector ``b`` of block norms (``values_norms(B)``
the same for each row of an (n, M) array, vectorised over the rows: the monitor's value of each
round of a compiled run) and
``prox_norms(b, step) = argmin_z 1/2 ||z - b||^2 + step * value_norms(z)``; block-norm
regularizers act on theta through Prop. 1 (prox on the norms, then a per-block rescale, 0/0 := 0).
The learner runs ``steps(...)``: an ordered list of compiled prox steps (J > 1 for composites).

Factor-1/2 conventions follow NOTES.md errata E2/E3: ``SquaredGroupLasso(lam)`` is
``lam/2 (sum_m ||theta_m||)^2`` and its prox is Alg. 2 with parameter ``eta * lam``;
``GroupLq(lam, q)`` is ``lam/2 sum_m ||theta_m||^q`` with Newton equation
``b - b0 + (eta lam q / 2) b^(q-1) = 0``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from streammkl.core import _numba as nb
from streammkl.core._spec import build
from streammkl.core.regularizer_base import (
    Regularizer,
    Step,
    all_blocks,
    check_fraction,
    check_nonneg,
    row_sums,
)

__all__ = [
    "L1",
    "L2",
    "Ball",
    "ElasticNetMKL",
    "GroupL1Ball",
    "GroupLasso",
    "GroupLq",
    "OverlappingGroupLasso",
    "Regularizer",
    "SparseGroupLasso",
    "SquaredGroupLasso",
    "from_spec",
    "kernel_weights",
]


class _Lam(Regularizer):
    def __init__(self, lam: float = 1e-3):
        check_nonneg(type(self).__name__, lam=lam)
        self.lam = float(lam)

    def params(self) -> dict[str, Any]:
        return {"lam": self.lam}


class L2(_Lam):
    """``lam/2 ||theta||^2``: prox scales by ``1/(1 + eta lam)``."""

    weight_power = 0.0  # q = 2: the plain sum of kernels, every active kernel weighs the same

    def steps(self, n_blocks: int, names: Sequence[str] = ()) -> list[Step]:
        return [(nb.P_L2, self.lam, 0.0, all_blocks(n_blocks))]

    def value_norms(self, b: np.ndarray) -> float:
        return 0.5 * self.lam * float(np.sum(np.square(b)))

    def values_norms(self, B: np.ndarray, names: Sequence[str] = ()) -> np.ndarray:
        return 0.5 * self.lam * row_sums(np.square(B))

    def strong_convexity(self) -> float:
        return 1.0


class L1(_Lam):
    """``lam ||theta||_1`` on explicit blocks: coordinate soft-threshold."""

    norm_only = False
    explicit_only = True

    def steps(self, n_blocks: int, names: Sequence[str] = ()) -> list[Step]:
        return [(nb.P_L1, self.lam, 0.0, all_blocks(n_blocks))]

    def value(self, block_norms: np.ndarray, l1_norm: float = 0.0) -> float:
        return self.lam * l1_norm


class GroupLasso(_Lam):
    """``lam sum_m ||theta_m||``: soft-threshold each block norm."""

    def steps(self, n_blocks: int, names: Sequence[str] = ()) -> list[Step]:
        return [(nb.P_BLOCKSOFT, self.lam, 0.0, all_blocks(n_blocks))]

    def value_norms(self, b: np.ndarray) -> float:
        return self.lam * float(np.sum(np.abs(b)))

    def values_norms(self, B: np.ndarray, names: Sequence[str] = ()) -> np.ndarray:
        return self.lam * row_sums(np.abs(B))


class SquaredGroupLasso(_Lam):
    """Sparse MKL, the default: ``lam/2 (sum_m ||theta_m||)^2``; prox = Alg. 2 on the norms."""

    def steps(self, n_blocks: int, names: Sequence[str] = ()) -> list[Step]:
        return [(nb.P_SQGROUP, self.lam, 0.0, all_blocks(n_blocks))]

    def value_norms(self, b: np.ndarray) -> float:
        return 0.5 * self.lam * float(np.sum(np.abs(b))) ** 2

    def values_norms(self, B: np.ndarray, names: Sequence[str] = ()) -> np.ndarray:
        s = row_sums(np.abs(B))
        return 0.5 * self.lam * (s * s)

    def strong_convexity(self) -> float:
        return 1.0


class GroupLq(Regularizer):
    """Non-sparse MKL: ``lam/2 sum_m ||theta_m||^q`` (q >= 1); beta_m ∝ ||theta_m||^(2-q)."""

    def __init__(self, lam: float = 1e-3, q: float = 1.5):
        check_nonneg("GroupLq", lam=lam)
        if not q >= 1.0:
            raise ValueError(f"GroupLq: q must be >= 1 (convexity), got {q!r}")
        self.lam = float(lam)
        self.q = float(q)

    @property
    def weight_power(self) -> float:  # type: ignore[override]
        return 2.0 - self.q

    def steps(self, n_blocks: int, names: Sequence[str] = ()) -> list[Step]:
        return [(nb.P_GROUPLQ, self.lam, self.q, all_blocks(n_blocks))]

    def value_norms(self, b: np.ndarray) -> float:
        return 0.5 * self.lam * float(np.sum(np.abs(b) ** self.q))

    def values_norms(self, B: np.ndarray, names: Sequence[str] = ()) -> np.ndarray:
        # np.power elementwise: row i's terms are those of row i alone
        return 0.5 * self.lam * row_sums(np.power(np.abs(B), self.q))

    def strong_convexity(self) -> float:
        return 1.0 if self.q == 2.0 else 0.0

    def params(self) -> dict[str, Any]:
        return {"lam": self.lam, "q": self.q}


class ElasticNetMKL(Regularizer):
    """``lam (sigma/2 ||theta||^2 + (1-sigma)/2 (sum_m ||theta_m||)^2)``.

    The paper's two steps (scale by ``1/(1 + eta lam sigma)``, then Alg. 2) with the second
    parameter divided by ``1 + eta lam sigma``, which makes the pair the exact prox of the sum.
    """

    def __init__(self, lam: float = 1e-3, sigma: float = 0.5):
        check_nonneg("ElasticNetMKL", lam=lam)
        check_fraction("ElasticNetMKL", sigma)
        self.lam = float(lam)
        self.sigma = float(sigma)

    def steps(self, n_blocks: int, names: Sequence[str] = ()) -> list[Step]:
        return [(nb.P_ENET, self.lam, self.sigma, all_blocks(n_blocks))]

    def value_norms(self, b: np.ndarray) -> float:
        b = np.abs(b)
        s = self.sigma
        return self.lam * (0.5 * s * float(np.sum(b * b)) + 0.5 * (1 - s) * float(np.sum(b)) ** 2)

    def values_norms(self, B: np.ndarray, names: Sequence[str] = ()) -> np.ndarray:
        B = np.abs(B)
        s = self.sigma
        total = row_sums(B)
        return self.lam * (0.5 * s * row_sums(B * B) + 0.5 * (1 - s) * (total * total))

    def strong_convexity(self) -> float:
        return 1.0

    def params(self) -> dict[str, Any]:
        return {"lam": self.lam, "sigma": self.sigma}


class SparseGroupLasso(Regularizer):
    """``lam (sigma sum_m ||theta_m|| + (1-sigma) ||theta||_1)`` on explicit blocks.

    Two steps, coordinate soft-threshold first and block soft-threshold second: in that order the
    composition is the exact prox of the sum (Friedman et al. 2010).
    """

    norm_only = False
    explicit_only = True

    def __init__(self, lam: float = 1e-3, sigma: float = 0.5):
        check_nonneg("SparseGroupLasso", lam=lam)
        check_fraction("SparseGroupLasso", sigma)
        self.lam = float(lam)
        self.sigma = float(sigma)

    def steps(self, n_blocks: int, names: Sequence[str] = ()) -> list[Step]:
        return [
            (nb.P_L1, self.lam * (1 - self.sigma), 0.0, all_blocks(n_blocks)),
            (nb.P_BLOCKSOFT, self.lam * self.sigma, 0.0, all_blocks(n_blocks)),
        ]

    def value(self, block_norms: np.ndarray, l1_norm: float = 0.0) -> float:
        return self.lam * (self.sigma * float(np.sum(block_norms)) + (1 - self.sigma) * l1_norm)

    def params(self) -> dict[str, Any]:
        return {"lam": self.lam, "sigma": self.sigma}


class OverlappingGroupLasso(Regularizer):
    """``sum_j lam_j ||theta_{G_j}||`` over groups of blocks (indices or kernel names).

    One exact prox step per group, in the given order (J = number of groups); for overlapping
    groups the composition is not the prox of the sum, but Lemma 2 of the paper still applies.
    """

    def __init__(self, groups: Sequence[Sequence[int | str]] = (), lam: float | Sequence = 1e-3):
        if not groups:
            raise ValueError("OverlappingGroupLasso: give at least one group of blocks")
        self.groups = tuple(tuple(g) for g in groups)
        lams: tuple[Any, ...] = (
            (lam,) * len(self.groups) if isinstance(lam, int | float) else tuple(lam)
        )
        if len(lams) != len(self.groups):
            raise ValueError("OverlappingGroupLasso: one lam per group, or a single lam")
        for value in lams:
            check_nonneg("OverlappingGroupLasso", lam=float(value))
        self.lam = tuple(float(v) for v in lams)

    def masks(self, n_blocks: int, names: Sequence[str] = ()) -> list[np.ndarray]:
        out = []
        lookup = {name: i for i, name in enumerate(names)}
        for group in self.groups:
            mask = np.zeros(n_blocks, dtype=np.bool_)
            for key in group:
                idx = lookup.get(key) if isinstance(key, str) else int(key)
                if idx is None or not 0 <= idx < n_blocks:
                    raise ValueError(f"OverlappingGroupLasso: unknown block {key!r} in {group}")
                mask[idx] = True
            out.append(mask)
        return out

    def steps(self, n_blocks: int, names: Sequence[str] = ()) -> list[Step]:
        masks = self.masks(n_blocks, names)
        return [(nb.P_GROUP, lam, 0.0, m) for lam, m in zip(self.lam, masks, strict=True)]

    def value_norms(self, b: np.ndarray, names: Sequence[str] = ()) -> float:
        masks = self.masks(len(b), names)
        b = np.asarray(b)
        pairs = zip(self.lam, masks, strict=True)
        return float(sum(lam * np.linalg.norm(b[m]) for lam, m in pairs))

    def values_norms(self, B: np.ndarray, names: Sequence[str] = ()) -> np.ndarray:
        masks = self.masks(B.shape[1], names)
        out = np.zeros(B.shape[0])
        for lam, m in zip(self.lam, masks, strict=True):
            out += lam * np.sqrt(row_sums(np.square(B[:, m])))
        return out

    def value(self, block_norms: np.ndarray, l1_norm: float = 0.0) -> float:
        return self.value_norms(block_norms)

    def params(self) -> dict[str, Any]:
        return {"groups": [list(g) for g in self.groups], "lam": list(self.lam)}


class Ball(Regularizer):
    """Indicator of ``||theta|| <= radius``: projection (rescale every block alike)."""

    weight_power = 1.0

    def __init__(self, radius: float = 1.0):
        if not radius > 0:
            raise ValueError(f"Ball: radius must be > 0, got {radius!r}")
        self.radius = float(radius)

    def steps(self, n_blocks: int, names: Sequence[str] = ()) -> list[Step]:
        return [(nb.P_BALL, self.radius, 0.0, all_blocks(n_blocks))]

    def value_norms(self, b: np.ndarray) -> float:
        return 0.0 if float(np.linalg.norm(b)) <= self.radius * (1 + 1e-9) else float("inf")

    def values_norms(self, B: np.ndarray, names: Sequence[str] = ()) -> np.ndarray:
        inside = np.sqrt(row_sums(np.square(B))) <= self.radius * (1 + 1e-9)
        return np.where(inside, 0.0, np.inf)

    def params(self) -> dict[str, Any]:
        return {"radius": self.radius}


class GroupL1Ball(Ball):
    """Indicator of ``sum_m ||theta_m|| <= radius``: l1-ball projection of the block norms."""

    def steps(self, n_blocks: int, names: Sequence[str] = ()) -> list[Step]:
        return [(nb.P_L1BALL, self.radius, 0.0, all_blocks(n_blocks))]

    def value_norms(self, b: np.ndarray) -> float:
        return 0.0 if float(np.sum(np.abs(b))) <= self.radius * (1 + 1e-9) else float("inf")

    def values_norms(self, B: np.ndarray, names: Sequence[str] = ()) -> np.ndarray:
        inside = row_sums(np.abs(B)) <= self.radius * (1 + 1e-9)
        return np.where(inside, 0.0, np.inf)


_TYPES: dict[str, type[Regularizer]] = {
    c.__name__: c
    for c in (
        L2,
        L1,
        GroupLasso,
        SquaredGroupLasso,
        GroupLq,
        ElasticNetMKL,
        SparseGroupLasso,
        OverlappingGroupLasso,
        Ball,
        GroupL1Ball,
    )
}


def from_spec(spec: Mapping[str, Any] | Regularizer) -> Regularizer:
    """Build a regularizer from ``{"type": "SquaredGroupLasso", "lam": 1e-3}``."""
    return build(spec, Regularizer, _TYPES, "regularizer")


def kernel_weights(regularizers: Sequence[Regularizer], block_norms: np.ndarray) -> np.ndarray:
    """beta_m ∝ ||theta_m||^p, p the ``weight_power`` of the first regularizer that is not a
    ball (1 for sparse MKL, 2 - q for GroupLq, 0 for L2: every non-zero block alike); 0 where
    the block is 0; all zeros when every block is.

    ``block_norms`` (M,), or (k, M): β of each row, the same numbers as row by row (each row
    summed alone), in one pass (a monitor samples several in a run: 5 us each -> ~6 us for
    five)."""
    b = np.asarray(block_norms, dtype=np.float64)
    p = next((r.weight_power for r in regularizers if not isinstance(r, Ball)), 1.0)
    w = np.where(b > 0, np.abs(b) ** p if p else 1.0, 0.0)
    if b.ndim == 2:
        totals = w.sum(axis=1, keepdims=True)
        return np.divide(w, totals, out=np.zeros_like(w), where=totals > 0)
    total = w.sum()
    return w / total if total > 0 else np.zeros_like(b)
