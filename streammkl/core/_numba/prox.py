"""Proximity operators on the vector of block norms (Prop. 1), and the step-size schedules."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from streammkl.core._jit import JIT
from streammkl.core._numba.codes import (
    P_BALL,
    P_BLOCKSOFT,
    P_ENET,
    P_GROUP,
    P_GROUPLQ,
    P_L1BALL,
    P_L2,
    P_SQGROUP,
    S_CONSTANT,
    S_INVSQRT,
)


def _prox_squared_l1(x, lam, out):
    """Alg. 2: argmin_z 1/2||z - x||^2 + lam/2 (sum |z_i|)^2  (run with lam = eta * lambda, E3)."""
    n = x.shape[0]
    y = np.sort(np.abs(x))[::-1]
    s = 0.0
    tau = 0.0
    for j in range(n):
        s += y[j]
        t = lam / (1.0 + (j + 1) * lam) * s
        if y[j] - t > 0.0:
            tau = t
    for i in range(n):
        a = abs(x[i]) - tau
        out[i] = math.copysign(a, x[i]) if a > 0.0 else 0.0
    return out


prox_squared_l1 = njit(**JIT)(_prox_squared_l1)


def _project_l1_ball(x, radius, out):
    """Euclidean projection onto {||z||_1 <= radius} (Duchi et al. 2008)."""
    n = x.shape[0]
    total = 0.0
    for i in range(n):
        total += abs(x[i])
    if total <= radius:
        for i in range(n):
            out[i] = x[i]
        return out
    y = np.sort(np.abs(x))[::-1]
    s = 0.0
    tau = 0.0
    for j in range(n):
        s += y[j]
        t = (s - radius) / (j + 1)
        if y[j] - t > 0.0:
            tau = t
    for i in range(n):
        a = abs(x[i]) - tau
        out[i] = math.copysign(a, x[i]) if a > 0.0 else 0.0
    return out


project_l1_ball = njit(**JIT)(_project_l1_ball)


def _prox_power(b0, c, q):
    """Root in [0, b0] of z - b0 + c q/2 z^(q-1) = 0: prox of c/2 z^q (erratum E2).

    Safeguarded Newton: a Newton step that leaves the bracket is replaced by bisection.
    """
    if b0 <= 0.0:
        return 0.0
    h = 0.5 * c * q
    if q == 1.0:
        return max(0.0, b0 - h)
    if q == 2.0:
        return b0 / (1.0 + h)
    lo = 0.0
    hi = b0
    z = b0 / (1.0 + h * q)  # a good start for q near 2, always inside the bracket
    for _ in range(100):
        f = z - b0 + h * z ** (q - 1.0)
        if f > 0.0:
            hi = z
        else:
            lo = z
        if abs(f) <= 1e-15 * max(1.0, b0):
            break
        fp = 1.0 + h * (q - 1.0) * z ** (q - 2.0) if z > 0.0 else np.inf
        nz = z - f / fp
        if not (lo < nz < hi):
            nz = 0.5 * (lo + hi)
        if abs(nz - z) <= 1e-16 * max(1.0, b0):
            z = nz
            break
        z = nz
    return z


prox_power = njit(**JIT)(_prox_power)


def _prox_norm_step(code, p0, p1, group, b, step, out):
    """One norm-level prox step ``out = prox_{step * Omega}(b)`` on the blocks in ``group``.

    Blocks outside ``group`` are copied unchanged. ``p0`` is lambda (or the radius), ``p1`` is q.
    """
    M = b.shape[0]
    for m in range(M):
        out[m] = b[m]
    if code == P_L2:
        f = 1.0 / (1.0 + step * p0)
        for m in range(M):
            if group[m]:
                out[m] = b[m] * f
    elif code == P_BLOCKSOFT:  # group lasso lam * sum_m ||theta_m||: soft-threshold each norm
        t = step * p0
        for m in range(M):
            if group[m]:
                out[m] = max(0.0, b[m] - t) if b[m] >= 0.0 else min(0.0, b[m] + t)
    elif code == P_ENET:  # exact prox of lam (sigma/2 sum b^2 + (1-sigma)/2 (sum b)^2)
        a = step * p0 * p1
        n = 0
        for m in range(M):
            if group[m]:
                n += 1
        sub = np.empty(n)
        res = np.empty(n)
        i = 0
        for m in range(M):
            if group[m]:
                sub[i] = b[m] / (1.0 + a)
                i += 1
        prox_squared_l1(sub, step * p0 * (1.0 - p1) / (1.0 + a), res)
        i = 0
        for m in range(M):
            if group[m]:
                out[m] = res[i]
                i += 1
    elif code == P_GROUP:  # lam * ||theta_G||: soft-threshold the norm of the group
        sq = 0.0
        for m in range(M):
            if group[m]:
                sq += b[m] * b[m]
        nrm = math.sqrt(sq)
        f = max(0.0, 1.0 - step * p0 / nrm) if nrm > 0.0 else 0.0
        for m in range(M):
            if group[m]:
                out[m] = b[m] * f
    elif (code == P_SQGROUP or code == P_L1BALL) and np.all(group):
        if code == P_SQGROUP:
            prox_squared_l1(b, step * p0, out)
        else:
            project_l1_ball(b, p0, out)
    elif code == P_SQGROUP or code == P_L1BALL:
        n = 0
        for m in range(M):
            if group[m]:
                n += 1
        sub = np.empty(n)
        res = np.empty(n)
        i = 0
        for m in range(M):
            if group[m]:
                sub[i] = b[m]
                i += 1
        if code == P_SQGROUP:
            prox_squared_l1(sub, step * p0, res)
        else:
            project_l1_ball(sub, p0, res)
        i = 0
        for m in range(M):
            if group[m]:
                out[m] = res[i]
                i += 1
    elif code == P_GROUPLQ:
        for m in range(M):
            if group[m]:
                out[m] = math.copysign(prox_power(abs(b[m]), step * p0, p1), b[m])
    elif code == P_BALL:
        sq = 0.0
        for m in range(M):
            if group[m]:
                sq += b[m] * b[m]
        nrm = math.sqrt(sq)
        if nrm > p0:
            f = p0 / nrm
            for m in range(M):
                if group[m]:
                    out[m] = b[m] * f
    return out


prox_norm_step = njit(**JIT)(_prox_norm_step)


def _schedule_eta(code, p0, t):
    """Learning rate at round t >= 1."""
    if code == S_CONSTANT:
        return p0
    if code == S_INVSQRT:
        return p0 / math.sqrt(t)
    return 1.0 / (p0 * t)


schedule_eta = njit(**JIT)(_schedule_eta)
