"""The librdkafka adapters (confluent-kafka): a consumer and a producer client.

The daemon's default clients. kafka-python parses fetch responses in pure Python (11-17 us of the
loop's time and the GIL per record) and spends 29-34 us per produced message; librdkafka fetches,
parses, batches and retries in its own C threads: handing a record to the loop costs about 1 us,
``produce`` about 1.8 us (``benchmarks/results/daemon_throughput.md``).

What differs from kafka-python, and is absorbed here:

- a partition paused before a rebalance stays paused when it is assigned again (librdkafka
  keeps the pause per partition; kafka-python keeps it for a partition that stays assigned):
  every assignment resumes what it assigns, since the source starts every assignment unpaused.
  Without this, a member whose buffers were full (a backlog) when a rebalance came (another
  member killed or started) never fetched its reassigned partitions again: the "reassigned
  partitions left unconsumed" of mixing groups, seen with independent members too;
- rebalance callbacks run inside ``consume()``, on the loop's thread; ``on_assign`` must assign
  the partitions *with* their start offsets (a seek right after an assignment fails: the
  partition is not fetching yet); and since librdkafka's ``position()`` stays unknown until a
  record is delivered, every partition starts at an offset known here (own, else the group's
  committed one, else the earliest), so that the source can tell a caught-up partition from one
  not fetched yet;
- an own offset beyond the log: librdkafka resets the fetch to the earliest offset by itself; the
  records it delivers are below the own offset, so the source drops them and, seeing the own
  offset beyond the highwater (from the fetch responses, ``cached=True``: Tansu's ListOffsets for
  the end is wrong), counts the reset and seeks back to the earliest offset;
- readiness: librdkafka reconnects by itself; the broker counts as connected while its statistics
  (every second) show a broker ``UP`` and, in group mode, the group ``up``; an "all brokers down"
  error clears it at once; a SASL authentication error is kept as the :attr:`refusal` until a
  broker is up; the same statistics say how long ago each broker last sent anything
  (``rxidle``): :meth:`ConfluentConsumer.silence` is the least of them (a frozen broker keeps
  its connections ``UP``: measured, only its silence grows);
- closing: librdkafka's consumer ``close()`` can block for good (leaving the group, with a
  partition paused and resumed: confluentinc/librdkafka#4362, confluent-kafka-python#1667;
  seen once here, an independent member sat in it over five minutes at its shutdown). The
  daemon's final checkpoint and offsets are written before the close, so nothing depends on
  it: :func:`close_within` gives it :data:`CLOSE_SECONDS` on a thread of its own and lets the
  process go on without it (the group's coordinator drops the member after its session
  timeout);
- delivery: librdkafka reports only failures (``delivery.report.only.error``: a report per
  acknowledged message cost ~0.7 us of the loop's CPU each); its queue length counts every message
  neither acknowledged nor reported, which is :meth:`ConfluentProducer.in_flight`.

The mix log's reader and writer (:class:`ConfluentMixReader`, :class:`ConfluentMixWriter`): a
group member reads the one-partition mix topic at every batch while a delta is out and waits on
it every round; on the embedded broker (which answers a fetch only at its ``fetch.wait.max.ms``,
10 ms here) kafka-python's IO and sender threads and its polls cost a 2-member group more CPU
than its merges, rebases and publishes together (``benchmarks/results/group_cpu.md``).
librdkafka fetches and acknowledges in its own C threads; a poll that finds nothing costs a few
microseconds and a wait for an acknowledgement blocks on a condition, not a loop.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from itertools import repeat
from operator import attrgetter
from typing import Any, NamedTuple

import confluent_kafka
from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka import TopicPartition as RdTopicPartition
from confluent_kafka.admin import AdminClient

from streammkl.daemon.config import KafkaSettings
from streammkl.daemon.kafka.clients.protocol import (
    Output,
    Partition,
    Rebalance,
    SendFailed,
    topic_uuid,
)
from streammkl.daemon.kafka.security import librdkafka_options

log = logging.getLogger(__name__)
_topic, _partition = attrgetter("topic"), attrgetter("partition")

#: librdkafka's "no offset" (start where the group's committed offset, else the reset policy, says).
OFFSET_INVALID = confluent_kafka.OFFSET_INVALID
#: How long a metadata or watermark request may block the loop (the broker may be down).
REQUEST_TIMEOUT_S = 2.0


class Received(NamedTuple):
    """A consumed record with kafka-python's ``ConsumerRecord`` attribute names (what the
    daemon reads): ``timestamp`` in ms (``None`` when the broker gave none). A named tuple, so
    that a batch of them is built a column at a time (:func:`received`), without a Python
    call per record."""

    topic: str
    partition: int
    offset: int
    timestamp: int | None
    key: bytes | None
    value: bytes | None

    def __repr__(self) -> str:
        return f"Received({self.topic!r}, {self.partition}, {self.offset})"


_Message = confluent_kafka.Message
_new_tuple = tuple.__new__


def received(messages: list[Any]) -> list[Received]:
    """The :class:`Received` records of librdkafka messages that carry no error, in order,
    built a column at a time (measured on a batch of 2,000: ~0.1 us less per record than a
    ``Received(...)`` call per message)."""
    stamps = [ts if kind else None for kind, ts in map(_Message.timestamp, messages)]
    columns = zip(
        map(_Message.topic, messages), map(_Message.partition, messages),
        map(_Message.offset, messages), stamps, map(_Message.key, messages),
        map(_Message.value, messages), strict=True,
    )  # fmt: skip
    return list(map(_new_tuple, repeat(Received), columns))


def consumer_config(settings: KafkaSettings) -> dict[str, Any]:
    """librdkafka consumer options (the equivalents of kafka-python's)."""
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
        # a topic that appears (created late, re-created after a broker restart) is assigned
        # after the next refresh: librdkafka's default (300 s) left the consumer `assigned []`
        # for over 5 minutes (measured)
        "topic.metadata.refresh.interval.ms": settings.metadata_max_age_ms,
        # records fetched ahead of the loop, per partition (librdkafka's default: 64 MB): a loop
        # that falls behind holds at most this much of the log in memory, besides its buffers
        "queued.max.messages.kbytes": 16_384,
        "logger": logging.getLogger("streammkl.daemon.librdkafka"),
        **librdkafka_options(settings),
    }


