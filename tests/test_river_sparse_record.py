"""A sparse record of known inputs goes to the core as its entries (``FeatureIndex.known_sparse``,
``OnlineMKL.learn_sparse`` / ``predict_sparse``): no vector of the vocabulary's width is built
or scanned. The same numbers bit for bit as the dense vector's route (predictions, the learned
inputs, the saved arrays, the digest), the route taken when it should be, the zero buffer left
zero, and a bad value still refused by the full path."""

from __future__ import annotations

import numpy as np
import pytest
from river import feature_extraction
from river.datasets import synth

from simulators.zipf_documents import zipf_documents
from streammkl.core.model import OnlineMKL
from streammkl.river import MKLClassifier
from streammkl.river.rounds import Rounds


def _docs(n: int) -> list[tuple[str, bool]]:
    """Short documents over a Zipf vocabulary: new words throughout."""
    return zipf_documents(n, vocabulary=1200, words=(5, 19), seed=5)


def _one_hot(n: int) -> list[tuple[dict, int]]:
    out = []
    for x, y in synth.Agrawal(seed=3, classification_function=0).take(n):
        row = {k: float(v) for k, v in x.items() if k not in ("elevel", "car", "zipcode")}
        for k in ("elevel", "car", "zipcode"):
            row[f"{k}={x[k]}"] = 1.0
        out.append((row, y))
    return out


@pytest.fixture
def sparse_calls(monkeypatch):
    """How many rounds and predictions the entries' calls took."""
    seen = {"learn": 0, "predict": 0}
    learn, predict = OnlineMKL.learn_sparse, OnlineMKL.predict_sparse

    def counted_learn(self, cols, vals, y):
        loss = learn(self, cols, vals, y)
        seen["learn"] += loss >= 0.0
        assert np.all(self._zeros() == 0.0)  # the buffer is left zero
        return loss

    def counted_predict(self, cols, vals):
        fx = predict(self, cols, vals)
        seen["predict"] += fx is not None
        assert np.all(self._zeros() == 0.0)
        return fx

    monkeypatch.setattr(OnlineMKL, "learn_sparse", counted_learn)
    monkeypatch.setattr(OnlineMKL, "predict_sparse", counted_predict)
    return seen


def _run(make, data, sparse: bool, monkeypatch) -> tuple[list, list, object]:
    """Prequential predictions and learned inputs of a fresh learner, the entries' route on or
    off."""
    route = Rounds._sparse
    with monkeypatch.context() as patch:
        if not sparse:
            patch.setattr(Rounds, "_sparse", lambda self, model, x: False)
        else:
            patch.setattr(Rounds, "_sparse", route)
        model = make()
        probas, inputs = [], []
        for x, y in data:
            probas.append(model.predict_proba_one(x))
            model.learn_one(x, y)
            clf = model if hasattr(model, "rounds") else model["MKLClassifier"]
            inputs.append(clf.rounds().last_input)
    return probas, inputs, clf


def _same(a, b) -> None:
    probas_a, inputs_a, clf_a = a
    probas_b, inputs_b, clf_b = b
    assert probas_a == probas_b
    for va, vb in zip(inputs_a, inputs_b, strict=True):
        np.testing.assert_array_equal(va, vb)
    meta_a, arrays_a = clf_a.to_state()
    meta_b, arrays_b = clf_b.to_state()
    assert meta_a == meta_b
    assert arrays_a.keys() == arrays_b.keys()
    for k in arrays_a:
        np.testing.assert_array_equal(arrays_a[k], arrays_b[k], err_msg=k)
    assert clf_a.rounds().digest() == clf_b.rounds().digest()


def test_bag_of_words_learns_bit_for_bit_through_its_entries(monkeypatch, sparse_calls):
    docs = _docs(500)

    def make():
        return feature_extraction.BagOfWords() | MKLClassifier()

    dense = _run(make, docs, False, monkeypatch)
    assert sparse_calls == {"learn": 0, "predict": 0}
    sparse = _run(make, docs, True, monkeypatch)
    # past the bandwidth warm-up, every round of known words takes the entries' calls
    assert sparse_calls["learn"] > 50 and sparse_calls["predict"] > 100
    _same(dense, sparse)


