"""What the daemon shows the outside: the metrics' snapshot and the health status.

:class:`Publisher` re-reads the model's internals (kernel weights, sparsity, the monitor's
values) at most every 0.5 s while batches flow and as soon as the loop is idle, so a scrape after
the stream ends sees the final model, and keeps the status ``/healthz``, ``/readyz`` and
``/startupz`` report. While batches flow back to back, the counters and the status too are
published at most every :data:`STATUS_SECONDS` (a tick that follows an idle one, an idle tick, a
checkpoint, a fault and the shutdown always publish): a scrape or a probe sees them at most 0.1 s
old, against the probes' 10 s (``metrics.progress_seconds``) and 120 s
(``metrics.stall_seconds``) and a model view 0.5 s old. :meth:`Publisher.publish` runs on the
loop thread (it is handed the learner and the monitor); :meth:`Publisher.health` runs on the HTTP
threads and reads only the published status, :attr:`Publisher.work_started` and
:attr:`Publisher.starting` (values replaced, never changed in place).

**The verdicts.** *Started* once the loop's start is over (checkpoint restored, the learner's
loops compiled, the clients created): until then the process is alive (it is working on its
start) but neither started nor ready, and says what it is doing. *Alive* while the loop ticks
(``metrics.stall_seconds``). *Ready* when nothing below holds; each that does is a reason in the
status (``/readyz`` answers 503 with them):

- no partition assigned, or the broker not connected (as the client sees its connections);
- the broker has not answered for ``metrics.progress_seconds`` (a frozen or hung broker keeps
  its connections: only its silence says it);
- records are known to wait (highwater beyond the next offset) and none was taken for
  ``metrics.progress_seconds``;
- the outputs are not acknowledged (the sink is failing);
- a piece of work has run ``metrics.slow_record_seconds``;
- a fault the loop reports (:attr:`Publisher.fault`: the checkpoint directory cannot be
  written, the loop pauses);
- the loop is stopping.
"""

from __future__ import annotations

import time
from typing import Any

from streammkl.daemon.checkpoints.committer import Checkpointer
from streammkl.daemon.config import MetricsSettings
from streammkl.daemon.http.metrics import DaemonMetrics, Snapshot
from streammkl.daemon.kafka.sink import Sink
from streammkl.daemon.kafka.source import Source
from streammkl.daemon.learning.learner import Learner, introspect
from streammkl.daemon.learning.stream_monitor import StreamMonitor
from streammkl.daemon.loop.prequential import Prequential

#: Model internals are re-read at most this often while batches flow (seconds).
VIEW_SECONDS = 0.5
#: The counters and the status are published at most this often while batches flow back to
#: back (seconds). Published at every tick they cost the loop thread ~10 us per batch in
#: isolation (the snapshot, the status, ``Source.lag``) and ~30 us inside the loop (per-part
#: thread CPU at batches of 1 record, load 2.5-3.3), of its ~0.3 ms fixed cost per batch.
STATUS_SECONDS = 0.1


