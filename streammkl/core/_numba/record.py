"""A record of known inputs' buffers and the round's pack as ONE compiled argument (a numba
structref, :class:`RecordPack`), and the one-call round and prediction that take it
(``learn_record``, ``predict_record``): ``known.learn_values`` / ``known.predict_values`` on
the pack's fields, the same code and numbers.

The one-call round of a river record takes the pack, eight arrays (the record's values and
columns, its raw and standardised buffers, the four standardisation statistics), a flag and
the round's address. numba's compiled entry point unboxes each argument on every call: ~30 ns an
array and ~80 ns the pack (measured with empty functions of these signatures: ~600 ns for the
fourteen arguments, ~130 ns for a structref and three scalars). The buffers stay the same from
one record to the next (they change when the model's inputs, its pack or the record's keys
do), so the model binds them once in a record pack (``streammkl.core.model.OnlineMKL``) and
a call unboxes it and the target and round numbers.

A record pack references its arrays (never copies them) and is never pickled or checkpointed,
as the round's pack (``core._numba.pack``).
"""

from __future__ import annotations

import math

from numba import njit, types
from numba.core import cgutils
from numba.core.datamodel import default_manager
from numba.core.datamodel.models import StructRefModel
from numba.experimental import structref
from numba.extending import intrinsic, overload

from streammkl.core._jit import JIT_EXACT
from streammkl.core._numba.known import learn_values, predict_values
from streammkl.core._numba.pack import PACK

F1 = types.float64[::1]
I1 = types.int64[::1]

#: (name, numba type) of every field, in the constructor's order.
RECORD_FIELDS = (
    ("p", PACK), ("vals", F1), ("cols", I1), ("raw", F1), ("count", F1), ("mean", F1),
    ("m2", F1), ("binary", F1), ("xs", F1), ("standardize", types.boolean),
    ("learn_at", types.int64), ("decide_at", types.int64),
)  # fmt: skip


@structref.register
class RecordPackType(types.StructRef):
    """The numba type of a :class:`RecordPack` (one field layout: :data:`RECORD_FIELDS`)."""


class RecordPack(structref.StructRefProxy):
    """A record's buffers and the round's pack, one compiled argument (:func:`new_record`)."""


structref.define_boxing(RecordPackType, RecordPack)
RECORD = RecordPackType(list(RECORD_FIELDS))


def _new_record(p, vals, cols, raw, count, mean, m2, binary, xs, standardize, learn_at, decide_at):
    """A record pack of these fields (the arrays and the pack referenced, not copied)."""
    r = structref.new(RECORD)  # type: ignore[call-arg,var-annotated]
    r.p = p
    r.vals = vals
    r.cols = cols
    r.raw = raw
    r.count = count
    r.mean = mean
    r.m2 = m2
    r.binary = binary
    r.xs = xs
    r.standardize = standardize
    r.learn_at = learn_at
    r.decide_at = decide_at
    return r


def _learn_record(r, y, t, n):
    """``learn_values`` on the record pack's fields (round ``t`` of the schedule, the model's
    ``n``-th, target ``y``): the loss, or a refusal code, having changed nothing."""
    return learn_values(
        r.p, r.vals, r.cols, r.raw, r.count, r.mean, r.m2, r.binary, r.xs, r.standardize, y, t,
        n, r.learn_at,
    )  # fmt: skip


def _predict_record(r):
    """``predict_values`` on the record pack's fields (the leader's scores, into ``p.fx``):
    False, changing nothing, for a value out of range."""
    return predict_values(
        r.p, r.vals, r.cols, r.raw, r.count, r.mean, r.m2, r.binary, r.xs, r.standardize, True,
        r.decide_at,
    )  # fmt: skip


# --- a record pack by the address of its meminfo --------------------------------------------
# An int unboxes in a few ns, a structref in ~80-300 ns (measured), so the model calls the
# record pack by its address (``learn_record_at`` / ``predict_record_at``). Both directions
# are compiled (``_address_of``, ``_record_at``) on numba's data model of a structref, the one
# numba's own ``structref`` code builds on: ONE member, ``meminfo``, the pointer to the NRT
# meminfo that owns the struct (``numba.core.datamodel.models.StructRefModel``; tested on
# numba 0.68.1, pyproject asks for >= 0.59). Nothing reads a CPython object's layout, and
# ``_check_model`` refuses to compile on another data model (loudly: a TypeError, which
# tests/test_river_known_route.py would meet first). That test also checks that the address
# round-trips without taking or dropping a reference. The address is valid while the record
# pack lives: its owner keeps the record (``OnlineMKL._bound``) while it calls by the address.