@pytest.mark.parametrize("standardize", [False, True])
def test_one_hot_agrawal_learns_bit_for_bit(monkeypatch, sparse_calls, standardize):
    data = _one_hot(400)

    def make():
        return MKLClassifier(standardize=standardize)

    _same(_run(make, data, False, monkeypatch), _run(make, data, True, monkeypatch))
    if standardize:  # the standardisation counts every input: the dense route
        assert sparse_calls == {"learn": 0, "predict": 0}


def test_a_column_named_twice_and_zeros_read_as_the_vector_does(monkeypatch, sparse_calls):
    """An ``int`` name and its ``str`` (one column: the later value wins) and zero values of
    either sign, in a record of known inputs, through both routes."""
    names = [str(i) for i in range(400)]
    rng = np.random.default_rng(0)
    data = []
    for _ in range(1300):  # (past the bandwidth warm-up)
        cols = rng.choice(400, size=6, replace=False)
        x = {names[c]: float(rng.integers(1, 3)) for c in cols}
        data.append((x, bool(rng.random() < 0.5)))
    warm = [({n: 1.0 for n in names}, True)]  # every input known from the start
    odd = [
        ({"5": 1.0, 5: 2.0, "7": 0.0, "9": -0.0, "11": 3.0}, True),
        ({7: 1.5, "7": 0.0, "12": 1.0}, False),
    ]
    stream = warm + data + odd * 3

    def make():
        return MKLClassifier()

    dense = _run(make, stream, False, monkeypatch)
    sparse = _run(make, stream, True, monkeypatch)
    assert sparse_calls["learn"] > 0
    _same(dense, sparse)


def test_a_bad_value_is_refused_by_the_full_path_and_changes_nothing(monkeypatch):
    docs = _docs(1200)
    model = MKLClassifier()
    bow = feature_extraction.BagOfWords()
    for text, y in docs:
        model.learn_one(bow.transform_one(text), y)
    known = next(iter(model.rounds().features.names))
    before = model.rounds().digest()
    for bad in (float("nan"), float("inf"), 1e300):
        with pytest.raises(ValueError, match=known):
            model.learn_one({known: bad}, True)
    assert model.rounds().digest() == before


def test_entries_at_c_speed_are_the_loops_entries(monkeypatch):
    """``FeatureIndex.known_sparse``'s C-speed mapping (``_entries_of``: every key known, every
    value a plain number within the bound) gives the entries the per-key loop gives, the same
    column order, values and dtypes, and leaves every other record (unknown or ``int`` names,
    ``None``, bools, NaN, infinities, values past the bound or a float's range, numpy scalars)
    to the loop, whose answers stand: 3,000 random records, the route counted."""
    from streammkl.core.model import MAX_ABS_INPUT
    from streammkl.river import _features

    names = [f"w{i}" for i in range(40)] + ["7"]
    odd = [None, True, float("nan"), float("inf"), -float("inf"), 2 * MAX_ABS_INPUT,
           -MAX_ABS_INPUT, MAX_ABS_INPUT, 10**400, 10**30, -(2**70), np.float64(2.5), 0, -0.0,
           MAX_ABS_INPUT * (1 + 1e-15)]  # fmt: skip
    rng = np.random.default_rng(21)
    records = [{}]
    for _ in range(3000):
        keys = [names[i] for i in rng.choice(40, rng.integers(1, 12), replace=False)]
        x = {k: float(rng.integers(1, 4)) if rng.random() < 0.5 else int(rng.integers(-3, 4))
             for k in keys}  # fmt: skip
        roll = rng.random()
        if roll < 0.1:
            x[keys[0]] = odd[rng.integers(len(odd))]
        elif roll < 0.15:
            x["unknown"] = 1.0
        elif roll < 0.2:
            x[7] = 1.0  # an int name (its str's column)
        records.append(x)
    real = _features._entries_of
    taken = [0]

    def counted(x, index):
        found = real(x, index)
        taken[0] += found is not None
        return found

    for learn in (False, True):
        for x in records:
            index = _features.FeatureIndex(names)
            with monkeypatch.context() as patch:
                patch.setattr(_features, "_entries_of", lambda x, index: None)
                want = index.known_sparse(x, learn)
            index = _features.FeatureIndex(names)
            with monkeypatch.context() as patch:
                patch.setattr(_features, "_entries_of", counted)
                got = index.known_sparse(x, learn)
            if want is None:
                assert got is None, x
                continue
            assert got is not None, x
            for a, b in zip(got, want, strict=True):
                assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), x
    assert taken[0] > 2 * 0.7 * len(records)  # most plain records took the C-speed route


