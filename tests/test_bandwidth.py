"""Data-adaptive Gaussian bandwidths (the median heuristic) and the additive Gaussian kernel."""

from __future__ import annotations

import numpy as np
import pytest

from streammkl.core import OnlineMKL, bandwidth, kernels, schedules
from streammkl.core import _numba as nb
from tests.naive import gram


def _stream(n, d=3, scale=1.0, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * scale
    return X, np.where(X[:, 0] * X[:, 1] > 0, 1.0, -1.0)


def test_median_kernel_is_provisional_then_measured_after_the_warm_up():
    X, Y = _stream(200, scale=3.0)  # squared distances ~ 2 d 9: far from the standardised 2 d
    model = OnlineMKL(kernels=(kernels.Linear(), kernels.MedianRBF(2.0, 32)))
    assert model.names == ["linear", "rff(gamma=2/median,D=32)"]
    assert model.kernel_bandwidths == {}  # no input yet: no bandwidth
    model.learn(X[0], Y[0])
    k = model.kernels[1]
    assert k.gamma == pytest.approx(2.0 / 6.0) and k.fit.final is False
    assert model.kernel_bandwidths == {"rff(gamma=2/median,D=32)": k.gamma}
    model.learn_many(X[1 : bandwidth.WARMUP], Y[1 : bandwidth.WARMUP])
    k = model.kernels[1]
    D = ((X[:50, None, :] - X[None, :50, :]) ** 2).sum(-1)
    median = np.median(D[np.triu_indices(50, 1)])
    assert k.gamma == pytest.approx(2.0 / median, rel=1e-12)
    assert k.fit == kernels.Bandwidth(k.gamma, 3, True)
    assert model.names == ["linear", "rff(gamma=2/median,D=32)"]  # the name never changes
    assert model.kernel_bandwidths == {"rff(gamma=2/median,D=32)": k.gamma}  # the state does
    assert model.config()["kernels"][1] == kernels.MedianRBF(2.0, 32).to_spec()
    assert model.block_norms[1] == 0.0  # moved by far more than the tolerance: a fresh block
    model.learn_many(X[50:], Y[50:])
    assert model.block_norms[1] > 0.0


def test_a_good_provisional_bandwidth_keeps_its_block_through_the_warm_up():
    X, Y = _stream(120, d=6)
    model = OnlineMKL(kernels=(kernels.MedianRBF(1.0, 16), kernels.Linear()))
    model.learn_many(X[:49], Y[:49])
    before = model.block_norms[0]
    assert before > 0
    model.learn(X[49], Y[49])  # the 50th input ends the warm-up
    k = model.kernels[0]
    assert k.fit.final and k.gamma == pytest.approx(1.0 / 12.0)  # kept: within 25 %
    assert model.block_norms[0] > 0


def test_warm_up_is_the_same_learned_in_one_run_or_example_by_example_and_resumes_exactly():
    X, Y = _stream(150, seed=3)
    cfg = dict(kernels=(kernels.Linear(), kernels.MedianRBF(0.5, 16), kernels.MedianRBF(4.0, 16)),
               schedule=schedules.AdaGrad(0.5))  # fmt: skip
    a, b = OnlineMKL(**cfg), OnlineMKL(**cfg)
    a.learn_many(X, Y)
    c = None
    for i, (x, y) in enumerate(zip(X, Y, strict=True)):
        b.learn(x, y)
        if i == 20:  # mid warm-up: the reservoir travels with the state
            c = OnlineMKL.from_state(*b.to_state())
    assert a.digest() == b.digest()
    assert c is not None
    c.learn_many(X[21:], Y[21:])
    assert c.digest() == b.digest()


def test_bandwidths_follow_the_number_of_inputs():
    model = OnlineMKL(kernels=(kernels.Linear(), kernels.MedianRBF(2.0, 8)))
    X, Y = _stream(60, d=8)
    model.learn_many(X, Y)
    gamma = model.kernels[1].gamma
    model.learn(np.r_[X[0], 1.0], 1.0)  # 9 inputs: less than a quarter more, nothing changes
    assert model.kernels[1].gamma == gamma
    model.learn(np.r_[X[0], 1.0, 2.0, 3.0], 1.0)  # 11 inputs >= 1.25 * 8
    assert model.kernels[1].gamma == pytest.approx(gamma * 8 / 11)
    assert model.kernels[1].fit.inputs == 11


def test_median_of_degenerate_inputs():
    assert bandwidth.median_sq_distance(np.zeros((10, 3))) == 1.0
    X = np.zeros((10, 2))
    X[0] = 1.0  # the median pair distance is 0: the mean is used
    assert bandwidth.median_sq_distance(X) == pytest.approx(2.0 * 9 / 45)


def test_additive_kernel_gram_and_its_random_fourier_map():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(40, 3))
    k = kernels.AdditiveRBF(gamma=0.7, n_components=4000)
    want = np.mean([np.exp(-0.7 * (X[:, None, j] - X[None, :, j]) ** 2) for j in range(3)], 0)
    np.testing.assert_allclose(k.gram(X), want, rtol=1e-12)
    model = OnlineMKL(kernels=(k,), seed=2)
    model.learn(X[0], 1.0)
    L = model._layout
    assert L.width == 3 * 4000 and L.rff_wt.size == 0  # sparse: no frequency matrix
    Z = np.zeros((X.shape[0], L.width))
    for i, x in enumerate(X):
        nb.explicit_phi(x, L.ex_blocks, L.ex_off, L.ex_kind, L.ex_norm, L.phi_src, L.rff_wt,
                        L.rff_b, Z[i])  # fmt: skip
    # the map is anchored at 0 (phi(x) - phi(0): an input of 0 has no feature), so its inner
    # products approximate the anchored kernel k(x, x') - k(x, 0) - k(0, x') + k(0, 0)
    e = np.exp(-0.7 * X * X)  # (n, 3): each input's kernel value against 0
    anchored = want - e.mean(1)[:, None] - e.mean(1)[None, :] + 1.0
    np.testing.assert_allclose(Z @ Z.T, anchored, atol=0.05)


