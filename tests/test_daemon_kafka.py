"""The daemon against the real broker (Tansu): end to end, poison + metrics, broker outage."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from streammkl.daemon.commands.broker import EmbeddedBroker, free_port
from streammkl.daemon.config import load_settings
from streammkl.daemon.loop.runner import Runner
from tests.daemon_fakes import bananas_like
from tests.daemon_kafka import (
    FAST_GROUP,
    create_topic,
    daemon_argv,
    http_get,
    inspect,
    learner_overrides,
    metrics,
    produce,
    read_topic,
    real_learner_available,
    run_daemon,
    start_daemon,
    unique,
    wait_until,
)
from tests.test_daemon_runner import POISON

pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group("kafka")]


def encoded(n: int, seed: int = 0) -> list[bytes]:
    return [json.dumps(r).encode() for r in bananas_like(n, seed)]


CLIENTS = pytest.mark.parametrize("client", ["librdkafka", "kafka-python"])


@CLIENTS
def test_end_to_end_cli_every_record_predicted_and_learned(
    kafka_bootstrap: str, tmp_path: Path, client: str
) -> None:
    n = 1500
    topic = unique("e2e")
    create_topic(kafka_bootstrap, topic, 2)
    produce(kafka_bootstrap, topic, encoded(n), partition_of=lambda i: i % 2)
    argv = daemon_argv(
        kafka_bootstrap, topic, unique("g"), tmp_path / "ck", idle=1.5,
        settings={"kafka.consumer_client": client},
    )  # fmt: skip
    assert run_daemon(argv, tmp_path / "daemon.log") == 0
    preds = read_topic(kafka_bootstrap, f"{topic}.predictions", n)
    assert len(preds) == n
    values = [json.loads(p.value) for p in preds]
    assert {(v["partition"], v["offset"]) for v in values} == {(i % 2, i // 2) for i in range(n)}
    assert {p.key for p in preds} == {f"k{i}".encode() for i in range(n)}  # keyed like the input
    assert {v["id"] for v in values} == {f"r{i}" for i in range(n)}
    assert sorted(v["model_version"] for v in values) == list(range(n))
    assert all(abs(sum(v["proba"].values()) - 1) < 1e-9 for v in values if v["proba"])
    info = inspect(tmp_path / "ck")
    assert info["examples_learned"] == n
    assert info["records_rejected"] == 0
    assert info["offsets"] == {topic: {"0": n // 2, "1": n // 2}}
    assert sum(info["kernel_weights"].values()) == pytest.approx(1.0)
    assert len(info["model_digest"]) == 64
    assert info["prequential_accuracy"] > 0.6


def test_poison_stream_dead_letters_and_scraped_metrics(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    topic = unique("poison")
    create_topic(kafka_bootstrap, topic, 1)
    good = encoded(200, seed=3)
    stream: list[bytes] = []
    for i, value in enumerate(good):
        stream.append(value)
        if i < len(POISON) and POISON[i][1] != "learner_error":
            stream.append(POISON[i][0])
    bad = [p for p in POISON if p[1] != "learner_error"]
    produce(kafka_bootstrap, topic, stream)
    settings = load_settings(
        env={},
        overrides={
            "kafka.bootstrap_servers": kafka_bootstrap,
            "kafka.topics": topic,
            "kafka.group_id": unique("g"),
            "kafka.predictions_topic": f"{topic}.predictions",
            "kafka.dead_letter_topic": f"{topic}.dead-letters",
            "records.dim": 2,
            "records.classes": [0, 1],
            "records.strict": True,
            "records.max_bytes": 200,
            "checkpoint.dir": str(tmp_path / "ck"),
            "metrics.port": 0,
            **FAST_GROUP,
            **learner_overrides(),
        },
    )
    runner = Runner(settings, registry=CollectorRegistry())
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    try:
        port = wait_until(lambda: runner.http and runner.http.port, 30, "metrics server")
        # the counters move with each batch, the model's gauges with the next published
        # snapshot: wait for both (a scrape between them saw model_version one batch behind)
        m = wait_until(
            lambda: (
                (s := metrics(port)).get(("streammkl_records_consumed_total", (("topic", topic),)))
                == len(stream)
                and s.get(("streammkl_model_version", ())) == len(good)
                and s.get(
                    ("streammkl_consumer_lag_records", (("partition", "0"), ("topic", topic)))
                )
                == 0
                and s
            ),
            60,
            "all records consumed and the model's snapshot published",
        )
        assert http_get(port, "/readyz")[0] == 200
        assert m[("streammkl_records_learned_total", ())] == len(good)
        assert m[("streammkl_model_version", ())] == len(good)
        assert m[("streammkl_dead_letters_total", ())] == len(bad)
        for _, reason in bad:
            assert m[("streammkl_records_rejected_total", (("reason", reason),))] == 1
        assert m[("streammkl_records_rejected_total", (("reason", "learner_error"),))] == 0
        weights = [v for (name, _), v in m.items() if name == "streammkl_kernel_weight"]
        assert weights and sum(weights) == pytest.approx(1.0)
        assert m[("streammkl_active_kernels", ())] == sum(1 for w in weights if w > 0)
        assert m[("streammkl_learn_duration_seconds_count", ())] == len(good)
        assert m[("streammkl_records_predicted_total", ())] == len(good)
        # streammkl learners predict within the learning round (compiled runs, or fused rounds):
        # only records predicted apart on the per-record path (the first ones, before the model
        # and its classes exist) are timed apart; the classifier's runs time whole batches as
        # learning (the default classifier: none)
        assert 0 <= m[("streammkl_predict_duration_seconds_count", ())] < len(good) / 10
        assert m[("streammkl_end_to_end_latency_seconds_count", ())] == len(good)
        assert m[("streammkl_decode_duration_seconds_count", ())] == len(stream)
        assert m[("streammkl_consumer_lag_records", (("partition", "0"), ("topic", topic)))] == 0
        assert m[("streammkl_up", ())] == 1 and m[("streammkl_ready", ())] == 1
        correct = m[("streammkl_prequential_correct_total", ())]
        assert correct == runner.counters["correct_predictions"] and correct > len(good) / 2
        build = [dict(k[1]) for k in m if k[0] == "streammkl_build_info"]
        assert len(build) == 1 and build[0]["version"] == "0.1.0" and build[0]["python"]
    finally:
        runner.stop()
        thread.join(30)
    dead = read_topic(kafka_bootstrap, f"{topic}.dead-letters", len(bad))
    assert {(d.value, dict(d.headers)["reason"].decode()) for d in dead} == set(bad)
    for d in dead:
        h = dict(d.headers)
        assert h["source_topic"].decode() == topic and h["source_partition"] == b"0"
        assert stream[int(h["source_offset"])] == d.value
    assert len(read_topic(kafka_bootstrap, f"{topic}.predictions", len(good))) == len(good)


@CLIENTS
def test_broker_outage_not_ready_then_resumes(tmp_path: Path, client: str) -> None:
    port = free_port()
    broker = EmbeddedBroker(port=port, log_path=tmp_path / "tansu.log").start()
    bootstrap = broker.bootstrap_servers
    topic = "outage"
    metrics_port = free_port()
    proc = None
    try:
        create_topic(bootstrap, topic, 1)
        produce(bootstrap, topic, encoded(300))
        argv = daemon_argv(
            bootstrap, topic, "g", tmp_path / "ck", port=metrics_port,
            settings={"kafka.consumer_client": client},
        )  # fmt: skip
        proc = start_daemon(argv, tmp_path / "daemon.log")

        def learned() -> float:
            return metrics(metrics_port).get(("streammkl_model_examples_learned_total", ()), -1)

        wait_until(lambda: learned() == 300, 60, "300 learned")
        assert http_get(metrics_port, "/readyz")[0] == 200
        broker.stop(kill=True)  # memory-only: the topic and offsets are gone
        wait_until(lambda: http_get(metrics_port, "/readyz")[0] == 503, 30, "not ready")
        time.sleep(3.0)  # the broker stays away for a while
        assert http_get(metrics_port, "/readyz")[0] == 503
        assert http_get(metrics_port, "/healthz")[0] == 200  # alive, just not ready
        assert proc.poll() is None
        broker = EmbeddedBroker(port=port, log_path=tmp_path / "tansu.log").start()
        create_topic(bootstrap, topic, 1)
        produce(bootstrap, topic, encoded(100, seed=9))
        wait_until(lambda: learned() == 400, 90, "the new records learned")
        wait_until(lambda: http_get(metrics_port, "/readyz")[0] == 200, 30, "ready again")
        m = metrics(metrics_port)
        assert m[("streammkl_offset_resets_total", (("partition", "0"), ("topic", topic)))] == 1
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        info = inspect(tmp_path / "ck")
        assert info["examples_learned"] == 400
        assert info["offset_resets"] == 1
        assert info["offsets"] == {topic: {"0": 100}}
        assert len(read_topic(bootstrap, f"{topic}.predictions", 100)) >= 100
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
        broker.stop(kill=True)


@pytest.mark.parametrize(
    "extra",
    [
        [],
        ["--scenario", "phishing", "--count", "1500", "--rate", "2000"],
        ["--scenario", "digit-strings", "--count", "200"],
    ],
    ids=["kernel-drift", "replay-longer-than-its-data", "sequences-pick-their-task"],
)
def test_demo_runs_bounded_and_summarises(tmp_path: Path, extra: list[str]) -> None:
    import subprocess
    import sys

    from streammkl.daemon.checkpoints.inspection import inspect_checkpoint
    from tests.daemon_kafka import subprocess_env

    argv = [sys.executable, "-m", "streammkl.daemon", "demo", "--duration", "6", "--rate"]
    argv += ["500", "--metrics-port", "0", "--workdir", str(tmp_path), "--no-live", *extra]
    out = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "streammkl demo — summary" in out.stdout
    assert "metrics at http://127.0.0.1:" in out.stdout  # printed without a terminal too
    assert "Error" not in out.stdout, out.stdout[-3000:]  # e.g. the simulator's
    info = inspect_checkpoint(tmp_path / "checkpoints")
    assert info["examples_learned"] > 0
    assert info["examples_learned"] == info["records_consumed"]  # nothing rejected
    assert sum(info["kernel_weights"].values()) == pytest.approx(1.0)
    assert f"{info['examples_learned']} in" in out.stdout
    if "phishing" in extra:  # 1,500 records from a data set of 1,250 rows: started over
        assert info["records_consumed"] == 1500
    if "digit-strings" in extra:  # learned as sequences (was: all dead-lettered, wrong_kind)
        assert 'learner.task = "sequence"' in out.stdout
        assert info["model_class"].endswith(":SequenceLabeler")
        assert info["records_rejected"] == 0


@pytest.mark.parametrize(
    ("monitor", "stride", "client"),
    [
        (False, 50, "librdkafka"),
        (True, 50, "librdkafka"),
        (True, 50, "kafka-python"),
        (True, 1, "kafka-python"),
    ],
    ids=["runs", "monitored-runs", "monitored-runs-kafka-python", "per-record-kafka-python"],
)
def test_backlog_over_paused_partitions_is_consumed_to_the_end(
    kafka_bootstrap: str, tmp_path: Path, monitor: bool, stride: int, client: str
) -> None:
    """A partition that races ahead in the merge order is paused (its buffer is full) and
    resumed later; every record must still arrive. Regression: kafka-python 3.0 never fetched
    such a partition again (``source.unpark``), and the daemon stalled on a 4 x 10k backlog;
    librdkafka drops what it prefetched for a paused partition and fetches it again."""
    n = 4_000
    topic = unique("backlog")
    create_topic(kafka_bootstrap, topic, 4)
    # partition 3 holds the latest timestamps: it waits in the merge while the others drain
    produce(
        kafka_bootstrap, topic, encoded(n, seed=3),
        partition_of=lambda i: i % 4,
        timestamp_of=lambda i: 1_700_000_000_000 + (10**6 if i % 4 == 3 else 0) + i,
    )  # fmt: skip
    overrides = {
        "kafka.bootstrap_servers": kafka_bootstrap,
        "kafka.topics": topic,
        "kafka.group_id": unique("backlog"),
        "kafka.max_poll_records": 250,
        "kafka.max_buffered_per_partition": 60,
        "kafka.predictions_topic": f"{topic}.predictions",
        "kafka.dead_letter_topic": f"{topic}.dead-letters",
        "checkpoint.dir": str(tmp_path / "ck"),
        "metrics.enabled": False,
        "monitor.enabled": monitor,
        "monitor.stride": stride,
        "kafka.consumer_client": client,
        **FAST_GROUP,
        **learner_overrides(),
    }
    runner = Runner(load_settings(env={}, overrides=overrides), registry=CollectorRegistry())
    assert runner.driver.batched is (stride > 1 and real_learner_available())
    runner.start()
    paused_seen = 0
    deadline = time.monotonic() + 120
    try:
        while runner.counters["records_consumed"] < n and time.monotonic() < deadline:
            runner.tick()
            paused_seen = max(paused_seen, len(runner.source._paused))
    finally:
        runner.stop()
        runner.run()
    assert paused_seen >= 1  # the scenario did pause a partition
    assert runner.counters["records_consumed"] == n
    assert runner.counters["examples_learned"] == n
    assert {p: o for (_, p), o in runner.offsets.items()} == {p: n // 4 for p in range(4)}
    assert len(read_topic(kafka_bootstrap, f"{topic}.predictions", n)) >= n
