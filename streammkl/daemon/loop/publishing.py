"""What the daemon shows the outside: the metrics' snapshot and the health status.

:class:`Publisher` re-reads the model's internals (kernel weights, sparsity, the monitor's
values) at most every 0.5 s while batches flow and as soon as the loop is idle, so a scrape after
the stream ends sees the final model, and keeps the status ``/healthz`` and ``/readyz`` report.
It reads the :class:`~streammkl.daemon.loop.runner.Runner`'s public attributes on the loop thread;
:meth:`Publisher.health` runs on the HTTP thread and reads only the published status.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from streammkl.daemon.http.metrics import Snapshot
from streammkl.daemon.learning.learner import introspect

if TYPE_CHECKING:
    from streammkl.daemon.loop.runner import Runner

#: Model internals are re-read at most this often while batches flow (seconds).
VIEW_SECONDS = 0.5


class Publisher:
    """The metrics snapshot and health status of one :class:`Runner`."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.status: dict[str, Any] = {
            "ready": False, "last_tick": time.monotonic(), "assigned": []
        }  # fmt: skip
        self.model_view: dict[str, Any] = introspect(runner.learner)
        self._model_view_at = 0.0
        self._monitor_view_at = 0.0

    def viewed(self) -> None:
        """Re-read the model's internals now (a restored or checkpointed learner)."""
        self.model_view = introspect(self.runner.learner)
        self._model_view_at = time.monotonic()

    def publish(self, force_model: bool = False, busy: bool = False) -> None:
        """Publish the counters and (when due, or ``force_model``) the model's internals."""
        r = self.runner
        now = time.monotonic()
        stale = r.prequential.stale and (not busy or now - self._model_view_at > VIEW_SECONDS)
        monitor = None
        if force_model or stale:
            r.drain()  # a quiescent learner to read
            self.model_view = introspect(r.learner)
            self._model_view_at = now
            r.prequential.stale = False
            if r.monitor is not None:
                monitor = r.monitor.snapshot()
                self._monitor_view_at = now
        elif r.monitor is not None and not busy and now - self._monitor_view_at > VIEW_SECONDS:
            # idle (drained): the monitor's background fits may finish after the last batch (a
            # windowed-regret estimate often does), so its values are re-read while idle too
            monitor = r.monitor.snapshot()
            self._monitor_view_at = now
        source, sink = r.source, r.sink
        ready = bool(source.buffers) and source.broker_connected and sink.healthy and not r.stopping
        c = r.counters
        ckpt = r.last_checkpoint
        r.metrics.publish(
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
            monitor,
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
        started = self.runner.work_started
        busy = 0.0 if started is None else max(0.0, time.monotonic() - started)
        state["busy_seconds"] = round(busy, 3)
        if busy > self.runner.settings.metrics.slow_record_seconds:
            state["ready"] = False
            state["slow_work"] = True
        return state
