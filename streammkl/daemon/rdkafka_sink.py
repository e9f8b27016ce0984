"""The daemon's default producer: librdkafka (confluent-kafka), with :class:`Sink`'s guarantees.

Why not kafka-python here: its producer spends 29-34 us of Python under the GIL per message
(record accumulator, futures, the sender thread), more than the learning round itself;
librdkafka batches, compresses and retries in C threads, and ``produce`` costs about 1.8 us
(``benchmarks/results/daemon_throughput.md``). The consumer is librdkafka too
(:mod:`streammkl.daemon.rdkafka_source`).

Delivery tracking is aggregate rather than a future per message: every output goes into
:attr:`pending` (a plain tuple, cheap to keep); librdkafka reports only failures
(``delivery.report.only.error``: a report per acknowledged message cost ~0.7 µs of the loop's
CPU each) to one delivery callback, whose messages are sent again (after recreating the producer,
rate-limited), and once librdkafka holds nothing in flight, everything pending has been
acknowledged. The acknowledged *count* is known at any time without a report per message:
librdkafka's queue length counts every message not yet acknowledged or reported, so the pending
outputs less those still queued and those reported failed have been acknowledged. So the outbox a
checkpoint writes (:meth:`flush`'s return) is a superset of what is really unacknowledged: a
crash may duplicate outputs (identical ones), never drop them — the same at-least-once contract
as the kafka-python sink.
"""

from __future__ import annotations

import logging
from typing import Any

import confluent_kafka

from streammkl.daemon.config import KafkaSettings
from streammkl.daemon.kafka_security import librdkafka_options
from streammkl.daemon.sink import Output, Sink

log = logging.getLogger(__name__)

#: Sent outputs kept before :meth:`RdkafkaSink.poll` waits for acknowledgements (bounds memory
#: between checkpoints) ...
PENDING_LIMIT = 100_000
#: ... and their bytes: a dead letter holds its record (up to ``kafka.dead_letter_max_bytes``),
#: so 100,000 of them behind a slow broker could hold up to ~90 GB.
PENDING_BYTES_LIMIT = 64 << 20


def rdkafka_config(settings: KafkaSettings) -> dict[str, Any]:
    """librdkafka options equivalent to :func:`~streammkl.daemon.sink.producer_config`."""
    return {
        "bootstrap.servers": settings.bootstrap_servers,
        "client.id": f"{settings.client_id}-sink",
        "acks": "all",
        # Not idempotent, as the kafka-python sink: we re-send failures ourselves.
        "enable.idempotence": False,
        "linger.ms": settings.producer_linger_ms,
        "batch.size": settings.producer_batch_bytes,
        # A message not delivered within this long fails to the delivery callback (re-sent).
        "message.timeout.ms": max(5_000, settings.request_timeout_ms),
        "request.timeout.ms": 5_000,
        "reconnect.backoff.max.ms": 1_000,
        "socket.connection.setup.timeout.ms": max(1_000, settings.bootstrap_timeout_ms),
        # librdkafka's own queue of unsent messages: bounded in bytes (default 1 GB), not only in
        # count; a full queue makes produce() wait for deliveries (BufferError, served below)
        "queue.buffering.max.kbytes": 65_536,
        "logger": logging.getLogger("streammkl.daemon.librdkafka"),
        **librdkafka_options(settings),
    }


