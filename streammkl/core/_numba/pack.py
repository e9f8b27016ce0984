"""The round's arrays packed into ONE compiled argument (a numba structref), built on demand.

A round reads ~60 arrays and scalars. Passed one by one, each call pays for them twice: the
Python-to-compiled boundary unboxes every argument (~50 ns each: ~3 µs a call), and every
compiled callee takes a reference to each array it receives (an atomic increment and decrement
per array per call: measured at 40 % of a round's time on an 8 x 8 explicit bank). A pack is
unboxed once, and numba removes the reference counts of the fields a function reads in one
stretch: the round's functions take the pack and read their arrays from it.

A pack holds references to the model's arrays (never copies): it is rebuilt whenever they are
reallocated (new inputs, classes or support capacity: ``streammkl.core.update.RoundArgs``). It
is never pickled or checkpointed: the learner's state stays plain numpy arrays (STYLE.md: no
compiled class in learner state). The field types are fixed here, so every compiled function
that takes a pack has one signature and is cached on disk.
"""

from __future__ import annotations

from collections import namedtuple

from numba import njit, types
from numba.core import cgutils
from numba.experimental import structref
from numba.extending import lower_builtin, type_callable

from streammkl.core._jit import JIT, JIT_INLINE, JIT_NORC

try:  # (numba's private layout of NRT's MemInfo; see "the pack's fields" below)
    from numba.core.runtime.nrtdynmod import _meminfo_struct_type
except ImportError:  # pragma: no cover - numba moved its internals
    _meminfo_struct_type = None

F1 = types.float64[::1]
F2 = types.float64[:, ::1]
F3 = types.float64[:, :, ::1]
F4 = types.float64[:, :, :, ::1]
I1 = types.int64[::1]
I2 = types.int64[:, ::1]
B1 = types.boolean[::1]
B2 = types.boolean[:, ::1]
INT = types.int64
FLOAT = types.float64

#: (name, numba type) of every field, in the constructor's order.
FIELDS = (
    # the schedule: code, constants, per-block accumulators, this round's steps, FTRL's state
    ("sched", INT), ("sched_p", F1), ("acc", F1), ("etas", F1), ("prev", F1), ("zn", F1),
    # the layout of the bank (streammkl.core.state.Layout)
    ("kinds", I1), ("kp", F2), ("is_explicit", B1), ("view_of", I1), ("masks", F2),
    ("view_full", B1), ("ex_blocks", I1), ("im_blocks", I1), ("ex_off", I1), ("ex_kind", I1),
    ("ex_norm", B1), ("phi_src", F2), ("rff_wt", F2), ("rff_b", F1),
    # the loss, the prox steps, the projection and the budget
    ("loss_code", INT), ("loss_p", FLOAT), ("step_codes", I1), ("step_p", F2),
    ("step_groups", B2), ("radius", FLOAT), ("policy", INT), ("capacity", INT),
    # the learned state (streammkl.core.state.BlockState)
    ("w", F2), ("scale", F1), ("norms", F1), ("sx", F2), ("ssq", F2), ("sv", F2), ("coef", F2),
    ("kself", F2), ("sage", I1), ("counters", I1), ("gram", F4), ("bias", F1),
    ("bias_lr", FLOAT),
    # work buffers of a round
    ("phi", F1), ("scores", F2), ("fx", F1), ("v", F1), ("xsq", F1), ("dots", F1),
    ("newnorms", F1), ("fsq", F1), ("blk_c", F1), ("blk_steps", F1), ("all_blocks", B1),
    ("prox_work", F1),
    # averaged iterates (exponential averages, the leader's prediction) ...
    ("avg_w", F3), ("avg_bias", F2), ("avg_loss", F1), ("avg_count", F1), ("horizons", F1),
    ("rho", FLOAT), ("every", INT), ("pred", F1), ("scratch", F1), ("ascores", F2),
    ("row_dots", F1),
    # ... and the running average of Prop. 4 (average=True)
    ("average", types.boolean), ("w_avg", F2),
    # two score rows kept each other's negation (a two-class softmax or multiclass hinge)
    ("mirror", types.boolean),
    # the round of explicit blocks under FTRL with blockwise prox steps (rounds.explicit_round)
    ("fast", types.boolean),
    # the input whose feature maps phi holds (phi_valid[0] = 1), so that a prediction then the
    # round on the same input featurise once (the river learners' predict_proba_one, learn_one)
    ("phi_x", F1), ("phi_valid", I1),
    # the sparse round of wide records (streammkl.core._numba.wide): the lazy factors (a state
    # array) and the layout's per-input map (Layout.in_pos, ex_used, blk_inputs)
    ("lazy", F2), ("in_pos", I2), ("ex_used", I1), ("blk_inputs", I1),
)  # fmt: skip