def producer_config(settings: KafkaSettings) -> dict[str, Any]:
    """librdkafka producer options (the equivalents of kafka-python's)."""
    return {
        "bootstrap.servers": settings.bootstrap_servers,
        "client.id": f"{settings.client_id}-sink",
        "acks": "all",
        # Not idempotent, as with kafka-python: the sink re-sends failures itself.
        "enable.idempotence": False,
        "linger.ms": settings.producer_linger_ms,
        "batch.size": settings.producer_batch_bytes,
        # A message not delivered within this long fails to the delivery callback (re-sent).
        "message.timeout.ms": max(5_000, settings.request_timeout_ms),
        "request.timeout.ms": 5_000,
        "reconnect.backoff.max.ms": 1_000,
        "socket.connection.setup.timeout.ms": max(1_000, settings.bootstrap_timeout_ms),
        # librdkafka's own queue of unsent messages: bounded in bytes (default 1 GB), not only in
        # count; a full queue makes produce() raise BufferError (the sink serves, then retries)
        "queue.buffering.max.kbytes": 65_536,
        "topic.metadata.refresh.interval.ms": settings.metadata_max_age_ms,
        "logger": logging.getLogger("streammkl.daemon.librdkafka"),
        **librdkafka_options(settings),
    }


def _rd(tp: Partition, offset: int = OFFSET_INVALID) -> RdTopicPartition:
    return RdTopicPartition(tp.topic, tp.partition, offset)


def consumed(consumer: Any, max_records: int, timeout_ms: int) -> list[Any]:
    """What a librdkafka consumer has fetched (up to ``max_records`` messages), waiting up to
    ``timeout_ms`` only when it has nothing, then taking the rest that came with the first: a
    record never waits for a full batch."""
    messages = consumer.consume(max_records, 0)
    if not messages and timeout_ms > 0:
        messages = consumer.consume(1, timeout_ms / 1000.0)
        if messages and max_records > 1:
            messages += consumer.consume(max_records - 1, 0)
    return messages


#: Seconds a librdkafka consumer's ``close()`` is waited for (:func:`close_within`).
CLOSE_SECONDS = 10.0


