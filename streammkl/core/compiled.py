"""The core's compiled loops and codes that the packages above it build on (the structured
learners): their public door to :mod:`streammkl.core._numba`, where they live beside the helpers
they inline, under that package's numba cache guard.

- sequences: ``viterbi``, ``viterbi_cost``, ``viterbi_hamming``, ``forward_backward``,
  ``logsumexp_row``, ``pair_kernel``, ``sequence_scores``, ``sequence_step``;
- dependency arcs: the atom kinds ``A_HEAD``, ``A_MOD``, ``A_BETWEEN``, ``A_DIR``, ``A_DIST``,
  the padding code ``PAD``, ``arc_features``, ``arc_scores``, ``max_arborescence``;
- blocks: ``apply_prox_steps``, and the codes ``K_B1`` (B1-spline kernel) and ``B_PROJECT``
  (the projecting budget policy);
- inputs: ``standardize_one``, ``standardize_rows`` (online standardisation of rows, the
  numbers of the rounds of records of known inputs, ``OnlineMKL.learn_bound``).

Each is the compiled function itself (with its ``.py_func``).
"""

from streammkl.core._numba import (
    A_BETWEEN,
    A_DIR,
    A_DIST,
    A_HEAD,
    A_MOD,
    B_PROJECT,
    K_B1,
    PAD,
    apply_prox_steps,
    arc_features,
    arc_scores,
    forward_backward,
    logsumexp_row,
    max_arborescence,
    pair_kernel,
    sequence_scores,
    sequence_step,
    standardize_one,
    standardize_rows,
    viterbi,
    viterbi_cost,
    viterbi_hamming,
)

__all__ = [
    "A_BETWEEN",
    "A_DIR",
    "A_DIST",
    "A_HEAD",
    "A_MOD",
    "B_PROJECT",
    "K_B1",
    "PAD",
    "apply_prox_steps",
    "arc_features",
    "arc_scores",
    "forward_backward",
    "logsumexp_row",
    "max_arborescence",
    "pair_kernel",
    "sequence_scores",
    "sequence_step",
    "standardize_one",
    "standardize_rows",
    "viterbi",
    "viterbi_cost",
    "viterbi_hamming",
]
