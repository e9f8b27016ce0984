"""The Kafka source: one consumer adapter plus a deterministic interleaving of its partitions.

Positions are the daemon's, not the broker's: on every assignment each partition is sought to the
next offset the model has not learned (the checkpoint's), falling back to the group's committed
offset for partitions this process never owned, then to the earliest offset. Committed offsets are
written after each checkpoint for lag visibility only. A record below the next expected offset
(positions that went backwards, e.g. after a Tansu restart) is dropped as already processed; an
expected offset beyond the partition's highwater (the log was reset) is warned about, counted and
replaced by the earliest offset.

**Deterministic interleaving.** Records fetched from several partitions are interleaved by ``(Kafka
timestamp, topic, partition, offset)``, taking each partition's records in offset order. The next
record is only chosen once every assigned partition either has a buffered record or is caught up
(fetch position = highwater, nothing buffered, for at least ``interleave_idle_ms``); a partition
whose data exists on the broker but is not fetched yet blocks the interleaving. So the order is a
function of the logs alone — a replay after a crash learns exactly what an uninterrupted run learned
— except when a record lands in a caught-up partition with a timestamp older than records already
interleaved from the others (Kafka Streams' ``max.task.idle.ms`` trade-off).

**A re-created topic.** The source remembers each input topic's id (KIP-516; the checkpoint
keeps them with the offsets): when a topic's partitions are assigned (and, without a group, at
each refresh of the partitions) under another id than the one remembered, the topic was deleted
and re-created -- while the daemon ran (a broker restarted empty) or while it was stopped -- and
its own offsets belong to the old log: they are reset to the earliest offset, logged as a
warning and counted like any reset. (A broker without topic ids: only an own offset beyond the
new log's highwater is noticed, and reset.)

**What is left to read** (:meth:`Source.backlog`, for ``run.exit_when_idle``): per owned partition
the highwater minus the next offset to process -- *unknown*, never zero, while the partition has
had no fetch response (just assigned, a rebalance, a stalled broker), and, in a group, while the
membership is settling (no assignment yet, or partitions revoked and none assigned since).
Besides, the source remembers whether the broker was ever reached and whether it refused the
client's credentials.

**Leaving and rejoining the group.** A member that closes in the middle of a rebalance lets it
complete first (:meth:`Source.close`): on Tansu a member named the next generation's leader
that left before that generation completed stalled the group for good. A member left without
an assignment for :data:`STALLED_JOIN_SESSIONS` session timeouts, or whose input topic came back
and is still not assigned, rejoins with a new consumer (:meth:`Source._watch_join`,
:meth:`Source._watch_return`).

Everything here is independent of the client library: the consumer is a
:class:`~streammkl.daemon.kafka.clients.protocol.ConsumerClient` adapter
(:mod:`streammkl.daemon.kafka.clients`: kafka-python or librdkafka; tests use in-memory fakes).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from operator import attrgetter
from typing import Any, NamedTuple

from streammkl.daemon.config import KafkaSettings
from streammkl.daemon.kafka.clients.protocol import (
    ClientRefused,
    ClientUnavailable,
    ConsumerClient,
    ConsumerFactory,
    OffsetsOutOfRange,
    Partition,
)

log = logging.getLogger(__name__)
_value = attrgetter("value")

TP = tuple[str, int]
#: How long the answer of :meth:`Source.missing_topics` is kept (it asks the broker).
TOPICS_CHECK_SECONDS = 5.0
#: A group member left without partitions this long after an input topic it saw missing came
#: back leaves and rejoins the group with a new consumer (see :meth:`Source._watch_return`):
#: longer than a metadata refresh (``kafka.metadata_max_age_ms``, 5 s) and a join, in which a
#: healthy group assigns the topic's partitions by itself. (At 15 s, a loaded CI machine once
#: took over 30 s from the re-creation to the first record read: the watch's 5-s cadence, the
#: wait, then a slow join.) A needless rejoin costs one rebalance, nothing else.
REJOIN_SECONDS = 8.0
#: How often the return watch looks while an input topic it saw gone is not yet owned again (a
#: metadata request each time), so the wait above starts within a second of the topic's return.
RETURN_CHECK_SECONDS = 1.0
#: How often the return watch compares the input topics' ids with those remembered
#: (:meth:`Source._recreated_unseen`) when the client's topic id is a request of its own
#: (librdkafka: an admin DescribeTopics; its metadata holds no topic ids) and no input topic was
#: seen vanished: a member that owns nothing (one too many) asked every 5 s for as long as it
#: ran. librdkafka's own look for a missing topic is a live metadata request, so a topic
#: re-created unseen is one deleted and re-created within one 5-s look; its member rejoins
#: within this plus :data:`REJOIN_SECONDS`. With kafka-python the ids come with the metadata
#: and are compared at every look.
ID_CHECK_SECONDS = 30.0
#: A group member that has waited this many session timeouts (``kafka.session_timeout_ms``)
#: for an assignment -- since its consumer subscribed, or since a rebalance revoked its
#: partitions, counted while the broker is reached -- leaves and rejoins the group with a new
#: consumer (:meth:`Source._watch_join`). A healthy rebalance ends well within that: measured on
#: Tansu with 2-s sessions, a first join ~1.1 s, a second member ~3.4 s, the failover of a
#: killed member ~3.4 s (its session expires, then the join): under two session timeouts. The
#: rejoin comes far before the idle end gives up (``run.exit_when_idle`` times
#: ``IDLE_PATIENCE``, 60 s at scale_out's 6 s; 10 s with its 2-s sessions, 50 s with the 10-s
#: default). It is the cure for a client stuck in a rebalance, not for a group the broker
#: stalled: on Tansu 0.6, once the member named the next generation's leader left before that
#: generation completed, every JoinGroup -- a new consumer's too -- names the departed leader and
#: every SyncGroup fails, for good (docs/daemon.md, Kafka notes; :meth:`Source.close` avoids
#: causing it where it can). A needless rejoin (a slow but healthy rebalance) costs one more
#: rebalance, nothing else.
STALLED_JOIN_SESSIONS = 5
#: A group member that closes in the middle of a rebalance lets it complete first, for at most
#: this many session timeouts (:meth:`Source.close`): a healthy rebalance ends well within that
#: (see above); the daemon's shutdown waits that long only when it does not.
SETTLE_BEFORE_LEAVE_SESSIONS = 2
#: The poll timeout while a closing member lets a rebalance complete.
SETTLE_POLL_SECONDS = 0.1


class Backlog(NamedTuple):
    """What is left to read on the owned partitions.

    Parameters
    ----------
    records
        Records known to wait (highwater minus the next offset to process, summed over the
        partitions where both are known).
    unknown
        What keeps the rest from being known: partitions (``topic/partition``) without a
        highwater or a next offset yet, or ``"the group's assignment"`` while it settles. Empty:
        ``records`` is the whole backlog.
    """

    records: int
    unknown: tuple[str, ...]


class Source:
    """Consume the input topics into per-partition buffers and interleave them deterministically.

    Parameters
    ----------
    settings
        Kafka settings.
    offsets
        The daemon's next offset per (topic, partition), shared with the runner (which advances
        it as records are processed); the source reads it on assignment and updates it on reset.
    client
        The consumer adapter's class (any callable building a
        :class:`~streammkl.daemon.kafka.clients.protocol.ConsumerClient` from the settings).
    on_revoke
        Called before partitions are taken away (the runner checkpoints there); not when the
        source itself closes (the runner checkpointed before closing).
    on_reset
        Called with (topic, partition, old offset, new offset) when an offset is reset.
    group
        ``True``: consumer-group membership (``subscribe``); ``False``: this process assigns
        itself every partition of the topics (one model over the whole stream).
    clock
        Monotonic seconds (tests inject their own).
    topic_ids
        Each input topic's id as last seen (the checkpoint's), shared and updated.
    """

    def __init__(
        self,
        settings: KafkaSettings,
        offsets: dict[TP, int],
        client: ConsumerFactory,
        on_revoke: Callable[[], None] = lambda: None,
        on_reset: Callable[[str, int, int, int], None] = lambda *a: None,
        group: bool = True,
        clock: Callable[[], float] = time.monotonic,
        topic_ids: dict[str, str] | None = None,
    ) -> None:
        self.settings = settings
        self.offsets = offsets
        #: Each input topic's id as last seen (shared with the checkpoints, which keep them).
        self.topic_ids: dict[str, str] = {} if topic_ids is None else topic_ids
        self.client = client
        self.on_revoke = on_revoke
        self.on_reset = on_reset
        #: Called at the start of every assignment, before positions are read (mixing groups).
        self.on_assign: Callable[[list[Partition]], None] | None = None
        self.group = group
        self.clock = clock
        #: The consumer adapter (``None`` until the client could be created, and after close).
        self.consumer: ConsumerClient | None = None
        self.buffers: dict[Partition, deque[Any]] = {}
        self.assignment_changes = 0
        self._idle_since: dict[Partition, float] = {}
        self._paused: set[Partition] = set()
        self._bytes: dict[Partition, int] = {}  # bytes of the values in each buffer
        self._last_refresh = -1e18
        self._in_callback = False
        self._closing = False
        self._next_connect = 0.0
        #: Whether the broker was ever reached (connected, or partitions assigned).
        self.reached = False
        #: Why the broker refuses this client's credentials, while it does (``None``: it does not).
        self.refusal: str | None = None
        #: The last reason the client could not be created or connect (for messages).
        self.last_error: str | None = None
        self._settling = False  # group: partitions revoked and none assigned since
        self._missing: tuple[float, list[str]] | None = None  # (when asked, missing topics)
        self._vanished: set[str] = set()  # input topics seen missing while nothing was owned
        self._back_since: float | None = None  # when they were all back (none owned since)
        self._watched_at = -1e18  # when _watch_return last asked about the topics
        self._ids_checked_at = -1e18  # when _recreated_unseen last compared the topics' ids
        #: Times the group was rejoined with a new consumer (a topic came back unassigned, or
        #: a rebalance gave no assignment for :data:`STALLED_JOIN_SESSIONS` session timeouts).
        self.rejoins = 0
        #: Since when (this source's clock) a group member has waited for an assignment:
        #: since its consumer subscribed, or a rebalance revoked its partitions (``None``:
        #: assigned, maybe nothing, since).
        self._waiting_since: float | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> Source:
        """Create the consumer and subscribe (or assign).

        An unreachable broker is not fatal: the attempt is repeated by :meth:`fetch`, a second
        after this one ended.
        """
        try:
            consumer = self.client(self.settings)
        except ClientUnavailable as exc:
            self._next_connect = self.clock() + 1.0
            self.last_error = str(exc)
            if isinstance(exc, ClientRefused):
                self.refusal = str(exc)
            log.warning("cannot reach %s (%s); retrying", self.settings.bootstrap_servers, exc)
            return self
        self.consumer = consumer
        if self.group:
            self._waiting_since = self.clock()
            consumer.subscribe(list(self.settings.topics), self._assigned, self._revoked)
        else:
            self._refresh_manual()
        return self

    def close(self, settle: bool = True) -> None:
        """Close the consumer (no commit: offsets are committed after checkpoints only).

        A group member in the middle of a rebalance (its partitions revoked, or its first join
        under way, none assigned since) first lets it complete -- polling, for at most
        :data:`SETTLE_BEFORE_LEAVE_SESSIONS` session timeouts, what it is given discarded --
        then leaves (``settle=False``: leaves at once). On Tansu a member that left while named
        the next generation's leader (its JoinGroup answered, its SyncGroup not sent) left the
        group stalled for good (:data:`STALLED_JOIN_SESSIONS`). A leave before this member
        heard of the rebalance (two members leaving at once) is not avoided.
        """
        if self.consumer is not None:
            self._closing = True
            try:
                if settle:
                    self._settle()
                self.consumer.close()
            except Exception as exc:  # closing must not mask the shutdown path
                log.warning("consumer close failed: %s", exc)
            finally:
                self._closing = False
            self.consumer = None

    def _settle(self) -> None:
        """Poll (records discarded: the caller checkpointed before closing) until the rebalance
        under way has given this member its assignment, for at most
        :data:`SETTLE_BEFORE_LEAVE_SESSIONS` session timeouts of wall time."""
        consumer = self.consumer
        if not self.group or consumer is None or not consumer.connected:
            return
        if self._waiting_since is None:
            return
        wait = SETTLE_BEFORE_LEAVE_SESSIONS * self.settings.session_timeout_ms / 1000.0
        deadline = time.monotonic() + wait
        while self._waiting_since is not None and time.monotonic() < deadline:
            try:
                consumer.poll(int(SETTLE_POLL_SECONDS * 1000), 1)
            except Exception as exc:  # leaving anyway
                log.info("polling before leaving the group: %s", exc)
                return
        if self._waiting_since is not None:
            log.info("leaving the group in the middle of a rebalance (not done in %.0f s)", wait)

    @property
    def assignment(self) -> list[Partition]:
        """Partitions currently owned, sorted."""
        return sorted(self.buffers)

    @property
    def broker_connected(self) -> bool:
        """Whether the broker is reachable (the group coordinator is known, in group mode)."""
        return self.consumer is not None and self.consumer.connected

    def silence(self) -> float | None:
        """Seconds since the broker last answered the consumer (``None``: not known)."""
        return None if self.consumer is None else self.consumer.silence()

    # -- rebalance ----------------------------------------------------------------------------

    def _revoked(self, revoked: Iterable[Partition]) -> None:
        # kafka-python: on its IO thread, where the callback may write files and use the
        # producer, but must not block on this consumer (commits are sent asynchronously).
        revoked = list(revoked)
        if self.group and not self._closing:
            self._settling = True  # a rebalance: what to read is unknown until the assignment
            if self._waiting_since is None:
                self._waiting_since = self.clock()
        if revoked and self.buffers and not self._closing:
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

    def _assigned(self, assigned: Iterable[Partition], manual: bool = False) -> None:
        # Inside the client's poll (no blocking consumer call on kafka-python's IO thread). A
        # partition with an own offset starts there; any other where the adapter resolves it
        # (the group's committed offset, else the earliest one).
        if self._closing:  # settling before leaving (close): nothing is read any more
            self._waiting_since = None  # (confluent-kafka assigns when the callback did not)
            return
        assigned = list(assigned)
        if assigned:
            self._vanished.clear()
            self._back_since = None
        if self.on_assign is not None:  # a mixing group sets the offsets first
            self.on_assign(assigned)
        self.assignment_changes += 1
        self.reached = True
        self._settling = False
        self._waiting_since = None
        self.buffers = {}
        self._bytes = {}
        self._idle_since.clear()
        self._paused.clear()
        self._check_ids({tp.topic for tp in assigned})
        starts = {tp: self.offsets.get((tp.topic, tp.partition)) for tp in sorted(assigned)}
        assert self.consumer is not None
        if manual:
            self.consumer.assign(starts)
        else:
            self.consumer.start_assigned(starts)
        self.buffers = {tp: deque() for tp in starts}
        log.info(
            "assigned %s (own offsets %s)",
            [f"{t.topic}/{t.partition}" for t in self.buffers],
            {f"{t.topic}/{t.partition}": self.offsets.get(t) for t in self.buffers},
        )

    def _check_ids(self, topics: Iterable[str]) -> list[str]:
        """Compare the topics' ids with those remembered: a topic re-created has its own offsets
        reset to the earliest offset (0: a new log's start; the client's reset policy takes a
        later start). Returns the topics found re-created."""
        assert self.consumer is not None
        recreated = []
        for topic in sorted(topics):
            now = self.consumer.topic_id(topic)
            before = self.topic_ids.get(topic)
            if now is None:
                continue
            self.topic_ids[topic] = now
            if before is None or before == now:
                continue
            recreated.append(topic)
            own = {key: off for key, off in self.offsets.items() if key[0] == topic}
            log.warning(
                "input topic %s was re-created (id %s, was %s): its partitions restart from the "
                "earliest offset (own offsets were %s)",
                topic, now, before, {p: o for (_, p), o in sorted(own.items())} or "none",
            )  # fmt: skip
            for key, off in sorted(own.items()):
                if off == 0:  # already at a new log's start (a highwater check reset it first)
                    continue
                self.offsets[key] = 0
                self.on_reset(topic, key[1], off, 0)
        return recreated

    def _refresh_manual(self) -> None:
        assert self.consumer is not None
        self._last_refresh = self.clock()
        wanted: set[Partition] = set()
        for topic in self.settings.topics:
            for part in self.consumer.partitions(topic):
                wanted.add(Partition(topic, part))
        if not wanted:
            return
        owned = {tp.topic for tp in self.buffers}
        if wanted != set(self.buffers) or self._check_ids(owned & {tp.topic for tp in wanted}):
            self._assigned(wanted, manual=True)  # (a re-created topic: sought to its start)

    # -- fetching -----------------------------------------------------------------------------

    def _watch_reach(self, consumer: ConsumerClient) -> None:
        """Until the broker is reached: whether it is now, or refuses the credentials."""
        if consumer.connected:
            self.reached = True
            self.refusal = None
            return
        self.refusal = consumer.refusal or self.refusal
        self.last_error = consumer.last_error or self.last_error

    def _reset(self, tp: Partition, why: str) -> None:
        assert self.consumer is not None
        key = (tp.topic, tp.partition)
        old = self.offsets.get(key, 0)
        begin = self.consumer.beginning(tp)
        log.warning(
            "%s/%d: offset %d is %s (the log was reset?); restarting from the earliest offset %d",
            tp.topic, tp.partition, old, why, begin,
        )  # fmt: skip
        self.offsets[key] = begin
        self.consumer.seek(tp, begin)
        self.buffers[tp] = deque()
        self._bytes[tp] = 0
        self.on_reset(tp.topic, tp.partition, old, begin)

    def _check_highwater(self) -> None:
        assert self.consumer is not None
        for tp in self.assignment:
            hw = self.consumer.highwater(tp)
            own = self.offsets.get((tp.topic, tp.partition))
            if hw is not None and own is not None and own > hw:
                self._reset(tp, f"beyond the highwater {hw}")

    def fetch(self, timeout_ms: int) -> int:
        """Poll once into the buffers; returns the number of new records buffered."""
        consumer = self.consumer
        if consumer is None:  # not connected yet
            if self.clock() >= self._next_connect:
                self.start()
            else:
                time.sleep(min(timeout_ms / 1000.0, 0.1))
            return 0
        if not self.reached:
            self._watch_reach(consumer)
        if not self.group and self.clock() - self._last_refresh > 5.0:
            self._refresh_manual()
        if self.group and not self.buffers and (self._watch_return() or self._watch_join()):
            return 0
        try:
            batch = consumer.poll(timeout_ms, self.settings.max_poll_records)
        except OffsetsOutOfRange as exc:
            for tp in exc.partitions:
                if tp in self.buffers:
                    self._reset(tp, "out of the log's range")
            batch = {}
        new = self._buffer(batch)
        self._check_highwater()
        return new

    def _watch_return(self) -> bool:
        """In a group, while nothing is owned: notice input topics missing, then back (or back
        already, under a new id: :meth:`_recreated_unseen`), and rejoin with a new consumer when
        the group still gives nothing :data:`REJOIN_SECONDS` later. Measured on Tansu, both
        clients: after a broker restart, a member that rejoined while its topic was missing got
        an empty assignment at every later join, the topic back with its partitions in the
        metadata, until it left the group; a member that is merely one too many (more members
        than partitions) never saw a topic missing nor a new id, and is left alone.
        Returns whether the consumer was replaced (nothing to poll this time)."""
        consumer = self.consumer
        if consumer is None or not consumer.connected:  # (asking would block until it is)
            return False
        now = self.clock()
        every = RETURN_CHECK_SECONDS if self._vanished else TOPICS_CHECK_SECONDS
        if now - self._watched_at < every:
            return False
        self._watched_at = now  # (its own answers: missing_topics' are the idle end's)
        missing = {t for t in self.settings.topics if consumer.topic_missing(t)}
        if missing:
            self._vanished |= missing
            self._back_since = None
            return False
        recreated = self._recreated_unseen(consumer, now)
        if recreated:
            self._vanished |= recreated
        if not self._vanished:
            return False
        if self._back_since is None:
            self._back_since = now
            return False
        if now - self._back_since < REJOIN_SECONDS:
            return False
        log.warning(
            "input topic(s) %s came back but the group gave no partition for %.0f s: leaving "
            "and rejoining the group with a new consumer",
            ", ".join(sorted(self._vanished)), now - self._back_since,
        )  # fmt: skip
        self._vanished.clear()
        self._back_since = None
        self.rejoins += 1
        self.close()
        self.start()
        return True

    def _watch_join(self) -> bool:
        """In a group, while nothing is owned: rejoin with a new consumer when no assignment
        came for :data:`STALLED_JOIN_SESSIONS` session timeouts of a reached broker (the wait
        restarts while the consumer is not connected: an outage is not a stalled group).
        Returns whether the consumer was replaced (nothing to poll this time)."""
        since, consumer = self._waiting_since, self.consumer
        if since is None or consumer is None:
            return False
        now = self.clock()
        if not consumer.connected:
            self._waiting_since = now
            return False
        if now - since < self.stalled_join_seconds:
            return False
        log.warning(
            "the group gave no assignment for %.0f s (%d session timeouts; a rebalance that "
            "never completes): leaving and rejoining the group with a new consumer",
            now - since, STALLED_JOIN_SESSIONS,
        )  # fmt: skip
        self.rejoins += 1
        self.close(settle=False)
        self.start()
        return True

    @property
    def stalled_join_seconds(self) -> float:
        """How long a group member waits for an assignment before it rejoins
        (:data:`STALLED_JOIN_SESSIONS` session timeouts)."""
        return STALLED_JOIN_SESSIONS * self.settings.session_timeout_ms / 1000.0

    def _recreated_unseen(self, consumer: ConsumerClient, at: float) -> set[str]:
        """Input topics whose id differs from the one remembered when they were last owned: the
        topic was deleted and re-created between two looks, so its absence was never seen
        (the watch looks every few seconds, and kafka-python answers from metadata up to
        ``kafka.metadata_max_age_ms`` old). The remembered id is left as it is: the next
        assignment compares it again and resets the topic's own offsets. A client whose topic
        id is a request is asked at every look only while some input topic was seen vanished,
        else every :data:`ID_CHECK_SECONDS`."""
        if consumer.topic_id_is_a_request and not self._vanished:
            if at - self._ids_checked_at < ID_CHECK_SECONDS:
                return set()
        self._ids_checked_at = at
        found = set()
        for topic in self.settings.topics:
            before = self.topic_ids.get(topic)
            if before is None or topic in self._vanished:
                continue
            now = consumer.topic_id(topic)
            if now is not None and now != before:
                found.add(topic)
        return found

    def _buffer(self, batch: Mapping[Partition, list[Any]]) -> int:
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
                self.consumer.pause(tp)  # type: ignore[union-attr]
                self._paused.add(tp)
        return new

    def _may_have_more(self, tp: Partition) -> bool:
        assert self.consumer is not None
        hw = self.consumer.highwater(tp)
        pos = self.consumer.position(tp)
        if hw is None or pos is None or pos < hw:
            self._idle_since.pop(tp, None)
            return True
        if self.settings.interleave_idle_ms <= 0:
            return False
        since = self._idle_since.setdefault(tp, self.clock())
        return (self.clock() - since) * 1000.0 < self.settings.interleave_idle_ms

    def take(self, limit: int) -> list[Any]:
        """Up to ``limit`` buffered records in the deterministic interleaving order."""
        out: list[Any] = []
        parts = self.assignment
        if len(parts) == 1:  # the buffer's head, a slice at a time (not a record at a time)
            buf = self.buffers[parts[0]]
            if len(buf) <= limit:
                out = list(buf)
                buf.clear()
            elif limit > 0:
                popleft = buf.popleft
                out = [popleft() for _ in range(limit)]
            if out:
                taken = sum(map(len, filter(None, map(_value, out))))
                self._bytes[parts[0]] = self._bytes.get(parts[0], 0) - taken
        else:
            silent: dict[Partition, bool] = {}
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
                if self.consumer is not None:
                    self.consumer.resume(tp)
                self._paused.discard(tp)
        return out

    @property
    def buffered(self) -> int:
        """Records fetched but not yet handed out."""
        return sum(len(b) for b in self.buffers.values())

    def lag(self) -> dict[TP, int]:
        """Highwater minus the next offset to process, per owned partition (known ones)."""
        out: dict[TP, int] = {}
        if self.consumer is None:
            return out
        for tp in self.assignment:
            hw = self.consumer.highwater(tp)
            own = self.offsets.get((tp.topic, tp.partition))
            if hw is not None and own is not None:
                out[(tp.topic, tp.partition)] = max(0, hw - own)
        return out

    def backlog(self) -> Backlog:
        """What is left to read on the owned partitions (see the module docstring); the next
        offset of a partition without an own one is the client's fetch position."""
        consumer = self.consumer
        if consumer is None:
            return Backlog(0, ("the partitions (no consumer)",))
        unknown: list[str] = []
        if self.group and (self._settling or not self.assignment_changes):
            unknown.append("the group's assignment")
        records = 0
        for tp in self.assignment:
            hw = consumer.highwater(tp)
            nxt = self.offsets.get((tp.topic, tp.partition))
            if nxt is None:
                nxt = consumer.position(tp)
            if hw is None or nxt is None:
                unknown.append(f"{tp.topic}/{tp.partition}")
            else:
                records += max(0, hw - nxt)
        if not self.group and not self.buffers:
            unknown.append("the topics' partitions")
        return Backlog(records, tuple(unknown))

    def missing_topics(self) -> list[str]:
        """The input topics the broker says do not exist (asked at most every
        :data:`TOPICS_CHECK_SECONDS`, never about a topic with an owned partition; nothing is
        missing while no consumer exists, or the broker cannot be asked)."""
        consumer = self.consumer
        if consumer is None:
            return []
        now = self.clock()
        if self._missing is None or now - self._missing[0] > TOPICS_CHECK_SECONDS:
            owned = {tp.topic for tp in self.buffers}
            found = [
                t for t in self.settings.topics if t not in owned and consumer.topic_missing(t)
            ]
            self._missing = (now, found)
        return list(self._missing[1])

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
            self.consumer.commit(owned, blocking and not self._in_callback)
