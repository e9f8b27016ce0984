"""ONE round of Alg. 1 / Alg. 3 on a (Layout, BlockState): the Python edge of the compiled loop.

``RoundArgs`` packs every array the compiled round needs into one compiled argument (a
``RoundPack``, :mod:`streammkl.core._numba.pack`), once, so a call unboxes a handful of
arguments instead of ~60. It must be rebuilt whenever the state's arrays are reallocated (new
inputs, classes or capacity).

Per-example calls go through numba's compiled entry point for the pack's signature, skipping
the dispatcher's type resolution (~3 µs for a pack, whose type numba resolves in Python);
numba's internals for it are read once, guarded: if they change, calls go through the
dispatcher (slower, the same results). ``x`` must be a float64, C-contiguous, writeable
vector (checked by the caller).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import fields
from functools import partial
from typing import Any

import numpy as np

from streammkl.core import _numba as nb
from streammkl.core._jit import entry_point, native_address
from streammkl.core.losses import Loss
from streammkl.core.model_checks import BLOCKWISE
from streammkl.core.regularizers import Regularizer
from streammkl.core.schedules import Schedule
from streammkl.core.state import BlockState, Layout


def step_arrays(
    regularizers: Sequence[Regularizer], n_blocks: int, names: Sequence[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The J prox steps of a composite regularizer as (codes, params, block masks)."""
    steps = [s for reg in regularizers for s in reg.steps(n_blocks, names)]
    codes = np.array([s[0] for s in steps], dtype=np.int64)
    params = np.array([[s[1], s[2]] for s in steps], dtype=np.float64).reshape(len(steps), 2)
    groups = np.array([s[3] for s in steps], dtype=np.bool_).reshape(len(steps), n_blocks)
    return codes, params, groups


def mirrored(layout: Layout, state: BlockState, loss: Loss, schedule: Schedule) -> bool:
    """Whether the rounds may keep the second of two score rows as the first's negation and
    compute the first only (half the work of every row loop).

    A two-class softmax or multiclass hinge has step directions ``v[1] = -v[0]`` (exactly for
    the hinge, up to rounding for the softmax, whose ``v[1]`` is then set to ``-v[0]``), so rows
    that start as each other's negation stay so: the scores, FTRL's updates and norms, the bias
    and the averages of the second row are then exactly the negations of the first's, which
    is what the compiled round writes. Taken for explicit banks under FTRL (the default), when
    the state's rows are each other's negation now (checked exactly)."""
    w = state.w
    if (
        w.shape[0] != 2
        or loss.code not in (nb.L_SOFTMAX, nb.L_MC_HINGE)
        or schedule.code != nb.S_FTRL
        or layout.im_blocks.size
    ):
        return False
    avg = state.avg_w
    return bool(
        np.array_equal(w[1], -w[0])
        and state.bias[1] == -state.bias[0]
        and np.array_equal(avg[:, 1], -avg[:, 0])
        and np.array_equal(state.avg_bias[:, 1], -state.avg_bias[:, 0])
    )


def fast_round(layout: Layout, schedule: Schedule, codes: np.ndarray, radius: float) -> bool:
    """Whether the rounds take the compiled ``explicit_round`` (explicit blocks only, FTRL, prox
    steps on each block's norm alone, no projection: the default bank)."""
    return bool(
        not layout.im_blocks.size
        and schedule.code == nb.S_FTRL
        and all(code in BLOCKWISE for code in codes.tolist())
        and not radius > 0.0
    )


#: The columns (room included) the blocks that grow with the inputs must span for the rounds to
#: check each record for the sparse route: below, every record takes the dense round directly
#: (Bananas, Phishing, Hyperplane: 40 to 236 columns), without the check's ~0.1 µs.
WIDE_MIN_COLUMNS = 256


def wide_round(layout: Layout, fast: bool, average: bool) -> bool:
    """Whether the rounds take ``nb.learn_predict_wide`` (the sparse round on sparse records,
    the dense one otherwise): the fast route (:func:`fast_round`), no running average of Prop. 4,
    and blocks that grow with the inputs (linear, additive, stumps, the quadratic map) over at
    least ``WIDE_MIN_COLUMNS`` columns. (The layout's room doubles by reallocation, which
    builds new round arguments: a model that outgrows the threshold is checked again then.)"""
    narrow = (nb.MAP_LINEAR, nb.MAP_ADDITIVE, nb.MAP_STUMPS, nb.MAP_GATHER)
    span = sum(
        int(layout.ex_off[m + 1] - layout.ex_off[m])
        for m in layout.ex_blocks.tolist()
        if int(layout.ex_kind[m]) in narrow
    )
    return bool(fast and not average and span >= WIDE_MIN_COLUMNS)


