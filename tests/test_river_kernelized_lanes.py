"""A bank with kernelized blocks through the one-call route and the two calls' lanes
(``RoundArgs.known``): once its support arrays hold the whole budget (a budget's room is
allocated at once), a record's round and prediction are one compiled call on the bound buffers
(``nb.learn_predict`` and ``nb.decision`` at their addresses), with the numbers of the general
path, the budget's merges, projections and removals included. Without a budget the support
set grows from Python (``OnlineMKL._ensure_room``): no record takes the route."""

from __future__ import annotations

import numpy as np
import pytest
from river import datasets, preprocessing
from river.datasets import synth

from streammkl.core import kernels
from streammkl.river import MKLClassifier


def _general(x: dict) -> dict:
    """The same record with numpy float values: the general path (no lane, no bound buffers)."""
    return {k: np.float64(v) for k, v in x.items()}


def _digest(model: MKLClassifier) -> str:
    return model.rounds().digest()


BANKS = {
    "rbf-merge": dict(kernels=(kernels.RBF(0.5),), budget=32),
    "rbf-project": dict(kernels=(kernels.RBF(0.5),), budget=16, budget_policy="project"),
    "linear+rbf-smallest": dict(
        kernels=(kernels.Linear(), kernels.RBF(0.5)), budget=24, budget_policy="smallest"
    ),
    "rbf+spline-oldest": dict(
        kernels=(kernels.RBF(0.5), kernels.B1Spline(3.0)), budget=20, budget_policy="oldest"
    ),
}


@pytest.fixture(scope="module")
def bananas() -> list:
    return list(datasets.Bananas())[:400]


@pytest.mark.parametrize("bank", list(BANKS))
@pytest.mark.parametrize("standardize", [False, True])
def test_the_two_calls_of_a_kernelized_bank_take_the_lanes_with_the_general_numbers(
    bank, standardize, bananas, one_call_rounds
):
    lanes = MKLClassifier(standardize=standardize, **BANKS[bank])
    general = MKLClassifier(standardize=standardize, **BANKS[bank])
    for i, (x, y) in enumerate(bananas):
        if i % 3:
            assert lanes.predict_proba_one(x) == general.predict_proba_one(_general(x))
        else:
            assert lanes.predict_one(x) == general.predict_one(_general(x))
        lanes.learn_one(x, y)
        general.learn_one(_general(x), y)
    assert _digest(lanes) == _digest(general)
    assert lanes.rounds().n_support == BANKS[bank]["budget"]  # (the budget steps ran)
    rounds = lanes.rounds()
    assert rounds.learn_lane is not None
    assert rounds.predict_lane is not None and rounds.label_lane is not None
    # (every record after the first few: the first makes the model, the next bind the buffers)
    assert one_call_rounds["learn"] >= len(bananas) - 3
    assert one_call_rounds["predict"] >= len(bananas) - 5


@pytest.mark.parametrize("bank", list(BANKS))
def test_one_call_rounds_of_a_kernelized_bank_give_the_general_numbers(bank, one_call_rounds):
    data = list(synth.RandomRBF(seed_model=3, seed_sample=3, n_classes=3, n_features=4).take(300))
    one, general = (MKLClassifier(standardize=True, **BANKS[bank]) for _ in range(2))
    for x, y in data:
        proba = one.learn_predict_one(x, y)
        assert proba == general.predict_proba_one(_general(x))
        general.learn_one(_general(x), y)
    assert _digest(one) == _digest(general)
    assert one_call_rounds["learn"] >= len(data) - 10  # (a new class: the full path)


def test_the_benchmarks_pipeline_takes_the_lanes_with_the_general_numbers(bananas, one_call_rounds):
    """``StandardScaler() | MKLClassifier(kernels=(RBF(1/d),))`` at the default budget, as
    ``benchmarks/river_speed.py`` times it: ``predict_one`` then ``learn_one``."""

    def make() -> object:
        return preprocessing.StandardScaler() | MKLClassifier(kernels=(kernels.RBF(0.5),))

    lanes, general = make(), make()
    data = list(datasets.Bananas())[:700]  # past the default budget of 256 pairs
    for x, y in data:
        assert lanes.predict_one(x) == general.predict_one(_general(x))
        lanes.learn_one(x, y)
        general.learn_one(_general(x), y)
    clf = lanes["MKLClassifier"]
    assert _digest(clf) == _digest(general["MKLClassifier"])
    assert clf.rounds().n_support == 256
    assert one_call_rounds["learn"] >= len(data) - 3


def test_a_kernelized_bank_without_a_budget_takes_no_lane(bananas, one_call_rounds):
    lanes = MKLClassifier(kernels=(kernels.RBF(0.5),), budget=None)
    general = MKLClassifier(kernels=(kernels.RBF(0.5),), budget=None)
    for x, y in bananas[:200]:
        assert lanes.predict_proba_one(x) == general.predict_proba_one(_general(x))
        lanes.learn_one(x, y)
        general.learn_one(_general(x), y)
    assert _digest(lanes) == _digest(general)
    assert not lanes.rounds().model.takes_values
    assert one_call_rounds == {"learn": 0, "predict": 0}
