"""The one dot product every explicit score, norm and average is made of, summed in a fixed
order that the compiled code reads four doubles at a time.

``lane_dot(a, ao, b, bo, n) = sum_{j < n} a[ao + j] b[bo + j]`` with ``LANES`` (16) partial sums:
``s_k`` sums the products j = k, k + 16, k + 32, ... below ``16 (n // 16)`` in order; the last
``n % 16`` products are added to ``s_0`` in order; then the partial sums are added pairwise,
``((s_0 + s_1) + (s_2 + s_3)) + ...``. Every product and addition is one IEEE operation (a
product added by LLVM's ``fmuladd``: fused where the machine has a fast multiply-add, the same
choice at every call whatever the caller's fastmath flags), so the sum is the same wherever it
is computed: there is no reassociation for the compiler to choose. The Python original
multiplies and adds (no fused multiply-add): it differs from the compiled sum by rounding only.

Why an intrinsic: numba turns LLVM's SLP vectoriser off (``NUMBA_SLP_VECTORIZE=0``) and its loop
vectoriser reorders no floating-point reduction without ``reassoc`` (outside the JIT rules), so
independent scalar partial sums stay scalar whatever their number: measured, two rows of 858
take 362 ns with 4 or 8 scalar sums and 505 ns with 16 (registers spill). The intrinsic
writes the 16 sums as four ``<4 x double>`` vectors itself: the same sums in the same order,
read and added four at a time.

A flat offset ``ao`` into a C-contiguous array of any dimension addresses a row of a matrix
(``r * A.shape[1] + lo``). Arrays that are not C-contiguous (a strided 1-d view) take a scalar
loop with the same 16 sums in the same order; so does the Python original (``.py_func``).
The vector path reads memory directly, so numba's own index checks do not see it: when bounds
checking is on (``NUMBA_BOUNDSCHECK=1``, or ``boundscheck=True`` on the compiled caller) the
codegen adds one explicit check (``_check_extent``: both offsets plus the length within their
arrays, else ``IndexError``) before the loop; when it is off the check is not compiled at all.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.extending import intrinsic, overload

LANES = 16  # partial sums
_WIDTH = 4  # doubles per vector
_VECTORS = LANES // _WIDTH


def muladd(x, y, z):
    """``x y + z``: compiled, LLVM's ``fmuladd`` (one fused multiply-add where the machine has
    a fast one, else a multiply and an add: the same choice at every call, whatever the
    caller's fastmath flags)."""
    return x * y + z


def _declare_muladd(module, ty, suffix):
    """``llvm.fmuladd`` on ``ty`` (a double or a vector of them), declared in ``module``."""
    fnty = ir.FunctionType(ty, [ty, ty, ty])
    return cgutils.get_or_insert_function(module, fnty, f"llvm.fmuladd.{suffix}")


@intrinsic
def _fmuladd(typingctx, x, y, z):
    """``llvm.fmuladd.f64(x, y, z)``."""

    def codegen(context, builder, sig, args):
        return builder.call(_declare_muladd(builder.module, ir.DoubleType(), "f64"), args)

    return types.float64(types.float64, types.float64, types.float64), codegen


@overload(muladd, inline="always")
def _muladd(x, y, z):
    """``muladd`` compiled: ``llvm.fmuladd``."""
    return lambda x, y, z: _fmuladd(x, y, z)  # type: ignore[call-arg]


def _scalar_lane_dot(a, ao, b, bo, n):
    """``lane_dot`` one product at a time (the Python reference, and the compiled loop for
    arrays that are not C-contiguous): the same 16 sums in the same order."""
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
    s8 = s9 = s10 = s11 = s12 = s13 = s14 = s15 = 0.0
    nq = n // 16
    for q in range(nq):
        i = ao + 16 * q
        k = bo + 16 * q
        s0 = muladd(a[i], b[k], s0)
        s1 = muladd(a[i + 1], b[k + 1], s1)
        s2 = muladd(a[i + 2], b[k + 2], s2)
        s3 = muladd(a[i + 3], b[k + 3], s3)
        s4 = muladd(a[i + 4], b[k + 4], s4)
        s5 = muladd(a[i + 5], b[k + 5], s5)
        s6 = muladd(a[i + 6], b[k + 6], s6)
        s7 = muladd(a[i + 7], b[k + 7], s7)
        s8 = muladd(a[i + 8], b[k + 8], s8)
        s9 = muladd(a[i + 9], b[k + 9], s9)
        s10 = muladd(a[i + 10], b[k + 10], s10)
        s11 = muladd(a[i + 11], b[k + 11], s11)
        s12 = muladd(a[i + 12], b[k + 12], s12)
        s13 = muladd(a[i + 13], b[k + 13], s13)
        s14 = muladd(a[i + 14], b[k + 14], s14)
        s15 = muladd(a[i + 15], b[k + 15], s15)
    for j in range(16 * nq, n):
        s0 = muladd(a[ao + j], b[bo + j], s0)
    return (((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))) + (
        ((s8 + s9) + (s10 + s11)) + ((s12 + s13) + (s14 + s15))
    )


def lane_dot(a, ao, b, bo, n):
    """``sum_{j < n} a[ao + j] b[bo + j]`` in the module's fixed order (a and b flat: a
    matrix's row r from column lo is the offset ``r * A.shape[1] + lo``)."""
    return _scalar_lane_dot(a.reshape(-1), ao, b.reshape(-1), bo, n)


OUT_OF_BOUNDS = "lane_dot: an offset plus the length lies outside an operand"


