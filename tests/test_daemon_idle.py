"""The idle-exit rule with the in-memory adapters: an unknown backlog is never zero.

A loop with ``run.exit_when_idle`` ends with 0 only when every owned partition's backlog is known
and zero. Here the fakes withhold what the real clients withhold during a rebalance or behind a
stalled broker (the highwater of partitions just assigned; any partition while the group has
revoked them and not assigned them again); the loop waits and learns every record, and if the
backlog stays unknown or known to wait, it ends with exit 7 after the patient wait, saying why.
The same with real processes and the real broker: ``tests.test_daemon_idle_exit``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from streammkl.daemon.loop.idle import EXIT_NO_TOPIC, EXIT_OK, EXIT_UNREAD, IDLE_PATIENCE
from streammkl.daemon.loop.runner import Runner
from tests.daemon_fakes import FakeCluster, FakeConsumer, TopicPartition, bananas_like
from tests.test_daemon_runner import make_settings

LIMIT = 0.1  # run.exit_when_idle (seconds)
FAST = {"kafka.session_timeout_ms": 500, "kafka.heartbeat_interval_ms": 100}  # join grace 1.5 s


def cluster_with(n: int, partitions: int = 2, start: int = 0) -> FakeCluster:
    cluster = FakeCluster()
    cluster.create("in", partitions)
    add(cluster, n, start)
    return cluster


def add(cluster: FakeCluster, n: int, start: int = 0) -> None:
    parts = len(cluster.topics["in"])
    for i, r in enumerate(bananas_like(start + n)[start:], start):
        cluster.append("in", json.dumps(r).encode(), i % parts, None, i)


def runner(tmp_path: Path, cluster: FakeCluster, consumers: list[FakeConsumer]) -> Runner:
    def client(settings: Any) -> FakeConsumer:
        consumers.append(FakeConsumer(cluster, settings, 3))
        return consumers[-1]

    settings = make_settings(tmp_path, **{"run.exit_when_idle": LIMIT, **FAST})
    return Runner(settings, registry=CollectorRegistry(), consumer_client=client,
                  producer_client=cluster.producer())  # fmt: skip


def run_to_end(r: Runner) -> float:
    """Run the started loop to its end; returns how long it had been idle by then."""
    assert r.run() == r.exit_code
    return time.monotonic() - r.idle.last


def test_partitions_without_a_highwater_are_waited_for(tmp_path: Path) -> None:
    """Just assigned, no fetch response yet (a member after a rebalance; a stalled broker)."""
    cluster = cluster_with(200)
    consumers: list[FakeConsumer] = []
    r = runner(tmp_path, cluster, consumers)
    r.start()
    consumers[0].withhold(5 * LIMIT)  # five idle limits without a fetch response
    run_to_end(r)
    assert r.exit_code == EXIT_OK
    assert r.counters["examples_learned"] == 200  # before: exited 0 at once, 200 unread


def test_a_rebalance_in_flight_is_waited_for(tmp_path: Path) -> None:
    """Partitions revoked, the new assignment late: owning nothing is not "nothing to read"."""
    cluster = cluster_with(100)
    consumers: list[FakeConsumer] = []
    r = runner(tmp_path, cluster, consumers)
    r.start()
    while r.counters["examples_learned"] < 100:
        assert r.tick()
    time.sleep(max(0.0, r.idle.started + 1.6 - time.monotonic()))  # past the join grace
    consumer = consumers[0]
    consumer.rebalance([TopicPartition("in", 0), TopicPartition("in", 1)], delay=5 * LIMIT)
    add(cluster, 150, start=100)  # produced meanwhile
    run_to_end(r)
    assert r.exit_code == EXIT_OK
    assert r.counters["examples_learned"] == 250  # before: exited 0 mid-rebalance, 150 unread


@pytest.mark.parametrize("stall", ["fetches", "rebalance"])
def test_a_backlog_that_stays_unknown_is_no_success(
    tmp_path: Path, stall: str, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = cluster_with(50)
    consumers: list[FakeConsumer] = []
    r = runner(tmp_path, cluster, consumers)
    r.start()
    if stall == "fetches":
        consumers[0].withhold(3600)
    else:
        while r.counters["examples_learned"] < 50:
            assert r.tick()
        time.sleep(max(0.0, r.idle.started + 1.6 - time.monotonic()))
        consumers[0].rebalance([TopicPartition("in", 0)], delay=3600)
    with caplog.at_level("ERROR", logger="streammkl.daemon.loop.runner"):
        idle = run_to_end(r)
    assert r.exit_code == EXIT_UNREAD
    assert idle >= IDLE_PATIENCE * LIMIT  # the patient wait
    assert r.counters["examples_learned"] == (0 if stall == "fetches" else 50)
    (line,) = [rec.getMessage() for rec in caplog.records]
    expected = "in/0, in/1" if stall == "fetches" else "the group's assignment"
    assert f"{expected} is still unknown" in line and line.endswith("exiting with code 7")


def test_records_known_to_wait_end_in_no_success(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = cluster_with(60)
    consumers: list[FakeConsumer] = []
    r = runner(tmp_path, cluster, consumers)
    r.start()
    while r.counters["examples_learned"] < 60:
        assert r.tick()
    add(cluster, 40, start=60)
    consumer = consumers[0]  # the fetch responses tell the new highwaters, but no record
    consumer.paused_set = set(consumer.assigned)
    consumer.pause = consumer.resume = lambda tp: None  # type: ignore[method-assign]
    with caplog.at_level("ERROR", logger="streammkl.daemon.loop.runner"):
        idle = run_to_end(r)
    assert r.exit_code == EXIT_UNREAD and idle >= IDLE_PATIENCE * LIMIT
    (line,) = [rec.getMessage() for rec in caplog.records]
    assert "40 records wait on the owned partitions" in line


def test_a_missing_input_topic_is_no_success(tmp_path: Path) -> None:
    cluster = cluster_with(10)
    settings = make_settings(tmp_path, **{"run.exit_when_idle": LIMIT, "kafka.topics": "in,nosuch"})
    r = Runner(settings, registry=CollectorRegistry(), consumer_client=cluster.consumer(),
               producer_client=cluster.producer())  # fmt: skip
    assert r.run() == EXIT_NO_TOPIC
    assert r.counters["examples_learned"] == 10  # what exists is read first
