"""Every compiled kernel in core/_numba/ agrees with its Python original (``.py_func``)."""

from __future__ import annotations

import sys
import zlib
from types import SimpleNamespace

import numpy as np
import pytest
from numba import njit
from numba.core.registry import CPUDispatcher

from streammkl.core import OnlineMKL, kernels, losses, regularizers, schedules
from streammkl.core import _numba as nb
from streammkl.core._jit import JIT
from streammkl.core._numba import rounds as nb_rounds
from streammkl.core._numba.pack import NAMES
from streammkl.core._numba.record import RECORD_FIELDS


def compiled_functions():
    return sorted(n for n, f in vars(nb).items() if isinstance(f, CPUDispatcher))


SCALAR_KERNELS = [
    "kernel_value", "gram", "view_dot", "dot4", "dot4_pair", "axpy_sqnorm", "axpby_sqnorm",
    "loss_grad", "loss_values", "prox_squared_l1", "project_l1_ball", "prox_power",
    "prox_norm_step", "prox_norm_step_into", "squared_l1_norms", "schedule_eta", "fast_cos",
    "map_cos", "uniform", "gather", "scatter",
    "weighted_squared_l1", "weighted_l1_ball", "decreasing_root", "ball_multiplier", "block_steps",
    "secular_root", "dot4_row", "dot4_rows", "dot4_row_sq", "dot4_rows_sq", "rows_dot4",
    "axpby_sqnorm_row", "absmax", "cosines", "cos_of", "negate_row", "blockwise", "prox_blockwise",
    "prox_blockwise_steps",
    "seed_state", "philox", "unit_pair", "draw_rows", "draw_row", "crc32", "nearest_sq",
]  # fmt: skip
BINNING_LOOPS = ["binning_hash", "binning_column"]  # test_random_binning_compiled_equal_python
MODEL_LOOPS = [
    "learn_many", "learn_round", "explicit_phi", "block_scores", "apply_prox_steps",
    "zero_or_fold_block", "explicit_sqnorm", "decision", "average_explicit", "decision_many",
    "support_expansion", "support_dots", "dots_expansion", "ftrl_explicit", "round_body",
    "leader", "average_scores", "track_averages", "update_averages", "learn_predict", "new_pack",
    "explicit_scores", "implicit_scores", "all_average_scores", "explicit_view", "explicit_round",
    "borrowed_view", "explicit_decision", "decision_total", "ftrl_store", "ftrl_scales",
    "explicit_phi_of",
    "check_example", "check_target", "learn_predict_explicit", "learn_many_explicit",
    "explicit_md_round", "learn_predict_md", "explicit_front", "explicit_step",
    "decision_explicit", "decision_many_explicit", "ftrl_mixed", "support_step", "rescale_block",
    "with_kernelized_scores", "apply_prox_steps_into", "explicit_round_rows",
    "explicit_round_first", "mirror_rows",
]  # fmt: skip
WIDE_LOOPS = [
    "wide_plan", "wide_route", "wide_features", "wide_scores", "wide_average_scores", "wide_store",
    "wide_averages", "wide_round", "wide_decision", "learn_predict_wide", "decision_wide",
    "settle", "settle_block", "block_sq", "per_input", "add_run", "dot_avg", "sparse_cached",
    "remember_sparse", "step_run", "scatter_sparse", "learn_sparse_wide", "decision_sparse_wide",
    "project_rows",  # (bit for bit against one row at a time: tests/test_wide_rounds.py)
]  # fmt: skip
BUDGET_LOOPS = [
    "exp_reduced", "fast_exp", "exp_many", "table_loss", "segment_kernels", "top_direction",
    "merge_energy", "best_merge_point", "direction_cosine", "merge_partner", "merge_plan", "loaded",
    "refresh_inverse", "gram_insert", "cheapest_projection", "solve_projection", "project_out",
    "smallest_pair", "remove_pair", "merge_pairs", "add_pair", "shift_scores", "gram_border",
    "budget_step", "make_room", "kernel_row", "weighted_sum",
]  # fmt: skip
PLACE_LOOPS = ["place_inputs"]
KNOWN_LOOPS = [
    "learn_values", "predict_values", "learn_predict_at", "scatter_record", "new_record",
    "learn_record",
    "predict_record", "learn_record_at", "learn_record_softmax2_at", "predict_record_at",
    "record_address",
    "standardize_one", "standardize_row", "standardize_rows",
]  # fmt: skip
# parity-tested in tests/test_structured_decoders.py, tests/test_structured_labeler.py and
# tests/test_structured_pruning.py
SEQUENCE_LOOPS = [
    "viterbi_cost", "viterbi", "viterbi_hamming", "logsumexp_row", "forward_backward",
    "sequence_scores", "pair_kernel", "sequence_step", "b1_pruned_expansion",
]  # fmt: skip
# parity-tested in tests/test_parser_decoder.py, tests/test_parser_features.py and
# tests/test_hashed_blocks.py
PARSER_LOOPS = [
    "max_arborescence", "greedy_heads", "find_cycle", "arc_scores", "arc_features", "arc_key",
    "head_prefix", "atom_value", "distance_bucket", "mix", "finish", "sparse_step",
    "sparse_rescale", "exact_norms", "block_sqnorm", "zero_entries",
]  # fmt: skip
# parity-tested in tests/test_support_merge.py
SUPPORT_LOOPS = ["pair_views", "support_sqnorms", "move_pair", "shrink_support"]
COVERED = set()


def _both(name, *args):
    COVERED.add(name)
    f = getattr(nb, name)
    a = [np.copy(x) if isinstance(x, np.ndarray) else x for x in args]
    b = [np.copy(x) if isinstance(x, np.ndarray) else x for x in args]
    ra, rb = f(*a), f.py_func(*b)
    if isinstance(ra, tuple):  # several results, of different shapes
        for xa, xb in zip(ra, rb, strict=True):
            np.testing.assert_allclose(xa, xb, rtol=1e-12, atol=1e-13)
    elif ra is not None or rb is not None:
        np.testing.assert_allclose(ra, rb, rtol=1e-12, atol=1e-13)
    for xa, xb in zip(a, b, strict=True):  # outputs written in place
        if isinstance(xa, np.ndarray):
            np.testing.assert_allclose(xa, xb, rtol=1e-12, atol=1e-13)
    return ra


