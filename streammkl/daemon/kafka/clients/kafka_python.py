"""The kafka-python adapters: :class:`KafkaPythonConsumer`, :class:`KafkaPythonProducer`, and
the mix log's :class:`KafkaPythonMixReader` and :class:`KafkaPythonMixWriter`.

kafka-python parses fetch responses and accumulates produced records in pure Python (11-17 us of
the loop's time per consumed record, ~30 us per produced one: ``benchmarks/results/
daemon_throughput.md``), so the daemon's default is librdkafka (:mod:`.confluent`); this client is
``kafka.consumer_client = "kafka-python"`` / ``kafka.producer_client = "kafka-python"``.
Rebalance callbacks run on kafka-python's IO thread.

kafka-python creates its consumer only once it has bootstrapped; when the broker refuses the
credentials it says only "Unable to bootstrap", the SASL error going to its own log:
:class:`RefusalWatch` reads that log while the consumer is created, so that the refusal is
raised as :class:`~streammkl.daemon.kafka.clients.protocol.ClientRefused`. That log has the
error only if the broker's answer was read before its close: Kafka waits 100 ms
(``connection.failed.authentication.delay.ms``), and kafka-python 3.0's transport drops bytes read
together with a close.

Three reads of kafka-python's internals remain, all here and all guarded (a changed layout
falls back or does nothing): :func:`unpark` (its paused-then-resumed partitions stall forever:
no public call restores the records a pause parked), :func:`fetch_position` (the public
``position()`` first refreshes committed offsets and validates positions, network round trips,
and the source asks for the position while it interleaves partitions) and :func:`last_answer`
(when a broker last sent anything: no public call says it, and a frozen broker keeps its
connections). Checked against
kafka-python 3.0.12; ``tests/test_daemon_kafka.py``'s paused-backlog test on the real broker
stalls without :func:`unpark`.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from kafka import ConsumerRebalanceListener, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError, OffsetOutOfRangeError, SaslAuthenticationFailedError
from kafka.structs import OffsetAndMetadata

from streammkl.daemon.config import KafkaSettings
from streammkl.daemon.kafka.clients.protocol import (
    ClientRefused,
    ClientUnavailable,
    OffsetsOutOfRange,
    Output,
    Partition,
    Rebalance,
    SendFailed,
    topic_uuid,
)
from streammkl.daemon.kafka.security import kafka_python_options

log = logging.getLogger(__name__)


def consumer_config(settings: KafkaSettings) -> dict[str, Any]:
    """kafka-python consumer options derived from the settings."""
    return {
        "bootstrap_servers": settings.bootstrap_servers.split(","),
        "group_id": settings.group_id,
        "client_id": settings.client_id,
        "enable_auto_commit": False,
        # Without an own offset: the group's committed one, else the earliest. An own offset
        # beyond the highwater is detected (and counted) by the source itself.
        "auto_offset_reset": "earliest",
        # A missing input topic stays missing (the daemon says so), as with librdkafka: a
        # consumer creating it would hide a misspelt name behind an empty topic
        "allow_auto_create_topics": False,
        "session_timeout_ms": settings.session_timeout_ms,
        "heartbeat_interval_ms": settings.heartbeat_interval_ms,
        "max_poll_interval_ms": settings.max_poll_interval_ms,
        "max_poll_records": settings.max_poll_records,
        "request_timeout_ms": max(settings.request_timeout_ms, settings.session_timeout_ms + 1000),
        "reconnect_backoff_max_ms": 1000,
        "bootstrap_timeout_ms": settings.bootstrap_timeout_ms,
        "check_crcs": settings.check_crcs,
        # a topic that appears (created late, re-created after a broker restart) is assigned
        # after the next refresh (kafka-python's default: 5 minutes)
        "metadata_max_age_ms": settings.metadata_max_age_ms,
        **kafka_python_options(settings),
    }


def producer_config(settings: KafkaSettings) -> dict[str, Any]:
    """kafka-python producer options: acks=all, bounded blocking, no idempotence."""
    return {
        "bootstrap_servers": settings.bootstrap_servers.split(","),
        "client_id": f"{settings.client_id}-sink",
        "acks": "all",
        # An idempotent producer is broken for good by a Tansu restart; the sink re-sends itself.
        "enable_idempotence": False,
        "linger_ms": settings.producer_linger_ms,
        "batch_size": settings.producer_batch_bytes,
        "max_block_ms": 2_000,  # send() must not stall the loop for a minute (broker down)
        "request_timeout_ms": 5_000,
        "retries": 2,
        "reconnect_backoff_max_ms": 1_000,
        "bootstrap_timeout_ms": settings.bootstrap_timeout_ms,
        "metadata_max_age_ms": settings.metadata_max_age_ms,
        **kafka_python_options(settings),
    }


# -- kafka-python internals (see the module docstring) ---------------------------------------


def unpark(consumer: KafkaConsumer) -> None:
    """Work around a kafka-python 3.0 bug that stalls a paused-then-resumed partition forever.

    When a partition is paused with fetched records not yet drained, kafka-python parks them
    and restores them only when its in-line slot ``_next_partition_records`` *is None*; but a
    drained slot keeps an exhausted (falsy) object, so the parked records never come back and
    the partition is never fetched again (measured: a 4 x 10k backlog stalled at offset
    10,000, the pause threshold). Emptying the drained slot lets the restore run. Internals,
    guarded: does nothing if the client's layout differs.
    """
    fetcher = getattr(consumer, "_fetcher", None)
    current = getattr(fetcher, "_next_partition_records", None)
    if current is not None and not current and getattr(fetcher, "_paused_partition_records", None):
        fetcher._next_partition_records = None  # type: ignore[union-attr]


def fetch_position(consumer: KafkaConsumer, tp: TopicPartition) -> int | None:
    """The next offset kafka-python will fetch for ``tp`` as it holds it now (``None``: not
    known yet), without the public ``position()``'s refresh.

    Raises
    ------
    LookupError
        When the client's layout differs, or ``tp`` is not assigned (ask ``position()``).
    """
    assignment = getattr(getattr(consumer, "_subscription", None), "assignment", None)
    state = assignment.get(tp) if isinstance(assignment, dict) else None
    if state is None or not hasattr(state, "position"):
        raise LookupError(f"no fetch state for {tp}")
    return None if state.position is None else int(state.position.offset)


def last_answer(consumer: KafkaConsumer) -> float | None:
    """When (``time.monotonic()``) a broker last sent anything to ``consumer``, over its
    connections that completed their set-up (so did receive); ``None`` when none has, or the
    client's layout differs."""
    conns = getattr(getattr(consumer, "_manager", None), "_conns", None)
    if not isinstance(conns, dict):
        return None
    try:
        reads = [
            float(c.transport.last_read) for c in list(conns.values()) if c.connected
        ]  # fmt: skip
    except (AttributeError, TypeError, ValueError):
        return None
    return max(reads, default=None)