NAMES = tuple(name for name, _ in FIELDS)


@structref.register
class RoundPackType(types.StructRef):
    """The numba type of a :class:`RoundPack` (one concrete field layout: :data:`FIELDS`)."""


class RoundPack(structref.StructRefProxy):
    """A round's arrays, one compiled argument (build with :func:`new_pack`)."""


structref.define_boxing(RoundPackType, RoundPack)
PACK = RoundPackType(list(FIELDS))

#: The fields the explicit round reads (``rounds.explicit_round``), as a named tuple of them:
#: a compiled function without reference counting (``JIT_NORC``) cannot read a structref's
#: fields (numba's NRT owns its data), but reads a named tuple's for free.
EXPLICIT_FIELDS = (
    "phi", "w", "scale", "ex_blocks", "ex_off", "ex_kind", "ex_norm", "phi_src", "rff_wt",
    "rff_b", "scores", "fx", "v", "fsq", "etas", "bias", "pred", "avg_w", "avg_bias", "avg_loss",
    "avg_count", "horizons", "rho", "every", "scratch", "ascores", "row_dots", "mirror", "norms",
    "loss_code", "loss_p", "sched", "sched_p", "acc", "prev", "zn", "blk_c", "blk_steps",
    "newnorms", "step_codes", "step_p", "step_groups", "bias_lr", "phi_x", "phi_valid",
)  # fmt: skip
ExplicitRound = namedtuple("ExplicitRound", EXPLICIT_FIELDS)  # type: ignore[misc]


def _explicit_view(p):
    """The pack's fields the explicit round reads, as an ``ExplicitRound`` (references)."""
    return ExplicitRound(  # type: ignore[call-arg]
        p.phi, p.w, p.scale, p.ex_blocks, p.ex_off, p.ex_kind, p.ex_norm, p.phi_src, p.rff_wt,
        p.rff_b, p.scores, p.fx, p.v, p.fsq, p.etas, p.bias, p.pred, p.avg_w, p.avg_bias,
        p.avg_loss, p.avg_count, p.horizons, p.rho, p.every, p.scratch, p.ascores, p.row_dots,
        p.mirror, p.norms, p.loss_code, p.loss_p, p.sched, p.sched_p, p.acc, p.prev, p.zn,
        p.blk_c, p.blk_steps, p.newnorms, p.step_codes, p.step_p, p.step_groups, p.bias_lr,
        p.phi_x, p.phi_valid,
    )  # fmt: skip


explicit_view = njit(**JIT_INLINE)(_explicit_view)