def test_scalar_and_vector_kernels():
    rng = np.random.default_rng(0)
    for kind, p0, p1, norm in [
        (0, 0, 0, True),
        (1, 3, 1.0, True),
        (2, 0.7, 0, False),
        (3, 1.5, 0, False),
    ]:
        _both("kernel_value", kind, p0, p1, norm, 0.3, 1.2, 2.0, 0.9)
        X, Y = rng.normal(size=(4, 3)), rng.normal(size=(5, 3))
        mask = np.array([1.0, 0.0, 1.0])
        _both("gram", kind, p0, p1, norm, mask, False, X, Y, np.zeros((4, 5)))
    _both("view_dot", rng.normal(size=4), rng.normal(size=4), np.ones(4), True)
    _both("dot4", rng.normal(size=11), rng.normal(size=11), 1, 10)
    z, X = rng.normal(size=11), rng.normal(size=(3, 11))
    pair = _both("dot4_pair", z, X, 1, 11)
    assert pair == (nb.dot4(z, X[1], 0, 11), nb.dot4(z, X[2], 0, 11))  # bit for bit
    # the rows' kernels (unsigned indices, no views): each sum bit for bit dot4's
    A, v = rng.normal(size=(3, 14)), rng.normal(size=14)
    assert _both("dot4_row", A, 2, v, 1, 14) == nb.dot4(A[2], v, 1, 14)
    assert _both("dot4_rows", A, 0, 2, v, 1, 14) == (nb.dot4(A[0], v, 1, 14),
                                                     nb.dot4(A[2], v, 1, 14))  # fmt: skip
    assert _both("dot4_row_sq", A, 1, v, 3, 14) == (nb.dot4(A[1], v, 3, 14),
                                                    nb.dot4(v, v, 3, 14))  # fmt: skip
    three = _both("dot4_rows_sq", A, 0, 1, v, 2, 13)
    assert three == (nb.dot4(A[0], v, 2, 13), nb.dot4(A[1], v, 2, 13), nb.dot4(v, v, 2, 13))
    out = np.zeros(3)
    _both("rows_dot4", A, v, 1, 14, out)
    nb.rows_dot4(A, v, 1, 14, out)
    assert out.tolist() == [nb.dot4(A[r], v, 1, 14) for r in range(3)]
    B, C = A.copy(), A.copy()
    assert _both("axpby_sqnorm_row", B, 1, v, 0.8, 0.3, 1, 13) == nb.axpby_sqnorm(
        C[1], v, 0.8, 0.3, 1, 13
    )
    nb.axpby_sqnorm_row(B, 1, v, 0.8, 0.3, 1, 13)
    assert np.array_equal(B, C)
    assert _both("absmax", v, 2, 13) == np.abs(v[2:13]).max()
    _both("cosines", rng.normal(size=9) * 50, 1, 8, 0.5)
    _both("cosines", np.array([1.0, 2e5, -3.0]), 0, 3, 0.5)  # libm's cosine beyond the range
    offsets = rng.normal(size=9) * 50
    np.testing.assert_allclose(_both("cos_of", offsets), np.cos(offsets), rtol=1e-13, atol=1e-15)
    N = A.copy()
    _both("negate_row", N, 0, 2, 3, 11)
    nb.negate_row(N, 0, 2, 3, 11)
    assert np.array_equal(N[2, 3:11], -A[0, 3:11]) and np.array_equal(N[2, :3], A[2, :3])
    _both("axpy_sqnorm", rng.normal(size=11), rng.normal(size=11), 0.3, 1, 10)
    _both("axpby_sqnorm", rng.normal(size=11), rng.normal(size=11), 0.8, 0.3, 1, 10)
    for code in range(7):
        K = 3 if code >= 5 else 1
        y = 2.0 if code >= 5 else (1.0 if code < 2 else 0.3)
        _both("loss_grad", code, 0.2, rng.normal(size=K), y, np.zeros(K))
        _both("loss_values", code, 0.2, rng.normal(size=(6, K)), np.full(6, y), np.zeros(K),
              np.zeros(6))  # fmt: skip
    b = np.abs(rng.normal(size=6))
    _both("prox_squared_l1", b, 0.4, np.zeros(6))
    _both("project_l1_ball", b, 1.0, np.zeros(6))
    _both("prox_power", 1.3, 0.5, 1.5)
    s = np.abs(rng.normal(size=6)) + 0.1
    group = np.array([True, True, False, True, True, True])
    for code in range(9):
        if code == nb.P_L1:
            continue
        p1 = 1.5 if code == nb.P_GROUPLQ else 0.4
        for steps in (np.full(6, 0.7), s):  # one step (the paper's prox), per-block steps
            _both("prox_norm_step", code, 0.3, p1, group, 3 * b, steps, np.zeros(6))
    for code in (nb.P_L2, nb.P_BLOCKSOFT, nb.P_GROUPLQ):  # the allocation-free steps
        assert _both("blockwise", code)
        p1 = 1.5 if code == nb.P_GROUPLQ else 0.4
        out = _both("prox_blockwise", code, 0.3, p1, group, 3 * b, s, np.zeros(6))
        np.testing.assert_array_equal(out, nb.prox_norm_step(code, 0.3, p1, group, 3 * b, s,
                                                             np.zeros(6)))  # fmt: skip
    codes = np.array([nb.P_L2, nb.P_BLOCKSOFT, nb.P_GROUPLQ], dtype=np.int64)
    params = np.array([[0.3, 0.4], [0.2, 0.0], [0.1, 1.5]])
    groups = np.array([group, ~group, np.ones(6, np.bool_)])
    chained = _both("prox_blockwise_steps", codes, params, groups, 3 * b, s, np.zeros(6))
    expect = 3 * b  # the steps one after the other
    for code, (p0, p1), g in zip(codes, params, groups, strict=True):
        expect = nb.prox_norm_step(code, p0, p1, g, expect, s, np.zeros(6))
    np.testing.assert_array_equal(chained, expect)
    assert not _both("blockwise", nb.P_SQGROUP)
    # the squared group lasso without allocating: Alg. 2's numbers bit for bit (ties included)
    tied = np.array([0.5, -1.25, 0.5, 2.0, -0.5, 1.25])
    for norms_in in (3 * b, tied, -tied, np.zeros(6)):
        for lam in (0.4, 0.03, 5.0):
            out, work = np.full(6, 9.0), np.zeros(6)
            _both("squared_l1_norms", norms_in, lam, group, out, work)
            nb.squared_l1_norms(norms_in, lam, group, out, work)
            assert out[~group].tolist() == [9.0]  # outside the group: untouched
            assert out[group].tolist() == nb.prox_squared_l1(norms_in[group], lam,
                                                             np.zeros(5)).tolist()  # fmt: skip
    for code in range(9):
        if code == nb.P_L1:
            continue
        p1 = 1.5 if code == nb.P_GROUPLQ else 0.4
        for steps in (np.full(6, 0.7), s):
            into = _both("prox_norm_step_into", code, 0.3, p1, group, 3 * b, steps, np.zeros(6),
                         np.zeros(6))  # fmt: skip
            assert into.tolist() == nb.prox_norm_step(code, 0.3, p1, group, 3 * b, steps,
                                                      np.zeros(6)).tolist()  # fmt: skip
    _both("uniform", s, group)
    _both("gather", b, group)
    _both("scatter", b[:5], group, np.zeros(6))
    _both("weighted_squared_l1", b, s, 0.4, np.zeros(6))
    _both("weighted_l1_ball", b, s, 1.0, np.zeros(6))
    _both("decreasing_root", b, s, 0.3, 1.0)
    _both("ball_multiplier", b, s, 0.5)
    assert nb.decreasing_root(b, s, 0.3, 1.0) == _both("secular_root", b, s, 0.3, 1.0, False)
    assert nb.ball_multiplier(b, s, 0.5) == _both("secular_root", b, s, 0.0, 0.25, True)
    for code in range(3):
        _both("schedule_eta", code, 0.5, 7)
    for code in range(5):
        _both("block_steps", code, np.array([0.5, 1e-8, 0.9]), 7, np.abs(rng.normal(size=7)),
              s, 0.8, np.zeros(7))  # fmt: skip
    for x in (0.0, 0.3, -2.0, 100.5, -9.9e4):
        _both("fast_cos", x)
        _both("map_cos", x)
    for entropy in (0, 7, 2**32 + 5, 2**48 - 1):  # numpy's own words: test_kernel_identity
        _both("seed_state", np.uint64(entropy), np.zeros(4, dtype=np.uint64))
    u = np.uint64
    _both("philox", u(1), u(2), u(3), u(4), u(5), u(2**32 - 1))
    _both("unit_pair", 7, u(1), u(9), u(10))
    keys = np.array([0, 5, 2**32 - 1], dtype=np.uint64)
    for n in (1, 6, 7):  # even and odd rows
        _both("draw_rows", keys, keys[::-1].copy(), u(0), True, 1.5, 0.0, np.zeros((3, n)))
        _both("draw_rows", keys, keys[::-1].copy(), u(1), False, -1.0, 2.0, np.zeros((3, n)))
        scratch = (np.zeros(4), np.zeros(4))
        _both("draw_row", u(3), u(2**32 - 1), u(0), True, 0.5, 0.0, np.zeros(n), *scratch)
        _both("draw_row", u(3), u(8), u(1), False, 0.0, 6.0, np.zeros(n), *scratch)
    name = np.frombuffer("rff(gamma=1/median,D=256)\x1fwörd".encode(), dtype=np.uint8)
    for start, lo in ((0, 0), (zlib.crc32(b"seed"), 5), (2**32 - 1, name.size)):
        crc = _both("crc32", u(start), name, lo, name.size)
        assert crc == zlib.crc32(name[lo:].tobytes(), start)  # zlib's, continued from start
    Z, x = rng.normal(size=(7, 3)), rng.normal(size=5)
    idx = np.array([4, 0, 2], dtype=np.int64)  # (the landmarks' inputs among x's)
    near = _both("nearest_sq", Z, x, idx)
    assert near == pytest.approx(min(sum((x[i] - z[k]) ** 2 for k, i in enumerate(idx)) for z in Z))
    assert _both("nearest_sq", Z[:0], x, idx) == np.inf
    assert set(SCALAR_KERNELS) <= COVERED  # (other files' tests add theirs: the set is shared)


