"""A fixed, seeded bigram (first-order Markov) model over labels, with sparse transitions.

The transition matrix is a mixture ``sum_k w_k P_k`` of ``n_successors`` permutation matrices
that never agree on any label's successor: ``P_1`` is one cycle through all labels (so every label
is reachable from every other), the others are random (a label may follow itself); the weights are
Dirichlet(4). So each label has exactly ``n_successors`` possible next labels, every other
transition has probability exactly 0, and (the matrix being doubly stochastic, the start uniform)
every label is equally frequent at every position. This plays the role letter bigrams play in
words: the previous label says a lot about the next one.

Examples
--------
>>> chain = BigramChain.random(n_labels=10, n_successors=3, seed=0)
>>> int((chain.transition > 0).sum(axis=1).max())
3
>>> chain.sample(np.random.default_rng(0), 5).shape
(5,)
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from .base import check_int, child_rng

__all__ = ["BigramChain"]

_TAG_CHAIN = 7


@dataclass(frozen=True, eq=False)
class BigramChain:
    """Start distribution ``start`` (K,) and row-stochastic ``transition`` (K, K)."""

    start: np.ndarray
    transition: np.ndarray

    @classmethod
    def random(cls, n_labels: int = 10, n_successors: int = 3, seed: int = 0) -> BigramChain:
        """The chain for ``(n_labels, n_successors, seed)``; same arguments, same chain."""
        n_labels = check_int("n_labels", n_labels, 2)
        n_successors = check_int("n_successors", n_successors, 1, n_labels)
        rng = child_rng(check_int("chain_seed", seed, 0), _TAG_CHAIN)
        cycle = rng.permutation(n_labels)
        maps = np.empty((n_successors, n_labels), dtype=np.int64)
        maps[0, cycle] = np.roll(cycle, -1)  # one cycle through every label: irreducible
        for k in range(1, n_successors):
            while True:  # a permutation giving every label a successor it does not have yet
                perm = rng.permutation(n_labels)
                if not (perm[None, :] == maps[:k]).any():
                    break
            maps[k] = perm
        weights = rng.dirichlet(np.full(n_successors, 4.0))
        transition = np.zeros((n_labels, n_labels))
        for k in range(n_successors):
            transition[np.arange(n_labels), maps[k]] += weights[k]
        start = np.full(n_labels, 1.0 / n_labels)
        return cls(start=start, transition=transition)

    @property
    def n_labels(self) -> int:
        return len(self.start)

    @functools.cached_property
    def _cumulative(self) -> tuple[np.ndarray, np.ndarray]:
        # Dividing by the row total makes every row end at exactly 1.0 from its last non-zero
        # entry on, so a draw u < 1 never selects a zero-probability label.
        start = np.cumsum(self.start)
        cum = np.cumsum(self.transition, axis=1)
        return start / start[-1], cum / cum[:, -1:]

    def sample(self, rng: np.random.Generator, length: int) -> np.ndarray:
        """One label sequence of ``length`` labels (one uniform draw per label)."""
        u = rng.random(length)
        start, cum = self._cumulative
        out = np.empty(length, dtype=np.int64)
        out[0] = np.searchsorted(start, u[0], side="right")
        for t in range(1, length):
            out[t] = np.searchsorted(cum[out[t - 1]], u[t], side="right")
        return out

    def stationary(self) -> np.ndarray:
        """The stationary distribution (left eigenvector of ``transition`` for eigenvalue 1)."""
        vals, vecs = np.linalg.eig(self.transition.T)
        v = np.real(vecs[:, np.argmin(np.abs(vals - 1.0))])
        return v / v.sum()

    def conditional_entropy_bits(self) -> float:
        """H(next | previous) in bits, stationary-weighted (log2 K if uninformative)."""
        p = self.transition
        with np.errstate(divide="ignore", invalid="ignore"):
            row = -np.where(p > 0, p * np.log2(p), 0.0).sum(axis=1)
        return float(self.stationary() @ row)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able description (start, transition, successors, stationary, entropy)."""
        return {
            "start": self.start.tolist(),
            "transition": self.transition.tolist(),
            "successors": [np.flatnonzero(row).tolist() for row in self.transition],
            "stationary": self.stationary().tolist(),
            "conditional_entropy_bits": self.conditional_entropy_bits(),
        }
