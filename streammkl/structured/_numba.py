"""Compiled sequence decoders (Viterbi, loss-augmented Viterbi, forward-backward) and the
per-position loops of the sequence learner.

They live in ``streammkl/core/_numba.py`` with every other compiled function: numba's on-disk
cache is invalidated per source file, so compiled code that inlines core helpers must sit in the
same file as those helpers, or a change to the core would leave stale machine code here. This
module re-exports them under their structured names (each with its ``.py_func``).
"""

from __future__ import annotations

from streammkl.core._numba import (
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