# Module level on purpose: a compiled function collected mid-session leaves dead weak proxies in
# numba's shared state, which river's memory walker (check_bounded_memory_growth) then trips on.
@njit(**{**JIT, "cache": False})  # the library's flags: fast_cos is inlined with its caller's
def _fast_cos_loop(v, out):
    for i in range(v.shape[0]):
        out[i] = nb.fast_cos(v[i])


def test_fast_cos_is_within_two_ulp_of_the_library_cosine():
    """The random Fourier maps' cosine (a vectorisable polynomial): checked against math.cos
    over the range it serves, including every quadrant boundary region."""
    rng = np.random.default_rng(1)
    xs = np.concatenate([
        rng.normal(scale=30.0, size=200_000),
        rng.uniform(-nb.FAST_COS_LIMIT, nb.FAST_COS_LIMIT, size=200_000),
        np.arange(-400, 400) * (np.pi / 4),  # quadrant edges, where reduction errors show
    ])  # fmt: skip
    fast = np.array([nb.fast_cos(x) for x in xs[:2000]])
    ref = np.cos(xs)

    out = np.empty_like(xs)
    _fast_cos_loop(xs, out)
    np.testing.assert_array_equal(fast, out[:2000])  # the same compiled code inline or not
    err = np.abs(out - ref)
    assert err.max() <= 2.5 * np.spacing(1.0)  # |cos| <= 1: absolute error within ~2 ulp of 1
    assert np.all(np.abs(out) <= 1.0)


@njit(**{**JIT, "cache": False})  # the library's flags: map_cos is inlined with its caller's
def _map_cos_loop(v, out):
    for i in range(v.shape[0]):
        out[i] = nb.map_cos(v[i])


