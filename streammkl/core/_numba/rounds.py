"""One round of Alg. 1 / 3 (score, subgradient, gradient step, J prox steps, projection), its
compiled loop over many examples, and prediction."""

from __future__ import annotations

import math

from numba import njit

from streammkl.core._jit import JIT
from streammkl.core._numba.budget import make_room
from streammkl.core._numba.codes import _SCALE_FLOOR, P_L1
from streammkl.core._numba.features import axpy_sqnorm, dot4, explicit_phi
from streammkl.core._numba.kernels import kernel_value
from streammkl.core._numba.losses import loss_grad
from streammkl.core._numba.prox import prox_norm_step, schedule_eta
from streammkl.core._numba.scores import block_scores, explicit_sqnorm, zero_or_fold_block


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
    w, scale, norms, sx, ssq, sv, coef, kself, sage, counters, gram, bias, bias_lr,
    phi, scores, fx, v, xsq, dots, newnorms,
):  # fmt: skip
    """One round: scores -> loss subgradient -> gradient step -> J prox steps -> projection.

    ``fx`` receives the prequential scores (before the update); returns the loss at theta_t.
    ``counters = [n_support, next_age]``. The caller guarantees room for one more support pair
    when ``capacity`` is not yet reached (``sx.shape[0] > counters[0]``); at the capacity the
    budget step of ``policy`` frees one (``make_room``; ``gram`` holds the projection policy's
    Gram matrices and inverses, else it has no rows).
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
            slot = make_room(
                policy, x, xsq, v, im_blocks, view_of, masks, view_full, kinds, kp,
                sx, ssq, sv, coef, kself, sage, counters, capacity, scale, norms, gram, scores,
            )  # fmt: skip
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
    w, scale, norms, sx, ssq, sv, coef, kself, sage, counters, gram, bias, bias_lr,
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
            w, scale, norms, sx, ssq, sv, coef, kself, sage, counters, gram, bias, bias_lr,
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
