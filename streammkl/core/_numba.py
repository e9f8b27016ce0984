"""Every compiled hot loop of the core, as plain functions over arrays.

Each function is written undecorated (``_name``) and compiled once as
``name = njit(**JIT)(_name)``; the Python originals stay importable so
``tests/test_numba_parity.py`` compares every kernel with its ``.py_func``. Python callers
validate inputs and map option objects to the integer codes below.

Model layout (see ``state.py``): ``M`` blocks, ``K`` outputs (1 for binary/regression, number of
classes for multiclass losses). Block ``m`` is either *explicit* — weights ``W[:, a:b]`` over the
feature map ``phi[a:b]`` — or *implicit* —
``theta_m = scale_m * sum_s coef[m, s] phi_m(x_s) (x) v_s`` over a support set shared by all
implicit blocks. Every block carries a lazy ``scale`` (so the prox rescale is O(1)) and its exact
norm ``block_norms[m] = ||theta_m||``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from streammkl.core._jit import JIT, JIT_INLINE

# kernel kinds
K_LINEAR, K_POLY, K_RBF, K_B1 = 0, 1, 2, 3
# explicit feature-map kinds
MAP_GATHER, MAP_RFF, MAP_LINEAR = 0, 1, 2  # product map, random Fourier, plain gather
# losses
L_HINGE, L_LOGISTIC, L_SQUARED, L_EPS, L_HUBER, L_MC_HINGE, L_SOFTMAX = 0, 1, 2, 3, 4, 5, 6
# prox steps
P_L2, P_L1, P_GROUP, P_SQGROUP, P_GROUPLQ, P_BALL, P_L1BALL, P_BLOCKSOFT, P_ENET = range(9)
# schedules
S_CONSTANT, S_INVSQRT, S_INVT = 0, 1, 2
# budget policies
B_OLDEST, B_SMALLEST = 0, 1

_SCALE_FLOOR = 1e-100  # below this a lazy scale is folded into the stored coefficients
_PRUNE_MARGIN = 1e-9  # relative slack of the B1 projection bound, far above rounding (~1e-15)


# --- kernels


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


# --- losses


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


loss_grad = njit(**JIT)(_loss_grad)


def _loss_values(code, p0, S, Y, v, out):
    """``loss_grad``'s value for each row of scores ``S`` (n, K) and target ``Y[i]``, into
    ``out``; ``v`` (K,) is scratch."""
    for i in range(S.shape[0]):
        out[i] = loss_grad(code, p0, S[i], Y[i], v)


loss_values = njit(**JIT)(_loss_values)


# --- prox on block norms


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


# --- model: features, scores


FAST_COS_LIMIT = 1.0e5  # |x| below this: Cody-Waite reduction by pi/2 is exact enough


def _fast_cos(x):
    """cos(x) within 2 ulp of the C library for |x| <= FAST_COS_LIMIT, without a call or a
    branch, so that a loop of them vectorises (numba has no SVML here: math.cos costs ~17 ns,
    this ~1 ns in a loop). Cody-Waite reduction by pi/2 (three parts), fdlibm's sine and
    cosine kernels on [-pi/4, pi/4], the quadrant chosen by selects."""
    k = np.floor(x * 0.63661977236758134308 + 0.5)
    r = x - k * 1.57079632673412561417e00
    r = r - k * 6.07710050630396597660e-11
    r = r - k * 2.02226624871116645580e-21
    z = r * r
    s = r + z * r * (
        -1.66666666666666324348e-01
        + z * (8.33333333332248946124e-03 + z * (-1.98412698298579493134e-04 + z * (
            2.75573137070700676789e-06 + z * (-2.50507602534068634195e-08
                                             + z * 1.58969099521155010221e-10))))
    )  # fmt: skip
    c = 1.0 - 0.5 * z + z * z * (
        4.16666666666666019037e-02
        + z * (-1.38888888888741095749e-03 + z * (2.48015872894767294178e-05 + z * (
            -2.75573143513906633035e-07 + z * (2.08757232129817482790e-09
                                              + z * -1.13596475577881948265e-11))))
    )  # fmt: skip
    q = k - 4.0 * np.floor(k * 0.25)  # the quadrant: 0, 1, 2, 3
    v = s if (q == 1.0 or q == 3.0) else c
    return -v if (q == 1.0 or q == 2.0) else v


fast_cos = njit(**JIT_INLINE)(_fast_cos)


def _explicit_phi(x, ex_blocks, ex_off, ex_kind, ex_norm, phi_src, rff_wt, rff_b, phi):
    """Feature maps of all explicit blocks, concatenated into ``phi``.

    Product maps (linear, exact quadratic) read ``phi_src`` as three rows: first input index,
    second input index (-1: none) and a constant factor, so phi_j = c_j x[i_j] x[k_j]. A random
    Fourier block reads the contiguous rows ``r0 = phi_src[0, a], r0 + 1, ...`` of the offsets and
    of the *transposed* frequencies ``rff_wt`` (d, R), so that every loop over the block's
    components runs on a contiguous view from index 0: numba then drops the negative-index
    checks and LLVM vectorises them (measured: 4.5 -> 0.8 us for the default bank's 384
    components on 2 inputs).
    """
    d = x.shape[0]
    for m in ex_blocks:
        a = ex_off[m]
        e = ex_off[m + 1]
        if ex_kind[m] == MAP_LINEAR:
            for j in range(a, e):
                src = int(phi_src[0, j])
                phi[j] = x[src] if src < d else 0.0
        elif ex_kind[m] == MAP_GATHER:
            for j in range(a, e):
                src = int(phi_src[0, j])
                v = x[src] if 0 <= src < d else (1.0 if src < 0 else 0.0)
                src2 = int(phi_src[1, j])
                if src2 >= 0:
                    v *= x[src2] if src2 < d else 0.0
                phi[j] = v * phi_src[2, j]
        else:
            n = e - a
            c = math.sqrt(2.0 / n)
            p = phi[a:e]
            r0 = int(phi_src[0, a]) if n else 0
            b = rff_b[r0 : r0 + n]
            for j in range(n):
                p[j] = b[j]
            for i in range(min(d, rff_wt.shape[0])):  # z = b + sum_i x_i W[:, i], i in order
                xi = x[i]
                col = rff_wt[i, r0 : r0 + n]
                for j in range(p.shape[0]):
                    p[j] += col[j] * xi
            big = 0.0
            for j in range(p.shape[0]):
                big = max(big, abs(p[j]))
            if big > FAST_COS_LIMIT:  # beyond the reduction's exact range: the library cosine
                for j in range(p.shape[0]):
                    p[j] = c * math.cos(p[j])
            else:  # one vectorised loop
                for j in range(p.shape[0]):
                    p[j] = c * fast_cos(p[j])
        if ex_norm[m]:
            sq = 0.0
            for j in range(a, e):
                sq += phi[j] * phi[j]
            if sq > 0.0:
                inv = 1.0 / math.sqrt(sq)
                for j in range(a, e):
                    phi[j] *= inv


explicit_phi = njit(**JIT)(_explicit_phi)


def _dot4(a, b, lo, hi):
    """sum_{j in [lo, hi)} a[j] b[j] with four accumulators (no reassoc fastmath needed), over
    views indexed from 0 (no negative-index checks in the loop)."""
    u = a[lo:hi]
    v = b[lo:hi]
    n = u.shape[0]
    a0 = a1 = a2 = a3 = 0.0
    for q in range(n // 4):
        j = 4 * q
        a0 += u[j] * v[j]
        a1 += u[j + 1] * v[j + 1]
        a2 += u[j + 2] * v[j + 2]
        a3 += u[j + 3] * v[j + 3]
    for j in range(n - n % 4, n):
        a0 += u[j] * v[j]
    return (a0 + a1) + (a2 + a3)


dot4 = njit(**JIT_INLINE)(_dot4)


def _axpy_sqnorm(w, phi, g, lo, hi):
    """w[lo:hi] += g phi[lo:hi]; returns the new sum of squares (four accumulators)."""
    u = w[lo:hi]
    p = phi[lo:hi]
    n = u.shape[0]
    a0 = a1 = a2 = a3 = 0.0
    for q in range(n // 4):
        j = 4 * q
        w0 = u[j] + g * p[j]
        w1 = u[j + 1] + g * p[j + 1]
        w2 = u[j + 2] + g * p[j + 2]
        w3 = u[j + 3] + g * p[j + 3]
        u[j] = w0
        u[j + 1] = w1
        u[j + 2] = w2
        u[j + 3] = w3
        a0 += w0 * w0
        a1 += w1 * w1
        a2 += w2 * w2
        a3 += w3 * w3
    for j in range(n - n % 4, n):
        w0 = u[j] + g * p[j]
        u[j] = w0
        a0 += w0 * w0
    return (a0 + a1) + (a2 + a3)


axpy_sqnorm = njit(**JIT_INLINE)(_axpy_sqnorm)


def _support_expansion(
    z, zsq, im_blocks, view_of, masks, view_full, kinds, kp, sx, ssq, sv, coef, n_support, out,
):  # fmt: skip
    """``out[m, :] = sum_s coef[m, s] k_m(x_s, z) v_s`` for the implicit blocks (unscaled).

    Two passes: the inner products of z with every support input (per view), then one loop per
    block whose kernel kind is loop-invariant (branch-free inner loop).
    """
    K = out.shape[1]
    n_views = masks.shape[0]
    dots = np.empty((n_support, n_views))
    for s in range(n_support):
        for vw in range(n_views):
            if view_full[vw]:
                dots[s, vw] = dot4(z, sx[s], 0, z.shape[0])
            else:
                dots[s, vw] = view_dot(z, sx[s], masks[vw], False)
    for m in im_blocks:
        vw = view_of[m]
        kind = kinds[m]
        p0 = kp[m, 0]
        p1 = kp[m, 1]
        normalize = kp[m, 2] != 0.0
        nz = zsq[vw]
        for k in range(K):
            out[m, k] = 0.0
        for s in range(n_support):
            c = coef[m, s]
            if c == 0.0:
                continue
            d = dots[s, vw]
            ns = ssq[s, vw]
            kv = kernel_value(kind, p0, p1, normalize, d, nz + ns - 2.0 * d, nz, ns)
            if kv == 0.0:  # e.g. B1 outside its support: the terms would add zeros
                continue
            c *= kv
            for k in range(K):
                out[m, k] += c * sv[s, k]


support_expansion = njit(**JIT)(_support_expansion)


def _block_scores(
    x, phi, w, scale, ex_blocks, ex_off, im_blocks, view_of, masks, view_full,
    kinds, kp, sx, ssq, sv, coef, n_support, xsq, dots, scores,
):  # fmt: skip
    """Per-block scores ``scores[m, :] = f_m(x)`` (explicit: W phi; implicit: kernel expansion)."""
    K = scores.shape[1]
    for m in ex_blocks:
        a = ex_off[m]
        e = ex_off[m + 1]
        for k in range(K):
            scores[m, k] = scale[m] * dot4(w[k], phi, a, e)
    if im_blocks.shape[0] == 0:
        return
    n_views = masks.shape[0]
    for vw in range(n_views):
        xsq[vw] = view_dot(x, x, masks[vw], view_full[vw])
    support_expansion(
        x, xsq, im_blocks, view_of, masks, view_full, kinds, kp, sx, ssq, sv, coef,
        n_support, scores,
    )  # fmt: skip
    for m in im_blocks:
        for k in range(K):
            scores[m, k] *= scale[m]


block_scores = njit(**JIT)(_block_scores)


def _zero_or_fold_block(m, is_explicit, w, ex_off, coef, n_support, scale, zero):
    """Zero block ``m`` (0/0 := 0 of Prop. 1), or fold its underflowing lazy scale into storage."""
    f = 0.0 if zero else scale[m]
    if is_explicit:
        for k in range(w.shape[0]):
            for j in range(ex_off[m], ex_off[m + 1]):
                w[k, j] *= f
    else:
        for s in range(n_support):
            coef[m, s] *= f
    scale[m] = 1.0


zero_or_fold_block = njit(**JIT)(_zero_or_fold_block)


def _explicit_sqnorm(w, a, e):
    acc = 0.0
    for k in range(w.shape[0]):
        acc += dot4(w[k], w[k], a, e)
    return acc


explicit_sqnorm = njit(**JIT)(_explicit_sqnorm)


# --- support-set budget


def _evict(
    policy, x, im_blocks, view_of, masks, view_full, kinds, kp,
    sx, ssq, sv, coef, kself, sage, n_support, scale, norms, xsq, dots, scores,
):  # fmt: skip
    """Remove one support pair; keep ``norms`` exact (O(|S|)) and correct ``scores`` at ``x``.

    Returns the freed slot.
    """
    K = sv.shape[1]
    victim = 0
    if policy == B_OLDEST:
        for s in range(1, n_support):
            if sage[s] < sage[victim]:
                victim = s
    else:  # smallest contribution ||term_s||^2 summed over blocks
        best = np.inf
        for s in range(n_support):
            vv = 0.0
            for k in range(K):
                vv += sv[s, k] * sv[s, k]
            tot = 0.0
            for m in im_blocks:
                c = scale[m] * coef[m, s]
                tot += c * c * kself[s, m] * vv
            if tot < best:
                best = tot
                victim = s
    n_views = masks.shape[0]
    # f_m(x_victim) for every implicit block, over the current support set (unscaled)
    f_vic = np.zeros((coef.shape[0], K))
    support_expansion(
        sx[victim], ssq[victim], im_blocks, view_of, masks, view_full, kinds, kp,
        sx, ssq, sv, coef, n_support, f_vic,
    )  # fmt: skip
    for vw in range(n_views):
        dots[vw] = view_dot(x, sx[victim], masks[vw], view_full[vw])
    vv = 0.0
    for k in range(K):
        vv += sv[victim, k] * sv[victim, k]
    for m in im_blocks:
        c = scale[m] * coef[m, victim]
        if c == 0.0:
            continue
        fv = 0.0
        for k in range(K):
            fv += scale[m] * f_vic[m, k] * sv[victim, k]
        n2 = norms[m] * norms[m] - 2.0 * c * fv + c * c * kself[victim, m] * vv
        norms[m] = math.sqrt(n2) if n2 > 0.0 else 0.0
        vw = view_of[m]
        kv = kernel_value(
            kinds[m], kp[m, 0], kp[m, 1], kp[m, 2] != 0.0, dots[vw],
            xsq[vw] + ssq[victim, vw] - 2.0 * dots[vw], xsq[vw], ssq[victim, vw],
        )  # fmt: skip
        for k in range(K):
            scores[m, k] -= c * kv * sv[victim, k]
        coef[m, victim] = 0.0
    return victim


evict = njit(**JIT)(_evict)


# --- one round (Alg. 1 / 3)


def _apply_prox_steps(
    eta, step_codes, step_p, step_groups, radius, is_explicit, ex_blocks, ex_off,
    w, scale, norms, coef, n_support, newnorms,
):  # fmt: skip
    """J prox steps in order, then the optional projection onto the ball of radius ``radius``."""
    M = norms.shape[0]
    n_steps = step_codes.shape[0]
    for j in range(n_steps + 1):
        if j < n_steps:
            code = step_codes[j]
            if code == P_L1:  # coordinate soft-threshold, explicit blocks only
                tau = eta * step_p[j, 0]
                for m in ex_blocks:
                    if not step_groups[j, m]:
                        continue
                    a = ex_off[m]
                    e = ex_off[m + 1]
                    t = tau / scale[m]
                    for k in range(w.shape[0]):
                        for i in range(a, e):
                            wi = w[k, i]
                            if wi > t:
                                w[k, i] = wi - t
                            elif wi < -t:
                                w[k, i] = wi + t
                            else:
                                w[k, i] = 0.0
                    norms[m] = scale[m] * math.sqrt(explicit_sqnorm(w, a, e))
                continue
            prox_norm_step(code, step_p[j, 0], step_p[j, 1], step_groups[j], norms, eta, newnorms)
        else:
            if radius <= 0.0:
                break
            sq = 0.0
            for m in range(M):
                sq += norms[m] * norms[m]
            nrm = math.sqrt(sq)
            if nrm <= radius:
                break
            for m in range(M):
                newnorms[m] = norms[m] * (radius / nrm)
        for m in range(M):
            old = norms[m]
            new = newnorms[m]
            if new == old:
                continue
            if new <= 0.0 or old <= 0.0:
                zero_or_fold_block(m, is_explicit[m], w, ex_off, coef, n_support, scale, True)
                norms[m] = 0.0
            else:
                scale[m] *= new / old
                norms[m] = new
                if scale[m] < _SCALE_FLOOR:
                    zero_or_fold_block(m, is_explicit[m], w, ex_off, coef, n_support, scale, False)


apply_prox_steps = njit(**JIT)(_apply_prox_steps)


def _learn_round(
    x, y, eta,
    kinds, kp, is_explicit, view_of, masks, view_full, ex_blocks, im_blocks,
    ex_off, ex_kind, ex_norm, phi_src, rff_wt, rff_b,
    loss_code, loss_p, step_codes, step_p, step_groups, radius, policy, capacity,
    w, scale, norms, sx, ssq, sv, coef, kself, sage, counters, bias, bias_lr,
    phi, scores, fx, v, xsq, dots, newnorms,
):  # fmt: skip
    """One round: scores -> loss subgradient -> gradient step -> J prox steps -> projection.

    ``fx`` receives the prequential scores (before the update); returns the loss at theta_t.
    ``counters = [n_support, next_age]``. The caller guarantees room for one more support pair
    when ``capacity`` is not yet reached (``sx.shape[0] > counters[0]``).
    """
    M = norms.shape[0]
    K = fx.shape[0]
    explicit_phi(x, ex_blocks, ex_off, ex_kind, ex_norm, phi_src, rff_wt, rff_b, phi)
    block_scores(
        x, phi, w, scale, ex_blocks, ex_off, im_blocks, view_of, masks, view_full,
        kinds, kp, sx, ssq, sv, coef, counters[0], xsq, dots, scores,
    )  # fmt: skip
    for k in range(K):
        acc = bias[k]
        for m in range(M):
            acc += scores[m, k]
        fx[k] = acc
    loss = loss_grad(loss_code, loss_p, fx, y, v)
    vv = 0.0
    for k in range(K):
        vv += v[k] * v[k]
    if vv > 0.0:
        for m in ex_blocks:  # explicit: W += (eta / scale) v (x) phi, exact norm (one pass)
            a = ex_off[m]
            e = ex_off[m + 1]
            g = eta / scale[m]
            sq = 0.0
            for k in range(K):
                gk = g * v[k]
                if gk != 0.0:
                    sq += axpy_sqnorm(w[k], phi, gk, a, e)
                else:
                    sq += dot4(w[k], w[k], a, e)
            norms[m] = scale[m] * math.sqrt(sq)
        if im_blocks.shape[0] > 0:
            n = counters[0]
            if n >= capacity:
                slot = evict(
                    policy, x, im_blocks, view_of, masks, view_full, kinds, kp,
                    sx, ssq, sv, coef, kself, sage, n, scale, norms, xsq, dots, scores,
                )  # fmt: skip
            else:
                slot = n
                counters[0] = n + 1
            d = x.shape[0]
            for j in range(d):
                sx[slot, j] = x[j]
            for vw in range(masks.shape[0]):
                ssq[slot, vw] = xsq[vw]
            for k in range(K):
                sv[slot, k] = v[k]
            sage[slot] = counters[1]
            counters[1] += 1
            for m in im_blocks:  # corrected block-norm update (erratum E1)
                vw = view_of[m]
                kxx = kernel_value(
                    kinds[m], kp[m, 0], kp[m, 1], kp[m, 2] != 0.0,
                    xsq[vw], 0.0, xsq[vw], xsq[vw],
                )  # fmt: skip
                fv = 0.0
                for k in range(K):
                    fv += scores[m, k] * v[k]
                n2 = norms[m] * norms[m] + 2.0 * eta * fv + eta * eta * kxx * vv
                norms[m] = math.sqrt(n2) if n2 > 0.0 else 0.0
                kself[slot, m] = kxx
                coef[m, slot] = eta / scale[m]
        for k in range(K):
            bias[k] += bias_lr * eta * v[k]
    apply_prox_steps(
        eta, step_codes, step_p, step_groups, radius, is_explicit, ex_blocks, ex_off,
        w, scale, norms, coef, counters[0], newnorms,
    )  # fmt: skip
    return loss


learn_round = njit(**JIT)(_learn_round)


def _decision(
    x, kinds, kp, view_of, masks, view_full, ex_blocks, im_blocks,
    ex_off, ex_kind, ex_norm, phi_src, rff_wt, rff_b,
    w, scale, sx, ssq, sv, coef, n_support, bias, phi, scores, fx, xsq, dots,
):  # fmt: skip
    """Scores ``fx`` = sum of block scores + bias, without learning."""
    explicit_phi(x, ex_blocks, ex_off, ex_kind, ex_norm, phi_src, rff_wt, rff_b, phi)
    block_scores(
        x, phi, w, scale, ex_blocks, ex_off, im_blocks, view_of, masks, view_full,
        kinds, kp, sx, ssq, sv, coef, n_support, xsq, dots, scores,
    )  # fmt: skip
    for k in range(fx.shape[0]):
        acc = bias[k]
        for m in range(scores.shape[0]):
            acc += scores[m, k]
        fx[k] = acc


decision = njit(**JIT)(_decision)


def _average_explicit(w, scale, ex_blocks, ex_off, w_avg, t):
    """Running average of the explicit weights: w_avg += (theta_{t+1} - w_avg) / t."""
    inv = 1.0 / t
    for m in ex_blocks:
        for k in range(w.shape[0]):
            for j in range(ex_off[m], ex_off[m + 1]):
                w_avg[k, j] += (scale[m] * w[k, j] - w_avg[k, j]) * inv


average_explicit = njit(**JIT)(_average_explicit)


def _learn_many(
    X, Y, t0, sched_code, sched_p, average, w_avg,
    kinds, kp, is_explicit, view_of, masks, view_full, ex_blocks, im_blocks,
    ex_off, ex_kind, ex_norm, phi_src, rff_wt, rff_b,
    loss_code, loss_p, step_codes, step_p, step_groups, radius, policy, capacity,
    w, scale, norms, sx, ssq, sv, coef, kself, sage, counters, bias, bias_lr,
    phi, scores, fx, v, xsq, dots, newnorms, losses, preds, norms_before,
):  # fmt: skip
    """``learn_round`` over the rows of X in order (the compiled loop behind ``learn_many``).

    Rounds are numbered t0 + 1, t0 + 2, ...; prequential scores go to ``preds``, losses to
    ``losses``. ``norms_before`` (n, M) receives the block norms before each round (what the
    regularizer's value at theta_t needs), or is (0, M) and left alone.
    """
    track = norms_before.shape[0] > 0
    for i in range(X.shape[0]):
        t = t0 + i + 1
        eta = schedule_eta(sched_code, sched_p, t)
        if track:
            for m in range(norms.shape[0]):
                norms_before[i, m] = norms[m]
        losses[i] = learn_round(
            X[i], Y[i], eta,
            kinds, kp, is_explicit, view_of, masks, view_full, ex_blocks, im_blocks,
            ex_off, ex_kind, ex_norm, phi_src, rff_wt, rff_b,
            loss_code, loss_p, step_codes, step_p, step_groups, radius, policy, capacity,
            w, scale, norms, sx, ssq, sv, coef, kself, sage, counters, bias, bias_lr,
            phi, scores, fx, v, xsq, dots, newnorms,
        )  # fmt: skip
        for k in range(fx.shape[0]):
            preds[i, k] = fx[k]
        if average:
            average_explicit(w, scale, ex_blocks, ex_off, w_avg, t)


learn_many = njit(**JIT)(_learn_many)


def _decision_many(
    X, kinds, kp, view_of, masks, view_full, ex_blocks, im_blocks,
    ex_off, ex_kind, ex_norm, phi_src, rff_wt, rff_b,
    w, scale, sx, ssq, sv, coef, n_support, bias, phi, scores, fx, xsq, dots, out,
):  # fmt: skip
    """``decision`` for every row of X into ``out`` (n, K)."""
    for i in range(X.shape[0]):
        decision(
            X[i], kinds, kp, view_of, masks, view_full, ex_blocks, im_blocks,
            ex_off, ex_kind, ex_norm, phi_src, rff_wt, rff_b,
            w, scale, sx, ssq, sv, coef, n_support, bias, phi, scores, fx, xsq, dots,
        )  # fmt: skip
        for k in range(fx.shape[0]):
            out[i, k] = fx[k]


decision_many = njit(**JIT)(_decision_many)


# --- sequence labeling (streammkl.structured): chain decoders and position loops
#
# Conventions, shared by every function here:
#
# - ``unary`` is a (T, K) array: ``unary[i, k]`` is the score of label ``k`` at position ``i``;
# - ``trans`` is a (K, K) array: ``trans[a, b]`` is the score of label ``a`` at ``i`` followed by
#   label ``b`` at ``i + 1`` (the bigram block of the joint kernel, paper [001] §2.3);
# - a label sequence ``y`` scores ``sum_i unary[i, y_i] + sum_i trans[y_i, y_{i+1}]``;
# - ties in an argmax go to the smallest label index (strict ``>`` comparisons), so decoding is
#   deterministic;
# - T >= 1 and K >= 1 are checked by the Python callers, not here.


def _viterbi_cost(unary, trans, gold, cost):
    """Best label sequence of ``unary + cost * [k != gold_i]`` plus transitions.

    Parameters
    ----------
    unary
        (T, K) position scores.
    trans
        (K, K) transition scores.
    gold
        (T,) int64 gold label indices; ignored when ``cost == 0``. An entry < 0 adds the cost
        to every label at that position (no label is "gold" there).
    cost
        Hamming cost per wrong position (0.0 for plain Viterbi, 1.0 for loss-augmented).

    Returns
    -------
    path, score
        (T,) int64 argmax sequence and its augmented score (cost term included).
    """
    T, K = unary.shape
    delta = np.empty((T, K))
    back = np.zeros((T, K), dtype=np.int64)
    for k in range(K):
        c = cost if (cost != 0.0 and gold[0] != k) else 0.0
        delta[0, k] = unary[0, k] + c
    for i in range(1, T):
        for b in range(K):
            best = delta[i - 1, 0] + trans[0, b]
            arg = 0
            for a in range(1, K):
                v = delta[i - 1, a] + trans[a, b]
                if v > best:
                    best = v
                    arg = a
            c = cost if (cost != 0.0 and gold[i] != b) else 0.0
            delta[i, b] = best + unary[i, b] + c
            back[i, b] = arg
    path = np.empty(T, dtype=np.int64)
    best = delta[T - 1, 0]
    arg = 0
    for k in range(1, K):
        if delta[T - 1, k] > best:
            best = delta[T - 1, k]
            arg = k
    path[T - 1] = arg
    for i in range(T - 1, 0, -1):
        path[i - 1] = back[i, path[i]]
    return path, best


viterbi_cost = njit(**JIT)(_viterbi_cost)


def _viterbi(unary, trans):
    """Plain Viterbi: the highest-scoring label sequence and its score."""
    gold = np.zeros(unary.shape[0], dtype=np.int64)
    return viterbi_cost(unary, trans, gold, 0.0)


def _viterbi_hamming(unary, trans, gold):
    """Loss-augmented Viterbi: argmax_y score(y) + Hamming(y, gold), and that augmented score."""
    return viterbi_cost(unary, trans, gold, 1.0)


viterbi = njit(**JIT)(_viterbi)
viterbi_hamming = njit(**JIT)(_viterbi_hamming)


def _logsumexp_row(v):
    m = v[0]
    for j in range(1, v.shape[0]):
        if v[j] > m:
            m = v[j]
    if m == -np.inf:
        return m
    s = 0.0
    for j in range(v.shape[0]):
        s += np.exp(v[j] - m)
    return m + np.log(s)


logsumexp_row = njit(**JIT)(_logsumexp_row)


def _forward_backward(unary, trans):
    """Log-space forward-backward for a linear-chain CRF.

    Returns
    -------
    log_z, node_marginals, edge_marginals
        The log-partition ``log sum_y exp(score(y))``; (T, K) marginals ``p(y_i = k)``; and
        (max(T - 1, 0), K, K) marginals ``p(y_i = a, y_{i+1} = b)``.
    """
    T, K = unary.shape
    alpha = np.empty((T, K))
    beta = np.empty((T, K))
    tmp = np.empty(K)
    for k in range(K):
        alpha[0, k] = unary[0, k]
    for i in range(1, T):
        for b in range(K):
            for a in range(K):
                tmp[a] = alpha[i - 1, a] + trans[a, b]
            alpha[i, b] = logsumexp_row(tmp) + unary[i, b]
    for k in range(K):
        beta[T - 1, k] = 0.0
    for i in range(T - 2, -1, -1):
        for a in range(K):
            for b in range(K):
                tmp[b] = trans[a, b] + unary[i + 1, b] + beta[i + 1, b]
            beta[i, a] = logsumexp_row(tmp)
    log_z = logsumexp_row(alpha[T - 1])
    node = np.empty((T, K))
    for i in range(T):
        for k in range(K):
            node[i, k] = np.exp(alpha[i, k] + beta[i, k] - log_z)
    n_edges = T - 1 if T > 1 else 0
    edge = np.empty((n_edges, K, K))
    for i in range(n_edges):
        for a in range(K):
            for b in range(K):
                edge[i, a, b] = np.exp(
                    alpha[i, a] + trans[a, b] + unary[i + 1, b] + beta[i + 1, b] - log_z
                )
    return log_z, node, edge


forward_backward = njit(**JIT)(_forward_backward)


# ----------------------------------------------------------------------------- joint-kernel blocks
# The unigram blocks reuse the core's block layout and state (``core.state``): a position x_i with
# label-indexed direction v_i is one support pair (x_i, v_i), exactly as one example is in the
# core, so scoring and eviction are the core's compiled functions, called once per position.


def _b1_pruned_expansion(
    m, vw, z, nz, zp, masks, view_full, h, sx, ssq, sproj, sv, coef, n_support, out,
):  # fmt: skip
    """``out[m, :] = sum_s coef[m, s] k(x_s, z) v_s`` for a B1-spline block, skipping the pairs
    that a projection bound puts outside the kernel's support (unscaled).

    ``zp`` and ``sproj[vw, s]`` are the coordinates of z and x_s in an orthonormal basis of part
    of the view, so ``||zp - sproj[vw, s]||^2 <= ||z - x_s||^2``: a pair whose projected squared
    distance exceeds ``h^2`` (plus a relative slack ``_PRUNE_MARGIN``, far above rounding) has
    ``k = 0`` exactly, also as ``kernel_value`` computes it, and costs ``len(zp)`` operations
    instead of a full inner product. The other pairs are evaluated exactly as in
    ``support_expansion``, so the result is the same bit for bit, whatever the basis. Two passes
    (bound for every pair, then the kept pairs) keep the first loop free of unpredictable branches.
    """
    K = out.shape[1]
    r = zp.shape[0]
    cap = h * h * (1.0 + _PRUNE_MARGIN)
    for k in range(K):
        out[m, k] = 0.0
    keep = np.empty(n_support, dtype=np.int64)  # pass 1: the pairs the bound cannot skip
    n_keep = 0
    for s in range(n_support):
        a0 = a1 = a2 = a3 = 0.0
        j = 0
        while j + 4 <= r:
            t0 = zp[j] - sproj[vw, s, j]
            t1 = zp[j + 1] - sproj[vw, s, j + 1]
            t2 = zp[j + 2] - sproj[vw, s, j + 2]
            t3 = zp[j + 3] - sproj[vw, s, j + 3]
            a0 += t0 * t0
            a1 += t1 * t1
            a2 += t2 * t2
            a3 += t3 * t3
            j += 4
        while j < r:
            t0 = zp[j] - sproj[vw, s, j]
            a0 += t0 * t0
            j += 1
        keep[n_keep] = s  # branch-free: the slot is overwritten unless the pair is kept
        lb = (a0 + a1) + (a2 + a3)
        n_keep += (lb <= cap + _PRUNE_MARGIN * (nz + ssq[s, vw])) & (coef[m, s] != 0.0)
    full = view_full[vw]
    for i in range(n_keep):  # pass 2: exactly support_expansion's terms
        s = keep[i]
        ns = ssq[s, vw]
        if full:
            d = dot4(z, sx[s], 0, z.shape[0])
        else:
            d = view_dot(z, sx[s], masks[vw], False)
        kv = kernel_value(K_B1, h, 0.0, False, d, nz + ns - 2.0 * d, nz, ns)
        if kv == 0.0:
            continue
        c = coef[m, s] * kv
        for k in range(K):
            out[m, k] += c * sv[s, k]


b1_pruned_expansion = njit(**JIT)(_b1_pruned_expansion)


def _sequence_scores(
    X, kinds, kp, view_of, masks, view_full, ex_blocks, im_blocks,
    ex_off, ex_kind, ex_norm, phi_src, rff_wt, rff_b,
    w, scale, sx, ssq, sv, coef, n_support, phis, scores, xsqs, dots,
    im_pruned, basis, sproj, zp,
):  # fmt: skip
    """Per-position block scores ``scores[i, m, :] = f_m(x_i)`` and feature maps ``phis[i]``.

    ``xsqs[i, v]`` receives the squared norm of ``x_i`` on view ``v`` of the implicit blocks.
    ``im_blocks`` are the implicit blocks scored by ``support_expansion``; ``im_pruned`` are B1
    blocks scored by ``b1_pruned_expansion`` with the basis ``basis[v]`` (r, d) of their view
    and the projected support inputs ``sproj[v]`` (cap, r); ``zp`` (r,) is scratch.
    """
    for i in range(X.shape[0]):
        explicit_phi(X[i], ex_blocks, ex_off, ex_kind, ex_norm, phi_src, rff_wt, rff_b, phis[i])
        block_scores(
            X[i], phis[i], w, scale, ex_blocks, ex_off, im_blocks, view_of, masks, view_full,
            kinds, kp, sx, ssq, sv, coef, n_support, xsqs[i], dots, scores[i],
        )  # fmt: skip
        for vw in range(masks.shape[0]):
            xsqs[i, vw] = view_dot(X[i], X[i], masks[vw], view_full[vw])
        for m in im_pruned:
            vw = view_of[m]
            for j in range(zp.shape[0]):
                zp[j] = dot4(basis[vw, j], X[i], 0, X.shape[1])
            b1_pruned_expansion(
                m, vw, X[i], xsqs[i, vw], zp, masks, view_full, kp[m, 0],
                sx, ssq, sproj, sv, coef, n_support, scores[i],
            )  # fmt: skip
            for k in range(scores.shape[2]):
                scores[i, m, k] *= scale[m]


sequence_scores = njit(**JIT)(_sequence_scores)


def _pair_kernel(m, vw, xi, xj, xsq_i, xsq_j, kinds, kp, masks, view_full):
    dot = view_dot(xi, xj, masks[vw], view_full[vw])
    return kernel_value(
        kinds[m], kp[m, 0], kp[m, 1], kp[m, 2] != 0.0, dot, xsq_i + xsq_j - 2.0 * dot, xsq_i, xsq_j
    )


pair_kernel = njit(**JIT)(_pair_kernel)


def _sequence_step(
    X, V, active, eta,
    kinds, kp, view_of, masks, view_full, ex_blocks, im_blocks, ex_off, policy, capacity,
    w, scale, norms, sx, ssq, sv, coef, kself, sage, counters, phis, scores, xsqs, dots,
):  # fmt: skip
    """Gradient step ``theta_m += eta * sum_i phi_m(x_i) (x) V_i`` on every unigram block.

    Explicit blocks: ``W += (eta / scale) V^T Phi`` and the exact norm from W. Implicit blocks:
    one support pair per active position, added in order; the block norm follows erratum E1
    generalised to a sum over positions, one pair at a time,
    ``||theta + eta phi(x_i) (x) V_i||^2 = ||theta||^2 + 2 eta <f(x_i), V_i> + eta^2 K_ii |V_i|^2``
    with ``f`` updated for the later positions after each pair (``f(x_j) += eta K_ji V_i``); the
    terms add up to ``2 eta sum_i <f(x_i), V_i> + eta^2 sum_ij K_ij <V_i, V_j>``. With a budget,
    a full support set first evicts a pair through the core's ``evict`` (exact norms), and the
    scores of the later positions are corrected for the removed term. ``scores`` (T, M, K) must
    hold the block scores at theta_t on entry; it is scratch afterwards.
    """
    T = X.shape[0]
    K = V.shape[1]
    for m in ex_blocks:
        a = ex_off[m]
        e = ex_off[m + 1]
        g = eta / scale[m]
        for i in range(T):
            if not active[i]:
                continue
            for k in range(K):
                gk = g * V[i, k]
                if gk != 0.0:
                    for j in range(a, e):
                        w[k, j] += gk * phis[i, j]
        norms[m] = scale[m] * math.sqrt(explicit_sqnorm(w, a, e))
    if im_blocks.shape[0] == 0:
        return
    M = norms.shape[0]
    old = np.zeros(M)
    for i in range(T):
        if not active[i]:
            continue
        vv = 0.0
        for k in range(K):
            vv += V[i, k] * V[i, k]
        n = counters[0]
        if n >= capacity:
            kept = coef[:, :n].copy()  # evict zeroes the victim's coefficients: keep them
            slot = evict(
                policy, X[i], im_blocks, view_of, masks, view_full, kinds, kp,
                sx, ssq, sv, coef, kself, sage, n, scale, norms, xsqs[i], dots, scores[i],
            )  # fmt: skip
            for m in im_blocks:
                old[m] = scale[m] * kept[m, slot]
            for j in range(i + 1, T):
                if not active[j]:
                    continue
                for m in im_blocks:
                    c = old[m]
                    if c == 0.0:
                        continue
                    vw = view_of[m]
                    kv = pair_kernel(m, vw, X[j], sx[slot], xsqs[j, vw], ssq[slot, vw],
                                     kinds, kp, masks, view_full)  # fmt: skip
                    for k in range(K):
                        scores[j, m, k] -= c * kv * sv[slot, k]
        else:
            slot = n
            counters[0] = n + 1
        for j in range(X.shape[1]):
            sx[slot, j] = X[i, j]
        for vw in range(masks.shape[0]):
            ssq[slot, vw] = xsqs[i, vw]
        for k in range(K):
            sv[slot, k] = V[i, k]
        sage[slot] = counters[1]
        counters[1] += 1
        for m in im_blocks:  # corrected block-norm update (erratum E1), position i
            vw = view_of[m]
            kxx = kernel_value(
                kinds[m], kp[m, 0], kp[m, 1], kp[m, 2] != 0.0,
                xsqs[i, vw], 0.0, xsqs[i, vw], xsqs[i, vw],
            )  # fmt: skip
            fv = 0.0
            for k in range(K):
                fv += scores[i, m, k] * V[i, k]
            n2 = norms[m] * norms[m] + 2.0 * eta * fv + eta * eta * kxx * vv
            norms[m] = math.sqrt(n2) if n2 > 0.0 else 0.0
            kself[slot, m] = kxx
            coef[m, slot] = eta / scale[m]
        for j in range(i + 1, T):  # f_m(x_j) at the updated theta
            if not active[j]:
                continue
            for m in im_blocks:
                vw = view_of[m]
                kv = pair_kernel(m, vw, X[j], X[i], xsqs[j, vw], xsqs[i, vw],
                                 kinds, kp, masks, view_full)  # fmt: skip
                if kv == 0.0:
                    continue
                for k in range(K):
                    scores[j, m, k] += eta * kv * V[i, k]


sequence_step = njit(**JIT)(_sequence_step)