def test_map_cos_is_within_its_stated_error_of_the_library_cosine():
    """The feature maps' cosine (one degree-17 polynomial after reduction by pi): its largest
    absolute error against np.cos is below MAP_COS_ERROR (4e-16; 2.2e-16 measured) on a dense
    grid, across every reduction boundary (multiples of pi/2) and up to FAST_COS_LIMIT, and on
    the arguments a default bank's Fourier and additive maps produce on data; exactly 1 at 0
    (an additive block's free components, anchor 1, map to exactly 0: with 1 - 1.7e-11 there,
    a degree-11 polynomial's, their weights drifted in an uninterrupted run and not in a
    restored one, whose saved state keeps only the used columns)."""
    from streammkl.river import defaults

    rng = np.random.default_rng(3)
    m = OnlineMKL(kernels=defaults.kernel_bank(), loss=losses.Hinge(), seed=0)
    X = rng.normal(size=(400, 3)) * np.array([1.0, 3.0, 0.2])
    for x in X:
        m.learn(x, 1.0 if x[0] * x[1] > 0 else -1.0)
    lay = m._layout
    Xp = np.zeros((X.shape[0], lay.rff_wt.shape[0]))
    Xp[:, : X.shape[1]] = X
    fourier, additive = [], []
    for blk in lay.ex_blocks:
        a, e = int(lay.ex_off[blk]), int(lay.ex_off[blk + 1])
        if lay.ex_kind[blk] == nb.MAP_RFF:
            rows = int(lay.phi_src[0, a]) + np.arange(e - a)
            fourier.append(Xp @ lay.rff_wt[:, rows] + lay.rff_b[rows])
        elif lay.ex_kind[blk] == nb.MAP_ADDITIVE:
            src = lay.phi_src[:, a:e]
            used = src[0] < X.shape[1]
            additive.append(src[1, used] + src[2, used] * X[:, src[0, used].astype(int)])
    z = np.concatenate([f.ravel() for f in fourier + additive])
    assert len(fourier) == len(defaults.RBF_SCALES) and len(additive) == 1
    xs = np.concatenate([
        np.linspace(-50.0, 50.0, 2_000_001),  # the maps' range (|z| < 50 on standardised data)
        rng.uniform(-nb.FAST_COS_LIMIT, nb.FAST_COS_LIMIT, size=200_000),
        (np.arange(-400, 400)[:, None] * (np.pi / 2) + [-1e-9, 0.0, 1e-9]).ravel(),  # the
        z,  # reduction's boundaries, and the maps' own arguments
    ])  # fmt: skip
    out = np.empty_like(xs)
    _map_cos_loop(xs, out)
    err = np.abs(out - np.cos(xs))
    assert err.max() <= nb.MAP_COS_ERROR
    assert nb.map_cos(0.0) == 1.0 and np.count_nonzero(xs == 0.0) >= 2  # exact at 0, inline too:
    assert np.all(out[xs == 0.0] == 1.0)  # an additive block's free components stay at 0
    assert np.all(np.abs(out) <= 1.0 + nb.MAP_COS_ERROR)
    one = np.array([nb.map_cos(x) for x in xs[:2000:7]])
    np.testing.assert_array_equal(one, out[:2000:7])  # the same compiled code inline or not
    assert np.abs(z).max() < 50.0


def test_fast_exp_is_within_two_ulp_of_the_library_exponential():
    """The Gaussian kernel's exponential (a vectorisable polynomial, scalar and batched alike)
    against math.exp over every argument a kernel produces, and 0 below EXP_FLOOR."""
    rng = np.random.default_rng(2)
    xs = np.concatenate([
        -rng.exponential(2.0, size=100_000), rng.uniform(nb.EXP_FLOOR, 0.0, size=100_000),
        -np.logspace(-300, 2.8, 2000), [0.0, -0.0, nb.EXP_FLOOR, 1.0, 700.0],
    ])  # fmt: skip
    out = np.empty_like(xs)
    nb.exp_many(xs, out, xs.size)
    np.testing.assert_array_equal(out[:3000], [nb.fast_exp(v) for v in xs[:3000]])
    ref = np.exp(xs)
    assert np.max(np.abs(out - ref) / np.spacing(ref)) <= 2.0
    low = np.array([-708.5, -745.2, -1e6])
    nb.exp_many(low, out, 3)
    assert out[:3].tolist() == [0.0, 0.0, 0.0] and nb.fast_exp(-1e6) == 0.0


def test_fourier_features_fall_back_to_the_library_cosine_for_huge_arguments():
    from streammkl.core import OnlineMKL, kernels

    m = OnlineMKL(kernels=(kernels.RBF(1.0, n_components=16),), seed=2)
    m.learn(np.array([1.0, -2.0]), 1)
    lay = m._layout
    for scale in (1.0, 1e7):  # 1e7: arguments beyond FAST_COS_LIMIT
        x = np.array([0.7, -1.3]) * scale
        phi = np.zeros(lay.ex_off[-1])
        nb.explicit_phi(x, lay.ex_blocks, lay.ex_off, lay.ex_kind, lay.ex_norm, lay.phi_src,
                        lay.rff_wt, lay.rff_b, phi)  # fmt: skip
        z = lay.rff_w[lay.phi_src[0].astype(int)] @ x + lay.rff_b[lay.phi_src[0].astype(int)]
        want = np.sqrt(2.0 / z.size) * np.cos(z)
        np.testing.assert_allclose(phi, want, rtol=0, atol=1e-14 * max(1.0, np.abs(z).max()))


