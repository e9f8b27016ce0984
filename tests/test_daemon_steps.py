"""The daemon's fused learning rounds equal predict-then-learn; the hot-path encoders equal json."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest

from streammkl import wire
from streammkl.core import kernels, losses
from streammkl.daemon.prequential import prediction_bytes
from streammkl.daemon.steps import LearnerStep, MKLStep, make_step
from streammkl.river import MKLClassifier, MKLRegressor


def stream(n: int, seed: int, task: str) -> list[tuple[dict[str, float], Any]]:
    """Records with a feature appearing late, a class appearing late and unlabelled ones."""
    rng = random.Random(seed)
    out: list[tuple[dict[str, float], Any]] = []
    for i in range(n):
        x = {"a": rng.gauss(0, 1), "b": rng.gauss(0, 1)}
        if i >= n // 3:
            x["late"] = rng.gauss(0, 1)
        if task == "regression":
            y: Any = 2.0 * x["a"] - x["b"] + rng.gauss(0, 0.1)
        elif task == "multiclass":
            y = ("cat", "dog", "emu")[int(x["a"] > 0) + int(i >= n // 2 and x["b"] > 0)]
        else:
            y = x["a"] * x["b"] > 0
        out.append((x, None if i % 7 == 3 else y))
    return out


def run(step: LearnerStep, records: list[tuple[dict[str, float], Any]]) -> list[Any]:
    """The daemon's use of a step: fused when possible, else predict then learn."""
    out = []
    for x, y in records:
        done = step.predict_learn(x, y) if y is not None else None
        if done is None:
            done = step.predict(x)
            if y is not None:
                step.learn(x, y)
        out.append(done)
    return out


LEARNERS = {
    "default bank, boolean labels": (lambda: MKLClassifier(seed=1), "binary"),
    "three classes, softmax": (lambda: MKLClassifier(loss=losses.Softmax(), seed=2), "multiclass"),
    "binary hinge": (lambda: MKLClassifier(loss=losses.Hinge()), "binary"),
    "binary logistic": (lambda: MKLClassifier(loss=losses.Logistic()), "binary"),
    "kernelized with a budget": (
        lambda: MKLClassifier(kernels=(kernels.Linear(), kernels.RBF(0.5)), budget=20),
        "multiclass",
    ),
    "regressor": (lambda: MKLRegressor(), "regression"),
}


@pytest.mark.parametrize("name", LEARNERS)
def test_fused_rounds_learn_and_predict_exactly_like_predict_then_learn(name: str) -> None:
    make, task = LEARNERS[name]
    records = stream(300, seed=7, task=task)
    fused, generic = make_step(make()), LearnerStep(make())
    assert isinstance(fused, MKLStep)
    got, want = run(fused, records), run(generic, records)
    assert fused.learner.digest() == generic.learner.digest()
    for (p1, q1), (p2, q2) in zip(got, want, strict=True):
        if q2 is None:  # regression: the value
            assert p1 == pytest.approx(p2, rel=1e-12, abs=1e-12)
            continue
        assert p1 == p2
        assert q1.keys() == q2.keys()
        assert all(math.isclose(q1[k], q2[k], rel_tol=1e-12, abs_tol=1e-15) for k in q2)


def test_fused_rounds_are_the_common_case_and_report_the_round() -> None:
    step = make_step(MKLClassifier(loss=losses.Hinge()))
    step.track = True
    records = [(x, y) for x, y in stream(200, seed=3, task="binary") if y is not None]
    fused = 0
    for x, y in records:
        core = step.learner.core
        reg = core.regularization_value() if core is not None else 0.0
        before = core.decision(step.learner._features.vector(x)) if core is not None else None
        done = step.predict_learn(x, y)
        if done is None:
            step.predict(x)
            step.learn(x, y)
            continue
        fused += 1
        r = step.last_round
        assert r is not None and r.y == (1.0 if y else -1.0) and r.reg == reg
        assert r.scores[0] == pytest.approx(before, abs=1e-12)  # prequential: before the update
        assert r.loss == pytest.approx(max(0.0, 1.0 - r.y * before), abs=1e-12)
    assert fused >= len(records) - 3  # only the first records (empty model, late feature) fall back


