"""Sequence records (``learner.task = "sequence"``): learned by the SequenceLabeler, predicted as
label sequences; end to end through the broker with the ``digit-strings`` scenario."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from streammkl import wire
from streammkl.daemon.config import load_settings
from streammkl.daemon.learning.building import LearnerConfigError, build_learner
from streammkl.daemon.loop.runner import Runner
from streammkl.statefile import digest_of
from streammkl.structured import SequenceLabeler
from tests.daemon_fakes import FakeCluster, crash_and_resume
from tests.daemon_kafka import (
    create_topic,
    daemon_argv,
    inspect,
    produce,
    read_topic,
    run_daemon,
    unique,
)
from tests.test_daemon_runner import make_settings, predictions

SEQUENCE = {
    "learner.task": "sequence",
    "learner.kernels": [{"type": "Linear"}],
    "learner.schedule": {"type": "InvSqrt", "eta0": 0.1},
    "records.dim": 64,
}


def digit_strings(n: int, seed: int = 0) -> list[wire.Record]:
    from simulators import get

    return list(get("digit-strings", seed=seed, n_samples=n))


def runner(tmp: Path, cluster: FakeCluster, seed: int = 0) -> Runner:
    return Runner(
        make_settings(tmp, **SEQUENCE),
        registry=CollectorRegistry(),
        consumer_client=cluster.consumer(seed),
        producer_client=cluster.producer(),
    )


def test_sequences_are_learned_and_predicted_as_label_sequences(tmp_path: Path) -> None:
    records = digit_strings(80)
    cluster = FakeCluster()
    cluster.create("in", 1)
    for i, rec in enumerate(records):
        cluster.append("in", wire.encode(rec), 0, None, i)
    token = [0.5] * 64
    bad = [
        json.dumps({"x": token, "y": 3}).encode(),  # a vector where sequences are expected
        json.dumps({"x": [token, token], "y": [1]}).encode(),  # labels do not match the tokens
        b'{"x": [[0.5, 0.25]], "y": [1]}',  # 2 features, dim is 64
    ]
    for value in bad:
        cluster.append("in", value, 0)
    r = runner(tmp_path, cluster)
    r.run()
    assert isinstance(r.learner, SequenceLabeler)
    assert r.counters["examples_learned"] == len(records)
    assert r.counters["rejected_by_reason"] == {"wrong_kind": 1, "bad_sequence": 1, "wrong_dim": 1}
    preds = predictions(cluster)
    assert len(preds) == len(records)
    hits = tokens = 0
    for rec, p in zip(records, preds, strict=True):
        assert p["proba"] is None and p["model_version"] == p["offset"]
        if p["offset"] == 0:
            assert p["prediction"] is None  # no label known yet
            continue
        assert len(p["prediction"]) == len(rec.y) and set(p["prediction"]) <= set(range(10))
        hits += sum(a == b for a, b in zip(p["prediction"], rec.y, strict=True))
        tokens += len(rec.y)
    # counters are per label (per character), as the Table 1 accuracy
    assert r.counters["labelled_predictions"] == sum(len(rec.y) for rec in records)
    assert r.counters["correct_predictions"] == hits
    assert hits / tokens > 0.3  # chance is 0.1; the labeler learns within 80 strings
    assert r.counters["online_loss"] == r.counters["labelled_predictions"] - hits  # Hamming


def test_sequence_learner_survives_crashes_exactly(tmp_path: Path) -> None:
    records = digit_strings(40, seed=2)
    ref, final = crash_and_resume(
        lambda name, cluster, seed: runner(tmp_path / name, cluster, seed),
        [wire.encode(rec) for rec in records],
    )
    assert final.counters["examples_learned"] == len(records)
    assert digest_of(final.learner) == digest_of(ref.learner)


def test_sequence_learner_settings_are_checked() -> None:
    spec = load_settings(
        env={},
        overrides={
            **SEQUENCE,
            "learner.loss": "crf",
            "learner.params": {"budget_policy": "oldest"},
        },
    ).learner
    assert build_learner(spec).loss == "crf"
    for over, field in [
        ({"learner.loss": "Hinge2"}, "learner.loss"),
        ({"learner.params": {"nope": 1}}, "learner.params"),
        ({"learner.fit_intercept": False}, "learner.fit_intercept"),
    ]:
        with pytest.raises(LearnerConfigError, match=field.replace(".", r"\.")):
            build_learner(load_settings(env={}, overrides={**SEQUENCE, **over}).learner)


@pytest.mark.kafka
@pytest.mark.xdist_group("kafka")
def test_digit_strings_end_to_end_through_the_broker(kafka_bootstrap: str, tmp_path: Path) -> None:
    records = digit_strings(150, seed=1)
    topic = unique("seq")
    create_topic(kafka_bootstrap, topic, 1)
    produce(kafka_bootstrap, topic, [wire.encode(r) for r in records])
    settings: dict[str, Any] = {**SEQUENCE, "checkpoint.every_records": 50}
    argv = daemon_argv(
        kafka_bootstrap, topic, unique("g"), tmp_path / "ck", idle=2.0, settings=settings
    )
    assert run_daemon(argv, tmp_path / "daemon.log") == 0, (tmp_path / "daemon.log").read_text()
    info = inspect(tmp_path / "ck")
    assert info["model_class"] == "streammkl.structured.labeler:SequenceLabeler"
    assert info["examples_learned"] == len(records) and info["records_rejected"] == 0
    assert info["prequential_accuracy"] > 0.4  # per character; chance 0.1
    assert set(info["kernel_weights"]) == {"linear"}
    out = read_topic(kafka_bootstrap, f"{topic}.predictions", len(records))
    assert len(out) == len(records)
    by_offset = {json.loads(m.value)["offset"]: json.loads(m.value) for m in out}
    for i, rec in enumerate(records[1:], start=1):
        assert len(by_offset[i]["prediction"]) == len(rec.y)
