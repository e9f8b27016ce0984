"""Proximity operators on the vector of block norms (Prop. 1), and the step-size schedules."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from streammkl.core._jit import JIT, JIT_INLINE
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


def _uniform(steps, group):
    """The common step of the blocks in ``group`` if they all share one, else -1.0."""
    s = -1.0
    for m in range(steps.shape[0]):
        if group[m]:
            if s < 0.0:
                s = steps[m]
            elif steps[m] != s:
                return -1.0
    return s


uniform = njit(**JIT)(_uniform)


def _gather(b, group):
    n = 0
    for m in range(b.shape[0]):
        if group[m]:
            n += 1
    sub = np.empty(n)
    i = 0
    for m in range(b.shape[0]):
        if group[m]:
            sub[i] = b[m]
            i += 1
    return sub


gather = njit(**JIT)(_gather)


def _scatter(res, group, out):
    i = 0
    for m in range(out.shape[0]):
        if group[m]:
            out[m] = res[i]
            i += 1


scatter = njit(**JIT)(_scatter)


def _weighted_squared_l1(x, s, lam, out):
    """argmin_z sum_m 1/(2 s_m) (z_m - x_m)^2 + lam/2 (sum |z_m|)^2: the prox of the squared
    l1 norm in the metric diag(1/s) (the weighted form of Alg. 2, cf. Alg. 4 of the paper's
    supplement). ``z_m = sign(x_m) max(0, |x_m| - s_m lam S)`` with
    ``S = sum_A |x| / (1 + lam sum_A s)`` over the active set A, which is the longest prefix
    of the blocks sorted by ``|x_m| / s_m`` (decreasing) whose last block still satisfies
    ``|x_m| / s_m > lam S``. Equal steps give Alg. 2 with parameter ``s lam``."""
    n = x.shape[0]
    key = np.empty(n)
    for m in range(n):
        key[m] = abs(x[m]) / s[m] if s[m] > 0.0 else np.inf
    order = np.argsort(-key, kind="mergesort")
    sx = 0.0
    ss = 0.0
    total = 0.0
    for r in range(n):
        m = order[r]
        sx += abs(x[m])
        ss += s[m]
        cand = sx / (1.0 + lam * ss)
        if key[m] > lam * cand:
            total = cand
    for m in range(n):
        a = abs(x[m]) - s[m] * lam * total
        out[m] = math.copysign(a, x[m]) if a > 0.0 else 0.0
    return out


weighted_squared_l1 = njit(**JIT)(_weighted_squared_l1)


def _weighted_l1_ball(x, s, radius, out):
    """Projection onto {sum |z_m| <= radius} in the metric diag(1/s): ``z_m = sign(x_m)
    max(0, |x_m| - tau s_m)`` with tau from the breakpoints ``|x_m| / s_m`` (closed form)."""
    n = x.shape[0]
    total = 0.0
    for m in range(n):
        total += abs(x[m])
    if total <= radius:
        for m in range(n):
            out[m] = x[m]
        return out
    key = np.empty(n)
    for m in range(n):
        key[m] = abs(x[m]) / s[m]
    order = np.argsort(-key, kind="mergesort")
    sx = 0.0
    ss = 0.0
    tau = 0.0
    for r in range(n):
        m = order[r]
        sx += abs(x[m])
        ss += s[m]
        cand = (sx - radius) / ss
        if key[m] > cand:
            tau = cand
    for m in range(n):
        a = abs(x[m]) - tau * s[m]
        out[m] = math.copysign(a, x[m]) if a > 0.0 else 0.0
    return out


weighted_l1_ball = njit(**JIT)(_weighted_l1_ball)


def _secular_root(b, s, lam, target, ball):
    """The root u > 0 of ``sum_m b_m^2 / d_m(u)^2 = target`` with ``d_m = u + lam s_m``, or with
    ``ball`` ``d_m = 1 + u s_m`` (u = 0 when the sum at 0 is already <= target), by Newton's
    method from the left: either function is convex and decreasing, so every iterate stays left
    of the root and the sequence increases to it."""
    u = 0.0
    for _ in range(200):
        f = -target
        fp = 0.0
        for m in range(b.shape[0]):
            if ball:
                d = 1.0 + u * s[m]
                slope = s[m]  # d'(u)
            else:
                d = u + lam * s[m]
                slope = 1.0
            if d <= 0.0:
                continue
            q = b[m] * b[m] / (d * d)
            f += q
            fp -= 2.0 * q * slope / d
        if f <= 0.0 or fp == 0.0:
            break
        nu = u - f / fp
        if nu <= u * (1.0 + 1e-15):
            break
        u = nu
    return u


secular_root = njit(**JIT_INLINE)(_secular_root)


def _decreasing_root(b, s, lam, target):
    """The root u > 0 of ``sum_m b_m^2 / (u + lam s_m)^2 = target`` (``secular_root``)."""
    return secular_root(b, s, lam, target, False)


decreasing_root = njit(**JIT)(_decreasing_root)


def _ball_multiplier(b, s, radius):
    """mu > 0 with ``sum_m b_m^2 / (1 + mu s_m)^2 = radius^2`` (``||b|| > radius``;
    ``secular_root``)."""
    return secular_root(b, s, 0.0, radius * radius, True)


ball_multiplier = njit(**JIT)(_ball_multiplier)


def _schedule_eta(code, p0, t):
    """Learning rate at round t >= 1."""
    if code == S_CONSTANT:
        return p0
    if code == S_INVSQRT:
        return p0 / math.sqrt(t)
    return 1.0 / (p0 * t)


schedule_eta = njit(**JIT)(_schedule_eta)


def _blockwise(code):
    """Whether prox step ``code`` acts on each block's norm alone (L2, group soft-threshold,
    l_q): ``prox_blockwise`` computes it, without allocating."""
    return code == P_L2 or code == P_BLOCKSOFT or code == P_GROUPLQ


blockwise = njit(**JIT_INLINE)(_blockwise)


def _prox_blockwise(code, p0, p1, group, b, steps, out):
    """``prox_norm_step`` for the steps that act on each block's norm alone (``blockwise``):
    L2 (``b / (1 + s lam)``), the group soft-threshold, the l_q Newton step. Allocates nothing
    (the round without reference counting calls it)."""
    M = b.shape[0]
    for m in range(M):
        out[m] = b[m]
    if code == P_L2:
        for m in range(M):
            if group[m]:
                out[m] = b[m] * (1.0 / (1.0 + steps[m] * p0))
    elif code == P_BLOCKSOFT:  # group lasso lam * sum_m ||theta_m||: soft-threshold each norm
        for m in range(M):
            if group[m]:
                t = steps[m] * p0
                out[m] = max(0.0, b[m] - t) if b[m] >= 0.0 else min(0.0, b[m] + t)
    elif code == P_GROUPLQ:
        for m in range(M):
            if group[m]:
                out[m] = math.copysign(prox_power(abs(b[m]), steps[m] * p0, p1), b[m])
    return out


prox_blockwise = njit(**JIT_INLINE)(_prox_blockwise)


def _prox_blockwise_steps(step_codes, step_p, step_groups, b, steps, out):
    """The model's prox steps (``step_codes``, all ``blockwise``) in order on the block norms
    ``b``, in place (``out``: scratch of the same length). Allocates nothing."""
    M = b.shape[0]
    for j in range(step_codes.shape[0]):
        prox_blockwise(step_codes[j], step_p[j, 0], step_p[j, 1], step_groups[j], b, steps, out)
        for m in range(M):
            b[m] = out[m]
    return b


prox_blockwise_steps = njit(**JIT_INLINE)(_prox_blockwise_steps)


def _prox_norm_step(code, p0, p1, group, b, steps, out):
    """One norm-level prox step on the blocks in ``group``, in the metric of the per-block
    steps: ``out = argmin_z sum_m 1/(2 steps_m) (z_m - b_m)^2 + Omega(z)``.

    With one step for every block this is ``prox_{step * Omega}(b)``, computed exactly as the
    paper's operators (Alg. 2 and the rest); per-block steps (AdaGrad, FTRL) use the weighted
    closed forms (L2, group soft-threshold, l_q Newton, weighted Alg. 2, weighted l1-ball) or a
    monotone scalar root (the norm of a group, the l2 ball). Blocks outside ``group`` are copied
    unchanged. ``p0`` is lambda (or the radius), ``p1`` is q or sigma.
    """
    if blockwise(code):
        return prox_blockwise(code, p0, p1, group, b, steps, out)
    M = b.shape[0]
    for m in range(M):
        out[m] = b[m]
    step = uniform(steps, group)
    if code == P_ENET:  # exact prox of lam (sigma/2 sum b^2 + (1-sigma)/2 (sum b)^2)
        sub = gather(b, group)
        res = np.empty(sub.shape[0])
        if step >= 0.0:
            a = step * p0 * p1
            for i in range(sub.shape[0]):
                sub[i] = sub[i] / (1.0 + a)
            prox_squared_l1(sub, step * p0 * (1.0 - p1) / (1.0 + a), res)
        else:  # the l2 part folds into the metric: x / (1 + a_m), steps s_m / (1 + a_m)
            sw = gather(steps, group)
            for i in range(sub.shape[0]):
                a = sw[i] * p0 * p1
                sub[i] = sub[i] / (1.0 + a)
                sw[i] = sw[i] / (1.0 + a)
            weighted_squared_l1(sub, sw, p0 * (1.0 - p1), res)
        scatter(res, group, out)
    elif code == P_SQGROUP or code == P_L1BALL:
        sub = gather(b, group)
        res = np.empty(sub.shape[0])
        if code == P_L1BALL and step >= 0.0:
            project_l1_ball(sub, p0, res)
        elif code == P_L1BALL:
            weighted_l1_ball(sub, gather(steps, group), p0, res)
        elif step >= 0.0:
            prox_squared_l1(sub, step * p0, res)
        else:
            weighted_squared_l1(sub, gather(steps, group), p0, res)
        scatter(res, group, out)
    elif code == P_GROUP:  # lam * ||theta_G||: shrink the norm of the group
        sq = 0.0
        for m in range(M):
            if group[m]:
                sq += b[m] * b[m]
        nrm = math.sqrt(sq)
        if step >= 0.0:
            f = max(0.0, 1.0 - step * p0 / nrm) if nrm > 0.0 else 0.0
            for m in range(M):
                if group[m]:
                    out[m] = b[m] * f
        else:  # z_m = b_m / (1 + lam s_m / r) with r = ||z_G||: 0 iff ||b / s|| <= lam
            sub = gather(b, group)
            sw = gather(steps, group)
            r = decreasing_root(sub, sw, p0, 1.0)
            for m in range(M):
                if group[m]:
                    out[m] = b[m] * r / (r + p0 * steps[m]) if r > 0.0 else 0.0
    elif code == P_BALL:
        sq = 0.0
        for m in range(M):
            if group[m]:
                sq += b[m] * b[m]
        nrm = math.sqrt(sq)
        if nrm > p0:
            if step >= 0.0:
                f = p0 / nrm
                for m in range(M):
                    if group[m]:
                        out[m] = b[m] * f
            else:  # z_m = b_m / (1 + mu s_m): with u = 1/mu, sum b^2 / (u + s)^2 = radius^2 / u^2
                sub = gather(b, group)
                sw = gather(steps, group)
                mu = ball_multiplier(sub, sw, p0)
                for m in range(M):
                    if group[m]:
                        out[m] = b[m] / (1.0 + mu * steps[m])
    return out


prox_norm_step = njit(**JIT)(_prox_norm_step)


def _squared_l1_norms(b, lam, group, out, work):
    """``prox_squared_l1`` (Alg. 2) on the entries of ``b`` in ``group``, into the same entries
    of ``out``, without allocating: ``work`` (at least as long as ``b``) receives the group's
    magnitudes sorted in decreasing order (an insertion sort: the same values in the same order
    as ``np.sort``'s, so the same numbers)."""
    n = 0
    for m in range(b.shape[0]):
        if group[m]:
            a = abs(b[m])
            i = n
            while i > 0 and work[i - 1] < a:
                work[i] = work[i - 1]
                i -= 1
            work[i] = a
            n += 1
    s = 0.0
    tau = 0.0
    for j in range(n):
        s += work[j]
        t = lam / (1.0 + (j + 1) * lam) * s
        if work[j] - t > 0.0:
            tau = t
    for m in range(b.shape[0]):
        if group[m]:
            a = abs(b[m]) - tau
            out[m] = math.copysign(a, b[m]) if a > 0.0 else 0.0


squared_l1_norms = njit(**JIT_INLINE)(_squared_l1_norms)


def _prox_norm_step_into(code, p0, p1, group, b, steps, out, work):
    """``prox_norm_step``, without allocating for the blockwise steps and for the squared group
    lasso at one step for its group (the default regressor's: ``squared_l1_norms`` on the
    scratch ``work``, length >= M); the same numbers."""
    if blockwise(code):
        return prox_blockwise(code, p0, p1, group, b, steps, out)
    if code == P_SQGROUP:
        step = uniform(steps, group)
        if step >= 0.0:
            for m in range(b.shape[0]):
                out[m] = b[m]
            squared_l1_norms(b, step * p0, group, out, work)
            return out
    return prox_norm_step(code, p0, p1, group, b, steps, out)


prox_norm_step_into = njit(**JIT_INLINE)(_prox_norm_step_into)