def test_model_loops_match_python(monkeypatch):
    """learn_many / learn_round / decision / eviction: compiled vs interpreted, same state."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 3))
    Y = np.sign(X[:, 0] + X[:, 1] * X[:, 2])
    cfg = dict(
        kernels=(kernels.Linear(), kernels.RBF(0.5), kernels.RBF(0.3, n_components=8),
                 kernels.Polynomial(2, features=(0, 1)), kernels.Polynomial(2, explicit=True)),
        loss=losses.Hinge(),
        regularizer=(regularizers.SquaredGroupLasso(0.01), regularizers.L1(0.0)),
        schedule=schedules.InvSqrt(1.0), radius=5.0, budget=12, budget_policy="smallest",
    )  # fmt: skip
    with pytest.raises(ValueError):  # L1 is explicit-only: refused with kernelized blocks
        OnlineMKL(**cfg)
    cfg["regularizer"] = regularizers.SquaredGroupLasso(0.01)
    fast, slow = OnlineMKL(**cfg), OnlineMKL(**cfg)
    norms_fast, norms_slow = np.empty((25, 5)), np.empty((25, 5))
    fast.learn_many(X[:15], Y[:15])
    fast.learn_many(X[15:], Y[15:], block_norms=norms_fast)  # with the norms before each round
    fast_scores = [fast.learn_predict(x, y) for x, y in zip(X[:5], Y[:5], strict=True)]
    fast_decisions = fast.decision_many(X)  # (compiled: before the Python originals step in)
    interpret(monkeypatch, MODEL_LOOPS)
    slow.learn_many(X[:15], Y[:15])
    slow.learn_many(X[15:], Y[15:], block_norms=norms_slow)
    slow_scores = [slow.learn_predict(x, y) for x, y in zip(X[:5], Y[:5], strict=True)]
    np.testing.assert_allclose(fast_scores, slow_scores, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(norms_fast, norms_slow, rtol=1e-10, atol=1e-12)
    assert np.any(norms_fast[1:] != norms_fast[:-1], axis=1).all()  # each round moved them
    for key, arr in fast.to_state()[1].items():
        np.testing.assert_allclose(
            arr, slow.to_state()[1][key], rtol=1e-10, atol=1e-12, err_msg=key
        )
    np.testing.assert_allclose(fast_decisions, slow.decision_many(X), rtol=1e-10)
    assert fast.n_support == 12


def _full_model(policy, bank):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(120, 3))
    Y = ((X[:, 0] * X[:, 1] > 0).astype(float) + (X[:, 2] > 0.5)).astype(float)
    m = OnlineMKL(kernels=bank, loss=losses.MulticlassHinge(), budget=12, budget_policy=policy,
                  regularizer=regularizers.SquaredGroupLasso(1e-3))  # fmt: skip
    m.learn_many(X, Y)
    assert m.n_support == 12 and m.n_outputs == 3
    return m, m._layout, m._state


MIXED_BANK = (kernels.Linear(implicit=True), kernels.RBF(0.5), kernels.RBF(1.0, features=(0, 1)),
              kernels.Polynomial(2), kernels.B1Spline(2.5))  # fmt: skip
# projection inverts Gram matrices: well conditioned ones (Gaussian) keep the two paths within
# 1e-12 (a rank-deficient linear Gram would amplify their last-bit differences)
GAUSS_BANK = (kernels.RBF(0.5), kernels.RBF(1.0, features=(0, 1)))


def test_budget_loops_match_python():
    _both("exp_reduced", -3.7)
    for v in (-3.7, 0.0, -707.9, -800.0, 2.5):
        _both("fast_exp", v)
    a = -np.random.default_rng(3).exponential(4.0, size=37)
    _both("exp_many", a, np.zeros(37), 37)
    separate, in_place = np.zeros(37), a.copy()
    nb.exp_many(a, separate, 37)
    nb.exp_many(in_place, in_place, 37)  # out is a: the same bits as into another array
    np.testing.assert_array_equal(in_place, separate)
    _both("table_loss", 0.3, 0.62)
    for kind, p0, p1, norm in [(0, 0, 0, True), (1, 2, 1.0, True), (2, 0.7, 0, False),
                               (3, 2.5, 0, False)]:  # fmt: skip
        _both("segment_kernels", kind, p0, p1, norm, 0.3, 1.2, 0.8, 0.4)
    _both("top_direction", 2.0, 0.5, 1.0)
    _both("top_direction", 1.0, 0.0, 2.0)
    abc = np.random.default_rng(4).normal(size=(3, 11))
    assert _both("weighted_sum", *abc, 11) == pytest.approx(float(np.sum(abc[0] * abc[1] * abc[2])))
    x = np.array([0.3, -1.1, 0.7])
    for policy in ("oldest", "smallest", "merge"):
        m, L, S = _full_model(policy, MIXED_BANK)
        dots = np.zeros((12, L.n_views))
        _both("support_dots", x, L.masks, L.view_full, S.sx, 12, dots)
        nb.support_dots(x, L.masks, L.view_full, S.sx, 12, dots)
        full = int(np.flatnonzero(L.view_full)[0])  # two rows per pass: dot4's bits, row by row
        np.testing.assert_array_equal(dots[:, full], [nb.dot4(x, S.sx[s], 0, 3) for s in range(12)])
        odd = np.zeros((11, L.n_views))
        nb.support_dots(x, L.masks, L.view_full, S.sx, 11, odd)
        np.testing.assert_array_equal(odd, dots[:11])
        _both("dots_expansion", L.masks @ (x * x), dots, L.im_blocks, L.view_of, L.kinds, L.kp,
              S.ssq, S.sv, S.coef, 12, np.zeros((5, 3)), np.zeros(12))  # fmt: skip
        xsq = L.masks @ (x * x)
        for blk in L.im_blocks:  # every kind of MIXED_BANK: the values kernel_value computes
            kind, vw, (p0, p1, norm) = L.kinds[blk], L.view_of[blk], L.kp[blk]
            args = (kind, p0, p1, norm != 0.0, xsq[vw], dots, vw, S.ssq, 12)
            _both("kernel_row", *args, np.zeros(12))
            row = np.zeros(12)
            nb.kernel_row(*args, row)
            sq = xsq[vw] + S.ssq[:12, vw] - 2 * dots[:, vw]
            kv = [nb.kernel_value(kind, p0, p1, norm != 0.0, dots[s, vw], sq[s], xsq[vw],
                                  S.ssq[s, vw]) for s in range(12)]  # fmt: skip
            np.testing.assert_allclose(row, kv, rtol=1e-13, atol=1e-15)
        geo = (L.im_blocks, L.view_of, L.masks, L.view_full, L.kinds, L.kp)
        pairs = (S.sx, S.ssq, S.sv, S.coef, S.kself)
        xsq = L.masks @ (x * x)
        scores = m.block_decisions(x)
        code = nb.B_MERGE if policy == "merge" else getattr(nb, f"B_{policy.upper()}")
        _both("budget_step", code, x, xsq, *geo, *pairs, S.age, S.counters, S.scale, S.norms,
              S.gram, scores)  # fmt: skip
        _both("make_room", code, x, xsq, np.array([1.0, -1.0, 0.0]), *geo, *pairs, S.age,
              S.counters, 12, S.scale, S.norms, S.gram, scores)  # fmt: skip
    i, removal = _both("smallest_pair", 12, L.im_blocks, S.sv, S.coef, S.kself, S.scale)
    drow = np.zeros((12, L.n_views))
    _both("merge_plan", i, removal, 12, *geo, *pairs, S.scale, drow)
    j, _ = _both("merge_partner", i, 12, *geo, *pairs, S.scale, drow)
    rho, ni, nj = _both("direction_cosine", S.sv, i, j)
    ai, aj = (
        S.scale[L.im_blocks] * S.coef[L.im_blocks, i],
        S.scale[L.im_blocks] * S.coef[L.im_blocks, j],
    )
    dij = np.array([x @ y for x, y in zip(L.masks * S.sx[i], L.masks * S.sx[j], strict=True)])
    shape = (ai, aj, ni, nj, rho, np.sqrt(max(1 - rho * rho, 0.0)), S.ssq[i], S.ssq[j], dij,
             L.im_blocks, L.view_of, L.kinds, L.kp)  # fmt: skip
    _both("merge_energy", 0.4, *shape)
    h, _, alpha, beta = _both("best_merge_point", *shape)
    terms = (np.zeros((3, 3)), np.zeros((3, L.n_views)), np.zeros((3, 5)), np.zeros((3, 3)))
    nb.support_dots(S.sx[i], L.masks, L.view_full, S.sx, 12, drow)
    left = np.zeros_like(drow)  # what merge_pairs reuses: the partner search's inner products
    nb.merge_partner(i, 12, *geo, *pairs, S.scale, left)
    np.testing.assert_array_equal(left, drow)
    _both("merge_pairs", i, j, h, alpha, beta, 12, *geo, *pairs, S.scale, S.norms, *terms, drow)
    _both("remove_pair", i, 12, *geo, *pairs, S.scale, S.norms, np.zeros(5))
    nb.merge_pairs(i, j, h, alpha, beta, 12, *geo, *pairs, S.scale, S.norms, *terms, drow)
    dots = np.array([x @ S.sx[0], x[:2] @ S.sx[0, :2]])
    _both("add_pair", dots, xsq, S.ssq[0], S.coef[:, 0].copy(), S.sv[0], L.im_blocks, L.view_of,
          L.kinds, L.kp, np.zeros((5, 3)))  # fmt: skip
    _both("shift_scores", x, xsq, 3, *terms, np.zeros((5, 0)), 12, *geo, S.sx, S.ssq, S.sv,
          np.zeros((5, 3)))  # fmt: skip

    m, L, S = _full_model("project", GAUSS_BANK)
    geo = (L.im_blocks, L.view_of, L.masks, L.view_full, L.kinds, L.kp)
    xsq = L.masks @ (x * x)
    G, Q = S.gram[0, 0], S.gram[0, 1]
    _both("loaded", G, 3)
    _both("refresh_inverse", G, np.zeros_like(Q), 12)
    _both("solve_projection", G, Q, 4, 12, np.zeros(12), np.zeros(12))
    r = _both("cheapest_projection", 12, L.im_blocks, S.coef, S.scale, S.gram)
    dense, tc = np.zeros((2, 12)), np.zeros(2)
    _both("project_out", r, 12, L.im_blocks, S.coef, S.scale, S.norms, S.gram, dense, tc)
    nb.project_out(r, 12, L.im_blocks, S.coef, S.scale, S.norms, S.gram, dense, tc)
    _both("shift_scores", x, xsq, 0, *terms, dense, 12, *geo, S.sx, S.ssq, S.sv, np.zeros((2, 3)))
    col = G[:, (r + 1) % 12].copy()
    _both("gram_insert", G, Q, r, col, 1.0, 12)
    _both("gram_border", x, xsq, np.array([0.0, 1.0, -1.0]), r, 12, *geo, S.sx,
          S.ssq, S.sv, S.gram)  # fmt: skip
    assert COVERED >= set(BUDGET_LOOPS)


@pytest.mark.parametrize(
    ("policy", "bank"), [("merge", MIXED_BANK), ("project", GAUSS_BANK), ("oldest", MIXED_BANK)]
)
def test_packed_rounds_with_every_budget_policy_match_python(monkeypatch, policy, bank):
    """The pack-based rounds (learn_many, learn_predict) past the budget, where ``make_room``
    merges, projects or removes pairs: compiled vs the Python originals of every round and
    budget loop, the same scores and state (the Gram matrices included)."""
    rng = np.random.default_rng(6)
    X = rng.normal(size=(60, 3))
    Y = ((X[:, 0] * X[:, 1] > 0).astype(float) + (X[:, 2] > 0.5)).astype(float)
    cfg = dict(kernels=bank, loss=losses.MulticlassHinge(), budget=12, budget_policy=policy,
               regularizer=regularizers.SquaredGroupLasso(1e-3), fit_intercept=True)  # fmt: skip
    fast, slow = OnlineMKL(**cfg), OnlineMKL(**cfg)
    # The interpreted rounds call compiled scalar kernels (kernel_value; gram via sync_gram) from
    # Python: compile them here, not inside the patch, where the helpers they inline (fast_exp)
    # are Python functions (with a fresh numba cache the first compile would fail there).
    OnlineMKL(**cfg).learn_many(X[:20], Y[:20])
    nb.kernel_value(np.int64(2), np.float64(0.5), np.float64(0.0), np.bool_(False),
                    np.float64(1.0), np.float64(0.0), np.float64(1.0), np.float64(1.0))  # fmt: skip
    runs = []
    for model, loops in ((fast, []), (slow, [*MODEL_LOOPS, *BUDGET_LOOPS])):
        with monkeypatch.context() as patch:
            interpret(patch, loops)
            _, preds = model.learn_many(X[:40], Y[:40])
            scores = [model.learn_predict(x, y).copy() for x, y in zip(X[40:], Y[40:], strict=True)]
        runs.append((preds, np.array(scores)))
    assert fast.n_support == 12 and fast.t == 60
    np.testing.assert_allclose(runs[0][0], runs[1][0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(runs[0][1], runs[1][1], rtol=1e-10, atol=1e-12)
    slow_state = slow.to_state()[1]
    for key, arr in fast.to_state()[1].items():
        np.testing.assert_allclose(arr, slow_state[key], rtol=1e-9, atol=1e-11, err_msg=key)
    assert (fast.to_state()[1]["gram"].size > 0) == (policy == "project")


def _namespace_pack(*fields):
    """``new_pack`` for interpreted rounds: the same fields on a plain object (a numba
    structref cannot be built outside compiled code)."""
    return SimpleNamespace(**dict(zip(NAMES, fields, strict=True)))


def _namespace_record(*fields):
    """``new_record`` for interpreted calls: the same fields on a plain object."""
    return SimpleNamespace(**dict(zip((n for n, _ in RECORD_FIELDS), fields, strict=True)))


def interpret(monkeypatch, names):
    """Replace the compiled functions ``names`` by their Python originals wherever the compiled
    package's modules refer to them (each module imports its helpers by name); ``new_pack`` by
    a plain namespace of the same fields."""
    modules = [m for key, m in sys.modules.items() if key.startswith("streammkl.core._numba")]
    for name in names:  # (a helper the package does not export: from its module)
        compiled = getattr(nb, name) if hasattr(nb, name) else getattr(nb_rounds, name)
        python = {"new_pack": _namespace_pack, "new_record": _namespace_record}.get(
            name, compiled.py_func
        )
        for module in modules:
            if getattr(module, name, None) is compiled:
                monkeypatch.setattr(module, name, python)


def test_adaptive_schedules_compiled_equal_python(monkeypatch):
    """AdaGrad (explicit and kernelized blocks, with a projection), FTRL (explicit blocks) and
    per-block schedules (FTRL with a kernelized block, a merge budget, averages): the compiled
    loops against the Python originals."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(30, 3))
    Y = np.sign(X[:, 0] - X[:, 1] * X[:, 2])
    configs = [
        dict(kernels=(kernels.Linear(), kernels.RBF(0.5), kernels.RBF(0.3, n_components=8)),
             schedule=schedules.AdaGrad(0.5), radius=3.0, budget=10,
             regularizer=regularizers.SquaredGroupLasso(0.05)),
        dict(kernels=(kernels.Linear(), kernels.RBF(0.3, n_components=8),
                      kernels.Polynomial(2, explicit=True)),
             schedule=schedules.FTRL(0.5), regularizer=regularizers.GroupLasso(0.02)),
        dict(kernels=(kernels.Linear(), kernels.AdditiveRBF(1.0, 4)), fit_intercept=True,
             schedule=schedules.InvSqrt(0.5), averages=(3.0, 30.0)),
        dict(kernels=(kernels.Linear(), kernels.RBF(0.5), kernels.RBF(0.3, n_components=8)),
             schedule=schedules.FTRL(0.5), budget=10, budget_policy="merge",
             regularizer=(regularizers.GroupLasso(0.02), regularizers.L2(0.01)),
             averages=(3.0, 30.0), fit_intercept=True),
    ]  # fmt: skip
    for cfg in configs:
        fast, slow = OnlineMKL(loss=losses.Hinge(), **cfg), OnlineMKL(loss=losses.Hinge(), **cfg)
        fast.learn_many(X, Y)
        with monkeypatch.context() as patch:
            interpret(patch, [*MODEL_LOOPS, "block_steps", "prox_norm_step", "prox_blockwise",
                               "prox_blockwise_steps", "prox_norm_step_into",
                               "squared_l1_norms"])  # fmt: skip
            slow.learn_many(X, Y)
        for key, arr in fast.to_state()[1].items():
            np.testing.assert_allclose(
                arr, slow.to_state()[1][key], rtol=1e-10, atol=1e-12, err_msg=key
            )
        state = fast.to_state()[1]
        assert np.any(state["step_acc"] > 0) or np.any(state["avg_w"] != 0)


