"""Regret against the best single kernel: shadow learners see exactly the main learner's stream."""

from __future__ import annotations

import math

import numpy as np
import pytest

from streammkl.core import OnlineMKL, kernels, regularizers, schedules
from streammkl.monitor import Monitor, MonitoredLoop
from streammkl.monitor.shadows import ShadowLearners


def _linear_stream(n=3000, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    Y = np.where(X @ rng.normal(size=d) > 0, 1.0, -1.0)  # one linear separator: linear is best
    return X, Y


def _config():
    return dict(
        kernels=(kernels.Linear(), kernels.RBF(5.0)),  # narrow rbf: hopeless in 5-d
        regularizer=regularizers.SquaredGroupLasso(0.01),
        schedule=schedules.InvSqrt(1.0),
        budget=128,
    )


def _alone(kernel, X, Y):
    model = OnlineMKL(**{**_config(), "kernels": (kernel,)})
    return float(sum(model.learn(x, y) for x, y in zip(X, Y, strict=True)))


@pytest.fixture(scope="module")
def run():
    X, Y = _linear_stream()
    model = OnlineMKL(**_config())
    mon = Monitor(model, window=None, detector=None)
    loop = MonitoredLoop(model, mon, shadows=True, shadow_batch=50)
    main = 0.0
    for x, y in zip(X, Y, strict=True):
        main += loop.learn_one(x, y)
    return X, Y, loop, main


def test_shadow_losses_are_the_single_kernel_learners_losses(run):
    X, Y, loop, main = run
    snap = loop.snapshot()  # flushes the last partial batch
    sh = loop.shadows
    assert sh.n_fed == len(X)
    for k in _config()["kernels"]:
        assert sh.shadow_loss[k.name] == pytest.approx(_alone(k, X, Y), rel=1e-12)
        assert sh.main_loss[k.name] == pytest.approx(main, rel=1e-12)
    assert snap["online_loss"] == pytest.approx(main, rel=1e-12)
    assert snap["shadow_regret"] == pytest.approx(main - sh.shadow_loss["linear"], rel=1e-12)


def test_the_clearly_best_kernel_is_the_best_shadow(run):
    loop = run[2]
    sh = loop.shadows
    linear, rbf = sh.shadow_loss["linear"], sh.shadow_loss["rbf(gamma=5)"]
    assert linear < 0.2 * rbf  # linear labels: the linear kernel alone is far better
    assert sh.best == "linear"
    regrets = sh.regrets()
    assert regrets["rbf(gamma=5)"] < 0  # the combination beats the hopeless kernel by a lot ...
    assert 0 < regrets["linear"] < 0.25 * linear  # ... and trails the best kernel a little
    assert sh.regret == regrets["linear"]


def test_batching_does_not_change_the_numbers_and_kernels_can_change():
    X, Y = _linear_stream(n=400, seed=1)
    totals = []
    for batch in (1, 64):
        model = OnlineMKL(**_config())
        sh = ShadowLearners(model, batch_size=batch)
        for x, y in zip(X, Y, strict=True):
            sh.observe(x, y, model.learn(x, y))
        sh.flush()
        totals.append(dict(sh.shadow_loss))
    assert totals[0] == pytest.approx(totals[1], rel=1e-12)
    # a kernel added at run time gets a fresh shadow, compared over its own lifetime only
    model.add_kernel(kernels.Polynomial(2))
    for x, y in zip(X[:100], Y[:100], strict=True):
        sh.observe(x, y, 1.0)
    sh.flush()
    assert sh.main_loss["poly2"] == 100.0 and sh.main_loss["linear"] > 100.0
    model.remove_kernel("rbf(gamma=5)")
    sh.flush()
    sh.observe(X[0], Y[0], 0.0)
    sh.flush()
    assert sorted(sh.shadows) == ["linear", "poly2"]
    assert math.isnan(ShadowLearners(OnlineMKL(**_config())).regret)


def test_the_daemon_default_bank_has_a_shadow_for_every_kernel():
    # The exact quadratic map alone (a shadow's bank) laid its feature map out in Fortran order,
    # which the compiled round's argument pack cannot take: monitor.shadows = true with the
    # daemon's default bank ended the daemon at its first record.
    from streammkl.river import MKLClassifier

    clf = MKLClassifier(standardize=True)
    rng = np.random.default_rng(0)
    for i in range(8):
        clf.learn_one({"a": float(rng.normal()), "b": float(rng.normal())}, i % 2)
    shadows = ShadowLearners(clf.rounds().model, batch_size=4)
    X = rng.normal(size=(8, 2))
    shadows.observe_many(X, np.arange(8.0) % 2, np.ones(8))
    assert set(shadows.shadows) == set(clf.rounds().kernel_names) and shadows.n_fed == 8
    assert all(math.isfinite(v) for v in shadows.regrets().values())
