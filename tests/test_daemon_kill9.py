"""kill -9 at random moments changes nothing; two group members fail over without losing records."""

from __future__ import annotations

import contextlib
import json
import random
import signal
import subprocess
from pathlib import Path

import pytest
from kafka import TopicPartition

from streammkl.daemon.checkpoints.inspection import inspect_checkpoint
from streammkl.daemon.commands.broker import free_port
from tests.daemon_fakes import bananas_like
from tests.daemon_kafka import (
    committed,
    create_topic,
    daemon_argv,
    http_get,
    inspect,
    metrics,
    produce,
    read_topic,
    run_daemon,
    start_daemon,
    unique,
    wait_until,
)

pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group("kafka")]

N_KILL = 6000


def consumed(port: int, topic: str) -> float:
    return metrics(port).get(("streammkl_records_consumed_total", (("topic", topic),)), 0.0)


SETTINGS = {
    "checkpoint.every_records": 250,
    "kafka.max_poll_records": 100,
    "kafka.session_timeout_ms": 1000,
    "kafka.heartbeat_interval_ms": 250,
}


@pytest.mark.parametrize(
    ("monitor", "stride", "client"),
    [(True, 50, "librdkafka"), (False, 50, "librdkafka"), (True, 1, "kafka-python")],
    ids=["monitored-runs", "runs", "per-record-kafka-python"],
)
def test_sigkill_at_random_moments_gives_the_uninterrupted_model(
    kafka_bootstrap: str, tmp_path: Path, monitor: bool, stride: int, client: str
) -> None:
    """Records are learned in compiled runs (``learn_predict_many``), whose boundaries differ
    between the runs, with the monitor observing them by chunks (its restarts wait for the
    next multiple of its stride) or off; with a stride of 1, one by one: the same model every
    way, with either consumer client."""
    settings = {
        **SETTINGS,
        "monitor.enabled": monitor,
        "monitor.stride": stride,
        "kafka.consumer_client": client,
    }
    topic = unique("kill9")
    create_topic(kafka_bootstrap, topic, 3)
    values = [json.dumps(r).encode() for r in bananas_like(N_KILL, seed=1)]
    # Timestamps tie across partitions: the merge's tie-break (partition, offset) is exercised.
    produce(
        kafka_bootstrap, topic, values,
        partition_of=lambda i: (i * 5) % 3, timestamp_of=lambda i: 1_700_000_000_000 + i // 3,
    )  # fmt: skip

    ref_dir = tmp_path / "ref"
    argv = daemon_argv(kafka_bootstrap, topic, unique("ref"), ref_dir, idle=1.5, settings=settings)
    assert run_daemon(argv, tmp_path / "ref.log") == 0
    reference = inspect(ref_dir)
    assert reference["examples_learned"] == N_KILL

    rng = random.Random(4)
    group, ck = unique("killed"), tmp_path / "killed"
    progress = []
    for cycle in range(5):  # five SIGKILLs: one during start-up, four mid-stream
        port = free_port()
        argv = daemon_argv(kafka_bootstrap, topic, group, ck, port=port, settings=settings)
        proc = start_daemon(argv, tmp_path / "killed.log")
        if cycle == 0:
            wait_until(lambda: http_get(port, "/healthz")[0] == 200, 60, "process up")
            delay = rng.uniform(0.0, 0.5)  # during the group join
        else:
            # a random point of the stream: after this process consumed 50..900 records
            # (checkpoints every 250), then a random few milliseconds more
            target = rng.randint(50, 900)

            def reached(target: int = target) -> bool:
                if proc.poll() is not None:
                    log = (tmp_path / "killed.log").read_text()[-3000:]
                    raise AssertionError(f"daemon exited with {proc.returncode}:\n{log}")
                return consumed(port, topic) >= target

            wait_until(reached, 120, f"{target} consumed (cycle {cycle})", 0.02)
            delay = rng.uniform(0.0, 0.05)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=delay)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=10) == -signal.SIGKILL
        has = any(ck.glob("ckpt-*"))
        progress.append(inspect_checkpoint(ck)["examples_learned"] if has else 0)

    final = daemon_argv(kafka_bootstrap, topic, group, ck, idle=1.5, settings=settings)
    assert run_daemon(final, tmp_path / "killed.log") == 0
    result = inspect(ck)
    assert progress == sorted(progress)  # checkpoints only move forward
    assert any(0 < p < N_KILL for p in progress), progress  # killed mid-stream, after checkpoints
    assert result["examples_learned"] == reference["examples_learned"] == N_KILL
    assert result["model_digest"] == reference["model_digest"]
    assert result["offsets"] == reference["offsets"]
    assert result["kernel_weights"] == reference["kernel_weights"]
    # predictions are at-least-once: every record has one, duplicates are identical
    preds = read_topic(kafka_bootstrap, f"{topic}.predictions", N_KILL)
    seen: dict[tuple[int, int], str] = {}
    for p in preds:
        v = json.loads(p.value)
        key = (v["partition"], v["offset"])
        assert seen.setdefault(key, p.value.decode()) == p.value.decode()
    assert len(seen) == N_KILL