class RefusalWatch(logging.Filter):
    """Keeps the SASL authentication errors kafka-python logs on its connection logger (see the
    module docstring); lets through only what the logger's configured level would have.

    Parameters
    ----------
    passes
        The lowest level that reaches the handlers (the logger's level before the watch).
    """

    LOGGER = "kafka.net.connection"

    def __init__(self, passes: int) -> None:
        super().__init__()
        self.passes = passes
        self.refusal: str | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        for arg in record.args if isinstance(record.args, tuple) else ():
            if isinstance(arg, SaslAuthenticationFailedError):
                self.refusal = str(arg.args[0]) if arg.args else str(arg)
        return record.levelno >= self.passes

    @classmethod
    @contextlib.contextmanager
    def watching(cls) -> Iterator[RefusalWatch]:
        """Watch the connection log (at least its errors) for the duration of the block."""
        logger = logging.getLogger(cls.LOGGER)
        watch = cls(logger.getEffectiveLevel())
        level = logger.level
        logger.setLevel(min(watch.passes, logging.ERROR))
        logger.addFilter(watch)
        try:
            yield watch
        finally:
            logger.removeFilter(watch)
            logger.setLevel(level)


def no_auto_create(consumer: KafkaConsumer) -> None:
    """Work around kafka-python 3.0 not handing ``allow_auto_create_topics`` to its cluster
    metadata: a subscription to a missing topic had the broker create it (measured on Tansu: 4
    empty partitions, and the daemon ended idle with success). Internals, guarded: does nothing
    if the client's layout differs."""
    config = getattr(getattr(consumer, "_cluster", None), "config", None)
    if isinstance(config, dict) and "allow_auto_create_topics" in config:
        config["allow_auto_create_topics"] = False