def close_within(consumer: Any, what: str, seconds: float | None = None) -> bool:
    """``consumer.close()`` on a daemon thread, waited for ``seconds`` (:data:`CLOSE_SECONDS`);
    ``False`` (and an error logged) if it has not returned by then: it is left to finish, or
    not, while the caller goes on. An exception it raises is raised here."""
    failure: list[BaseException] = []

    def close() -> None:
        try:
            consumer.close()
        except BaseException as exc:  # re-raised on the caller's thread
            failure.append(exc)

    wait = CLOSE_SECONDS if seconds is None else seconds
    thread = threading.Thread(target=close, name=f"streammkl-close-{what}", daemon=True)
    thread.start()
    thread.join(wait)
    if thread.is_alive():
        log.error(
            "librdkafka's %s close() has not returned in %.0f s (a known librdkafka hang); "
            "going on without it: nothing was left to it (checkpoints and offsets are written "
            "before it), and a group's coordinator drops a member that left this way after "
            "its session timeout",
            what, wait,
        )  # fmt: skip
        return False
    if failure:
        raise failure[0]
    return True


class ConfluentConsumer:
    """:class:`~streammkl.daemon.kafka.clients.protocol.ConsumerClient` over a
    ``confluent_kafka.Consumer`` (built by ``factory`` from a librdkafka configuration dict)."""

    def __init__(
        self, settings: KafkaSettings, factory: Callable[..., Any] = confluent_kafka.Consumer
    ) -> None:
        conf = consumer_config(settings)
        conf["stats_cb"] = self._on_stats
        conf["error_cb"] = self._on_error
        self._group = False
        self._abandoned = False  # a close() that did not return in time (close_within)
        self._connected = False
        self._starts: dict[Partition, int | None] = {}
        self._refusal: str | None = None
        self._last_error: str | None = None
        self._silence: float | None = None
        self._admin: AdminClient | None = None  # created when a topic id is first asked
        self._admin_conf = {
            k: v for k, v in conf.items() if k in ("bootstrap.servers", "client.id", "logger")
        } | librdkafka_options(settings)
        # librdkafka connects in the background: an unreachable broker only delays assignment
        self.consumer = factory(conf)

    @property
    def connected(self) -> bool:
        return self._connected

    @property
    def refusal(self) -> str | None:
        return self._refusal

    @property
    def last_error(self) -> str | None:
        return self._last_error

    def silence(self) -> float | None:
        return self._silence

    def _on_stats(self, text: str) -> None:
        try:
            stats = json.loads(text)
        except ValueError:
            return
        brokers = stats.get("brokers", {}).values()
        idle = [b["rxidle"] for b in brokers if b.get("state") == "UP" and b.get("rxidle", -1) >= 0]
        self._silence = min(idle) / 1e6 if idle else None
        up = any(b.get("state") == "UP" for b in brokers)
        if up:
            self._refusal = None
        if up and self._group:
            up = stats.get("cgrp", {}).get("state") == "up"
        self._connected = up

    def _on_error(self, err: RdKafkaError) -> None:
        code = err.code() if hasattr(err, "code") else None
        if code in (RdKafkaError._ALL_BROKERS_DOWN, RdKafkaError._TRANSPORT):
            self._connected = False
        text = err.str() if hasattr(err, "str") else str(err)
        if code == RdKafkaError._AUTHENTICATION:
            self._refusal = text
        if code != RdKafkaError._ALL_BROKERS_DOWN:  # says less than the error before it
            self._last_error = text
        log.info("librdkafka: %s", err)

    def subscribe(self, topics: list[str], on_assign: Rebalance, on_revoke: Rebalance) -> None:
        self._group = True

        # librdkafka revokes from inside close(), which runs on a thread of its own
        # (close_within): passed on while the close is waited for, not once it was abandoned
        # (the caller's shutdown went on without it)
        def assigned(
            consumer: confluent_kafka.Consumer, partitions: list[RdTopicPartition]
        ) -> None:
            if not self._abandoned:
                on_assign([Partition(p.topic, p.partition) for p in partitions])

        def revoked(consumer: confluent_kafka.Consumer, partitions: list[RdTopicPartition]) -> None:
            if not self._abandoned:
                on_revoke([Partition(p.topic, p.partition) for p in partitions])

        self.consumer.subscribe(topics, on_assign=assigned, on_revoke=revoked)

    def start_assigned(self, starts: Mapping[Partition, int | None]) -> None:
        # Unresolvable (the broker went away): librdkafka resolves it, and the partition
        # counts as not caught up until it delivers.
        resolved = dict(starts)
        missing = [tp for tp, own in starts.items() if own is None]
        if missing:
            try:
                committed = self.consumer.committed(
                    [_rd(tp) for tp in missing], timeout=REQUEST_TIMEOUT_S
                )
                for tp, c in zip(missing, committed, strict=True):
                    resolved[tp] = c.offset if c.offset >= 0 else self.beginning(tp)
            except KafkaException as exc:
                log.info("could not resolve start offsets (%s): librdkafka will", exc)
        self._starts = resolved
        self.consumer.assign(
            [_rd(tp, OFFSET_INVALID if at is None else at) for tp, at in resolved.items()]
        )
        if resolved:  # librdkafka keeps a partition paused across a rebalance and reassignment
            self.consumer.resume([_rd(tp) for tp in resolved])

    def assign(self, starts: Mapping[Partition, int | None]) -> None:
        self.start_assigned(starts)

    def partitions(self, topic: str) -> Iterable[int]:
        try:
            meta = self.consumer.list_topics(topic, timeout=REQUEST_TIMEOUT_S)
        except KafkaException as exc:
            log.info("no metadata for %s: %s", topic, exc)
            return ()
        info = meta.topics.get(topic)
        if info is None or info.error is not None:
            return ()
        return sorted(info.partitions)

    def topic_missing(self, topic: str) -> bool:
        try:
            meta = self.consumer.list_topics(topic, timeout=REQUEST_TIMEOUT_S)
        except KafkaException:
            return False
        info = meta.topics.get(topic)
        return info is None or (
            info.error is not None and info.error.code() == RdKafkaError.UNKNOWN_TOPIC_OR_PART
        )

    #: librdkafka's metadata (``list_topics``' ``TopicMetadata``, confluent-kafka 2.16) holds
    #: no topic ids: an admin client asks (DescribeTopics).
    topic_id_is_a_request = True

    def topic_id(self, topic: str) -> str | None:
        try:
            if self._admin is None:
                self._admin = AdminClient(self._admin_conf)
            futures = self._admin.describe_topics(
                TopicCollection([topic]), request_timeout=REQUEST_TIMEOUT_S
            )
            found = futures[topic].result(timeout=REQUEST_TIMEOUT_S + 0.5)
        except (KafkaException, TimeoutError, KeyError, ValueError) as exc:
            log.debug("no topic id for %s: %s", topic, exc)
            return None
        tid = found.topic_id
        if tid is None:
            return None
        high, low = tid.get_most_significant_bits(), tid.get_least_significant_bits()
        return topic_uuid(uuid.UUID(int=((high % (1 << 64)) << 64) | (low % (1 << 64))))

    def poll(self, timeout_ms: int, max_records: int) -> Mapping[Partition, list[Any]]:
        """Whatever librdkafka has fetched (up to ``max_records``), waiting up to ``timeout_ms``
        only when it has nothing: a record never waits for a full batch. A batch of one
        partition without errors (the usual one) is taken a column at a time
        (:func:`received`)."""
        messages = consumed(self.consumer, max_records, timeout_ms)
        if not messages:
            return {}
        self._connected = True  # data arrived: the broker is there
        # (librdkafka's own messages: its methods' descriptors called directly, ~20 ns a call
        # against ~80 by name; another kind, a scripted consumer's, takes the general path)
        if type(messages[0]) is _Message and not any(map(_Message.error, messages)):
            records = received(messages)
            topics, parts = set(map(_topic, records)), set(map(_partition, records))
            if len(topics) == 1 and len(parts) == 1:
                return {Partition(records[0].topic, records[0].partition): records}
            out: dict[Partition, list[Any]] = {}
            for rec in records:
                tp = Partition(rec.topic, rec.partition)
                part = out.get(tp)
                if part is None:
                    part = out[tp] = []
                part.append(rec)
            return out
        return self._walk(messages)

    def _walk(self, messages: list[Any]) -> dict[Partition, list[Any]]:
        """:meth:`poll`'s records of a batch with errors (end-of-partition events, ...),
        message by message."""
        out: dict[Partition, list[Any]] = {}
        keys: dict[tuple[str, int], Partition] = {}
        for m in messages:
            err = m.error()
            if err is not None:
                if err.code() != RdKafkaError._PARTITION_EOF:
                    log.info("consume: %s", err)
                continue
            topic, part = m.topic(), m.partition()
            tp = keys.get((topic, part))
            if tp is None:
                tp = keys[(topic, part)] = Partition(topic, part)
                out[tp] = []
            kind, ts = m.timestamp()
            out[tp].append(
                Received(topic, part, m.offset(), ts if kind else None, m.key(), m.value())
            )
        return out

    def beginning(self, tp: Partition) -> int:
        low, _ = self.consumer.get_watermark_offsets(_rd(tp), timeout=REQUEST_TIMEOUT_S)
        return max(int(low), 0)

    def seek(self, tp: Partition, offset: int) -> None:
        self.consumer.seek(_rd(tp, offset))

    def highwater(self, tp: Partition) -> int | None:
        try:
            _, high = self.consumer.get_watermark_offsets(_rd(tp), cached=True)
        except KafkaException:
            return None
        return None if high < 0 else int(high)

    def position(self, tp: Partition) -> int | None:
        # After the last record delivered; before any, the offset the partition started at.
        try:
            (p,) = self.consumer.position([_rd(tp)])
        except KafkaException:
            return None
        return int(p.offset) if p.offset >= 0 else self._starts.get(tp)

    def pause(self, tp: Partition) -> None:
        self.consumer.pause([_rd(tp)])

    def resume(self, tp: Partition) -> None:
        self.consumer.resume([_rd(tp)])

    def commit(self, offsets: Mapping[Partition, int], blocking: bool) -> None:
        try:
            marked = [_rd(tp, at) for tp, at in offsets.items()]
            self.consumer.commit(offsets=marked, asynchronous=not blocking)
        except KafkaException as exc:
            log.info("offset commit skipped: %s", exc)

    def close(self) -> None:
        self._abandoned = not close_within(self.consumer, "consumer")


