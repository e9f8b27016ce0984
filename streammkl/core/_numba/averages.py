"""Predictions from averaged iterates: exponential moving averages of the explicit blocks at a
few horizons, and the choice among them (and the last iterate) by discounted prequential loss.

``avg_w[e]`` (K, P) holds the scaled average ``theta_bar_e`` of the explicit weights and
``avg_bias[e]`` its bias; after each round ``theta_bar_e += r_e (theta_(t+1) - theta_bar_e)`` with
``r_e = max(1 / n, 1 / horizon_e)`` (n rounds since the averages started: the running mean first,
an exponential average of horizon h after h rounds). ``avg_loss[0]`` is the discounted
prequential loss of the last iterate, ``avg_loss[e + 1]`` that of average e
(``L <- rho L + loss``); the prediction at x_t comes from the one with the smallest loss up to
round t - 1 (follow the leader over the predictors, ``leader``: a predictor takes the lead
only when its loss is lower than the lead's by more than ``LEAD_TOLERANCE``, so ties up to
rounding go to the last iterate, then to the earlier average).

To keep their cost a fraction of a round, the averages and the losses are updated every
``every`` rounds (``every = 1``: every round): an average then takes
``r = max(1 / n, 1 - (1 - 1 / horizon)^every)`` (n updates so far) and a loss the discount
``rho^every``; the leader's prediction is computed every round.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from streammkl.core._jit import JIT, JIT_INLINE
from streammkl.core._numba.features import dot4_row, dot4_rows
from streammkl.core._numba.losses import loss_grad

LEAD_TOLERANCE = 1e-9
"""How much lower (relative to ``max(1, |lead|)``) a predictor's discounted loss must be to take
the lead. Two computations of the same losses may differ in their last bits (the sparse and the
dense round, or one summation order and another, agree to rounding, about 1e-15 relative after
hundreds of rounds); sums that agree to rounding must not pick different predictors, so a lead
smaller than this counts as a tie. 1e-9 is a million times the rounding of these sums and far
below any lead that means something (a loss of one example is of order 1)."""


def _leader(avg_loss):
    """0 for the last iterate, e + 1 for average e: the leader by discounted loss so far, with
    hysteresis. The last iterate holds the lead first; each average in turn takes it only when
    its loss is lower than the holder's by more than ``LEAD_TOLERANCE * max(1, |holder's|)``,
    so losses tied up to rounding keep the last iterate (then the earlier average) and a 1-ulp
    difference never changes the prediction. No memory across rounds: the same losses always
    give the same leader (the state holds the losses only)."""
    best = 0
    lead = avg_loss[0]
    for e in range(1, avg_loss.shape[0]):
        if avg_loss[e] < lead - LEAD_TOLERANCE * max(1.0, abs(lead)):
            best = e
            lead = avg_loss[e]
    return best


leader = njit(**JIT)(_leader)


def _average_scores(phi, ex_blocks, ex_off, avg_w, avg_bias, e, out, mirror):
    """Scores of average e at the feature maps ``phi`` into ``out`` (K,); with ``mirror`` (two
    rows, the second the first's negation) the second is the first's negation."""
    rows = avg_w[e]
    for k in range(1 if mirror else out.shape[0]):
        acc = avg_bias[e, k]
        for m in ex_blocks:
            acc += dot4_row(rows, k, phi, ex_off[m], ex_off[m + 1])
        out[k] = acc
    if mirror:
        out[1] = -out[0]


average_scores = njit(**JIT)(_average_scores)


def _all_average_scores(phi, ex_blocks, ex_off, avg_w, avg_bias, out, dots, mirror):
    """Scores of every average at the feature maps ``phi`` into ``out`` (E, K): for each
    (e, k) ``average_scores``' numbers bit for bit (the bias, then the blocks' ``dot4`` in
    block order), the rows two at a time; with ``mirror`` (K = 2, each average's second row
    the negation of its first) the first rows only, the second the negations (the same
    numbers). ``dots`` (>= E K,) is scratch."""
    E, K, P = avg_w.shape
    rows = avg_w.reshape((E * K, P))
    flat = out.reshape(E * K)
    step = 2 if mirror else 1  # the rows computed: every one, or the first of each average
    for r in range(0, E * K, step):
        flat[r] = avg_bias[r // K, r % K]
    for m in ex_blocks:
        a = ex_off[m]
        b = ex_off[m + 1]
        r = 0
        while r + 2 * step <= E * K:
            dots[r], dots[r + step] = dot4_rows(rows, r, r + step, phi, a, b)
            r += 2 * step
        if r < E * K:
            dots[r] = dot4_row(rows, r, phi, a, b)
        for r in range(0, E * K, step):
            flat[r] += dots[r]
    if mirror:
        for r in range(0, E * K, 2):
            flat[r + 1] = -flat[r]


all_average_scores = njit(**JIT_INLINE)(_all_average_scores)


def _track_averages(
    loss_code, loss_p, fx, loss, y, phi, ex_blocks, ex_off, avg_w, avg_bias, avg_loss, rho,
    count, every, scratch, scores, pred, dots, mirror,
):  # fmt: skip
    """The prediction at this round into ``pred`` (the leader's scores, chosen before this
    example's losses count); on every ``every``-th round (``count[0]`` rounds before this one)
    every predictor's discounted loss is updated with this example. ``fx``, ``loss``: the last
    iterate's scores and loss; ``scratch`` (K,), ``scores`` (E, K), ``dots`` (>= E K,): work
    arrays; ``mirror``: see ``all_average_scores``."""
    best = leader(avg_loss)
    for k in range(pred.shape[0]):
        pred[k] = fx[k]
    if int(count[0]) % every != 0:
        if best > 0:
            average_scores(phi, ex_blocks, ex_off, avg_w, avg_bias, best - 1, pred, mirror)
        return
    discount = rho**every
    avg_loss[0] = discount * avg_loss[0] + loss
    all_average_scores(phi, ex_blocks, ex_off, avg_w, avg_bias, scores, dots, mirror)
    for e in range(avg_w.shape[0]):
        if best == e + 1:
            for k in range(pred.shape[0]):
                pred[k] = scores[e, k]
        value = loss_grad(loss_code, loss_p, scores[e], y, scratch)
        avg_loss[e + 1] = discount * avg_loss[e + 1] + value


track_averages = njit(**JIT_INLINE)(_track_averages)


def _update_averages(
    w, scale, bias, ex_blocks, ex_off, avg_w, avg_bias, horizons, count, every, mirror, second
):  # fmt: skip
    """One more round (``count[0]`` rounds so far, incremented here); every ``every``-th
    round, the new iterate enters every average (one vectorised loop per block and row). With
    ``mirror`` (K = 2, ``w[1] = -w[0]`` and each average's rows likewise) the first rows are
    updated and the second set to their negations: the numbers the update gives them (the
    weights' second rows only when ``second``; the biases' always)."""
    count[0] += 1
    if int(count[0]) % every != 0:
        return
    n = count[0] // every
    rows = 1 if mirror else w.shape[0]
    for e in range(avg_w.shape[0]):
        r = max(1.0 / n, 1.0 - (1.0 - 1.0 / horizons[e]) ** every)
        ue = np.uint64(e)
        for k in range(rows):
            uk = np.uint64(k)
            for m in ex_blocks:
                s = scale[m]
                # unsigned indices: no negative-index checks (the loop vectorises), no views
                for j in range(np.uint64(ex_off[m]), np.uint64(ex_off[m + 1])):
                    avg_w[ue, uk, j] += (s * w[uk, j] - avg_w[ue, uk, j]) * r
            avg_bias[e, k] += (bias[k] - avg_bias[e, k]) * r
        if mirror and second:
            u0 = np.uint64(0)
            u1 = np.uint64(1)
            for m in ex_blocks:
                for j in range(np.uint64(ex_off[m]), np.uint64(ex_off[m + 1])):
                    avg_w[ue, u1, j] = -avg_w[ue, u0, j]
        if mirror:
            avg_bias[e, 1] = -avg_bias[e, 0]


update_averages = njit(**JIT_INLINE)(_update_averages)