@pytest.mark.parametrize("loss", [losses.Softmax(), losses.MulticlassHinge()])
def test_wide_rounds_compiled_equal_python(monkeypatch, loss):
    """The sparse round of wide records (sparse and dense records, two and three classes,
    predictions, a settled state): compiled vs the Python originals."""
    rng = np.random.default_rng(7)
    X = np.zeros((40, 60))
    for i in range(40):
        X[i, rng.choice(60, 3, replace=False)] = rng.poisson(1.0, 3) + 1.0
    X[::9] = rng.normal(size=(5, 60))  # dense records take the dense round
    Y = (X[:, :20].sum(axis=1) > X[:, 20:40].sum(axis=1)).astype(float)
    Y[X[:, 40:].sum(axis=1) > 3.0] = 2.0
    cfg = dict(kernels=(kernels.Linear(), kernels.AdditiveRBF(1.0, 4),
                        kernels.RBF(0.3, n_components=8), kernels.Polynomial(2, explicit=True)),
               loss=loss, schedule=schedules.FTRL(0.5), regularizer=regularizers.GroupLasso(0.02),
               fit_intercept=True, averages=(3.0, 30.0))  # fmt: skip
    runs = []
    for loops in (
        [],
        [*MODEL_LOOPS, *WIDE_LOOPS, "block_steps", "prox_blockwise", "prox_blockwise_steps"],
    ):
        model = OnlineMKL(**cfg)
        with monkeypatch.context() as patch:
            interpret(patch, loops)
            scores = [model.learn_predict(x, y).copy() for x, y in zip(X, Y, strict=True)]
            scores.append(model.decision(X[1]).copy())
            assert model.takes_sparse
            for x, y in zip(X[:20], Y[:20], strict=True):  # the records as their entries
                cols = np.flatnonzero(x)[::-1].astype(np.int64)  # (any order)
                cols = np.concatenate([cols, cols[:1]])  # a column again: its later value, 0
                vals = np.concatenate([x[cols[:-1]], [0.0]])
                fx = model.predict_sparse(cols, vals)
                assert fx is not None
                scores.append(fx.copy())
                loss = model.learn_sparse(cols, vals, float(y))
                assert loss >= 0.0
                scores.append(np.array([loss]))
            state = model.to_state()[1]
        assert model._args is not None and model._args.wide
        runs.append((scores, state))
    for a, b in zip(runs[0][0], runs[1][0], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    for key, arr in runs[0][1].items():
        np.testing.assert_allclose(arr, runs[1][1][key], rtol=1e-10, atol=1e-12, err_msg=key)


def test_random_binning_compiled_equal_python(monkeypatch):
    """The random binning map (the hash, a grid's column over x or over its non-zeros) and
    FTRL rounds over a bank with it: compiled vs the Python originals, bit for bit."""
    for h in (0, 1, 0xFFFFFFFF, 0x12345678, 2**31):
        assert nb.binning_hash(np.uint64(h)) == nb.binning_hash.py_func(np.uint64(h))
    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 5))
    X[::4, 1:3] = 0.0
    Y = np.sign(X[:, 0] * X[:, 3])
    cfg = dict(kernels=(kernels.Linear(), kernels.RandomBinning(6, 4.0, 5)),
               schedule=schedules.FTRL(0.5), regularizer=regularizers.GroupLasso(0.02),
               averages=(3.0, 30.0))  # fmt: skip
    fast = OnlineMKL(**cfg)
    fast.learn_many(X[:55], Y[:55])
    L = fast.layout
    assert L is not None
    a = int(L.ex_off[1])
    row, R = int(L.phi_src[0, a]), int(L.phi_src[1, a])
    huge = np.array([[1e300, -1e300, 0.0, 3.0, -0.5], [np.inf, 0.0, 0.0, 0.0, -np.inf]])
    for x in [*X, *huge]:  # (an index beyond +-2**31 is clamped alike)
        nz = np.flatnonzero(x).astype(np.int64)
        for r in range(R):
            args = (L.rff_wt, row, R, 5, r)
            want = nb.binning_column(x, nz, -1, *args)
            assert nb.binning_column.py_func(x, nz, -1, *args) == want
            assert nb.binning_column(x, nz, nz.size, *args) == want
            assert nb.binning_column.py_func(x, nz, nz.size, *args) == want
    slow = OnlineMKL(**cfg)
    with monkeypatch.context() as patch:
        interpret(patch, [*MODEL_LOOPS, *BINNING_LOOPS, "block_steps", "prox_norm_step",
                           "prox_blockwise", "prox_blockwise_steps", "prox_norm_step_into",
                           "squared_l1_norms"])  # fmt: skip
        slow.learn_many(X[:55], Y[:55])
    for key, arr in fast.to_state()[1].items():
        np.testing.assert_allclose(arr, slow.to_state()[1][key], rtol=1e-10, atol=1e-12,
                                   err_msg=key)  # fmt: skip


