"""Records with ``int`` feature names (river's synthetic streams: ``Hyperplane`` names its
features 0..9) learn and predict as their ``str``-named twins do, through every entry point, and
take the same compiled runs (issue 25: ``Rounds.plan`` read the records by their ``str`` names,
found none under ``int`` keys, and sent every record to the single calls after scanning the rest
of the batch: 17x the CPU per record)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from river.datasets import synth

from streammkl.river import MKLClassifier, MKLRegressor
from streammkl.river._features import FeatureIndex


def _stream(n: int = 600) -> tuple[list[dict], list[dict], list[bool]]:
    data = list(synth.Hyperplane(seed=7, n_features=5).take(n))
    ints = [dict(x) for x, _ in data]
    strs = [{str(k): v for k, v in x.items()} for x in ints]
    return ints, strs, [bool(y) for _, y in data]


def _counting(clf: MKLClassifier) -> list[int]:
    """Count the single rounds ``learn_predict_many`` falls back to (the slow path)."""
    calls = [0]
    single = clf.learn_predict_one

    def counted(x, y):  # type: ignore[no-untyped-def]
        calls[0] += 1
        return single(x, y)

    clf.learn_predict_one = counted  # type: ignore[method-assign]
    return calls


@pytest.mark.parametrize("validated", [True, False])
def test_int_names_take_the_compiled_runs_of_their_str_twins(validated):
    ints, strs, ys = _stream()
    out, singles, digests = {}, {}, {}
    for kind, xs in (("int", ints), ("str", strs)):
        clf = MKLClassifier(standardize=True)
        calls = _counting(clf)
        out[kind] = clf.rounds().learn_predict_many(xs, ys, validated=validated)
        singles[kind], digests[kind] = calls[0], clf.rounds().digest()
    assert out["int"] == out["str"]
    assert digests["int"] == digests["str"]
    # the first record makes the model and meets the classes: a few single rounds, then runs
    assert singles["int"] == singles["str"] < 5


@pytest.mark.parametrize("validated", [True, False])
def test_plan_reads_int_keys_by_the_str_names_columns(validated):
    ints, strs, ys = _stream(200)
    clf = MKLClassifier(standardize=True)
    clf.rounds().learn_predict_many(strs[:50], ys[:50])
    rounds = clf.rounds()
    end_s, X_s, Y_s = rounds.plan(strs, ys, 50, validated)
    end_i, X_i, Y_i = rounds.plan(ints, ys, 50, validated)
    assert end_i == end_s == 200
    np.testing.assert_array_equal(X_i, X_s)
    np.testing.assert_array_equal(Y_i, Y_s)
    # a missing input counts as 0, under int keys too (the loop's path, not the whole run's)
    short = [{k: v for k, v in x.items() if k != 2} for x in ints[50:60]]
    end, X, _ = rounds.plan(short, ys[50:60], 0, validated)
    assert end == 10
    assert (X[:, rounds.features.index["2"]] == 0).all()
    # a record keyed by both kinds, or by a new int name, ends the run where str twins would
    mixed = [dict(ints[60]), {**ints[61], 9: 1.0}, {str(k): v for k, v in ints[62].items()}]
    mixed[0][0], mixed[0]["1"] = mixed[0].pop(0), mixed[0].pop(1)
    assert rounds.plan(mixed, ys[60:63], 0, validated)[0] == 0
    assert rounds.plan(mixed, ys[60:63], 1, validated)[0] == 1
    assert rounds.plan(mixed, ys[60:63], 2, validated)[0] == 3


def test_names_keyed_like_keeps_names_no_int_spells():
    index = FeatureIndex(["0", "01", "12", "a", "1_0", " 3", "-4"])
    assert index.names_keyed_like({"0": 1.0}) is index.names
    assert index.names_keyed_like({}) is index.names
    assert index.names_keyed_like({True: 1.0}) is index.names  # bool keys are their str's
    assert index.names_keyed_like({0: 1.0}) == [0, "01", 12, "a", "1_0", " 3", -4]


def test_int_names_one_record_at_a_time_and_frames():
    ints, strs, ys = _stream(300)
    probas = {}
    for kind, xs in (("int", ints), ("str", strs)):
        a, b = MKLClassifier(standardize=True), MKLClassifier(standardize=True)
        got = []
        for x, y in zip(xs, ys, strict=True):
            got.append(a.predict_proba_one(x))
            a.learn_one(x, y)
            assert b.learn_predict_one(x, y) == got[-1]
        probas[kind] = got
        assert a.rounds().digest() == b.rounds().digest()
    assert probas["int"] == probas["str"]
    frames = {}
    for kind, xs in (("int", ints), ("str", strs)):
        c = MKLClassifier(standardize=True)
        X = pd.DataFrame(xs)
        c.learn_many(X.iloc[:200], pd.Series(ys[:200]))
        frames[kind] = (c.predict_proba_many(X.iloc[200:]).to_numpy(), c.rounds().digest())
    np.testing.assert_array_equal(frames["int"][0], frames["str"][0])
    assert frames["int"][1] == frames["str"][1]


def test_int_names_regressor():
    data = list(synth.Friedman(seed=3).take(300))
    out = {}
    for kind in ("int", "str"):
        xs = [dict(x) if kind == "int" else {str(k): v for k, v in x.items()} for x, _ in data]
        r, m = MKLRegressor(), MKLRegressor()
        preds = []
        for x, (_, y) in zip(xs, data, strict=True):
            preds.append(r.predict_one(x))
            r.learn_one(x, y)
            assert m.learn_predict_one(x, y) == preds[-1]
        X = pd.DataFrame(xs)
        f = MKLRegressor()
        f.learn_many(X.iloc[:200], pd.Series([y for _, y in data[:200]]))
        out[kind] = (preds, r.rounds().digest(), f.predict_many(X.iloc[200:]).tolist())
    assert out["int"] == out["str"]