class Publisher:
    """The metrics snapshot and health status of one daemon loop.

    Parameters
    ----------
    settings
        The ``[metrics]`` settings (``slow_record_seconds``).
    metrics
        Where the snapshot is published.
    source, sink, checkpoints, prequential
        The loop's parts whose state is shown (the prequential handling also tells whether the
        model changed since it was last read, and drains the learner before it is read).
    counters
        The loop's counters.
    learner
        The learner at start (its internals are read at once).
    """

    def __init__(
        self,
        settings: MetricsSettings,
        metrics: DaemonMetrics,
        source: Source,
        sink: Sink,
        checkpoints: Checkpointer,
        prequential: Prequential,
        counters: dict[str, Any],
        learner: Learner,
    ) -> None:
        self.settings, self.metrics, self.counters = settings, metrics, counters
        self.source, self.sink = source, sink
        self.checkpoints, self.prequential = checkpoints, prequential
        self.status: dict[str, Any] = {
            "ready": False, "last_tick": time.monotonic(), "assigned": []
        }  # fmt: skip
        #: When the loop's current piece of work started (what ``/readyz`` times; None: idle).
        self.work_started: float | None = None
        #: What the start is doing while the loop has not started (``None`` once it has).
        self.starting: str | None = "starting"
        #: A fault the loop reports (not ready while it lasts; ``None``: none).
        self.fault: str | None = None
        self._progress_at = time.monotonic()  # records taken, or none waiting
        self._born = time.monotonic()
        self.model_view: dict[str, Any] = introspect(learner)
        self._model_view_at = 0.0
        self._monitor_view_at = 0.0
        #: The owned partitions as the status names them, and the partitions they name (made
        #: again only when the assignment changed: the status is published at every tick).
        self._assigned: tuple[tuple[Any, ...], list[str]] = ((), [])
        #: When the counters and status were last published, and whether by a busy tick.
        self._published_at = 0.0
        self._published_busy = False

    def viewed(self, view: dict[str, Any]) -> None:
        """The model's internals as just read (:func:`~streammkl.daemon.learning.learner.
        introspect` of a restored learner, or a checkpoint's summary)."""
        self.model_view = view
        self._model_view_at = time.monotonic()

    def publish(
        self,
        learner: Learner,
        monitor: StreamMonitor | None,
        stopping: bool,
        force_model: bool = False,
        busy: bool = False,
    ) -> None:
        """Publish the counters and (when due, or ``force_model``) the model's internals.

        A ``busy`` publication (a tick that handled a batch) that follows another busy one
        less than :data:`STATUS_SECONDS` ago is skipped: batches flowing back to back publish
        on that clock; every other publication is made."""
        now = time.monotonic()
        if busy and not force_model:
            if self._published_busy and now - self._published_at < STATUS_SECONDS:
                return
        self._published_at, self._published_busy = now, busy and not force_model
        pre = self.prequential
        stale = pre.stale and (not busy or now - self._model_view_at > VIEW_SECONDS)
        values = None
        if force_model or stale:
            pre.drain()  # a quiescent learner to read
            self.model_view = introspect(learner)
            self._model_view_at = now
            pre.stale = False
            if monitor is not None:
                values = monitor.snapshot()
                self._monitor_view_at = now
        elif monitor is not None and not busy and now - self._monitor_view_at > VIEW_SECONDS:
            # idle (drained): the monitor's background fits may finish after the last batch (a
            # windowed-regret estimate often does), so its values are re-read while idle too
            values = monitor.snapshot()
            self._monitor_view_at = now
        source, sink = self.source, self.sink
        lag = source.lag() if source.consumer is not None else {}
        waiting = sum(lag.values())
        if busy or not waiting:
            self._progress_at = now
        reasons = self._reasons(waiting, now - self._progress_at, stopping)
        ready = not reasons
        c = self.counters
        ckpt = self.checkpoints.last
        self.metrics.publish(
            Snapshot(
                examples_learned=c["examples_learned"],
                labelled_predictions=c["labelled_predictions"],
                correct_predictions=c["correct_predictions"],
                online_loss=c["online_loss"],
                lag=lag,
                checkpoint_time=None if ckpt is None else ckpt.meta["created"],
                checkpoint_size_bytes=0 if ckpt is None else ckpt.size_bytes,
                ready=ready,
                **self.model_view,
            ),
            values,
        )
        self.status = {
            "ready": ready,
            "reasons": reasons,
            "last_tick": now,
            "assigned": self._assigned_names(),
            "broker_connected": source.broker_connected,
            "sink_healthy": sink.healthy,
            "records_waiting": waiting,
            "examples_learned": c["examples_learned"],
        }

    def _assigned_names(self) -> list[str]:
        """The owned partitions, ``topic/partition``, sorted (the status's ``assigned``; the
        list is shared by the statuses published while the assignment stays: never changed)."""
        owned = tuple(self.source.buffers)
        if owned != self._assigned[0]:
            names = [f"{t.topic}/{t.partition}" for t in sorted(owned)]
            self._assigned = (owned, names)
        return self._assigned[1]

    def _reasons(self, waiting: int, stuck: float, stopping: bool) -> list[str]:
        """Why the loop is not ready now (empty: it is); see the module docstring."""
        source, limit = self.source, self.settings.progress_seconds
        reasons = []
        if not source.buffers:
            reasons.append("no partition assigned")
        if not source.broker_connected:
            reasons.append("the broker is not connected")
        silence = source.silence()
        if silence is not None and silence > limit:
            reasons.append(f"the broker has not answered for {silence:.0f} s")
        if waiting and stuck > limit:
            reasons.append(f"{waiting} record(s) wait and none was taken for {stuck:.0f} s")
        if not self.sink.healthy:
            reasons.append("outputs are not acknowledged (sends are failing)")
        if self.fault is not None:
            reasons.append(self.fault)
        if stopping:
            reasons.append("stopping")
        return reasons

    def health(self) -> dict[str, Any]:
        """What the probes report (called on the HTTP thread): the published status with the
        verdicts ``started``, ``alive`` and ``ready`` (the module docstring)."""
        now = time.monotonic()
        starting = self.starting
        if starting is not None:
            return {"started": False, "alive": True, "ready": False, "reasons": [starting],
                    "phase": starting, "starting_seconds": round(now - self._born, 1)}  # fmt: skip
        state = dict(self.status)
        state["reasons"] = list(state.get("reasons", ()))
        state["started"] = True
        state["alive"] = now - state.get("last_tick", 0.0) <= self.settings.stall_seconds
        if not state["alive"]:
            state["reasons"].append(f"the loop has not ticked for {now - state['last_tick']:.0f} s")
        started = self.work_started
        busy = 0.0 if started is None else max(0.0, now - started)
        state["busy_seconds"] = round(busy, 3)
        if busy > self.settings.slow_record_seconds:
            state["slow_work"] = True
            state["reasons"].append(f"one piece of work has run {busy:.0f} s")
        state["ready"] = bool(state.get("ready")) and not state["reasons"]
        return state