def test_placing_new_inputs_compiled_equals_python(monkeypatch):
    """A record's new inputs laid out in every block at once (``place_inputs``, grown in
    chunks over a doubling): compiled vs the Python original."""
    from streammkl.core.layout import build_layout, grown

    bank = (
        kernels.Linear(), kernels.AdditiveRBF(0.5, 4),
        kernels.AdditiveRBF(0.7, 6, draws="quadrature"), kernels.AdditiveStumps(3),
        kernels.RBF(0.3, n_components=8), kernels.RBF(0.2),
        kernels.MedianRBF(2.0, 6).fitted(0.4, 5, final=True),
    )  # fmt: skip
    keys = [f"k{j}" for j in range(11)] + ["é"]
    layouts = []
    for loops in ([], PLACE_LOOPS):
        with monkeypatch.context() as patch:
            interpret(patch, loops)
            layout = build_layout(bank, 3, 5, keys=keys, capacity=4)
            for d in (4, 9, 12):
                layout = grown(layout, bank, keys[:d], 5)
        layouts.append(layout)
    for name in ("phi_src", "rff_wt", "in_pos", "blk_inputs", "ex_used", "masks"):
        np.testing.assert_array_equal(getattr(layouts[0], name), getattr(layouts[1], name))
    COVERED.update(PLACE_LOOPS)