class RdkafkaSink(Sink):
    """:class:`Sink` on a confluent-kafka producer (same interface, aggregate tracking);
    ``settings`` and ``metrics`` as :class:`Sink`."""

    def __init__(self, settings: KafkaSettings, metrics: Any = None) -> None:
        super().__init__(settings, metrics, producer_factory=self._create)
        self.pending: list[Any] = []  # Output-shaped tuples
        self.pending_bytes = 0  # of the dead letters among them (predictions are small)
        self._failed_outputs: list[Output] = []
        # Since pending was last emptied: failures reported, acknowledgements counted.
        self._reported_failures = 0
        self._counted_acks = 0
        self._last_error: Any = None

    def _create(self, **_: Any) -> Any:
        conf = rdkafka_config(self.settings)
        conf["on_delivery"] = self._on_delivery
        conf["delivery.report.only.error"] = True
        return confluent_kafka.Producer(conf)

    def _on_delivery(self, err: Any, msg: Any) -> None:
        # Runs inside producer.poll()/flush(), on the loop's thread; failures only.
        if err is None:  # (not configured to happen)
            return
        self._reported_failures += 1
        self._failed_outputs.append(
            Output(msg.topic(), msg.value() or b"", msg.key(), tuple(msg.headers() or ()))
        )
        self._last_error = err

    def _produce(self, topic: str, value: bytes, key: bytes | None, headers: Any) -> bool:
        producer = self.producer
        if producer is None and not self._ensure_producer():
            return False
        try:
            producer = self.producer
            try:
                producer.produce(topic, value, key, headers=headers)
            except BufferError:  # the local queue is full: serve callbacks, then once more
                producer.poll(0.1)
                producer.produce(topic, value, key, headers=headers)
            return True
        except Exception as exc:  # BufferError again (broker down for long), KafkaException
            self._last_error = exc  # reported once by the next settle
            return False

    def send(self, out: Output) -> None:
        """Produce ``out``; it stays pending until librdkafka has nothing in flight."""
        if self._produce(out.topic, out.value, out.key, list(out.headers) or None):
            self.pending.append(out)
            self.pending_bytes += len(out.value)
        else:
            self._failed_outputs.append(out)

    def send_prediction(self, topic: str, value: bytes, key: bytes | None) -> None:
        """:meth:`send` of a message without headers (the per-record hot path)."""
        try:
            self.producer.produce(topic, value, key)
        except Exception:  # no producer, a full queue, ...: the general path
            self.send(Output(topic, value, key))
            return
        self.pending.append((topic, value, key, ()))

    def _settle(self) -> list[Output]:
        """Serve delivery callbacks; forget pending outputs once nothing is in flight; return
        the failed ones (to be sent again)."""
        ok = 0
        if self.producer is not None:
            self.producer.poll(0)
            queued = len(self.producer)  # not yet acknowledged, or a report not yet served
            acked = len(self.pending) - queued - self._reported_failures
            ok, self._counted_acks = acked - self._counted_acks, acked
            if queued == 0:
                self.pending = []
                self.pending_bytes = 0
                self._reported_failures = self._counted_acks = 0
        failed, self._failed_outputs = self._failed_outputs, []
        if self._last_error is not None:  # one warning per settle, not one per message
            err = self._last_error
            if not isinstance(err, BaseException):
                err = confluent_kafka.KafkaException(err)
            self._failed(err)
            self.failures += len(failed) - 1
            self._last_error = None
        self._acknowledged(ok, failed)
        return failed

    def poll(self) -> None:
        """Per-batch housekeeping (:meth:`Sink.poll`), with a bounded pending list."""
        big = len(self.pending) > PENDING_LIMIT or self.pending_bytes > PENDING_BYTES_LIMIT
        if big and self.producer is not None:
            self.producer.flush(1.0)
        super().poll()

    def _park(self, failed: list[Output]) -> None:
        self._failed_outputs.extend(failed)

    def _unacknowledged(self) -> list[Output]:
        # A superset: everything sent since librdkafka last held nothing in flight.
        return [Output._make(o) for o in self.pending]

    def _flush_producer(self, timeout: float) -> None:
        self.producer.flush(timeout)

    def _restart_producer(self) -> None:
        old, self.producer = self.producer, None
        if old is not None:
            try:  # every message it still holds fails to our callback, to be sent again
                old.purge(in_queue=True, in_flight=True)
                # flush, not poll(0): the reports of purged in-flight messages come from the
                # broker threads, possibly after this call; flush serves them as they arrive
                old.flush(1.0)
            except Exception as exc:
                log.debug("purging the old producer: %s", exc)
        if self.metrics is not None:
            self.metrics.producer_restarts.inc()
        self._ensure_producer()

    def close(self, timeout: float = 5.0) -> list[Output]:
        """Flush and drop the producer; returns what could not be delivered."""
        left = self.flush(timeout)
        self.producer = None  # librdkafka closes on garbage collection
        return left
