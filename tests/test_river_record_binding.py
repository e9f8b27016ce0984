"""The one-call round's buffers are bound once and rebound when their owner replaces one
(``Rounds.buffers_replaced``, ``OnlineMKL.bind_record``), never checked per call: after each
way a buffer is replaced (a new input, a new key order, a new class, a pickle, a scaler reset,
the model adopted), the next round takes the one-call route on exactly
the owners' current buffers and gives the numbers of the general path, bit for bit."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from river import datasets

from streammkl.river import MKLClassifier
from streammkl.river._scaling import InputScaler


def _general(x: dict) -> dict:
    """The same record with numpy float values: the general path (never the one-call route)."""
    return {k: np.float64(v) for k, v in x.items()}


def _bound_to_owners(learner) -> None:
    """The model's buffers are the record's and the scaler's current ones (not copies)."""
    rounds = learner.rounds()
    known, scaler, core = rounds._known, rounds.scaler, rounds.model
    record = core._record
    assert record is not None
    owners = (known.vals, known.cols, known.raw, known.xs, *scaler.stats)
    assert all(a is b for a, b in zip(record, owners, strict=True))
    assert known.raw.shape[0] == len(core.feature_keys) == scaler.count.shape[0]
    assert core._bound[4] is core._args  # (the record pack of the round arguments now)


def _replaced_reset(learner) -> None:
    rounds = learner.rounds()
    meta, arrays = learner.to_state()
    assert rounds.take_state(meta, arrays)  # the scaler replaced by the saved one


EVENTS = {
    "a new input": lambda pair: [pair(lambda x: {**x, "extra": 0.25})],
    "a new key order": lambda pair: [pair(lambda x: dict(reversed(list(x.items()))))],
    "a new class": lambda pair: [pair(None, "third")],
    "a pickle": lambda pair: [pair(pickle_both=True)],
    "a deepcopy": lambda pair: [pair(copy_both=True)],
    "a scaler reset": lambda pair: [pair(each=_replaced_reset)],
}


@pytest.mark.parametrize("event", sorted(EVENTS))
def test_the_round_after_a_buffer_is_replaced_uses_the_new_one(event, one_call_rounds):
    data = list(datasets.Bananas())[:500]
    one_call, general = MKLClassifier(standardize=True), MKLClassifier(standardize=True)
    for x, y in data[:300]:
        assert one_call.learn_predict_one(x, y) == general.learn_predict_one(_general(x), y)
    _bound_to_owners(one_call)
    learners = [one_call, general]

    def pair(reshape=None, label=None, pickle_both=False, copy_both=False, each=None):
        x, y = data[300]
        if reshape is not None:
            x = reshape(x)
        if label is not None:
            y = label
        if pickle_both:
            learners[:] = [pickle.loads(pickle.dumps(m)) for m in learners]
        if copy_both:
            learners[:] = [copy.deepcopy(m) for m in learners]
        if each is not None:
            for m in learners:
                each(m)
        a, b = learners
        assert a.learn_predict_one(x, y) == b.learn_predict_one(_general(x), y)

    EVENTS[event](pair)
    before = one_call_rounds["learn"]
    a, b = learners
    for x, y in data[301:]:  # the next rounds: the one-call route, on the new buffers
        assert a.learn_predict_one(x, y) == b.learn_predict_one(_general(x), y)
        assert a.predict_proba_one(x) == b.predict_proba_one(_general(x))
        _bound_to_owners(a)
    assert one_call_rounds["learn"] - before == len(data) - 301
    assert a.rounds().digest() == b.rounds().digest()


def test_a_model_adopted_from_another_learner_is_given_this_learners_buffers(one_call_rounds):
    """``Rounds.adopt`` takes another learner's model, which may hold that learner's buffers:
    it is given this learner's (else this learner's record would be written where the model
    does not read)."""
    data = list(datasets.Bananas())[:600]
    mine, other, general = (MKLClassifier(standardize=True) for _ in range(3))
    for x, y in data[:300]:
        mine.learn_predict_one(x, y)
        other.learn_predict_one(x, y)
        general.learn_predict_one(_general(x), y)
    assert other.rounds().model._record is not None
    mine.rounds().adopt(other.rounds())
    assert mine.rounds().model._record is None  # (forgotten: bound again at the next round)
    before = one_call_rounds["learn"]
    for x, y in data[300:]:
        assert mine.learn_predict_one(x, y) == general.learn_predict_one(_general(x), y)
        _bound_to_owners(mine)
    assert one_call_rounds["learn"] - before == 300
    assert mine.rounds().digest() == general.rounds().digest()


