"""Fuzzing the daemon: hostile records interleaved with good ones, nothing crashes or leaks.

Against the real broker (a real daemon process): every attack of ``simulators.hostile`` is in
the dead-letter topic with its reason, every good record is learned exactly once (the model
equals that of a run over the good records alone) and predicted once. In process (fast, many
more records): random mutations of records and of hostile records never raise out of the loop,
and every rejection has a reason from the bounded set. ``benchmarks/hostile_input.py`` runs the
same attacks with 100,000 records and measures memory and latency.
"""

from __future__ import annotations

import collections
import hashlib
import json
import random
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from simulators.hostile import ATTACKS, HOSTILE_SETTINGS, hostile_stream, mutate
from streammkl.daemon.config import load_settings
from streammkl.daemon.loop.prequential import REASONS
from streammkl.daemon.loop.runner import Runner
from tests import daemon_kafka as dk
from tests.daemon_fakes import FakeCluster

N_GOOD, N_BAD = 1_500, 1_500


@pytest.mark.kafka
@pytest.mark.xdist_group("kafka")
def test_hostile_records_through_the_real_daemon(kafka_bootstrap: str, tmp_path: Path) -> None:
    stream = list(hostile_stream(N_GOOD, N_BAD, seed=11))
    good = [v for v, _, expected in stream if expected is None]
    assert len(good) == N_GOOD
    assert {kind for _, kind, _ in stream} == {"good", *ATTACKS}  # every attack is in it
    settings = {**HOSTILE_SETTINGS, "kafka.max_poll_records": 200}

    def run(values: list[bytes], name: str) -> tuple[str, dict]:
        topic = dk.unique(name)
        dk.create_topic(kafka_bootstrap, topic, 1)
        dk.produce(kafka_bootstrap, topic, values)
        ck = tmp_path / name
        argv = dk.daemon_argv(kafka_bootstrap, topic, dk.unique("g"), ck, idle=2.0,
                              settings=settings)  # fmt: skip
        code = dk.run_daemon(argv, tmp_path / f"{name}.log", timeout=300)
        assert code == 0, (tmp_path / f"{name}.log").read_text()[-3000:]
        return topic, dk.inspect(ck)

    _, reference = run(good, "fuzz-ref")
    topic, result = run([v for v, _, _ in stream], "fuzz")
    assert result["examples_learned"] == reference["examples_learned"] == N_GOOD
    assert result["model_digest"] == reference["model_digest"]  # no attack reached the model
    expected = collections.Counter(e for _, _, e in stream if e is not None)
    assert result["rejected_by_reason"] == dict(expected)

    dead = dk.read_topic(kafka_bootstrap, f"{topic}.dead-letters", N_BAD, timeout=60)
    by_offset = {int(dict(d.headers)["source_offset"]): d for d in dead}
    assert len(by_offset) == N_BAD
    for offset, (value, kind, reason) in enumerate(stream):
        if reason is None:
            assert offset not in by_offset
            continue
        letter = by_offset[offset]
        headers = dict(letter.headers)
        assert headers["reason"].decode() == reason, (kind, headers["error"][:200])
        if "value_truncated_from" in headers:  # a dead letter stays deliverable: cut, signed
            assert int(headers["value_truncated_from"]) == len(value) > len(letter.value)
            assert headers["value_sha256"].decode() == hashlib.sha256(value).hexdigest()
            assert letter.value == value[: len(letter.value)]
        else:
            assert letter.value == value  # the record itself, unchanged
        assert len(headers["error"]) <= 1000
    preds = dk.read_topic(kafka_bootstrap, f"{topic}.predictions", N_GOOD, timeout=60)
    offsets = collections.Counter(json.loads(p.value)["offset"] for p in preds)
    assert set(offsets) == {o for o, (_, _, r) in enumerate(stream) if r is None}
    assert set(offsets.values()) == {1}  # no crash: each good record predicted exactly once


def test_mutated_records_never_break_the_loop(tmp_path: Path) -> None:
    rng = random.Random(3)
    seeds = [v for v, _, _ in hostile_stream(200, 300, seed=5)]
    values = [v for v, _, _ in hostile_stream(50, 0, seed=6)]  # the model knows its classes
    values += [mutate(rng.choice(seeds), rng) for _ in range(6_000)]
    cluster = FakeCluster()
    cluster.create("in", 2)
    for i, v in enumerate(values):
        cluster.append("in", v, i % 2, None, i)
    settings = load_settings(
        env={},
        overrides={
            "kafka.topics": "in", "kafka.create_topics": False, "kafka.poll_timeout_ms": 0,
            "checkpoint.dir": str(tmp_path / "ck"), "run.exit_when_idle": 0.05,
            "metrics.enabled": False, "kafka.max_poll_records": 300, **HOSTILE_SETTINGS,
        },
    )  # fmt: skip
    r = Runner(settings, registry=CollectorRegistry(), consumer_client=cluster.consumer(),
               producer_client=cluster.producer())  # fmt: skip
    assert r.run() == 0
    c = r.counters
    assert c["records_consumed"] == len(values)
    assert c["records_predicted"] + c["records_rejected"] == len(values)
    assert set(c["rejected_by_reason"]) <= set(REASONS)
    assert "learner_error" not in c["rejected_by_reason"]  # every refusal happens before it
    assert len(c["rejected_by_reason"]) >= 12  # the mutations reach many reasons
    assert r.learner.rounds().n_features <= 16 and len(r.learner.classes_) <= 2
    assert len(cluster.values("streammkl.dead-letters")) == c["dead_letters"]
