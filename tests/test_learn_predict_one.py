"""learn_predict_one: the prequential round is exactly predict_one / predict_proba_one then
learn_one, on seeded streams that bring unseen classes, unseen features and missing ones."""

from __future__ import annotations

import numpy as np
import pytest

from streammkl.core import kernels, losses
from streammkl.river import MKLClassifier, MKLRegressor
from streammkl.structured import SequenceLabeler

BANK = (kernels.Linear(), kernels.RBF(1.0, n_components=32), kernels.RBF(0.5))


def _stream(n, seed, labels=("neg", "pos")):
    """Labelled dicts; a third class from example 300, a new feature from 500, missing
    features now and then, an unlabelled example every 17."""
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for i in range(n):
        x = {"a": float(rng.normal()), "b": float(rng.normal())}
        if i >= 500:
            x["late"] = float(rng.normal())
        if i % 13 == 5:
            del x["b"]
        k = int(x["a"] + 0.3 * rng.normal() > 0)
        y = labels[k] if i < 300 or i % 3 else "third"
        xs.append(x)
        ys.append(None if i % 17 == 3 else y)
    return xs, ys


@pytest.mark.parametrize(
    ("loss", "standardize"),
    [(None, False), (losses.MulticlassHinge(), False), (losses.Hinge(), False), (None, True)],
)
def test_classifier_learn_predict_one_is_predict_proba_one_then_learn_one(loss, standardize):
    binary = isinstance(loss, losses.Hinge)
    xs, ys = _stream(900, seed=4)
    if binary:
        ys = [None if y is None else y == "pos" for y in ys]
    kw = {"kernels": BANK, "loss": loss, "budget": 64, "seed": 2, "standardize": standardize}
    a, b = MKLClassifier(**kw), MKLClassifier(**kw)
    for x, y in zip(xs, ys, strict=True):
        expected = a.predict_proba_one(x)
        label = a.predict_one(x)
        if y is not None:
            a.learn_one(x, y)
        got = b.learn_predict_one(x, y)
        assert got == expected  # the same numbers, not only close ones
        assert (max(got, key=got.__getitem__) if got else None) == label
    assert a.rounds().digest() == b.rounds().digest()
    assert a.rounds().n_features == 3
    assert len(b.classes_) == (2 if binary else 3)
    # learn_predict_many is the same round, in compiled runs
    c = MKLClassifier(**kw)
    probas = c.rounds().learn_predict_many(xs, ys)
    d = MKLClassifier(**kw)
    assert probas == [d.learn_predict_one(x, y) for x, y in zip(xs, ys, strict=True)]
    assert c.rounds().digest() == d.rounds().digest() == a.rounds().digest()


def test_classifier_learn_predict_one_refused_learning_changes_nothing():
    clf = MKLClassifier(loss=losses.Hinge(), seed=0)
    clf.learn_one({"a": 1.0}, "p")
    clf.learn_one({"a": -1.0}, "n")
    before = clf.rounds().digest()
    with pytest.raises(ValueError, match="third class"):
        clf.learn_predict_one({"a": 0.5}, "third")
    with pytest.raises(TypeError, match="'a'"):
        clf.learn_predict_one({"a": "oops"}, "p")
    assert clf.rounds().digest() == before


@pytest.mark.parametrize(("standardize", "inputs"), [(True, False), (False, False), (True, True)])
def test_regressor_learn_predict_one_is_predict_one_then_learn_one(standardize, inputs):
    xs, ys = _stream(700, seed=5)
    rng = np.random.default_rng(1)
    targets = [None if y is None else 3.0 * x["a"] + float(rng.normal()) + 10.0
               for x, y in zip(xs, ys, strict=True)]  # fmt: skip
    kw = {"kernels": BANK, "budget": 32, "standardize_target": standardize, "standardize": inputs}
    a, b = MKLRegressor(**kw), MKLRegressor(**kw)
    for x, y in zip(xs, targets, strict=True):
        expected = a.predict_one(x)
        if y is not None:
            a.learn_one(x, y)
        assert b.learn_predict_one(x, y) == expected
    assert a.rounds().digest() == b.rounds().digest()
    with pytest.raises(ValueError, match="finite"):
        b.learn_predict_one(xs[0], float("nan"))
    assert a.rounds().digest() == b.rounds().digest()


@pytest.mark.parametrize("loss", ["hinge", "crf"])
@pytest.mark.parametrize("budget", [None, 8])
def test_sequence_labeler_learn_predict_one_is_predict_one_then_learn_one(loss, budget):
    rng = np.random.default_rng(7)
    bank = (kernels.Linear(), kernels.RBF(gamma=0.3))
    a = SequenceLabeler(kernels=bank, loss=loss, budget=budget)
    b = SequenceLabeler(kernels=bank, loss=loss, budget=budget)
    for i in range(120):
        T = int(rng.integers(1, 6))
        names = ["u", "v"] + (["w"] if i >= 60 else [])  # a new feature at 60
        xs = [{n: float(rng.normal()) for n in names} for _ in range(T)]
        top = 2 if i < 40 else 4  # new labels at 40
        ys = [int(rng.integers(top)) for _ in range(T)] if i % 11 != 4 else None
        expected = a.predict_one(xs)
        if ys is not None:
            a.learn_one(xs, ys)
        assert b.learn_predict_one(xs, ys) == expected
    assert a.digest() == b.digest()
    assert a.labels == b.labels and len(b.labels) == 4


def test_standardized_inputs_are_saved_with_the_model_and_scale_free(tmp_path):
    """standardize=True: the running statistics are part of the state (a reloaded learner
    continues bit for bit), and inputs a thousand times larger learn the same predictions."""
    xs, ys = _stream(600, seed=9)
    a = MKLClassifier(kernels=BANK, budget=64, standardize=True)
    for x, y in zip(xs[:300], ys[:300], strict=True):
        a.learn_predict_one(x, y)
    b = MKLClassifier.load(a.save(tmp_path / "m.npz"))
    assert b.rounds().digest() == a.rounds().digest()
    assert [a.learn_predict_one(x, y) for x, y in zip(xs[300:], ys[300:], strict=True)] == [
        b.learn_predict_one(x, y) for x, y in zip(xs[300:], ys[300:], strict=True)
    ]
    big = MKLClassifier(kernels=(kernels.Linear(),), standardize=True)
    small = MKLClassifier(kernels=(kernels.Linear(),), standardize=True)
    hits_big = hits_small = 0
    for x, y in zip(xs, ys, strict=True):
        pb = big.learn_predict_one({k: 1000.0 * v + 5000.0 for k, v in x.items()}, y)
        ps = small.learn_predict_one(x, y)
        hits_big += bool(pb) and max(pb, key=pb.get) == y
        hits_small += bool(ps) and max(ps, key=ps.get) == y
    assert abs(hits_big - hits_small) <= 15  # scale-free up to the rounding of the moments
    assert hits_small > 0.7 * sum(y is not None for y in ys)
