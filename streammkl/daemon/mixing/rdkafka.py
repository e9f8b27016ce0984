"""The mix topic's reader and writer over librdkafka (confluent-kafka), in the shapes
:class:`~streammkl.daemon.mixing.topic.MixTopic` uses (kafka-python's ``KafkaConsumer`` /
``KafkaProducer`` calls it makes), so that the topic's logic -- the order and gap checks, the
acknowledgements, the re-publish of a failed send -- is the same for both libraries.

Why: kafka-python runs its network I/O, the fetch responses' parsing and the producer's sender
in Python threads. A member reads the one-partition mix topic at every batch while a delta is
out and waits on it every round; on the embedded broker (which answers a fetch only at its
``fetch.wait.max.ms``, 10 ms here) those threads and the polls cost a 2-member group more CPU
than its merges, rebases and publishes together (``benchmarks/results/group_cpu.md``).
librdkafka fetches and acknowledges in its own C threads; a poll that finds nothing costs a few
microseconds and a wait blocks on a condition, not a loop.

The mix topic follows ``kafka.consumer_client`` (the reader) and ``kafka.producer_client`` (the
writer), like the daemon's input and outputs (:func:`mix_clients`).
"""

from __future__ import annotations

import functools
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as RdTopicPartition
from kafka import TopicPartition
from kafka.errors import KafkaError, KafkaTimeoutError

from streammkl.daemon.config import KafkaSettings
from streammkl.daemon.kafka.clients.confluent import Received
from streammkl.daemon.kafka.security import librdkafka_options

log = logging.getLogger(__name__)


def _common(settings: KafkaSettings) -> dict[str, Any]:
    """The librdkafka options both clients take from the ``[kafka]`` settings (the broker,
    TLS and SASL: :func:`~streammkl.daemon.kafka.security.librdkafka_options`)."""
    return {
        "bootstrap.servers": settings.bootstrap_servers,
        "client.id": f"{settings.client_id}-mix",
        "socket.connection.setup.timeout.ms": max(1_000, settings.bootstrap_timeout_ms),
        "reconnect.backoff.max.ms": 1_000,
        "logger": logging.getLogger("streammkl.daemon.librdkafka"),
        **librdkafka_options(settings),
    }


class RdMixConsumer:
    """A librdkafka consumer with the calls :class:`MixTopic` makes of a ``KafkaConsumer``
    (assigned, not subscribed: no group is joined; ``group.id`` is only librdkafka's
    requirement)."""

    def __init__(self, settings: KafkaSettings, **options: Any) -> None:
        fetch_bytes = int(options["fetch_max_bytes"])
        config = {
            **_common(settings),
            "group.id": f"streammkl-mix-reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": int(options["fetch_max_wait_ms"]),
            "fetch.min.bytes": 1,
            "fetch.max.bytes": fetch_bytes,
            "max.partition.fetch.bytes": fetch_bytes,
            "receive.message.max.bytes": fetch_bytes + 1_000_000,
            "enable.partition.eof": False,
        }
        self.consumer: Any = confluent_kafka.Consumer(config)
        self._start: dict[tuple[str, int], int] = {}

    def assign(self, tps: list[TopicPartition]) -> None:
        self._assign({(tp.topic, tp.partition): confluent_kafka.OFFSET_BEGINNING for tp in tps})

    def _assign(self, starts: dict[tuple[str, int], int]) -> None:
        self._start.update({k: max(v, 0) for k, v in starts.items()})
        self.consumer.assign([RdTopicPartition(t, p, o) for (t, p), o in starts.items()])

    def seek_to_beginning(self, tp: TopicPartition) -> None:
        self._assign({(tp.topic, tp.partition): confluent_kafka.OFFSET_BEGINNING})

    def seek(self, tp: TopicPartition, offset: int) -> None:
        try:
            self.consumer.seek(RdTopicPartition(tp.topic, tp.partition, offset))
        except KafkaException:  # not fetching yet: assign it there
            self._assign({(tp.topic, tp.partition): offset})

    def poll(self, timeout_ms: int = 0) -> dict[TopicPartition, list[Received]]:
        """Whatever librdkafka has fetched, waiting up to ``timeout_ms`` only when it has
        nothing (then the rest that came with the first)."""
        messages = self.consumer.consume(1_000, 0)
        if not messages and timeout_ms > 0:
            messages = self.consumer.consume(1, timeout_ms / 1000.0)
            if messages:
                messages += self.consumer.consume(1_000, 0)
        out: dict[TopicPartition, list[Received]] = {}
        for m in messages:
            err = m.error()
            if err is not None:
                log.info("mix topic: consume: %s", err)
                continue
            topic, part = m.topic(), m.partition()
            kind, ts = m.timestamp()
            out.setdefault(TopicPartition(topic, part), []).append(
                Received(topic, part, m.offset(), ts if kind else None, m.key(), m.value())
            )
        return out

    def highwater(self, tp: TopicPartition) -> int | None:
        """The partition's end as the last fetch response said (None: no response yet)."""
        try:
            _, high = self.consumer.get_watermark_offsets(
                RdTopicPartition(tp.topic, tp.partition), cached=True
            )
        except KafkaException:
            return None
        return None if high < 0 else int(high)

    def position(self, tp: TopicPartition) -> int | None:
        """After the last record delivered; before any, the offset the partition started at."""
        try:
            (p,) = self.consumer.position([RdTopicPartition(tp.topic, tp.partition)])
        except KafkaException:
            return None
        return int(p.offset) if p.offset >= 0 else self._start.get((tp.topic, tp.partition))

    def close(self) -> None:
        self.consumer.close()


