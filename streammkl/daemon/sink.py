"""One producer for predictions and dead letters, that never loses an output silently.

Every output stays in a pending list until the broker acknowledges it. A failed send is counted,
the producer is recreated (a Tansu restart leaves kafka-python's producer permanently broken:
docs/daemon.md) and the output is sent again. What is still unacknowledged when a checkpoint is
taken goes into the checkpoint's *outbox* and is re-sent after a restart, so outputs are delivered
at least once: a crash can duplicate predictions (identical ones: the replayed model is the same)
but never drop them.
"""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from kafka import KafkaProducer

from streammkl.daemon.config import KafkaSettings
from streammkl.daemon.kafka_security import kafka_python_options

log = logging.getLogger(__name__)


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


def producer_config(settings: KafkaSettings) -> dict[str, Any]:
    """kafka-python producer options: acks=all, bounded blocking, no idempotence (see above)."""
    return {
        "bootstrap_servers": settings.bootstrap_servers.split(","),
        "client_id": f"{settings.client_id}-sink",
        "acks": "all",
        # An idempotent producer is broken for good by a Tansu restart; we re-send ourselves.
        "enable_idempotence": False,
        "linger_ms": settings.producer_linger_ms,
        "batch_size": settings.producer_batch_bytes,
        "max_block_ms": 2_000,  # send() must not stall the loop for a minute (broker down)
        "request_timeout_ms": 5_000,
        "retries": 2,
        "reconnect_backoff_max_ms": 1_000,
        "bootstrap_timeout_ms": settings.bootstrap_timeout_ms,
        **kafka_python_options(settings),
    }


class Sink:
    """Produce outputs, track acknowledgements, recreate a broken producer.

    Parameters
    ----------
    settings
        Kafka settings.
    metrics
        A :class:`~streammkl.daemon.metrics.DaemonMetrics` (or ``None``).
    producer_factory
        Builds the producer from keyword options (tests inject fakes).
    """

    def __init__(
        self,
        settings: KafkaSettings,
        metrics: Any = None,
        producer_factory: Callable[..., Any] = KafkaProducer,
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self.producer_factory = producer_factory
        self.producer: Any = None
        self.pending: list[tuple[Output, Any]] = []  # (output, future or None when send raised)
        self.healthy = True
        self.delivered = 0
        self.failures = 0
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
            self.producer = self.producer_factory(**producer_config(self.settings))
            return True
        except Exception as exc:  # unable to bootstrap, NoBrokersAvailable, ...
            log.warning("cannot create the producer: %s", exc)
            self._next_create = time.monotonic() + 1.0
            self.healthy = False
            return False

    def _restart_producer(self) -> None:
        old, self.producer = self.producer, None
        if old is not None:
            try:
                old.close(timeout=0)
            except Exception as exc:
                log.debug("closing the broken producer: %s", exc)
        if self.metrics is not None:
            self.metrics.producer_restarts.inc()
        self._ensure_producer()

    def _send(self, out: Output) -> Any:
        if self.producer is None and not self._ensure_producer():
            return None
        try:
            headers = list(out.headers) if out.headers else None
            return self.producer.send(out.topic, value=out.value, key=out.key, headers=headers)
        except Exception as exc:  # KafkaTimeoutError (no metadata), buffer full, closed producer
            self._failed(exc)
            return None

    def _failed(self, exc: BaseException | None) -> None:
        self.failures += 1
        self.healthy = False
        if self.metrics is not None:
            self.metrics.sink_errors.inc()
        log.warning("send failed (will retry): %s", exc)

    def send(self, out: Output) -> None:
        """Queue ``out``; it stays pending until acknowledged."""
        self.pending.append((out, self._send(out)))

    def send_prediction(self, topic: str, value: bytes, key: bytes | None) -> None:
        """:meth:`send` of a message without headers (the per-record hot path)."""
        self.send(Output(topic, value, key))

    def requeue(self, outputs: list[Output]) -> None:
        """Send outputs restored from a checkpoint outbox."""
        for out in outputs:
            self.send(out)

    def _settle(self) -> list[Output]:
        """Drop acknowledged outputs; return the failed ones (removed from pending)."""
        keep: list[tuple[Output, Any]] = []
        failed: list[Output] = []
        ok = 0
        for out, fut in self.pending:
            if fut is None:
                failed.append(out)
            elif not fut.is_done:
                keep.append((out, fut))
            elif fut.failed():
                self._failed(fut.exception)
                failed.append(out)
            else:
                ok += 1
        self.pending = keep
        self._acknowledged(ok, failed)
        return failed

    def _acknowledged(self, ok: int, failed: list[Output]) -> None:
        """Count ``ok`` acknowledged outputs; healthy again once sends succeed without failures."""
        self.delivered += ok
        if ok and not failed:
            self.healthy = True
        if ok and self.metrics is not None:
            self.metrics.outputs_acknowledged.inc(ok)

    def poll(self) -> None:
        """Per-batch housekeeping: settle finished sends, re-send failed ones (rate-limited)."""
        failed = self._settle()
        if not failed:
            return
        now = time.monotonic()
        if now < self._next_retry:
            self._park(failed)
            return
        self._next_retry = now + 1.0
        self._restart_producer()
        for out in failed:
            self.send(out)

    def flush(self, timeout: float = 5.0) -> list[Output]:
        """Wait until every pending output is acknowledged, re-sending failures.

        Returns
        -------
        The outputs still unacknowledged after ``timeout`` seconds (they stay pending and go
        into the checkpoint outbox); empty when everything was delivered.
        """
        deadline = time.monotonic() + timeout
        while True:
            if self.producer is not None and self.pending:
                try:
                    self._flush_producer(max(0.0, deadline - time.monotonic()))
                except Exception as exc:  # KafkaTimeoutError
                    log.debug("flush: %s", exc)
            failed = self._settle()
            if not failed and not self.pending:
                self.healthy = True
                return []
            if time.monotonic() >= deadline:
                outstanding = self._unacknowledged() + failed
                self._park(failed)
                return outstanding
            if failed:
                self._restart_producer()
                for out in failed:
                    self.send(out)
                time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))

    # Hooks for another producer client (RdkafkaSink).

    def _park(self, failed: list[Output]) -> None:
        """Keep failed outputs to be sent again later."""
        self.pending.extend((out, None) for out in failed)

    def _unacknowledged(self) -> list[Output]:
        """The pending outputs (for the checkpoint outbox)."""
        return [out for out, _ in self.pending]

    def _flush_producer(self, timeout: float) -> None:
        self.producer.flush(timeout=timeout)

    def close(self, timeout: float = 5.0) -> list[Output]:
        """Flush and close; returns what could not be delivered."""
        left = self.flush(timeout)
        if self.producer is not None:
            try:
                self.producer.close(timeout=1)
            except Exception as exc:
                log.debug("producer close: %s", exc)
            self.producer = None
        return left
