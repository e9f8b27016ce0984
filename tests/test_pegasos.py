"""One explicit linear block with L2 reproduces the closed-form proximal Pegasos / SGD recursion."""

from __future__ import annotations

import numpy as np
import pytest

from streammkl.core import OnlineMKL, kernels, losses, regularizers, schedules


@pytest.mark.parametrize("project", [False, True])
def test_l2_hinge_is_proximal_pegasos(project):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(3000, 10))
    Y = np.where(X @ rng.normal(size=10) + 0.3 * rng.normal(size=3000) > 0, 1.0, -1.0)
    lam = 0.05
    radius = 1 / np.sqrt(lam) if project else None
    model = OnlineMKL(
        kernels=(kernels.Linear(),), loss=losses.Hinge(), regularizer=regularizers.L2(lam),
        schedule=schedules.InvT(lam), radius=radius,
    )  # fmt: skip
    w = np.zeros(10)
    for t, (x, y) in enumerate(zip(X, Y, strict=True), start=1):
        eta = 1.0 / (lam * t)
        if y * (w @ x) < 1:
            w = w + eta * y * x
        w = w / (1 + eta * lam)
        if project:
            w *= min(1.0, radius / np.linalg.norm(w))
        model.learn(x, y)
        if t % 500 == 0:
            assert abs(model.decision(x) - w @ x) < 1e-9 * max(1.0, abs(w @ x))
    assert abs(model.block_norms[0] - np.linalg.norm(w)) < 1e-9 * np.linalg.norm(w)
    probe = rng.normal(size=(50, 10))
    np.testing.assert_allclose([model.decision(p) for p in probe], probe @ w, rtol=1e-9)


def test_squared_loss_sgd_with_constant_step():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(500, 4))
    Y = X @ np.array([1.0, -2.0, 0.5, 0.0]) + 0.1 * rng.normal(size=500)
    eta, lam = 0.05, 0.1
    model = OnlineMKL(
        kernels=(kernels.Linear(),), loss=losses.Squared(), regularizer=regularizers.L2(lam),
        schedule=schedules.Constant(eta), fit_intercept=True,
    )  # fmt: skip
    w, b = np.zeros(4), 0.0
    for x, y in zip(X, Y, strict=True):
        r = y - (w @ x + b)
        w = (w + eta * r * x) / (1 + eta * lam)
        b = b + eta * r
        model.learn(x, y)
    np.testing.assert_allclose(model.decision(X[0]), w @ X[0] + b, rtol=1e-10)
