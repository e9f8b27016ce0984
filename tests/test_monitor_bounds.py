"""Prop. 3 for the configured schedule: G from ||phi(x)||, F = 2 radius, inf when none applies."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize

from streammkl.core import OnlineMKL, kernels, losses, regularizers, schedules
from streammkl.monitor import Monitor, MonitoredLoop, theory
from streammkl.monitor.bounds import regret_bound


@pytest.mark.parametrize(
    "kernel",
    [
        kernels.Linear(),
        kernels.Linear(normalize=True),
        kernels.Linear(implicit=True),
        kernels.Polynomial(degree=3, coef0=0.5, normalize=False),
        kernels.Polynomial(degree=2),
        kernels.Polynomial(degree=2, explicit=True),
        kernels.RBF(0.7),
        kernels.B1Spline(2.0),
        kernels.Linear(features=(0, 2)),
    ],
    ids=lambda k: k.name,
)
def test_feature_norm_is_the_kernel_diagonal(kernel):
    rng = np.random.default_rng(0)
    model = OnlineMKL(kernels=(kernel,))
    norms = theory.FeatureNorms()
    for x in rng.normal(size=(5, 3)):
        assert norms.norm_sq(model, x) == pytest.approx(kernel.gram(x[None, :])[0, 0], rel=1e-12)


def test_feature_norms_sum_blocks_select_named_features_and_bound_random_fourier_maps():
    bank = (kernels.Linear(features=("a", "c")), kernels.RBF(1.0, n_components=8))
    model = OnlineMKL(kernels=bank)
    model.declare_features(["a", "b", "c"])
    norms = theory.FeatureNorms()
    assert norms.update(model, np.array([1.0, 5.0, 2.0])) == 1 + 4 + 2  # RFF: ||phi||^2 <= 2
    assert norms.update(model, np.array([0.0, 9.0, 0.5])) == 0.25 + 2
    assert norms.max_sq == 7


def _learned(model, n=200, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    norms = theory.FeatureNorms()
    for x in X:
        norms.update(model, x)
        model.learn(x, 1.0 if x[0] + 0.3 * x[1] > 0 else -1.0)
    return norms.max_sq


def test_prop3_bound_per_schedule():
    lam = 0.01
    sgl = regularizers.SquaredGroupLasso(lam)
    bank = (kernels.Linear(), kernels.RBF(1.0))

    m = OnlineMKL(kernels=bank, regularizer=sgl, schedule=schedules.InvSqrt(0.5), radius=2.0)
    sq = _learned(m)
    G = math.sqrt(sq)  # hinge: Lipschitz 1
    assert theory.prop3_bound(m, sq) == regret_bound("InvSqrt", 200, G, eta=0.5, F=4.0)

    m = OnlineMKL(kernels=bank, regularizer=sgl, schedule=schedules.Constant(0.1))
    sq = _learned(m)
    star = math.sqrt(2 * 1.0 / lam)  # Prop. 9: hinge Lambda = 1
    expected = 0.1 * 200 * sq / 2 + star**2 / (2 * 0.1)
    assert theory.prop3_bound(m, sq) == pytest.approx(expected, rel=1e-12)
    # after a restart from theta_1: (||theta*|| + ||theta_1||) and lambda Omega(theta_1) enter
    got = theory.prop3_bound(m, sq, theta_start_norm=1.5, reg_start=0.25)
    assert got == pytest.approx(0.1 * 200 * sq / 2 + (star + 1.5) ** 2 / 0.2 + 0.25, rel=1e-12)

    m = OnlineMKL(
        kernels=(kernels.Linear(),), loss=losses.Logistic(), regularizer=regularizers.L2(lam),
        schedule=schedules.InvT(lam),
    )  # fmt: skip
    sq = _learned(m)
    star_sq = 2 * math.log(2) / lam
    expected = sq * (1 + math.log(200)) / (2 * lam) + lam * star_sq / 2
    assert theory.prop3_bound(m, sq) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    "config, why",
    [
        (dict(schedule=schedules.InvSqrt(1.0)), "InvSqrt without a radius"),
        (dict(schedule=schedules.InvSqrt(1.0), radius=2.0, fit_intercept=True), "intercept"),
        (dict(loss=losses.Squared(), radius=2.0), "squared loss is not Lipschitz"),
        (dict(schedule=schedules.Constant(0.1), loss=losses.Squared()), "squared loss"),
        (dict(schedule=schedules.Constant(0.1), regularizer=regularizers.GroupLasso(0.1)), "no θ*"),
        (dict(schedule=schedules.InvT(0.01)), "squared group lasso, 2 blocks: not strongly convex"),
        (dict(schedule=schedules.InvT(0.1), regularizer=regularizers.L2(0.01)), "sigma > lambda"),
    ],
)  # fmt: skip
def test_no_bound_is_reported_as_inf(config, why):
    task = "regression" if "loss" in config and config["loss"].task == "regression" else "binary"
    bank = (kernels.Linear(), kernels.RBF(1.0))
    model = OnlineMKL(kernels=bank, **config)
    rng = np.random.default_rng(1)
    for x in rng.normal(size=(20, 3)):
        model.learn(x, float(x[0]) if task == "regression" else 1.0)
    assert theory.prop3_bound(model, 3.0) == math.inf, why


def test_window_bound_handles_any_step_sequence():
    etas = 0.5 / np.sqrt(np.arange(101, 201))
    F, G = 4.0, 2.0
    monotone = F**2 / (2 * etas[-1]) + G**2 / 2 * etas.sum() + 0.3
    assert theory.window_bound(etas, F, G, 0.3) == pytest.approx(monotone, rel=1e-12)
    # a restart inside the window: 1/eta drops to 1/eta0 and climbs again, both climbs count
    restarted = np.concatenate([etas[:50], 0.5 / np.sqrt(np.arange(1, 51))])
    rises = (1 / restarted[49] - 1 / restarted[0]) + (1 / restarted[-1] - 1 / restarted[50])
    expected = F**2 / 2 * (1 / restarted[0] + rises) + G**2 / 2 * restarted.sum()
    assert theory.window_bound(restarted, F, G, 0.0) == pytest.approx(expected, rel=1e-12)
    assert theory.window_bound(etas, math.inf, G, 0.0) == math.inf


def test_invt_composite_bound_holds_against_the_exact_hindsight_optimum():
    """Logistic + L2 on one linear block, eta_t = 1/(lambda t): true regret <= the bound."""
    lam, n = 0.05, 1500
    rng = np.random.default_rng(4)
    X = rng.normal(size=(n, 3))
    Y = np.where(X @ np.array([1.0, -2.0, 0.5]) + rng.normal(size=n) > 0, 1.0, -1.0)
    model = OnlineMKL(
        kernels=(kernels.Linear(),), loss=losses.Logistic(), regularizer=regularizers.L2(lam),
        schedule=schedules.InvT(lam),
    )  # fmt: skip
    mon = Monitor(model, window=None, detector=None)
    loop = MonitoredLoop(model, mon)
    for x, y in zip(X, Y, strict=True):
        loop.learn_one(x, y)

    def objective(w):
        z = Y * (X @ w)
        return np.sum(np.logaddexp(0.0, -z)) + n * lam / 2 * w @ w

    def gradient(w):
        s = -Y / (1 + np.exp(Y * (X @ w)))
        return X.T @ s + n * lam * w

    best = minimize(objective, np.zeros(3), jac=gradient, method="L-BFGS-B", tol=1e-12).fun
    snap = loop.snapshot()
    regret = snap["online_objective"] - best
    assert 0 < regret < snap["regret_bound"] < math.inf


def test_adagrad_bound_holds_against_the_exact_hindsight_optimum_and_ftrl_has_none():
    """AdaGrad, one step per block, projected on a ball: the online objective minus the best
    fixed theta in the ball stays below sum_m (F^2/(2 eta0) + eta0) sqrt(delta + G_m)."""
    lam, n, radius = 0.02, 1500, 2.0
    rng = np.random.default_rng(5)
    X = rng.normal(size=(n, 4))
    Y = np.where(X @ np.array([1.0, -2.0, 0.5, 0.0]) + rng.normal(size=n) > 0, 1.0, -1.0)
    bank = (kernels.Linear(features=(0, 1)), kernels.Linear(features=(2, 3)))
    model = OnlineMKL(
        kernels=bank, loss=losses.Logistic(), regularizer=regularizers.SquaredGroupLasso(lam),
        schedule=schedules.AdaGrad(0.5), radius=radius,
    )  # fmt: skip
    mon = Monitor(model, window=None, detector=None)
    loop = MonitoredLoop(model, mon)
    for x, y in zip(X, Y, strict=True):
        loop.learn_one(x, y)

    def objective(w):
        z = Y * (X @ w)
        reg = lam / 2 * (np.linalg.norm(w[:2]) + np.linalg.norm(w[2:])) ** 2
        return np.sum(np.logaddexp(0.0, -z)) + n * reg

    ball = {"type": "ineq", "fun": lambda w: radius**2 - w @ w}
    best = min(
        minimize(objective, w0, method="SLSQP", constraints=[ball], tol=1e-12).fun
        for w0 in (np.zeros(4), np.array([0.5, -1.0, 0.2, 0.1]))
    )
    snap = loop.snapshot()
    regret = snap["online_objective"] - best
    sums = model.gradient_sq_sums[:-1]
    bound = (2 * radius) ** 2 / (2 * 0.5) + 0.5
    assert snap["regret_bound"] == pytest.approx(bound * np.sum(np.sqrt(1e-8 + sums)))
    assert 0 < regret < snap["regret_bound"] < math.inf

    ftrl = OnlineMKL(kernels=bank, loss=losses.Logistic(), schedule=schedules.FTRL(), radius=2.0)
    mon = Monitor(ftrl, window=None, detector=None)
    loop = MonitoredLoop(ftrl, mon)
    for x, y in zip(X[:50], Y[:50], strict=True):
        loop.learn_one(x, y)
    assert loop.snapshot()["regret_bound"] == math.inf
