"""The compiled ADWIN is river's ADWIN: the same detections, widths, totals and variances, value
by value; and LossDriftDetector's compiled feed is its value-by-value loop over river's detector."""

from __future__ import annotations

import math

import numpy as np
import pytest
from river import drift

from streammkl.monitor.adwin import ADWIN
from streammkl.monitor.drift import LossDriftDetector, make_detector


def _stream(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.concatenate([
        rng.normal(0.2, 0.1, 2500),  # a rise, a fall, skewed losses, 0/1 errors
        rng.normal(0.6, 0.1, 2500),
        rng.exponential(0.3, 2500),
        (rng.random(3000) < 0.3).astype(float),
        (rng.random(3000) < 0.1).astype(float),
    ])  # fmt: skip


PARAMS = [
    {},
    {"clock": 1},
    {"max_buckets": 3, "delta": 0.05},
    {"min_window_length": 20, "grace_period": 100, "clock": 7},
    {"max_buckets": 2},
    {"delta": 1e-5},
]


@pytest.mark.parametrize("seed", range(len(PARAMS)))
def test_value_by_value_it_is_rivers_adwin(seed: int) -> None:
    params = PARAMS[seed]
    ours, theirs = ADWIN(**params), drift.ADWIN(**params)
    detections = []
    for t, v in enumerate(_stream(seed)):
        ours.update(v)
        theirs.update(v)
        assert ours.drift_detected == theirs.drift_detected, t
        assert (ours.width, ours.total, ours.variance, ours.estimation) == (
            theirs.width, theirs.total, theirs.variance, theirs.estimation
        ), t  # fmt: skip
        if ours.drift_detected:
            detections.append(t)
    assert ours.n_detections == theirs.n_detections  # since the last fresh start, as river
    assert len(detections) >= 2


def test_state_is_arrays_and_clone_is_fresh() -> None:
    values = _stream(0)
    det = ADWIN(delta=0.01)
    for v in values[:3000]:
        det.update(v)
    copy = ADWIN.from_arrays(det.to_arrays(), delta=0.01)
    for v in values[3000:6000]:
        det.update(v)
        copy.update(v)
        assert det.drift_detected == copy.drift_detected
    assert (det.width, det.total, det.variance) == (copy.width, copy.total, copy.variance)
    fresh = det.clone()
    assert isinstance(fresh, ADWIN) and fresh.delta == 0.01 and fresh.width == 0
    assert make_detector("adwin").__class__ is ADWIN
    with pytest.raises(ValueError, match="delta"):
        ADWIN(delta=0.0)
    with pytest.raises(ValueError, match="clock"):
        ADWIN(clock=0)


def _feed(det: LossDriftDetector, values: np.ndarray, cuts: list[int], stride: int | None):
    """Feed in pieces; with a stride each piece stops after its first rise's boundary and the
    next piece starts there (as Monitor.learn_runs does)."""
    fed_all, rises = 0, []
    for end in cuts:
        while fed_all < end:
            fed, got = det.update_until(values[fed_all:end].tolist(), fed_all, stride)
            assert fed >= 1
            rises += got
            fed_all += fed
    return rises


@pytest.mark.parametrize("stride", [None, 1, 50])
@pytest.mark.parametrize("memory", [None, 700])
@pytest.mark.parametrize("restart_on", ["increase", "any"])
def test_compiled_feed_is_the_loop_over_rivers_detector(stride, memory, restart_on) -> None:
    values = np.concatenate([_stream(3), np.random.default_rng(9).normal(0.8, 0.1, 2000)])
    values[[10, 4000, 4001]] = math.nan, math.inf, -math.inf  # skipped, still counted as fed
    cuts = [1, 333, 5000, 5001, 9000, len(values)]
    ours = LossDriftDetector("adwin", restart_on=restart_on, memory=memory)
    theirs = LossDriftDetector(drift.ADWIN(), restart_on=restart_on, memory=memory)
    assert type(ours.detector) is ADWIN and type(theirs.detector) is drift.ADWIN
    got, want = _feed(ours, values, cuts, stride), _feed(theirs, values, cuts, stride)
    assert got == want and len(want) >= 2
    assert (ours.n_restarts, ours.n_ignored, ours.last_restart) == (
        theirs.n_restarts, theirs.n_ignored, theirs.last_restart
    )  # fmt: skip
    assert ours.inputs == theirs.inputs
    assert (ours.detector.width, ours.detector.total) == (
        theirs.detector.width, theirs.detector.total
    )  # fmt: skip
    if restart_on == "increase":
        assert ours.n_ignored >= 1  # the fall of the loss is counted, not a restart


def test_update_until_stops_after_the_first_rises_boundary() -> None:
    values = np.concatenate([np.full(1000, 0.1), np.full(1000, 0.9)])
    det = LossDriftDetector("adwin")
    fed, rises = det.update_until(values.tolist(), 0, 50)
    assert len(rises) == 1 and rises[0] >= 1000
    assert fed == 50 * (rises[0] // 50 + 1)  # through example kB - 1, the restart's boundary
    fed, rises = LossDriftDetector("adwin").update_until(values.tolist(), 0, None)
    assert fed == len(values) and len(rises) == 1