def test_additive_kernel_maps_of_old_inputs_survive_a_new_input():
    k = kernels.AdditiveRBF(n_components=8)
    freq2, off2 = k.components(["a", "b"], seed=0)
    freq3, off3 = k.components(["a", "b", "c"], seed=0)
    np.testing.assert_array_equal(freq3[:16], freq2)
    np.testing.assert_array_equal(off3[:16], off2)


def test_the_additive_map_costs_memory_linear_in_the_inputs():
    model = OnlineMKL(kernels=(kernels.AdditiveRBF(n_components=16),))
    model.learn(np.zeros(2000), 1.0)
    L = model._layout
    assert L.phi_src.nbytes == 4 * 8 * 16 * 2000 and L.rff_wt.nbytes == 0  # input, b, w, cos b


def test_specs_round_trip_without_the_fitted_bandwidth_and_bad_scales_are_refused():
    k = kernels.MedianRBF(2.0, 64)
    assert kernels.from_spec(k.to_spec()) == k
    fitted = k.fitted(0.5, 3, final=True)
    assert fitted.to_spec() == k.to_spec() and fitted.name == k.name  # the identity
    assert k.fit is None and fitted.fit == kernels.Bandwidth(0.5, 3, True)  # never in place
    with pytest.raises(TypeError, match="no bandwidth yet"):
        k.gram(np.eye(2))
    assert fitted.gram(np.eye(2))[0, 1] == pytest.approx(np.exp(-1.0))
    with pytest.raises(ValueError, match="scale"):
        kernels.MedianRBF(0.0)
    assert gram(kernels.RBF(0.5), np.eye(2), np.eye(2))[0, 1] == pytest.approx(np.exp(-1.0))


def test_the_warm_up_reservoir_keeps_inputs_of_growing_width_as_zero_padded_rows():
    """``Reservoir`` keeps each input as it comes (a copy) and stacks them when its rows are
    read: later inputs are wider (new inputs count as 0 in earlier rows), a rows array handed
    out never changes, and it stops at its size."""
    from streammkl.core.bandwidth import Reservoir

    res = Reservoir(np.array([[1.0, 2.0]]), size=4)
    x = np.array([3.0, 4.0, 5.0])
    res.add(x[None, :])
    x[0] = -1.0  # the caller's array changes: the kept input does not
    first = res.rows
    np.testing.assert_array_equal(first, [[1.0, 2.0, 0.0], [3.0, 4.0, 5.0]])
    res.add(np.array([[6.0], [7.0], [8.0]]))  # two of these fit
    assert len(res) == 4 and res.full
    np.testing.assert_array_equal(res.rows, [[1, 2, 0], [3, 4, 5], [6, 0, 0], [7, 0, 0]])
    np.testing.assert_array_equal(first, [[1.0, 2.0, 0.0], [3.0, 4.0, 5.0]])
    res.add(np.ones((1, 5)))  # full: nothing kept
    assert res.rows.shape == (4, 3)
    assert len(Reservoir()) == 0 and Reservoir().rows.shape == (0, 0)


def test_a_reservoir_pickled_with_its_rows_stacked_loads_with_the_same_inputs():
    """A warm-up reservoir pickled by an earlier version (its ``rows`` an attribute) loads
    with the same inputs and goes on keeping new ones."""
    import pickle

    from streammkl.core.bandwidth import Reservoir

    old = Reservoir.__new__(Reservoir)
    old.__dict__.update({"rows": np.array([[1.0, 2.0]]), "size": 3})  # the earlier attributes
    res = pickle.loads(pickle.dumps(old))
    assert len(res) == 1 and not res.full
    res.add(np.array([[3.0, 4.0, 5.0]]))
    np.testing.assert_array_equal(res.rows, [[1.0, 2.0, 0.0], [3.0, 4.0, 5.0]])


def test_for_inputs_hands_back_the_bank_itself_when_no_bandwidth_changes():
    """A model's growth tells "no bandwidth changed" by identity: ``for_inputs`` returns the
    very tuple it was given then, and a new bank whenever a bandwidth is set or rescaled."""
    bank = (kernels.Linear(), kernels.MedianRBF(1.0, 8))
    first = bandwidth.for_inputs(bank, 4)
    assert first is not bank and first[0] is bank[0] and first[1].fit is not None  # set
    assert bandwidth.for_inputs(first, 4) is first  # unchanged
    assert bandwidth.for_inputs(first, 100, rescale=False) is first  # not rescaled
    wider = bandwidth.for_inputs(first, 100)  # 25 times the inputs: rescaled
    assert wider is not first and wider[1].gamma == pytest.approx(first[1].gamma * 4 / 100)
    as_list = bandwidth.for_inputs(list(first), 4)
    assert type(as_list) is tuple and as_list == first