def wide_columns(layout: Layout, nnz: int) -> int | None:
    """The explicit columns the sparse round (``core._numba.wide``) touches for a record of
    ``nnz`` non-zero inputs, or None when it takes the dense round (as ``nb.wide_plan``
    decides, from the layout's blocks and ``nnz`` alone): a projection block's (random
    Fourier, landmarks) every column, and a random binning block's (a bound: it writes one per
    grid); a linear block's ``nnz``, an additive or stumps block's
    columns per input times ``nnz``, the quadratic map's constant, squares and products of the
    non-zeros (bounds: a non-zero the block has no column for counts too). Only for rounds
    that take the wide route (:func:`wide_round`)."""
    total = narrow = filled = 0
    for m in layout.ex_blocks.tolist():
        kind = int(layout.ex_kind[m])
        width = int(layout.ex_off[m + 1] - layout.ex_off[m])
        if kind in (nb.MAP_RFF, nb.MAP_LANDMARK, nb.MAP_BINNING):  # (binning: a bound)
            total += width
            continue
        filled += int(layout.ex_used[m])
        if kind == nb.MAP_LINEAR:
            narrow += nnz
        elif kind in (nb.MAP_ADDITIVE, nb.MAP_STUMPS):
            inputs = int(layout.blk_inputs[m])
            narrow += (int(layout.ex_used[m]) // inputs if inputs > 0 else 0) * nnz
        elif kind == nb.MAP_GATHER:
            narrow += 1 + 2 * nnz + nnz * (nnz - 1) // 2
        else:
            narrow += width
    return total + narrow if nb.SPARSE_SHARE * narrow < filled else None


def _entry(compiled: Any, args: tuple[Any, ...]) -> Callable[..., Any]:
    """``entry_point(compiled, args)`` for a round's call ``(pack, x, ...)``, kept by the
    function and the pack's numba type: a model makes its ``RoundArgs`` again whenever its
    layout grows or its bank changes (~25 times over a bag-of-words learner's first 300
    documents), and resolving every argument's type cost ~50 µs each time (the pack's alone:
    ~2 µs). The other arguments' types are the call's contract (a float64 C-contiguous
    vector and scalars)."""
    typeof = getattr(compiled, "typeof_pyval", None)
    if typeof is None:  # the Python original (a test interprets the rounds)
        return entry_point(compiled, args)
    key = (compiled, typeof(args[0]))
    fast = _ENTRIES.get(key)
    if fast is None:
        fast = _ENTRIES[key] = entry_point(compiled, args)
    return fast


#: Round entry points by (compiled function, the pack's numba type) (see :func:`_entry`).
_ENTRIES: dict[tuple[Any, Any], Callable[..., Any]] = {}


class RoundArgs:
    """The pack of one layout and state, and the compiled calls that take it."""

    def __init__(
        self,
        layout: Layout,
        state: BlockState,
        loss: Loss,
        schedule: Schedule,
        steps: tuple[np.ndarray, np.ndarray, np.ndarray],
        radius: float,
        policy: int,
        capacity: int,
        bias_lr: float,
        horizons: np.ndarray,
        discount: float,
        every: int,
        average: bool = False,
    ):
        L, S = layout, state
        K = S.w.shape[0]
        M = L.kinds.shape[0]
        self.phi = np.zeros(L.width)
        self.scores = np.zeros((M, K))
        self.fx = np.zeros(K)
        self.etas = np.zeros(M + 1)  # this round's per-block steps (then the bias step)
        self.pred = np.zeros(K)  # the prediction (the leader among the averaged iterates)
        self.state = S
        #: Two score rows kept each other's negation (:func:`mirrored`).
        self.mirror = mirrored(L, S, loss, schedule)
        #: The rounds take the compiled explicit round (:func:`fast_round`).
        self.fast = fast_round(L, schedule, steps[0], radius)
        #: Every block is explicit: predictions take the compiled explicit route. (A process
        #: compiles only the routes its bank takes: the default bank never compiles the
        #: kernelized round.)
        self.explicit = not L.im_blocks.size
        #: The rounds of an explicit bank under another schedule than FTRL take
        #: ``nb.learn_predict_md`` (the default regressor's: the general round's numbers).
        self.md = self.explicit and not self.fast and schedule.code != nb.S_FTRL
        #: Sparse records take the sparse round (:func:`wide_round`, ``core._numba.wide``).
        self.wide = wide_round(L, self.fast, average)
        self._layout = L
        self._decision_fn = nb.decision_explicit if self.explicit else nb.decision
        w_avg = S.w_avg if average else np.zeros((0, 0))
        v, xsq, dots = np.zeros(K), np.zeros(L.n_views), np.zeros(L.n_views)
        newnorms, fsq, blk_c, blk_steps = np.zeros(M), np.zeros(M), np.zeros(M), np.zeros(M)
        all_blocks, prox_work = np.ones(M, dtype=np.bool_), np.zeros(M)
        scratch, ascores = np.zeros(K), np.zeros((S.avg_w.shape[0], K))
        row_dots = np.zeros(max(S.avg_w.shape[0] * K, 1))
        phi_x, phi_valid = np.zeros(L.masks.shape[1]), np.zeros(1, dtype=np.int64)
        self.pack = nb.new_pack(
            int(schedule.code), np.ascontiguousarray(schedule.constants, dtype=np.float64),
            S.step_acc, self.etas, S.step_prev, S.stored_norms,
            L.kinds, L.kp, L.is_explicit, L.view_of, L.masks, L.view_full, L.ex_blocks,
            L.im_blocks, L.ex_off, L.ex_kind, L.ex_norm, L.phi_src, L.rff_wt, L.rff_b,
            int(loss.code), float(loss.param), *steps, float(radius), int(policy), int(capacity),
            S.w, S.scale, S.norms, S.sx, S.ssq, S.sv, S.coef, S.kself, S.age, S.counters, S.gram,
            S.bias, float(bias_lr),
            self.phi, self.scores, self.fx, v, xsq, dots, newnorms, fsq, blk_c, blk_steps,
            all_blocks, prox_work,
            S.avg_w, S.avg_bias, S.avg_loss, S.avg_count, horizons, float(discount), int(every),
            self.pred, scratch, ascores, row_dots,
            bool(average), w_avg, self.mirror, self.fast,
            phi_x, phi_valid,
            S.lazy, L.in_pos, L.ex_used, L.blk_inputs,
        )  # fmt: skip
        self._unit_scales = np.ones(M)
        #: The pack's work buffers, each with the value a new pack starts it at (:meth:`refill`).
        self._work = (
            *((buf, 0) for buf in (self.phi, self.scores, self.fx, self.etas, self.pred, v, xsq,
                                   dots, newnorms, fsq, blk_c, blk_steps, prox_work, scratch,
                                   ascores, row_dots, phi_x, phi_valid)),
            (all_blocks, True), (self._unit_scales, 1),
        )  # fmt: skip
        self._learn: Callable[..., float] | None = None
        self._decide: Callable[..., Any] | None = None
        self._learn_sparse: Callable[..., float] | None = None
        self._decide_sparse: Callable[..., Any] | None = None
        #: Records of known inputs take one compiled call (``learn_values``, ``predict_values``):
        #: the rounds and predictions of dense records, for an explicit bank, and for a bank
        #: with kernelized blocks once its support arrays hold the whole budget (a budget's room
        #: is allocated at once: the round's ``make_room`` then never needs the room the
        #: Python round makes first, ``OnlineMKL._ensure_room``).
        self.known = not self.wide and (self.explicit or capacity <= S.sx.shape[0])

    def refill(self, layout: Layout, state: BlockState, loss: Loss, schedule: Schedule) -> bool:
        """Take the values of ``state`` into the arrays this pack is bound to and put its work
        buffers back to their start: the pack then computes, bit for bit, what a new one built
        on ``state`` would (the same layout, outputs, support capacity and averages: every
        array of the same shape), without a new pack or new compiled entry points (a group
        member takes its group's merged model every round). False, nothing changed, when a
        shape differs or the two score rows' mirroring would (:func:`mirrored`)."""
        own = self.state
        if layout is not self._layout or mirrored(layout, state, loss, schedule) != self.mirror:
            return False
        pairs = [(getattr(own, f.name), getattr(state, f.name)) for f in fields(BlockState)]
        if any(a.shape != b.shape or a.dtype != b.dtype for a, b in pairs):
            return False
        for a, b in pairs:
            np.copyto(a, b)
        for buf, start in self._work:
            buf.fill(start)
        return True

    def learn_predict(self, x: np.ndarray, y: float, t: int, n: int) -> float:
        """One checked round (``nb.learn_predict``) at round ``t`` since the schedule's restart,
        the model's ``n``-th: the loss, or a negative refusal code (``nb.BAD_X``, ...)."""
        fast = self._learn
        if fast is None:
            compiled = nb.learn_predict_explicit if self.fast else nb.learn_predict
            if self.md:
                compiled = nb.learn_predict_md
            if self.wide:
                compiled = nb.learn_predict_wide
            probe = (self.pack, x, 0.0, t, n)
            explicit = compiled is nb.learn_predict_explicit
            at = native_address(compiled, probe) if explicit else 0
            if at:  # (compiled without reference counting: called at its address, see there)
                fast = partial(_entry(nb.learn_predict_at, (at, *probe)), at)
            else:
                fast = _entry(compiled, probe)
            self._learn = fast
        return fast(self.pack, x, float(y), t, n)

    def learn_sparse(
        self, x: np.ndarray, cols: np.ndarray, vals: np.ndarray, y: float, t: int, n: int
    ) -> float:
        """:meth:`learn_predict` of a :attr:`wide` bank on a record given by its non-zeros
        (``nb.learn_sparse_wide``: ``vals`` float64 at the int64 columns ``cols``, any order, a
        later value of a column wins; ``x`` a zero buffer of the model's width, left zero):
        O(nnz) on the sparse route."""
        fast = self._learn_sparse
        if fast is None:
            probe = (self.pack, x, cols, vals, 0.0, t, n)
            fast = self._learn_sparse = _entry(nb.learn_sparse_wide, probe)
        return fast(self.pack, x, cols, vals, float(y), t, n)

    def decision_sparse(self, x: np.ndarray, cols: np.ndarray, vals: np.ndarray) -> bool:
        """:meth:`decision` of a :attr:`wide` bank on a record given by its non-zeros (as in
        :meth:`learn_sparse`) into ``self.fx``; False (nothing computed) for a value out of
        range."""
        fast = self._decide_sparse
        if fast is None:
            probe = (self.pack, x, cols, vals, self.state.w, self.state.scale, True)
            fast = self._decide_sparse = _entry(nb.decision_sparse_wide, probe)
        return bool(fast(self.pack, x, cols, vals, self.state.w, self.state.scale, True))

    def values_calls(
        self,
    ) -> tuple[tuple[Callable[..., float], int], tuple[Callable[..., bool], int]] | None:
        """The compiled entry points of a record of known inputs (only when :attr:`known`),
        each with the address it is given last: ``(nb.learn_values, a)``, called as
        ``f(pack, vals, cols, raw, count, mean, m2, binary, xs, standardize, y, t, n, a)``, and
        ``(nb.predict_values, b)``, called as ``g(pack, vals, cols, raw, count, mean, m2,
        binary, xs, standardize, True, b)`` (float64 vectors, ``cols`` int64, bools, a float
        and ints): the addresses of this model's own compiled round and decision (those of
        :meth:`learn_predict` and :meth:`decision`), which they call there. None when numba
        gives no address."""
        f, i = np.zeros(0), np.zeros(0, dtype=np.int64)
        round_fn = nb.learn_predict_explicit if self.fast else nb.learn_predict
        if self.md:
            round_fn = nb.learn_predict_md
        at_round = native_address(round_fn, (self.pack, f, 0.0, 1, 1))
        at_decision = native_address(
            self._decision_fn, (self.pack, f, self.state.w, self.state.scale, True)
        )
        interpreted = getattr(nb.learn_values, "typeof_pyval", None) is None  # a test's
        if not interpreted and not (at_round and at_decision):
            return None
        if interpreted and not self.explicit:  # (interpreted, ``decide_at`` names the
            return None  # explicit decision: a kernelized bank's needs its address)
        probe = (self.pack, f, i, f, f, f, f, f, f, True)
        learn = _entry(nb.learn_values, (*probe, 0.0, 1, 1, at_round))
        predict = _entry(nb.predict_values, (*probe, True, at_decision))
        return (learn, at_round), (predict, at_decision)

    def record_calls(
        self, at_round: int, at_decision: int, vals: np.ndarray, cols: np.ndarray,
        raw: np.ndarray, count: np.ndarray, mean: np.ndarray, m2: np.ndarray,
        binary: np.ndarray, xs: np.ndarray, standardize: bool,
    ) -> tuple[Any, Callable[..., float], Callable[..., bool], Any]:  # fmt: skip
        """The calls of :meth:`values_calls` with their arguments bound once: ``(a, f, g,
        record)``, ``record`` the pack, the buffers (as there), ``standardize`` and the
        addresses (``at_round``, ``at_decision``: :meth:`values_calls`' own) in one record
        pack (``core._numba.record``); ``f(a, y, t, n)`` the round, ``g(a)`` the prediction,
        the same numbers as the calls of :meth:`values_calls` on these arguments. ``a`` is the
        address of the record's meminfo (``nb.record_address``; ``nb.learn_record_at``,
        ``nb.predict_record_at`` take it: an int to unbox instead of fourteen arguments). The
        caller keeps ``record`` while it uses ``a``, and the buffers while they are the ones
        bound (their owners report a replacement: ``OnlineMKL.bind_record``)."""
        record = nb.new_record(
            self.pack, vals, cols, raw, count, mean, m2, binary, xs, bool(standardize),
            int(at_round), int(at_decision),
        )  # fmt: skip
        address = nb.record_address(record)
        learn = _entry(nb.learn_record_at, (address, 0.0, 1, 1))
        predict = _entry(nb.predict_record_at, (address,))
        return address, learn, predict, record

    def softmax2_call(self, address: int) -> Callable[..., tuple[float, float, float]]:
        """``f(a, y, t, n)``: the round of :meth:`record_calls`' ``f`` on the record pack at
        ``address``, and the softmax of the first two scores before the update
        (``nb.learn_record_softmax2_at``): ``(loss, p0, p1)``."""
        return _entry(nb.learn_record_softmax2_at, (address, 0.0, 1, 1))

    def settle(self) -> None:
        """Fold the sparse round's factors into the state (``BlockState.settle``): before a
        dense loop or any reader of the arrays."""
        if self.wide:
            self.state.settle(self._layout)

    def learn_round(self, x: np.ndarray, y: float, t: int) -> float:
        """One round at round number ``t`` since the schedule's last restart (unchecked)."""
        self.settle()
        return float(nb.learn_round(self.pack, x, float(y), int(t)))

    def learn_many(
        self, X: np.ndarray, Y: np.ndarray, t0: int, n0: int, norms_before: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Rounds over the rows of X (``nb.learn_many``): the losses and prequential scores."""
        losses = np.empty(X.shape[0])
        preds = np.empty((X.shape[0], self.fx.shape[0]))
        if norms_before is None:
            norms_before = np.empty((0, self.scores.shape[0]))
        self.settle()
        loop = nb.learn_many_explicit if self.fast else nb.learn_many
        loop(self.pack, X, Y, int(t0), int(n0), losses, preds, norms_before)
        return losses, preds

    def decision(self, x: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
        """Scores at ``x`` into ``self.fx``; ``w`` replaces the explicit weights (the running
        average, with unit scales), else the leader among the averaged iterates predicts."""
        if w is not None:
            self.settle()
            self._decision_fn(self.pack, x, w, self._unit_scales, False)
            return self.fx
        fast = self._decide
        if fast is None:
            args = (self.pack, x, self.state.w, self.state.scale, True)
            compiled = nb.decision_wide if self.wide else self._decision_fn
            fast = self._decide = _entry(compiled, args)
        fast(self.pack, x, self.state.w, self.state.scale, True)
        return self.fx

    def decision_many(self, X: np.ndarray) -> np.ndarray:
        out = np.empty((X.shape[0], self.fx.shape[0]))
        self.settle()
        many = nb.decision_many_explicit if self.explicit else nb.decision_many
        many(self.pack, X, out)
        return out

    def block_scores(self) -> np.ndarray:
        """Per-block scores of the last ``decision``/``learn_round`` call."""
        return self.scores
