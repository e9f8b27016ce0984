"""The librdkafka consumer adapter under the source, on a scripted ``confluent_kafka.Consumer``
(the adapters against the real broker: test_kafka_clients.py; the source on both clients —
assignment, kill -9, failover, outage, pausing — test_daemon_kafka.py, test_daemon_kill9.py)."""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as RdTopicPartition
from kafka import TopicPartition

from streammkl.daemon.config import load_settings
from streammkl.daemon.kafka.clients import confluent
from streammkl.daemon.kafka.clients.confluent import ConfluentConsumer, consumer_config
from streammkl.daemon.kafka.source import Source


class Message:
    """The part of ``confluent_kafka.Message`` the source reads."""

    def __init__(self, partition: int, offset: int, ts: int | None = 5, error: Any = None):
        self._p, self._o, self._ts, self._error = partition, offset, ts, error

    def error(self) -> Any:
        return self._error

    def topic(self) -> str:
        return "in"

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o

    def timestamp(self) -> tuple[int, int]:
        if self._ts is None:
            return confluent_kafka.TIMESTAMP_NOT_AVAILABLE, -1
        return confluent_kafka.TIMESTAMP_CREATE_TIME, self._ts

    def key(self) -> bytes:
        return b"k%d" % self._o

    def value(self) -> bytes:
        return b"v%d" % self._o


class Consumer:
    """Scripted consumer: ``batches`` are returned by successive ``consume`` calls."""

    def __init__(self, conf: dict[str, Any]) -> None:
        self.conf = conf
        self.batches: list[list[Message]] = []
        self.assigned: list[Any] = []
        self.committed_offsets = {0: 7, 1: -1001}
        self.positions: dict[int, int] = {}
        self.subscribed: Any = None
        self.resumed: list[Any] = []
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def resume(self, partitions: list[Any]) -> None:
        self.resumed.extend(partitions)

    def subscribe(self, topics: list[str], on_assign: Any, on_revoke: Any) -> None:
        self.subscribed = (topics, on_assign, on_revoke)

    def consume(self, n: int, timeout: float) -> list[Message]:
        return self.batches.pop(0)[:n] if self.batches else []

    def assign(self, partitions: list[Any]) -> None:
        self.assigned = partitions

    def committed(self, partitions: list[Any], timeout: float) -> list[Any]:
        return [
            RdTopicPartition(p.topic, p.partition, self.committed_offsets[p.partition])
            for p in partitions
        ]

    def get_watermark_offsets(self, tp: Any, timeout: float = 1, cached: bool = False) -> Any:
        return (3, 40) if not cached else (3, 40 if tp.partition == 0 else -1001)

    def position(self, partitions: list[Any]) -> list[Any]:
        (p,) = partitions
        return [RdTopicPartition(p.topic, p.partition, self.positions.get(p.partition, -1001))]


def source(**overrides: Any) -> tuple[Source, dict[tuple[str, int], int]]:
    settings = load_settings(env={}, overrides={"kafka.topics": "in", **overrides}).kafka
    offsets: dict[tuple[str, int], int] = {}
    return Source(settings, offsets, lambda k: ConfluentConsumer(k, factory=Consumer)), offsets


def adapter(src: Source) -> Any:
    assert isinstance(src.consumer, ConfluentConsumer)
    return src.consumer


def test_config_maps_the_settings() -> None:
    settings = load_settings(
        env={}, overrides={"kafka.session_timeout_ms": 20_000, "kafka.check_crcs": False}
    ).kafka
    conf = consumer_config(settings)
    assert conf["session.timeout.ms"] == 20_000 and conf["check.crcs"] is False
    assert conf["enable.auto.commit"] is False and conf["auto.offset.reset"] == "earliest"


def test_assignment_starts_at_own_then_committed_then_earliest_offsets() -> None:
    src, offsets = source()
    src.start()
    offsets[("in", 2)] = 11
    client = adapter(src)
    consumer = client.consumer
    _, on_assign, _ = consumer.subscribed
    on_assign(consumer, [RdTopicPartition("in", p) for p in (0, 1, 2)])
    # own 11 for partition 2; partition 0: the group's committed 7; partition 1: none -> earliest 3
    assert [(p.partition, p.offset) for p in consumer.assigned] == [(0, 7), (1, 3), (2, 11)]
    assert src.assignment == [TopicPartition("in", p) for p in (0, 1, 2)]
    # every assigned partition is resumed (librdkafka keeps a pause across a rebalance, while
    # the source starts every assignment unpaused)
    assert sorted(p.partition for p in consumer.resumed) == [0, 1, 2]
    # before a record was delivered, the position is where the partition started
    assert client.position(TopicPartition("in", 1)) == 3
    consumer.positions[1] = 9
    assert client.position(TopicPartition("in", 1)) == 9
    assert client.highwater(TopicPartition("in", 0)) == 40
    assert client.highwater(TopicPartition("in", 1)) is None  # no fetch response yet