def test_owners_report_each_replacement_and_not_the_hook_in_a_pickle():
    reports = []
    scaler = InputScaler(2)
    scaler.on_replace = lambda: reports.append("scaler")
    scaler.fit_width(2)  # the same width: nothing replaced, nothing reported
    assert reports == []
    scaler.fit_width(3)
    assert reports == ["scaler"]
    restored = pickle.loads(pickle.dumps(scaler))
    assert restored.on_replace is None and "on_replace" not in scaler.__getstate__()
    learner = MKLClassifier(standardize=True)
    for x, y in list(datasets.Bananas())[:50]:
        learner.learn_predict_one(x, y)
    known = learner.rounds()._known
    known.on_replace = lambda: reports.append("record")
    learner.learn_predict_one({"2": 0.5, "1": 0.25}, True)  # another key order: new columns
    assert reports == ["scaler", "record"]


def _past_warm_up() -> tuple[list, MKLClassifier]:
    """400 Bananas examples and a standardising learner that took the first 300 by
    ``learn_predict_one`` (past its bandwidth warm-up: its lane made)."""
    data = list(datasets.Bananas())[:400]
    learner = MKLClassifier(standardize=True)
    for x, y in data[:300]:
        learner.learn_predict_one(x, y)
    return data, learner


def test_the_lane_is_made_once_bound_and_dropped_with_every_replacement(one_call_rounds):
    """``learn_predict_one``'s lane (``Rounds.known_lane``) lives while nothing it holds is
    replaced: made after the bandwidth warm-up, kept across rounds, gone after a new input."""
    data, learner = _past_warm_up()
    rounds = learner.rounds()
    lane = rounds.known_lane
    assert lane is not None and rounds.record_round is not None
    before = one_call_rounds["learn"]
    for x, y in data[300:350]:
        learner.learn_predict_one(x, y)
    assert rounds.known_lane is lane and one_call_rounds["learn"] - before == 50
    x, y = data[350]
    learner.learn_predict_one({**x, "extra": 1.0}, y)  # a new input: the model widens
    assert rounds.known_lane is not lane
    assert copy.deepcopy(learner).rounds().known_lane is None  # (closures are not copied)


def test_classes_restored_in_place_are_the_lanes_classes():
    """``Rounds.restore_targets`` replaces the class index a lane reads: the lane is dropped
    (else it would map labels by the old index)."""
    data = list(datasets.Bananas())[:500]
    one_call, general = MKLClassifier(standardize=True), MKLClassifier(standardize=True)
    for x, y in data[:300]:
        assert one_call.learn_predict_one(x, y) == general.learn_predict_one(_general(x), y)
    assert one_call.rounds().known_lane is not None
    for learner in (one_call, general):
        rounds = learner.rounds()
        rounds.restore_targets({"classes": list(reversed(learner.classes_))})
    for x, y in data[300:]:
        assert one_call.learn_predict_one(x, y) == general.learn_predict_one(_general(x), y)
    assert one_call.rounds().digest() == general.rounds().digest()


def test_a_class_registered_drops_the_lane_made_without_it():
    """Under a binary loss a second class widens nothing (the model's one score stays): the
    registration itself drops the lane made for the first class alone, so the next rounds of
    both classes take a lane that knows both, with the general path's numbers."""
    from streammkl.core import losses

    data = [(x, "yes" if y else "no") for x, y in list(datasets.Bananas())[:600]]  # (a bool
    first = [(x, y) for x, y in data if y == data[0][1]][:200]  # registers both booleans)
    rest = [(x, y) for x, y in data if (x, y) not in first]
    make = lambda: MKLClassifier(standardize=True, loss=losses.Logistic())  # noqa: E731
    one_call, general = make(), make()
    for x, y in first:
        assert one_call.learn_predict_one(x, y) == general.learn_predict_one(_general(x), y)
    rounds = one_call.rounds()
    lane = rounds.known_lane
    assert lane is not None and len(one_call.classes_) == 1
    for x, y in rest:
        assert one_call.learn_predict_one(x, y) == general.learn_predict_one(_general(x), y)
    assert len(one_call.classes_) == 2 and rounds.known_lane not in (None, lane)
    second = rounds.known_lane
    x, y = next((x, y) for x, y in rest if y != data[0][1])
    assert second(x, y) is not None  # (the lane takes the second class)
    assert rounds.known_lane is second


