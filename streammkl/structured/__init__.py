"""Structured prediction with multiple kernels (SPOM): sequence labeling.

``SequenceLabeler`` learns a first-order chain model online — structured hinge (loss-augmented
Viterbi, Hamming cost) or CRF (forward-backward) — over unigram blocks, one per base kernel of
``streammkl.core.kernels``, plus a bigram (transition) block; see ``docs/structured.md``.
"""

from __future__ import annotations

from streammkl.structured.labeler import TRANSITION, SequenceLabeler
from streammkl.structured.persistence import StateError

__all__ = ["TRANSITION", "SequenceLabeler", "StateError"]
