"""The daemon loop: per batch, decode -> predict (prequential) -> learn -> emit; checkpoint.

The loop owns the learner, the next offset of every partition and the counters, and checkpoints
them together (model + offsets + counters + outbox in one atomic checkpoint). Bad input never
stops it: a record that cannot be decoded (or that the learner refuses) goes to the dead-letter
topic with its reason. :meth:`Runner.stop` (called by the CLI's signal handlers) ends it at the
next batch boundary with a final checkpoint.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kafka import KafkaConsumer, KafkaProducer

from streammkl.daemon.checkpoint import CheckpointError, CheckpointStore, encode_offsets
from streammkl.daemon.config import Settings
from streammkl.daemon.health import HealthServer
from streammkl.daemon.learner import build_learner, introspect, is_classifier, restore
from streammkl.daemon.metrics import DaemonMetrics, Snapshot
from streammkl.daemon.prequential import REASONS, PrequentialStep
from streammkl.daemon.sink import Output, Sink
from streammkl.daemon.source import Source
from streammkl.daemon.topics import ensure_topics

log = logging.getLogger(__name__)

_COUNTERS = (
    "records_consumed", "examples_learned", "records_predicted", "records_rejected",
    "dead_letters", "labelled_predictions", "correct_predictions", "offset_resets",
)  # fmt: skip


def class_path(obj: Any) -> str:
    """``module:QualName`` of an object's class."""
    cls = type(obj)
    return f"{cls.__module__}:{cls.__qualname__}"


