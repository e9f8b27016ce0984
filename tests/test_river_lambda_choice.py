"""LambdaChoiceClassifier against a brute-force reference of its rule, its argument errors and its
persistence (pickle, save/load)."""

from __future__ import annotations

import math
import pickle

import pytest
from river import datasets, preprocessing

from streammkl import statefile
from streammkl.core import kernels, regularizers
from streammkl.river import LambdaChoiceClassifier, MKLClassifier

LAMBDAS = (1e-2, 1e-4)
DISCOUNT = 0.9


def _base() -> MKLClassifier:
    return MKLClassifier(kernels=(kernels.Linear(), kernels.RBF(0.5, n_components=16)), seed=3)


def _stream(n: int = 250) -> list:
    scaler = preprocessing.StandardScaler()
    out = []
    for x, y in datasets.Phishing().take(n):
        scaler.learn_one(x)
        out.append((scaler.transform_one(x), y))
    return out


def test_it_predicts_with_the_copy_of_fewest_discounted_errors_brute_force() -> None:
    """Reference: independent MKLClassifiers at each lambda, each one's prediction before it
    learns scored 0/1, the discounted sum recomputed from the whole history every round."""
    choice = LambdaChoiceClassifier(_base(), lambdas=LAMBDAS, discount=DISCOUNT)
    refs = [_base().clone({"regularizer": regularizers.GroupLasso(lam)}) for lam in LAMBDAS]
    history: list[list[int]] = [[] for _ in LAMBDAS]
    picked = set()
    for x, y in _stream():
        t = len(history[0])
        counts = [sum(DISCOUNT ** (t - 1 - j) * e for j, e in enumerate(h)) for h in history]
        best = min(range(len(LAMBDAS)), key=lambda i: (counts[i], i))  # ties to the first
        picked.add(best)
        assert choice.chosen == best
        assert choice.chosen_lambda == LAMBDAS[best]
        assert all(math.isclose(a, b, abs_tol=1e-9) for a, b in zip(choice.errors, counts))
        assert choice.predict_one(x) == refs[best].predict_one(x)
        assert choice.predict_proba_one(x) == refs[best].predict_proba_one(x)
        for ref, h in zip(refs, history, strict=True):
            p = ref.predict_proba_one(x)
            h.append(int(not p or max(p, key=p.get) != y))
            ref.learn_one(x, y)
        choice.learn_one(x, y)
    assert picked == {0, 1}  # the stream makes it switch: both branches of the rule ran
    for learner, ref in zip(choice.learners, refs, strict=True):
        assert statefile.digest_of(learner) == statefile.digest_of(ref)


def test_the_default_runs_the_default_learner_at_1e_2_and_3e_3() -> None:
    choice = LambdaChoiceClassifier()
    assert [lr.regularizer.lam for lr in choice.learners] == [1e-2, 3e-3]
    assert all(lr.clone({"regularizer": None}).kernels is None for lr in choice.learners)
    assert choice.chosen_lambda == 1e-2  # before any example: the first
    assert choice.predict_one({"a": 1.0}) is None and choice.predict_proba_one({"a": 1.0}) == {}


@pytest.mark.parametrize(
    ("kw", "error", "match"),
    [
        ({"lambdas": ()}, ValueError, "lambdas is empty"),
        ({"lambdas": (1e-2, 0.0)}, ValueError, "> 0"),
        ({"lambdas": (-1e-3,)}, ValueError, "> 0"),
        ({"lambdas": (float("nan"),)}, ValueError, "> 0"),
        ({"lambdas": ("0.01",)}, TypeError, "numbers"),
        ({"discount": 0.0}, ValueError, r"\(0, 1\)"),
        ({"discount": 1.0}, ValueError, r"\(0, 1\)"),
        ({"discount": 1.5}, ValueError, r"\(0, 1\)"),
        ({"discount": "0.9"}, TypeError, "number"),
        ({"classifier": MKLClassifier(regularizer=regularizers.GroupLasso(1e-3))}, ValueError,
         "regularizer must be None"),
        ({"classifier": preprocessing.StandardScaler()}, TypeError, "MKLClassifier"),
    ],
)  # fmt: skip
def test_bad_arguments_are_refused_clearly(kw, error, match) -> None:
    with pytest.raises(error, match=match):
        LambdaChoiceClassifier(**kw)


def test_a_missing_label_is_refused_and_changes_nothing() -> None:
    choice = LambdaChoiceClassifier(_base(), lambdas=LAMBDAS)
    (x, y), *_ = _stream(1)
    choice.learn_one(x, y)
    before = [statefile.digest_of(lr) for lr in choice.learners], choice.errors
    with pytest.raises(ValueError, match="needs a label"):
        choice.learn_one(x, None)
    assert ([statefile.digest_of(lr) for lr in choice.learners], choice.errors) == before


def _trained() -> tuple[LambdaChoiceClassifier, list]:
    data = _stream(200)
    choice = LambdaChoiceClassifier(_base(), lambdas=LAMBDAS, discount=DISCOUNT)
    for x, y in data[:150]:
        choice.learn_one(x, y)
    return choice, data[150:]


def _same_course(a: LambdaChoiceClassifier, b: LambdaChoiceClassifier, rest: list) -> None:
    for x, y in rest:
        assert a.chosen == b.chosen and a.errors == b.errors
        assert a.predict_proba_one(x) == b.predict_proba_one(x)
        a.learn_one(x, y)
        b.learn_one(x, y)
    assert statefile.digest_of(a) == statefile.digest_of(b)


def test_pickle_round_trip_goes_on_identically() -> None:
    choice, rest = _trained()
    _same_course(choice, pickle.loads(pickle.dumps(choice)), rest)


def test_save_load_round_trip_goes_on_identically(tmp_path) -> None:
    choice, rest = _trained()
    loaded = LambdaChoiceClassifier.load(choice.save(tmp_path / "choice.smkl"))
    assert loaded.lambdas == list(LAMBDAS) and loaded.discount == DISCOUNT
    assert loaded.classifier is not None and loaded.classifier.regularizer is None
    _same_course(choice, loaded, rest)


def test_load_refuses_another_learners_file(tmp_path) -> None:
    path = _base().save(tmp_path / "mkl.smkl")
    with pytest.raises(statefile.StateError, match="not a streammkl lambda choice state"):
        LambdaChoiceClassifier.load(path)


def test_learn_predict_one_is_predict_proba_one_then_learn_one() -> None:
    a = LambdaChoiceClassifier(_base(), lambdas=LAMBDAS, discount=DISCOUNT)
    b = LambdaChoiceClassifier(_base(), lambdas=LAMBDAS, discount=DISCOUNT)
    for x, y in _stream(150):
        expected = b.predict_proba_one(x)
        b.learn_one(x, y)
        assert a.learn_predict_one(x, y) == expected
        assert a.errors == b.errors
    assert statefile.digest_of(a) == statefile.digest_of(b)