def _check_model(record):
    """Fail (when compiling) unless numba lays a record pack out as a structref of one member,
    ``meminfo``, a meminfo pointer: what ``_address_of`` and ``_record_at`` read and write."""
    model = default_manager.lookup(record)
    members = len(model.inner_models())
    if not (
        isinstance(model, StructRefModel) and members == 1
        and isinstance(model.get_member_fe_type("meminfo"), types.MemInfoPointer)
    ):  # fmt: skip
        raise TypeError(
            f"numba's structref data model changed ({type(model).__name__}, {members} members):"
            " a record pack's address needs one member, meminfo"
        )


@intrinsic
def _address_of(typingctx, record):
    """The address of the record pack's NRT meminfo (its data model's ``meminfo``), an int."""
    if record != RECORD:
        return None
    _check_model(record)

    def codegen(context, builder, sig, args):
        ref = cgutils.create_struct_proxy(RECORD)(context, builder, value=args[0])
        return builder.ptrtoint(ref.meminfo, context.get_value_type(types.int64))

    return types.int64(RECORD), codegen


@intrinsic
def _record_at(typingctx, address):
    """The record pack whose NRT meminfo is at ``address`` (``record_address``), as a new
    reference (the caller's code releases it at its end)."""
    _check_model(RECORD)

    def codegen(context, builder, sig, args):
        ref = cgutils.create_struct_proxy(RECORD)(context, builder)
        ref.meminfo = builder.inttoptr(args[0], cgutils.voidptr_t)
        out = ref._getvalue()
        context.nrt.incref(builder, RECORD, out)
        return out

    return RECORD(types.int64), codegen


def address_of(record):
    """The address of ``record``'s meminfo (compiled: ``_address_of``; interpreted, the record
    is its own address: a test's namespace)."""
    return record


@overload(address_of)
def _address_of_compiled(record):
    """``address_of`` compiled."""
    return lambda record: _address_of(record)  # type: ignore[call-arg]


def record_at(address):
    """The record pack at ``address`` (compiled: ``_record_at``; interpreted, ``address`` is
    the record itself: a test's namespace)."""
    return address


@overload(record_at)
def _record_at_compiled(address):
    """``record_at`` compiled: the record pack of the meminfo at ``address``."""
    return lambda address: _record_at(address)  # type: ignore[call-arg]


def _record_address(r):
    """The address to call the record pack ``r`` by (``learn_record_at``,
    ``predict_record_at``) while ``r`` lives."""
    return address_of(r)


def _learn_record_at(address, y, t, n):
    """``learn_record`` on the record pack at ``address`` (an int unboxes in a few ns, a
    structref in ~80-300 ns, measured)."""
    return learn_record(record_at(address), y, t, n)


def _learn_record_softmax2_at(address, y, t, n):
    """``learn_record_at``, and the softmax of the first two scores before the update (a
    classifier's two classes under a multiclass loss; ``streammkl.river``'s two-class formula,
    the same operations, no fastmath): ``(loss, p0, p1)``, the probabilities 0.0 when the
    round refused (a negative loss, nothing changed)."""
    r = record_at(address)
    loss = learn_record(r, y, t, n)
    if loss < 0.0:
        return loss, 0.0, 0.0
    pred = r.p.pred
    a = pred[0]
    b = pred[1]
    top = a if a >= b else b
    ea = math.exp(a - top)
    eb = math.exp(b - top)
    total = ea + eb
    return loss, ea / total, eb / total


def _predict_record_at(address):
    """``predict_record`` on the record pack at ``address``."""
    return predict_record(record_at(address))


new_record = njit(**JIT_EXACT)(_new_record)
learn_record = njit(**JIT_EXACT)(_learn_record)
predict_record = njit(**JIT_EXACT)(_predict_record)
learn_record_at = njit(**JIT_EXACT)(_learn_record_at)
learn_record_softmax2_at = njit(**JIT_EXACT)(_learn_record_softmax2_at)
predict_record_at = njit(**JIT_EXACT)(_predict_record_at)
record_address = njit(**JIT_EXACT)(_record_address)
