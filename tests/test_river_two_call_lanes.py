"""River's two calls through their lanes (``Rounds.make_predict_lane``, ``make_learn_lane``):
``predict_proba_one`` then ``learn_one`` each in one Python frame on the bound buffers, the
learning round taking the feature maps the prediction just made when, and only when, it is on
the same values (``core._numba.features.explicit_phi_of``). Every call pattern gives the
numbers of a learner that never predicts through a lane nor reuses a prediction's maps: a
record mutated, replaced or of other keys between the calls, a class or an input added between
them, values the lanes refuse."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from river import datasets
from river.datasets import synth

from streammkl.river import MKLClassifier


def _general(x: dict) -> dict:
    """The same record with numpy float values: the general path (no lane, no bound buffers,
    a vector mapped anew: its maps computed anew whenever its values differ)."""
    return {k: np.float64(v) for k, v in x.items()}


def _warm(data: list, **params) -> MKLClassifier:
    model = MKLClassifier(standardize=True, **params)
    for x, y in data:
        model.predict_proba_one(x)
        model.learn_one(x, y)
    return model


def _same(a: MKLClassifier, b: MKLClassifier) -> None:
    assert a.rounds().digest() == b.rounds().digest()


def _reference(model: MKLClassifier, steps: list) -> list[dict]:
    """A copy of ``model`` learning ``steps`` (``("predict", x)`` or ``("learn", x, y)``) on
    the general path; its predictions."""
    ref = copy.deepcopy(model)
    out = []
    for step in steps:
        if step[0] == "predict":
            out.append(ref.predict_proba_one(_general(step[1])))
        else:
            ref.learn_one(_general(step[1]), step[2])
    return [ref, *out]


def _play(model: MKLClassifier, steps: list) -> list[dict]:
    out = []
    for step in steps:
        if step[0] == "predict":
            out.append(model.predict_proba_one(step[1]))
        else:
            model.learn_one(step[1], step[2])
    return out


@pytest.fixture(scope="module")
def bananas() -> list:
    return list(datasets.Bananas())[:1400]


def test_the_two_calls_take_their_lanes_with_the_general_paths_numbers(bananas, one_call_rounds):
    warm, timed = bananas[:1100], bananas[1100:]
    lanes, general = _warm(warm), _warm(warm)
    before = dict(one_call_rounds)
    for x, y in timed:
        got = lanes.predict_proba_one(x)
        assert got == general.predict_proba_one(_general(x))  # floats compared exactly
        lanes.learn_one(x, y)
        general.learn_one(_general(x), y)
    _same(lanes, general)
    rounds = lanes.rounds()
    assert rounds.predict_lane is not None and rounds.learn_lane is not None
    n = len(timed)
    assert one_call_rounds["predict"] - before["predict"] == n  # every prediction: the lane
    assert one_call_rounds["learn"] - before["learn"] == n


def test_a_learned_record_other_than_the_predicted_one_is_featurised_anew(bananas):
    model = _warm(bananas[:1100])
    (x1, _), (x2, y2), (x3, y3) = bananas[1100:1103]
    mutated = dict(x3)
    steps = [
        ("predict", x1), ("learn", x2, y2),  # predict x1, learn x2
        ("learn", x3, y3),  # learn without a prediction
        ("predict", x2), ("predict", x2), ("learn", x2, y2),  # predict twice, learn
        ("predict", mutated),
    ]  # fmt: skip
    ref, *want = _reference(model, [*steps, ("learn", {**mutated, "1": 0.5}, y3)])
    got = _play(model, steps)
    mutated["1"] = 0.5  # the same dict mutated between the calls: a new value to map
    model.learn_one(mutated, y3)
    assert got == want
    _same(model, ref)


@pytest.mark.parametrize("change", ["sign of zero", "tiny", "other order", "bool", "numpy"])
def test_a_record_of_equal_looking_values_is_learned_as_itself(bananas, change):
    model = _warm(bananas[:1100])
    x, y = bananas[1100]
    learned = dict(x)
    if change == "sign of zero":
        x = {**x, "1": 0.0}
        learned = {**x, "1": -0.0}
    elif change == "tiny":
        learned["1"] = np.nextafter(x["1"], 2.0).item()
    elif change == "other order":
        learned = dict(reversed(list(x.items())))
    elif change == "bool":
        x = {**x, "1": 1.0}
        learned = {**x, "1": True}
    else:
        learned["2"] = np.float64(x["2"])
    ref, *want = _reference(model, [("predict", x), ("learn", learned, y), ("predict", x)])
    got = _play(model, [("predict", x), ("learn", learned, y), ("predict", x)])
    assert got == want
    _same(model, ref)


def test_a_class_or_an_input_added_between_the_calls_drops_the_lanes(bananas):
    model = _warm(bananas[:1100])
    rounds = model.rounds()
    x, y = bananas[1100]
    model.predict_proba_one(x)
    assert rounds.predict_lane is not None and rounds.learn_lane is not None
    steps = [("learn", x, "a third class"), ("predict", x), ("learn", x, y), ("predict", x)]
    ref, *want = _reference(model, steps)
    assert _play(model, steps) == want
    _same(model, ref)
    model.predict_proba_one(x)
    model.predict_proba_one(x)
    assert rounds.predict_lane is not None
    rounds.declare_features(["declared between the calls"])
    assert rounds.predict_lane is None and rounds.learn_lane is None
    steps = [("predict", x), ("learn", x, y), ("predict", {**x, "new": 2.0})]
    steps += [("learn", {**x, "new": 2.0}, y), ("predict", x)]
    ref, *want = _reference(model, steps)
    assert _play(model, steps) == want
    _same(model, ref)


def _outcome(call, *args):
    """What a call gives: its result, or the type of what it raises."""
    try:
        return call(*args)
    except Exception as exc:  # (compared, not handled)
        return type(exc)


def test_values_the_lanes_refuse_take_the_full_path(bananas):
    model = _warm(bananas[:1100])
    ref = copy.deepcopy(model)
    x, y = bananas[1100]
    for bad in ({**x, "1": 10**400}, {**x, "1": float("nan")}, {**x, "1": None}):
        assert _outcome(model.predict_proba_one, bad) == _outcome(ref.predict_proba_one, bad)
        assert _outcome(model.learn_one, bad, y) == _outcome(ref.learn_one, bad, y)
    assert _outcome(model.learn_one, x, None) is ValueError
    assert _outcome(model.learn_one, x, [1]) == _outcome(ref.learn_one, x, [1])
    _same(model, ref)
    steps = [("predict", x), ("learn", x, y)]
    ref, *want = _reference(model, steps)
    assert _play(model, steps) == want
    _same(model, ref)


@pytest.mark.parametrize(
    "stream",
    [
        lambda: list(  # three classes: the general formula of the probabilities
            synth.RandomRBF(seed_model=1, seed_sample=1, n_classes=3, n_features=4).take(1300)
        ),
        lambda: list(synth.Hyperplane(seed=42, n_features=10).take(1300)),
    ],
)
def test_lanes_of_other_streams_give_the_general_paths_numbers(stream):
    data = stream()
    lanes, general = MKLClassifier(standardize=True), MKLClassifier(standardize=True)
    for i, (x, y) in enumerate(data):
        assert lanes.predict_proba_one(x) == general.predict_proba_one(_general(x))
        if i % 5 == 4:  # another record learned than the one predicted
            x = data[i - 1][0]
        lanes.learn_one(x, y)
        general.learn_one(_general(x), y)
    _same(lanes, general)  # (past the bandwidth warm-up, 1,000 inputs: the lanes are made)
    assert lanes.rounds().predict_lane is not None and lanes.rounds().learn_lane is not None


def test_a_stream_whose_keys_change_every_record_makes_no_lane(bananas):
    model = _warm(bananas[:1100])
    rounds = model.rounds()
    assert rounds.predict_lane is not None and rounds.learn_lane is not None  # (steady keys)
    for i, (x, y) in enumerate(bananas[1100:1150], start=1):
        x = dict(reversed(list(x.items()))) if i % 2 else x
        model.predict_proba_one(x)
        model.learn_one(x, y)
        assert rounds.predict_lane is None and rounds.learn_lane is None


def test_a_pickled_learner_makes_its_lanes_again_with_the_same_numbers(bananas):
    import pickle

    model = _warm(bananas[:1100])
    copy_ = pickle.loads(pickle.dumps(model))
    assert copy_.rounds().predict_lane is None and copy_.rounds().learn_lane is None
    for x, y in bananas[1100:1130]:
        assert copy_.predict_proba_one(x) == model.predict_proba_one(x)
        copy_.learn_one(x, y)
        model.learn_one(x, y)
    _same(model, copy_)
    assert copy_.rounds().predict_lane is not None


def test_predict_one_takes_its_lane_with_the_general_paths_labels(bananas, one_call_rounds):
    warm, timed = bananas[:1100], bananas[1100:]
    lanes, general = _warm(warm), _warm(warm)
    before = one_call_rounds["predict"]
    for i, (x, y) in enumerate(timed):
        assert lanes.predict_one(x) == general.predict_one(_general(x))
        if i % 7 == 3:  # a probability between: the other lane, the same record
            assert lanes.predict_proba_one(x) == general.predict_proba_one(_general(x))
        lanes.learn_one(x, y)
        general.learn_one(_general(x), y)
    _same(lanes, general)
    assert lanes.rounds().label_lane is not None
    assert one_call_rounds["predict"] - before >= len(timed) - 2  # (made after two records)


def test_the_label_of_two_scores_is_argmaxs_ties_nans_and_infinities_included():
    """``Classes.label_of`` compares two classes' scores instead of calling ``np.argmax``: the
    same label for every pair (a tie or two NaN: the first class; a NaN beats a number)."""
    model = MKLClassifier()
    model.learn_one({"a": 1.0}, "no")
    model.learn_one({"a": -1.0}, "yes")
    classes = model._classes
    assert not classes.binary and classes.labels == ["no", "yes"]
    values = [0.0, -0.0, 1.0, -1.0, 1e-300, np.inf, -np.inf, np.nan]
    for s0 in values:
        for s1 in values:
            scores = np.array([s0, s1, 7.0])  # (a row may be wider than the classes)
            assert classes.label_of(scores) == ["no", "yes"][int(np.argmax(scores[:2]))]
