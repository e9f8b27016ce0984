"""AdaGrad (composite mirror descent, one step per block) and FTRL-proximal: the compiled rounds
against textbook numpy references, their restarts, persistence and the sparsity FTRL gives."""

from __future__ import annotations

import numpy as np
import pytest

from streammkl.core import OnlineMKL, kernels, losses, regularizers, schedules
from streammkl.core import _numba as nb
from tests.naive import support_block_norms


def _phis(model, x):
    """Each explicit block's feature map at x (the model's own maps)."""
    L = model._layout
    phi = np.zeros(L.width)
    nb.explicit_phi(
        np.ascontiguousarray(x), L.ex_blocks, L.ex_off, L.ex_kind, L.ex_norm, L.phi_src,
        L.rff_wt, L.rff_b, phi,
    )  # fmt: skip
    return [phi[L.ex_off[m] : L.ex_off[m + 1]] for m in range(len(model.kernels))]


def _thetas(model):
    L, S = model._layout, model._state
    return [S.scale[m] * S.w[0, L.ex_off[m] : L.ex_off[m + 1]] for m in range(len(model.kernels))]


def _hinge_direction(score, y):
    return y if y * score < 1.0 else 0.0


BANK = (
    kernels.Linear(),
    kernels.RBF(0.4, n_components=16),
    kernels.Polynomial(2, explicit=True),
)


