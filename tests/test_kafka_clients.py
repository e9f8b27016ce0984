"""Each client adapter against the real broker: the protocol the source and the sink rely on.

Every test runs on both libraries (kafka-python and librdkafka) through the same
:mod:`streammkl.daemon.kafka.clients` protocol, and checks the protocol's promises: records
converted with kafka-python's attribute names, start offsets (own, committed, earliest), the
highwater and position from fetches, seek, pause and resume, commits seen by the group, the
rebalance callbacks, and on the producer side the aggregate delivery accounting (``in_flight``,
``failures``) including what ``abandon`` hands back when the broker is gone.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka import TopicPartition

from streammkl.daemon.commands.broker import EmbeddedBroker
from streammkl.daemon.config import load_settings
from streammkl.daemon.kafka.clients import (
    LIBRARIES,
    ConsumerClient,
    Partition,
    ProducerClient,
)
from tests.daemon_kafka import FAST_GROUP, committed, create_topic, produce, read_topic, unique

pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group("kafka")]

CLIENTS = pytest.mark.parametrize("client", ["librdkafka", "kafka-python"])


def settings(bootstrap: str, **over: Any) -> Any:
    base = {"kafka.bootstrap_servers": bootstrap, "kafka.group_id": unique("g"), **FAST_GROUP}
    return load_settings(env={}, overrides={**base, **over}).kafka


def poll_until(
    consumer: ConsumerClient, done: Callable[[dict[Partition, list[Any]]], bool], timeout: float
) -> dict[Partition, list[Any]]:
    """Poll, gathering records per partition, until ``done(gathered)`` (or fail)."""
    got: dict[Partition, list[Any]] = {}
    deadline = time.monotonic() + timeout
    while not done(got):
        assert time.monotonic() < deadline, (
            f"timed out; got { ({k: len(v) for k, v in got.items()}) }"
        )
        for tp, records in consumer.poll(100, 500).items():
            got.setdefault(Partition(tp.topic, tp.partition), []).extend(records)
    return got


def count(n: int) -> Callable[[dict[Partition, list[Any]]], bool]:
    return lambda got: sum(len(r) for r in got.values()) >= n


@CLIENTS
def test_assigned_partitions_start_at_own_else_earliest_offsets(
    kafka_bootstrap: str, client: str
) -> None:
    topic = unique("ad")
    create_topic(kafka_bootstrap, topic, 2)
    produce(kafka_bootstrap, topic, [b"v%d" % i for i in range(20)], lambda i: i % 2, lambda i: i)
    k = settings(kafka_bootstrap, **{"kafka.topics": topic})
    consumer = LIBRARIES[client].consumer(k)
    try:
        assert sorted(consumer.partitions(topic)) == [0, 1]
        assert list(consumer.partitions(unique("none"))) == []
        p0, p1 = Partition(topic, 0), Partition(topic, 1)
        consumer.assign({p0: 4, p1: None})  # own offset 4 (value v8); none: the earliest
        got = poll_until(consumer, count(5 + 10), 30)
        assert [r.offset for r in got[p0]] == [4, 5, 6, 7, 8, 9]
        assert [r.offset for r in got[p1]] == list(range(10))
        first = got[p0][0]
        assert (first.topic, first.partition, first.key, first.value) == (topic, 0, b"k8", b"v8")
        assert first.timestamp == 8  # the producer's timestamp, in ms
        assert consumer.highwater(p0) == consumer.highwater(p1) == 10
        assert consumer.position(p0) == consumer.position(p1) == 10
        assert consumer.beginning(p0) == 0
        assert consumer.connected
        # seek back: the same records again
        consumer.seek(p1, 7)
        again = poll_until(consumer, count(3), 30)
        assert [r.offset for r in again[p1]] == [7, 8, 9]
        # paused: nothing more from p0, however long it polls; resumed: the new records come
        consumer.pause(p0)
        produce(kafka_bootstrap, topic, [b"late"] * 4, lambda i: 0)
        quiet: dict[Partition, list[Any]] = {}
        for _ in range(10):
            for tp, records in consumer.poll(100, 500).items():
                quiet.setdefault(Partition(tp.topic, tp.partition), []).extend(records)
        assert quiet.get(p0, []) == []
        consumer.resume(p0)
        late = poll_until(consumer, count(4), 30)
        assert [r.offset for r in late[p0]] == [10, 11, 12, 13]
    finally:
        consumer.close()


@CLIENTS
def test_a_partition_paused_before_a_rebalance_is_fetched_when_assigned_again(
    kafka_bootstrap: str, client: str
) -> None:
    """The source starts every assignment unpaused: a partition this member paused (its buffer
    was full) and gets again after a rebalance (a member joined and left) is fetched."""
    topic = unique("rp")
    create_topic(kafka_bootstrap, topic, 2)
    produce(kafka_bootstrap, topic, [b"v%d" % i for i in range(10)], lambda i: i % 2)
    k = settings(kafka_bootstrap, **{"kafka.topics": topic})
    owned: dict[str, list[Partition]] = {}

    def member(name: str) -> ConsumerClient:
        consumer = LIBRARIES[client].consumer(k)

        def assigned(parts: list[Partition]) -> None:
            owned[name] = list(parts)
            consumer.start_assigned(dict.fromkeys(parts, 0))  # own offsets: the first

        consumer.subscribe([topic], assigned, lambda parts: None)
        return consumer

    first = member("first")
    try:
        poll_until(first, count(10), 60)
        for part in owned["first"]:
            first.pause(part)
        second = member("second")
        try:
            deadline = time.monotonic() + 60
            while len(owned.get("first", ())) != 1 or not owned.get("second"):
                assert time.monotonic() < deadline, owned
                first.poll(100, 500)
                second.poll(100, 500)
        finally:
            second.close()
        got: dict[Partition, list[Any]] = {}
        deadline = time.monotonic() + 60
        while len(owned["first"]) != 2 or sum(len(r) for r in got.values()) < 10:
            assert time.monotonic() < deadline, (owned, {p: len(r) for p, r in got.items()})
            for tp, records in first.poll(100, 500).items():
                got.setdefault(tp, []).extend(records)
            if len(owned["first"]) != 2:
                got.clear()  # (records of the one-partition assignment)
        assert sorted(got) == sorted(owned["first"])  # both partitions, from their first
    finally:
        first.close()


@CLIENTS
def test_group_members_start_at_the_committed_offset_and_hear_rebalances(
    kafka_bootstrap: str, client: str
) -> None:
    topic = unique("gr")
    create_topic(kafka_bootstrap, topic, 1)
    produce(kafka_bootstrap, topic, [b"v%d" % i for i in range(12)])
    k = settings(kafka_bootstrap, **{"kafka.topics": topic})
    tp = Partition(topic, 0)
    events: list[tuple[str, list[Partition]]] = []

    def member() -> ConsumerClient:
        consumer = LIBRARIES[client].consumer(k)

        def assigned(parts: list[Partition]) -> None:
            events.append(("assigned", parts))
            consumer.start_assigned(dict.fromkeys(parts))  # no own offsets

        def revoked(parts: list[Partition]) -> None:
            if parts:  # (kafka-python reports an empty revocation before its first join)
                events.append(("revoked", parts))

        consumer.subscribe([topic], assigned, revoked)
        return consumer

    first = member()
    try:
        got = poll_until(first, count(12), 60)
        assert [r.offset for r in got[tp]] == list(range(12))
        assert events[0] == ("assigned", [tp])
        first.commit({tp: 5}, blocking=True)
        assert committed(kafka_bootstrap, k.group_id, [TopicPartition(topic, 0)]) == {0: 5}
    finally:
        first.close()
    assert events[-1] == ("revoked", [tp])  # leaving the group revokes
    second = member()
    try:  # the group's committed offset, since no own offset was given
        got = poll_until(second, count(7), 60)
        assert [r.offset for r in got[tp]] == list(range(5, 12))
    finally:
        second.close()


@CLIENTS
def test_producer_accounts_for_every_message(kafka_bootstrap: str, client: str) -> None:
    topic = unique("pr")
    create_topic(kafka_bootstrap, topic, 1)
    producer: ProducerClient = LIBRARIES[client].producer(settings(kafka_bootstrap))
    try:
        for i in range(300):
            producer.produce(topic, b"v%d" % i, b"k%d" % i)
        producer.produce(topic, b"h", None, headers=[("reason", b"why")])
        producer.flush(30)
        producer.serve(0)
        assert producer.failures() == ([], None)
        assert producer.in_flight() == 0  # all acknowledged
        records = read_topic(kafka_bootstrap, topic, 301)
        assert [r.value for r in records[:300]] == [b"v%d" % i for i in range(300)]
        assert records[300].key is None and ("reason", b"why") in list(records[300].headers)
    finally:
        producer.close()


@CLIENTS
def test_an_abandoned_producer_hands_back_every_unacknowledged_message(
    tmp_path: Path, client: str
) -> None:
    with EmbeddedBroker(log_path=tmp_path / "tansu.log") as broker:  # the test's own, to kill
        create_topic(broker.bootstrap_servers, "out", 1)
        producer = LIBRARIES[client].producer(settings(broker.bootstrap_servers))
        producer.produce("out", b"before", None)
        producer.flush(30)
        assert producer.failures() == ([], None) and producer.in_flight() == 0
        broker.stop(kill=True)
        sent = [b"during-%d" % i for i in range(10)]
        for value in sent:
            producer.produce("out", value, b"k")
        producer.flush(0.5)  # the broker is away: nothing is acknowledged
        producer.abandon()
        failed, _ = producer.failures()
        assert sorted(o.value for o in failed) == sorted(sent)
        assert all(o.topic == "out" and o.key == b"k" for o in failed)
