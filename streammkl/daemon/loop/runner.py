"""The daemon loop: per batch, decode -> predict (prequential) -> learn -> emit; checkpoint.

The loop owns the learner, the next offset of every partition and the counters, and checkpoints
them together (model + offsets + counters + outbox in one atomic checkpoint). Bad input never
stops it: a record that cannot be decoded (or that the learner refuses) goes to the dead-letter
topic with its reason. :meth:`Runner.stop` (called by the CLI's signal handlers) ends it at the
next batch boundary with a final checkpoint.

**Threads: who owns what, and how work is handed over.** Exactly one thread at a time may
touch the learner (its model's arrays grow, are rebuilt and freed by learning) and the monitor
built on it; every other thread works on copies or on immutable values handed to it.

- *The loop thread* (the caller of :meth:`Runner.run`) owns the learner, the monitor
  (:class:`~streammkl.daemon.learning.stream_monitor.StreamMonitor`: detector, window, shadow
  learners, history), the offsets, the counters, the sink and the in-flight marker.
- *The learner thread* (``streammkl-learn``, :class:`~streammkl.daemon.loop.prequential.
  Prequential`) runs a batch's planned compiled run (the driver's ``run_rounds``) and the
  monitor's observation of it (shadows, detector, window cuts, history rows). Hand-over: the
  loop plans the run (``plan_run`` reads the learner) and submits it; the learner and the monitor
  then belong to the learner thread until the loop waits for the future (``_finish_learning``,
  from :meth:`Prequential.drain <streammkl.daemon.loop.prequential.Prequential.drain>` or the
  next batch). Meanwhile the loop only writes the previous batch's predictions (values already
  computed), polls and decodes. Whatever reads or replaces the model -- checkpoint, reload, the
  published model view, mixing hooks, shutdown -- drains first (``self.prequential.drain()``).
- *The comparator thread* (``streammkl-regret``, :class:`~streammkl.monitor.regret.
  WindowedRegret`) is handed an immutable job at each window cut, made on the thread that
  learns: references to frozen window chunks (never written again), a fresh configuration dict
  and the input names as a tuple. It fits models of its own (never the learner) and publishes an
  immutable estimate by one reference assignment, which the monitor's snapshot reads.
- *HTTP threads* (``streammkl-http``, :class:`~streammkl.daemon.http.health.HealthServer`):
  ``POST /predict`` (with ``metrics.predict``) predicts with a learner of its own, built by the
  loop thread from each checkpoint's state (copied arrays) and published by one reference
  assignment (:class:`~streammkl.daemon.http.predict.Predictor`); ``/metrics`` reads the
  registry, whose model and monitor values are the
  :class:`~streammkl.daemon.http.metrics.Snapshot` the loop publishes
  (:class:`~streammkl.daemon.loop.publishing.Publisher`, after a drain); ``/healthz`` and
  ``/readyz`` and ``/startupz`` read the published status (a dict replaced, never changed),
  :attr:`Publisher.work_started <streammkl.daemon.loop.publishing.Publisher.work_started>`,
  :attr:`~streammkl.daemon.loop.publishing.Publisher.starting` and
  :attr:`~streammkl.daemon.loop.publishing.Publisher.fault` (values the loop thread replaces,
  never changes in place). No scrape reads a live array. The HTTP server's own threads (an event
  thread, the lanes' workers: :mod:`streammkl.daemon.http.webserver`) are daemon threads and
  hold nothing of the loop's: its stop returns within seconds whatever the clients do.
- *Kafka client threads*: librdkafka calls back only inside ``consume``, on the loop thread;
  kafka-python's revocation listener runs on its IO thread while the loop thread waits inside
  ``poll`` (so the two never run at once; :meth:`Prequential.drain` says how).
- The mixing member (:class:`~streammkl.daemon.mixing.member.MixingMember`) has no thread: its
  hooks run on the loop thread and drain before they read or replace the model. Signal handlers
  only set events (:meth:`Runner.stop`, :meth:`Runner.request_reload`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry

from streammkl.daemon.checkpoints.committer import Checkpointer, model_view
from streammkl.daemon.checkpoints.inflight import InflightMarker
from streammkl.daemon.checkpoints.store import encode_offsets
from streammkl.daemon.config import ConfigError, Settings, reloaded_settings
from streammkl.daemon.http.health import HealthServer
from streammkl.daemon.http.metrics import DaemonMetrics
from streammkl.daemon.http.predict import Predictor
from streammkl.daemon.http.webconfig import load_web_config
from streammkl.daemon.http.webserver import Route
from streammkl.daemon.kafka.clients import (
    ConsumerFactory,
    ProducerFactory,
    consumer_for,
    producer_for,
)
from streammkl.daemon.kafka.sink import Sink
from streammkl.daemon.kafka.source import Source
from streammkl.daemon.kafka.topics import ensure_output_topics
from streammkl.daemon.learning.admission import admission_for
from streammkl.daemon.learning.bank import apply_kernels
from streammkl.daemon.learning.building import LearnerConfigError, build_learner
from streammkl.daemon.learning.drivers import MKLDriver, driver_for
from streammkl.daemon.learning.learner import Learner, introspect
from streammkl.daemon.learning.stream_monitor import StreamMonitor
from streammkl.daemon.learning.warmup import logging_compiles, warm_up
from streammkl.daemon.loop.disk import EXIT_NO_CHECKPOINT, DiskFault
from streammkl.daemon.loop.idle import EXIT_OK, GcTuning, IdleClock, idle_end
from streammkl.daemon.loop.prequential import REASONS, Prequential
from streammkl.daemon.loop.progress import ProgressLine, TopicWatch
from streammkl.daemon.loop.publishing import Publisher
from streammkl.daemon.mixing.member import Hook, MixingMember, mixing_learner

log = logging.getLogger(__name__)

_COUNTERS = (
    "records_consumed", "examples_learned", "records_predicted", "records_rejected",
    "dead_letters", "labelled_predictions", "correct_predictions", "offset_resets",
)  # fmt: skip


__all__ = ["Runner"]


class Runner:
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
    consumer_client, producer_client
        Injected Kafka client adapters (callables building a consumer / producer adapter of
        :mod:`streammkl.daemon.kafka.clients` from the Kafka settings; tests use in-memory
        fakes); by default ``kafka.consumer_client`` (``kafka.producer_client``) decides.
    reload_settings
        Reads the settings again (the CLI's: file < environment < flags), for
        :meth:`request_reload` (SIGHUP).
    allow_factory
        Whether ``learner.factory`` (code named by the settings) may be imported and run.
    """

    def __init__(
        self,
        settings: Settings,
        learner: Learner | None = None,
        registry: CollectorRegistry | None = None,
        consumer_client: ConsumerFactory | None = None,
        producer_client: ProducerFactory | None = None,
        reload_settings: Callable[[], Settings] | None = None,
        allow_factory: bool = False,
    ) -> None:
        self.settings = settings
        self.reload_settings = reload_settings
        self._reload = threading.Event()
        self.metrics = DaemonMetrics(registry, mixing=settings.mixing.enabled)
        if learner is None:
            learner = build_learner(settings.learner, allow_factory)
        self.checkpoints = Checkpointer.from_settings(settings.checkpoint)
        self.store = self.checkpoints.store
        self.marker = InflightMarker(  # signed with the checkpoints' key, if any
            settings.checkpoint.dir, settings.limits.crash_strikes, self.store.hmac_key
        )
        self.offsets = self.checkpoints.offsets  # the source seeks there; the loop advances it
        self.counters: dict[str, Any] = dict.fromkeys(_COUNTERS, 0)
        self.counters["online_loss"] = 0.0
        self.counters["rejected_by_reason"] = {}
        k = settings.kafka
        self.sink = Sink(k, producer_client or producer_for(k), self.metrics)
        self.source = Source(
            k, self.offsets, consumer_client or consumer_for(k),
            on_revoke=self._on_revoke, on_reset=self._on_reset, group=k.assignment == "group",
            topic_ids=self.checkpoints.topic_ids,
        )  # fmt: skip
        #: The prequential handling of a batch: decode, learn_predict, emit, account (I/O
        #: stays here).
        self.prequential = Prequential(
            settings, self.metrics, self.sink, self.marker, self.checkpoints, self.counters
        )
        self._set_learner(learner)
        ms = settings.metrics
        self.web = load_web_config(ms.web_config_file) if ms.web_config_file else None
        self.http: HealthServer | None = None
        #: ``POST /predict``'s model snapshots (published at each checkpoint), if
        #: ``metrics.predict``.
        self.predictor = Predictor(settings.records, settings.learner.task) if ms.predict else None
        self.keep_http = False  # the demo keeps serving after the loop ends
        self.started = False
        #: The process's exit code once the loop has ended (:mod:`streammkl.daemon.loop.idle`).
        self.exit_code = EXIT_OK
        self._assignments_seen = 0
        self._stop = threading.Event()
        #: The checkpoint directory's faults (a full or read-only disk pauses the loop).
        self.disk = DiskFault()
        self.gc = GcTuning(settings.run.gc_threshold)
        #: The periodic INFO line (rate, lag, score, dead letters, checkpoint age).
        self.progress = ProgressLine(settings.run.progress_seconds, settings.learner.task)
        self.topic_watch = TopicWatch()  # a WARNING for an input topic that does not exist
        #: What the outside sees: the metrics' snapshot and the health status.
        self.publisher = Publisher(
            settings.metrics, self.metrics, self.source, self.sink, self.checkpoints,
            self.prequential, self.counters, learner,
        )  # fmt: skip
        for reason in REASONS:
            self.metrics.rejected.labels(reason)
        #: This process's side of a mixing group (scale-out), if ``mixing.enabled``.
        self.mixing: MixingMember | None = None
        if settings.mixing.enabled:
            member = self.mixing = MixingMember(settings, self.metrics.mix)
            self.prequential.learned_sink = member.kept
            self.source.on_assign = lambda assigned: member.catch_up(assigned, self.offsets)

    def _set_learner(self, learner: Learner) -> None:
        self.learner = learner
        sequence = self.settings.learner.task == "sequence"
        self.driver = driver_for(learner, sequence)
        self.monitor: StreamMonitor | None = None
        ms = self.settings.monitor
        if ms.enabled and self.driver.fused:  # the monitor needs a streammkl core model
            limits = self.settings.limits
            self.monitor = StreamMonitor(ms, self.settings.checkpoint.dir, limits.max_record_work)
            self.driver.track = True
            self.driver.observer = self.monitor  # the compiled runs feed it by chunks
        self.admission = admission_for(learner, self.settings.limits, sequence)
        self.prequential.use(self.driver, self.admission)

    # -- control ------------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask the loop to finish the current batch, checkpoint and return (thread/signal-safe)."""
        self._stop.set()

    def request_reload(self) -> None:
        """Ask the loop to re-read its settings at the next batch boundary (thread/signal-safe).

        A changed kernel list is applied with ``add_kernel`` / ``remove_kernel`` (the other blocks
        keep their state) and checkpointed at once; other changed settings need a restart (they
        are listed in a warning).
        """
        self._reload.set()

    def reload(self) -> bool:
        """Apply the settings :attr:`reload_settings` reads now; returns whether the kernels
        changed (in a mixing group: whether a change was proposed to the group, which every
        member applies when the round closes). Failures are logged and counted, never fatal:
        the old settings stay."""
        self._reload.clear()
        self.prequential.drain()
        if self.reload_settings is None:
            log.warning("reload requested but the daemon has no settings source to re-read")
            return False
        try:
            new = self.reload_settings()
            if self.mixing is not None:  # the group's bank changes for all members at once
                proposed = self.mixing.propose(
                    mixing_learner(self.learner), new.learner, new.reload
                )
            else:
                changed = apply_kernels(self.learner, new.learner, new.reload)
        except (ConfigError, LearnerConfigError) as exc:
            return self._refused(str(exc))
        except Exception as exc:  # a reload never ends the loop: whatever failed is refused
            return self._refused(repr(exc))
        self.settings, ignored = reloaded_settings(self.settings, new)
        if ignored:
            log.warning("reload: changes to %s take effect after a restart", ", ".join(ignored))
        self.prequential.settings = self.settings
        if self.mixing is not None:
            self.metrics.reloads.labels("applied" if proposed else "unchanged").inc()
            return proposed
        if changed:
            self.checkpoints.touch()
            self.checkpoint("reload")  # the new shape, at this batch boundary
            self._publish(force_model=True)
        # counted last: a scrape that sees the reload applied also sees the new model's kernels
        self.metrics.reloads.labels("applied" if changed else "unchanged").inc()
        return changed

    def _refused(self, why: str) -> bool:
        log.error("reload failed, settings unchanged: %s", why)
        self.metrics.reloads.labels("failed").inc()
        return False

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stop.is_set()

    # -- checkpoints --------------------------------------------------------------------------

    def restore(self) -> None:
        """Load the newest usable checkpoint (if any) into the learner, offsets and counters."""
        found = self.checkpoints.restore(self.learner)
        for why, count in self.store.skipped.items():
            self.metrics.checkpoint_fallbacks.labels(why).inc(count)
        if found is None:
            log.info("no checkpoint in %s: starting a fresh model", self.store.directory)
            if self.monitor is not None:
                self.monitor.restore(None, {}, None)
            return
        ckpt, learner, outbox = found
        self._set_learner(learner)
        if self.predictor is not None:
            self.predictor.published(ckpt)
        for key, value in ckpt.counters.items():
            self.counters[key] = value
        if self.monitor is not None:  # (on a fused driver: a streammkl river learner's)
            assert isinstance(self.driver, MKLDriver)
            self.monitor.restore(ckpt.meta.get("monitor"), ckpt.arrays, self.driver.rounds.model)
        self.sink.requeue(outbox)
        self.publisher.viewed(introspect(self.learner))
        log.info(
            "restored %s: %d examples learned, offsets %s",
            ckpt.path.name, self.counters["examples_learned"], encode_offsets(self.offsets),
        )  # fmt: skip

    def checkpoint(self, reason: str = "periodic", force: bool = False) -> bool:
        """Flush the sink and write model + offsets + counters + outbox atomically.

        Skipped when nothing changed since the last one (unless ``force``). Returns whether a
        checkpoint was written.
        """
        self.prequential.drain()  # the batch in flight is part of this checkpoint
        if not (self.checkpoints.changed or force):
            return False
        t0 = time.perf_counter()
        outbox = self.sink.flush(timeout=5.0)
        if outbox:
            log.warning("%d output(s) unacknowledged; kept in the checkpoint outbox", len(outbox))
        try:
            ckpt = self.checkpoints.commit(
                reason, self.learner, self.counters, outbox, self.monitor
            )
        except OSError as exc:  # a full or read-only disk: the loop pauses (DiskFault)
            self._disk_failed(exc)
            return False
        self.publisher.viewed(model_view(ckpt))  # read once, for the checkpoint's summary
        if self.predictor is not None:  # a copy of this state, for POST /predict
            self.predictor.published(ckpt)
        self.prequential.stale = False
        self.marker.covered(self.offsets)  # crash verdicts behind the checkpoint are settled
        if self.monitor is not None:
            try:
                self.monitor.history.flush()  # the history, up to this checkpoint
            except OSError as exc:  # rows kept in memory and written by the next checkpoint
                self._disk_failed(exc)
                return False
        if self.disk.failing:
            log.warning("the checkpoint directory is writable again after %s", self.disk.cleared())
            self.publisher.fault = None
        elapsed = time.perf_counter() - t0
        self.metrics.checkpoints.inc()
        self.metrics.checkpoint_seconds.observe(elapsed)
        log.debug("checkpoint %d (%s) in %.1f ms", ckpt.seq, reason, elapsed * 1e3)
        self.source.commit()
        self._publish(force_model=False)
        return True

    def _disk_failed(self, exc: OSError) -> None:
        why = self.disk.failed(exc)
        self.metrics.checkpoint_failures.labels(why).inc()
        self.publisher.fault = f"the checkpoint directory cannot be written ({why}: {exc})"
        self._publish()

    # -- processing ---------------------------------------------------------------------------

    def _on_revoke(self) -> None:
        self.checkpoint("revocation")
        if self.mixing is not None:
            self._mixing_hook(self.mixing.on_revoke)

    def _mixing_hook(self, hook: Hook) -> None:
        """Run a hook of the mixing member (:class:`MixingMember`); it drains the learner
        (finishes the batch in flight) only when it reads or replaces the model."""
        assert self.mixing is not None
        before = self.mixing.round
        hook(mixing_learner(self.learner), self.offsets, self.prequential.drain)
        if self.mixing.round != before:  # a mixed model was adopted: commit it, show it
            self.checkpoints.touch()
            self.prequential.stale = True

    def _on_reset(self, topic: str, partition: int, old: int, new: int) -> None:
        self.counters["offset_resets"] += 1
        self.metrics.offset_resets.labels(topic, str(partition)).inc()
        self.checkpoints.touch()

    # -- publishing ---------------------------------------------------------------------------

    def _publish(self, force_model: bool = False, busy: bool = False) -> None:
        """Publish the metrics' snapshot and the health status (:meth:`Publisher.publish`)."""
        self.publisher.publish(self.learner, self.monitor, self.stopping, force_model, busy)

    # -- the loop -----------------------------------------------------------------------------

    def start(self) -> None:
        """Restore the checkpoint and connect (the part of :meth:`run` before the loop)."""
        k = self.settings.kafka
        ms = self.settings.metrics
        if ms.enabled and self.http is None:
            routes = []
            if self.predictor is not None:
                routes.append(Route(
                    "POST", "/predict", self.predictor.handle, lane="work",
                    max_body=self.predictor.max_body,
                ))  # fmt: skip
            self.http = HealthServer.serve(
                ms, self.metrics.registry, self.publisher.health, self.web, routes
            )
        self.publisher.starting = "restoring the checkpoint"
        self.restore()
        self.marker.recover()  # what a crash of the previous process asks of this one
        for part, why in self.marker.rejected:  # not signed with the key: ignored
            self.metrics.inflight_rejected.labels(part, why).inc()
        self.marker.covered(self.offsets)
        # In a group the checkpoint is a cache: the member adopts the group's model at join,
        # where a bank edited while stopped is proposed to the group (MixingMember.join).
        if (
            self.mixing is None
            and self.checkpoints.last is not None
            and apply_kernels(self.learner, self.settings.learner, self.settings.reload)
        ):
            # the settings name another bank than the checkpoint's (edited while stopped): applied
            # at the restored position, like a SIGHUP there, and checkpointed at once
            self.checkpoints.touch()
            self.checkpoint("reload")
        self.publisher.starting = "compiling the learner's loops (numba warm-up)"
        t0 = time.monotonic()
        try:
            with logging_compiles(log) as compiles:  # a first start on a new machine says so
                self.driver.warm_up()
            if not compiles.compiled:
                self._load_batch_paths()
        except Exception as exc:  # only a speed-up: never a reason not to start
            log.warning("learner warm-up failed (first records will be slower): %r", exc)
        self.metrics.warm_up_seconds.set(time.monotonic() - t0)
        self.publisher.starting = "connecting to the broker"
        ensure_output_topics(k)
        if self.mixing is not None:
            self._mixing_hook(self.mixing.join)
        self.sink.start()
        self.source.start()
        self.gc.apply()
        self.idle = IdleClock(self.settings.run.exit_when_idle, 3.0 * k.session_timeout_ms / 1000.0)
        self.started = True
        self._timeout_ms = k.poll_timeout_ms
        self._publish()
        self.publisher.starting = None  # started: /startupz answers 200, /readyz judges the loop

    def _load_batch_paths(self) -> None:
        """With numba's cache warm (the round's warm-up compiled nothing), load the code of the
        batch paths too -- compiled runs, the monitor's loop and detector, the comparator's fit,
        the checkpoint's round trip -- through :func:`~streammkl.daemon.learning.warmup.
        warm_up` (a throwaway learner built from the settings; nothing the loop keeps is
        touched). Otherwise the first batch loaded them on the loop and learner threads
        (measured: 8 functions, ~1.2 s of the first batch with the defaults on a loaded
        2-core machine; the warm-up's own learning adds ~0.1 s to the start). A cold cache is
        left as it was: compiling all of it before ``/startupz`` answers would take minutes.
        Without the wide sparse stage: a cache warmed for another stream (the demo's scenario)
        would have it compile for a minute before the first record."""
        if isinstance(self.driver, MKLDriver) and self.settings.learner.factory is None:
            warm_up(self.settings, wide=False)

    def tick(self) -> bool:
        """One iteration of the loop: fetch, process a batch, settle outputs, maybe checkpoint.

        Returns ``False`` when the loop should end (stopped, or idle for ``exit_when_idle``).
        """
        if self.stopping:
            return False
        if self.disk.failing:  # paused: nothing is taken until a checkpoint is written again
            return self._paused()
        if self._reload.is_set():
            self.reload()
        k = self.settings.kafka
        arrived = self.source.fetch(self._timeout_ms)
        limit = k.max_poll_records
        if self.mixing is not None:  # adopt a mixed model first; a round ends at K exactly
            self._mixing_hook(self.mixing.before_batch)
            limit = self.mixing.room(limit)
        batch = self.source.take(limit)
        if self.mixing is not None:  # an empty batch: idle, or records not fetched yet?
            self.mixing.took(len(batch), not batch and any(self.source.backlog()))
        now = time.monotonic()
        self.idle.fetched(now, bool(arrived or batch))
        if self.source.assignment_changes != self._assignments_seen:
            self.metrics.rebalances.inc(self.source.assignment_changes - self._assignments_seen)
            self._assignments_seen = self.source.assignment_changes
            self.idle.touch(now)  # the idle clock starts with the partitions
        self.publisher.work_started = now
        if batch:
            self.prequential.process(batch)
            self.idle.touch()  # idle counts from the end of the work
        else:
            self.prequential.drain()  # nothing new: finish what is in flight now ...
            self._publish()  # ... and publish the model its counts describe, before any flush
        if self.mixing is not None:
            self._mixing_hook(self.mixing.after_batch)
        self.publisher.work_started = None
        self._timeout_ms = 0 if len(batch) == limit else k.poll_timeout_ms
        self.sink.poll()
        if self.checkpoints.due():
            self.checkpoint("periodic")
        self._publish(busy=bool(batch))
        self.progress.tick(self.counters, self.metrics.snapshots.snapshot)
        if self.source.reached and not self.source.buffers:  # (nothing assigned: why?)
            self.topic_watch.check(self.source.missing_topics, k.bootstrap_servers)
        if self.idle.limit is not None:
            end = idle_end(self.idle, now, self.source)
            if end is not None:
                self.exit_code = end.code
                if end.code == EXIT_OK:
                    log.info("%s", end.message)
                else:
                    log.error("%s: exiting with code %d", end.message, end.code)
                return False
        return True

    def _paused(self) -> bool:
        """One tick of the pause after a checkpoint failed: outputs settle, the status is
        published, and the checkpoint is tried again when the backoff says."""
        self.sink.poll()
        wait = self.disk.retry_at - time.monotonic()
        if wait > 0:
            self._publish()
            self._stop.wait(min(wait, 0.25))
            return True
        self.checkpoint("retry", force=True)
        return True

    def run(self) -> int:
        """Run (after :meth:`start`, if not done yet) until :meth:`stop` or idle; return the exit
        code (0, or why an idle end is no success: :mod:`streammkl.daemon.loop.idle`).

        Always ends with the shutdown: final checkpoint, sink flushed, consumer closed.
        """
        clean = False
        try:
            if not self.started:
                self.start()
            while self.tick():
                pass
            clean = True
        finally:
            self._shutdown(clean)
        return self.exit_code

    def _shutdown(self, clean: bool = True) -> None:
        """Final checkpoint, sink flushed, consumer closed; ``clean=False`` when an exception
        ends the loop (the marker then tells the next start, as for a crash)."""
        try:
            if clean and self.mixing is not None:
                try:  # ends the round so that nothing learned is lost; never blocks the exit
                    self._mixing_hook(self.mixing.leave)
                except Exception as exc:
                    log.error("could not end the mixing round at shutdown: %r", exc)
            # forced too when none exists yet (an idle run), so that `inspect` has one to read
            written = self.checkpoint(
                "shutdown", force=bool(self.sink.pending) or not self.checkpoints.last
            )
            if not written and self.disk.failing:
                log.error(
                    "the final checkpoint could not be written (%s): the next start resumes from "
                    "the last one written and replays what followed", self.publisher.fault,
                )  # fmt: skip
                self.exit_code = EXIT_NO_CHECKPOINT
            left = self.sink.close(timeout=1.0)
            if left:
                log.error("%d output(s) undelivered at exit; kept in the outbox", len(left))
        finally:
            self.prequential.close()
            self.source.close()
            self._publish(force_model=True)
            self.progress.tick(self.counters, self.metrics.snapshots.snapshot, final=True)
            if self.monitor is not None:
                self.monitor.close()
            if self.http is not None and not self.keep_http:
                self.http.stop()
            self.gc.undo()
            self.marker.close(clean=clean)
