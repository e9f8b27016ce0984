"""NaN labels: refused by the learners (a ValueError that changes nothing) and by the daemon, by
one rule (:func:`streammkl.labels.self_unequal`)."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from streammkl import wire
from streammkl.labels import check_label, self_unequal
from streammkl.river import MKLClassifier, MKLRegressor
from streammkl.structured import SequenceLabeler
from tests.daemon_fakes import bananas_like
from tests.daemon_kafka import (
    create_topic,
    daemon_argv,
    inspect,
    produce,
    read_topic,
    run_daemon,
    unique,
)

NANS = [
    float("nan"),
    -float("nan"),
    np.nan,
    np.float64("nan"),
    np.float32("nan"),
    Decimal("NaN"),
    complex(math.nan, 0.0),
    ("spam", float("nan")),  # a tuple compares its items by identity first: NaN "equals" itself
    (1, ("nested", np.nan)),
    frozenset({math.nan}),
]
NAN_IDS = ["float", "negative", "np.nan", "float64", "float32", "decimal", "complex", "tuple",
           "nested-tuple", "frozenset"]  # fmt: skip
LABELS = ["nan", "", 0, 1, -1, 2.5, float("inf"), True, ("a", 1), Decimal("1.5"), None, b"x"]


@pytest.mark.parametrize("label", NANS, ids=NAN_IDS)
def test_the_rule_refuses_every_nan(label: Any) -> None:
    assert self_unequal(label)
    with pytest.raises(ValueError, match="not equal to itself"):
        check_label(label, "y")


@pytest.mark.parametrize("label", LABELS)
def test_the_rule_accepts_every_label_equal_to_itself(label: Any) -> None:
    assert not self_unequal(label)
    check_label(label)


def test_a_label_without_a_usable_comparison_is_left_to_the_hashing() -> None:
    assert not self_unequal(np.array([1.0, 2.0]))  # its truth value raises; unhashable anyway


def _two_classes() -> MKLClassifier:
    clf = MKLClassifier(seed=1)
    for rec in bananas_like(40, seed=2):
        clf.learn_one(rec["x"], rec["y"])
    return clf


@pytest.mark.parametrize("label", NANS, ids=NAN_IDS)
def test_the_classifier_refuses_a_nan_label_and_changes_nothing(label: Any) -> None:
    clf = _two_classes()
    digest, classes = clf.rounds().digest(), list(clf.classes_)
    x = {"x1": 0.3, "x2": -0.2}
    with pytest.raises(ValueError, match="not equal to itself"):
        clf.learn_one(x, label)
    with pytest.raises(ValueError, match="not equal to itself"):
        clf.learn_predict_one(x, label)
    with pytest.raises(ValueError, match="not equal to itself"):
        clf.rounds().declare_classes([label])
    refused: list[tuple[int, Exception]] = []
    out = clf.rounds().learn_predict_many(
        [x, x], [label, label], on_error=lambda i, e: refused.append((i, e))
    )
    assert [i for i, _ in refused] == [0, 1] and all(p is not None for p in out)
    assert clf.rounds().digest() == digest and clf.classes_ == classes


def test_twenty_five_nan_records_add_no_class() -> None:
    # the probe: 25 records labelled NaN gave MKLClassifier 25 extra classes
    clf = _two_classes()
    for i, rec in enumerate(bananas_like(25, seed=3)):
        with pytest.raises(ValueError):
            clf.learn_one(rec["x"], float("nan") if i % 2 else json.loads("NaN"))
    assert len(clf.classes_) == 2


def test_the_classifier_refuses_a_nan_label_in_a_frame() -> None:
    pd = pytest.importorskip("pandas")
    clf = _two_classes()
    frame = pd.DataFrame({"x1": [0.1, 0.2, 0.3], "x2": [0.0, 0.5, 1.0]})
    with pytest.raises(ValueError, match="not equal to itself"):
        clf.learn_many(frame, pd.Series([1, float("nan"), 0]))
    assert len(clf.classes_) == 2  # the rows before the NaN learned, as a loop of learn_one


@pytest.mark.parametrize(
    "target", [float("nan"), np.nan, np.float32("nan"), Decimal("NaN"), float("inf")],
    ids=["float", "np.nan", "float32", "decimal", "inf"],
)  # fmt: skip
def test_the_regressor_refuses_a_nan_target_and_changes_nothing(target: Any) -> None:
    reg = MKLRegressor(seed=1)
    for i, rec in enumerate(bananas_like(30, seed=4)):
        reg.learn_one(rec["x"], float(i % 7))
    digest = reg.rounds().digest()
    x = {"x1": 0.3, "x2": -0.2}
    with pytest.raises(ValueError, match="finite"):
        reg.learn_one(x, target)
    with pytest.raises(ValueError, match="finite"):
        reg.learn_predict_one(x, target)
    assert reg.rounds().digest() == digest


@pytest.mark.parametrize("label", NANS, ids=NAN_IDS)
def test_the_sequence_labeler_refuses_a_nan_label_and_changes_nothing(label: Any) -> None:
    model = SequenceLabeler()
    model.learn_one(np.ones((3, 2)), ["a", "b", "a"])
    digest, labels = model.digest(), list(model.labels)
    with pytest.raises(ValueError, match=r"ys\[1\].*not equal to itself"):
        model.learn_one(np.ones((3, 2)), ["a", label, "b"])
    assert model.digest() == digest and model.labels == labels


def test_the_decoder_refuses_nan_labels_by_the_same_rule() -> None:
    for raw, kind in [
        (b'{"x": [1.0], "y": NaN}', "vector"),
        (b'{"x": {"a": 1.0}, "y": NaN}', "vector"),
        (b'{"x": [[1.0], [2.0]], "y": ["a", NaN]}', "sequence"),
    ]:
        out = wire.decode(raw, kind=kind)
        assert isinstance(out, wire.DecodeError) and out.reason == "non_finite", raw
        assert "not equal to itself" in out.message
    out = wire.decode(b'{"x": [1.0], "y": NaN}', numeric_label=True)
    assert isinstance(out, wire.DecodeError) and out.reason == "non_finite"
    assert isinstance(wire.decode(b'{"x": [1.0], "y": Infinity}'), wire.DecodeError)


@pytest.mark.kafka
@pytest.mark.xdist_group("kafka")
def test_the_daemon_dead_letters_nan_labels(kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = unique("nan-labels")
    create_topic(kafka_bootstrap, topic, 1)
    good = [json.dumps(r).encode() for r in bananas_like(75, seed=6)]
    values = []
    for i, value in enumerate(good):
        values.append(value)
        if i % 3 == 0:
            values.append(b'{"x": {"x1": 0.5, "x2": 0.5}, "y": NaN, "id": "n%d"}' % i)
    produce(kafka_bootstrap, topic, values)
    argv = daemon_argv(kafka_bootstrap, topic, unique("g"), tmp_path / "ck", idle=2.0)
    assert run_daemon(argv, tmp_path / "daemon.log") == 0
    letters = read_topic(kafka_bootstrap, f"{topic}.dead-letters", 25)
    assert len(letters) == 25
    for rec in letters:
        headers = dict(rec.headers)
        assert headers["reason"] == b"non_finite"
        assert b"not equal to itself" in headers["error"]
    info = inspect(tmp_path / "ck")
    assert info["examples_learned"] == 75 and info["rejected_by_reason"] == {"non_finite": 25}