class Delivery:
    """A produced record's delivery, with the calls :class:`MixTopic` makes of kafka-python's
    ``FutureRecordMetadata`` (``is_done``, ``get``)."""

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

    def get(self, timeout: float | None = None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.done:
            left = 1.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise KafkaTimeoutError(f"not acknowledged within {timeout} s")
            self._producer.poll(min(left, 1.0))
        if self.error is not None:
            raise KafkaError(str(self.error))


class RdMixProducer:
    """A librdkafka producer with the calls :class:`MixTopic` makes of a ``KafkaProducer``
    (idempotent, every acknowledgement awaited by its :class:`Delivery`)."""

    def __init__(self, settings: KafkaSettings, **options: Any) -> None:
        config = {
            **_common(settings),
            "acks": "all" if options.get("acks", "all") == "all" else str(options["acks"]),
            "enable.idempotence": bool(options.get("enable_idempotence", True)),
            "linger.ms": int(options.get("linger_ms", 0)),
            "message.max.bytes": int(options["max_request_size"]) + 1_000_000,
            "request.timeout.ms": max(5_000, settings.request_timeout_ms),
            "message.timeout.ms": max(30_000, settings.request_timeout_ms),
        }
        self.producer = confluent_kafka.Producer(config)

    def send(self, topic: str, key: bytes, value: bytes, partition: int) -> Delivery:
        delivery = Delivery(self.producer)
        try:
            self.producer.produce(topic, value=value, key=key, partition=partition,
                                  on_delivery=delivery)  # fmt: skip
        except (KafkaException, BufferError) as exc:
            raise KafkaError(f"produce: {exc}") from exc
        self.producer.poll(0)
        return delivery

    def close(self, timeout: float | None = None) -> None:
        self.producer.flush(5.0 if timeout is None else timeout)


def mix_clients(settings: KafkaSettings) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The mix topic's (writer, reader) factories, as :class:`MixTopic` calls them (with
    kafka-python's options): librdkafka's when ``kafka.producer_client`` /
    ``kafka.consumer_client`` name it, else kafka-python's."""
    from kafka import KafkaConsumer, KafkaProducer

    producer: Callable[..., Any] = KafkaProducer
    consumer: Callable[..., Any] = KafkaConsumer
    if settings.producer_client == "librdkafka":
        producer = functools.partial(RdMixProducer, settings)
    if settings.consumer_client == "librdkafka":
        consumer = functools.partial(RdMixConsumer, settings)
    return producer, consumer
