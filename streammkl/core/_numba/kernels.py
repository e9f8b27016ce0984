"""Kernel values from shared inner products, masked dot products, exact Gram matrices."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from streammkl.core._jit import JIT, JIT_INLINE
from streammkl.core._numba.codes import K_LINEAR, K_POLY, K_RBF


def _kernel_value(kind, p0, p1, normalize, dot, sqdist, nx, ny):
    """k(x, y) from the shared inner products: dot = <x,y>, nx = <x,x>, ny = <y,y>."""
    if kind == K_LINEAR:
        k = dot
        if normalize:
            den = math.sqrt(nx * ny)
            k = dot / den if den > 0.0 else 0.0
    elif kind == K_POLY:
        base = dot + p1
        if normalize:
            den = math.sqrt((nx + p1) * (ny + p1))
            base = base / den if den > 0.0 else 0.0
        k = 1.0
        for _ in range(int(p0)):  # integer degree: repeated products, no pow()
            k *= base
    elif kind == K_RBF:
        k = math.exp(-p0 * max(sqdist, 0.0))
    else:  # B1-spline
        k = 1.0 - math.sqrt(max(sqdist, 0.0)) / p0
        if k < 0.0:
            k = 0.0
    return k


kernel_value = njit(**JIT_INLINE)(_kernel_value)


def _view_dot(x, y, mask, full):
    acc = 0.0
    if full:
        for j in range(x.shape[0]):
            acc += x[j] * y[j]
    else:
        for j in range(x.shape[0]):
            acc += mask[j] * x[j] * y[j]
    return acc


view_dot = njit(**JIT_INLINE)(_view_dot)


def _gram(kind, p0, p1, normalize, mask, full, X, Y, out):
    """Kernel matrix k(X_i, Y_j) on the features selected by ``mask``."""
    nxs = np.empty(X.shape[0])
    nys = np.empty(Y.shape[0])
    for i in range(X.shape[0]):
        nxs[i] = view_dot(X[i], X[i], mask, full)
    for j in range(Y.shape[0]):
        nys[j] = view_dot(Y[j], Y[j], mask, full)
    for i in range(X.shape[0]):
        for j in range(Y.shape[0]):
            dot = view_dot(X[i], Y[j], mask, full)
            sq = nxs[i] + nys[j] - 2.0 * dot
            out[i, j] = kernel_value(kind, p0, p1, normalize, dot, sq, nxs[i], nys[j])
    return out


gram = njit(**JIT)(_gram)
