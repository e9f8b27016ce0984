"""The librdkafka adapter's consumed records, built a column at a time, against the real broker."""

from __future__ import annotations

from typing import Any

import confluent_kafka
import pytest

from streammkl.daemon.config import load_settings
from streammkl.daemon.kafka.clients.confluent import ConfluentConsumer, Received, received
from streammkl.daemon.kafka.clients.protocol import Partition
from tests.daemon_kafka import create_topic, produce, unique

pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group("kafka")]
KAFKA = load_settings(env={}).kafka


def one_by_one(messages: list[Any]) -> dict[Partition, list[tuple[Any, ...]]]:
    """The reference: each message's fields read by its own calls, grouped by partition in the
    order the partitions first appear; error events skipped."""
    out: dict[Partition, list[tuple[Any, ...]]] = {}
    for m in messages:
        if m.error() is not None:
            continue
        kind, ts = m.timestamp()
        out.setdefault(Partition(m.topic(), m.partition()), []).append(
            (m.topic(), m.partition(), m.offset(), ts if kind else None, m.key(), m.value())
        )
    return out


def consume_all(bootstrap: str, topic: str, partitions: int, n: int, eof: bool) -> list[Any]:
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": unique("g"), "enable.partition.eof": eof,
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
    })  # fmt: skip
    consumer.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[Any] = []
    try:
        for _ in range(200):
            got += consumer.consume(500, 0.5)
            if sum(m.error() is None for m in got) >= n and (not eof or len(got) > n):
                break
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("partitions", [1, 3])
def test_a_batch_is_the_records_one_call_per_field_gives(
    kafka_bootstrap: str, partitions: int
) -> None:
    """``received`` (the column-at-a-time build) and the adapter's ``poll`` give, field for
    field and in order, what reading each message by its own calls gives: one partition or
    several interleaved, keys present or not, with end-of-partition events in the batch (the
    per-message walk) or without."""
    topic = unique("received")
    create_topic(kafka_bootstrap, topic, partitions)
    n = 300
    values = [b'{"x": {"a": %d.5}, "y": true}' % i for i in range(n)]
    produce(kafka_bootstrap, topic, values, partition_of=lambda i: i % partitions)
    for eof in (False, True):
        messages = consume_all(kafka_bootstrap, topic, partitions, n, eof)
        want = one_by_one(messages)
        assert sum(map(len, want.values())) == n
        assert any(m.error() is not None for m in messages) == eof
        if not eof:
            built = received(messages)
            assert all(type(r) is Received for r in built)
            assert [tuple(r) for r in built] == [rec for part in want.values() for rec in part]
        adapter = ConfluentConsumer(KAFKA, factory=lambda conf, batch=messages: Batch(batch))
        assert not adapter.connected
        got = adapter.poll(0, len(messages))
        assert list(got) == list(want)  # the partitions, in the order they first appear
        assert {tp: [tuple(r) for r in recs] for tp, recs in got.items()} == want
        assert adapter.connected


class Batch:
    """A consumer whose ``consume`` hands out one batch of messages (then nothing)."""

    def __init__(self, messages: list[Any]) -> None:
        self.messages = messages

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        out, self.messages = self.messages[:num_messages], self.messages[num_messages:]
        return out
