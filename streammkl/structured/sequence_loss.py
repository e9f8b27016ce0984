"""The sequence labeler's losses at theta and their directions: the structured hinge
(loss-augmented Viterbi with Hamming cost) and the CRF (forward-backward)."""

from __future__ import annotations

import numpy as np

from streammkl.core import compiled as cnb

#: The losses :class:`~streammkl.structured.SequenceLabeler` takes.
LOSSES = ("hinge", "crf")


def loss_direction(
    loss: str, unary: np.ndarray, trans: np.ndarray, y: np.ndarray
) -> tuple[float, np.ndarray, np.ndarray]:
    """Loss at theta of the gold labels ``y`` given unary (T, K) and transition (K, K) scores,
    unigram directions V (T, K) and bigram direction G0 (K, K) (= -grad)."""
    T, K = unary.shape
    rows = np.arange(T)
    gold = unary[rows, y].sum() + trans[y[:-1], y[1:]].sum()
    V = np.zeros((T, K))
    V[rows, y] = 1.0
    G0 = np.zeros((K, K))
    np.add.at(G0, (y[:-1], y[1:]), 1.0)
    if loss == "hinge":
        path, aug = cnb.viterbi_hamming(unary, trans, y)
        V[rows, path] -= 1.0
        np.add.at(G0, (path[:-1], path[1:]), -1.0)
        return max(float(aug - gold), 0.0), V, G0
    log_z, node, edge = cnb.forward_backward(unary, trans)
    V -= node
    G0 -= edge.sum(axis=0)
    return max(float(log_z - gold), 0.0), V, G0
