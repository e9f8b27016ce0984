"""Helpers for daemon tests against a real Kafka-protocol broker (``conftest.kafka_bootstrap``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from streammkl.daemon.kafka.topics import ensure_topics

ROOT = Path(__file__).resolve().parents[1]

#: Fast group membership for tests (docs/daemon.md: Tansu holds a JoinGroup for session/2).
FAST_GROUP = {"kafka.session_timeout_ms": 2000, "kafka.heartbeat_interval_ms": 500}


def real_learner_available() -> bool:
    """Whether ``streammkl.river.MKLClassifier`` exists (the daemon's default learner)."""
    try:
        from streammkl.river import MKLClassifier  # noqa: F401
    except ImportError:
        return False
    return True


def learner_overrides() -> dict[str, Any]:
    """The learner for end-to-end tests: the real default when it exists, else the fake."""
    if real_learner_available():
        return {}
    return {"learner.factory": "tests.daemon_fakes:make_learner"}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    ensure_topics(bootstrap, {topic: partitions})


def produce(
    bootstrap: str,
    topic: str,
    values: Sequence[bytes],
    partition_of: Callable[[int], int] = lambda i: 0,
    timestamp_of: Callable[[int], int] | None = None,
) -> None:
    """Send ``values`` (key ``k<i>``) and wait for every acknowledgement."""
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=5, max_request_size=4 << 20
    )
    futures = [
        producer.send(
            topic,
            value=v,
            key=f"k{i}".encode(),
            partition=partition_of(i),
            timestamp_ms=None if timestamp_of is None else timestamp_of(i),
        )
        for i, v in enumerate(values)
    ]
    producer.flush(timeout=60)
    for f in futures:
        f.get(timeout=10)
    producer.close(timeout=5)


def read_topic(bootstrap: str, topic: str, expect: int, timeout: float = 30.0) -> list[Any]:
    """Every record of ``topic`` (waits until at least ``expect`` are there)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        parts = None
        while not parts and time.monotonic() < deadline:
            parts = consumer.partitions_for_topic(topic)
            if not parts:
                time.sleep(0.1)
        tps = [TopicPartition(topic, p) for p in sorted(parts or ())]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        while len(out) < expect and time.monotonic() < deadline:
            for recs in consumer.poll(timeout_ms=200, max_records=5000).values():
                out.extend(recs)
        # a short extra poll: more than expected would be a failure worth seeing
        for recs in consumer.poll(timeout_ms=300).values():
            out.extend(recs)
    finally:
        consumer.close(autocommit=False)
    return out


def committed(bootstrap: str, group: str, tps: list[TopicPartition]) -> dict[int, int | None]:
    """The group's committed offsets (read without joining the group)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return {tp.partition: consumer.committed(tp) for tp in tps}
    finally:
        consumer.close(autocommit=False)


def subprocess_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMMKL_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["PYTHONWARNINGS"] = "ignore::DeprecationWarning"
    return env


def daemon_argv(
    bootstrap: str,
    topic: str,
    group: str,
    checkpoint_dir: Path,
    port: int = 0,
    idle: float | None = None,
    settings: dict[str, Any] | None = None,
) -> list[str]:
    argv = [
        sys.executable, "-m", "streammkl.daemon", "run",
        "--bootstrap-servers", bootstrap, "--topic", topic, "--group-id", group,
        "--checkpoint-dir", str(checkpoint_dir), "--metrics-port", str(port),
    ]  # fmt: skip
    if idle is not None:
        argv += ["--exit-when-idle", str(idle)]
    merged = {
        **FAST_GROUP,
        "kafka.predictions_topic": f"{topic}.predictions",
        "kafka.dead_letter_topic": f"{topic}.dead-letters",
        **learner_overrides(),
        **(settings or {}),
    }
    for key, value in merged.items():
        argv += ["--set", f"{key}={json.dumps(value) if not isinstance(value, str) else value}"]
    if "learner.factory" in merged:
        argv.append("--allow-learner-factory")
    return argv


def start_daemon(argv: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    log = open(log_path, "ab")
    try:
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=subprocess_env())
    finally:
        log.close()


def run_daemon(argv: list[str], log_path: Path, timeout: float = 120.0) -> int:
    proc = start_daemon(argv, log_path)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"daemon did not exit in {timeout}s; log:\n{log_path.read_text()}")


def inspect(checkpoint_dir: Path) -> dict[str, Any]:
    """``streammkl inspect DIR --json`` as a subprocess (the CLI path)."""
    out = subprocess.run(
        [sys.executable, "-m", "streammkl.daemon", "inspect", str(checkpoint_dir), "--json"],
        capture_output=True,
        env=subprocess_env(),
        timeout=60,
        check=True,
    )
    return json.loads(out.stdout)


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=3) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, ""


def metrics(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Scrape ``/metrics`` into {(sample name, sorted labels): value}."""
    from prometheus_client.parser import text_string_to_metric_families

    code, body = http_get(port, "/metrics")
    if code != 200:
        return {}
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(body)
        for s in fam.samples
    }


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, every: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