def test_poll_converts_messages_and_skips_errors() -> None:
    src, offsets = source(**{"kafka.max_poll_records": 10})
    src.start()
    consumer = adapter(src).consumer
    _, on_assign, _ = consumer.subscribed
    on_assign(consumer, [RdTopicPartition("in", p) for p in (0, 1)])
    offsets[("in", 1)] = 3  # records below the own offset are already learned
    consumer.batches = [
        [
            Message(0, 7),
            Message(1, 2),
            Message(0, 0, error=KafkaError(KafkaError._PARTITION_EOF)),
            Message(1, 3, ts=None),
            Message(0, 8),
        ]
    ]
    assert src.fetch(0) == 3
    got = {tp.partition: list(buf) for tp, buf in src.buffers.items()}
    assert [(r.offset, r.key, r.value, r.timestamp) for r in got[0]] == [
        (7, b"k7", b"v7", 5),
        (8, b"k8", b"v8", 5),
    ]
    assert [(r.topic, r.partition, r.offset, r.timestamp) for r in got[1]] == [("in", 1, 3, None)]


def test_readiness_follows_statistics_and_errors() -> None:
    src, _ = source()
    src.start()
    assert not src.broker_connected
    conf = adapter(src).consumer.conf  # librdkafka calls these callbacks
    up = {"brokers": {"b/1": {"state": "UP"}}, "cgrp": {"state": "up"}}
    conf["stats_cb"](json.dumps(up))
    assert src.broker_connected
    conf["error_cb"](KafkaError(KafkaError._ALL_BROKERS_DOWN))
    assert not src.broker_connected
    conf["stats_cb"](json.dumps({**up, "cgrp": {"state": "wait-coord"}}))
    assert not src.broker_connected  # a broker, but no group coordinator yet
    conf["stats_cb"](json.dumps(up))
    assert src.broker_connected
    conf["stats_cb"](json.dumps({"brokers": {"b/1": {"state": "CONNECT"}}}))
    assert not src.broker_connected


class HangingConsumer(Consumer):
    """librdkafka's ``close()`` that never returns (confluentinc/librdkafka#4362) until told."""

    def __init__(self, conf: dict[str, Any]) -> None:
        super().__init__(conf)
        self.release = threading.Event()
        self.entered = threading.Event()

    def close(self) -> None:
        self.entered.set()
        self.release.wait()


def test_a_close_that_never_returns_does_not_hold_the_shutdown(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The source's close returns after the deadline, says why, and drops the consumer; the
    hanging close is left on its own thread (a normal close returns at once: no error)."""
    monkeypatch.setattr(confluent, "CLOSE_SECONDS", 0.2)
    settings = load_settings(env={}, overrides={"kafka.topics": "in"}).kafka
    src = Source(settings, {}, lambda k: ConfluentConsumer(k, factory=HangingConsumer))
    src.start()
    hanging = adapter(src).consumer
    with caplog.at_level(logging.ERROR, logger=confluent.__name__):
        src.close()
    assert hanging.entered.is_set() and src.consumer is None
    assert any("has not returned" in r.getMessage() for r in caplog.records)
    hanging.release.set()

    caplog.clear()
    quick, _ = source()
    quick.start()
    closing = adapter(quick).consumer
    with caplog.at_level(logging.WARNING):
        quick.close()
    assert closing.closed and quick.consumer is None and not caplog.records


def test_an_error_in_close_reaches_the_caller() -> None:
    class Failing(Consumer):
        def close(self) -> None:
            raise KafkaException(KafkaError(KafkaError._FATAL))

    with pytest.raises(KafkaException):
        confluent.close_within(Failing({}), "consumer", seconds=5)


def test_rebalance_callbacks_stop_once_a_close_is_abandoned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """librdkafka revokes from inside close(), on close_within's thread: passed on while the
    close is waited for (leaving the group revokes), not once it was abandoned (the shutdown
    went on without it, and a late revocation would run the caller's callback meanwhile)."""
    monkeypatch.setattr(confluent, "CLOSE_SECONDS", 0.2)
    settings = load_settings(env={}, overrides={"kafka.topics": "in"}).kafka
    tp = [RdTopicPartition("in", 0)]

    class Leaving(Consumer):
        def close(self) -> None:
            self.subscribed[2](self, tp)  # the revocation, from inside close()

    calls: list[str] = []
    leaving = ConfluentConsumer(settings, factory=Leaving)
    leaving.subscribe(["in"], lambda p: calls.append("assign"), lambda p: calls.append("revoke"))
    leaving.close()
    assert calls == ["revoke"]

    calls.clear()
    hanging = ConfluentConsumer(settings, factory=HangingConsumer)
    hanging.subscribe(["in"], lambda p: calls.append("assign"), lambda p: calls.append("revoke"))
    hanging.close()
    _, on_assign, on_revoke = hanging.consumer.subscribed
    on_revoke(hanging.consumer, tp)  # librdkafka's close going on after it was abandoned
    on_assign(hanging.consumer, tp)
    hanging.consumer.release.set()
    assert calls == []