def test_learner_refusals_leave_the_model_untouched() -> None:
    step = make_step(MKLClassifier(loss=losses.Hinge()))
    run(step, [(x, y) for x, y in stream(20, seed=1, task="binary") if y is not None])
    digest = step.learner.digest()
    with pytest.raises(ValueError):  # a third class for a binary loss
        step.predict_learn({"a": 1.0, "b": 0.0}, "third") or step.learn({"a": 1.0}, "third")
    assert step.learner.digest() == digest


@pytest.mark.parametrize(
    ("rid", "prediction", "proba"),
    [
        ("e1", True, {False: 0.25, True: 0.75}),
        (None, 3, {0: 0.1, 3: 0.9000000000000001}),
        ('quo"te\u00e9', "cat", {"cat": 1.0, "dog": 0.0}),
        ("r", 0.1 + 0.2, None),
        ("s", ["B", "I", "O"], None),
        ("n", None, {}),
    ],
)
def test_prediction_bytes_are_the_json_of_the_message(
    rid: Any, prediction: Any, proba: Any
) -> None:
    got = prediction_bytes(rid, prediction, proba, 12, "in.topic", 3, 99)
    assert b" " not in got  # compact (no value of these cases holds a space)
    keys = {k: k if isinstance(k, str) else json.dumps(k) for k in proba or ()}
    want = {
        "id": rid,
        "prediction": prediction,
        "proba": None if proba is None else {keys[k]: v for k, v in proba.items()},
        "model_version": 12,
        "topic": "in.topic",
        "partition": 3,
        "offset": 99,
    }
    assert json.loads(got) == want
    assert list(json.loads(got)) == list(want)  # the keys in this order


def test_prediction_bytes_of_labels_orjson_refuses() -> None:
    huge = 2**70  # beyond 64 bits: the standard library writes it
    got = prediction_bytes("h", huge, {huge: 0.75, 1: math.nan}, 1, "t", 0, 5)
    assert json.loads(got) == {
        "id": "h", "prediction": huge, "proba": {str(huge): 0.75, "1": None},
        "model_version": 1, "topic": "t", "partition": 0, "offset": 5,
    }  # fmt: skip


def test_prediction_bytes_turn_non_finite_numbers_into_null() -> None:
    got = json.loads(prediction_bytes("i", math.nan, {True: math.inf, False: 0.5}, 0, "t", 0, 0))
    assert got["prediction"] is None and got["proba"] == {"true": None, "false": 0.5}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (b'{"x": [1, 2.5, -3]}', [1.0, 2.5, -3.0]),
        (b'{"x": {"a": 1, "b": 2.5}}', {"a": 1.0, "b": 2.5}),
        (b'{"x": [1e308, 1e308]}', [1e308, 1e308]),  # the sum overflows, the values do not
        (b'{"x": [1, true]}', "non_numeric"),
        (b'{"x": {"a": 1, "b": "2"}}', "non_numeric"),
        (b'{"x": [1, 1' + b"0" * 400 + b"]}", "non_finite"),
        (b'{"x": {"a": -Infinity}}', "non_finite"),
        (b'{"x": [[1, 2], [3, NaN]], "y": [0, 1]}', "non_finite"),
    ],
)
def test_decode_fast_path_keeps_values_and_reasons(text: bytes, expected: Any) -> None:
    got = wire.decode(text)
    if isinstance(expected, str):
        assert isinstance(got, wire.DecodeError) and got.reason == expected, got
    else:
        assert isinstance(got, wire.Record) and got.x == expected
        values = got.x.values() if isinstance(got.x, dict) else got.x
        assert all(type(v) is float for v in values)
