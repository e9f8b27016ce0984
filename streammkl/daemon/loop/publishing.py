"""What the daemon shows the outside: the metrics' snapshot and the health status.

:class:`Publisher` re-reads the model's internals (kernel weights, sparsity, the monitor's
values) at most every 0.5 s while batches flow and as soon as the loop is idle, so a scrape after
the stream ends sees the final model, and keeps the status ``/healthz`` and ``/readyz`` report.
:meth:`Publisher.publish` runs on the loop thread (it is handed the learner and the monitor);
:meth:`Publisher.health` runs on the HTTP threads and reads only the published status and
:attr:`Publisher.work_started`.
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
        self.model_view: dict[str, Any] = introspect(learner)
        self._model_view_at = 0.0
        self._monitor_view_at = 0.0

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
        """Publish the counters and (when due, or ``force_model``) the model's internals."""
        now = time.monotonic()
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
        ready = bool(source.buffers) and source.broker_connected and sink.healthy and not stopping
        c = self.counters
        ckpt = self.checkpoints.last
        self.metrics.publish(
            Snapshot(
                examples_learned=c["examples_learned"],
                labelled_predictions=c["labelled_predictions"],
                correct_predictions=c["correct_predictions"],
                online_loss=c["online_loss"],
                lag=source.lag() if source.consumer is not None else {},
                checkpoint_time=None if ckpt is None else ckpt.meta["created"],
                checkpoint_size_bytes=0 if ckpt is None else ckpt.size_bytes,
                ready=ready,
                **self.model_view,
            ),
            values,
        )
        self.status = {
            "ready": ready,
            "last_tick": now,
            "assigned": [f"{t.topic}/{t.partition}" for t in source.assignment],
            "broker_connected": source.broker_connected,
            "sink_healthy": sink.healthy,
            "examples_learned": c["examples_learned"],
        }

    def health(self) -> dict[str, Any]:
        """What ``/healthz`` and ``/readyz`` report (called on the HTTP thread): the published
        status, and not ready while one piece of work has run ``metrics.slow_record_seconds``."""
        state = dict(self.status)
        started = self.work_started
        busy = 0.0 if started is None else max(0.0, time.monotonic() - started)
        state["busy_seconds"] = round(busy, 3)
        if busy > self.settings.slow_record_seconds:
            state["ready"] = False
            state["slow_work"] = True
        return state
