"""Windowed regret: sublinear on a stationary stream, exact against a closed-form comparator, and
estimated off the hot path without ever blocking ``observe``."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest

from streammkl.core import OnlineMKL, kernels, losses, regularizers, schedules
from streammkl.monitor import Monitor, MonitoredLoop
from streammkl.monitor.hindsight import ComparatorResult, EpochComparator
from streammkl.monitor.regret import WindowedRegret

TIMEOUT = 120  # seconds; only to fail instead of hanging, never asserted on


def _classification_stream(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 4))
    f = X[:, 0] - X[:, 1] + np.sin(3 * X[:, 2])
    Y = np.where(f + 0.2 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, Y


def test_stationary_windowed_regret_per_example_decays_and_stays_below_the_bound():
    model = OnlineMKL(
        kernels=(kernels.Linear(), kernels.RBF(1.0, n_components=64)),
        loss=losses.Hinge(),
        regularizer=regularizers.SquaredGroupLasso(0.01),
        schedule=schedules.InvSqrt(0.5),
        radius="auto",
    )
    replay = OnlineMKL(**model.config())  # an independent copy to recompute the online terms
    mon = Monitor(model, window=1000, every=500, background=False, detector=None)
    loop = MonitoredLoop(model, mon)
    X, Y = _classification_stream(6000)
    terms = []
    for x, y in zip(X, Y, strict=True):
        reg = replay.regularization_value()
        terms.append(replay.learn(x, y) + reg)
        loop.learn_one(x, y)
    history = list(mon.regret.history)
    assert [e.end for e in history] == list(range(500, 6001, 500))
    assert [e.window for e in history] == [500] + [1000] * 11
    for e in history:
        # the online side is exactly the prequential objective of the learner on the window
        assert e.online_objective == pytest.approx(sum(terms[e.end - e.window : e.end]), abs=1e-9)
        assert 0 < e.regret < e.bound  # the lemma summed over the window: a theorem, checked
        assert not e.exact and e.method == "epochs"
    per = np.array([e.regret_per_example for e in history])
    # tends to 0: early windows pay for learning; late ones only the window-ERM optimism
    assert per[-1] < 0.25 * per[0]
    assert per[6:].mean() < 0.5 * per[:6].mean()
    assert per[6:].max() < 0.015
    snap = loop.snapshot()
    assert snap["window_regret"] == history[-1].regret
    assert snap["window_regret_per_example"] == history[-1].regret_per_example
    assert snap["window_size"] == 1000 and snap["window_end"] == 6000
    assert snap["online_objective"] == pytest.approx(sum(terms), rel=1e-12)
    # Prop. 3.2 (eta0/sqrt(t), F = 2 gamma): finite, and above the windowed regret
    gamma = math.sqrt(2 / 0.01)
    G = snap["feature_norm_max"]
    expected = (4 * gamma**2 / (2 * 0.5) + G**2 * 0.5) * math.sqrt(6000)
    assert snap["regret_bound"] == pytest.approx(expected, rel=1e-12)
    assert snap["window_regret"] < snap["regret_bound"]


LAM = 0.05


def _ridge_objective(X, Y):
    """min_theta sum_t [(y_t - <theta, x_t>)^2 / 2 + lam/2 ||theta||^2], in closed form."""
    n, d = X.shape
    theta = np.linalg.solve(X.T @ X + n * LAM * np.eye(d), X.T @ Y)
    return 0.5 * np.sum((Y - X @ theta) ** 2) + n * LAM / 2 * theta @ theta


def _ridge_run(comparator, n=2000, window=1000, every=500):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(n, 5)) / np.sqrt(5)
    Y = X @ rng.normal(size=5) + 0.3 * rng.normal(size=n)
    model = OnlineMKL(
        kernels=(kernels.Linear(),),
        loss=losses.Squared(),
        regularizer=regularizers.L2(LAM),
        schedule=schedules.InvSqrt(0.3),
    )
    wr = WindowedRegret(model, window, every, comparator=comparator, background=False)
    online = []
    for x, y in zip(X, Y, strict=True):
        reg = model.regularization_value()
        loss = model.learn(x, y)
        online.append(loss + reg)
        wr.observe(x, y, loss, reg, model.schedule.eta(model.schedule.t), float(x @ x))
    assert wr.n_errors == 0, wr.last_error
    out = []
    for e in wr.history:
        rows = slice(e.end - e.window, e.end)
        best = _ridge_objective(X[rows], Y[rows])
        out.append((e, best, sum(online[rows])))
    return out


def test_epoch_comparator_matches_the_closed_form_ridge_optimum():
    results = _ridge_run(EpochComparator(max_epochs=300, rel_tol=1e-8, patience=10))
    assert len(results) == 4
    for e, best, online in results:
        # a real hypothesis: never below the minimum; and within 2e-5 of it
        assert e.comparator_objective >= best * (1 - 1e-12)
        assert e.comparator_objective <= best * (1 + 2e-5)
        true_regret = online - best
        assert e.regret <= true_regret + 1e-9  # a lower bound on the true windowed regret
        assert e.regret == pytest.approx(true_regret, abs=2e-5 * best)
        assert e.bound == math.inf  # squared loss, no radius: no bound, said honestly


def test_exact_comparator_matches_the_closed_form_ridge_optimum():
    results = _ridge_run("exact", n=1500)
    assert len(results) == 3
    for e, best, online in results:
        assert e.exact and e.method == "exact"
        assert e.comparator_objective == pytest.approx(best, rel=1e-6)
        assert e.regret == pytest.approx(online - best, abs=1e-6 * best)


class _GatedComparator:
    """Blocks inside fit() until released; records the windows it was given."""

    method, exact = "gated", True

    def __init__(self):
        self.started = threading.Event()
        self.release = threading.Event()
        self.windows = []

    def fit(self, config, feature_keys, X, Y):
        self.windows.append((X.copy(), Y.copy()))
        self.started.set()
        if not self.release.wait(TIMEOUT):
            raise RuntimeError("never released")
        if len(self.windows) == 3:
            raise ValueError("a failing fit is counted, not fatal")
        return ComparatorResult(float(len(self.windows)), 1)


def test_observe_never_waits_for_a_running_fit_and_the_window_is_not_torn():
    model = OnlineMKL(kernels=(kernels.Linear(),), schedule=schedules.InvSqrt(0.5))
    gate = _GatedComparator()
    wr = WindowedRegret(model, window=200, every=100, comparator=gate)
    X, Y = _classification_stream(800, seed=5)

    def feed(rows):
        for i in rows:
            reg = model.regularization_value()
            wr.observe(X[i], Y[i], model.learn(X[i], Y[i]), reg, 0.1, 1.0)

    feed(range(100))  # the first cut: a fit starts on the worker and blocks in the comparator
    assert gate.started.wait(TIMEOUT)
    feed(range(100, 400))  # returns although the fit is still running: observe never waits
    assert wr.busy and wr.latest is None
    assert wr.n_requested == 4 and wr.n_skipped == 2  # cuts at 200 and 300 were superseded
    gate.release.set()
    assert wr.wait(TIMEOUT)
    assert [e.end for e in wr.history] == [100, 400]
    assert [e.comparator_objective for e in wr.history] == [1.0, 2.0]
    # the windows the worker saw are exactly the examples of each cut, untouched by later writes
    np.testing.assert_array_equal(gate.windows[0][0], X[:100])
    np.testing.assert_array_equal(gate.windows[1][0], X[200:400])
    np.testing.assert_array_equal(gate.windows[1][1], Y[200:400])
    feed(range(400, 500))  # third fit raises: counted, the worker survives
    assert wr.wait(TIMEOUT)
    assert wr.n_errors == 1 and "counted" in wr.last_error
    feed(range(500, 800))
    assert wr.wait(TIMEOUT)
    assert wr.latest.end == 800 and wr.n_errors == 1
    # bounded memory: ceil(window / every) frozen chunks, whatever the stream length
    assert wr.store.n_chunks <= 2
    wr.close(TIMEOUT)


def test_warm_started_comparator_follows_the_windows():
    X, Y = _classification_stream(3000, seed=2)
    model = OnlineMKL(
        kernels=(kernels.Linear(), kernels.RBF(1.0)),
        regularizer=regularizers.SquaredGroupLasso(0.01),
        schedule=schedules.InvSqrt(0.5),
        radius="auto",
        budget=64,
    )
    comparator = EpochComparator(max_epochs=60)
    mon = Monitor(model, window=1000, every=500, comparator=comparator, detector=None)
    loop = MonitoredLoop(model, mon)
    for x, y in zip(X, Y, strict=True):
        loop.learn_one(x, y)
    assert mon.wait(TIMEOUT)
    est = mon.regret.latest
    assert est.end == 3000 and est.window == 1000 and mon.regret.n_errors == 0
    # the budgeted kernelized comparator is a real hypothesis with <= budget support pairs
    assert comparator._previous.n_support <= 64
    assert 0 < est.regret < est.bound
    mon.close(TIMEOUT)