# --- the pack's fields without reference counting --------------------------------------------
# A function that reads the pack's fields (``p.w``) takes a reference to each array read and
# drops it at its end: an NRT_incref and an NRT_decref call (two atomic operations) per array,
# ~90 per call of the explicit round's view (``explicit_view``: 45 arrays), measured at ~0.2 µs
# a round called one at a time (the compiled loops make the view once per run). ``field`` reads
# one without: a borrowed reference, valid while the pack lives (its caller's), for functions
# compiled without reference counting (``JIT_NORC``), which take and drop none; compiled with
# them, it takes one as ``p.name`` does, so it is right in either. numba's own structref code
# reads the data through ``NRT_MemInfo_data_fast``, which a function without reference counting
# cannot call: ``_data_of`` reads the same member of NRT's MemInfo struct (numba's
# ``nrtdynmod._meminfo_struct_type``: refcount, destructor, its info, data, size; tested on
# numba 0.68.1). Where a numba release has another layout, the functions that read fields so
# are compiled with reference counting (``JIT_BORROWED``): slower, the same numbers.


def _meminfo_data_is_member_3() -> bool:
    """Whether NRT's MemInfo struct has its data pointer as member 3 (numba 0.59 to 0.68)."""
    members: list = list(getattr(_meminfo_struct_type, "elements", []))
    return len(members) >= 4 and str(members[3]) == "i8*"


#: The flags of a function that reads the pack through ``field`` and takes no reference:
#: ``JIT_NORC`` where this numba has the MemInfo layout ``_data_of`` reads; otherwise ``JIT``
#: (references counted, as ``p.name`` does: slower, the same numbers) rather than failing.
JIT_BORROWED: dict = JIT_NORC if _meminfo_data_is_member_3() else dict(JIT)


def _data_of(context, builder, typ, pack):
    """The data struct of ``pack`` (a structref of type ``typ``: numba's structref data
    model), read through its meminfo."""
    ref = cgutils.create_struct_proxy(typ)(context, builder, value=pack)
    if context.enable_nrt:
        data = context.nrt.meminfo_data(builder, ref.meminfo)
    else:
        info = builder.bitcast(ref.meminfo, _meminfo_struct_type.as_pointer())
        data = builder.load(cgutils.gep_inbounds(builder, info, 0, 3))
    valtype = typ.get_data_type()
    alloc = context.data_model_manager[valtype].get_value_type()
    return cgutils.create_struct_proxy(valtype)(
        context, builder, ref=builder.bitcast(data, alloc.as_pointer())
    )


def field(p, name):
    """``getattr(p, name)``; compiled (``p`` a structref: a pack, a record pack; ``name`` a
    string constant), ``p.name`` without a reference taken where the caller counts none (see
    above). (numba's low-level typing and lowering: an ``overload`` would be compiled as a
    function of its own, which, without reference counting, may not return an array.)"""
    return getattr(p, name)


@type_callable(field)
def _field_type(context):
    """The type of ``field(p, name)``: the field's."""

    def typer(p, name):
        if isinstance(p, types.StructRef) and isinstance(name, types.StringLiteral):
            return p.field_dict.get(name.literal_value)
        return None

    return typer


@lower_builtin(field, types.Any, types.Any)
def _field_code(context, builder, sig, args):
    """The code of ``field(p, name)``: the member of the data struct, a reference taken only
    where the caller counts them."""
    typ, attr = sig.args[0], sig.args[1].literal_value
    out = getattr(_data_of(context, builder, typ, args[0]), attr)
    if context.enable_nrt:
        context.nrt.incref(builder, sig.return_type, out)
    return out


def _borrowed_view(p):
    """``explicit_view`` of borrowed fields (``field``): for a function compiled without
    reference counting, which reads the pack's fields then without any."""
    return ExplicitRound(  # type: ignore[call-arg]
        field(p, "phi"), field(p, "w"), field(p, "scale"), field(p, "ex_blocks"),
        field(p, "ex_off"), field(p, "ex_kind"), field(p, "ex_norm"), field(p, "phi_src"),
        field(p, "rff_wt"), field(p, "rff_b"), field(p, "scores"), field(p, "fx"), field(p, "v"),
        field(p, "fsq"), field(p, "etas"), field(p, "bias"), field(p, "pred"), field(p, "avg_w"),
        field(p, "avg_bias"), field(p, "avg_loss"), field(p, "avg_count"), field(p, "horizons"),
        field(p, "rho"), field(p, "every"), field(p, "scratch"), field(p, "ascores"),
        field(p, "row_dots"), field(p, "mirror"), field(p, "norms"), field(p, "loss_code"),
        field(p, "loss_p"), field(p, "sched"), field(p, "sched_p"), field(p, "acc"),
        field(p, "prev"), field(p, "zn"), field(p, "blk_c"), field(p, "blk_steps"),
        field(p, "newnorms"), field(p, "step_codes"), field(p, "step_p"), field(p, "step_groups"),
        field(p, "bias_lr"), field(p, "phi_x"), field(p, "phi_valid"),
    )  # fmt: skip


