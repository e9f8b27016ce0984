"""Compiled sequence decoders (Viterbi, loss-augmented Viterbi, forward-backward) and the
per-position loops of the sequence learner.

They live in the core's compiled package (``streammkl/core/_numba/chains.py`` and
``sequences.py``) beside the helpers they inline, under the package's cache guard (numba's
on-disk cache checks only a function's own source file). This module re-exports them under
their structured names from its public door, :mod:`streammkl.core.compiled` (each with its
``.py_func``).
"""

from __future__ import annotations

from streammkl.core.compiled import (
    forward_backward,
    logsumexp_row,
    pair_kernel,
    sequence_scores,
    sequence_step,
    viterbi,
    viterbi_cost,
    viterbi_hamming,
)

__all__ = [
    "forward_backward",
    "logsumexp_row",
    "pair_kernel",
    "sequence_scores",
    "sequence_step",
    "viterbi",
    "viterbi_cost",
    "viterbi_hamming",
]
