"""MemoryClassifier's lanes (``MemoryClassifier._make_lanes``: ``learn_predict_one`` and
``learn_one`` in one Python frame on the learner's own lanes, the memory's store queued by
``ParzenMemory.stager``): every call pattern gives the numbers of a wrapper whose every round
takes the full path (records of numpy floats: no lane of the learner's, none of the wrapper's),
the predictions compared exactly and the saved state byte for byte; a deliberately wrong lane
is caught by the same comparison."""

from __future__ import annotations

import copy
import pickle
import random

import numpy as np
import pytest
from river import datasets
from river.datasets import synth

from streammkl.core import parzen_memory
from streammkl.core.parzen_memory import ParzenMemory
from streammkl.river import MemoryClassifier, MKLClassifier


def _general(x: dict) -> dict:
    """The same record with numpy float values: the full path of every round."""
    return {k: np.float64(v) for k, v in x.items()}


def _state(model: MemoryClassifier) -> list:
    meta, arrays = model.to_state()
    return [meta, *((k, arrays[k].tobytes()) for k in sorted(arrays))]


def _played(model: MemoryClassifier, data: list, general: bool, seed: int) -> list:
    """Outputs of a mixed order of calls (one call, two calls, a learn alone, a label then one
    call) over ``data``, the same order for a given ``seed``."""
    rng, out = random.Random(seed), []
    for x, y in data:
        x = _general(x) if general else x
        c = rng.random()
        if c < 0.4:
            out.append(model.learn_predict_one(x, y))
        elif c < 0.7:
            out.append(model.predict_proba_one(x))
            model.learn_one(x, y)
        elif c < 0.85:
            model.learn_one(x, y)
        else:
            out.append(model.predict_one(x))
            out.append(model.learn_predict_one(x, y))
    return out


def _streams() -> dict[str, list]:
    rbf = synth.RandomRBFDrift(
        seed_model=1, seed_sample=2, n_classes=3, n_features=4, change_speed=0.01
    )
    return {"bananas": list(datasets.Bananas())[:1500], "rbf3": list(rbf.take(1500))}


@pytest.fixture(scope="module")
def streams() -> dict[str, list]:
    return _streams()


def _same_as_general(data: list, seed: int, **params) -> bool:
    lanes = MemoryClassifier(MKLClassifier(standardize=True), **params)
    general = MemoryClassifier(MKLClassifier(standardize=True), **params)
    got = _played(lanes, data, False, seed)
    assert lanes._known_lane is not None and lanes._learn_lane is not None  # lanes taken
    return got == _played(general, data, True, seed) and _state(lanes) == _state(general)


@pytest.mark.parametrize("key", ["bananas", "rbf3"])
@pytest.mark.parametrize("params", [{}, {"skip_below": 0.0}, {"check_every": 3, "window": 200}])
def test_the_lanes_give_the_full_paths_numbers(streams, key, params) -> None:
    assert _same_as_general(streams[key], 0, **params)


def test_a_wrong_lane_is_caught(streams, monkeypatch) -> None:
    """A stager that stores the class of every queued pair as 0 (the queue's classes not
    written): the comparison above must fail."""
    real = ParzenMemory.stager

    def wrong(self, z):
        stage = real(self, z)

        def wrong_stage(label, vote=False):
            return stage(0 if label < self.n_classes else label, vote)

        return wrong_stage

    monkeypatch.setattr(ParzenMemory, "stager", wrong)
    assert not _same_as_general(streams["bananas"], 0)


def test_a_lane_kept_after_the_learners_lane_changed_is_not_taken(streams) -> None:
    """A new class drops the learner's lanes: the wrapper's lanes, made on them, answer None
    (the full path) until made again, with the full path's numbers."""
    data = streams["bananas"][:1200]
    model = MemoryClassifier(MKLClassifier(standardize=True))
    for x, y in data:
        model.learn_predict_one(x, y)
    lane = model._known_lane
    assert lane is not None
    x, y_last = data[-1]
    twin = copy.deepcopy(model)
    assert twin._known_lane is None  # (never copied: closures over the original's parts)
    got = model.learn_predict_one(x, "new class")
    assert lane(x, y_last) is None  # the learner's lane it holds is not the learner's now
    assert got == twin.learn_predict_one(_general(x), "new class")
    for x, y in data[:300]:
        assert model.learn_predict_one(x, y) == twin.learn_predict_one(_general(x), y)
    assert _state(model) == _state(twin)
    assert pickle.loads(pickle.dumps(model))._known_lane is None


@pytest.mark.parametrize(("every", "vote_every"), [(25, 7), (0, 97)])
def test_the_stager_stores_as_add_does(every, vote_every) -> None:
    """Votes and upkeeps write the queue; (0, 97): a full queue (64 pairs) writes itself."""
    rng = np.random.default_rng(0)
    staged, added = ParzenMemory(70, 16.0, every), ParzenMemory(70, 16.0, every)
    z = np.zeros(3)
    stage = staged.stager(z)
    assert stage is not None
    for t in range(403):
        z[:] = rng.normal(size=3)
        label = int(rng.integers(0, 4))
        vote = t % vote_every == 0
        want = added.vote_and_add(z, label) if vote else added.add(z, label)
        got = stage(label, vote)
        if want is None:
            assert got is None
        else:
            assert got is not None and got.tolist() == want.tolist()
        if t % 50 == 0:
            assert staged.count == added.count
    assert staged._staged > 0  # some pairs still queued: the reads below write them
    assert staged.columns.tobytes() == added.columns.tobytes()
    assert staged.labels.tobytes() == added.labels.tobytes()
    assert staged.gamma == added.gamma and staged.relevance.tolist() == added.relevance.tolist()
    assert parzen_memory.STAGED_MAX < 97


def test_a_stager_of_a_narrower_input_raises_once_the_memory_widened() -> None:
    memory = ParzenMemory(20, 16.0, 0)
    z = np.ones(2)
    stage = memory.stager(z)
    assert stage is not None and memory.stager(np.ones(2, dtype=np.float32)) is None
    stage(0)
    memory.add(np.ones(3), 1)
    with pytest.raises(ValueError):
        stage(0)
    assert memory.count == 2