def _stream(n, seed=0, d=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    Y = np.where(X[:, 0] * X[:, 1] + 0.5 * X[:, 2] > 0, 1.0, -1.0)
    return X, Y


@pytest.mark.parametrize(
    "reg",
    [
        regularizers.SquaredGroupLasso(0.05),
        regularizers.GroupLasso(0.02),
        regularizers.ElasticNetMKL(0.05, sigma=0.3),
        regularizers.L2(0.1),
    ],
)
def test_adagrad_round_is_mirror_descent_with_one_step_per_block(reg):
    """theta_m += eta_m v phi_m with eta_m = eta0 / sqrt(delta + sum ||g_m||^2), then the prox
    of the block norms in the metric of the steps, then the projection (numpy reference)."""
    eta0, delta, radius = 0.7, 1e-3, 4.0
    model = OnlineMKL(
        kernels=BANK, loss=losses.Hinge(), regularizer=reg,
        schedule=schedules.AdaGrad(eta0, delta), radius=radius, seed=3,
    )  # fmt: skip
    X, Y = _stream(60)
    acc = np.zeros(len(BANK))
    thetas = None
    for x, y in zip(X, Y, strict=True):
        model.learn(x, y)
        phis = _phis(model, x)  # the maps are fixed once the inputs are known
        if thetas is None:
            thetas = [np.zeros_like(p) for p in phis]
        score = sum(t @ p for t, p in zip(thetas, phis, strict=True))  # no intercept
        v = _hinge_direction(score, y)
        acc += v * v * np.array([p @ p for p in phis])
        etas = eta0 / np.sqrt(delta + acc)
        thetas = [t + eta * v * p for t, eta, p in zip(thetas, etas, phis, strict=True)]
        norms = np.array([np.linalg.norm(t) for t in thetas])
        new = regularizers.Ball(radius).prox_norms(reg.prox_norms(norms, etas), etas)
        thetas = [t * (n / o if o > 0 else 0.0) for t, n, o in zip(thetas, new, norms, strict=True)]
        for ours, ref in zip(_thetas(model), thetas, strict=True):
            np.testing.assert_allclose(ours, ref, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(model.block_steps[:-1], etas, rtol=1e-12)
    np.testing.assert_allclose(model._state.step_acc[:-1], acc, rtol=1e-12)


def test_adagrad_keeps_kernelized_block_norms_exact():
    model = OnlineMKL(
        kernels=(kernels.RBF(0.5), kernels.Polynomial(2), kernels.Linear()),
        loss=losses.MulticlassHinge(), regularizer=regularizers.SquaredGroupLasso(0.01),
        schedule=schedules.AdaGrad(1.0), radius=5.0, budget=20, budget_policy="smallest",
    )  # fmt: skip
    rng = np.random.default_rng(2)
    X = rng.normal(size=(80, 3))
    Y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5).astype(int)
    for x, y in zip(X, Y, strict=True):
        model.learn(x, int(y))
    np.testing.assert_allclose(model.block_norms, support_block_norms(model), rtol=1e-8)
    acc = model._state.step_acc[:-1]
    np.testing.assert_allclose(model.block_steps[:-1], 1.0 / np.sqrt(1e-8 + acc), rtol=1e-12)
    # the Gaussian and the normalised quadratic kernel have k(x, x) = 1; the linear one not
    assert acc[0] == pytest.approx(acc[1], rel=1e-12) and acc[2] != pytest.approx(acc[0])


def test_ftrl_is_follow_the_regularized_leader_with_proximal_centering():
    """theta_t+1 = argmin <z, theta> + t Omega(theta) + sum_m ||theta_m||^2 / (2 eta_m), with
    z = sum g - sum sigma_s theta_s (numpy reference through the prox of the block norms)."""
    eta0, delta, lam = 0.8, 1e-2, 0.01
    reg = regularizers.GroupLasso(lam)
    model = OnlineMKL(
        kernels=BANK, loss=losses.Hinge(), regularizer=reg, schedule=schedules.FTRL(eta0, delta),
        seed=1,
    )  # fmt: skip
    X, Y = _stream(70, seed=5)
    M = len(BANK)
    acc, prev = np.zeros(M), np.zeros(M)
    z = thetas = None
    for t, (x, y) in enumerate(zip(X, Y, strict=True), start=1):
        model.learn(x, y)
        phis = _phis(model, x)
        if z is None:
            z = [np.zeros_like(p) for p in phis]
            thetas = [np.zeros_like(p) for p in phis]
        score = sum(th @ p for th, p in zip(thetas, phis, strict=True))
        v = _hinge_direction(score, y)
        acc += v * v * np.array([p @ p for p in phis])
        etas = eta0 / np.sqrt(delta + acc)
        sigma = np.where(prev > 0, 1 / etas - 1 / np.where(prev > 0, prev, 1.0), 0.0)
        prev = etas.copy()
        z = [zm - v * p - s * th for zm, p, s, th in zip(z, phis, sigma, thetas, strict=True)]
        c = etas * np.array([np.linalg.norm(zm) for zm in z])
        b = reg.prox_norms(c, t * etas)
        thetas = [
            -eta * zm * (bm / cm if cm > 0 else 0.0)
            for zm, eta, bm, cm in zip(z, etas, b, c, strict=True)
        ]
        for ours, ref in zip(_thetas(model), thetas, strict=True):
            np.testing.assert_allclose(ours, ref, rtol=1e-9, atol=1e-12)


def test_ftrl_drops_a_block_of_noise_exactly_and_keeps_the_signal():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 4))
    Y = np.where(X[:, 0] + X[:, 1] > 0, 1.0, -1.0)  # the label reads inputs 0 and 1 only
    model = OnlineMKL(
        kernels=(kernels.Linear(features=(0, 1)), kernels.Linear(features=(2, 3))),
        loss=losses.Logistic(), regularizer=regularizers.GroupLasso(0.02),
        schedule=schedules.FTRL(1.0),
    )  # fmt: skip
    model.learn_many(X, Y)
    assert model.kernel_weights[1] == 0.0 and model.block_norms[1] == 0.0
    assert model.kernel_weights[0] == 1.0
    # the mirror-descent round with the same regularizer does not zero the noise block
    md = OnlineMKL(
        kernels=model.kernels, loss=losses.Logistic(), regularizer=regularizers.GroupLasso(0.02),
        schedule=schedules.AdaGrad(1.0),
    )  # fmt: skip
    md.learn_many(X, Y)
    assert md.block_norms[1] > 0.0


@pytest.mark.parametrize("schedule", [schedules.AdaGrad(0.5), schedules.FTRL(0.5)])
def test_adaptive_learn_many_equals_the_loop_and_state_round_trips(schedule):
    X, Y = _stream(200, seed=8)
    cfg = dict(kernels=BANK, loss=losses.Hinge(), regularizer=regularizers.GroupLasso(0.01),
               schedule=schedule, fit_intercept=True)  # fmt: skip
    a, b = OnlineMKL(**cfg), OnlineMKL(**cfg)
    a.learn_many(X[:120], Y[:120])
    for x, y in zip(X[:120], Y[:120], strict=True):
        b.learn(x, y)
    assert a.digest() == b.digest()
    c = OnlineMKL.from_state(*a.to_state())
    a.learn_many(X[120:], Y[120:])
    c.learn_many(X[120:], Y[120:])
    assert a.digest() == c.digest()


