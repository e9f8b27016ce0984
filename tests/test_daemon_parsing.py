"""Sentence records (``learner.task = "parsing"``): learned by the DependencyParser, predicted as
heads; bad trees dead-lettered with their reason; end to end through the broker with the CoNLL-U
replay of the Turkish Web Treebank."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from simulators import cli, get
from streammkl import wire
from streammkl.daemon.config import load_settings
from streammkl.daemon.learning.building import LearnerConfigError, build_learner
from streammkl.daemon.loop.runner import Runner
from streammkl.statefile import digest_of
from streammkl.structured import DependencyParser
from streammkl.structured.conll import turkish_files
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

PARSING = {
    "learner.task": "parsing",
    "learner.regularizer": {"type": "SquaredGroupLasso", "lam": 1e-4},
    "learner.params": {"average": True},
}
WORDS = [{"form": "Ev", "upos": "NOUN"}, {"form": "geldi", "upos": "VERB"}]
BAD = [  # (record, reason, words of the message)
    ({"x": WORDS, "y": [2, 1]}, "learner_error", "cycle through words"),
    ({"x": WORDS, "y": [0, 0]}, "learner_error", "2 words attach to the root"),
    ({"x": WORDS, "y": [2, 0, 1]}, "bad_sequence", "3 heads for 2 words"),
    ({"x": WORDS, "y": [2, 7]}, "bad_label", "y[1] = 7 is not a head index"),
    ({"x": [[0.5, 0.25]], "y": [0]}, "bad_token", "x[0] is an array"),
]


def sentences(n: int, split: str = "train") -> list[wire.Record]:
    return get("conllu", path=str(turkish_files()["web"]), split=split, n_samples=n).take(n)


def runner(tmp: Path, cluster: FakeCluster, seed: int = 0) -> Runner:
    return Runner(
        make_settings(tmp, **PARSING),
        registry=CollectorRegistry(),
        consumer_client=cluster.consumer(seed),
        producer_client=cluster.producer(),
    )


def test_sentences_are_learned_and_predicted_as_heads(tmp_path: Path) -> None:
    records = sentences(120)
    cluster = FakeCluster()
    cluster.create("in", 1)
    for i, rec in enumerate(records):
        cluster.append("in", wire.encode(rec), 0, None, i)
    for rec, _, _ in BAD:
        cluster.append("in", json.dumps(rec).encode(), 0)
    r = runner(tmp_path, cluster)
    r.run()
    assert isinstance(r.learner, DependencyParser)
    assert r.counters["examples_learned"] == len(records)
    reasons: dict[str, int] = {}
    for _, reason, _ in BAD:
        reasons[reason] = reasons.get(reason, 0) + 1
    assert r.counters["rejected_by_reason"] == reasons
    preds = predictions(cluster)
    assert len(preds) == len(records) + 2  # the two refused trees still get their prediction
    gold = [rec.y for rec in records] + [BAD[0][0]["y"], BAD[1][0]["y"]]
    hits = words = 0
    for heads, p in zip(gold, preds, strict=True):
        assert p["proba"] is None and len(p["prediction"]) == len(heads)
        hits += sum(a == b for a, b in zip(p["prediction"], heads, strict=True))
        words += len(heads)
    assert [p["model_version"] for p in preds] == [*range(len(records)), *[len(records)] * 2]
    # the counters are per word: the prequential UAS (the refused trees' words included)
    assert r.counters["labelled_predictions"] == words
    assert r.counters["correct_predictions"] == hits
    assert hits / words > 0.5  # prequential, from an empty model, over 120 sentences
    assert set(r.learner.kernel_weights) == set(r.learner.names)


def test_parser_survives_crashes_exactly(tmp_path: Path) -> None:
    records = sentences(40)
    ref, final = crash_and_resume(
        lambda name, cluster, seed: runner(tmp_path / name, cluster, seed),
        [wire.encode(rec) for rec in records],
        steps=(3, 5),
    )
    assert final.counters["examples_learned"] == len(records)
    assert digest_of(final.learner) == digest_of(ref.learner)


def test_parser_settings_are_checked() -> None:
    spec = load_settings(
        env={}, overrides={**PARSING, "learner.params": {"templates": ["h.upos+m.upos+dist"]}}
    ).learner
    assert build_learner(spec).names == ["h.upos+m.upos+dist"]
    for over, field in [
        ({"learner.kernels": [{"type": "Linear"}]}, "learner.kernels"),
        ({"learner.loss": "hinge"}, "learner.loss"),
        ({"learner.regularizer": {"type": "L1", "lam": 0.1}}, "learner"),
        ({"learner.params": {"templates": ["h.nope"]}}, "learner.params"),
    ]:
        with pytest.raises(LearnerConfigError, match=field.replace(".", r"\.")):
            build_learner(load_settings(env={}, overrides={**PARSING, **over}).learner)


@pytest.mark.kafka
@pytest.mark.xdist_group("kafka")
def test_treebank_replay_end_to_end_through_the_broker(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    n = 150
    topic = unique("parse")
    create_topic(kafka_bootstrap, topic, 1)
    web = str(turkish_files()["web"])
    argv = ["conllu", "--path", web, "--split", "train", "--count", str(n),
            "--bootstrap-servers", kafka_bootstrap, "--topic", topic, "--no-progress"]  # fmt: skip
    assert cli.main(argv) == 0
    produce(kafka_bootstrap, topic, [json.dumps(rec).encode() for rec, _, _ in BAD])
    settings: dict[str, Any] = {**PARSING, "checkpoint.every_records": 50}
    argv = daemon_argv(
        kafka_bootstrap, topic, unique("g"), tmp_path / "ck", idle=2.0, settings=settings
    )
    assert run_daemon(argv, tmp_path / "daemon.log") == 0, (tmp_path / "daemon.log").read_text()
    info = inspect(tmp_path / "ck")
    assert info["model_class"] == "streammkl.structured.parser:DependencyParser"
    assert info["examples_learned"] == n and info["records_rejected"] == len(BAD)
    assert info["prequential_accuracy"] > 0.5  # per word: the prequential UAS
    assert len(info["kernel_weights"]) == 63
    out = read_topic(kafka_bootstrap, f"{topic}.predictions", n + 2)
    assert len(out) == n + 2
    replayed = sentences(n)
    by_offset = {json.loads(m.value)["offset"]: json.loads(m.value) for m in out}
    for i, rec in enumerate(replayed):
        assert len(by_offset[i]["prediction"]) == len(rec.y)
    dead = read_topic(kafka_bootstrap, f"{topic}.dead-letters", len(BAD))
    got = {(d.value, dict(d.headers)["reason"].decode()) for d in dead}
    assert got == {(json.dumps(rec).encode(), reason) for rec, reason, _ in BAD}
    for d in dead:
        message = dict(d.headers)["error"].decode()
        rec = json.loads(d.value)
        assert next(words for r, _, words in BAD if r == rec) in message
