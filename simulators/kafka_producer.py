"""Produce wire records to Kafka (kafka-python): rate limit, count, progress bar, acks=all, and a
fresh producer after a fatal error.

Records are sent in batches; after each batch the producer is flushed and every delivery is
checked. Records whose delivery failed (after the client's own retries), or that could not be sent
at all, are re-sent through a *new* producer: an idempotent producer that hit, e.g.,
``UnknownProducerIdError`` after a broker restart never recovers (docs/daemon.md: the embedded
broker's known behaviour). After ``max_failures`` consecutive rounds without progress,
:class:`ProduceError` is raised. A re-sent record may land after records produced later (ordering
is kept within a successful batch).

``python -m simulators.kafka_producer FILE.jsonl --bootstrap-servers B --topic T`` replays a
JSON Lines file (see :mod:`simulators.jsonl`).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import logging
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tqdm import tqdm

from streammkl.wire import Record, encode

__all__ = ["ProduceError", "ProduceStats", "kafka_producer_factory", "main", "produce"]

log = logging.getLogger(__name__)

KeyArg = str | Callable[[int, Record], str | None] | None


class ProduceError(RuntimeError):
    """Records could not be delivered even through fresh producers."""


@dataclasses.dataclass
class ProduceStats:
    """What :func:`produce` did: records acknowledged, producers recreated, last error, seconds."""

    sent: int = 0
    recreated: int = 0
    last_error: str | None = None
    elapsed: float = 0.0

    @property
    def rate(self) -> float:
        """Acknowledged records per second."""
        return self.sent / self.elapsed if self.elapsed > 0 else 0.0


def kafka_producer_factory(
    bootstrap_servers: str | Sequence[str], **config: Any
) -> Callable[[], Any]:
    """A function making kafka-python producers with ``acks="all"`` and idempotence on."""

    def make() -> Any:
        with warnings.catch_warnings():  # kafka-python 3.0 warns at import on Python 3.11
            warnings.simplefilter("ignore", DeprecationWarning)
            from kafka import KafkaProducer

        options = {"acks": "all", "enable_idempotence": True, "linger_ms": 5, **config}
        return KafkaProducer(bootstrap_servers=bootstrap_servers, **options)

    return make


def _key_function(key: KeyArg, context: dict[str, Any]) -> Callable[[int, Record], bytes | None]:
    if key is None or key == "":
        return lambda i, rec: None
    if callable(key):
        fn = key

        def call(i: int, rec: Record) -> bytes | None:
            out = fn(i, rec)
            return None if out is None else out.encode()

        return call
    template = key
    try:
        template.format_map({"id": "", "index": 0, **context})
    except (KeyError, IndexError, ValueError) as exc:
        fields = sorted({"id", "index", *context})
        raise ValueError(f"key template {template!r} is invalid ({exc}); fields {fields}") from None
    return lambda i, rec: template.format_map({"id": rec.id, "index": i, **context}).encode()


class _Sender:
    """Owns the current producer; delivers batches, recreating the producer after errors."""

    def __init__(
        self,
        factory: Callable[[], Any],
        topic: str,
        flush_timeout: float,
        max_failures: int,
        stats: ProduceStats,
        bar: Any,
    ) -> None:
        self.factory, self.topic, self.flush_timeout = factory, topic, flush_timeout
        self.max_failures, self.stats, self.bar = max_failures, stats, bar
        self.producer: Any = None

    def deliver(self, batch: list[tuple[bytes | None, bytes]]) -> None:
        todo, failures = batch, 0
        while todo:
            error: BaseException | None = None
            futures: list[Any] = []
            try:
                if self.producer is None:
                    self.producer = self.factory()
                for key, value in todo:
                    futures.append(self.producer.send(self.topic, value=value, key=key))
                self.producer.flush(timeout=self.flush_timeout)
            except Exception as exc:  # any client error: retry the rest through a new producer
                error = exc
            failed = []
            for i, item in enumerate(todo):
                fut = futures[i] if i < len(futures) else None
                if fut is not None and fut.is_done and fut.succeeded():
                    continue
                failed.append(item)
                if error is None:
                    error = (
                        fut.exception
                        if fut is not None and fut.is_done
                        else TimeoutError(f"not acknowledged within {self.flush_timeout} s")
                    )
            acked = len(todo) - len(failed)
            self.stats.sent += acked
            self.bar.update(acked)
            todo = failed
            if not todo:
                return
            failures = 0 if acked else failures + 1
            self.stats.last_error = f"{type(error).__name__}: {error}"
            if failures >= self.max_failures:
                raise ProduceError(
                    f"{len(todo)} records undelivered to {self.topic!r} after {failures} fresh "
                    f"producers; last error: {self.stats.last_error}"
                )
            log.warning("delivery failed (%s); recreating the producer", self.stats.last_error)
            self.close(timeout=0.0)
            self.stats.recreated += 1
            time.sleep(min(0.1 * 2**failures, 2.0))

    def close(self, timeout: float) -> None:
        if self.producer is not None:
            try:
                self.producer.close(timeout=timeout)
            except Exception:  # a broken producer may fail to close; it is dropped either way
                log.debug("closing the producer failed", exc_info=True)
            self.producer = None


def produce(
    records: Iterable[Record],
    *,
    topic: str,
    bootstrap_servers: str | Sequence[str] | None = None,
    key: KeyArg = None,
    key_context: dict[str, Any] | None = None,
    rate: float | None = None,
    count: int | None = None,
    progress: bool = True,
    wall_clock_ts: bool = False,
    batch_size: int = 5000,
    max_batch_seconds: float = 1.0,
    flush_timeout: float = 30.0,
    max_failures: int = 5,
    producer_factory: Callable[[], Any] | None = None,
    producer_config: dict[str, Any] | None = None,
) -> ProduceStats:
    """Send (at most ``count``) records to ``topic``, each value ``wire.encode(record)``.

    Parameters
    ----------
    records
        Any iterable of records (a scenario, :func:`simulators.jsonl.read_jsonl`, ...).
    topic
        Destination topic.
    bootstrap_servers
        Broker list; needed unless ``producer_factory`` is given.
    key
        ``None``/``""`` for no key, a template with fields ``{id}``, ``{index}`` and those of
        ``key_context`` (a constant key keeps the stream in one partition, hence in order), or a
        function ``(index, record) -> str | None``.
    key_context
        Extra template fields (the CLI passes ``scenario``).
    rate
        Maximum records per second (``None``: as fast as possible).
    count
        Maximum number of records.
    progress
        Show a tqdm progress bar (on standard error).
    wall_clock_ts
        Replace each record's ``ts`` by the wall-clock time at sending.
    batch_size, max_batch_seconds
        A batch is flushed and checked after this many records or this many seconds.
    flush_timeout
        Seconds to wait for a batch's acknowledgements before treating the rest as failed.
    max_failures
        Consecutive fresh producers that deliver nothing before giving up.
    producer_factory
        Makes producers (tests inject fakes); default :func:`kafka_producer_factory`.
    producer_config
        More kafka-python producer options for the default factory (e.g. TLS / SASL).
    """
    if rate is not None and not rate > 0:
        raise ValueError(f"rate must be > 0 records per second, got {rate!r}")
    if count is not None and count < 0:
        raise ValueError(f"count must be >= 0, got {count!r}")
    if producer_factory is None:
        if not bootstrap_servers:
            raise ValueError("bootstrap_servers is required (or pass producer_factory)")
        producer_factory = kafka_producer_factory(bootstrap_servers, **(producer_config or {}))
    key_of = _key_function(key, dict(key_context or {}))
    total = count
    if total is None and hasattr(records, "__len__"):
        total = len(records)  # type: ignore[arg-type]
    stats = ProduceStats()
    start = time.monotonic()
    with tqdm(total=total, unit="rec", disable=not progress, desc=topic) as bar:
        sender = _Sender(producer_factory, topic, flush_timeout, max_failures, stats, bar)
        try:
            batch: list[tuple[bytes | None, bytes]] = []
            batch_start = time.monotonic()
            for i, record in enumerate(itertools.islice(records, count)):
                if rate is not None:
                    delay = start + i / rate - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                if wall_clock_ts:
                    record = dataclasses.replace(record, ts=time.time())
                batch.append((key_of(i, record), encode(record)))
                now = time.monotonic()
                if len(batch) >= batch_size or now - batch_start >= max_batch_seconds:
                    sender.deliver(batch)
                    batch, batch_start = [], time.monotonic()
            sender.deliver(batch)
        finally:
            sender.close(timeout=flush_timeout)
    stats.elapsed = time.monotonic() - start
    return stats


def main(argv: Sequence[str] | None = None) -> int:
    """Replay a JSON Lines file of records into Kafka."""
    from .jsonl import read_jsonl

    parser = argparse.ArgumentParser(
        prog="python -m simulators.kafka_producer", description=main.__doc__
    )
    parser.add_argument("file", help="JSON Lines file of wire records")
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--key", default=None, help="key template ({id}, {index}); default none")
    parser.add_argument("--rate", type=float, default=None, help="records per second")
    parser.add_argument("--count", type=int, default=None)
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    stats = produce(
        read_jsonl(args.file),
        topic=args.topic,
        bootstrap_servers=args.bootstrap_servers,
        key=args.key,
        rate=args.rate,
        count=args.count,
        progress=not args.no_progress,
    )
    print(f"sent {stats.sent} records in {stats.elapsed:.2f} s ({stats.recreated} recreated)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
