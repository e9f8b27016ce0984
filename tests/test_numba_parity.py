"""Every compiled kernel in core/_numba/ agrees with its Python original (``.py_func``)."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import numpy as np
import pytest
from numba import njit
from numba.core.registry import CPUDispatcher

from streammkl.core import OnlineMKL, kernels, losses, regularizers, schedules
from streammkl.core import _numba as nb
from streammkl.core._jit import JIT
from streammkl.core._numba.pack import NAMES


def compiled_functions():
    return sorted(n for n, f in vars(nb).items() if isinstance(f, CPUDispatcher))


SCALAR_KERNELS = [
    "kernel_value", "gram", "view_dot", "dot4", "axpy_sqnorm", "axpby_sqnorm", "loss_grad",
    "loss_values", "prox_squared_l1", "project_l1_ball", "prox_power", "prox_norm_step",
    "schedule_eta", "fast_cos", "uniform", "gather", "scatter", "weighted_squared_l1",
    "weighted_l1_ball", "decreasing_root", "ball_multiplier", "block_steps",
]  # fmt: skip
MODEL_LOOPS = [
    "learn_many", "learn_round", "explicit_phi", "block_scores", "evict", "apply_prox_steps",
    "zero_or_fold_block", "explicit_sqnorm", "decision", "average_explicit", "decision_many",
    "support_expansion", "ftrl_explicit", "round_body", "leader", "average_scores",
    "track_averages", "update_averages", "learn_predict", "new_pack",
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
COVERED = set()


def _both(name, *args):
    COVERED.add(name)
    f = getattr(nb, name)
    a = [np.copy(x) if isinstance(x, np.ndarray) else x for x in args]
    b = [np.copy(x) if isinstance(x, np.ndarray) else x for x in args]
    ra, rb = f(*a), f.py_func(*b)
    if ra is not None or rb is not None:
        np.testing.assert_allclose(ra, rb, rtol=1e-12, atol=1e-13)
    for xa, xb in zip(a, b, strict=True):  # outputs written in place
        if isinstance(xa, np.ndarray):
            np.testing.assert_allclose(xa, xb, rtol=1e-12, atol=1e-13)


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
    _both("uniform", s, group)
    _both("gather", b, group)
    _both("scatter", b[:5], group, np.zeros(6))
    _both("weighted_squared_l1", b, s, 0.4, np.zeros(6))
    _both("weighted_l1_ball", b, s, 1.0, np.zeros(6))
    _both("decreasing_root", b, s, 0.3, 1.0)
    _both("ball_multiplier", b, s, 0.5)
    for code in range(3):
        _both("schedule_eta", code, 0.5, 7)
    for code in range(5):
        _both("block_steps", code, np.array([0.5, 1e-8, 0.9]), 7, np.abs(rng.normal(size=7)),
              s, 0.8, np.zeros(7))  # fmt: skip
    for x in (0.0, 0.3, -2.0, 100.5, -9.9e4):
        _both("fast_cos", x)
    assert COVERED == set(SCALAR_KERNELS)


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


def _namespace_pack(*fields):
    """``new_pack`` for interpreted rounds: the same fields on a plain object (a numba
    structref cannot be built outside compiled code)."""
    return SimpleNamespace(**dict(zip(NAMES, fields, strict=True)))


def interpret(monkeypatch, names):
    """Replace the compiled functions ``names`` by their Python originals wherever the compiled
    package's modules refer to them (each module imports its helpers by name); ``new_pack`` by
    a plain namespace of the same fields."""
    modules = [m for key, m in sys.modules.items() if key.startswith("streammkl.core._numba")]
    for name in names:
        compiled = getattr(nb, name)
        python = _namespace_pack if name == "new_pack" else compiled.py_func
        for module in modules:
            if getattr(module, name, None) is compiled:
                monkeypatch.setattr(module, name, python)


def test_adaptive_schedules_compiled_equal_python(monkeypatch):
    """AdaGrad (explicit and kernelized blocks, with a projection) and FTRL (explicit blocks):
    the compiled loops against the Python originals."""
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
    ]  # fmt: skip
    for cfg in configs:
        fast, slow = OnlineMKL(loss=losses.Hinge(), **cfg), OnlineMKL(loss=losses.Hinge(), **cfg)
        fast.learn_many(X, Y)
        with monkeypatch.context() as patch:
            interpret(patch, [*MODEL_LOOPS, "block_steps", "prox_norm_step"])
            slow.learn_many(X, Y)
        for key, arr in fast.to_state()[1].items():
            np.testing.assert_allclose(
                arr, slow.to_state()[1][key], rtol=1e-10, atol=1e-12, err_msg=key
            )
        state = fast.to_state()[1]
        assert np.any(state["step_acc"] > 0) or np.any(state["avg_w"] != 0)


def test_every_compiled_function_is_covered():
    missing = set(compiled_functions()) - set(SCALAR_KERNELS) - set(MODEL_LOOPS)
    missing -= set(SEQUENCE_LOOPS) | set(PARSER_LOOPS)
    assert missing == set(), f"no parity test for {sorted(missing)}"
