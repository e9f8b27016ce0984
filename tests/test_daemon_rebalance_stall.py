"""A group rebalance that never completes, and the member that leaves in the middle of one.

On Tansu (0.6), a member that leaves the group while named the next generation's leader (its
JoinGroup answered but no SyncGroup yet, or not even rejoined) stalls the group for good: every
later JoinGroup -- the survivors', or a new member's -- answers a generation naming the departed
leader, and each SyncGroup fails with REBALANCE_IN_PROGRESS a session timeout later. Two members
closing within a heartbeat of each other did that (the second was rejoining after the first
left when it closed): the third member never got a partition again
(``benchmarks/scale_out.py --full``, exit 7). So a closing member lets a rebalance it heard of
complete first (``Source.close``); two members leaving at the very same moment can still stall
the group (docs/daemon.md). A member that waits for an assignment too long rejoins with a new
consumer (``Source._watch_join``: the cure for a client stuck in a rebalance, not for a group
Tansu stalled), the idle end's exit 7 coming only after that.

The real-broker tests run three group members (``Source`` over each client library) in
threads; the fake-clock tests check the timing rules.
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from kafka import TopicPartition

from streammkl.daemon.config import load_settings
from streammkl.daemon.kafka.clients import LIBRARIES, ConsumerClient, Partition
from streammkl.daemon.kafka.source import STALLED_JOIN_SESSIONS, Source
from tests.daemon_fakes import FakeCluster
from tests.daemon_kafka import FAST_GROUP, create_topic, produce, unique, wait_until

CLIENTS = pytest.mark.parametrize("client", ["librdkafka", "kafka-python"])
REAL_BROKER = [pytest.mark.kafka, pytest.mark.xdist_group("kafka")]


def kafka_settings(**over: Any) -> Any:
    return load_settings(env={}, overrides={"kafka.topics": "in", **over}).kafka


def member_settings(bootstrap: str, topic: str, group: str, name: str, client: str) -> Any:
    return kafka_settings(**{
        "kafka.bootstrap_servers": bootstrap, "kafka.topics": topic, "kafka.group_id": group,
        "kafka.client_id": name, "kafka.consumer_client": client, **FAST_GROUP,
    })  # fmt: skip


class Member:
    """A group member on a thread of its own: fetches, takes every record (counting each
    ``(partition, offset)`` in ``seen``, advancing its own offsets) and commits them, until
    :meth:`leave` (which closes its source, as the daemon's shutdown does)."""

    def __init__(
        self, settings: Any, client: Any, seen: Counter[tuple[int, int]], lock: threading.Lock
    ) -> None:
        self.source = Source(settings, {}, client).start()
        self.seen = seen
        self.lock = lock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        src = self.source
        while not self._stop.is_set():
            src.fetch(50)
            records = src.take(1_000)
            with self.lock:
                for rec in records:
                    self.seen[(rec.partition, rec.offset)] += 1
                    src.offsets[(rec.topic, rec.partition)] = rec.offset + 1
            if records:
                src.commit()
        src.close()

    def leave(self) -> None:
        self._stop.set()

    def join(self) -> None:
        self._thread.join(30)
        assert not self._thread.is_alive()


@pytest.mark.parametrize("client", ["librdkafka", "kafka-python"])
@pytest.mark.kafka
@pytest.mark.xdist_group("kafka")
def test_two_members_leaving_together_leave_the_third_every_partition(
    kafka_bootstrap: str, client: str
) -> None:
    """Three members of a group share 6 partitions; two leave, the second while it rejoins
    after the first left. The third gets every partition and reads what is produced
    afterwards; every record is counted exactly once. Before ``Source.close`` let the
    rebalance complete, the third never got a partition again (this test, and a script closing
    the second 0.2 s after the first: 6 of 6 runs with librdkafka, 3 of 3 with kafka-python; 0
    of 20 and 0 of 10 after)."""
    topic = unique("leave")
    create_topic(kafka_bootstrap, topic, 6)
    produce(kafka_bootstrap, topic, [b"x%d" % i for i in range(300)], lambda i: i % 6)
    group = unique("g")
    seen: Counter[tuple[int, int]] = Counter()
    lock = threading.Lock()
    members = [
        Member(
            member_settings(kafka_bootstrap, topic, group, f"m{k}", client),
            LIBRARIES[client].consumer,
            seen,
            lock,
        )
        for k in range(3)
    ]
    wait_until(
        lambda: [len(m.source.assignment) for m in members] == [2, 2, 2] and len(seen) == 300,
        60, "three members with 2 partitions each, every record read",
    )  # fmt: skip
    members[0].leave()
    # the second leaves as soon as it is rejoining (its partitions revoked: its JoinGroup is
    # out, and Tansu holds it for half a session): in the scale-out runs it closed within
    # 0.3 s of the first, after a heartbeat had told it of the rebalance
    wait_until(lambda: members[1].source.assignment == [], 10, "the second member rejoining")
    members[1].leave()
    members[0].join()
    members[1].join()
    survivor = members[2]
    wait_until(lambda: len(survivor.source.assignment) == 6, 30, "the survivor owns all 6")
    produce(kafka_bootstrap, topic, [b"y%d" % i for i in range(120)], lambda i: i % 6)
    wait_until(lambda: len(seen) == 420, 30, "every record read")
    survivor.leave()
    survivor.join()
    assert sorted(seen) == [(p, o) for p in range(6) for o in range(70)]
    assert set(seen.values()) == {1}
    assert survivor.source.rejoins == 0


class DeafConsumer:
    """A consumer adapter whose group assignments never reach the source (a rebalance that
    never completes, as far as the source can tell): the first one :func:`deaf_first` builds."""

    def __init__(self, inner: ConsumerClient) -> None:
        self.inner = inner

    def subscribe(self, topics: list[str], on_assign: Any, on_revoke: Any) -> None:
        self.inner.subscribe(topics, lambda parts: None, on_revoke)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def deaf_first(real: Any) -> tuple[Any, list[Any]]:
    """A consumer factory whose first consumer is a :class:`DeafConsumer`; the consumers built."""
    built: list[Any] = []

    def factory(settings: Any) -> Any:
        consumer = real(settings)
        built.append(consumer if built else DeafConsumer(consumer))
        return built[-1]

    return factory, built


@pytest.mark.kafka
@pytest.mark.xdist_group("kafka")
def test_a_member_whose_assignment_never_arrives_rejoins_and_reads_every_record_once(
    kafka_bootstrap: str,
) -> None:
    """A member whose consumer never hands it an assignment leaves and rejoins the group with a
    new consumer after ``STALLED_JOIN_SESSIONS`` session timeouts (10 s with 2-s sessions),
    which gets the partitions and reads from the member's own offsets: records below them are
    not read again, every other one exactly once.

    librdkafka only (the default client): it assigns by itself what the deaf callback did not,
    and stays a steady member. kafka-python's coordinator, whose callback did nothing, joined
    again after every SyncGroup (measured), so it left in the middle of a join -- the Tansu
    stall this file is about -- and the test measured that instead."""
    client = "librdkafka"
    topic = unique("deaf")
    create_topic(kafka_bootstrap, topic, 2)
    produce(kafka_bootstrap, topic, [b"x%d" % i for i in range(100)], lambda i: i % 2)
    factory, built = deaf_first(LIBRARIES[client].consumer)
    settings = kafka_settings(**{
        "kafka.bootstrap_servers": kafka_bootstrap, "kafka.topics": topic,
        "kafka.group_id": unique("g"), "kafka.consumer_client": client, **FAST_GROUP,
    })  # fmt: skip
    source = Source(settings, {(topic, 0): 20, (topic, 1): 30}, factory).start()
    seen: Counter[tuple[int, int]] = Counter()

    def read() -> int:
        source.fetch(50)
        for rec in source.take(1_000):
            seen[(rec.partition, rec.offset)] += 1
            source.offsets[(rec.topic, rec.partition)] = rec.offset + 1
        return len(seen)

    wait_until(lambda: read() == 50 - 20 + 50 - 30, 60, "every record above the own offsets")
    source.close()
    assert source.rejoins == 1 and len(built) == 2
    assert sorted(seen) == [(0, o) for o in range(20, 50)] + [(1, o) for o in range(30, 50)]
    assert set(seen.values()) == {1}


def ticks(source: Source, now: list[float], seconds: float) -> None:
    """Fetch once per second of the fake clock ``now[0]`` for ``seconds``."""
    end = now[0] + seconds
    while now[0] < end:
        now[0] += 1.0
        source.fetch(0)


def test_a_member_rejoins_after_waiting_the_bound_for_an_assignment(tmp_path: Path) -> None:
    """On a fake clock, 10-s sessions: a member whose partitions were revoked and none assigned
    since rejoins with a new consumer ``STALLED_JOIN_SESSIONS`` x 10 s = 50 s later, not before;
    the wait restarts while the consumer is not connected (an outage is not a stalled group);
    a member the group gives nothing (one too many) never rejoins; the new consumer's
    assignment starts at the member's own offset."""
    now = [0.0]
    settings = kafka_settings(**{"kafka.session_timeout_ms": 10_000})
    bound = STALLED_JOIN_SESSIONS * 10.0
    assert bound == 50.0
    cluster = FakeCluster()
    for i in range(10):
        cluster.append("in", b"v%d" % i)
    offsets = {("in", 0): 7}
    member = Source(settings, offsets, cluster.consumer(), clock=lambda: now[0]).start()
    first = member.consumer
    ticks(member, now, 1.0)
    assert member.assignment == [Partition("in", 0)]
    first.rebalance([TopicPartition("in", 0)], delay=1e9)  # revoked, never assigned again
    ticks(member, now, 1.0)
    assert member.assignment == [] and member.backlog().unknown == ("the group's assignment",)
    ticks(member, now, bound - 2.0)
    assert member.rejoins == 0 and member.consumer is first
    ticks(member, now, 2.0)
    assert member.rejoins == 1 and member.consumer is not first and first.closed
    ticks(member, now, 1.0)  # the new consumer subscribed: assigned at its first poll
    assert member.assignment == [Partition("in", 0)]
    taken: list[int] = []
    while len(taken) < 3:
        ticks(member, now, 1.0)
        taken += [rec.offset for rec in member.take(100)]
    assert taken == [7, 8, 9]  # from the own offset: nothing below it again

    second = member.consumer
    second.rebalance([TopicPartition("in", 0)], delay=1e9)
    ticks(member, now, 30.0)
    second.connected = False  # the broker went away: the wait starts again when it is back
    ticks(member, now, 40.0)
    second.connected = True
    ticks(member, now, bound - 1.0)
    assert member.rejoins == 1
    ticks(member, now, 2.0)
    assert member.rejoins == 2

    member.consumer.rebalance([])  # one member too many: assigned nothing, not waiting
    ticks(member, now, 10 * bound)
    assert member.rejoins == 2 and member.assignment == []


def count_polls(consumer: Any) -> list[tuple[Any, ...]]:
    """The arguments of every later ``consumer.poll`` call (the poll still runs)."""
    polls: list[tuple[Any, ...]] = []
    real_poll = consumer.poll

    def poll(*args: Any) -> Any:
        polls.append(args)
        return real_poll(*args)

    consumer.poll = poll
    return polls


def test_a_closing_member_lets_a_rebalance_under_way_complete_then_leaves() -> None:
    """``Source.close`` during a rebalance (partitions revoked, none assigned since) polls
    until the assignment comes, then closes, having read nothing of it; a rebalance that does
    not complete is waited for at most ``SETTLE_BEFORE_LEAVE_SESSIONS`` session timeouts.
    ``close(settle=False)`` (a rejoin) and a member not in a rebalance close at once."""
    settings = kafka_settings(
        **{"kafka.session_timeout_ms": 500, "kafka.heartbeat_interval_ms": 100}
    )
    cluster = FakeCluster()
    cluster.create("in", 2)
    for i in range(10):
        cluster.append("in", b"v", i % 2)
    member = Source(settings, {}, cluster.consumer()).start()
    consumer = member.consumer
    member.fetch(0)
    assert len(member.assignment) == 2
    consumer.rebalance([TopicPartition("in", 1)], delay=0.3)  # assigned 0.3 s from now
    member.fetch(0)
    assert member.assignment == []
    member.close()
    assert consumer.closed
    assert consumer.pending_assignment is None  # the rebalance completed before the leave
    assert consumer.assigned == [TopicPartition("in", 1)] and member.buffers == {}

    member = Source(settings, {}, cluster.consumer()).start()
    consumer = member.consumer
    member.fetch(0)
    consumer.rebalance([TopicPartition("in", 1)], delay=1e9)  # never completes
    member.fetch(0)
    polls = count_polls(consumer)
    member.close()
    assert consumer.closed and consumer.pending_assignment is not None
    assert polls  # for SETTLE_BEFORE_LEAVE_SESSIONS session timeouts (wall time), then left

    for settle, revoke in ((False, True), (True, False)):
        member = Source(settings, {}, cluster.consumer()).start()
        consumer = member.consumer
        member.fetch(0)
        if revoke:
            consumer.rebalance([TopicPartition("in", 1)], delay=1e9)
            member.fetch(0)
        polls = count_polls(consumer)
        member.close(settle=settle)
        assert consumer.closed and polls == []
