"""The sparse path of explicit blocks: gradient steps, exact block norms, Prop. 1 rescaling and the
running average, each touching only the coordinates a round wrote.

The blocks are the core's explicit layout with one output row: weights ``w`` (P,) unscaled,
block ``m`` owns ``w[off[m]:off[m + 1]]``, ``theta_m = scale[m] * w[off[m]:off[m + 1]]`` and
``norms[m] = ||theta_m||`` is tracked exactly. A sparse direction is given as coordinates
``idx[:n]`` (global), their blocks ``blk[:n]`` and values ``val[:n]`` (repeats allowed).

The running average (Prop. 4 of the paper, as ``OnlineMKL(average=True)``) of the iterates
``theta_t = s_t w_t`` over rounds ``t = 1..T`` is kept sparsely: with ``S_t = sum_{r<=t} s_r``
per block (``cum``) and every write ``delta`` to ``w`` made in round ``tau`` also added to
``u += delta * S_{tau-1}``, ``sum_t theta_t = S_T w_T - u`` (Abel summation). A zeroed block is a
write like any other, so the identity survives Prop. 1's 0/0 := 0; a folded one is rebased first
(see ``sparse_rescale``), which keeps the identity and its digits.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from streammkl.core._jit import JIT
from streammkl.core._numba.codes import _SCALE_FLOOR

AVERAGE_FLOOR = 1e-3  # fold threshold of the lazy scale when the running average is kept


def _block_sqnorm(w, a, e):
    acc = 0.0
    for j in range(a, e):
        acc += w[j] * w[j]
    return acc


block_sqnorm = njit(**JIT)(_block_sqnorm)


def _sparse_step(idx, blk, val, n, eta, w, scale, norms, off, since_exact, u, cum):
    """``theta += eta * sum_i val[i] e_{idx[i]}``: only the written coordinates are read.

    The squared norm of a block moves by ``sum (w_j + d)^2 - w_j^2`` over its writes, in order
    (exact for repeats). A block whose writes since its last exact recount reach its width is
    recounted (``since_exact``), so rounding cannot build up, at O(1) amortised per write; so is a
    block whose running sum reaches 0, so that a zero norm always means zero weights (which
    ``sparse_rescale`` relies on).
    ``u``/``cum`` (sizes 0 when not averaging) receive the running-average bookkeeping.
    """
    M = norms.shape[0]
    delta = np.zeros(M)
    touched = np.zeros(M, dtype=np.int64)
    averaging = u.shape[0] > 0
    for i in range(n):
        m = blk[i]
        j = idx[i]
        d = eta * val[i] / scale[m]
        old = w[j]
        new = old + d
        w[j] = new
        delta[m] += new * new - old * old
        touched[m] += 1
        if averaging:
            u[j] += d * cum[m]
    for m in range(M):
        if touched[m] == 0:
            continue
        a = off[m]
        e = off[m + 1]
        since_exact[m] += touched[m]
        s = norms[m] / scale[m]
        sq = s * s + delta[m]
        if since_exact[m] >= e - a or sq <= 0.0:  # a zero norm always means zero weights
            sq = block_sqnorm(w, a, e)
            since_exact[m] = 0
        norms[m] = scale[m] * math.sqrt(sq) if sq > 0.0 else 0.0


sparse_step = njit(**JIT)(_sparse_step)


def _zero_entries(w, j, u, cum_m):
    if u.shape[0] > 0:
        u[j] -= w[j] * cum_m
    w[j] = 0.0


zero_entries = njit(**JIT)(_zero_entries)


def _sparse_rescale(new_norms, idx, blk, n, was_zero, w, scale, norms, off, u, cum):
    """Prop. 1 on the blocks: ``theta_m *= new_norms[m] / norms[m]`` with 0/0 := 0, in O(1) per
    block through its lazy scale; ends the round of the running average (``cum += scale``).

    A block that goes to zero must have its stored weights cleared (its scale restarts at 1). If it
    was zero before this round's step (``was_zero[m]``), only the coordinates the step wrote
    (``idx[:n]``) can be non-zero and only those are cleared; otherwise the block is cleared
    whole. A scale below the floor is folded into the weights (O(width), rare): ``_SCALE_FLOOR``,
    or ``AVERAGE_FLOOR`` when averaging — ``cum w - u`` subtracts terms of size ``cum / scale``
    times the weights, so a small scale would cancel away the average's digits; the fold first
    rebases the average (``u -= cum w``, ``cum = 0``, which keeps ``cum w - u``), so its terms
    restart at the size of the iterates.
    """
    M = norms.shape[0]
    averaging = u.shape[0] > 0
    for m in range(M):
        old = norms[m]
        new = new_norms[m]
        if new == old:
            continue
        if new <= 0.0 or old <= 0.0:
            if was_zero[m]:
                for i in range(n):
                    if blk[i] == m:
                        zero_entries(w, idx[i], u, cum[m] if averaging else 0.0)
            else:
                for j in range(off[m], off[m + 1]):
                    if w[j] != 0.0:
                        zero_entries(w, j, u, cum[m] if averaging else 0.0)
            scale[m] = 1.0
            norms[m] = 0.0
            continue
        scale[m] *= new / old
        norms[m] = new
    floor = AVERAGE_FLOOR if averaging else _SCALE_FLOOR
    for m in range(M):
        if averaging:
            cum[m] += scale[m]
        if scale[m] >= floor:
            continue
        f = scale[m]
        for j in range(off[m], off[m + 1]):
            if w[j] != 0.0:
                if averaging:
                    u[j] -= cum[m] * w[j]
                w[j] *= f
        if averaging:
            cum[m] = 0.0
        scale[m] = 1.0


sparse_rescale = njit(**JIT)(_sparse_rescale)


def _exact_norms(w, scale, off, norms):
    """Recount every block norm from the weights (O(P)); used after loading a state."""
    for m in range(norms.shape[0]):
        sq = block_sqnorm(w, off[m], off[m + 1])
        norms[m] = scale[m] * math.sqrt(sq)


exact_norms = njit(**JIT)(_exact_norms)