def _tp(tp: Partition) -> TopicPartition:
    # kafka-python checks isinstance(partition, TopicPartition) in seek, highwater, commit ...
    return tp if isinstance(tp, TopicPartition) else TopicPartition(tp.topic, tp.partition)


class _Listener(ConsumerRebalanceListener):
    def __init__(self, on_assign: Rebalance, on_revoke: Rebalance) -> None:
        self.on_assign, self.on_revoke = on_assign, on_revoke

    def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        self.on_revoke([Partition(tp.topic, tp.partition) for tp in revoked])

    def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        self.on_assign([Partition(tp.topic, tp.partition) for tp in assigned])


class KafkaPythonConsumer:
    """:class:`~streammkl.daemon.kafka.clients.protocol.ConsumerClient` over a ``KafkaConsumer``.

    Parameters
    ----------
    settings
        Kafka settings (:func:`consumer_config`).
    factory
        Builds the consumer from keyword options (default ``KafkaConsumer``).
    """

    def __init__(
        self, settings: KafkaSettings, factory: Callable[..., Any] = KafkaConsumer
    ) -> None:
        with RefusalWatch.watching() as watch:
            try:
                self.consumer = factory(**consumer_config(settings))
            except KafkaError as exc:  # KafkaTimeoutError: unable to bootstrap, NoBrokersAvailable
                if watch.refusal is not None:
                    raise ClientRefused(watch.refusal) from exc
                raise ClientUnavailable(str(exc)) from exc
        no_auto_create(self.consumer)
        self._group = False
        self._answered: float | None = None

    #: Only a refused creation is seen (:class:`RefusalWatch`): a created consumer was accepted.
    refusal: str | None = None
    #: Creation errors are raised (:class:`ClientUnavailable`); none is kept afterwards.
    last_error: str | None = None

    @property
    def connected(self) -> bool:
        """The group coordinator is known (group mode), or a broker connection is up (assigned
        partitions). Reads kafka-python internals."""
        coordinator: Any = getattr(self.consumer, "_coordinator", None)
        client: Any = getattr(self.consumer, "_client", None)
        if coordinator is None and client is None:  # not kafka-python (a test double)
            return True
        try:
            if self._group:
                return not coordinator.coordinator_unknown()
            return any(client.connected(b.node_id) for b in client.cluster.brokers())
        except Exception:  # internals changed: do not claim readiness we cannot check
            return False

    def silence(self) -> float | None:
        # remembered: a connection closed (a request timed out) takes its last read with it
        answered = last_answer(self.consumer)
        if answered is not None and (self._answered is None or answered > self._answered):
            self._answered = answered
        return None if self._answered is None else max(0.0, time.monotonic() - self._answered)

    def subscribe(self, topics: list[str], on_assign: Rebalance, on_revoke: Rebalance) -> None:
        self._group = True
        self.consumer.subscribe(topics, listener=_Listener(on_assign, on_revoke))

    def start_assigned(self, starts: Mapping[Partition, int | None]) -> None:
        # On kafka-python's IO thread: seek only (no blocking call); a partition without an own
        # offset starts where kafka-python resolves it (committed, else auto_offset_reset). A
        # partition that stays assigned across a rebalance keeps its pause: resumed, since the
        # source starts every assignment unpaused.
        for tp, own in starts.items():
            if own is not None:
                self.consumer.seek(_tp(tp), own)
        if starts:
            self.consumer.resume(*[_tp(tp) for tp in starts])

    def assign(self, starts: Mapping[Partition, int | None]) -> None:
        self.consumer.assign([_tp(tp) for tp in starts])
        self.start_assigned(starts)

    def partitions(self, topic: str) -> Iterable[int]:
        return self.consumer.partitions_for_topic(topic) or ()

    def topic_missing(self, topic: str) -> bool:
        try:  # a metadata request for every topic (this one is not created: no_auto_create)
            return not self.consumer.partitions_for_topic(topic)
        except KafkaError:
            return False

    #: Read from the metadata the client refreshes anyway (never blocks: it runs in callbacks).
    topic_id_is_a_request = False

    def topic_id(self, topic: str) -> str | None:
        cluster = getattr(self.consumer, "_cluster", None)
        try:
            value = cluster.topic_id(topic) if cluster is not None else None
        except (AttributeError, TypeError):
            return None
        return topic_uuid(value if isinstance(value, uuid.UUID) else None)

    def poll(self, timeout_ms: int, max_records: int) -> Mapping[Partition, list[Any]]:
        unpark(self.consumer)
        try:
            return self.consumer.poll(timeout_ms=timeout_ms, max_records=max_records)
        except OffsetOutOfRangeError as exc:
            bad = exc.args[0] if exc.args and isinstance(exc.args[0], dict) else {}
            raise OffsetsOutOfRange([Partition(tp.topic, tp.partition) for tp in bad]) from exc

    def beginning(self, tp: Partition) -> int:
        k = _tp(tp)
        return int(self.consumer.beginning_offsets([k]).get(k) or 0)

    def seek(self, tp: Partition, offset: int) -> None:
        self.consumer.seek(_tp(tp), offset)

    def highwater(self, tp: Partition) -> int | None:
        try:
            hw = self.consumer.highwater(_tp(tp))
        except KafkaError:  # IllegalStateError while a rebalance is in flight
            return None
        return None if hw is None else int(hw)

    def position(self, tp: Partition) -> int | None:
        # The fetch position without kafka-python's blocking refresh (internals, with fallback).
        try:
            return fetch_position(self.consumer, _tp(tp))
        except LookupError:
            pos = self.consumer.position(_tp(tp))
            return None if pos is None else int(pos)

    def pause(self, tp: Partition) -> None:
        self.consumer.pause(_tp(tp))

    def resume(self, tp: Partition) -> None:
        self.consumer.resume(_tp(tp))

    def commit(self, offsets: Mapping[Partition, int], blocking: bool) -> None:
        try:
            marked = {_tp(tp): OffsetAndMetadata(at, "", -1) for tp, at in offsets.items()}
            if blocking:
                self.consumer.commit(marked, timeout_ms=5000)
            else:
                self.consumer.commit_async(marked)
        except (KafkaError, AssertionError) as exc:
            log.info("offset commit skipped: %s", exc)

    def close(self) -> None:
        self.consumer.close(autocommit=False)