def test_a_warm_up_kept_again_drops_the_lane():
    """``OnlineMKL.keep_warmup`` (a group's merged bandwidth warm-up) makes rounds keep their
    inputs again: the lane, whose round skipped that, is dropped, and the next rounds keep
    them as the general path does."""
    data = list(datasets.Bananas())[:400]
    one_call, general = MKLClassifier(standardize=True), MKLClassifier(standardize=True)
    for x, y in data[:300]:
        assert one_call.learn_predict_one(x, y) == general.learn_predict_one(_general(x), y)
    assert one_call.rounds().known_lane is not None
    for learner in (one_call, general):
        model = learner.rounds().model
        assert model.warmup_left == 0
        model.keep_warmup(model.warmup_rows[:0])  # a warm-up pending again, no inputs yet
    for x, y in data[300:]:
        assert one_call.learn_predict_one(x, y) == general.learn_predict_one(_general(x), y)
    assert one_call.rounds().model.warmup_left == general.rounds().model.warmup_left
    assert one_call.rounds().digest() == general.rounds().digest()


@pytest.mark.parametrize(
    "odd",
    [
        {"1": True, "2": 0.5},  # a bool value
        {"1": 10**400, "2": 0.5},  # an int beyond a float's range
        {"1": np.float64(0.25), "2": 0.5},  # a numpy scalar
        {"2": 0.5, "1": 0.25},  # another key order
        {"1": 0.25},  # fewer keys
    ],
)
def test_the_lane_refuses_what_the_record_round_refuses_and_changes_nothing(odd):
    """The lane takes the record round's steps in its own frame: a record the record round
    refuses (a value not a plain number, an int beyond a float's range, other keys) gives
    None and leaves the model as it was; the learner then takes the general path."""
    data, learner = _past_warm_up()
    rounds = learner.rounds()
    lane = rounds.known_lane
    assert lane is not None
    digest = rounds.model.digest()
    assert lane(odd, data[300][1]) is None
    assert rounds.model.digest() == digest
    assert lane({"1": 0.25, "2": 0.5}, ()) is None  # (a label not of a plain type)
    assert rounds.model.digest() == digest
    assert lane({"1": 0.25, "2": 0.5}, data[300][1]) is not None  # (a plain record: taken)


def test_the_two_class_probabilities_are_those_of_proba():
    """``Classes.proba_function`` of two classes of a multiclass loss (the lane's
    probabilities) gives the floats of ``Classes.proba``, on ordinary and extreme scores."""
    learner = MKLClassifier(standardize=True)
    for x, y in list(datasets.Bananas())[:50]:
        learner.learn_predict_one(x, y)
    classes = learner.rounds().classes
    proba = classes.proba_function()
    rng = np.random.default_rng(0)
    rows = [*rng.normal(size=(200, 2)).tolist(), [800.0, -800.0], [-800.0, 800.0], [3.0, 3.0]]
    rows += (rng.normal(size=(50, 2)) * 300).tolist()
    for fx in rows:
        assert proba(fx) == classes.proba(fx) == classes.probas([fx])[0]


@pytest.mark.parametrize("gain", [1.0, 40.0, 3000.0])
def test_the_compiled_two_class_probabilities_are_those_of_proba(gain):
    """The lane of two classes under a multiclass loss takes the probabilities from the
    compiled round (``OnlineMKL.bound_round_softmax2``): each is the float ``Classes.proba``
    gives of the scores before the update, also for scores far beyond ``exp``'s range (the
    weights scaled by ``gain``)."""
    data = list(datasets.Bananas())[:900]
    learner = MKLClassifier(standardize=True)
    for x, y in data[:300]:
        learner.learn_predict_one(x, y)
    rounds = learner.rounds()
    assert rounds.known_lane is not None
    model = rounds.model
    assert model.bound_round_softmax2() is not None
    model._args.state.w *= gain  # (in place: the bound pack reads these arrays)
    classes, spread = learner.rounds().classes, []
    for x, y in data[300:]:
        got = learner.learn_predict_one(x, y)
        scores = model.last_scores.tolist()
        assert got == classes.proba(scores)
        spread.append(abs(scores[0] - scores[1]))
    assert max(spread) > (1000.0 if gain == 3000.0 else 0.1)  # (far beyond exp's range)
