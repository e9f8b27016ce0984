"""The one-call round of a record of known inputs (``OnlineMKL.learn_values`` /
``predict_values`` behind ``Rounds.learn_known`` / ``predict_known``): the same numbers bit for
bit as the general path on real river streams, taken when it should be, and a record it refuses
changes nothing."""

from __future__ import annotations

import math

import numpy as np
import pytest
from river import datasets
from river.datasets import synth

from streammkl.core import OnlineMKL
from streammkl.river import MKLClassifier, MKLRegressor


def _general(x: dict) -> dict:
    """The same record with numpy float values: the learner's general path (never the
    one-call route, which takes plain ``float`` and ``int`` values only)."""
    return {k: v if v is None else np.float64(v) for k, v in x.items()}


@pytest.fixture
def counted(monkeypatch):
    """How often the one-call round and prediction took a record."""
    taken = {"learn": 0, "predict": 0}
    learn, predict = OnlineMKL.learn_values, OnlineMKL.predict_values

    def learn_values(self, *args):
        loss = learn(self, *args)
        taken["learn"] += loss >= 0.0
        return loss

    def predict_values(self, *args):
        fx = predict(self, *args)
        taken["predict"] += fx is not None
        return fx

    monkeypatch.setattr(OnlineMKL, "learn_values", learn_values)
    monkeypatch.setattr(OnlineMKL, "predict_values", predict_values)
    return taken


STREAMS = {
    "Bananas": lambda: list(datasets.Bananas())[:1500],
    "Phishing": lambda: list(datasets.Phishing()),
    "Friedman": lambda: list(synth.Friedman(seed=42).take(1500)),
}


@pytest.mark.parametrize("standardize", [True, False])
@pytest.mark.parametrize("stream", sorted(STREAMS))
def test_one_call_rounds_equal_the_general_path_bit_for_bit(stream, standardize, counted):
    data = STREAMS[stream]()
    make = MKLRegressor if stream == "Friedman" else MKLClassifier
    fused, two_calls, general = (make(standardize=standardize) for _ in range(3))
    predict = "predict_one" if make is MKLRegressor else "predict_proba_one"
    for x, y in data:
        got = fused.learn_predict_one(x, y)
        before = getattr(two_calls, predict)(x)
        two_calls.learn_one(x, y)
        want = general.learn_predict_one(_general(x), y)
        assert got == want == before  # floats compared exactly
    digest = general.rounds().digest()
    assert fused.rounds().digest() == digest == two_calls.rounds().digest()
    np.testing.assert_array_equal(fused.rounds().last_input, general.rounds().last_input)
    n = len(data)
    assert counted["learn"] > 2 * (n - 1100)  # past the bandwidth warm-up, every round
    assert counted["predict"] > n - 1100


def test_a_refused_record_changes_nothing_and_raises_as_before():
    data = list(datasets.Phishing())[:300]
    model = MKLClassifier(standardize=True)
    for x, y in data:
        model.learn_predict_one(x, y)
    digest = model.rounds().digest()
    x, y = data[0]
    for bad in (math.nan, math.inf, 1e101, -1e300):
        with pytest.raises(ValueError, match="empty_server_form_handler"):
            model.learn_one({**x, "empty_server_form_handler": bad}, y)
        with pytest.raises(ValueError, match="empty_server_form_handler"):
            model.predict_proba_one({**x, "empty_server_form_handler": bad})
        assert model.rounds().digest() == digest
    with pytest.raises(ValueError):  # an input out of range under a name the model ignores
        model.predict_proba_one({**x, "unknown": math.nan})


def test_a_regressor_counts_the_target_once_when_the_record_is_refused():
    data = list(synth.Friedman(seed=1).take(200))
    model = MKLRegressor(standardize=True)
    for x, y in data:
        model.learn_one(x, y)
    digest = model.rounds().digest()
    x, y = data[0]
    for bad in (math.nan, 1e101):
        with pytest.raises(ValueError):
            model.learn_one({**x, 3: bad}, y)
        assert model.rounds().digest() == digest
    twin = MKLRegressor.from_state(*model.to_state())
    assert model.learn_predict_one(x, y) == twin.learn_predict_one(_general(x), y)
    assert model.rounds().digest() == twin.rounds().digest()


def test_keys_in_another_order_missing_new_and_unusual_values_agree(counted):
    """Records whose keys change order, miss some, bring new ones (int and str names), or hold
    ``None``, ``bool`` and ``int`` values: the same numbers as the general path."""
    rng = np.random.default_rng(3)
    fused, general = MKLClassifier(standardize=True), MKLClassifier(standardize=True)
    for i in range(1400):
        x: dict = {"a": float(rng.normal()), 7: float(rng.normal()), "c": int(rng.integers(5))}
        if i % 5 == 1:
            x = dict(reversed(list(x.items())))
        if i % 7 == 2:
            del x["a"]
        if i % 11 == 3:
            x["c"] = None
        if i % 13 == 4:
            x["flag"] = bool(i % 2)
        if i >= 1200:
            x[f"late{i % 3}"] = float(rng.normal())
        y = ("p", "q", "r")[int((x.get("a") or 0.0) > 0) + (i >= 1300)]
        assert fused.predict_proba_one(x) == general.predict_proba_one(_general(x))
        assert fused.learn_predict_one(x, y) == general.learn_predict_one(_general(x), y)
    assert fused.rounds().digest() == general.rounds().digest()
    assert counted["learn"] > 0 and counted["predict"] > 0
