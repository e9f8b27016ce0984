"""``RandomBinning`` (random grids whose cells approximate the Laplacian kernel): its compiled
map against a brute-force reference and its kernel approximation against the exact Laplacian,
its bandwidth from the median L1 distance, inputs that appear later, the sparse round against
the dense one, checkpoints, and learners on it under FTRL and AdaGrad with the group lasso."""

from __future__ import annotations

import math

import numpy as np
import pytest

from streammkl.core import OnlineMKL, bandwidth, regularizers, schedules
from streammkl.core import _numba as nb
from streammkl.core import kernels as Kmod
from streammkl.core import losses as Lmod
from streammkl.core import update as update_mod

M32 = 2**32


def _fmix32(h: int) -> int:
    """MurmurHash3's 32-bit finaliser, in Python integers."""
    h ^= h >> 16
    h = (h * 0x85EBCA6B) % M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) % M32
    return h ^ (h >> 16)


def _brute_map(kernel: Kmod.RandomBinning, x: np.ndarray, keys: list[str], seed: int) -> np.ndarray:
    """The map from its definition, input by input and grid by grid in Python integers: the
    interval index of x_i in grid r's axis i (pitch gamma-scaled Gamma(2) draws, shift in
    pitches), counted from the interval of 0 (clamped to +-(2**31 - 1)), hashed by the sum of
    index times multiplier modulo 2**32 and MurmurHash3's finaliser, modulo B."""
    R, B = kernel.n_grids, kernel.n_bins
    pitch, shift, mult = kernel.grids(keys, seed)
    out = np.zeros(R * B)
    for r in range(R):
        h = 0
        for i, xi in enumerate(x):
            delta = pitch[i, r] / kernel.gamma
            u = shift[i, r]
            c = math.floor(xi / delta - u) - math.floor(-u)
            c = max(min(c, 2**31 - 1), 1 - 2**31)  # an index beyond +-2**31 is clamped
            h = (h + (c % M32) * int(mult[i, r])) % M32
        out[r * B + _fmix32(h) % B] = 1.0 / math.sqrt(R)
    return out


def _phi(model: OnlineMKL, x: np.ndarray) -> np.ndarray:
    L = model.layout
    assert L is not None
    out = np.full(L.width, np.nan)
    nb.explicit_phi(x, L.ex_blocks, L.ex_off, L.ex_kind, L.ex_norm, L.phi_src, L.rff_wt,
                    L.rff_b, out)  # fmt: skip
    return out


def _warmed(kernel: Kmod.Kernel, X: np.ndarray, seed: int = 0) -> OnlineMKL:
    model = OnlineMKL(kernels=(kernel,), seed=seed)
    for x in X[: bandwidth.WARMUP]:
        model.learn(x, 1.0 if x[0] > 0 else -1.0)
    return model


def test_the_binning_map_matches_its_brute_force_definition_with_exact_norms() -> None:
    rng = np.random.default_rng(21)
    X = rng.normal(size=(120, 4))
    k = Kmod.RandomBinning(8, 4.0, 5)
    assert k.name == "binning(1/sigma=4/median-l1,R=8,B=5)" and not k.implicit
    assert k.n_components == 40
    assert Kmod.from_spec(k.to_spec()).name == k.name
    assert k.to_spec() == {"type": "RandomBinning", "n_grids": 8, "n_bins": 5, "scale": 4.0,
                           "features": None}  # fmt: skip
    model = _warmed(k, X)
    fitted = model.kernels[0]
    assert isinstance(fitted, Kmod.RandomBinning) and fitted.fit is not None
    assert fitted.name == k.name and fitted.fit.final
    median = bandwidth.median_l1_distance(X[: bandwidth.WARMUP])
    pairs = [np.abs(a - b).sum() for i, a in enumerate(X[:50]) for b in X[i + 1 : 50]]
    assert median == pytest.approx(float(np.median(pairs)), rel=1e-12)
    ratio = fitted.gamma / (4.0 / median)  # (a provisional 4 sqrt(pi) / 2 d within
    assert max(ratio, 1 / ratio) <= bandwidth.TOLERANCE  # the tolerance is kept, as a MedianRBF's)
    wide = _warmed(Kmod.RandomBinning(8, 4.0, 5), X * 3.0)  # a median far from the guess
    assert wide.kernels[0].gamma == pytest.approx(4.0 / (3.0 * median), rel=1e-12)
    keys = ["0", "1", "2", "3"]
    for x in [*X[50:], np.zeros(4), np.array([0.0, 2.5, 0.0, -7.0]), np.array([1e300, 0, 0, 0])]:
        got = _phi(model, x)
        np.testing.assert_array_equal(got, _brute_map(fitted, x, keys, 0))
        assert np.linalg.norm(got) == pytest.approx(1.0, rel=1e-15)  # one cell per grid
    # the same cell for points within a cell, another seed other grids
    other = _warmed(k, X, seed=1)
    assert not np.array_equal(_phi(model, X[60]), _phi(other, X[60]))
    with pytest.raises(ValueError, match="n_bins"):
        Kmod.RandomBinning(8, 4.0, 2)
    with pytest.raises(ValueError, match="n_grids"):
        Kmod.RandomBinning(0)


