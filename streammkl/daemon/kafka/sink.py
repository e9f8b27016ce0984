"""One producer for predictions and dead letters, that never loses an output silently.

Every output sent goes into :attr:`Sink.pending` (a plain tuple, cheap to keep) until the
producer has nothing in flight: then everything pending has been acknowledged. Delivery is
tracked in aggregate, without a report per message: the producer adapter
(:class:`~streammkl.daemon.kafka.clients.protocol.ProducerClient`, one per client library in
:mod:`streammkl.daemon.kafka.clients`) reports only failures and counts what it holds, so the
pending outputs less those still held and those reported failed have been acknowledged.

A failed send is counted, the producer is recreated (a Tansu restart leaves kafka-python's
producer permanently broken: docs/daemon.md), rate-limited, and the output is sent again. What is
still unacknowledged when a checkpoint is taken (:meth:`Sink.flush`'s return, a superset: every
output sent since the producer last held nothing) goes into the checkpoint's *outbox* and is
re-sent after a restart, so outputs are delivered at least once: a crash can duplicate
predictions (identical ones: the replayed model is the same) but never drop them.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Sequence
from itertools import repeat
from typing import Any, Protocol

from prometheus_client import Counter

from streammkl.daemon.config import KafkaSettings
from streammkl.daemon.kafka.clients.protocol import Output, ProducerClient, ProducerFactory

__all__ = ["PENDING_BYTES_LIMIT", "PENDING_LIMIT", "Sink"]

log = logging.getLogger(__name__)


class SinkMetrics(Protocol):
    """The counters the sink updates (:class:`~streammkl.daemon.http.metrics.DaemonMetrics`'s)."""

    producer_restarts: Counter
    sink_errors: Counter
    outputs_acknowledged: Counter


#: Sent outputs kept before :meth:`Sink.poll` waits for acknowledgements (bounds memory between
#: checkpoints) ...
PENDING_LIMIT = 100_000
#: ... and their bytes: a dead letter holds its record (up to ``kafka.dead_letter_max_bytes``),
#: so 100,000 of them behind a slow broker could hold up to ~90 GB.
PENDING_BYTES_LIMIT = 64 << 20


class Sink:
    """Produce outputs, track acknowledgements, recreate a broken producer.

    Parameters
    ----------
    settings
        Kafka settings.
    client
        The producer adapter's class (any callable building a
        :class:`~streammkl.daemon.kafka.clients.protocol.ProducerClient` from the settings).
    metrics
        A :class:`~streammkl.daemon.http.metrics.DaemonMetrics` (or ``None``).
    """

    def __init__(
        self, settings: KafkaSettings, client: ProducerFactory, metrics: SinkMetrics | None = None
    ) -> None:
        self.settings = settings
        self.client = client
        self.metrics = metrics
        self.producer: ProducerClient | None = None
        #: Outputs sent since the producer last held nothing in flight (Output-shaped tuples).
        self.pending: list[Any] = []
        self.pending_bytes = 0  # of the dead letters among them (predictions are small)
        self.healthy = True
        self.delivered = 0
        self.failures = 0
        self._failed_outputs: list[Output] = []  # to be sent again
        # Since pending was last emptied: failures reported, acknowledgements counted.
        self._reported_failures = 0
        self._counted_acks = 0
        self._new_failures = 0  # not yet counted and logged
        self._last_error: BaseException | None = None
        self._next_retry = 0.0
        self._next_create = 0.0

    def start(self) -> Sink:
        """Create the producer (retried later if the broker is unreachable now)."""
        self._ensure_producer()
        return self

    def _ensure_producer(self) -> bool:
        if self.producer is not None:
            return True
        if time.monotonic() < self._next_create:  # a recent attempt failed: do not block again
            return False
        try:
            self.producer = self.client(self.settings)
            return True
        except Exception as exc:  # ClientUnavailable, or a client that refuses its options
            log.warning("cannot create the producer: %s", exc)
            self._next_create = time.monotonic() + 1.0
            self.healthy = False
            return False

    def _restart_producer(self) -> None:
        old, self.producer = self.producer, None
        if old is not None:
            old.abandon()  # everything it still holds comes back as failed, to be sent again
            self._collect(old)
        if self.metrics is not None:
            self.metrics.producer_restarts.inc()
        self._ensure_producer()

    # -- sending ------------------------------------------------------------------------------

    def send(self, out: Output) -> None:
        """Produce ``out``; it stays pending until the producer has nothing in flight."""
        if self.producer is None and not self._ensure_producer():
            self._failed_outputs.append(out)
            return
        producer = self.producer
        assert producer is not None
        headers = list(out.headers) or None
        try:
            try:
                producer.produce(out.topic, out.value, out.key, headers=headers)
            except BufferError:  # the local queue is full: serve deliveries, then once more
                producer.serve(0.1)
                producer.produce(out.topic, out.value, out.key, headers=headers)
        except Exception as exc:  # BufferError again (broker down for long), no metadata, ...
            self._last_error = exc  # logged once by the next settle
            self._new_failures += 1
            self._failed_outputs.append(out)
            return
        self.pending.append(out)
        self.pending_bytes += len(out.value)

    def send_prediction(self, topic: str, value: bytes, key: bytes | None) -> None:
        """:meth:`send` of a message without headers (the per-record hot path)."""
        try:
            self.producer.produce(topic, value, key)  # type: ignore[union-attr]
        except Exception:  # no producer, a full queue, ...: the general path
            self.send(Output(topic, value, key))
            return
        self.pending.append((topic, value, key, ()))

    def send_predictions(
        self, topic: str, values: Sequence[bytes], keys: Sequence[bytes | None]
    ) -> None:
        """:meth:`send_prediction` of each ``(value, key)``, in order (a batch's predictions:
        one call, not one per record). The producer is called a column at a time (``map``: no
        Python loop per message, ~0.08 us less per record); a send that raises (a full queue,
        ...) goes through :meth:`send`, and the rest one by one after it."""
        if len(values) != len(keys):
            raise ValueError(f"{len(values)} values but {len(keys)} keys")
        producer = self.producer
        if producer is None:
            self._send_each(topic, values, keys)
            return
        left = iter(values)
        try:
            deque(map(producer.produce, repeat(topic), left, keys), maxlen=0)
        except Exception:
            rest = len(list(left))  # the values not taken yet
            failed = len(values) - rest - 1  # the send that raised: the general path
            self.pending.extend(zip(repeat(topic), values[:failed], keys[:failed], repeat(())))
            self.send(Output(topic, values[failed], keys[failed]))
            self._send_each(topic, values[failed + 1 :], keys[failed + 1 :])
            return
        self.pending.extend(zip(repeat(topic), values, keys, repeat(())))

    def _send_each(self, topic: str, values: Sequence[bytes], keys: Sequence[bytes | None]) -> None:
        """:meth:`send_predictions` one message at a time (a send that raises goes through
        :meth:`send`)."""
        producer = self.producer
        produce = producer.produce if producer is not None else None
        append = self.pending.append
        for value, key in zip(values, keys, strict=True):
            try:
                produce(topic, value, key)  # type: ignore[misc]
            except Exception:  # no producer, a full queue, ...: the general path
                self.send(Output(topic, value, key))
                producer = self.producer  # (send may have created it)
                produce = producer.produce if producer is not None else None
                append = self.pending.append
                continue
            append((topic, value, key, ()))

    def requeue(self, outputs: list[Output]) -> None:
        """Send outputs restored from a checkpoint outbox."""
        for out in outputs:
            self.send(out)

    # -- acknowledgements ---------------------------------------------------------------------

    def _collect(self, producer: ProducerClient) -> None:
        """Take the producer's reported failures (they are in :attr:`pending`)."""
        reported, error = producer.failures()
        if reported:
            self._failed_outputs.extend(reported)
            self._reported_failures += len(reported)
            self._new_failures += len(reported)
            self._last_error = error or self._last_error

    def _settle(self) -> list[Output]:
        """Serve delivery reports; forget pending outputs once nothing is in flight; return
        the failed ones (to be sent again)."""
        ok = 0
        producer = self.producer
        if producer is not None:
            producer.serve(0)
            self._collect(producer)
            queued = producer.in_flight()
            acked = len(self.pending) - queued - self._reported_failures
            # never a decrease: librdkafka's queue length also counts events not yet served (its
            # log lines), so this may lag behind; exact again once nothing is in flight (reset)
            ok = max(0, acked - self._counted_acks)
            self._counted_acks += ok
            if queued == 0:
                self.pending = []
                self.pending_bytes = 0
                self._reported_failures = self._counted_acks = 0
        failed, self._failed_outputs = self._failed_outputs, []
        if self._new_failures:  # one warning per settle, not one per message
            self.failures += self._new_failures
            self.healthy = False
            if self.metrics is not None:
                self.metrics.sink_errors.inc(self._new_failures)
            log.warning("%d send(s) failed (will retry): %s", self._new_failures, self._last_error)
            self._new_failures = 0
            self._last_error = None
        self.delivered += ok
        if ok and not failed:
            self.healthy = True
        if ok and self.metrics is not None:
            self.metrics.outputs_acknowledged.inc(ok)
        return failed

    def unacknowledged(self) -> list[Output]:
        """Outputs possibly not acknowledged yet: a superset (everything sent since the producer
        last held nothing in flight), plus those waiting to be sent again; each once."""
        return self._outstanding(self._failed_outputs)

    def _outstanding(self, failed: list[Output]) -> list[Output]:
        # a failed output is also pending (sent since nothing was in flight): keep it once
        return list(dict.fromkeys([Output._make(o) for o in self.pending] + failed))

    def poll(self) -> None:
        """Per-batch housekeeping: settle finished sends, re-send failed ones (rate-limited),
        and wait for acknowledgements when the pending list grows too big."""
        big = len(self.pending) > PENDING_LIMIT or self.pending_bytes > PENDING_BYTES_LIMIT
        if big and self.producer is not None:
            self.producer.flush(1.0)
        failed = self._settle()
        if not failed:
            return
        now = time.monotonic()
        if now < self._next_retry:
            self._failed_outputs.extend(failed)  # parked: sent again later
            return
        self._next_retry = now + 1.0
        self._restart_producer()
        for out in failed:
            self.send(out)

    def flush(self, timeout: float = 5.0) -> list[Output]:
        """Wait until every pending output is acknowledged, re-sending failures.

        Returns
        -------
        The outputs possibly unacknowledged after ``timeout`` seconds (they stay pending and go
        into the checkpoint outbox); empty when everything was delivered.
        """
        deadline = time.monotonic() + timeout
        while True:
            if self.producer is not None and self.pending:
                try:
                    self.producer.flush(max(0.0, deadline - time.monotonic()))
                except Exception as exc:  # KafkaTimeoutError
                    log.debug("flush: %s", exc)
            failed = self._settle()
            if not failed and not self.pending:
                self.healthy = True
                return []
            if time.monotonic() >= deadline:
                outstanding = self._outstanding(failed)
                self._failed_outputs.extend(failed)
                return outstanding
            if failed:
                self._restart_producer()
                for out in failed:
                    self.send(out)
                time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))

    def close(self, timeout: float = 5.0) -> list[Output]:
        """Flush and close; returns what could not be delivered."""
        left = self.flush(timeout)
        if self.producer is not None:
            try:
                self.producer.close()
            except Exception as exc:
                log.debug("producer close: %s", exc)
            self.producer = None
        return left
