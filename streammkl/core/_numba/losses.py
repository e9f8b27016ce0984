"""Loss values and step directions (v = -dL/dscores) of every loss."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from streammkl.core._jit import JIT, JIT_INLINE
from streammkl.core._numba.codes import L_EPS, L_HINGE, L_HUBER, L_LOGISTIC, L_MC_HINGE, L_SQUARED


def _loss_grad(code, p0, scores, y, v):
    """Loss value at ``scores``; writes ``v = -dL/dscores`` (the step direction)."""
    K = scores.shape[0]
    for k in range(K):
        v[k] = 0.0
    if code == L_HINGE:
        m = y * scores[0]
        if m < 1.0:
            v[0] = y
            return 1.0 - m
        return 0.0
    if code == L_LOGISTIC:
        z = -y * scores[0]
        if z > 0:
            loss = z + math.log1p(math.exp(-z))
            sig = 1.0 / (1.0 + math.exp(-z))
        else:
            loss = math.log1p(math.exp(z))
            ez = math.exp(z)
            sig = ez / (1.0 + ez)
        v[0] = y * sig
        return loss
    if code == L_SQUARED:
        r = y - scores[0]
        v[0] = r
        return 0.5 * r * r
    if code == L_EPS:
        r = y - scores[0]
        if r > p0:
            v[0] = 1.0
            return r - p0
        if r < -p0:
            v[0] = -1.0
            return -r - p0
        return 0.0
    if code == L_HUBER:
        r = y - scores[0]
        if abs(r) <= p0:
            v[0] = r
            return 0.5 * r * r
        v[0] = p0 if r > 0 else -p0
        return p0 * (abs(r) - 0.5 * p0)
    yi = int(y)
    if code == L_MC_HINGE:  # Crammer-Singer, 0/1 cost, loss-augmented argmax
        best = -1
        best_val = -np.inf
        for k in range(K):
            val = scores[k] + (0.0 if k == yi else 1.0)
            if val > best_val:
                best_val = val
                best = k
        loss = best_val - scores[yi]
        if best != yi and loss > 0.0:
            v[yi] = 1.0
            v[best] = -1.0
            return loss
        return 0.0
    # softmax (multinomial logistic)
    mx = scores[0]
    for k in range(1, K):
        mx = max(mx, scores[k])
    tot = 0.0
    for k in range(K):
        tot += math.exp(scores[k] - mx)
    lse = mx + math.log(tot)
    for k in range(K):
        v[k] = -math.exp(scores[k] - lse)
    v[yi] += 1.0
    return lse - scores[yi]


loss_grad = njit(**JIT_INLINE)(_loss_grad)


def _loss_values(code, p0, S, Y, v, out):
    """``loss_grad``'s value for each row of scores ``S`` (n, K) and target ``Y[i]``, into
    ``out``; ``v`` (K,) is scratch."""
    for i in range(S.shape[0]):
        out[i] = loss_grad(code, p0, S[i], Y[i], v)


loss_values = njit(**JIT)(_loss_values)
