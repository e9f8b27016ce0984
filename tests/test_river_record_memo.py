"""The one-record memo between ``predict_proba_one`` and ``learn_one`` (``FeatureIndex``'s:
the vector a prediction mapped, taken by the next learning call on an equal record): taken when
it should be, never a stale vector (the dict mutated between the calls, new inputs between the
calls, a different dict with equal contents of other types), and the same numbers bit for bit as
learners that map every record anew."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from river import feature_extraction
from river.datasets import synth

from simulators.zipf_documents import zipf_documents
from streammkl.river import MKLClassifier, _features


def _docs(n: int) -> list[tuple[str, bool]]:
    """Short documents over a Zipf vocabulary: new words throughout."""
    return zipf_documents(n, vocabulary=800, words=(5, 14), seed=3)


@pytest.fixture
def taken(monkeypatch):
    """How often a learning call took the remembered vector (and which vectors it got)."""
    seen = {"hits": 0, "misses": 0}
    real = _features._same_record

    def same_record(kept, x):
        same = real(kept, x)
        seen["hits" if same else "misses"] += 1
        return same

    monkeypatch.setattr(_features, "_same_record", same_record)
    return seen


def _learned(model: MKLClassifier) -> np.ndarray:
    vec = model.rounds().last_input
    assert vec is not None
    return vec


def test_the_memo_learns_bit_for_bit_what_mapping_anew_learns(monkeypatch, taken):
    docs = _docs(400)
    memo = feature_extraction.BagOfWords() | MKLClassifier()
    for text, y in docs:
        memo.predict_proba_one(text)
        memo.learn_one(text, y)
    # every document but the first two (predicted before the model had a class): new words
    # or not, the prediction's mapping is what the learning call takes
    assert taken == {"hits": len(docs) - 2, "misses": 0}
    monkeypatch.setattr(_features, "_same_record", lambda kept, x: False)
    anew = feature_extraction.BagOfWords() | MKLClassifier()
    for text, y in docs:
        anew.predict_proba_one(text)
        anew.learn_one(text, y)
    a, b = memo["MKLClassifier"].rounds(), anew["MKLClassifier"].rounds()
    assert a.digest() == b.digest()
    for text, _ in docs[:50]:
        assert memo.predict_proba_one(text) == anew.predict_proba_one(text)


def _warm(data) -> MKLClassifier:
    model = MKLClassifier()
    for x, y in data:
        model.learn_one(x, y)
    return model


def _hot(n: int) -> list[tuple[dict, int]]:
    out = []
    for x, y in synth.Agrawal(seed=1, classification_function=0).take(n):
        row = {k: float(v) for k, v in x.items() if k not in ("elevel", "car", "zipcode")}
        for k in ("elevel", "car", "zipcode"):
            row[f"{k}={x[k]}"] = 1.0
        out.append((row, y))
    return out


def test_a_dict_mutated_between_the_calls_is_mapped_again(taken):
    data = _hot(300)
    model = _warm(data)
    assert not model.rounds().model.takes_values  # a wide bank's route
    x, y = dict(data[0][0]), data[0][1]
    model.predict_proba_one(x)
    x["salary"] = 12345.0
    x["car=1"] = 0.0
    model.learn_one(x, y)
    assert taken["misses"] == 1 and taken["hits"] == 0
    np.testing.assert_array_equal(_learned(model), model.rounds().input_vector(x))
    model.predict_proba_one(x)
    del x["salary"]
    model.learn_one(x, y)
    assert taken["misses"] == 2
    np.testing.assert_array_equal(_learned(model), model.rounds().input_vector(x))


def test_new_inputs_between_the_calls_drop_the_memo(taken):
    model = feature_extraction.BagOfWords() | MKLClassifier()
    docs = _docs(100)
    for text, y in docs:
        model.learn_one(text, y)
    core = model["MKLClassifier"]
    bow = model["BagOfWords"]
    text = docs[0][0]
    x = bow.transform_one(text)
    core.predict_proba_one(x)
    core.learn_one({"never_seen_before": 1, "w0": 2}, True)  # the next learning call: unequal
    core.learn_one(x, False)
    assert taken == {"hits": 0, "misses": 1}
    learned = _learned(core)
    assert learned.shape[0] == core.rounds().n_features
    np.testing.assert_array_equal(learned, core.rounds().input_vector(x))
    core.predict_proba_one(x)
    core.rounds().declare_features(["declared_between"])  # new inputs: the memo is dropped
    core.learn_one(x, False)
    assert taken == {"hits": 0, "misses": 1}
    np.testing.assert_array_equal(_learned(core), core.rounds().input_vector(x))
    assert _learned(core).shape[0] == core.rounds().n_features
    with_new = {**x, "another_new_word": 1}
    core.predict_proba_one(with_new)  # a name without a column: the full path at once
    core.learn_one(dict(with_new), True)
    assert taken == {"hits": 1, "misses": 1}
    assert "another_new_word" in core.rounds().feature_names
    np.testing.assert_array_equal(_learned(core), core.rounds().input_vector(with_new))


def test_an_equal_dict_takes_the_memo_unless_its_types_differ(taken):
    bow = feature_extraction.BagOfWords()
    docs = [(bow.transform_one(text), y) for text, y in _docs(100)]
    model = _warm([*docs, ({"a": 1.0, "b": 2.0, "1": 3.0}, True), ({"a": 0.0, "c": 1.0}, False)])
    rounds = model.rounds()
    assert rounds.model is not None and not rounds.model.takes_values  # a wide bank's route
    x = {"a": 1.0, "b": 2.0}
    model.predict_proba_one(x)
    model.learn_one(Counter({"a": 1, "b": 2}), True)  # another object, equal: the same vector
    assert taken == {"hits": 1, "misses": 0}
    np.testing.assert_array_equal(_learned(model), rounds.input_vector(x))
    model.predict_proba_one(x)
    model.learn_one({"a": True, "b": 2.0}, True)  # True == 1.0, but a bool: mapped again
    assert taken == {"hits": 1, "misses": 1}
    model.predict_proba_one({1: 3.0})  # an int name (its str's column)
    model.learn_one({True: 3.0}, True)  # == {1: 3.0}, but "True" is another input
    assert taken == {"hits": 1, "misses": 2}
    assert "True" in rounds.feature_names
    model.predict_proba_one(Counter({"a": 1}))
    model.learn_one(Counter({"a": 1, "b": 0}), True)  # Counter's == says equal; dicts are not
    assert taken == {"hits": 1, "misses": 3}
    np.testing.assert_array_equal(_learned(model), rounds.input_vector({"a": 1, "b": 0}))
    model.predict_proba_one(x)
    model.learn_one(dict(x), True)
    model.learn_one(dict(x), True)  # the memo is taken once
    assert taken == {"hits": 2, "misses": 3}


def test_new_names_are_the_names_without_a_column_as_strings_sorted_once_each():
    """``FeatureIndex.new_names``: every key of the record whose name (its ``str``) has no
    column, once, sorted: an ``int`` key and its ``str`` are one name; a known name, in
    either form, is not new."""
    index = _features.FeatureIndex(["b", "3"])
    record = {"c": 1.0, "b": 2.0, 3: 1.0, "a": 0.0, 7: 1.0, "7": 2.0, 10: None}
    assert index.new_names(record) == ["10", "7", "a", "c"]
    brute = sorted({str(k) for k in record} - set(index.names))
    assert index.new_names(record) == brute
    assert index.new_names({}) == [] and index.new_names({"b": 1.0, 3: 2.0}) == []


@pytest.mark.parametrize(
    "records",
    [
        [{"a": 1.0, "b": 2, "c": -3.5}, {"a": 0.5, "b": 7, "c": 1e300}],  # fixed records
        [{"a": 1.0, "b": 2.0}, {"b": 3.0, "a": 4.0}],  # the keys in another order
        [{"a": 1.0, "b": None}, {"a": 2.0, "b": 5.0}],  # a value None: not counted
        [{"a": 1.0, "z": 9.0}, {"a": 2.0, "z": 8.0}],  # a name without a column: ignored
        [{"a": 1.0, 3: 2.0}, {"a": 1.0, 3: 4.0}],  # a key that is not a str
        [{"c": 1.0}, {"c": 2.0}],  # a subset of the columns
        [],
    ],
)
def test_rows_are_the_records_vectors_stacked(records):
    """FeatureIndex.rows lays out fixed records column by column: the same numbers as one
    vector per record, whatever the records (other orders, None, unknown or non-str keys)."""
    index = _features.FeatureIndex(["a", "b", "c", "3"])
    want = (
        np.stack([index.vector(x, validated=True) for x in records])
        if records
        else np.zeros((0, 4))
    )
    got = index.rows(records)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert got.tobytes() == want.tobytes()
