"""Drift detection on the prequential loss restarts the schedule on rises only; β movement."""

from __future__ import annotations

import math

import numpy as np
import pytest
from river import drift

from streammkl.core import OnlineMKL, kernels, schedules
from streammkl.monitor import Monitor
from streammkl.monitor.drift import BetaMovement, LossDriftDetector, total_variation


def _steps(levels, length=1500, seed=0):
    rng = np.random.default_rng(seed)
    return np.concatenate([lv + 0.05 * rng.normal(size=length) for lv in levels])


@pytest.mark.parametrize("detector", ["adwin", "page-hinkley"])
def test_a_rise_restarts_a_fall_does_not(detector):
    det = LossDriftDetector(detector)
    stream = _steps([0.2, 0.8, 0.1])  # rise at 1500, fall at 3000
    restarts = [t for t, v in enumerate(stream) if det.update(v, t)]
    assert len(restarts) == 1 and 1500 <= restarts[0] < 1600
    assert det.n_restarts == 1 and det.last_restart == restarts[0]
    if detector == "adwin":  # ADWIN sees the fall too: counted, ignored
        assert det.n_ignored >= 1


def test_restart_on_any_and_custom_detector_instances():
    stream = _steps([0.8, 0.2])  # only a fall
    assert not any(LossDriftDetector("adwin").update(v, t) for t, v in enumerate(stream))
    det = LossDriftDetector(drift.ADWIN(delta=0.01), restart_on="any")
    assert sum(det.update(v, t) for t, v in enumerate(stream)) >= 1
    # a both-ways Page-Hinkley has no 'estimation': the direction comes from the running means
    det = LossDriftDetector(drift.PageHinkley(mode="both"))
    assert sum(det.update(v, t) for t, v in enumerate(stream)) == 0
    assert det.n_ignored >= 1
    assert not det.update(math.nan, 0)  # a non-finite loss is not fed to the detector
    with pytest.raises(ValueError, match="detector"):
        LossDriftDetector("cusum")
    with pytest.raises(ValueError, match="restart_on"):
        LossDriftDetector("adwin", restart_on="decrease")


def test_beta_movement_is_the_total_variation_over_the_lag():
    assert total_variation({"a": 1.0}, {"b": 1.0}) == 1.0
    assert total_variation({"a": 0.5, "b": 0.5}, {"a": 0.5, "b": 0.5}) == 0.0
    bm = BetaMovement(lag=100, stride=10)
    for t in range(0, 300):
        w = {"a": 1.0, "b": 0.0} if t < 150 else {"a": 0.25, "b": 0.75}
        if bm.due(t):
            bm.update(t, w)
        if t == 90:
            assert bm.value == 0.0 and bm.span == 90  # fewer than lag examples: from the start
        if t == 200:
            assert bm.value == 0.75 and bm.span == 100  # beta at 200 vs beta at 100
    assert bm.value == 0.0 and bm.span == 100  # settled for longer than the lag
    bm.update(300, {"a": 0.25, "b": 0.5, "new": 0.25})  # a kernel added at run time
    assert bm.value == pytest.approx(0.25)


def test_monitor_restarts_the_learners_schedule_and_counts():
    model = OnlineMKL(kernels=(kernels.Linear(),), schedule=schedules.InvSqrt(1.0))
    mon = Monitor(model, window=None, detector="adwin")
    rng = np.random.default_rng(2)
    X = rng.normal(size=(4000, 3))
    w = np.array([1.0, -1.0, 0.5])
    Y = np.sign(X @ w)
    Y[2000:] = -Y[2000:]  # concept flip: the loss jumps
    restarts = [t for t, (x, y) in enumerate(zip(X, Y, strict=True)) if _step(mon, x, y)]
    assert restarts and 2000 <= restarts[0] < 2100
    assert model.schedule.t == 4000 - 1 - restarts[-1]  # counted from the last restart
    assert model.t == 4000  # the model itself is untouched
    snap = mon.snapshot()
    assert snap["drift_detections"] == len(restarts)
    assert snap["last_drift_example"] == restarts[-1]
    assert snap["regret_bound_rounds"] == model.schedule.t
    assert snap["beta_movement"] == 0.0 and snap["beta_movement_span"] == 1000  # one kernel: 1


def _step(mon, x, y):
    reg = mon.model.regularization_value()
    if mon.observe(x, y, mon.model.learn(x, y), reg):  # the monitor asks; the caller restarts
        mon.model.restart_schedule()
        mon.restarted()
        return True
    return False


def test_detection_without_restart_and_on_the_error_rate():
    model = OnlineMKL(kernels=(kernels.Linear(),), schedule=schedules.InvSqrt(1.0))
    mon = Monitor(model, window=None, restart_on_drift=False, detector_input="error")
    rng = np.random.default_rng(3)
    X = rng.normal(size=(4000, 2))
    Y = np.sign(X[:, 0])
    Y[2000:] = -Y[2000:]
    for x, y in zip(X, Y, strict=True):
        scores = model.decision(x)
        reg = model.regularization_value()
        assert not mon.observe(x, y, model.learn(x, y), reg, scores)
    assert mon.detector.n_restarts >= 1 and model.schedule.t == 4000  # counted, not restarted
    with pytest.raises(ValueError, match="scores"):
        mon.observe(X[0], Y[0], 0.0, 0.0)
