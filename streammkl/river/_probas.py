"""The classifier's probabilities from the core's scores: :func:`probas_of_rows` in Python, and
for two classes a run of scores compiled (:func:`two_class_probas`), the same numbers bit for
bit.

No fastmath (``JIT_EXACT``): the same operations in the same order, and ``math.exp`` is the C
library's in both (tested against the Python formula). The daemon calls this once per compiled
run instead of a Python loop of two ``exp`` per record (about 1.5 µs per record under the GIL).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from streammkl.core.jit import JIT_EXACT


@njit(**JIT_EXACT)
def _sigmoid(scores: np.ndarray, scale: float, p0: np.ndarray, p1: np.ndarray) -> None:
    for i in range(scores.shape[0]):
        f = scores[i, 0] * scale
        p = 1.0 / (1.0 + math.exp(-f)) if f > -700 else 0.0
        p0[i] = 1.0 - p
        p1[i] = p


@njit(**JIT_EXACT)
def _softmax2(scores: np.ndarray, p0: np.ndarray, p1: np.ndarray) -> None:
    for i in range(scores.shape[0]):
        a = scores[i, 0]
        b = scores[i, 1]
        top = a if a >= b else b
        ea = math.exp(a - top)
        eb = math.exp(b - top)
        total = ea + eb
        p0[i] = ea / total
        p1[i] = eb / total


def two_class_probas(
    scores: np.ndarray, binary: bool, scale: float
) -> tuple[np.ndarray, np.ndarray]:
    """(P(first class), P(second class)) per row of ``scores``: the sigmoid of ``scale`` times
    the one score of a binary loss, or the softmax of a two-class multiclass loss's two scores."""
    scores = np.ascontiguousarray(scores, dtype=np.float64)
    n = scores.shape[0]
    p0, p1 = np.empty(n), np.empty(n)
    if binary:
        _sigmoid(scores, float(scale), p0, p1)
    else:
        _softmax2(scores, p0, p1)
    return p0, p1


def probas_of_rows(
    classes: list, binary: bool, scale: float, rows: list[list[float]]
) -> list[dict]:
    """The probabilities of each class from rows of the core's scores: the one formula for all
    of :class:`~streammkl.river.MKLClassifier`'s probabilities (``binary``: one score, a
    sigmoid of ``scale`` times it; else a softmax over the first ``len(classes)`` scores), with
    loops specialised for two classes (the same numbers: ``sum`` of two floats is their ``+``),
    since the daemon runs it once per record."""
    n = len(classes)
    exp = math.exp
    if binary:
        if n != 2:
            return [{classes[0]: 1.0} for _ in rows]
        c0, c1 = classes
        out = []
        for fx in rows:
            f = fx[0] * scale
            p1 = 1.0 / (1.0 + exp(-f)) if f > -700 else 0.0
            out.append({c0: 1.0 - p1, c1: p1})
        return out
    if n == 2:
        c0, c1 = classes
        out = []
        for fx in rows:
            a, b = fx[0], fx[1]
            top = a if a >= b else b
            ea, eb = exp(a - top), exp(b - top)
            total = ea + eb
            out.append({c0: ea / total, c1: eb / total})
        return out
    out = []
    for fx in rows:
        scores = fx[:n]
        top = max(scores)
        e = [exp(v - top) for v in scores]
        total = sum(e)
        out.append({c: v / total for c, v in zip(classes, e, strict=True)})
    return out
