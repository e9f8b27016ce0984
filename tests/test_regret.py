"""Regret of the online learner against an offline comparator: sublinear, under Prop. 3's bound."""

from __future__ import annotations

import itertools

import numpy as np

from streammkl.core import OnlineMKL, kernels, losses, regularizers, schedules
from streammkl.monitor.bounds import regret_bound
from streammkl.monitor.epoch_fit import fit_comparator


def _stream(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 4))
    f = X[:, 0] - X[:, 1] + np.sin(3 * X[:, 2])
    Y = np.where(f + 0.2 * rng.normal(size=n) > 0, 1.0, -1.0)  # noisy: regret is not trivial
    return X, Y


def test_regret_is_sublinear_and_below_the_prop3_bound():
    lam, eta0 = 0.01, 0.5
    config = dict(
        kernels=(kernels.Linear(), kernels.RBF(1.0, n_components=64)),
        loss=losses.Hinge(),
        regularizer=regularizers.SquaredGroupLasso(lam),
        schedule=schedules.InvSqrt(eta0),
        radius="auto",
        seed=0,
    )
    T_max = 4000
    X, Y = _stream(T_max)
    online = OnlineMKL(**config)
    cum = np.zeros(T_max)  # cumulative online objective sum_t [lam Omega(theta_t) + L(theta_t)]
    total = 0.0
    for t, (x, y) in enumerate(zip(X, Y, strict=True)):
        loss, reg = online.objective_terms(x, y)
        total += loss + reg
        cum[t] = total
        online.learn(x, y)
    gamma = online.radius
    assert abs(gamma - np.sqrt(2 * 1.0 / lam)) < 1e-12  # Prop. 9: gamma = sqrt(2 Lambda / lambda)
    G = max(np.sqrt(x @ x + 2.0) for x in X)  # hinge: ||g|| = ||phi(x)||; RFF: ||phi||^2 <= 2
    regrets = {}
    for T in (500, 1000, 2000, 4000):
        fit = fit_comparator(config, X[:T], Y[:T], max_epochs=150, eta0=eta0, seed=1)
        regrets[T] = cum[T - 1] - fit.objective
        bound = regret_bound("InvSqrt", T, G, eta=eta0, F=2 * gamma)
        assert 0 < regrets[T] < bound
    per_example = [regrets[T] / T for T in (500, 1000, 2000, 4000)]
    assert all(a > b for a, b in itertools.pairwise(per_example))
    # sublinear: quadrupling T from 1000 to 4000 grows regret well below 4x (sqrt(T): 2x)
    assert regrets[4000] / regrets[1000] < 3.0
