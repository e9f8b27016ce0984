"""One round of Alg. 1 / 3 (score, subgradient, gradient step, J prox steps, projection), its
compiled loop over many examples, and prediction."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from streammkl.core._jit import JIT, JIT_INLINE, JIT_NORC
from streammkl.core._numba.averages import average_scores, leader, track_averages, update_averages
from streammkl.core._numba.budget import make_room
from streammkl.core._numba.codes import (
    _SCALE_FLOOR,
    L_HINGE,
    L_LOGISTIC,
    L_MC_HINGE,
    L_SOFTMAX,
    P_BALL,
    P_L1,
    S_ADAGRAD,
    S_FTRL,
)  # fmt: skip
from streammkl.core._numba.features import (
    axpby_sqnorm_row,
    axpy_sqnorm,
    dot4,
    explicit_phi,
    explicit_phi_of,
    negate_row,
)
from streammkl.core._numba.kernels import kernel_value
from streammkl.core._numba.losses import loss_grad
from streammkl.core._numba.pack import JIT_BORROWED, borrowed_view, explicit_view, field
from streammkl.core._numba.prox import (
    prox_blockwise_steps,
    prox_norm_step,
    prox_norm_step_into,
    schedule_eta,
)
from streammkl.core._numba.scores import (
    explicit_scores,
    explicit_sqnorm,
    implicit_scores,
    zero_or_fold_block,
)


def _apply_prox_steps(
    etas, step_codes, step_p, step_groups, radius, is_explicit, ex_blocks, ex_off,
    w, scale, norms, coef, n_support, newnorms,
):  # fmt: skip
    """J prox steps in order, then the optional projection onto the ball of radius ``radius``,
    in the metric of the per-block steps ``etas[m]`` (one value for every block: the paper's
    Euclidean steps; per-block values: AdaGrad's composite mirror descent). Entries of
    ``etas`` past the M blocks (the bias step) are ignored. (``apply_prox_steps_into`` with
    scratch of its own.)"""
    apply_prox_steps_into(
        etas, step_codes, step_p, step_groups, radius, is_explicit, ex_blocks, ex_off,
        w, scale, norms, coef, n_support, newnorms, np.empty(norms.shape[0]),
    )  # fmt: skip


def _apply_prox_steps_into(
    etas, step_codes, step_p, step_groups, radius, is_explicit, ex_blocks, ex_off,
    w, scale, norms, coef, n_support, newnorms, work,
):  # fmt: skip
    """``apply_prox_steps`` with the scratch ``work`` (M): a round's prox steps allocate
    nothing when they act on each block's norm alone or are the squared group lasso at one
    step (``prox_norm_step_into``)."""
    M = norms.shape[0]
    n_steps = step_codes.shape[0]
    steps = etas[:M]
    for j in range(n_steps + 1):
        if j < n_steps:
            code = step_codes[j]
            if code == P_L1:  # coordinate soft-threshold, explicit blocks only
                for m in ex_blocks:
                    if not step_groups[j, m]:
                        continue
                    a = ex_off[m]
                    e = ex_off[m + 1]
                    t = steps[m] * step_p[j, 0] / scale[m]
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
            prox_norm_step_into(
                code, step_p[j, 0], step_p[j, 1], step_groups[j], norms, steps, newnorms, work
            )  # fmt: skip
        else:
            if radius <= 0.0:
                break
            prox_norm_step(P_BALL, radius, 0.0, np.ones(M, np.bool_), norms, steps, newnorms)
        for m in range(M):
            rescale_block(m, newnorms[m], is_explicit[m], w, ex_off, coef, n_support, scale, norms)


def _rescale_block(m, new, explicit, w, ex_off, coef, n_support, scale, norms):
    """Block ``m``'s norm becomes ``new`` (a prox step's output) through its lazy scale: zeroed
    at 0 (0/0 := 0 of Prop. 1), its underflowing scale folded into storage."""
    old = norms[m]
    if new == old:
        return
    if new <= 0.0 or old <= 0.0:
        zero_or_fold_block(m, explicit, w, ex_off, coef, n_support, scale, True)
        norms[m] = 0.0
    else:
        scale[m] *= new / old
        norms[m] = new
        if scale[m] < _SCALE_FLOOR:
            zero_or_fold_block(m, explicit, w, ex_off, coef, n_support, scale, False)


rescale_block = njit(**JIT_INLINE)(_rescale_block)
apply_prox_steps_into = njit(**JIT_INLINE)(_apply_prox_steps_into)
apply_prox_steps = njit(**JIT_INLINE)(_apply_prox_steps)


def _block_steps(sched, sched_p, t, acc, fsq, vv, etas):
    """Per-block steps of this round into ``etas`` (M blocks, then the bias).

    Global schedules (Constant, InvSqrt, InvT) give every block and the bias ``eta_t``. AdaGrad
    and FTRL first add this round's squared gradient norms ``||v||^2 ||phi_m(x)||^2`` (``fsq[m]
    = ||phi_m(x)||^2``; ``vv = ||v||^2`` for the bias) to the accumulators ``acc``, after
    multiplying them by ``forget`` (1: AdaGrad's sums), and give block m
    ``eta0 / sqrt(delta + acc[m])`` (``sched_p = (eta0, delta, forget)``).
    """
    M = fsq.shape[0]
    if sched == S_ADAGRAD or sched == S_FTRL:
        f = sched_p[2]
        for m in range(M):
            acc[m] = f * acc[m] + vv * fsq[m]
            etas[m] = sched_p[0] / math.sqrt(sched_p[1] + acc[m])
        acc[M] = f * acc[M] + vv
        etas[M] = sched_p[0] / math.sqrt(sched_p[1] + acc[M])
    else:
        eta = schedule_eta(sched, sched_p[0], t)
        for m in range(M + 1):
            etas[m] = eta


block_steps = njit(**JIT_INLINE)(_block_steps)


def _ftrl_explicit(
    v, phi, ex_blocks, ex_off, etas, prev, t, step_codes, step_p, step_groups, radius,
    w, scale, norms, zn, newnorms, c, steps, all_blocks, mirror,
):  # fmt: skip
    """FTRL-proximal on explicit blocks with per-block adaptive steps (McMahan 2011).

    Block m stores ``u_m = -z_m`` in ``w`` (``z_m``: the gradients so far, minus the proximal
    centering terms ``sigma_s theta_s`` with ``sigma_s = 1/eta_s - 1/eta_(s-1)``) and its norm in
    ``zn[m]``; ``theta_(t+1) = argmin <z, theta> + t Omega(theta) + sum_m ||theta_m||^2 /
    (2 eta_m)`` is ``theta_m = eta_m u_m b_m / c_m`` with ``c_m = eta_m ||u_m||`` and ``b`` the
    prox of ``Omega`` on ``c`` in the metric of the steps ``t eta_m`` (the same closed forms as
    the mirror-descent round), so the lazy scale is ``eta_m b_m / c_m`` (0 for a dropped block,
    whose ``u_m`` is kept). ``prev[m]`` holds the previous step (0 before the first round).
    ``c``, ``steps`` (M,) are scratch; ``all_blocks`` (M,) is all True (the projection's group).
    With ``mirror`` (two rows, ``w[1] = -w[0]`` and ``v[1] = -v[0]``) the first row is updated
    and the second set to its negation: the numbers the update gives it.
    """
    ftrl_store(v, phi, ex_blocks, ex_off, etas, prev, t, w, scale, norms, zn, c, steps, mirror,
               True)  # fmt: skip
    M = norms.shape[0]
    n_steps = step_codes.shape[0]
    for j in range(n_steps):
        code, p0, p1 = step_codes[j], step_p[j, 0], step_p[j, 1]
        prox_norm_step(code, p0, p1, step_groups[j], c, steps, newnorms)
        for m in range(M):
            c[m] = newnorms[m]
    if radius > 0.0:
        prox_norm_step(P_BALL, radius, 0.0, all_blocks, c, etas[:M], newnorms)
        for m in range(M):
            c[m] = newnorms[m]
    ftrl_scales(ex_blocks, norms, scale, zn, c)


def _ftrl_store(v, phi, ex_blocks, ex_off, etas, prev, t, w, scale, norms, zn, c, steps, mirror,
                second):  # fmt: skip
    """FTRL's gradient step on the stored blocks (``ftrl_explicit``): ``u_m <- (1 + sigma_m
    scale_m) u_m + v (x) phi_m``, their norms into ``zn``, the norms to prox into ``c`` and the
    prox metric ``t eta_m`` into ``steps``. With ``mirror`` the second row is written (the
    first's negation) only when ``second`` (``learn_many_explicit`` writes it once a run)."""
    M = norms.shape[0]
    K = w.shape[0]
    for m in range(M):
        c[m] = 0.0
        steps[m] = t * etas[m]
    for m in ex_blocks:
        a = ex_off[m]
        e = ex_off[m + 1]
        sigma = 1.0 / etas[m] - 1.0 / prev[m] if prev[m] > 0.0 else 0.0
        keep = 1.0 + sigma * scale[m]  # z <- z - sigma theta, i.e. u <- (1 + sigma scale) u
        sq = 0.0
        if mirror:
            s0 = axpby_sqnorm_row(w, 0, phi, keep, v[0], a, e)
            sq += s0
            sq += s0  # the second row's sum: the same squares
            if second:
                negate_row(w, 0, 1, a, e)
        else:
            for k in range(K):
                sq += axpby_sqnorm_row(w, k, phi, keep, v[k], a, e)
        zn[m] = math.sqrt(sq)
        c[m] = etas[m] * zn[m]
        prev[m] = etas[m]


ftrl_store = njit(**JIT_INLINE)(_ftrl_store)


def _ftrl_scales(ex_blocks, norms, scale, zn, c):
    """FTRL's new block norms ``c`` (after the prox) as the blocks' norms and lazy scales."""
    for m in ex_blocks:
        norms[m] = c[m]
        scale[m] = c[m] / zn[m] if zn[m] > 0.0 and c[m] > 0.0 else 0.0


ftrl_scales = njit(**JIT_INLINE)(_ftrl_scales)


ftrl_explicit = njit(**JIT)(_ftrl_explicit)


def _support_step(
    x, xsq, v, vv, etas, fsq, policy, im_blocks, view_of, masks, view_full, kinds, kp,
    sx, ssq, sv, coef, kself, sage, counters, capacity, scale, norms, gram, scores,
):  # fmt: skip
    """The kernelized blocks' gradient step ``f_m <- f_m + eta_m v k_m(x, .)``: (x, v) joins
    the support set (``make_room`` frees a slot at the budget), block m's coefficient is
    ``eta_m / scale_m`` and its norm follows exactly, ``||f_m + eta_m v k_m(x, .)||^2 =
    ||f_m||^2 + 2 eta_m <f_m(x), v> + eta_m^2 k_m(x, x) ||v||^2`` (the corrected cross term,
    erratum E1; ``scores[m]`` holds ``f_m(x)`` and ``fsq[m]`` ``k_m(x, x)``)."""
    K = v.shape[0]
    slot = make_room(
        policy, x, xsq, v, im_blocks, view_of, masks, view_full, kinds, kp,
        sx, ssq, sv, coef, kself, sage, counters, capacity, scale, norms, gram, scores,
    )  # fmt: skip
    for j in range(x.shape[0]):
        sx[slot, j] = x[j]
    for vw in range(masks.shape[0]):
        ssq[slot, vw] = xsq[vw]
    for k in range(K):
        sv[slot, k] = v[k]
    sage[slot] = counters[1]
    counters[1] += 1
    for m in im_blocks:  # corrected block-norm update (erratum E1)
        kxx = fsq[m]
        eta = etas[m]
        fv = 0.0
        for k in range(K):
            fv += scores[m, k] * v[k]
        n2 = norms[m] * norms[m] + 2.0 * eta * fv + eta * eta * kxx * vv
        norms[m] = math.sqrt(n2) if n2 > 0.0 else 0.0
        kself[slot, m] = kxx
        coef[m, slot] = eta / scale[m]


support_step = njit(**JIT_INLINE)(_support_step)


def _ftrl_mixed(
    x, xsq, v, vv, phi, t, etas, prev, fsq, ex_blocks, ex_off, step_codes, step_p, step_groups,
    w, scale, norms, zn, newnorms, c, steps, policy, im_blocks, view_of, masks, view_full,
    kinds, kp, sx, ssq, sv, coef, kself, sage, counters, capacity, gram, scores,
):  # fmt: skip
    """One round of per-block schedules, under ``FTRL`` with kernelized blocks in the bank:
    every explicit block takes FTRL-proximal (``ftrl_explicit``: its lazy dual ``u_m``, the
    prox of ``t Omega`` in the metric ``t eta_m``), every kernelized block AdaGrad's composite
    mirror descent (``support_step``, then the prox of ``Omega`` in the metric ``eta_m``), with
    the same per-block rates ``eta_m = eta0 / sqrt(delta + sum_s ||g_m,s||^2)``.

    Exact because the regularizer is block-separable, ``Omega(theta) = sum_m omega(||theta_m||)``
    (the steps of ``prox_blockwise``: L2, the group lasso's soft-threshold, l_q; refused
    otherwise at construction, with the projection): the loss gradient ``v (x) phi_m(x)`` is
    taken once, at theta_t, before any block moves; then FTRL's objective ``<z, theta> + t
    Omega(theta) + sum_m ||theta_m||^2 / (2 eta_m)`` and mirror descent's ``<g, theta> +
    Omega(theta) + sum_m ||theta_m - theta_m,t||^2 / (2 eta_m)`` are each a sum of one term per
    block, so minimising over the explicit blocks with the one and over the kernelized blocks
    with the other is minimising every block's own term: the J prox steps run once on the
    vector of all blocks' norms, ``c_m = eta_m ||u_m||`` at the steps ``t eta_m`` for the
    explicit blocks and ``||f_m + eta_m v k_m(x, .)||`` at the steps ``eta_m`` for the
    kernelized ones. A penalty that couples blocks (the squared group lasso's or the elastic
    net's ``(sum_m ||theta_m||)^2``, groups of blocks, a ball) would weigh one side's norms
    by ``t`` and the other's by 1 in one prox: no single problem, hence refused."""
    ftrl_store(v, phi, ex_blocks, ex_off, etas, prev, t, w, scale, norms, zn, c, steps, False,
               True)  # fmt: skip
    if vv > 0.0:
        support_step(
            x, xsq, v, vv, etas, fsq, policy, im_blocks, view_of, masks, view_full, kinds, kp,
            sx, ssq, sv, coef, kself, sage, counters, capacity, scale, norms, gram, scores,
        )  # fmt: skip
    for m in im_blocks:
        c[m] = norms[m]
        steps[m] = etas[m]
    prox_blockwise_steps(step_codes, step_p, step_groups, c, steps, newnorms)
    ftrl_scales(ex_blocks, norms, scale, zn, c)
    for m in im_blocks:
        rescale_block(m, c[m], False, w, ex_off, coef, counters[0], scale, norms)


ftrl_mixed = njit(**JIT)(_ftrl_mixed)


def _learn_round(p, x, y, t):
    """One round: scores -> loss subgradient -> gradient step -> J prox steps -> projection, on
    the pack ``p`` (``streammkl.core._numba.pack``).

    ``t`` is the round number since the last restart (1 for the first); the schedule is
    ``p.sched`` / ``p.sched_p`` (``_block_steps``), ``p.acc`` its per-block accumulators (M + 1)
    and ``p.etas`` (M + 1) receives this round's steps; ``p.prev`` and ``p.zn`` (M) are FTRL's
    previous steps and the norms of its stored blocks (unused by the other schedules). ``p.fx``
    receives the prequential scores (before the update); returns the loss at theta_t.
    ``p.counters = [n_support, next_age]``. The caller guarantees room for one more support
    pair when ``p.capacity`` is not yet reached (``p.sx.shape[0] > p.counters[0]``); at the
    capacity the budget step of ``p.policy`` frees one (``make_room``; ``p.gram`` holds the
    projection policy's Gram matrices and inverses, else it has no rows). With averaged
    iterates (``p.avg_w`` non-empty, see ``averages``) ``p.pred`` receives the prediction (the
    leader's scores), else ``p.fx``'s; the gradient is always the last iterate's. The default
    bank's rounds (``p.fast``) have their own compiled functions (``explicit_round`` and the
    ``*_explicit`` loops): the same numbers, faster, and a process compiles only the route its
    bank takes.
    """
    loss = round_body(p, x, y, t)
    if p.avg_w.shape[0] > 0:
        update_averages(
            p.w, p.scale, p.bias, p.ex_blocks, p.ex_off, p.avg_w, p.avg_bias, p.horizons,
            p.avg_count, p.every, p.mirror, True,
        )  # fmt: skip
    return loss


def _explicit_step(v, phi, ex_blocks, ex_off, etas, w, scale, norms):
    """The gradient step of the explicit blocks: ``W_m += (eta_m / scale_m) v (x) phi_m``
    (``w`` holds ``W / scale``), each block's norm exact, in one pass."""
    for m in ex_blocks:
        a = ex_off[m]
        e = ex_off[m + 1]
        g = etas[m] / scale[m]
        sq = 0.0
        for k in range(v.shape[0]):
            gk = g * v[k]
            if gk != 0.0:
                sq += axpy_sqnorm(w[k], phi, gk, a, e)
            else:
                sq += dot4(w[k], w[k], a, e)
        norms[m] = scale[m] * math.sqrt(sq)


explicit_step = njit(**JIT_INLINE)(_explicit_step)


def _round_body(p, x, y, t):
    """``learn_round`` before the averages' update (see there)."""
    sched, sched_p, acc, etas, prev, zn = p.sched, p.sched_p, p.acc, p.etas, p.prev, p.zn
    kinds, kp, is_explicit, view_of, masks = p.kinds, p.kp, p.is_explicit, p.view_of, p.masks
    view_full, ex_blocks, im_blocks, ex_off = p.view_full, p.ex_blocks, p.im_blocks, p.ex_off
    ex_kind, ex_norm, phi_src, rff_wt, rff_b = p.ex_kind, p.ex_norm, p.phi_src, p.rff_wt, p.rff_b
    loss_code, loss_p, step_codes, step_p = p.loss_code, p.loss_p, p.step_codes, p.step_p
    step_groups, radius, policy, capacity = p.step_groups, p.radius, p.policy, p.capacity
    w, scale, norms, sx, ssq, sv, coef = p.w, p.scale, p.norms, p.sx, p.ssq, p.sv, p.coef
    kself, sage, counters, bias, bias_lr = p.kself, p.sage, p.counters, p.bias, p.bias_lr
    gram = p.gram
    phi, scores, fx, v, xsq = p.phi, p.scores, p.fx, p.v, p.xsq
    newnorms, fsq = p.newnorms, p.fsq
    avg_w, avg_bias, avg_loss, avg_count = p.avg_w, p.avg_bias, p.avg_loss, p.avg_count
    rho, every, pred, scratch, ascores = p.rho, p.every, p.pred, p.scratch, p.ascores
    row_dots, mirror = p.row_dots, p.mirror
    M = norms.shape[0]
    K = fx.shape[0]
    explicit_phi(x, ex_blocks, ex_off, ex_kind, ex_norm, phi_src, rff_wt, rff_b, phi)
    p.phi_valid[0] = 0  # phi no longer holds the maps of the input explicit_phi_of remembered
    adaptive = sched == S_ADAGRAD or sched == S_FTRL  # (only they read ||phi_m(x)||^2)
    explicit_scores(phi, w, scale, ex_blocks, ex_off, scores, fsq if adaptive else fsq[:0], mirror)
    implicit_scores(
        x, im_blocks, view_of, masks, view_full, kinds, kp, sx, ssq, sv, coef, counters[0],
        xsq, scale, scores,
    )  # fmt: skip
    for k in range(K):
        total = bias[k]
        for m in range(M):
            total += scores[m, k]
        fx[k] = total
    loss = loss_grad(loss_code, loss_p, fx, y, v)
    if mirror:  # the two rows stay each other's negation (v[1] = -v[0] up to rounding)
        v[1] = -v[0]
    if avg_w.shape[0] > 0:
        kept = with_kernelized_scores(scores, im_blocks, avg_bias)
        track_averages(
            loss_code, loss_p, fx, loss, y, phi, ex_blocks, ex_off, avg_w, avg_bias, avg_loss,
            rho, avg_count, every, scratch, ascores, pred, row_dots, mirror,
        )  # fmt: skip
        if im_blocks.shape[0] > 0:
            avg_bias[:, :] = kept  # the biases' own values, bit for bit
    else:
        for k in range(K):
            pred[k] = fx[k]
    vv = 0.0
    for k in range(K):
        vv += v[k] * v[k]
    for m in im_blocks:  # k_m(x, x) = ||phi_m(x)||^2
        vw = view_of[m]
        fsq[m] = kernel_value(
            kinds[m], kp[m, 0], kp[m, 1], kp[m, 2] != 0.0, xsq[vw], 0.0, xsq[vw], xsq[vw],
        )  # fmt: skip
    block_steps(sched, sched_p, t, acc, fsq, vv, etas)
    if sched == S_FTRL and im_blocks.shape[0] > 0:  # per-block schedules (``ftrl_mixed``)
        ftrl_mixed(
            x, xsq, v, vv, phi, t, etas, prev, fsq, ex_blocks, ex_off, step_codes, step_p,
            step_groups, w, scale, norms, zn, newnorms, p.blk_c, p.blk_steps, policy, im_blocks,
            view_of, masks, view_full, kinds, kp, sx, ssq, sv, coef, kself, sage, counters,
            capacity, gram, scores,
        )  # fmt: skip
        for k in range(K):
            bias[k] += bias_lr * etas[M] * v[k]
        return loss
    if sched == S_FTRL:
        ftrl_explicit(
            v, phi, ex_blocks, ex_off, etas, prev, t, step_codes, step_p, step_groups, radius,
            w, scale, norms, zn, newnorms, p.blk_c, p.blk_steps, p.all_blocks, mirror,
        )  # fmt: skip
        for k in range(K):
            bias[k] += bias_lr * etas[M] * v[k]
        return loss
    if vv > 0.0:
        explicit_step(v, phi, ex_blocks, ex_off, etas, w, scale, norms)
        if im_blocks.shape[0] > 0:
            support_step(
                x, xsq, v, vv, etas, fsq, policy, im_blocks, view_of, masks, view_full, kinds,
                kp, sx, ssq, sv, coef, kself, sage, counters, capacity, scale, norms, gram,
                scores,
            )  # fmt: skip
        for k in range(K):
            bias[k] += bias_lr * etas[M] * v[k]
    apply_prox_steps_into(
        etas, step_codes, step_p, step_groups, radius, is_explicit, ex_blocks, ex_off,
        w, scale, norms, coef, counters[0], newnorms, p.prox_work,
    )  # fmt: skip
    return loss


round_body = njit(**JIT)(_round_body)


def _with_kernelized_scores(scores, im_blocks, avg_bias):
    """Per-block schedules with averaged iterates: the averages are of the explicit blocks (and
    the bias); every average predicts with the kernelized blocks' current scores (their support
    sets are not averaged). Adds those scores ``scores[m]`` of the kernelized blocks to every
    average's bias, for ``track_averages`` to score the averages with, and returns the biases
    as they were, for the caller to put back (a copy, no allocation without kernelized
    blocks)."""
    if im_blocks.shape[0] == 0:
        return avg_bias[:0]
    kept = avg_bias.copy()
    for e in range(avg_bias.shape[0]):
        for k in range(avg_bias.shape[1]):
            extra = 0.0
            for m in im_blocks:
                extra += scores[m, k]
            avg_bias[e, k] += extra
    return kept


with_kernelized_scores = njit(**JIT_INLINE)(_with_kernelized_scores)


def _explicit_front(f, x, y, fsq):
    """The part of a round of explicit blocks before its steps, on the pack's fields ``f =
    explicit_view(p)``: ``x``'s maps (remembered), the block scores (their ``||phi_m||^2``
    into ``fsq``, unless it is empty), ``f.fx``, the loss and its gradient ``f.v``, the
    averaged iterates' tracking and the prediction ``f.pred``. Returns ``(loss, ||v||^2)``."""
    phi, ex_blocks, ex_off, fx, v, mirror = f.phi, f.ex_blocks, f.ex_off, f.fx, f.v, f.mirror
    K = fx.shape[0]
    explicit_phi_of(x, ex_blocks, ex_off, f.ex_kind, f.ex_norm, f.phi_src, f.rff_wt, f.rff_b,
                    phi, f.phi_x, f.phi_valid)  # fmt: skip
    explicit_scores(phi, f.w, f.scale, ex_blocks, ex_off, f.scores, fsq, mirror)
    scores, bias = f.scores, f.bias
    M = f.norms.shape[0]
    for k in range(K):
        total = bias[k]
        for m in range(M):
            total += scores[m, k]
        fx[k] = total
    loss = loss_grad(f.loss_code, f.loss_p, fx, y, v)
    if mirror:  # the two rows stay each other's negation (v[1] = -v[0] up to rounding)
        v[1] = -v[0]
    if f.avg_w.shape[0] > 0:
        track_averages(
            f.loss_code, f.loss_p, fx, loss, y, phi, ex_blocks, ex_off, f.avg_w, f.avg_bias,
            f.avg_loss, f.rho, f.avg_count, f.every, f.scratch, f.ascores, f.pred, f.row_dots,
            mirror,
        )  # fmt: skip
    else:
        for k in range(K):
            f.pred[k] = fx[k]
    vv = 0.0
    for k in range(K):
        vv += v[k] * v[k]
    return loss, vv


explicit_front = njit(**JIT_INLINE)(_explicit_front)


def _explicit_round_rows(f, x, y, t, second):
    """``explicit_round``; with two mirrored score rows, their second rows (of the weights
    and of every average) written only when ``second``: the round never reads them (its
    scores, updates and averages compute the first rows), so a run of rounds may leave them
    to its end (``mirror_rows``, ``learn_many_explicit``): the same numbers."""
    phi, w, scale, ex_blocks, ex_off = f.phi, f.w, f.scale, f.ex_blocks, f.ex_off
    v, fsq, etas, bias = f.v, f.fsq, f.etas, f.bias
    avg_w, mirror = f.avg_w, f.mirror
    M = f.norms.shape[0]
    K = f.fx.shape[0]
    loss, vv = explicit_front(f, x, y, fsq)  # ||phi_m||^2 too
    block_steps(f.sched, f.sched_p, t, f.acc, fsq, vv, etas)
    c, steps, newnorms, norms, zn = f.blk_c, f.blk_steps, f.newnorms, f.norms, f.zn
    ftrl_store(v, phi, ex_blocks, ex_off, etas, f.prev, t, w, scale, norms, zn, c, steps, mirror,
               second)  # fmt: skip
    step_codes, step_p, step_groups = f.step_codes, f.step_p, f.step_groups
    prox_blockwise_steps(step_codes, step_p, step_groups, c, steps, newnorms)
    ftrl_scales(ex_blocks, norms, scale, zn, c)
    for k in range(K):
        bias[k] += f.bias_lr * etas[M] * v[k]
    if avg_w.shape[0] > 0:
        update_averages(
            w, scale, bias, ex_blocks, ex_off, avg_w, f.avg_bias, f.horizons, f.avg_count,
            f.every, mirror, second,
        )  # fmt: skip
    return loss


explicit_round_rows = njit(**JIT_INLINE)(_explicit_round_rows)


def _explicit_round(f, x, y, t):
    """``learn_round`` for a bank of explicit blocks under FTRL whose prox steps all act on
    each block's norm alone, without a projection (``p.fast``: the default bank), on the
    pack's fields ``f = explicit_view(p)``: the same operations in the same order as
    ``round_body`` then ``update_averages`` take on such a bank, so the same numbers, compiled
    without reference counting (``JIT_NORC``: its arrays and views cost no atomic operations;
    it allocates nothing)."""
    return explicit_round_rows(f, x, y, t, True)


explicit_round = njit(**JIT_NORC)(_explicit_round)


def _explicit_round_first(f, x, y, t):
    """``explicit_round`` without the second rows of two mirrored score rows
    (``explicit_round_rows``): for a run of rounds that writes them at its end."""
    return explicit_round_rows(f, x, y, t, False)


explicit_round_first = njit(**JIT_NORC)(_explicit_round_first)


def _mirror_rows(w, avg_w, ex_blocks, ex_off, averages):
    """The second rows of the weights (and of every average, when ``averages``: they took an
    iterate in the run) as the first rows' negations, on the explicit blocks' columns: what
    ``explicit_round`` writes each round (each round the averages take an iterate), written
    once after a run of ``explicit_round_first`` (exact: a negation; the first rows never
    read the second)."""
    for m in ex_blocks:
        a = ex_off[m]
        e = ex_off[m + 1]
        negate_row(w, 0, 1, a, e)
        if averages:
            for r in range(avg_w.shape[0]):
                negate_row(avg_w[r], 0, 1, a, e)


mirror_rows = njit(**JIT_INLINE)(_mirror_rows)


def _explicit_md_round(f, x, y, t):
    """``round_body`` up to its prox steps for a bank of explicit blocks under a schedule other
    than FTRL (Constant, InvSqrt, InvT, AdaGrad: the default regressor's), on the pack's fields
    ``f = explicit_view(p)``: the same operations in the same order (featurise, score, loss,
    the averages' tracking, the steps, the gradient step and the bias), so the same numbers,
    without reference counting (``JIT_NORC``). The prox steps (which may allocate) and the
    averages' update are ``learn_predict_md``'s. (``explicit_phi_of``: the maps of ``x`` stay
    remembered, where ``round_body`` forgets them; the same numbers either way.)"""
    phi, w, scale, ex_blocks, ex_off = f.phi, f.w, f.scale, f.ex_blocks, f.ex_off
    v, fsq, etas, bias, sched = f.v, f.fsq, f.etas, f.bias, f.sched
    M = f.norms.shape[0]
    K = f.fx.shape[0]
    adaptive = sched == S_ADAGRAD or sched == S_FTRL  # (only they read ||phi_m(x)||^2)
    loss, vv = explicit_front(f, x, y, fsq if adaptive else fsq[:0])
    block_steps(sched, f.sched_p, t, f.acc, fsq, vv, etas)
    norms = f.norms
    if vv > 0.0:
        explicit_step(v, phi, ex_blocks, ex_off, etas, w, scale, norms)
        for k in range(K):
            bias[k] += f.bias_lr * etas[M] * v[k]
    return loss


explicit_md_round = njit(**JIT_NORC)(_explicit_md_round)
learn_round = njit(**JIT)(_learn_round)


def _decision(p, x, w, scale, leader_scores):
    """Scores ``p.fx`` = sum of block scores + bias at ``x``, without learning, with the explicit
    weights ``w`` and lazy scales ``scale`` (the pack's own, or an average of Prop. 4's with unit
    scales); with ``leader_scores`` and averaged iterates, the scores of the predictor
    ``learn_round`` would use now (the leader). A bank of explicit blocks has
    ``decision_explicit`` (the same numbers, without reference counting)."""
    explicit_phi_of(x, p.ex_blocks, p.ex_off, p.ex_kind, p.ex_norm, p.phi_src, p.rff_wt,
                    p.rff_b, p.phi, p.phi_x, p.phi_valid)  # fmt: skip
    explicit_scores(p.phi, w, scale, p.ex_blocks, p.ex_off, p.scores, p.phi[:0], p.mirror)
    implicit_scores(
        x, p.im_blocks, p.view_of, p.masks, p.view_full, p.kinds, p.kp, p.sx, p.ssq, p.sv,
        p.coef, p.counters[0], p.xsq, scale, p.scores,
    )  # fmt: skip
    kept = with_kernelized_scores(p.scores, p.im_blocks, p.avg_bias)  # as the round scores
    decision_total(p.fx, p.scores, p.bias, p.phi, p.ex_blocks, p.ex_off, p.avg_w, p.avg_bias,
                   p.avg_loss, p.mirror, leader_scores)  # fmt: skip
    if p.im_blocks.shape[0] > 0:
        p.avg_bias[:, :] = kept


def _decision_total(fx, scores, bias, phi, ex_blocks, ex_off, avg_w, avg_bias, avg_loss,
                    mirror, leader_scores):  # fmt: skip
    """``fx`` from the block scores and the bias; the leader's scores instead when asked."""
    for k in range(fx.shape[0]):
        acc = bias[k]
        for m in range(scores.shape[0]):
            acc += scores[m, k]
        fx[k] = acc
    if leader_scores and avg_w.shape[0] > 0:
        best = leader(avg_loss)
        if best > 0:
            average_scores(phi, ex_blocks, ex_off, avg_w, avg_bias, best - 1, fx, mirror)


decision_total = njit(**JIT_INLINE)(_decision_total)


def _explicit_decision(f, x, w, scale, leader_scores):
    """``decision`` for a bank of explicit blocks only, on the pack's fields ``f =
    explicit_view(p)``, without reference counting (the running average of Prop. 4 keeps the
    mirrored rows' negation too)."""
    explicit_phi_of(x, f.ex_blocks, f.ex_off, f.ex_kind, f.ex_norm, f.phi_src, f.rff_wt,
                    f.rff_b, f.phi, f.phi_x, f.phi_valid)  # fmt: skip
    explicit_scores(f.phi, w, scale, f.ex_blocks, f.ex_off, f.scores, f.phi[:0], f.mirror)
    decision_total(f.fx, f.scores, f.bias, f.phi, f.ex_blocks, f.ex_off, f.avg_w, f.avg_bias,
                   f.avg_loss, f.mirror, leader_scores)  # fmt: skip


explicit_decision = njit(**JIT_NORC)(_explicit_decision)


decision = njit(**JIT)(_decision)


#: What ``learn_predict`` returns instead of a loss (losses are >= 0) when it refuses an
#: example: an input that is not finite or beyond ``+-MAX_ABS_INPUT``, a target the loss does
#: not take, a class index the model does not have yet (the caller widens the model and calls
#: again).
BAD_X, BAD_Y, NEW_CLASS = -1.0, -2.0, -3.0

#: The largest magnitude of an input value (and of a regression target) a round takes. A
#: finite value of 1e300 overflowed the round's squares (a linear block with averages raised
#: ``ZeroDivisionError``; the default learner went on predicting NaN for ever after); up to
#: 1e150 every bank measured stayed finite. 1e100 leaves that margin; larger values are
#: refused before anything changes, like NaN. (The daemon's own record limit,
#: ``records.max_abs_value``, is 1e30 by default.)
MAX_ABS_INPUT = 1e100


def _learn_predict(p, x, y, t, n):
    """One checked round on the pack ``p``: ``x`` must be finite within ``+-MAX_ABS_INPUT`` and
    ``y`` a target of the loss (+-1 for a binary loss, a class index < K for a multiclass one,
    a number within ``+-MAX_ABS_INPUT`` for regression), else nothing changes and ``BAD_X`` /
    ``BAD_Y`` / ``NEW_CLASS`` is returned.
    Then ``learn_round`` at round ``t`` since the schedule's restart and, with the running
    average of Prop. 4 (``p.average``), its update as the ``n``-th iterate. Returns the loss;
    the prediction made before the update is in ``p.pred``."""
    code = check_example(p, x, y)
    if code < 0.0:
        return code
    loss = learn_round(p, x, y, t)
    if p.average:
        average_explicit(p.w, p.scale, p.ex_blocks, p.ex_off, p.w_avg, n)
    return loss


def _average_explicit(w, scale, ex_blocks, ex_off, w_avg, t):
    """Running average of the explicit weights: w_avg += (theta_{t+1} - w_avg) / t."""
    inv = 1.0 / t
    for m in ex_blocks:
        for k in range(w.shape[0]):
            for j in range(ex_off[m], ex_off[m + 1]):
                w_avg[k, j] += (scale[m] * w[k, j] - w_avg[k, j]) * inv


average_explicit = njit(**JIT)(_average_explicit)
learn_predict = njit(**JIT)(_learn_predict)


def _learn_many(p, X, Y, t0, n0, losses, preds, norms_before):
    """``learn_round`` over the rows of X in order (the compiled loop behind ``learn_many``).

    Rounds are numbered t0 + 1, t0 + 2, ... since the schedule's last restart, and n0 + 1, ...
    since the model began (the running average's weights); prequential scores go to ``preds``,
    losses to ``losses``. ``norms_before`` (n, M) receives the block norms before each round
    (what the regularizer's value at theta_t needs), or is (0, M) and left alone.
    """
    track = norms_before.shape[0] > 0
    norms, pred = p.norms, p.pred
    for i in range(X.shape[0]):
        if track:
            for m in range(norms.shape[0]):
                norms_before[i, m] = norms[m]
        losses[i] = learn_round(p, X[i], Y[i], t0 + i + 1)
        for k in range(pred.shape[0]):
            preds[i, k] = pred[k]
        if p.average:
            average_explicit(p.w, p.scale, p.ex_blocks, p.ex_off, p.w_avg, n0 + i + 1)


learn_many = njit(**JIT)(_learn_many)


def _decision_many(p, X, out):
    """``decision`` for every row of X into ``out`` (n, K) (the leader's scores)."""
    fx = p.fx
    for i in range(X.shape[0]):
        decision(p, X[i], p.w, p.scale, True)
        for k in range(fx.shape[0]):
            out[i, k] = fx[k]


decision_many = njit(**JIT)(_decision_many)


def _check_target(p, y):
    """0.0 when ``learn_predict`` takes the target ``y``, else its refusal code (see there)."""
    code = p.loss_code
    if code == L_HINGE or code == L_LOGISTIC:
        if y != 1.0 and y != -1.0:
            return BAD_Y
    elif code == L_MC_HINGE or code == L_SOFTMAX:
        if not y >= 0.0 or y != math.floor(y):
            return BAD_Y
        if y >= p.fx.shape[0]:
            return NEW_CLASS
    elif not abs(y) <= MAX_ABS_INPUT:
        return BAD_Y
    return 0.0


check_target = njit(**JIT_INLINE)(_check_target)


def _check_example(p, x, y):
    """0.0 when ``learn_predict`` takes (x, y), else its refusal code (see there)."""
    for j in range(x.shape[0]):
        if not abs(x[j]) <= MAX_ABS_INPUT:  # NaN fails the comparison too
            return BAD_X
    return check_target(p, y)


check_example = njit(**JIT_INLINE)(_check_example)


def _learn_predict_explicit(p, x, y, t, n):
    """``learn_predict`` for a pack that takes the explicit round (``p.fast``), compiled
    without reference counting (``pack.JIT_BORROWED``): the pack's fields borrowed
    (``pack.borrowed_view``), not the ~90 reference counts of ``explicit_view`` a call."""
    f = borrowed_view(p)
    code = check_example(f, x, y)  # (the view has the loss code and the scores ``fx``)
    if code < 0.0:
        return code
    loss = explicit_round(f, x, y, t)
    if field(p, "average"):
        average_explicit(f.w, f.scale, f.ex_blocks, f.ex_off, field(p, "w_avg"), n)
    return loss


learn_predict_explicit = njit(**JIT_BORROWED)(_learn_predict_explicit)


def _learn_predict_md(p, x, y, t, n):
    """``learn_predict`` for a bank of explicit blocks under a schedule other than FTRL (the
    default regressor's; ``RoundArgs.md``): ``explicit_md_round`` then the prox steps and the
    averages' update of ``learn_round``, the same numbers."""
    code = check_example(p, x, y)
    if code < 0.0:
        return code
    loss = explicit_md_round(explicit_view(p), x, y, t)
    apply_prox_steps_into(
        p.etas, p.step_codes, p.step_p, p.step_groups, p.radius, p.is_explicit, p.ex_blocks,
        p.ex_off, p.w, p.scale, p.norms, p.coef, p.counters[0], p.newnorms, p.prox_work,
    )  # fmt: skip
    if p.avg_w.shape[0] > 0:
        update_averages(
            p.w, p.scale, p.bias, p.ex_blocks, p.ex_off, p.avg_w, p.avg_bias, p.horizons,
            p.avg_count, p.every, p.mirror, True,
        )  # fmt: skip
    if p.average:
        average_explicit(p.w, p.scale, p.ex_blocks, p.ex_off, p.w_avg, n)
    return loss


learn_predict_md = njit(**JIT)(_learn_predict_md)


def _learn_many_explicit(p, X, Y, t0, n0, losses, preds, norms_before):
    """``learn_many`` for a pack that takes the explicit round (``p.fast``): the pack's fields
    read once per run. With two mirrored score rows (and no running average of Prop. 4, which
    reads every row each round) the rounds leave the second rows to the end of the run
    (``explicit_round_first``, then ``mirror_rows``): the same numbers, and 4 of the 8 passes
    over the weights a round of the default learner on two classes makes fewer (measured:
    ``benchmarks/results/round_parts.md``)."""
    track = norms_before.shape[0] > 0
    norms, pred = p.norms, p.pred
    f = explicit_view(p)
    first = p.mirror and not p.average
    every = p.every
    updates = int(p.avg_count[0]) // every  # the averages' updates so far
    for i in range(X.shape[0]):
        if track:
            for m in range(norms.shape[0]):
                norms_before[i, m] = norms[m]
        if first:
            losses[i] = explicit_round_first(f, X[i], Y[i], t0 + i + 1)
        else:
            losses[i] = explicit_round(f, X[i], Y[i], t0 + i + 1)
        for k in range(pred.shape[0]):
            preds[i, k] = pred[k]
        if p.average:
            average_explicit(p.w, p.scale, p.ex_blocks, p.ex_off, p.w_avg, n0 + i + 1)
    if first and X.shape[0] > 0:
        taken = int(p.avg_count[0]) // every != updates
        mirror_rows(p.w, p.avg_w, p.ex_blocks, p.ex_off, taken)


learn_many_explicit = njit(**JIT)(_learn_many_explicit)


def _decision_explicit(p, x, w, scale, leader_scores):
    """``decision`` for a bank of explicit blocks only (``explicit_decision``)."""
    explicit_decision(explicit_view(p), x, w, scale, leader_scores)


decision_explicit = njit(**JIT)(_decision_explicit)


def _decision_many_explicit(p, X, out):
    """``decision_many`` for a bank of explicit blocks only."""
    f = explicit_view(p)
    fx = p.fx
    w, scale = p.w, p.scale
    for i in range(X.shape[0]):
        explicit_decision(f, X[i], w, scale, True)
        for k in range(fx.shape[0]):
            out[i, k] = fx[k]


decision_many_explicit = njit(**JIT)(_decision_many_explicit)