def test_every_compiled_function_is_covered():
    missing = set(compiled_functions()) - set(SCALAR_KERNELS) - set(MODEL_LOOPS)
    missing -= set(PLACE_LOOPS) | set(KNOWN_LOOPS)
    missing -= set(WIDE_LOOPS) | set(BINNING_LOOPS)
    missing -= set(BUDGET_LOOPS)
    missing -= set(SEQUENCE_LOOPS) | set(PARSER_LOOPS) | set(SUPPORT_LOOPS)
    assert missing == set(), f"no parity test for {sorted(missing)}"


@pytest.mark.parametrize("kind", ["classifier", "regressor"])
def test_records_of_known_inputs_compiled_equal_python(monkeypatch, kind):
    """The one-call rounds and predictions of records of known inputs (``core._numba.known``,
    behind ``OnlineMKL.learn_values`` / ``predict_values``) and the standardisation of rows,
    interpreted with the rounds they call, give the compiled numbers (the explicit round of the
    default classifier, the general one of the default regressor)."""
    from streammkl.core import compiled
    from streammkl.river import MKLClassifier, MKLRegressor, _scaling

    rng = np.random.default_rng(5)
    flag = rng.integers(0, 2, size=40).astype(float)
    flag[30] = 2.0  # a 0/1 input (left at 0/1) standardised from its first other value on
    X = np.column_stack([rng.normal(size=(40, 3)) * [1.0, 10.0, 0.1], flag])
    make = MKLClassifier if kind == "classifier" else MKLRegressor
    Y = [bool(v) for v in X[:, 0] > 0] if kind == "classifier" else list(X[:, :3] @ [1, 0.2, -3])
    results = []
    for loops in ([], [*MODEL_LOOPS, *KNOWN_LOOPS]):
        model = make(standardize=True, kernels=(kernels.Linear(), kernels.RBF(0.5, n_components=8)))
        with monkeypatch.context() as patch:
            interpret(patch, loops)
            if loops:  # the learner's own standardisation of vectors and rows, too
                patch.setattr(_scaling, "_ONE", {})
                for name in ("standardize_one", "standardize_rows"):
                    patch.setattr(_scaling, name, getattr(compiled, name).py_func)
            out = []
            for row, y in zip(X.tolist(), Y, strict=True):
                x = dict(zip("abcd", row, strict=True))
                if kind == "classifier":
                    out.append(model.predict_proba_one(x).get(True, -1.0))
                    out.append(model.learn_predict_one(x, y).get(True, -1.0))
                else:
                    out.extend([model.predict_one(x), model.learn_predict_one(x, y)])
            rows = model.rounds().scale_rows(X)
        results.append((np.array(out, dtype=float), model.to_state()[1], rows))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-10, atol=1e-12)
    for key, arr in results[0][1].items():
        np.testing.assert_allclose(arr, results[1][1][key], rtol=1e-9, atol=1e-11, err_msg=key)
    np.testing.assert_array_equal(results[0][2], results[1][2])
    COVERED.update(KNOWN_LOOPS)