borrowed_view = njit(**JIT_INLINE)(_borrowed_view)


def _new_pack(
    sched, sched_p, acc, etas, prev, zn,
    kinds, kp, is_explicit, view_of, masks, view_full, ex_blocks, im_blocks, ex_off, ex_kind,
    ex_norm, phi_src, rff_wt, rff_b,
    loss_code, loss_p, step_codes, step_p, step_groups, radius, policy, capacity,
    w, scale, norms, sx, ssq, sv, coef, kself, sage, counters, gram, bias, bias_lr,
    phi, scores, fx, v, xsq, dots, newnorms, fsq, blk_c, blk_steps, all_blocks, prox_work,
    avg_w, avg_bias, avg_loss, avg_count, horizons, rho, every, pred, scratch, ascores, row_dots,
    average, w_avg, mirror, fast, phi_x, phi_valid, lazy, in_pos, ex_used, blk_inputs,
):  # fmt: skip
    """A pack of these fields (the arrays are referenced, not copied)."""
    p = structref.new(PACK)  # type: ignore[call-arg,var-annotated]
    p.sched = sched
    p.sched_p = sched_p
    p.acc = acc
    p.etas = etas
    p.prev = prev
    p.zn = zn
    p.kinds = kinds
    p.kp = kp
    p.is_explicit = is_explicit
    p.view_of = view_of
    p.masks = masks
    p.view_full = view_full
    p.ex_blocks = ex_blocks
    p.im_blocks = im_blocks
    p.ex_off = ex_off
    p.ex_kind = ex_kind
    p.ex_norm = ex_norm
    p.phi_src = phi_src
    p.rff_wt = rff_wt
    p.rff_b = rff_b
    p.loss_code = loss_code
    p.loss_p = loss_p
    p.step_codes = step_codes
    p.step_p = step_p
    p.step_groups = step_groups
    p.radius = radius
    p.policy = policy
    p.capacity = capacity
    p.w = w
    p.scale = scale
    p.norms = norms
    p.sx = sx
    p.ssq = ssq
    p.sv = sv
    p.coef = coef
    p.kself = kself
    p.sage = sage
    p.counters = counters
    p.gram = gram
    p.bias = bias
    p.bias_lr = bias_lr
    p.phi = phi
    p.scores = scores
    p.fx = fx
    p.v = v
    p.xsq = xsq
    p.dots = dots
    p.newnorms = newnorms
    p.fsq = fsq
    p.blk_c = blk_c
    p.blk_steps = blk_steps
    p.all_blocks = all_blocks
    p.prox_work = prox_work
    p.avg_w = avg_w
    p.avg_bias = avg_bias
    p.avg_loss = avg_loss
    p.avg_count = avg_count
    p.horizons = horizons
    p.rho = rho
    p.every = every
    p.pred = pred
    p.scratch = scratch
    p.ascores = ascores
    p.row_dots = row_dots
    p.average = average
    p.w_avg = w_avg
    p.mirror = mirror
    p.fast = fast
    p.phi_x = phi_x
    p.phi_valid = phi_valid
    p.lazy = lazy
    p.in_pos = in_pos
    p.ex_used = ex_used
    p.blk_inputs = blk_inputs
    return p


new_pack = njit(**JIT)(_new_pack)
