"""A record of known inputs in ONE compiled call: its values scattered to their columns, checked,
standardised, then the checked round (``learn_values``) or the prediction (``predict_values``).

A river learner's record is a dict; the Python side maps it to ``vals`` (the values, in the
dict's order) and ``cols`` (each value's column, -1 for a name the model does not know: a
prediction ignores it) and calls one of these on buffers it keeps, instead of making a vector,
standardising it and calling the round, each a call of its own.

The round and the decision are called at the addresses of the model's own compiled ones
(``learn_at``, ``decide_at``; ``streammkl.core._jit.native_address``), not by name: numba
links a callee's code into every caller that names it and optimises it again there, and the
round is most of a first run's compile time (by name, these two calls compiled ~2 s more in a
fresh process; at the addresses, ~0.6 s).

The standardisation is the one of ``standardize_row`` (running mean and variance, Welford; the
statistics including the row; an input that has only ever been 0 or 1 is left as it is),
compiled without fastmath (``JIT_EXACT``), the same code for one row, for a run of rows and
inside these calls: the same numbers bit for bit. ``learn_values`` counts the row only once the
round has taken it: a record the round refuses changes nothing.
"""

from __future__ import annotations

import math

from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

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


def _call_at(context, builder, sig, args):
    """The code of a call of the compiled function at the address ``args[0]`` (numba's own
    calling convention: a status, and an exception set by the callee passed on) with the other
    arguments, whose types are those it was compiled for."""
    restype, argtypes = sig.return_type, sig.args[1:]
    fnty = context.call_conv.get_function_type(restype, argtypes)
    fn = builder.inttoptr(args[0], fnty.as_pointer())
    status, out = context.call_conv.call_function(builder, fn, restype, argtypes, args[1:])
    with cgutils.if_unlikely(builder, status.is_error):
        context.call_conv.return_status_propagate(builder, status)
    return out


@intrinsic
def _round_at(typingctx, address, p, x, y, t, n):
    """``round(p, x, y, t, n)`` (a float) of the compiled round at ``address``."""
    return types.float64(address, p, x, y, t, n), _call_at


@intrinsic
def _decision_at(typingctx, address, p, x, w, scale, leader_scores):
    """``decision(p, x, w, scale, leader_scores)`` of the compiled decision at ``address``."""
    return types.none(address, p, x, w, scale, leader_scores), _call_at


def learn_at(address, p, x, y, t, n):
    """``learn_predict_explicit`` (``p.fast``) or ``learn_predict`` of ``(p, x, y, t, n)``:
    compiled, a call of the compiled round at ``address`` (the model's own for these argument
    types: one of these, or ``learn_predict_md``, the same numbers as ``learn_predict``)
    instead of a copy of it (see ``learn_values``)."""
    return (learn_predict_explicit if p.fast else learn_predict)(p, x, y, t, n)


def decide_at(address, p, x, w, scale, leader_scores):
    """``decision_explicit(p, x, w, scale, leader_scores)``: compiled, a call of the compiled
    one at ``address`` (see ``learn_at``). (Not ``explicit_decision`` on the pack's fields:
    built here, where numba counts references, and passed to a call it cannot see into, they
    cost ~0.5 µs a call more, measured.)"""
    decision_explicit(p, x, w, scale, leader_scores)


@overload(learn_at)
def _learn_at(address, p, x, y, t, n):
    """``learn_at`` compiled: the call at ``address``."""
    return lambda address, p, x, y, t, n: _round_at(address, p, x, y, t, n)  # type: ignore[call-arg]


@overload(decide_at)
def _decide_at(address, p, x, w, scale, leader_scores):
    """``decide_at`` compiled: the call at ``address``."""
    return lambda address, p, x, w, scale, leader_scores: _decision_at(  # type: ignore[call-arg]
        address, p, x, w, scale, leader_scores
    )


def _learn_values(p, vals, cols, raw, count, mean, m2, binary, xs, standardize, y, t, n, at):
    """The checked round ``learn_predict_explicit`` (a pack that takes the explicit round,
    ``p.fast``), ``learn_predict_md`` or ``learn_predict`` (any other explicit bank), compiled
    at the address ``at`` (``learn_at``),
    on the record (``vals``, ``cols``) (every ``cols[i] >= 0``): scattered into ``raw``,
    standardised into ``xs`` when ``standardize`` (the statistics ``count``, ``mean``, ``m2``,
    ``binary`` counted once the round took it). Returns the round's loss, or its refusal code
    (``BAD_X`` for a value out of range), having changed nothing.

    The round is called at its address, not by name: a compiled function that calls another by
    name gets a copy of the callee's code, optimised again with its own (numba links the
    callee's IR into every caller), and the round is most of a first run's compile time."""
    if not scatter_record(vals, cols, raw):
        return BAD_X
    if not standardize:
        return learn_at(at, p, raw, y, t, n)
    standardize_row(raw, count, mean, m2, binary, xs, False)
    loss = learn_at(at, p, xs, y, t, n)
    if loss >= 0.0:
        standardize_row(raw, count, mean, m2, binary, xs, True)  # the same xs, the row counted
    return loss


def _predict_values(
    p, vals, cols, raw, count, mean, m2, binary, xs, standardize, leader_scores, at
):  # fmt: skip
    """``decision_explicit`` (into ``p.fx``; the leader's scores with ``leader_scores``),
    compiled at the address ``at`` (as in ``learn_values``), on the record (``vals``, ``cols``;
    a column of -1 is a name the model ignores), standardised without counting when
    ``standardize``; False, changing nothing, for a value out of range."""
    if not scatter_record(vals, cols, raw):
        return False
    x = raw
    if standardize:
        standardize_row(raw, count, mean, m2, binary, xs, False)
        x = xs
    decide_at(at, p, x, p.w, p.scale, leader_scores)
    return True


def _learn_predict_at(at, p, x, y, t, n):
    """``learn_at(at, p, x, y, t, n)``: the round compiled at ``at`` called from Python with
    the pack. The explicit round (``learn_predict_explicit``) is compiled without reference
    counting, and numba's entry point of such a function takes a reference to a structref it
    unboxes (the pack) and never drops it (the pack would never be freed): Python calls it
    through this one, which counts references, at its address (no copy of the round)."""
    return learn_at(at, p, x, y, t, n)


learn_predict_at = njit(**JIT_EXACT)(_learn_predict_at)
learn_values = njit(**JIT_EXACT)(_learn_values)
predict_values = njit(**JIT_EXACT)(_predict_values)