@pytest.mark.parametrize("client", ["librdkafka", "kafka-python"])
def test_two_members_split_partitions_and_fail_over_from_checkpointed_offsets(
    kafka_bootstrap: str, tmp_path: Path, client: str
) -> None:
    topic, group = unique("group"), unique("g")
    create_topic(kafka_bootstrap, topic, 4)
    settings = {"checkpoint.every_seconds": 0.3, "kafka.consumer_client": client}
    ports = {"a": free_port(), "b": free_port()}
    procs = {
        m: start_daemon(
            daemon_argv(
                kafka_bootstrap, topic, group, tmp_path / m, port=ports[m], settings=settings
            ),
            tmp_path / f"{m}.log",
        )
        for m in ("a", "b")
    }
    try:

        def assigned(member: str) -> list[str]:
            code, body = http_get(ports[member], "/readyz")
            return json.loads(body).get("assigned", []) if code in (200, 503) and body else []

        wait_until(lambda: len(assigned("a")) == 2 and len(assigned("b")) == 2, 60, "a 2/2 split")
        parts = {m: sorted(int(p.split("/")[1]) for p in assigned(m)) for m in ("a", "b")}
        assert sorted(parts["a"] + parts["b"]) == [0, 1, 2, 3]

        phase1 = [json.dumps(r).encode() for r in bananas_like(800, seed=2)]
        produce(kafka_bootstrap, topic, phase1, partition_of=lambda i: i % 4)
        tps = [TopicPartition(topic, p) for p in range(4)]
        # a's work is checkpointed and its offsets committed: then it dies without warning
        wait_until(
            lambda: all(c == 200 for c in committed(kafka_bootstrap, group, tps).values()),
            60,
            "phase 1 committed",
        )
        procs["a"].send_signal(signal.SIGKILL)
        procs["a"].wait(timeout=10)
        learned_a = inspect(tmp_path / "a")["examples_learned"]
        assert learned_a == 400

        phase2 = [json.dumps(r).encode() for r in bananas_like(800, seed=3)]
        produce(kafka_bootstrap, topic, phase2, partition_of=lambda i: i % 4)
        wait_until(lambda: len(assigned("b")) == 4, 60, "b takes over every partition")
        wait_until(
            lambda: all(c == 400 for c in committed(kafka_bootstrap, group, tps).values()),
            60,
            "phase 2 committed by b",
        )
        procs["b"].send_signal(signal.SIGTERM)
        assert procs["b"].wait(timeout=30) == 0
        info_b = inspect(tmp_path / "b")
        # b: its own phase-1 partitions + all of phase 2; a's partitions resumed exactly at a's
        # checkpointed (committed) offsets: nothing lost, nothing learned twice.
        assert info_b["offsets"] == {topic: {str(p): 400 for p in range(4)}}
        assert info_b["examples_learned"] == 400 + 800
        assert learned_a + info_b["examples_learned"] == 1600
        preds = read_topic(kafka_bootstrap, f"{topic}.predictions", 1600)
        keys = {(json.loads(p.value)["partition"], json.loads(p.value)["offset"]) for p in preds}
        assert keys == {(p, o) for p in range(4) for o in range(400)}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ["all", "group"])
def test_soak_many_sigkills_over_four_partitions(
    kafka_bootstrap: str, tmp_path: Path, assignment: str
) -> None:
    n = 20_000
    topic = unique("soak")
    create_topic(kafka_bootstrap, topic, 4)
    values = [json.dumps(r).encode() for r in bananas_like(n, seed=7)]
    produce(
        kafka_bootstrap, topic, values,
        partition_of=lambda i: (i * 3) % 4, timestamp_of=lambda i: 1_700_000_000_000 + i // 2,
    )  # fmt: skip
    settings = {**SETTINGS, "kafka.assignment": assignment, "checkpoint.every_records": 700}
    ref_dir = tmp_path / "ref"
    argv = daemon_argv(kafka_bootstrap, topic, unique("ref"), ref_dir, idle=1.5, settings=settings)
    assert run_daemon(argv, tmp_path / "ref.log", timeout=300) == 0
    reference = inspect(ref_dir)
    rng = random.Random(11)
    group, ck = unique("soak"), tmp_path / "killed"
    for _ in range(15):
        port = free_port()
        argv = daemon_argv(kafka_bootstrap, topic, group, ck, port=port, settings=settings)
        proc = start_daemon(argv, tmp_path / "killed.log")
        wait_until(lambda: http_get(port, "/readyz")[0] == 200, 60, "partitions assigned")
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=rng.uniform(0.0, 1.5))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    final = daemon_argv(kafka_bootstrap, topic, group, ck, idle=1.5, settings=settings)
    assert run_daemon(final, tmp_path / "killed.log", timeout=300) == 0
    result = inspect(ck)
    assert result["examples_learned"] == reference["examples_learned"] == n
    assert result["model_digest"] == reference["model_digest"]
