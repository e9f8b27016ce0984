"""The daemon's default consumer: librdkafka (confluent-kafka), with :class:`Source`'s guarantees.

Why not kafka-python here: it parses fetch responses in pure Python, 11-17 us of the loop's
time (and the GIL) per record, more than the compiled learning round itself; librdkafka
fetches and parses in its own C threads, and handing a record to the loop costs about 1 us
(``benchmarks/results/daemon_throughput.md``). ``kafka.consumer_client = "kafka-python"``
switches back.

Everything that decides *what* is learned stays in :class:`Source` (own offsets on assignment,
checkpoint on revocation, records below the next expected offset dropped, the deterministic
merge, resets when an own offset is beyond the highwater). This class only speaks librdkafka:

- assignment: the rebalance callbacks run inside ``consume()``, on the loop's thread (unlike
  kafka-python's, on its IO thread); ``on_assign`` assigns the partitions *with* their own
  offsets (a seek right after an assignment fails in librdkafka: the partition is not fetching
  yet); partitions without one start at the group's committed offset, else the earliest;
- an own offset beyond the log: librdkafka resets the fetch to the earliest offset by itself
  (``auto.offset.reset``); the records it then delivers are below the own offset, so
  :meth:`Source._buffer` drops them and :meth:`Source._check_highwater` (highwater from the
  fetch responses, ``cached=True``: Tansu's ListOffsets for the end is wrong, docs/daemon.md) warns,
  counts and seeks back to the earliest offset: the dropped records are fetched again;
- readiness: librdkafka reconnects by itself; the broker counts as connected while its
  statistics (every second) show a broker ``UP`` and, in group mode, the group ``up``; an
  "all brokers down" error clears it at once.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as RdTopicPartition
from kafka import TopicPartition

from streammkl.daemon.config import KafkaSettings
from streammkl.daemon.kafka_security import librdkafka_options
from streammkl.daemon.source import Source

log = logging.getLogger(__name__)

#: librdkafka's "no offset" (start where the group's committed offset, else the reset policy, says).
OFFSET_INVALID = confluent_kafka.OFFSET_INVALID
#: How long a metadata or watermark request may block the loop (the broker may be down).
REQUEST_TIMEOUT_S = 2.0


class Received:
    """A consumed record with kafka-python's ``ConsumerRecord`` attribute names (what the
    daemon reads): ``timestamp`` in ms (``None`` when the broker gave none)."""

    __slots__ = ("key", "offset", "partition", "timestamp", "topic", "value")

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        timestamp: int | None,
        key: bytes | None,
        value: bytes | None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.value = value

    def __repr__(self) -> str:
        return f"Received({self.topic!r}, {self.partition}, {self.offset})"


def rdkafka_consumer_config(settings: KafkaSettings) -> dict[str, Any]:
    """librdkafka options equivalent to :func:`~streammkl.daemon.source.consumer_config`."""
    return {
        "bootstrap.servers": settings.bootstrap_servers,
        "group.id": settings.group_id,
        "client.id": settings.client_id,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": settings.session_timeout_ms,
        "heartbeat.interval.ms": settings.heartbeat_interval_ms,
        "max.poll.interval.ms": max(settings.max_poll_interval_ms, settings.session_timeout_ms),
        "socket.connection.setup.timeout.ms": max(1_000, settings.bootstrap_timeout_ms),
        "reconnect.backoff.max.ms": 1_000,
        "check.crcs": settings.check_crcs,
        "statistics.interval.ms": 1_000,
        # records fetched ahead of the loop, per partition (librdkafka's default: 64 MB): a loop
        # that falls behind holds at most this much of the log in memory, besides its buffers
        "queued.max.messages.kbytes": 16_384,
        "logger": logging.getLogger("streammkl.daemon.librdkafka"),
        **librdkafka_options(settings),
    }


def _rd(tp: TopicPartition, offset: int = OFFSET_INVALID) -> RdTopicPartition:
    return RdTopicPartition(tp.topic, tp.partition, offset)


class RdkafkaSource(Source):
    """:class:`Source` on a confluent-kafka consumer (same interface and guarantees).

    Parameters as :class:`Source`; ``consumer_factory`` builds the consumer from a librdkafka
    configuration dict (default: ``confluent_kafka.Consumer``).
    """

    default_factory: Callable[..., Any] = confluent_kafka.Consumer

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._connected = False
        self._closing = False
        self._starts: dict[TopicPartition, int | None] = {}

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> RdkafkaSource:
        """Create the consumer and subscribe (or assign); librdkafka connects in the
        background, so an unreachable broker only delays the assignment."""
        conf = rdkafka_consumer_config(self.settings)
        conf["stats_cb"] = self._on_stats
        conf["error_cb"] = self._on_error
        self.consumer = self.consumer_factory(conf)
        if self.group:
            self.consumer.subscribe(
                list(self.settings.topics), on_assign=self._on_assign, on_revoke=self._on_revoke
            )
        else:
            self._refresh_manual()
        return self

    def close(self) -> None:
        """Leave the group and close (no commit; revocation here does not checkpoint: the
        runner checkpointed before closing)."""
        if self.consumer is not None:
            self._closing = True
            try:
                self.consumer.close()
            except Exception as exc:  # closing must not mask the shutdown path
                log.warning("consumer close failed: %s", exc)
            finally:
                self._closing = False
            self.consumer = None

    @property
    def broker_connected(self) -> bool:
        return self.consumer is not None and self._connected

    def _on_stats(self, text: str) -> None:
        try:
            stats = json.loads(text)
        except ValueError:
            return
        up = any(b.get("state") == "UP" for b in stats.get("brokers", {}).values())
        if up and self.group:
            up = stats.get("cgrp", {}).get("state") == "up"
        self._connected = up

    def _on_error(self, err: Any) -> None:
        code = err.code() if hasattr(err, "code") else None
        if code in (RdKafkaError._ALL_BROKERS_DOWN, RdKafkaError._TRANSPORT):
            self._connected = False
        log.info("librdkafka: %s", err)

    # -- rebalance (inside consume(), on the loop's thread) -----------------------------------

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        self._assigned([TopicPartition(p.topic, p.partition) for p in partitions])

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        tps = [TopicPartition(p.topic, p.partition) for p in partitions]
        if self._closing:  # the runner checkpointed before closing
            for tp in tps:
                self.buffers.pop(tp, None)
            return
        self._revoked(tps)

    def _start_at(self, starts: dict[TopicPartition, int | None]) -> None:
        # Every partition starts at an offset known here, because librdkafka's position()
        # stays unknown until a record is delivered, and the merge must tell a caught-up
        # partition (start = highwater) from one not fetched yet: the own offset, else the
        # group's committed one, else the earliest. Unresolvable (the broker went away):
        # librdkafka resolves it, and the partition counts as not caught up until it delivers.
        resolved = dict(starts)
        missing = [tp for tp, own in starts.items() if own is None]
        if missing:
            try:
                committed = self.consumer.committed(
                    [_rd(tp) for tp in missing], timeout=REQUEST_TIMEOUT_S
                )
                for tp, c in zip(missing, committed, strict=True):
                    resolved[tp] = c.offset if c.offset >= 0 else self._beginning(tp)
            except KafkaException as exc:
                log.info("could not resolve start offsets (%s): librdkafka will", exc)
        self._starts = resolved
        self.consumer.assign(
            [_rd(tp, OFFSET_INVALID if at is None else at) for tp, at in resolved.items()]
        )

    def _partitions(self, topic: str) -> Iterable[int]:
        try:
            meta = self.consumer.list_topics(topic, timeout=REQUEST_TIMEOUT_S)
        except KafkaException as exc:
            log.info("no metadata for %s: %s", topic, exc)
            return ()
        info = meta.topics.get(topic)
        if info is None or info.error is not None:
            return ()
        return sorted(info.partitions)

    def _assign_manual(self, partitions: list[TopicPartition]) -> None:
        pass  # _start_at assigns them, with their offsets

    # -- positions ----------------------------------------------------------------------------

    def _beginning(self, tp: TopicPartition) -> int:
        low, _ = self.consumer.get_watermark_offsets(_rd(tp), timeout=REQUEST_TIMEOUT_S)
        return max(int(low), 0)

    def _seek(self, tp: TopicPartition, offset: int) -> None:
        self.consumer.seek(_rd(tp, offset))

    def _highwater(self, tp: TopicPartition) -> int | None:
        try:
            _, high = self.consumer.get_watermark_offsets(_rd(tp), cached=True)
        except KafkaException:
            return None
        return None if high < 0 else int(high)

    def _position(self, tp: TopicPartition) -> int | None:
        # After the last record delivered; before any, the offset the partition started at.
        try:
            (p,) = self.consumer.position([_rd(tp)])
        except KafkaException:
            return None
        return int(p.offset) if p.offset >= 0 else self._starts.get(tp)

    def _pause(self, tp: TopicPartition) -> None:
        self.consumer.pause([_rd(tp)])

    def _resume(self, tp: TopicPartition) -> None:
        self.consumer.resume([_rd(tp)])

    # -- fetching -----------------------------------------------------------------------------

    def _poll(self, timeout_ms: int) -> dict[TopicPartition, list[Any]]:
        """Whatever librdkafka has fetched (up to ``max_poll_records``), waiting up to
        ``timeout_ms`` only when it has nothing: a record never waits for a full batch."""
        limit = self.settings.max_poll_records
        consume = self.consumer.consume
        messages = consume(limit, 0)
        if not messages and timeout_ms > 0:
            messages = consume(1, timeout_ms / 1000.0)
            if messages and limit > 1:
                messages += consume(limit - 1, 0)
        out: dict[TopicPartition, list[Any]] = {}
        keys: dict[tuple[str, int], TopicPartition] = {}
        for m in messages:
            err = m.error()
            if err is not None:
                if err.code() != RdKafkaError._PARTITION_EOF:
                    log.info("consume: %s", err)
                continue
            topic, part = m.topic(), m.partition()
            tp = keys.get((topic, part))
            if tp is None:
                tp = keys[(topic, part)] = TopicPartition(topic, part)
                out[tp] = []
            kind, ts = m.timestamp()
            out[tp].append(
                Received(topic, part, m.offset(), ts if kind else None, m.key(), m.value())
            )
        if messages:
            self._connected = True  # data arrived: the broker is there
        return out

    def _commit(self, offsets: dict[TopicPartition, int], blocking: bool) -> None:
        try:
            marked = [_rd(tp, at) for tp, at in offsets.items()]
            self.consumer.commit(offsets=marked, asynchronous=not blocking)
        except KafkaException as exc:
            log.info("offset commit skipped: %s", exc)
