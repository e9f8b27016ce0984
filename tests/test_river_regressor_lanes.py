"""The regressor's lanes (``Rounds.make_counted_lane``, ``make_predict_lane(label=True)``):
``predict_one``, ``learn_one`` and ``learn_predict_one`` each in one Python frame on the bound
buffers, the target counted by the running statistics (``standardize_target``) and taken back
when the compiled round refuses the record, the prediction de-standardised with the statistics
before the target is counted. Every call pattern gives the numbers of a learner that never
takes a lane: records of other keys or mutated between the calls, integer targets, refused
targets and values, inputs added between the calls, a pickled learner."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from river import datasets
from river.datasets import synth

from streammkl.river import MKLRegressor


def _general(x: dict) -> dict:
    """The same record with numpy float values: the general path (no lane, no bound
    buffers)."""
    return {k: np.float64(v) for k, v in x.items()}


def _same(a: MKLRegressor, b: MKLRegressor) -> None:
    assert a.rounds().digest() == b.rounds().digest()


def _warm(data: list, **params) -> MKLRegressor:
    model = MKLRegressor(standardize=True, **params)
    for x, y in data:
        model.predict_one(x)
        model.learn_one(x, y)
    return model


def _step(model: MKLRegressor, step: tuple, general: bool) -> list:
    """One call of ``step`` (``("predict", x)``, ``("learn", x, y)`` or ``("both", x, y)``,
    learn_predict_one); its prediction, if any. ``general``: the record's values and the
    target as numpy floats, which no lane takes."""
    kind, x, *y = step
    if general:
        x, y = _general(x), [None if v is None else np.float64(v) for v in y]
    if kind == "predict":
        return [model.predict_one(x)]
    if kind == "both":
        return [model.learn_predict_one(x, *y)]
    model.learn_one(x, *y)
    return []


def _check(model: MKLRegressor, steps: list) -> None:
    """``steps`` played on ``model`` and on a copy on the general path: the same predictions
    (floats compared exactly) and the same state."""
    ref = copy.deepcopy(model)
    for step in steps:
        assert _step(model, step, False) == _step(ref, step, True)
    _same(model, ref)


@pytest.fixture(scope="module")
def friedman() -> list:
    return list(synth.Friedman(seed=7).take(1400))


def test_the_two_calls_take_their_lanes_with_the_general_paths_numbers(friedman, one_call_rounds):
    warm, timed = friedman[:1100], friedman[1100:]
    lanes, general = _warm(warm), _warm(warm)
    rounds = lanes.rounds()
    assert rounds.label_lane is not None and rounds.learn_lane is not None
    before = dict(one_call_rounds)
    for x, y in timed:
        assert _step(lanes, ("predict", x), False) == _step(general, ("predict", x), True)
        lanes.learn_one(x, y)
        general.learn_one(_general(x), np.float64(y))
    _same(lanes, general)
    n = len(timed)
    assert one_call_rounds["predict"] - before["predict"] == n  # every prediction: the lane
    assert one_call_rounds["learn"] - before["learn"] == n
    assert rounds.label_lane is not None and rounds.learn_lane is not None


def test_learn_predict_one_takes_its_lane_with_the_general_paths_numbers(friedman):
    warm, timed = friedman[:1100], friedman[1100:]
    lanes, general = _warm(warm), _warm(warm)
    for x, y in timed:
        assert lanes.learn_predict_one(x, y) == general.learn_predict_one(
            _general(x), np.float64(y)
        )
    _same(lanes, general)
    assert lanes.rounds().known_lane is not None


@pytest.mark.parametrize("standardize_target", [True, False])
def test_mixed_calls_give_the_general_paths_numbers(friedman, standardize_target):
    model = _warm(friedman[:1100], standardize_target=standardize_target)
    steps: list = []
    for i, (x, y) in enumerate(friedman[1100:1240]):
        r = i % 7
        if r == 0:  # predict x1, learn x2
            steps += [("predict", x), ("learn", friedman[1100 + i - 1][0], y)]
        elif r == 1:  # learn without a prediction
            steps += [("learn", x, y)]
        elif r == 2:  # predict twice, then learn
            steps += [("predict", x), ("predict", x), ("learn", x, y)]
        elif r == 3:  # the record mutated between the calls
            steps += [("predict", x), ("learn", {**x, next(iter(x)): 0.5}, y)]
        elif r == 4:  # learn_predict_one between the two calls, then a prediction
            steps += [("predict", x), ("both", x, y), ("predict", x)]
        elif r == 5:  # an integer target
            steps += [("predict", x), ("learn", x, round(y))]
        else:  # another key order, then learn_predict_one with no target
            steps += [("learn", dict(reversed(list(x.items()))), y), ("both", x, None)]
    _check(model, steps)


def _outcome(call, *args):
    """What a call gives: its result, or the type of what it raises."""
    try:
        return call(*args)
    except Exception as exc:  # (compared, not handled)
        return type(exc)


def test_refused_targets_and_values_take_the_full_path(friedman):
    model = _warm(friedman[:1100])
    ref = copy.deepcopy(model)
    x, y = friedman[1100]
    key = next(iter(x))  # (Friedman's inputs are named 0 to 9)
    for target in (float("nan"), float("inf"), 1e308 * 10, 10**400, -(10**20), "1", True):
        for call in ("learn_one", "learn_predict_one"):
            assert _outcome(getattr(model, call), x, target) == _outcome(
                getattr(ref, call), _general(x), target
            )
    for bad in (
        {**x, key: 10**400},
        {**x, key: 1e200},
        {**x, key: float("nan")},
        {**x, key: None},
    ):
        assert _outcome(model.predict_one, bad) == _outcome(ref.predict_one, bad)
        assert _outcome(model.learn_one, bad, y) == _outcome(ref.learn_one, bad, y)
        assert _outcome(model.learn_predict_one, bad, y) == _outcome(ref.learn_predict_one, bad, y)
    _same(model, ref)
    _check(model, [("predict", x), ("learn", x, y), ("both", x, y), ("predict", x)])


def test_an_input_added_between_the_calls_drops_the_lanes(friedman):
    model = _warm(friedman[:1100])
    rounds = model.rounds()
    x, y = friedman[1100]
    model.learn_predict_one(x, y)
    model.learn_predict_one(x, y)
    assert rounds.label_lane and rounds.learn_lane and rounds.known_lane
    wider = {**x, "new": 2.0}
    _check(model, [("predict", x), ("learn", wider, y), ("predict", x), ("both", x, y)])
    assert rounds.known_lane is None  # (dropped by the new input; made again after two)
    _check(model, [("both", wider, y), ("predict", wider), ("learn", wider, y)])


def test_lanes_from_the_first_record_give_the_general_paths_numbers():
    """From scratch: the bandwidth warm-up's rounds (the record round's route) then the
    compiled round's, integer targets (ChickWeights), the default learner and one without
    input standardisation."""
    data = list(datasets.ChickWeights())[:1200]
    for params in ({"standardize": True}, {}):
        lanes, general = MKLRegressor(**params), MKLRegressor(**params)
        for i, (x, y) in enumerate(data):
            assert isinstance(y, int)
            if i % 3:
                assert lanes.predict_one(x) == general.predict_one(_general(x))
                lanes.learn_one(x, y)
                general.learn_one(_general(x), np.float64(y))
            else:
                assert lanes.learn_predict_one(x, y) == general.learn_predict_one(
                    _general(x), np.float64(y)
                )
        _same(lanes, general)
        rounds = lanes.rounds()
        assert rounds.label_lane and rounds.learn_lane and rounds.known_lane


def test_a_pickled_regressor_makes_its_lanes_again_with_the_same_numbers(friedman):
    model = _warm(friedman[:1100])
    copy_ = pickle.loads(pickle.dumps(model))
    assert copy_.rounds().label_lane is None and copy_.rounds().learn_lane is None
    for x, y in friedman[1100:1130]:
        assert copy_.predict_one(x) == model.predict_one(x)
        assert copy_.learn_predict_one(x, y) == model.learn_predict_one(x, y)
        copy_.learn_one(x, y)
        model.learn_one(x, y)
    _same(model, copy_)
    assert copy_.rounds().learn_lane is not None and copy_.rounds().known_lane is not None
