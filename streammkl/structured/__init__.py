"""Structured prediction with multiple kernels (SPOM): sequence labeling and dependency parsing.

``SequenceLabeler`` learns a first-order chain model online — structured hinge (loss-augmented
Viterbi, Hamming cost) or CRF (forward-backward) — over unigram blocks, one per base kernel of
``streammkl.core.kernels``, plus a bigram (transition) block. ``DependencyParser`` learns an
arc-factored non-projective parser — structured hinge, loss-augmented Chu-Liu-Edmonds — with one
hashed sparse block per feature template. See ``docs/structured.md``.
"""

from __future__ import annotations

from streammkl.structured.labeler import TRANSITION, SequenceLabeler
from streammkl.structured.parser import DependencyParser
from streammkl.structured.persistence import StateError
from streammkl.structured.templates import DEFAULT_TEMPLATES

__all__ = ["DEFAULT_TEMPLATES", "TRANSITION", "DependencyParser", "SequenceLabeler", "StateError"]