class KafkaPythonProducer:
    """:class:`~streammkl.daemon.kafka.clients.protocol.ProducerClient` over a ``KafkaProducer``:
    a future per message, scanned by :meth:`failures`.

    Parameters
    ----------
    settings
        Kafka settings (:func:`producer_config`).
    factory
        Builds the producer from keyword options (default ``KafkaProducer``).
    """

    def __init__(
        self, settings: KafkaSettings, factory: Callable[..., Any] = KafkaProducer
    ) -> None:
        try:
            self.producer = factory(**producer_config(settings))
        except KafkaError as exc:  # unable to bootstrap, NoBrokersAvailable
            raise ClientUnavailable(str(exc)) from exc
        self._sent: list[tuple[Any, Any, Any, Any, Any]] = []  # (topic, value, key, headers, fut)
        self._abandoned = False

    def produce(
        self,
        topic: str,
        value: bytes,
        key: bytes | None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        fut = self.producer.send(topic, value=value, key=key, headers=headers)
        self._sent.append((topic, value, key, headers, fut))

    def serve(self, timeout: float) -> None:
        pass  # kafka-python's sender thread completes the futures by itself

    def failures(self) -> tuple[list[Output], BaseException | None]:
        keep: list[tuple[Any, Any, Any, Any, Any]] = []
        failed: list[Output] = []
        error: BaseException | None = None
        for sent in self._sent:
            fut = sent[4]
            if not fut.is_done and not self._abandoned:
                keep.append(sent)
            elif not fut.is_done or fut.failed():  # abandoned: whatever is not acknowledged
                failed.append(Output(sent[0], sent[1], sent[2], tuple(sent[3] or ())))
                error = fut.exception if fut.is_done else error
            # else: acknowledged
        self._sent = keep
        return failed, error

    def in_flight(self) -> int:
        # Everything not yet settled by failures(), even if its future completed since.
        return len(self._sent)

    def flush(self, timeout: float) -> None:
        try:
            self.producer.flush(timeout=timeout)
        except KafkaError as exc:  # KafkaTimeoutError: what is undelivered stays in flight
            log.debug("flush: %s", exc)

    def abandon(self) -> None:
        self._abandoned = True
        self._close(0)

    def close(self) -> None:
        self._close(1)

    def _close(self, timeout: float) -> None:
        try:
            self.producer.close(timeout=timeout)
        except KafkaError as exc:
            # kafka-python's close() flushes first and raises while records are undelivered
            # (the sink has kept them), never reaching its force close: force it (internals,
            # guarded), or the sender thread lingers and the producer fails again on collection
            log.debug("closing the producer: %s", exc)
            sender = getattr(self.producer, "_sender", None)
            if sender is not None:
                sender.force_close()
                sender.join(1.0)
            try:
                self.producer.close(timeout=0)
            except KafkaError as again:
                log.debug("closing the producer: %s", again)


# -- the mix log ---------------------------------------------------------------------------------


def mix_config(settings: KafkaSettings) -> dict[str, Any]:
    """The kafka-python options both mix log clients take from the ``[kafka]`` settings."""
    return {
        "bootstrap_servers": settings.bootstrap_servers.split(","),
        "request_timeout_ms": settings.request_timeout_ms,
        **kafka_python_options(settings),
    }


class KafkaPythonMixReader:
    """:class:`~streammkl.daemon.kafka.clients.protocol.MixLogReader` over a ``KafkaConsumer``
    (assigned, not subscribed: it needs no group)."""

    def __init__(
        self, settings: KafkaSettings, topic: str, max_record_bytes: int, max_wait_ms: int
    ) -> None:
        self.tp = TopicPartition(topic, 0)
        self.consumer = KafkaConsumer(
            enable_auto_commit=False, auto_offset_reset="earliest",
            fetch_max_bytes=max_record_bytes, max_partition_fetch_bytes=max_record_bytes,
            fetch_max_wait_ms=max_wait_ms, **mix_config(settings),
        )  # fmt: skip
        self.consumer.assign([self.tp])
        self.consumer.seek_to_beginning(self.tp)

    def poll(self, timeout_ms: int) -> list[Any]:
        return [r for rs in self.consumer.poll(timeout_ms=timeout_ms).values() for r in rs]

    def seek(self, offset: int) -> None:
        self.consumer.seek(self.tp, offset)

    def highwater(self) -> int | None:
        return self.consumer.highwater(self.tp)

    def position(self) -> int | None:
        return self.consumer.position(self.tp)

    def close(self) -> None:
        self.consumer.close()


class _Sent:
    """:class:`~streammkl.daemon.kafka.clients.protocol.Acknowledgement` over kafka-python's
    ``FutureRecordMetadata``."""

    def __init__(self, future: Any) -> None:
        self.future = future

    @property
    def is_done(self) -> bool:
        return bool(self.future.is_done)

    def wait(self, timeout: float) -> None:
        try:
            self.future.get(timeout=timeout)
        except KafkaError as exc:
            raise SendFailed(str(exc)) from exc


class KafkaPythonMixWriter:
    """:class:`~streammkl.daemon.kafka.clients.protocol.MixLogWriter` over an idempotent
    ``KafkaProducer``."""

    def __init__(self, settings: KafkaSettings, topic: str, max_record_bytes: int) -> None:
        self.topic = topic
        self.producer = KafkaProducer(
            acks="all", enable_idempotence=True, linger_ms=0, max_request_size=max_record_bytes,
            **mix_config(settings),
        )  # fmt: skip

    def send(self, key: bytes, value: bytes) -> _Sent:
        try:
            return _Sent(self.producer.send(self.topic, key=key, value=value, partition=0))
        except KafkaError as exc:
            raise SendFailed(str(exc)) from exc

    def close(self, timeout: float) -> None:
        self.producer.close(timeout=timeout)