class ConfluentProducer:
    """:class:`~streammkl.daemon.kafka.clients.protocol.ProducerClient` over a
    ``confluent_kafka.Producer`` (built by ``factory`` from a librdkafka configuration dict).

    :meth:`produce` *is* librdkafka's ``produce`` (no Python frame in between: it is called once
    per prediction).
    """

    def __init__(
        self, settings: KafkaSettings, factory: Callable[..., Any] = confluent_kafka.Producer
    ) -> None:
        conf = producer_config(settings)
        conf["on_delivery"] = self._on_delivery
        conf["delivery.report.only.error"] = True
        self.producer = factory(conf)
        self.produce: Callable[..., None] = self.producer.produce
        self._failed: list[Output] = []
        self._error: BaseException | None = None

    def _on_delivery(self, err: RdKafkaError | None, msg: confluent_kafka.Message) -> None:
        # Runs inside poll()/flush(), on the loop's thread; failures only.
        if err is None:  # (not configured to happen)
            return
        # a delivered message has a topic; its headers are the (str, bytes) pairs we sent
        topic, headers = msg.topic() or "", tuple(msg.headers() or ())
        self._failed.append(Output(topic, msg.value() or b"", msg.key(), headers))  # type: ignore[arg-type]
        self._error = KafkaException(err)

    def serve(self, timeout: float) -> None:
        self.producer.poll(timeout)

    def failures(self) -> tuple[list[Output], BaseException | None]:
        failed, self._failed = self._failed, []
        error, self._error = self._error, None
        return failed, error

    def in_flight(self) -> int:
        # not yet acknowledged, or a failure report not yet served
        return len(self.producer)

    def flush(self, timeout: float) -> None:
        self.producer.flush(timeout)

    def abandon(self) -> None:
        try:  # every message it still holds fails to our callback, to be sent again
            self.producer.purge(in_queue=True, in_flight=True)
            # flush, not poll(0): the reports of purged in-flight messages come from the
            # broker threads, possibly after this call; flush serves them as they arrive
            self.producer.flush(1.0)
        except Exception as exc:
            log.debug("purging the old producer: %s", exc)

    def close(self) -> None:
        pass  # librdkafka closes on garbage collection (after the sink's flush)