def test_a_prediction_with_new_words_hands_them_to_the_learning_call(monkeypatch):
    """After ``predict_proba_one`` met words without a column, ``learn_one`` on an equal
    record of a known class takes the names and values the prediction found
    (``FeatureIndex.take_pending``) instead of checking and mapping the record again: the same
    predictions, learned inputs, saved arrays and digest as a learner that never takes them,
    the route taken on most documents, and nothing handed over for a record changed between
    the calls, a new class or a learning call without a prediction before it."""
    from streammkl.river import _features

    docs = _docs(400)
    taken = [0]
    real = _features.FeatureIndex.take_pending

    def counted(self):
        pending = real(self)
        if pending is not None:  # what check_numeric and new_names would find
            taken[0] += 1
        return pending

    def make():
        return feature_extraction.BagOfWords() | MKLClassifier()

    with monkeypatch.context() as patch:
        patch.setattr(_features.FeatureIndex, "take_pending", lambda self: None)
        without = _run(make, docs, True, monkeypatch)
    with monkeypatch.context() as patch:
        patch.setattr(_features.FeatureIndex, "take_pending", counted)
        with_pending = _run(make, docs, True, monkeypatch)
    _same(without, with_pending)
    assert taken[0] > 100  # new words arrive throughout: most learning calls took them

    # the learning call's record equal to the prediction's, its keys in another order: its
    # own order makes its entries (the order of the compiled sums), as mapping it again does
    def reordered(take):
        with monkeypatch.context() as patch:
            patch.setattr(_features.FeatureIndex, "take_pending", take)
            bow, clf = feature_extraction.BagOfWords(), MKLClassifier()
            probas = []
            for text, y in docs:
                x = bow.transform_one(text)
                probas.append(clf.predict_proba_one(x))
                clf.learn_one(dict(reversed(x.items())), y)
        return probas, clf.rounds().digest()

    before = taken[0]
    assert reordered(lambda self: None) == reordered(counted)
    assert taken[0] > before + 100

    # values None (no column, no entry) and int names (their str's column) in the records
    def odd(take):
        with monkeypatch.context() as patch:
            patch.setattr(_features.FeatureIndex, "take_pending", take)
            bow, clf = feature_extraction.BagOfWords(), MKLClassifier()
            probas = []
            for i, (text, y) in enumerate(docs):
                x = dict(bow.transform_one(text))
                if i % 3 == 0:
                    x[f"none{i % 5}"] = None
                if i % 4 == 0:
                    x[i % 7] = 1
                probas.append(clf.predict_proba_one(x))
                clf.learn_one(dict(x), y)
        return probas, clf.rounds().last_input.tolist(), clf.rounds().digest()

    before = taken[0]
    assert odd(lambda self: None) == odd(counted)
    assert taken[0] > before + 50

    # a record mutated between the calls, or a learning call with no prediction before it
    # or of a new class, finds nothing handed over (its own check and mapping)
    index = _features.FeatureIndex(["a", "b"])
    x = {"a": 1.0, "new": 2}
    assert index.known_sparse(x, learn=False) is not None
    x["new"] = 3
    assert index.known_sparse(x, learn=True) is None and index.take_pending() is None
    index.known_sparse(x, learn=False)
    assert index.known_sparse(dict(x), learn=True) is None
    assert index.take_pending() == ["new"]
    assert index.take_pending() is None  # once
    assert "_pending" not in index.__dict__  # (a learner pickles as it did)
    index.known_sparse({"b": 1.0, "z": 1, "y": 2.0}, learn=False)
    assert index.known_sparse({"b": 1.0, "z": 1, "y": 2.0}, learn=True) is None
    assert index.known_sparse({"b": 1.0}, learn=True) is not None  # another call: dropped
    assert index.take_pending() is None
    clf = MKLClassifier()
    clf.learn_one({"a": 1.0}, True)
    clf.predict_proba_one({"a": 1.0, "n1": 1.0})
    clf.learn_one({"a": 1.0, "n1": 1.0}, False)  # a new class: the full path
    assert clf.rounds().features.names == ["a", "n1"]
    assert clf.rounds().features.take_pending() is None
