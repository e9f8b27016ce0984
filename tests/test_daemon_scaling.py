"""The daemon standardises its learner's inputs online (``learner.standardize``, on by default):
unscaled inputs such as river's ImageSegments reach the accuracy of the library behind a
``StandardScaler``; the statistics are part of the checkpointed model (exactly-once)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from river import datasets, preprocessing

from streammkl.daemon.checkpoints.store import CheckpointStore
from streammkl.daemon.loop.runner import Runner
from streammkl.river import MKLClassifier
from streammkl.statefile import digest_of
from tests.daemon_fakes import FakeCluster, crash_and_resume
from tests.test_daemon_runner import make_settings

N = 1200
MONITOR_OFF = {"monitor.enabled": False, "kafka.max_poll_records": 100}


@pytest.fixture(scope="module")
def segments() -> list[tuple[dict[str, float], str]]:
    return [(dict(x), y) for x, y in list(datasets.ImageSegments())[:N]]


def fill(cluster: FakeCluster, rows: list[tuple[dict[str, float], str]]) -> None:
    cluster.create("in", 1)
    for i, (x, y) in enumerate(rows):
        cluster.append("in", json.dumps({"x": x, "y": y}).encode(), 0, None, i)


def accuracy(runner: Runner) -> float:
    c = runner.counters
    return c["correct_predictions"] / c["labelled_predictions"]


def run(tmp: Path, rows: list[Any], **over: Any) -> Runner:
    cluster = FakeCluster()
    fill(cluster, rows)
    r = Runner(
        make_settings(tmp, **{**MONITOR_OFF, **over}),
        registry=CollectorRegistry(),
        consumer_client=cluster.consumer(0),
        producer_client=cluster.producer(),
    )
    r.run()
    assert r.counters["records_consumed"] == len(rows)
    return r


def test_unscaled_inputs_reach_the_library_accuracy_behind_a_scaler(
    tmp_path: Path, segments: list[Any]
) -> None:
    scaler, library = preprocessing.StandardScaler(), MKLClassifier()
    hits = 0
    for x, y in segments:  # the README's pipeline, prequential
        scaler.learn_one(x)
        proba = library.learn_predict_one(scaler.transform_one(x), y)
        hits += bool(proba) and max(proba, key=proba.__getitem__) == y
    expected = hits / len(segments)
    standardized = accuracy(run(tmp_path / "on", segments))
    raw = accuracy(run(tmp_path / "off", segments, **{"learner.standardize": False}))
    assert expected > 0.8
    assert standardized >= expected - 0.03, (standardized, expected)
    assert raw < standardized - 0.1, (raw, standardized)  # what the daemon did before


def test_the_input_statistics_are_checkpointed_and_survive_crashes_exactly(
    tmp_path: Path, segments: list[Any]
) -> None:
    values = [json.dumps({"x": x, "y": y}).encode() for x, y in segments[:600]]

    def make_runner(name: str, cluster: FakeCluster, seed: int) -> Runner:
        return Runner(
            make_settings(tmp_path / name, **{**MONITOR_OFF, "checkpoint.every_records": 70,
                                              "kafka.max_poll_records": 40}),
            registry=CollectorRegistry(),
            consumer_client=cluster.consumer(seed),
            producer_client=cluster.producer(),
        )  # fmt: skip

    reference, final = crash_and_resume(make_runner, values)
    assert digest_of(final.learner) == digest_of(reference.learner)
    assert final.counters["examples_learned"] == 600
    ckpt = CheckpointStore(tmp_path / "run" / "ck").load_latest()
    assert ckpt is not None and ckpt.arrays["inputs.count"].max() == 600  # the statistics
