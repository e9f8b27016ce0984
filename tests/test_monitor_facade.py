"""The Monitor facade: a flat dict of floats with documented Prometheus names, state round trip,
river learners through ``.core``, clear errors."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from streammkl.core import OnlineMKL, kernels, losses, regularizers, schedules
from streammkl.monitor import METRICS, Monitor, MonitoredLoop
from streammkl.monitor.hindsight import EpochComparator, ExactComparator
from streammkl.monitor.regret import make_comparator
from streammkl.river import MKLClassifier


def _stream(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    return X, np.where(X[:, 0] - X[:, 1] > 0, 1.0, -1.0)


def _model(**kw):
    base = dict(
        kernels=(kernels.Linear(), kernels.RBF(0.5, n_components=16)),
        regularizer=regularizers.SquaredGroupLasso(0.01),
        schedule=schedules.InvSqrt(0.5),
        radius="auto",
    )
    return OnlineMKL(**{**base, **kw})


def test_metric_names_follow_prometheus_conventions():
    names = [m.name for m in METRICS.values()]
    assert len(set(names)) == len(names)
    for key, m in METRICS.items():
        assert re.fullmatch(r"streammkl_[a-z0-9_]+", m.name), key
        assert m.type in ("gauge", "counter")
        assert m.name.endswith("_total") == (m.type == "counter"), key
        assert len(m.help) > 30 and m.help.endswith("."), key


def test_snapshot_before_and_after_fits():
    model = _model()
    mon = Monitor(model, window=400, every=200, background=False)
    loop = MonitoredLoop(model, mon, shadows=True)
    snap = loop.snapshot()
    assert snap.keys() == METRICS.keys()
    assert all(type(v) is float for v in snap.values())
    assert math.isnan(snap["window_regret"]) and snap["window_size"] == 0
    assert math.isnan(snap["shadow_regret"]) and snap["last_drift_example"] == -1
    X, Y = _stream(1000)
    for x, y in zip(X, Y, strict=True):
        loop.learn_one(x, y)
    snap = loop.snapshot()
    assert all(type(v) is float for v in snap.values())
    assert snap["examples"] == 1000 and snap["window_end"] == 1000 and snap["window_size"] == 400
    assert snap["window_comparator_exact"] == 0.0
    assert snap["window_regret_per_example"] == snap["window_regret"] / 400
    assert snap["window_regret"] == (
        snap["window_online_objective"] - snap["window_comparator_objective"]
    )
    assert math.isfinite(snap["regret_bound"]) and math.isfinite(snap["window_regret_bound"])
    assert math.isfinite(snap["shadow_regret"])
    assert snap["online_objective"] > snap["online_loss"] > 0


def test_state_round_trip_continues_the_counters():
    X, Y = _stream(600, seed=1)
    model = _model()
    mon = Monitor(model, window=None)
    loop = MonitoredLoop(model, mon)
    for x, y in zip(X[:300], Y[:300], strict=True):
        loop.learn_one(x, y)
    state = mon.to_state()
    restored = Monitor(model, window=None)
    restored.restore(state)
    for x, y in zip(X[300:], Y[300:], strict=True):
        reg = model.regularization_value()
        loss = model.learn(x, y)
        mon.observe(x, y, loss, reg)
        restored.observe(x, y, loss, reg)
    a, b = loop.snapshot(), restored.snapshot()
    for key in ("examples", "online_objective", "online_loss", "regret_bound", "feature_norm_max"):
        assert a[key] == pytest.approx(b[key], rel=1e-12), key


def test_river_classifier_core_and_intercept_means_no_bound():
    clf = MKLClassifier(kernels=(kernels.Linear(),), loss=losses.Hinge(), seed=0)
    clf.learn_one({"a": 1.0, "b": 0.0}, True)
    core = clf.rounds().model
    mon = Monitor(core, window=None, detector=None)
    loop = MonitoredLoop(core, mon)
    X, Y = _stream(300, seed=2)
    for x, y in zip(X[:, :2], Y, strict=True):
        loop.learn_one(x, y)
    snap = loop.snapshot()
    assert snap["examples"] == 300
    assert snap["regret_bound"] == math.inf  # fit_intercept=True (river default): no bound
    with pytest.raises(TypeError, match="core"):
        Monitor(clf)


def test_comparator_choices_and_clear_errors():
    model = _model()
    assert isinstance(make_comparator("epochs", model), EpochComparator)
    # random Fourier blocks: the batch solver would use the exact Gaussian -> refused / fallback
    assert isinstance(make_comparator("auto", model), EpochComparator)
    with pytest.raises(ValueError, match="random Fourier"):
        make_comparator("exact", model)
    with pytest.raises(ValueError, match="radius"):
        ExactComparator.check(_model(kernels=(kernels.Linear(),), radius=0.5))
    exact_ok = _model(kernels=(kernels.Linear(), kernels.RBF(0.5)))
    assert isinstance(make_comparator("auto", exact_ok), ExactComparator)
    with pytest.raises(ValueError, match="comparator"):
        make_comparator("simplex", model)
    with pytest.raises(ValueError, match="window"):
        Monitor(model, window=1)
    with pytest.raises(ValueError, match="every"):
        Monitor(model, window=100, every=200)
    with pytest.raises(ValueError, match="detector_input"):
        Monitor(model, detector_input="margin")
    with pytest.raises(ValueError, match="classification"):
        Monitor(_model(loss=losses.Squared(), radius=None), detector_input="error")


def test_new_inputs_and_runtime_kernel_changes_keep_the_monitor_consistent():
    model = _model(kernels=(kernels.Linear(),))
    mon = Monitor(model, window=200, every=100, background=False)
    loop = MonitoredLoop(model, mon, shadows=True)
    X, Y = _stream(600, seed=3)
    for x, y in zip(X[:200, :2], Y[:200], strict=True):  # two inputs at first
        loop.learn_one(x, y)
    model.add_kernel(kernels.RBF(0.5, n_components=16))
    for x, y in zip(X[200:400], Y[200:400], strict=True):  # a third input appears
        loop.learn_one(x, y)
    model.remove_kernel("linear")
    for x, y in zip(X[400:], Y[400:], strict=True):
        loop.learn_one(x, y)
    snap = loop.snapshot()
    assert mon.regret.n_errors == 0, mon.regret.last_error
    assert [e.end for e in mon.regret.history] == [100, 200, 300, 400, 500, 600]
    assert sorted(loop.shadows.shadows) == ["rff(gamma=0.5,D=16)"]
    assert loop.shadows.main_loss["rff(gamma=0.5,D=16)"] < snap["online_loss"]  # since its addition
    # ||phi||^2: linear ||x||^2 (+2 for the RFF block while both are in the bank)
    expected = max(
        max(float(x[:2] @ x[:2]) for x in X[:200]),
        max(float(x @ x) + 2.0 for x in X[200:400]),
        2.0,
    )
    assert snap["feature_norm_max"] == pytest.approx(math.sqrt(expected), rel=1e-12)
    # beta moved from {linear: 1} to {rff: 1} within the last 1000 examples
    assert snap["beta_movement"] == 1.0