def test_the_inner_products_tend_to_the_laplacian_kernel_as_the_grids_grow() -> None:
    """``<phi(x), phi(y)>`` is the share of grids putting x and y in one cell (probability
    ``exp(-gamma ||x - y||_1)``), plus hash collisions (about ``(1 - k) / B``): with many bins
    the mean over grids converges to the exact Laplacian at the Monte Carlo rate."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(60, 3))
    errors = {}
    for R in (16, 256, 2048):
        k = Kmod.RandomBinning(R, 1.0, 4096)
        model = _warmed(k, X)
        fitted = model.kernels[0]
        P = np.array([_phi(model, x) for x in X[:30]])
        exact = fitted.gram(X[:30])
        want = exact + (1.0 - exact) / k.n_bins  # hash collisions of distinct cells
        errors[R] = float(np.max(np.abs(P @ P.T - want)))
        assert np.allclose(np.diag(P @ P.T), 1.0)
        d = np.abs(X[0] - X[1]).sum()
        assert exact[0, 1] == pytest.approx(math.exp(-fitted.gamma * d), rel=1e-12)
    assert errors[2048] < 0.1 and errors[2048] < errors[256] < errors[16]
    assert errors[2048] < 4.0 / math.sqrt(2048)  # a few standard deviations of a share


def test_inputs_that_appear_later_enter_with_their_own_axes_and_draws() -> None:
    """A new input adds its own rows (drawn from its key alone): the map of a record without
    it is the map before it arrived (8 inputs then 9: the bandwidth is kept, below the
    rescale's quarter)."""
    rng = np.random.default_rng(8)
    X = rng.normal(size=(60, 9))
    k = Kmod.RandomBinning(6, 4.0, 7)
    a = OnlineMKL(kernels=(k,), seed=3)
    for x in X:
        a.learn(x[:8], 1.0)
    before = [_phi(a, x[:8]) for x in X[:10]]
    fit = a.kernels[0].fit
    a.learn(X[0], 1.0)  # a ninth input appears
    assert a.layout is not None and a.layout.n_inputs == 9 and a.kernels[0].fit == fit
    for x, want in zip(X[:10], before, strict=True):
        np.testing.assert_array_equal(_phi(a, np.append(x[:8], 0.0)), want)
    fitted = a.kernels[0]
    keys = [str(j) for j in range(9)]
    for x in X[10:20]:
        np.testing.assert_array_equal(_phi(a, x), _brute_map(fitted, x, keys, 3))


def _wide_bank():
    return (Kmod.Linear(), Kmod.AdditiveRBF(1.0, 8, draws="quadrature"),
            Kmod.RandomBinning(8, 4.0, 8))  # fmt: skip


def _wide_model() -> OnlineMKL:
    return OnlineMKL(kernels=_wide_bank(), loss=Lmod.Softmax(),
                     regularizer=regularizers.GroupLasso(1e-2), schedule=schedules.FTRL(1.0),
                     averages=(5.0, 50.0))  # fmt: skip


def _sparse_records(n: int, d: int, nnz: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = np.zeros((n, d))
    for i in range(n):
        idx = rng.choice(d, nnz, replace=False)
        X[i, idx] = rng.poisson(1.0, nnz) + 1.0
    Y = (X[:, : d // 2].sum(axis=1) > X[:, d // 2 :].sum(axis=1)).astype(float)
    return X, Y


def test_the_sparse_round_computes_the_map_over_the_non_zeros_with_the_dense_numbers(
    monkeypatch,
) -> None:
    X, Y = _sparse_records(300, 200, 4)
    wide = _wide_model()
    out_wide = [wide.learn_predict(x, y).copy() for x, y in zip(X, Y, strict=True)]
    assert wide._args is not None and wide._args.wide
    assert np.any(wide._state.lazy[0] != 1.0)  # the sparse round ran
    layout = wide.layout
    m = 2
    assert int(layout.ex_kind[m]) == nb.MAP_BINNING
    n, touched, sparse = nb.wide_plan(X[-1], np.zeros(200, dtype=np.int64), layout.ex_blocks,
                                      layout.ex_off, layout.ex_kind, layout.ex_used,
                                      layout.blk_inputs)  # fmt: skip
    assert sparse and update_mod.wide_columns(layout, n) == touched
    monkeypatch.setattr(update_mod, "wide_round", lambda *a: False)
    dense = _wide_model()
    out_dense = [dense.learn_predict(x, y).copy() for x, y in zip(X, Y, strict=True)]
    assert dense._args is not None and not dense._args.wide
    np.testing.assert_allclose(out_wide, out_dense, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(wide.block_norms, dense.block_norms, rtol=1e-9, atol=1e-12)
    assert wide.block_norms[m] > 0
    for x in X[:20]:
        np.testing.assert_allclose(wide.decision(x), dense.decision(x), rtol=1e-9, atol=1e-12)


def test_a_binning_model_round_trips_its_state(tmp_path) -> None:
    rng = np.random.default_rng(4)
    X = rng.normal(size=(150, 3))
    bank = (Kmod.Linear(), Kmod.RandomBinning(8, 4.0, 8))
    model = OnlineMKL(kernels=bank, seed=2)
    for x in X[:100]:
        model.learn(x, 1.0 if x[0] * x[1] > 0 else -1.0)
    again = OnlineMKL.load(model.save(tmp_path / "m.smkl"))
    assert again.kernels[1].fit == model.kernels[1].fit
    also = OnlineMKL.from_state(*model.to_state())
    for x in X[100:]:
        np.testing.assert_array_equal(again.decision(x), model.decision(x))
        np.testing.assert_array_equal(also.decision(x), model.decision(x))
    for x in X[100:]:  # and they learn on alike
        y = 1.0 if x[0] * x[1] > 0 else -1.0
        model.learn(x, y)
        again.learn(x, y)
    np.testing.assert_array_equal(again.block_norms, model.block_norms)


def test_members_of_a_mixing_group_merge_a_binning_block_column_by_column() -> None:
    """The block's columns are its grids' bins (the same in every member, whose draws come
    from the seed and the input names): two members' deltas merge like a Fourier block's."""
    from streammkl.core import mixing

    rng = np.random.default_rng(14)
    X = rng.normal(size=(160, 3))
    bank = (Kmod.Linear(), Kmod.RandomBinning(8, 4.0, 8))
    base = OnlineMKL(kernels=bank, seed=2, schedule=schedules.AdaGrad(1.0))
    for x in X[:60]:
        base.learn(x, 1.0 if x[0] * x[1] > 0 else -1.0)
    rounds = []
    for i in range(2):
        member = OnlineMKL.from_state(*base.to_state())
        for x in X[60 + i :: 2]:
            member.learn(x, 1.0 if x[0] * x[1] > 0 else -1.0)
        rounds.append(mixing.MemberRound(f"m{i}", 50, *member.to_state()))
    merged = mixing.merge(*base.to_state(), rounds)
    assert merged.kernels[1].fit == base.kernels[1].fit
    layout = merged.layout
    assert layout is not None
    a, e = int(layout.ex_off[1]), int(layout.ex_off[2])
    keys = mixing.column_keys(merged.kernels, ["0", "1", "2"], layout)[a:e]
    assert keys == [(bank[1].name, j) for j in range(64)]
    assert merged.block_norms[1] > 0 and np.isfinite(merged.decision(X[0])).all()


@pytest.mark.parametrize("schedule", [schedules.FTRL(1.0), schedules.AdaGrad(1.0)])
def test_a_binning_block_learns_axis_aligned_boxes_with_the_group_lasso(schedule) -> None:
    rng = np.random.default_rng(15)
    X = rng.normal(size=(4000, 2))
    y = np.where((np.abs(X[:, 0]) < 0.7) & (np.abs(X[:, 1]) < 0.7), 1.0, -1.0)  # a box
    model = OnlineMKL(kernels=(Kmod.Linear(), Kmod.RandomBinning(32, 4.0, 16)),
                      loss=Lmod.Logistic(), schedule=schedule,
                      regularizer=regularizers.GroupLasso(1e-3), seed=0)  # fmt: skip
    hits = 0
    for i, (x, t) in enumerate(zip(X, y, strict=True)):
        if i >= 3000:
            hits += np.sign(np.ravel(model.decision(x))[0]) == t
        model.learn(x, t)
    majority = max(np.mean(y[3000:] > 0), np.mean(y[3000:] < 0))
    assert hits / 1000 > majority + 0.1, (hits, majority)
    norms = model.block_norms
    assert norms[1] == max(norms)  # the grids carry the box


def _river_cases():
    from river import checks as river_checks

    from streammkl.river import MKLClassifier

    model = MKLClassifier(kernels=(Kmod.Linear(), Kmod.RandomBinning(8, 4.0, 8)))
    for check in river_checks.yield_checks(model):
        yield pytest.param(model, check, id=check.__name__)


@pytest.mark.parametrize(("model", "check"), list(_river_cases()))
def test_river_checks_pass_for_a_classifier_with_a_binning_block(model, check) -> None:
    check(model.clone())