# -- the mix log ---------------------------------------------------------------------------------


def mix_config(settings: KafkaSettings) -> dict[str, Any]:
    """The librdkafka options of the mix log's reader and writer from the ``[kafka]`` settings
    (the broker, TLS and SASL: :func:`~streammkl.daemon.kafka.security.librdkafka_options`)."""
    return {
        "bootstrap.servers": settings.bootstrap_servers,
        "client.id": f"{settings.client_id}-mix",
        "socket.connection.setup.timeout.ms": max(1_000, settings.bootstrap_timeout_ms),
        "reconnect.backoff.max.ms": 1_000,
        "logger": logging.getLogger("streammkl.daemon.librdkafka"),
        **librdkafka_options(settings),
    }


class ConfluentMixReader:
    """:class:`~streammkl.daemon.kafka.clients.protocol.MixLogReader` over a librdkafka consumer
    (assigned, not subscribed: no group is joined; ``group.id`` is only librdkafka's
    requirement)."""

    def __init__(
        self, settings: KafkaSettings, topic: str, max_record_bytes: int, max_wait_ms: int
    ) -> None:
        config = {
            **mix_config(settings),
            "group.id": f"streammkl-mix-reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": max_wait_ms,
            "fetch.min.bytes": 1,
            "fetch.max.bytes": max_record_bytes,
            "max.partition.fetch.bytes": max_record_bytes,
            "receive.message.max.bytes": max_record_bytes + 1_000_000,
            "enable.partition.eof": False,
        }
        self.consumer: Any = confluent_kafka.Consumer(config)
        self.topic = topic
        self._start = 0
        self._assign(confluent_kafka.OFFSET_BEGINNING)

    def _assign(self, offset: int) -> None:
        self._start = max(offset, 0)
        self.consumer.assign([RdTopicPartition(self.topic, 0, offset)])

    def seek(self, offset: int) -> None:
        try:
            self.consumer.seek(RdTopicPartition(self.topic, 0, offset))
        except KafkaException:  # not fetching yet: assign it there
            self._assign(offset)

    def poll(self, timeout_ms: int) -> list[Any]:
        """Whatever librdkafka has fetched, waiting up to ``timeout_ms`` only when it has
        nothing (then the rest that came with the first)."""
        messages = consumed(self.consumer, 1_000, timeout_ms)
        out: list[Any] = []
        for m in messages:
            err = m.error()
            if err is not None:
                log.info("mix topic: consume: %s", err)
                continue
            kind, ts = m.timestamp()
            out.append(
                Received(m.topic(), m.partition(), m.offset(), ts if kind else None, m.key(),
                         m.value())
            )  # fmt: skip
        return out

    def highwater(self) -> int | None:
        try:
            _, high = self.consumer.get_watermark_offsets(
                RdTopicPartition(self.topic, 0), cached=True
            )
        except KafkaException:
            return None
        return None if high < 0 else int(high)

    def position(self) -> int | None:
        try:
            (p,) = self.consumer.position([RdTopicPartition(self.topic, 0)])
        except KafkaException:
            return None
        return int(p.offset) if p.offset >= 0 else self._start

    def close(self) -> None:
        close_within(self.consumer, "mix reader")


