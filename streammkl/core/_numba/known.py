"""A record of known inputs in ONE compiled call: its values scattered to their columns, checked,
standardised, then the explicit round (``learn_values``) or the prediction
(``predict_values``).

A river learner's record is a dict; the Python side maps it to ``vals`` (the values, in the
dict's order) and ``cols`` (each value's column, -1 for a name the model does not know: a
prediction ignores it) and calls one of these on buffers it keeps, instead of making a vector,
standardising it and calling the round, each a call of its own.

The standardisation is the one of ``standardize_row`` (running mean and variance, Welford; the
statistics including the row; an input that has only ever been 0 or 1 is left as it is),
compiled without fastmath (``JIT_EXACT``), the same code for one row, for a run of rows and
inside these calls: the same numbers bit for bit. ``learn_values`` counts the row only once the
round has taken it: a record the round refuses changes nothing.
"""

from __future__ import annotations

import math

from numba import njit

from streammkl.core._jit import JIT_EXACT
from streammkl.core._numba.rounds import (
    BAD_X,
    MAX_ABS_INPUT,
    decision_explicit,
    learn_predict,
    learn_predict_explicit,
)

#: Below this variance an input counts as constant (scale 1).
TINY_VAR = 1e-24
#: A 0/1 input counted this many times and 1 in more than ``RARE_SHARE`` of them is frequent:
#: standardised for good (a rare one, a one-hot category, stays at 0/1).
RARE_AFTER = 64.0
RARE_SHARE = 1.0 / 3.0


def _standardize_row(x, count, mean, m2, binary, out, learn):
    """``x`` standardised into ``out`` with the statistics including it (``(v - mean) / std``,
    the population variance; a constant input gives ``v - mean``); counted when ``learn``.

    An input whose ``binary`` flag is set (1.0: every value counted so far was 0 or 1, and it
    is rare: fewer than ``RARE_AFTER`` counts, or a mean of at most ``RARE_SHARE``) and whose
    value is 0 or 1 is left as it is (not centred: an absent one-hot category stays 0, so a
    record of few non-zeros stays sparse). Its first other value, or the count that makes it
    frequent, is standardised with the statistics of everything counted (kept all along) and,
    counted, clears the flag for good."""
    for j in range(x.shape[0]):
        v = x[j]
        n = count[j] + 1.0  # the statistics with v counted (stored only when learning)
        delta = v - mean[j]
        mu = mean[j] + delta / n
        s2 = m2[j] + delta * (v - mu)
        if binary[j] != 0.0 and (v == 0.0 or v == 1.0) and (n < RARE_AFTER or mu <= RARE_SHARE):
            out[j] = v
        else:
            var = s2 / n
            out[j] = (v - mu) / math.sqrt(var) if var > TINY_VAR else v - mu
            if learn:
                binary[j] = 0.0
        if learn:
            count[j] = n
            mean[j] = mu
            m2[j] = s2


#: One row standardised (and counted when ``learn``): the one body of every compiled caller.
standardize_row = njit(inline="always", **JIT_EXACT)(_standardize_row)


def _standardize_rows(X, count, mean, m2, binary, out, learn):
    """Every row of ``X`` through ``standardize_row`` in order (with ``learn``, row i sees the
    rows before it)."""
    for i in range(X.shape[0]):
        standardize_row(X[i], count, mean, m2, binary, out[i], learn)


def _standardize_one(x, count, mean, m2, binary, out, learn):
    """One row through ``standardize_row`` (its own entry point: no loop)."""
    standardize_row(x, count, mean, m2, binary, out, learn)


standardize_rows = njit(**JIT_EXACT)(_standardize_rows)
standardize_one = njit(**JIT_EXACT)(_standardize_one)


def _scatter(vals, cols, raw):
    """``raw`` = the record: 0 everywhere, ``vals[i]`` at column ``cols[i]`` (>= 0; a later
    value of the same column wins); False, writing nothing, when a value is not finite within
    ``+-MAX_ABS_INPUT`` (a name the model does not know included)."""
    for i in range(vals.shape[0]):
        if not abs(vals[i]) <= MAX_ABS_INPUT:  # NaN fails the comparison too
            return False
    for j in range(raw.shape[0]):
        raw[j] = 0.0
    for i in range(vals.shape[0]):
        c = cols[i]
        if c >= 0:
            raw[c] = vals[i]
    return True


scatter_record = njit(inline="always", **JIT_EXACT)(_scatter)


def _learn_values_explicit(p, vals, cols, raw, count, mean, m2, binary, xs, standardize, y, t, n):
    """``learn_predict_explicit`` (a pack that takes the explicit round, ``p.fast``) on the
    record (``vals``, ``cols``) (every ``cols[i] >= 0``): scattered into ``raw``, standardised
    into ``xs`` when ``standardize`` (the statistics ``count``, ``mean``, ``m2``, ``binary``
    counted once the round took it). Returns the round's loss, or its refusal code (``BAD_X``
    for a value out of range), having changed nothing."""
    if not scatter_record(vals, cols, raw):
        return BAD_X
    if not standardize:
        return learn_predict_explicit(p, raw, y, t, n)
    standardize_row(raw, count, mean, m2, binary, xs, False)
    loss = learn_predict_explicit(p, xs, y, t, n)
    if loss >= 0.0:
        standardize_row(raw, count, mean, m2, binary, xs, True)  # the same xs, the row counted
    return loss


def _learn_values(p, vals, cols, raw, count, mean, m2, binary, xs, standardize, y, t, n):
    """``learn_values_explicit`` for a pack of any other explicit bank (``learn_predict``: other
    schedules, regularizers, a projection)."""
    if not scatter_record(vals, cols, raw):
        return BAD_X
    if not standardize:
        return learn_predict(p, raw, y, t, n)
    standardize_row(raw, count, mean, m2, binary, xs, False)
    loss = learn_predict(p, xs, y, t, n)
    if loss >= 0.0:
        standardize_row(raw, count, mean, m2, binary, xs, True)
    return loss


def _predict_values(p, vals, cols, raw, count, mean, m2, binary, xs, standardize, leader_scores):
    """``decision_explicit`` (into ``p.fx``; the leader's scores with ``leader_scores``) on the
    record (``vals``, ``cols``; a column of -1 is a name the model ignores), standardised
    without counting when ``standardize``; False, changing nothing, for a value out of range.
    (``leader_scores`` is an argument, not the constant ``True``: a constant would compile
    ``decision_explicit`` again for its literal type, ~10 s of a first run.)"""
    if not scatter_record(vals, cols, raw):
        return False
    x = raw
    if standardize:
        standardize_row(raw, count, mean, m2, binary, xs, False)
        x = xs
    decision_explicit(p, x, p.w, p.scale, leader_scores)
    return True


learn_values_explicit = njit(**JIT_EXACT)(_learn_values_explicit)
learn_values = njit(**JIT_EXACT)(_learn_values)
predict_values = njit(**JIT_EXACT)(_predict_values)
