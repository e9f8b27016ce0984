"""The Kafka source: a kafka-python consumer plus a deterministic merge of its partitions.

Positions are the daemon's, not the broker's: on every assignment each partition is sought to the
next offset the model has not learned (the checkpoint's), falling back to the group's committed
offset for partitions this process never owned, then to the earliest offset. Committed offsets are
written after each checkpoint for lag visibility only. A record below the next expected offset
(positions that went backwards, e.g. after a Tansu restart) is dropped as already processed; an
expected offset beyond the partition's highwater (the log was reset) is warned about, counted and
replaced by the earliest offset.

**Deterministic interleaving.** Records fetched from several partitions are merged by
``(Kafka timestamp, topic, partition, offset)``, taking each partition's records in offset order.
The next record is only chosen once every assigned partition either has a buffered record or is
caught up (fetch position = highwater, nothing buffered, for at least ``merge_idle_ms``); a
partition whose data exists on the broker but is not fetched yet blocks the merge. So the order is
a function of the logs alone — a replay after a crash learns exactly what an uninterrupted run
learned — except when a record lands in a caught-up partition with a timestamp older than records
already merged from the others (Kafka Streams' ``max.task.idle.ms`` trade-off).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition
from kafka.errors import KafkaError, OffsetOutOfRangeError
from kafka.structs import OffsetAndMetadata

from streammkl.daemon.config import KafkaSettings
from streammkl.daemon.kafka_security import kafka_python_options

log = logging.getLogger(__name__)

TP = tuple[str, int]


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
        "session_timeout_ms": settings.session_timeout_ms,
        "heartbeat_interval_ms": settings.heartbeat_interval_ms,
        "max_poll_interval_ms": settings.max_poll_interval_ms,
        "max_poll_records": settings.max_poll_records,
        "request_timeout_ms": max(settings.request_timeout_ms, settings.session_timeout_ms + 1000),
        "reconnect_backoff_max_ms": 1000,
        "bootstrap_timeout_ms": settings.bootstrap_timeout_ms,
        "check_crcs": settings.check_crcs,
        **kafka_python_options(settings),
    }


def unpark(consumer: Any) -> None:
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


class _Listener(ConsumerRebalanceListener):
    def __init__(self, source: Source) -> None:
        self.source = source

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.source._revoked(revoked)

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.source._assigned(assigned)


class Source:
    """Consume the input topics into per-partition buffers and merge them deterministically.

    Parameters
    ----------
    settings
        Kafka settings.
    offsets
        The daemon's next offset per (topic, partition), shared with the runner (which advances
        it as records are processed); the source reads it on assignment and updates it on reset.
    on_revoke
        Called before partitions are taken away (the runner checkpoints there).
    on_reset
        Called with (topic, partition, old offset, new offset) when an offset is reset.
    group
        ``True``: consumer-group membership (``subscribe``); ``False``: this process assigns
        itself every partition of the topics (one model over the whole stream).
    consumer_factory
        Builds the consumer (tests inject fakes); default :attr:`default_factory`.

    Everything that decides *what* is learned is here; the calls that differ between client
    libraries are the small hooks below (``_start_at`` ... ``_commit``), which
    :class:`~streammkl.daemon.rdkafka_source.RdkafkaSource` overrides for librdkafka.
    """

    #: The client library's consumer class (kafka-python's, built from keyword options).
    default_factory: Callable[..., Any] = KafkaConsumer

    def __init__(
        self,
        settings: KafkaSettings,
        offsets: dict[TP, int],
        on_revoke: Callable[[], None] = lambda: None,
        on_reset: Callable[[str, int, int, int], None] = lambda *a: None,
        group: bool = True,
        consumer_factory: Callable[..., Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.offsets = offsets
        self.on_revoke = on_revoke
        self.on_reset = on_reset
        #: Called at the start of every assignment, before positions are read (mixing groups).
        self.on_assign: Callable[[list[TopicPartition]], None] | None = None
        self.group = group
        self.consumer_factory = consumer_factory or self.default_factory
        self.clock = clock
        self.consumer: Any = None
        self.buffers: dict[TopicPartition, deque[Any]] = {}
        self.assignment_changes = 0
        self._idle_since: dict[TopicPartition, float] = {}
        self._paused: set[TopicPartition] = set()
        self._bytes: dict[TopicPartition, int] = {}  # bytes of the values in each buffer
        self._last_refresh = -1e18
        self._in_callback = False
        self._next_connect = 0.0

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> Source:
        """Create the consumer and subscribe (or assign).

        An unreachable broker is not fatal: the attempt is repeated by :meth:`fetch`.
        """
        self._next_connect = self.clock() + 1.0
        try:
            consumer = self.consumer_factory(**consumer_config(self.settings))
        except KafkaError as exc:  # KafkaTimeoutError: unable to bootstrap, NoBrokersAvailable
            log.warning("cannot reach %s (%s); retrying", self.settings.bootstrap_servers, exc)
            return self
        self.consumer = consumer
        if self.group:
            self.consumer.subscribe(list(self.settings.topics), listener=_Listener(self))
        else:
            self._refresh_manual()
        return self

    def close(self) -> None:
        """Close the consumer (no commit: offsets are committed after checkpoints only)."""
        if self.consumer is not None:
            try:
                self.consumer.close(autocommit=False)
            except Exception as exc:  # closing must not mask the shutdown path
                log.warning("consumer close failed: %s", exc)
            self.consumer = None

    @property
    def assignment(self) -> list[TopicPartition]:
        """Partitions currently owned, sorted."""
        return sorted(self.buffers)

    @property
    def broker_connected(self) -> bool:
        """Whether the broker is reachable: the group coordinator is known (group mode), or a
        broker connection is up (self-assigned mode). Reads kafka-python internals."""
        if self.consumer is None:
            return False
        coordinator: Any = getattr(self.consumer, "_coordinator", None)
        client: Any = getattr(self.consumer, "_client", None)
        if coordinator is None and client is None:  # not kafka-python (a test double)
            return True
        try:
            if self.group:
                return not coordinator.coordinator_unknown()
            return any(client.connected(b.node_id) for b in client.cluster.brokers())
        except Exception:  # internals changed: do not claim readiness we cannot check
            return False

    # -- rebalance ----------------------------------------------------------------------------

    def _revoked(self, revoked: Iterable[TopicPartition]) -> None:
        # On kafka-python's IO thread: the callback may write files and use the producer,
        # but must not block on this consumer (commits are sent asynchronously).
        revoked = list(revoked)
        if revoked and self.buffers:
            self._in_callback = True
            try:
                self.on_revoke()
            finally:
                self._in_callback = False
        for tp in revoked:
            self.buffers.pop(tp, None)
            self._bytes.pop(tp, None)
            self._idle_since.pop(tp, None)
            self._paused.discard(tp)

    def _assigned(self, assigned: Iterable[TopicPartition]) -> None:
        # Inside the client's poll (kafka-python: on its IO thread, where no blocking consumer
        # call is allowed). A partition with an own offset starts there; any other where
        # _start_at resolves it (the group's committed offset, else the earliest one).
        if self.on_assign is not None:  # a mixing group sets the offsets first
            assigned = list(assigned)
            self.on_assign(assigned)
        self.assignment_changes += 1
        self.buffers = {}
        self._bytes = {}
        self._idle_since.clear()
        self._paused.clear()
        starts = {tp: self.offsets.get((tp.topic, tp.partition)) for tp in sorted(assigned)}
        self._start_at(starts)
        self.buffers = {tp: deque() for tp in starts}
        log.info(
            "assigned %s (own offsets %s)",
            [f"{t.topic}/{t.partition}" for t in self.buffers],
            {f"{t.topic}/{t.partition}": self.offsets.get(t) for t in self.buffers},
        )

    def _refresh_manual(self) -> None:
        self._last_refresh = self.clock()
        wanted: set[TopicPartition] = set()
        for topic in self.settings.topics:
            for part in self._partitions(topic):
                wanted.add(TopicPartition(topic, part))
        if wanted and wanted != set(self.buffers):
            self._assign_manual(sorted(wanted))
            self._assigned(wanted)

    # -- fetching -----------------------------------------------------------------------------

    def _reset(self, tp: TopicPartition, why: str) -> None:
        key = (tp.topic, tp.partition)
        old = self.offsets.get(key, 0)
        begin = self._beginning(tp)
        log.warning(
            "%s/%d: offset %d is %s (the log was reset?); restarting from the earliest offset %d",
            tp.topic, tp.partition, old, why, begin,
        )  # fmt: skip
        self.offsets[key] = begin
        self._seek(tp, begin)
        self.buffers[tp] = deque()
        self._bytes[tp] = 0
        self.on_reset(tp.topic, tp.partition, old, begin)

    # The consumer calls that differ between clients (RdkafkaSource overrides them).
    def _start_at(self, starts: dict[TopicPartition, int | None]) -> None:
        """Position newly assigned partitions: at the own offset, else where the client
        resolves it (the group's committed offset, else the earliest)."""
        for tp, own in starts.items():
            if own is not None:
                self.consumer.seek(tp, own)

    def _partitions(self, topic: str) -> Iterable[int]:
        return self.consumer.partitions_for_topic(topic) or ()

    def _assign_manual(self, partitions: list[TopicPartition]) -> None:
        self.consumer.assign(partitions)

    def _beginning(self, tp: TopicPartition) -> int:
        return int(self.consumer.beginning_offsets([tp]).get(tp) or 0)

    def _seek(self, tp: TopicPartition, offset: int) -> None:
        self.consumer.seek(tp, offset)

    def _highwater(self, tp: TopicPartition) -> int | None:
        """The partition's highwater as of the last fetch (``None``: not known yet)."""
        return self.consumer.highwater(tp)

    def _pause(self, tp: TopicPartition) -> None:
        self.consumer.pause(tp)

    def _resume(self, tp: TopicPartition) -> None:
        self.consumer.resume(tp)

    def _check_highwater(self) -> None:
        for tp in self.assignment:
            hw = self._highwater(tp)
            own = self.offsets.get((tp.topic, tp.partition))
            if hw is not None and own is not None and own > hw:
                self._reset(tp, f"beyond the highwater {hw}")

    def fetch(self, timeout_ms: int) -> int:
        """Poll once into the buffers; returns the number of new records buffered."""
        if self.consumer is None:  # not connected yet
            if self.clock() >= self._next_connect:
                self.start()
            else:
                time.sleep(min(timeout_ms / 1000.0, 0.1))
            return 0
        if not self.group and self.clock() - self._last_refresh > 5.0:
            self._refresh_manual()
        new = self._buffer(self._poll(timeout_ms))
        self._check_highwater()
        return new

    def _poll(self, timeout_ms: int) -> dict[TopicPartition, list[Any]]:
        """One poll of the consumer: records per partition, each list in offset order."""
        unpark(self.consumer)
        try:
            return self.consumer.poll(
                timeout_ms=timeout_ms, max_records=self.settings.max_poll_records
            )
        except OffsetOutOfRangeError as exc:
            for tp in exc.args[0] if exc.args and isinstance(exc.args[0], dict) else {}:
                if tp in self.buffers:
                    self._reset(tp, "out of the log's range")
            return {}

    def _buffer(self, batch: dict[TopicPartition, list[Any]]) -> int:
        """Append polled records to their partitions' buffers, dropping those below the next
        expected offset (already processed); pause a partition whose buffer is full."""
        new = 0
        for tp, records in batch.items():
            buf = self.buffers.get(tp)
            if buf is None:  # revoked meanwhile
                continue
            expected = buf[-1].offset + 1 if buf else self.offsets.get((tp.topic, tp.partition))
            size = 0
            for rec in records:
                if expected is not None and rec.offset < expected:  # already processed
                    continue
                buf.append(rec)
                size += len(rec.value) if rec.value else 0
                expected = rec.offset + 1
                new += 1
            size += self._bytes.get(tp, 0)
            self._bytes[tp] = size
            if buf:
                self._idle_since.pop(tp, None)
            s = self.settings
            full = len(buf) >= s.max_buffered_per_partition
            if (full or size >= s.max_buffered_bytes_per_partition) and tp not in self._paused:
                self._pause(tp)
                self._paused.add(tp)
        return new

    def _position(self, tp: TopicPartition) -> int | None:
        # The fetch position without kafka-python's blocking refresh (internals, with fallback).
        try:
            state = self.consumer._subscription.assignment[tp]
            return None if state.position is None else int(state.position.offset)
        except (AttributeError, KeyError):
            return self.consumer.position(tp)

    def _may_have_more(self, tp: TopicPartition) -> bool:
        hw = self._highwater(tp)
        pos = self._position(tp)
        if hw is None or pos is None or pos < hw:
            self._idle_since.pop(tp, None)
            return True
        if self.settings.merge_idle_ms <= 0:
            return False
        since = self._idle_since.setdefault(tp, self.clock())
        return (self.clock() - since) * 1000.0 < self.settings.merge_idle_ms

    def take(self, limit: int) -> list[Any]:
        """Up to ``limit`` buffered records in the deterministic merge order."""
        out: list[Any] = []
        parts = self.assignment
        if len(parts) == 1:
            buf = self.buffers[parts[0]]
            while buf and len(out) < limit:
                out.append(buf.popleft())
            if out:
                self._bytes[parts[0]] = self._bytes.get(parts[0], 0) - sum(
                    len(r.value) for r in out if r.value
                )
        else:
            silent: dict[TopicPartition, bool] = {}
            while len(out) < limit:
                best_key: tuple[Any, ...] | None = None
                best_tp = None
                for tp in parts:
                    buf = self.buffers[tp]
                    if buf:
                        head = buf[0]
                        key = (head.timestamp, tp.topic, tp.partition, head.offset)
                        if best_key is None or key < best_key:
                            best_key, best_tp = key, tp
                        continue
                    if tp not in silent:
                        silent[tp] = not self._may_have_more(tp)
                    if not silent[tp]:
                        best_tp = None
                        break
                if best_tp is None:
                    break
                rec = self.buffers[best_tp].popleft()
                if rec.value:
                    self._bytes[best_tp] = self._bytes.get(best_tp, 0) - len(rec.value)
                out.append(rec)
        s = self.settings
        for tp in list(self._paused):
            few = len(self.buffers.get(tp, ())) < s.max_buffered_per_partition // 2
            if few and self._bytes.get(tp, 0) < s.max_buffered_bytes_per_partition // 2:
                self._resume(tp)
                self._paused.discard(tp)
        return out

    @property
    def buffered(self) -> int:
        """Records fetched but not yet handed out."""
        return sum(len(b) for b in self.buffers.values())

    def lag(self) -> dict[TP, int]:
        """Highwater minus the next offset to process, per owned partition (known ones)."""
        out: dict[TP, int] = {}
        for tp in self.assignment:
            try:
                hw = self._highwater(tp)
            except KafkaError:  # IllegalStateError while a rebalance is in flight
                continue
            own = self.offsets.get((tp.topic, tp.partition))
            if hw is not None and own is not None:
                out[(tp.topic, tp.partition)] = max(0, hw - own)
        return out

    def commit(self, blocking: bool = True) -> None:
        """Commit the owned partitions' offsets (for lag visibility; failures only logged).

        ``blocking=False`` (inside a rebalance callback, on kafka-python's IO thread) sends the
        commit asynchronously.
        """
        owned = {
            tp: self.offsets[(tp.topic, tp.partition)]
            for tp in self.assignment
            if (tp.topic, tp.partition) in self.offsets
        }
        if owned and self.consumer is not None:
            self._commit(owned, blocking and not self._in_callback)

    def _commit(self, offsets: dict[TopicPartition, int], blocking: bool) -> None:
        try:
            marked = {tp: OffsetAndMetadata(at, "", -1) for tp, at in offsets.items()}
            if blocking:
                self.consumer.commit(marked, timeout_ms=5000)
            else:
                self.consumer.commit_async(marked)
        except (KafkaError, AssertionError) as exc:
            log.info("offset commit skipped: %s", exc)