class Runner(PrequentialStep):
    """Consume, predict, learn, emit, checkpoint — until stopped or idle.

    Parameters
    ----------
    settings
        Validated settings.
    learner
        A fresh learner (default: built from ``settings.learner``); a checkpoint, if any, is
        restored into its class.
    registry
        Prometheus registry (default: a fresh one).
    consumer_factory, producer_factory
        Injected Kafka clients (tests use in-memory fakes).
    """

    def __init__(
        self,
        settings: Settings,
        learner: Any = None,
        registry: Any = None,
        consumer_factory: Callable[..., Any] = KafkaConsumer,
        producer_factory: Callable[..., Any] = KafkaProducer,
    ) -> None:
        self.settings = settings
        self.metrics = DaemonMetrics(registry)
        self.learner = learner if learner is not None else build_learner(settings.learner)
        self.classifier = is_classifier(self.learner)
        self.store = CheckpointStore(settings.checkpoint.dir, settings.checkpoint.keep)
        self.offsets: dict[tuple[str, int], int] = {}
        self.counters: dict[str, Any] = dict.fromkeys(_COUNTERS, 0)
        self.counters["online_loss"] = 0.0
        self.counters["rejected_by_reason"] = {}
        self.sink = Sink(settings.kafka, self.metrics, producer_factory)
        self.source = Source(
            settings.kafka,
            self.offsets,
            on_revoke=self._on_revoke,
            on_reset=self._on_reset,
            group=settings.kafka.assignment == "group",
            consumer_factory=consumer_factory,
        )
        self.http: HealthServer | None = None
        self.keep_http = False  # the demo keeps serving after the loop ends
        self.started = False
        self._assignments_seen = 0
        self.last_checkpoint: Any = None
        self.status: dict[str, Any] = {
            "ready": False,
            "last_tick": time.monotonic(),
            "assigned": [],
        }
        self._stop = threading.Event()
        self._since_checkpoint = 0
        self._dirty = False
        self._last_checkpoint_at = time.monotonic()
        self._model_view: dict[str, Any] = introspect(self.learner)
        self._model_view_at = 0.0
        self._view_stale = False
        for reason in REASONS:
            self.metrics.rejected.labels(reason)
        r = settings.records
        self._classes = frozenset(r.classes) if r.classes is not None else None

    # -- control ------------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask the loop to finish the current batch, checkpoint and return (thread/signal-safe)."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stop.is_set()

    # -- checkpoints --------------------------------------------------------------------------

    def restore(self) -> None:
        """Load the newest valid checkpoint (if any) into the learner, offsets and counters."""
        self.store.clean_temporaries()
        ckpt = self.store.load_latest()
        if self.store.fallbacks:
            self.metrics.checkpoint_fallbacks.inc(self.store.fallbacks)
        if ckpt is None:
            log.info("no checkpoint in %s: starting a fresh model", self.store.directory)
            return
        model = ckpt.meta["model"]
        if model["class"] != class_path(self.learner):
            raise CheckpointError(
                f"{ckpt.path} holds a {model['class']} but the configuration builds a "
                f"{class_path(self.learner)}"
            )
        self.learner = restore(self.learner, model["meta"], ckpt.arrays)
        digest = self.learner.digest()
        if digest != ckpt.meta["summary"]["model_digest"]:
            raise CheckpointError(f"{ckpt.path}: restored model digest {digest} differs from saved")
        self.offsets.update(ckpt.offsets)
        for key, value in ckpt.counters.items():
            self.counters[key] = value
        self.sink.requeue([Output.from_json(o) for o in ckpt.meta.get("outbox", [])])
        self.last_checkpoint = ckpt
        self._model_view = introspect(self.learner)
        log.info(
            "restored %s: %d examples learned, offsets %s",
            ckpt.path.name, self.counters["examples_learned"], encode_offsets(self.offsets),
        )  # fmt: skip

    def checkpoint(self, reason: str = "periodic", force: bool = False) -> bool:
        """Flush the sink and write model + offsets + counters + outbox atomically.

        Skipped when nothing changed since the last one (unless ``force``). Returns whether a
        checkpoint was written.
        """
        if not (self._dirty or force):
            return False
        t0 = time.perf_counter()
        outbox = self.sink.flush(timeout=5.0)
        if outbox:
            log.warning("%d output(s) unacknowledged; kept in the checkpoint outbox", len(outbox))
        meta, arrays = self.learner.to_state()
        self._model_view = introspect(self.learner)
        self._model_view_at = time.monotonic()
        self._view_stale = False
        summary = {"model_digest": self.learner.digest(), **self._model_view}
        content = {
            "reason": reason,
            "offsets": encode_offsets(self.offsets),
            "counters": self.counters,
            "model": {"class": class_path(self.learner), "meta": meta},
            "summary": summary,
            "outbox": [o.to_json() for o in outbox],
        }
        ckpt = self.store.save(content, arrays)
        elapsed = time.perf_counter() - t0
        self.metrics.checkpoints.inc()
        self.metrics.checkpoint_seconds.observe(elapsed)
        self.last_checkpoint = ckpt
        self._since_checkpoint = 0
        self._dirty = False
        self._last_checkpoint_at = time.monotonic()
        log.debug("checkpoint %d (%s) in %.1f ms", ckpt.seq, reason, elapsed * 1e3)
        self.source.commit()
        self._publish(force_model=False)
        return True

    def _checkpoint_due(self) -> bool:
        c = self.settings.checkpoint
        if self._since_checkpoint >= c.every_records:
            return True
        return self._dirty and time.monotonic() - self._last_checkpoint_at >= c.every_seconds

    # -- processing ---------------------------------------------------------------------------

    def _on_revoke(self) -> None:
        self.checkpoint("revocation")

    def _on_reset(self, topic: str, partition: int, old: int, new: int) -> None:
        self.counters["offset_resets"] += 1
        self.metrics.offset_resets.labels(topic, str(partition)).inc()
        self._dirty = True

    # -- publishing ---------------------------------------------------------------------------

    def _publish(self, force_model: bool = False, busy: bool = False) -> None:
        # Model internals are re-read at most every 0.5 s while batches flow, and as soon as the
        # loop is idle, so a scrape after the stream ends sees the final model.
        now = time.monotonic()
        stale = self._view_stale and (not busy or now - self._model_view_at > 0.5)
        if force_model or stale:
            self._model_view = introspect(self.learner)
            self._model_view_at = now
            self._view_stale = False
        ready = (
            bool(self.source.buffers)
            and self.source.broker_connected
            and self.sink.healthy
            and not self.stopping
        )
        c = self.counters
        ckpt = self.last_checkpoint
        self.metrics.publish(
            Snapshot(
                examples_learned=c["examples_learned"],
                labelled_predictions=c["labelled_predictions"],
                correct_predictions=c["correct_predictions"],
                online_loss=c["online_loss"],
                lag=self.source.lag() if self.source.consumer is not None else {},
                checkpoint_time=None if ckpt is None else ckpt.meta["created"],
                checkpoint_size_bytes=0 if ckpt is None else ckpt.size_bytes,
                ready=ready,
                **self._model_view,
            )
        )
        self.status = {
            "ready": ready,
            "last_tick": now,
            "assigned": [f"{t.topic}/{t.partition}" for t in self.source.assignment],
            "broker_connected": self.source.broker_connected,
            "sink_healthy": self.sink.healthy,
            "examples_learned": c["examples_learned"],
        }

    # -- the loop -----------------------------------------------------------------------------

    def start(self) -> None:
        """Restore the checkpoint and connect (the part of :meth:`run` before the loop)."""
        k = self.settings.kafka
        ms = self.settings.metrics
        if ms.enabled and self.http is None:
            self.http = HealthServer(
                self.metrics.registry, lambda: dict(self.status), ms.host, ms.port
            ).start()
            log.info("metrics on http://%s:%d/metrics", ms.host, self.http.port)
        self.restore()
        outputs = [t for t in (k.predictions_topic, k.dead_letter_topic) if t]
        if k.create_topics and outputs:
            try:
                ensure_topics(
                    k.bootstrap_servers, dict.fromkeys(outputs, 1), k.bootstrap_timeout_ms
                )
            except Exception as exc:  # unreachable broker: sends are retried later anyway
                log.warning("could not check/create the output topics %s: %s", outputs, exc)
        self.sink.start()
        self.source.start()
        self._started = self._last_arrival = time.monotonic()
        self.started = True
        self._join_grace = 3.0 * k.session_timeout_ms / 1000.0
        self._timeout_ms = k.poll_timeout_ms

    def step(self) -> bool:
        """One iteration: fetch, process a batch, settle outputs, maybe checkpoint.

        Returns ``False`` when the loop should end (stopped, or idle for ``exit_when_idle``).
        """
        if self.stopping:
            return False
        k = self.settings.kafka
        arrived = self.source.fetch(self._timeout_ms)
        batch = self.source.take(k.max_poll_records)
        now = time.monotonic()
        if arrived or batch:
            self._last_arrival = now
        if self.source.assignment_changes != self._assignments_seen:
            self.metrics.rebalances.inc(self.source.assignment_changes - self._assignments_seen)
            self._assignments_seen = self.source.assignment_changes
        if batch:
            self.process(batch)
        self._timeout_ms = 0 if len(batch) == k.max_poll_records else k.poll_timeout_ms
        self.sink.poll()
        if self._checkpoint_due():
            self.checkpoint("periodic")
        self._publish(busy=bool(batch))
        idle_limit = self.settings.run.exit_when_idle
        if idle_limit is not None and not self.source.buffered:
            base = self._last_arrival
            if not self.source.buffers:  # never assigned yet: allow the group join
                base = max(base, self._started + self._join_grace)
            if now - base >= idle_limit:
                log.info("no record for %.1f s: exiting", idle_limit)
                return False
        return True

    def run(self) -> int:
        """Run (after :meth:`start`, if not done yet) until :meth:`stop` or idle; return 0.

        Always ends with the shutdown: final checkpoint, sink flushed, consumer closed.
        """
        try:
            if not self.started:
                self.start()
            while self.step():
                pass
        finally:
            self._shutdown()
        return 0

    def _shutdown(self) -> None:
        try:
            self.checkpoint("shutdown", force=bool(self.sink.pending))
            left = self.sink.close(timeout=1.0)
            if left:
                log.error("%d output(s) undelivered at exit; kept in the outbox", len(left))
        finally:
            self.source.close()
            self._publish(force_model=True)
            if self.http is not None and not self.keep_http:
                self.http.stop()