def test_adagrad_restart_clears_the_accumulators():
    X, Y = _stream(100, seed=3)
    model = OnlineMKL(kernels=BANK, schedule=schedules.AdaGrad(0.5))
    model.learn_many(X, Y)
    big = model._state.step_acc.copy()
    assert np.all(big[:-1] > 0)
    model.restart_schedule()
    assert np.all(model._state.step_acc == 0.0) and model.schedule.t == 0
    model.learn(X[0], Y[0])
    assert np.all(model.block_steps[:-1] > 0.5 / np.sqrt(big[:-1]))  # larger steps again


def test_ftrl_restart_recentres_without_moving_theta():
    X, Y = _stream(150, seed=4)
    model = OnlineMKL(
        kernels=BANK, regularizer=regularizers.GroupLasso(0.005), schedule=schedules.FTRL(0.5)
    )
    model.learn_many(X[:100], Y[:100])
    before = model.decision_many(X[100:])
    norms = model.block_norms
    model.restart_schedule()
    np.testing.assert_allclose(model.decision_many(X[100:]), before, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(model.block_norms, norms)
    assert model.schedule.t == 0
    model.learn_many(X[100:], Y[100:])  # and it learns on from there


def test_ftrl_refuses_coordinate_penalties_and_coupling_ones_beside_kernelized_blocks():
    with pytest.raises(ValueError, match="act on coordinates"):
        OnlineMKL(kernels=(kernels.Linear(),), regularizer=regularizers.L1(0.1),
                  schedule=schedules.FTRL())  # fmt: skip
    mixed = (kernels.Linear(), kernels.RBF(0.5))
    for reg in (
        regularizers.SquaredGroupLasso(0.01),
        regularizers.ElasticNetMKL(0.01, sigma=0.5),
        regularizers.OverlappingGroupLasso([[0, 1]], 0.01),
    ):
        with pytest.raises(ValueError, match="couple blocks"):
            OnlineMKL(kernels=mixed, regularizer=reg, schedule=schedules.FTRL())
    with pytest.raises(ValueError, match="projection"):
        OnlineMKL(kernels=mixed, schedule=schedules.FTRL(), radius=5.0)
    coupled = OnlineMKL(
        kernels=(kernels.Linear(),), regularizer=regularizers.SquaredGroupLasso(0.01),
        schedule=schedules.FTRL(),
    )  # fmt: skip
    with pytest.raises(ValueError, match="couple blocks"):
        coupled.add_kernel(kernels.RBF(1.0))
    assert coupled.names == ["linear"]  # refused: the bank is unchanged
    # block-separable penalties are taken
    for reg in (regularizers.GroupLasso(0.01), regularizers.L2(0.1), regularizers.GroupLq(0.01)):
        OnlineMKL(kernels=mixed, regularizer=(reg, regularizers.GroupLasso(0.001)),
                  schedule=schedules.FTRL())  # fmt: skip


MIXED_BANK = (
    kernels.Linear(),
    kernels.RBF(0.4, n_components=16),
    kernels.RBF(0.5),  # kernelized: support vectors
    kernels.Polynomial(2),  # kernelized
)


def _rbf(gamma, a, b):
    return float(np.exp(-gamma * np.sum((a - b) ** 2)))


def _poly2(a, b):
    """The normalised quadratic kernel (c = 1): (a.b + 1)^2 / sqrt((|a|^2+1)^2 (|b|^2+1)^2)."""
    return (a @ b + 1.0) ** 2 / ((a @ a + 1.0) * (b @ b + 1.0))


@pytest.mark.parametrize(
    "reg",
    [
        regularizers.GroupLasso(0.02),
        (regularizers.GroupLasso(0.01), regularizers.L2(0.05)),
        regularizers.GroupLq(0.05, q=1.5),
    ],
)
def test_mixed_round_is_ftrl_on_explicit_and_adagrad_on_kernelized_blocks(reg):
    """Per-block schedules (FTRL with kernelized blocks) against a pure numpy reference: the
    explicit blocks follow the regularized leader (dual z, prox of t Omega in the metric t eta_m),
    the kernelized ones take AdaGrad's mirror-descent step (a new support vector with
    coefficient eta_m v, then the prox of Omega in the metric eta_m on the exact RKHS norm),
    every block at its own rate eta_m = eta0 / sqrt(delta + sum ||g_m||^2), the gradient taken
    once at theta_t."""
    eta0, delta = 0.8, 1e-2
    regs = reg if isinstance(reg, tuple) else (reg,)
    model = OnlineMKL(
        kernels=MIXED_BANK, loss=losses.Hinge(), regularizer=reg,
        schedule=schedules.FTRL(eta0, delta), budget=None, seed=2,
    )  # fmt: skip
    kfun = {2: lambda a, b: _rbf(0.5, a, b), 3: _poly2}
    X, Y = _stream(40, seed=6)
    probes, _ = _stream(5, seed=7)
    M = len(MIXED_BANK)
    explicit = [0, 1]
    acc, prev = np.zeros(M), np.zeros(M)
    z = thetas = None
    support: list[np.ndarray] = []  # the support inputs
    alpha = {m: [] for m in kfun}  # each kernelized block's coefficients on them

    def f(m, x):
        return sum(a * kfun[m](s, x) for a, s in zip(alpha[m], support, strict=True))

    for t, (x, y) in enumerate(zip(X, Y, strict=True), start=1):
        model.learn(x, y)
        phis = _phis(model, x)
        if z is None:
            z = [np.zeros_like(phis[m]) for m in explicit]
            thetas = [np.zeros_like(phis[m]) for m in explicit]
        score = sum(th @ phis[m] for th, m in zip(thetas, explicit, strict=True))
        score += sum(f(m, x) for m in kfun)
        v = _hinge_direction(score, y)
        sq = np.array([phis[m] @ phis[m] if m in explicit else kfun[m](x, x) for m in range(M)])
        acc += v * v * sq
        etas = eta0 / np.sqrt(delta + acc)
        # explicit blocks: FTRL-proximal
        sigma = np.where(prev > 0, 1 / etas - 1 / np.where(prev > 0, prev, 1.0), 0.0)
        prev = etas.copy()
        for i, m in enumerate(explicit):
            z[i] = z[i] - v * phis[m] - sigma[m] * thetas[i]
        c = np.zeros(M)
        steps = np.zeros(M)
        for i, m in enumerate(explicit):
            c[m] = etas[m] * np.linalg.norm(z[i])
            steps[m] = t * etas[m]
        # kernelized blocks: f_m += eta_m v k_m(x, .), norms from the Gram matrices
        if v != 0.0:
            support.append(x.copy())
            for m in kfun:
                alpha[m].append(etas[m] * v)
        for m in kfun:
            a = np.array(alpha[m])
            G = np.array([[kfun[m](p, q) for q in support] for p in support]).reshape(len(a), -1)
            c[m] = np.sqrt(max(a @ G @ a, 0.0)) if a.size else 0.0
            steps[m] = etas[m]
        b = c.copy()
        for r in regs:
            b = r.prox_norms(b, steps)
        for i, m in enumerate(explicit):
            thetas[i] = -etas[m] * z[i] * (b[m] / c[m] if c[m] > 0 else 0.0)
        for m in kfun:
            ratio = b[m] / c[m] if c[m] > 0 else 0.0
            alpha[m] = [a * ratio for a in alpha[m]]
        for ours, ref in zip([_thetas(model)[m] for m in explicit], thetas, strict=True):
            np.testing.assert_allclose(ours, ref, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(model.block_norms, b, rtol=1e-8, atol=1e-12)
        ref_scores = [
            sum(th @ p[m] for th, m in zip(thetas, explicit, strict=True))
            + sum(f(m, q) for m in kfun)
            for q in probes
            for p in [_phis(model, q)]
        ]
        np.testing.assert_allclose(model.decision_many(probes)[:, 0], ref_scores, rtol=1e-9,
                                   atol=1e-12)  # fmt: skip
    np.testing.assert_allclose(model.block_steps[:-1], etas, rtol=1e-12)
    np.testing.assert_allclose(model.block_norms, support_block_norms(model), rtol=1e-8)
    assert len(support) > 10 and np.all(model.block_norms[2:] > 0)  # the kernelized blocks learn


def test_mixed_state_round_trips_and_learn_many_is_the_loop():
    X, Y = _stream(160, seed=9)
    cfg = dict(kernels=MIXED_BANK, loss=losses.Logistic(),
               regularizer=regularizers.GroupLasso(1e-3), schedule=schedules.FTRL(0.5),
               fit_intercept=True, budget=30, budget_policy="merge")  # fmt: skip
    a, b = OnlineMKL(**cfg), OnlineMKL(**cfg)
    a.learn_many(X[:100], Y[:100])
    for x, y in zip(X[:100], Y[:100], strict=True):
        b.learn(x, y)
    assert a.digest() == b.digest()
    assert a._state.n_support == 30  # the budget holds
    meta, arrays = a.to_state()
    c = OnlineMKL.from_state(meta, arrays)
    assert c.digest() == a.digest() and isinstance(c.schedule, schedules.FTRL)
    a.learn_many(X[100:], Y[100:])
    c.learn_many(X[100:], Y[100:])
    assert a.digest() == c.digest()
    np.testing.assert_allclose(a.block_norms, support_block_norms(a), rtol=1e-8)
    # the restart re-centres the explicit blocks' duals, leaves the support sets: theta stays
    before = a.decision_many(X[:20])
    a.restart_schedule()
    np.testing.assert_allclose(a.decision_many(X[:20]), before, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("bad", [dict(eta0=0), dict(eta0=float("nan")), dict(delta=0.0)])
def test_adaptive_schedule_parameters_are_checked(bad):
    with pytest.raises(ValueError):
        schedules.AdaGrad(**bad)


def test_adaptive_schedules_have_no_single_eta():
    with pytest.raises(TypeError, match="own step"):
        schedules.AdaGrad().eta(3)


def test_a_version_one_state_without_the_schedule_arrays_still_loads():
    X, Y = _stream(50)
    model = OnlineMKL(kernels=BANK)
    model.learn_many(X, Y)
    meta, arrays = model.to_state()
    meta["version"] = 1
    for key in ("step_acc", "step_prev", "stored_norms"):
        arrays.pop(key)
    old = OnlineMKL.from_state(meta, arrays)
    np.testing.assert_array_equal(old.decision_many(X), model.decision_many(X))


def test_mixed_averages_predict_with_the_kernelized_blocks_current_scores():
    """Per-block schedules keep exponential averages of the explicit blocks (and the bias);
    an average that leads predicts with them plus the kernelized blocks' current scores (their
    support sets are not averaged); the scores a round predicts with are what ``decision``
    gave just before it."""
    model = OnlineMKL(
        kernels=MIXED_BANK, loss=losses.Hinge(), regularizer=regularizers.GroupLasso(1e-3),
        schedule=schedules.FTRL(0.5), averages=(5.0, 50.0), fit_intercept=True, budget=None,
    )  # fmt: skip
    X, Y = _stream(150, seed=11)
    for x, y in zip(X[:120], Y[:120], strict=True):
        before = model.decision_many(x[None])[:, 0]
        _, scores = model.learn_many(x[None], y[None])
        assert scores[0, 0] == before[0]  # bit for bit
    S, L = model.state, model.layout
    probes = X[120:]
    S.avg_loss[:] = [0.0, 1.0, 1.0]  # the last iterate leads
    last = model.decision_many(probes)[:, 0]
    phis = [_phis(model, q) for q in probes]
    explicit = [m for m in range(len(MIXED_BANK)) if L.is_explicit[m]]
    thetas = _thetas(model)
    kernelized = last - S.bias[0] - np.array(
        [sum(thetas[m] @ p[m] for m in explicit) for p in phis]
    )  # fmt: skip
    assert np.all(np.abs(kernelized) > 0)
    for e in range(2):
        S.avg_loss[:] = 1.0
        S.avg_loss[e + 1] = 0.0  # average e leads
        got = model.decision_many(probes)[:, 0]
        avg = [S.avg_w[e, 0, L.ex_off[m] : L.ex_off[m + 1]] for m in range(len(MIXED_BANK))]
        ref = S.avg_bias[e, 0] + np.array([sum(avg[m] @ p[m] for m in explicit) for p in phis])
        np.testing.assert_allclose(got, ref + kernelized, rtol=1e-10, atol=1e-12)
        assert not np.allclose(got, last)
    with pytest.raises(ValueError, match="explicit blocks only"):
        OnlineMKL(kernels=MIXED_BANK, schedule=schedules.AdaGrad(0.5), averages=(5.0,))
    with pytest.raises(ValueError, match="explicit blocks only"):
        OnlineMKL(kernels=MIXED_BANK, schedule=schedules.FTRL(0.5), average=True)
