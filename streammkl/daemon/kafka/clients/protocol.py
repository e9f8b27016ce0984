"""What the daemon's source, sink and mix log need from a Kafka client library, declared once.

:class:`~streammkl.daemon.kafka.source.Source` and :class:`~streammkl.daemon.kafka.sink.Sink` hold
every decision about *what* is consumed, learned and produced (own offsets, the deterministic
interleaving, pausing, resets, retries, the outbox). They speak to a client library only through the
two narrow protocols below, one adapter per library (:mod:`.kafka_python`, :mod:`.confluent`; tests
add in-memory fakes). An adapter wraps one live client: it is built from the Kafka settings (raising
:class:`ClientUnavailable` when it cannot be created now, so the caller retries later) and is
dropped after ``close``; it holds no stream logic.

A mixing group's mix log (:class:`~streammkl.daemon.mixing.topic.MixTopic`: the order and gap
checks, acknowledgements, re-publishes) speaks to its library through :class:`MixLogReader` and
:class:`MixLogWriter` the same way, with an adapter per library in the same modules.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from streammkl.daemon.config import KafkaSettings


class Partition(NamedTuple):
    """A topic partition (equal to, and hashed like, the client libraries' own tuples)."""

    topic: str
    partition: int


class Message(Protocol):
    """A consumed record, as the daemon reads it (kafka-python's ``ConsumerRecord`` names).

    ``timestamp`` is in milliseconds (``None`` when the broker gave none).
    """

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int | None: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...


class Output(NamedTuple):
    """A message to produce (a named tuple: one is built per prediction, so it must be cheap)."""

    topic: str
    value: bytes
    key: bytes | None = None
    headers: tuple[tuple[str, bytes], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """JSON-able form (for the checkpoint outbox)."""
        b64 = base64.b64encode
        return {
            "topic": self.topic,
            "key": None if self.key is None else b64(self.key).decode(),
            "value": b64(self.value).decode(),
            "headers": [[k, b64(v).decode()] for k, v in self.headers],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Output:
        """Inverse of :meth:`to_json`."""
        b64 = base64.b64decode
        return cls(
            topic=data["topic"],
            value=b64(data["value"]),
            key=None if data["key"] is None else b64(data["key"]),
            headers=tuple((k, b64(v)) for k, v in data["headers"]),
        )


def topic_uuid(value: uuid.UUID | None) -> str | None:
    """A topic id as the adapters give it (``uuid.UUID`` text), ``None`` for none or the null
    id (a broker without topic ids)."""
    if value is None or value.int == 0:
        return None
    return str(value)


class ClientUnavailable(Exception):
    """The client cannot be created now (e.g. the broker is unreachable); try again later."""


class ClientRefused(ClientUnavailable):
    """The client cannot be created because the broker refused its credentials (SASL)."""


class OffsetsOutOfRange(Exception):
    """A poll found fetch positions outside the partitions' logs (the logs were reset)."""

    def __init__(self, partitions: Sequence[Partition]) -> None:
        super().__init__(f"offsets out of range: {list(partitions)}")
        self.partitions = list(partitions)


#: A rebalance callback: the partitions assigned (or revoked).
Rebalance = Callable[[list[Partition]], None]


class ConsumerClient(Protocol):
    """One consumer of a client library (no auto-commit; positions are the caller's)."""

    @property
    def connected(self) -> bool:
        """Whether the broker is reachable (in group mode: the group coordinator is known)."""
        ...

    @property
    def refusal(self) -> str | None:
        """Why the broker refuses this client's credentials (a SASL authentication error), while
        it does; ``None`` otherwise."""
        ...

    @property
    def last_error(self) -> str | None:
        """The last error connecting to the broker (for messages; ``None``: none seen)."""
        ...

    def silence(self) -> float | None:
        """Seconds since a broker last answered this client, as last known (``None``: the client
        cannot tell, or holds no connection). A consumer's fetches wait at most ~0.5 s for data,
        so a broker that works answers every second or so, even with nothing to fetch; a frozen
        or hung broker keeps its connections but stays silent."""
        ...

    def subscribe(self, topics: list[str], on_assign: Rebalance, on_revoke: Rebalance) -> None:
        """Join the group for ``topics``. The callbacks run inside :meth:`poll` (or
        :meth:`close`); ``on_assign`` must call :meth:`start_assigned`."""
        ...

    def start_assigned(self, starts: Mapping[Partition, int | None]) -> None:
        """The group just assigned these partitions: fetch each from its offset (``None``: the
        group's committed offset, else the earliest), unpaused (a partition paused before the
        rebalance is resumed: both libraries keep some pauses across one)."""
        ...

    def assign(self, starts: Mapping[Partition, int | None]) -> None:
        """Own exactly these partitions (no group) and fetch each from its offset, as
        :meth:`start_assigned`."""
        ...

    def partitions(self, topic: str) -> Iterable[int]:
        """The topic's partitions (empty while unknown)."""
        ...

    def topic_missing(self, topic: str) -> bool:
        """Whether the broker says ``topic`` does not exist (asks it; ``False`` when it cannot be
        asked now). Never creates the topic."""
        ...

    def topic_id(self, topic: str) -> str | None:
        """The topic's id (KIP-516: a topic deleted and re-created gets another), as
        ``uuid.UUID`` text; ``None`` when the broker gives none or cannot be asked now. May ask
        the broker (at most ~2 s)."""
        ...

    @property
    def topic_id_is_a_request(self) -> bool:
        """Whether :meth:`topic_id` sends a request of its own (librdkafka: its metadata holds
        no topic ids, an admin client asks), rather than reading metadata the client refreshes
        anyway (kafka-python): the caller then asks less often where it can."""
        ...

    def poll(self, timeout_ms: int, max_records: int) -> Mapping[Partition, list[Any]]:
        """Fetched records (:class:`Message`) per partition, each list in offset order; waits
        up to ``timeout_ms`` only when nothing is fetched. Raises :class:`OffsetsOutOfRange`."""
        ...

    def beginning(self, tp: Partition) -> int:
        """The partition's earliest offset (asks the broker)."""
        ...

    def seek(self, tp: Partition, offset: int) -> None:
        """Fetch ``tp`` from ``offset`` next."""
        ...

    def highwater(self, tp: Partition) -> int | None:
        """The highwater from the last fetch responses (``None``: not known yet). Never asks the
        broker: Tansu's ListOffsets for the end of a log is wrong (docs/daemon.md)."""
        ...

    def position(self, tp: Partition) -> int | None:
        """The next offset the client will fetch (``None``: not known yet); never blocks."""
        ...

    def pause(self, tp: Partition) -> None:
        """Stop fetching ``tp`` (records already fetched are kept)."""
        ...

    def resume(self, tp: Partition) -> None:
        """Fetch ``tp`` again."""
        ...

    def commit(self, offsets: Mapping[Partition, int], blocking: bool) -> None:
        """Commit next offsets to the group (failures are logged, never raised);
        ``blocking=False`` inside rebalance callbacks."""
        ...

    def close(self) -> None:
        """Leave the group (revocations may be reported) and close, without committing."""
        ...


class ProducerClient(Protocol):
    """One producer of a client library (acks=all, not idempotent: the sink re-sends).

    Delivery is tracked in aggregate: :meth:`in_flight` counts messages handed over and not yet
    known acknowledged nor returned by :meth:`failures`; so the caller knows how many were
    acknowledged without a report per message.
    """

    def produce(
        self,
        topic: str,
        value: bytes,
        key: bytes | None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> None:
        """Hand one message over. Raises ``BufferError`` when the client's queue is full (serve,
        then try once more), any other exception when it cannot send now."""
        ...

    def serve(self, timeout: float) -> None:
        """Let delivery reports arrive (up to ``timeout`` seconds)."""
        ...

    def failures(self) -> tuple[list[Output], BaseException | None]:
        """The messages that failed since the last call, and the last error."""
        ...

    def in_flight(self) -> int:
        """Messages handed over, not known acknowledged, not returned by :meth:`failures` (an
        upper bound: an acknowledgement may be known only once :meth:`failures` has run; a
        failure is never missed)."""
        ...

    def flush(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for everything handed over to be delivered or fail."""
        ...

    def abandon(self) -> None:
        """Stop at once (the client is broken): afterwards :meth:`failures` returns every message
        not acknowledged, to be sent again by a new client."""
        ...

    def close(self) -> None:
        """Close (after a flush)."""
        ...


#: An adapter class: builds a client from the settings, or raises :class:`ClientUnavailable`.
ConsumerFactory = Callable[[KafkaSettings], ConsumerClient]
ProducerFactory = Callable[[KafkaSettings], ProducerClient]


# -- the mix log: a mixing group's one-partition topic ------------------------------------------


class SendFailed(Exception):
    """A record for the mix log could not be sent, or was not acknowledged in time (the client
    library's error as the message)."""


class Acknowledgement(Protocol):
    """The broker's answer to one record a :class:`MixLogWriter` sent."""

    @property
    def is_done(self) -> bool:
        """Whether the broker answered (acknowledged, or the send failed); never blocks."""
        ...

    def wait(self, timeout: float) -> None:
        """Until the record is acknowledged; raises :class:`SendFailed` if it failed or no
        answer came within ``timeout`` seconds."""
        ...


class MixLogWriter(Protocol):
    """The writer of a mixing group's mix log (``mixing.topic``, one partition): idempotent,
    ``acks=all``, every record into partition 0, each acknowledgement awaited by its sender.
    An idempotent producer stays broken after a broker restart: after a failure the caller
    closes this writer and builds another."""

    def send(self, key: bytes, value: bytes) -> Acknowledgement:
        """Hand one record over; raises :class:`SendFailed` when it cannot be sent now."""
        ...

    def close(self, timeout: float) -> None:
        """Close, waiting up to ``timeout`` seconds for what was sent."""
        ...


class MixLogReader(Protocol):
    """The reader of a mix log: its one partition assigned (no consumer group), read from
    offset 0 (every member reads all of it)."""

    def poll(self, timeout_ms: int) -> list[Message]:
        """The records fetched since the last poll, in the order the client returns them;
        waits up to ``timeout_ms`` only when nothing is fetched."""
        ...

    def seek(self, offset: int) -> None:
        """Fetch from ``offset`` next."""
        ...

    def highwater(self) -> int | None:
        """The partition's end from the last fetch response (``None``: none yet). Never asks
        the broker: Tansu's ListOffsets for the end of a log is wrong (docs/daemon.md)."""
        ...

    def position(self) -> int | None:
        """The offset after the last record delivered (before any: where reading started;
        ``None``: not known yet)."""
        ...

    def close(self) -> None:
        """Close."""
        ...


#: A mix log writer adapter: built from the settings, the topic and the largest record's bytes.
MixLogWriterFactory = Callable[[KafkaSettings, str, int], MixLogWriter]
#: A mix log reader adapter: built from the settings, the topic, the largest record's bytes and
#: how long the broker may hold a fetch that finds nothing (ms).
MixLogReaderFactory = Callable[[KafkaSettings, str, int, int], MixLogReader]