def _check_extent(context, builder, a, ao, b, bo, n):
    """Raise ``IndexError`` unless ``n <= 0`` or both ``[ao, ao + n)`` and ``[bo, bo + n)`` lie
    within their flat arrays (``a``, ``b``: the array structs)."""
    zero = ir.Constant(n.type, 0)
    bad = builder.or_(
        builder.or_(builder.icmp_signed("<", ao, zero), builder.icmp_signed("<", bo, zero)),
        builder.or_(
            builder.icmp_signed(">", builder.add(ao, n), a.nitems),
            builder.icmp_signed(">", builder.add(bo, n), b.nitems),
        ),
    )
    with cgutils.if_unlikely(builder, builder.and_(builder.icmp_signed(">", n, zero), bad)):
        context.call_conv.return_user_exc(builder, IndexError, (OUT_OF_BOUNDS,))


def _vector_codegen(context, builder, sig, args):
    """The 16 sums as four ``<4 x double>`` accumulators over the whole groups of 16, then the
    tail into sum 0 and the pairwise tree; each product added by ``llvm.fmuladd`` (as
    ``muladd``), each addition of the tree a plain IEEE addition, whatever the caller's
    fastmath flags."""
    aty, _, bty, _, _ = sig.args
    a, ao, b, bo, n = args
    i64 = ir.IntType(64)
    dbl = ir.DoubleType()
    vec = ir.VectorType(dbl, _WIDTH)
    vmuladd = _declare_muladd(builder.module, vec, f"v{_WIDTH}f64")
    smuladd = _declare_muladd(builder.module, dbl, "f64")
    sa = cgutils.create_struct_proxy(aty)(context, builder, value=a)
    sb = cgutils.create_struct_proxy(bty)(context, builder, value=b)
    if context.enable_boundscheck:  # NUMBA_BOUNDSCHECK=1 (the check is absent otherwise)
        _check_extent(context, builder, sa, ao, sb, bo, n)
    pa = builder.gep(sa.data, [ao])
    pb = builder.gep(sb.data, [bo])
    nq = builder.sdiv(n, ir.Constant(i64, LANES))
    start = builder.basic_block
    head = builder.append_basic_block("lanes.head")
    body = builder.append_basic_block("lanes.body")
    done = builder.append_basic_block("lanes.done")
    builder.branch(head)
    builder.position_at_end(head)
    q = builder.phi(i64)
    acc = [builder.phi(vec) for _ in range(_VECTORS)]
    q.add_incoming(ir.Constant(i64, 0), start)
    for v in acc:
        v.add_incoming(ir.Constant(vec, [0.0] * _WIDTH), start)
    builder.cbranch(builder.icmp_signed("<", q, nq), body, done)
    builder.position_at_end(body)
    base = builder.mul(q, ir.Constant(i64, LANES))
    nxt = []
    for k in range(_VECTORS):
        off = builder.add(base, ir.Constant(i64, _WIDTH * k))
        xa = builder.load(builder.bitcast(builder.gep(pa, [off]), vec.as_pointer()), align=8)
        xb = builder.load(builder.bitcast(builder.gep(pb, [off]), vec.as_pointer()), align=8)
        nxt.append(builder.call(vmuladd, [xa, xb, acc[k]]))
    q.add_incoming(builder.add(q, ir.Constant(i64, 1)), body)
    for v, x in zip(acc, nxt, strict=True):
        v.add_incoming(x, body)
    builder.branch(head)
    builder.position_at_end(done)
    sums = [
        builder.extract_element(acc[k], ir.Constant(ir.IntType(32), lane))
        for k in range(_VECTORS)
        for lane in range(_WIDTH)
    ]
    first = builder.mul(nq, ir.Constant(i64, LANES))
    tail_head = builder.append_basic_block("lanes.tail_head")
    tail_body = builder.append_basic_block("lanes.tail_body")
    end = builder.append_basic_block("lanes.end")
    builder.branch(tail_head)
    builder.position_at_end(tail_head)
    j = builder.phi(i64)
    s0 = builder.phi(dbl)
    j.add_incoming(first, done)
    s0.add_incoming(sums[0], done)
    builder.cbranch(builder.icmp_signed("<", j, n), tail_body, end)
    builder.position_at_end(tail_body)
    tail = builder.call(
        smuladd, [builder.load(builder.gep(pa, [j])), builder.load(builder.gep(pb, [j])), s0]
    )
    j.add_incoming(builder.add(j, ir.Constant(i64, 1)), tail_body)
    s0.add_incoming(tail, tail_body)
    builder.branch(tail_head)
    builder.position_at_end(end)
    sums[0] = s0
    while len(sums) > 1:
        sums = [builder.fadd(sums[i], sums[i + 1]) for i in range(0, len(sums), 2)]
    return sums[0]


@intrinsic
def _vector_lane_dot(typingctx, a, ao, b, bo, n):
    """``lane_dot`` on two C-contiguous float64 arrays, four doubles at a time."""
    return types.float64(a, types.intp, b, types.intp, types.intp), _vector_codegen


@overload(lane_dot, inline="always")
def _lane_dot(a, ao, b, bo, n):
    """``lane_dot`` compiled: vectors on C-contiguous float64 arrays, else the scalar loop (a
    strided 1-d view)."""
    ok = (
        isinstance(a, types.Array)
        and isinstance(b, types.Array)
        and a.dtype == types.float64
        and b.dtype == types.float64
    )
    if not ok:
        raise TypingError("lane_dot takes two float64 arrays")
    if a.layout == "C" and b.layout == "C":
        return lambda a, ao, b, bo, n: _vector_lane_dot(a, ao, b, bo, n)  # type: ignore[call-arg]
    if a.ndim != 1 or b.ndim != 1:
        raise TypingError("lane_dot: a matrix must be C-contiguous")
    return _scalar_lane_dot