class Delivery:
    """:class:`~streammkl.daemon.kafka.clients.protocol.Acknowledgement` of one record a
    :class:`ConfluentMixWriter` sent (librdkafka's delivery callback sets it)."""

    def __init__(self, producer: confluent_kafka.Producer) -> None:
        self._producer = producer
        self.done = False
        self.error: Any = None

    def __call__(self, err: Any, _msg: Any) -> None:  # librdkafka's delivery callback
        self.done, self.error = True, err

    @property
    def is_done(self) -> bool:
        if not self.done:
            self._producer.poll(0)  # serves the delivery callbacks
        return self.done

    def wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.done:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SendFailed(f"not acknowledged within {timeout} s")
            self._producer.poll(min(left, 1.0))
        if self.error is not None:
            raise SendFailed(str(self.error))


class ConfluentMixWriter:
    """:class:`~streammkl.daemon.kafka.clients.protocol.MixLogWriter` over a librdkafka producer
    (idempotent, every acknowledgement awaited by its :class:`Delivery`)."""

    def __init__(self, settings: KafkaSettings, topic: str, max_record_bytes: int) -> None:
        config = {
            **mix_config(settings),
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 0,
            "message.max.bytes": max_record_bytes + 1_000_000,
            "request.timeout.ms": max(5_000, settings.request_timeout_ms),
            "message.timeout.ms": max(30_000, settings.request_timeout_ms),
        }
        self.producer = confluent_kafka.Producer(config)
        self.topic = topic

    def send(self, key: bytes, value: bytes) -> Delivery:
        delivery = Delivery(self.producer)
        try:
            self.producer.produce(self.topic, value=value, key=key, partition=0,
                                  on_delivery=delivery)  # fmt: skip
        except (KafkaException, BufferError) as exc:
            raise SendFailed(f"produce: {exc}") from exc
        self.producer.poll(0)
        return delivery

    def close(self, timeout: float) -> None:
        self.producer.flush(timeout)
