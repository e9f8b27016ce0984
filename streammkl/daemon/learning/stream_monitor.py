"""The regret/drift monitor on the daemon's prequential stream, checkpointed with the model.

:class:`StreamMonitor` keeps a :class:`streammkl.monitor.Monitor` on the core model of a streammkl
learner, with the loop that learns under it (:class:`streammkl.monitor.MonitoredLoop`: the driver
learns through it, the shadow learners run in it beside the model, and it applies the schedule
restarts the monitor asks for). The driver reports each observed round or run segment back
(:meth:`StreamMonitor.observed`, :meth:`StreamMonitor.observed_segment`) for the prequential
accuracy and the run history (:mod:`streammkl.daemon.learning.history`); comparator fits run on the
monitor's worker thread.

**Batch-independent restarts.** A detected drift restarts the schedule only when the example
count reaches the next multiple of ``stride`` (B): the runs are cut there, so the model is the
same however the stream is cut into batches (and a checkpoint between a detection and its
boundary holds the pending restart).

**Exactly-once, with a drift detector.** A detected drift restarts the learner's schedule, so the
detector's state is part of the model's state. river's ADWIN cannot be serialised (its window is
native code), so the checkpoint holds the detector's inputs since its last detection (every
detection starts river's detectors afresh) and a restart replays them into a fresh detector: the
restored detector is exactly the uninterrupted one. Without a detection for ``detector_memory``
examples, the detector is started afresh (deterministically, at that example), which bounds what
is checkpointed (:class:`streammkl.monitor.drift.LossDriftDetector` keeps the log). The
comparator windows and shadows are rebuilt after a restart (they only feed metrics).

**A schedule in a backlog.** After each observed round or compiled run the loop calls
:meth:`streammkl.monitor.regret.WindowedRegret.catch_up`: when the estimate lags 60 % of
``monitor.refresh_examples`` it waits for the hurried comparator, whose fits are bounded by
``monitor.comparator_epochs``, at most ``monitor.catch_up_seconds`` at a time and
``monitor.catch_up_share`` of its wall time (10 % by default: a backlog keeps ~90 % of its
speed, and the estimate may go stale; the deploy settings give it all the time it needs).
Only then is the comparator hurried (:class:`Throttled` with ``hurry_when="loop_waits"``):
otherwise it keeps to ``monitor.comparator_duty`` of one core however far the estimate lags,
so a backlog costs it at most the duty plus the loop's waits.

**Bounded by the work budget.** The windowed regret holds the window's inputs three times (its
chunks, and the contiguous and shuffled copies a comparator fits on) and the model three times
(the comparator's warm start, the model it fits, its best state): with the learner's own model,
``4 model + 3 W d`` cells for ``d`` inputs. While that fits ``limits.max_record_work`` the
windowed regret runs; a model grown wider (the default bank, W = 2000 and the default budget:
beyond ~1,300-2,000 inputs) has the monitor rebuilt without it at that round -- its
counters, drift detector and pending restart carried over as through a checkpoint, so the
model learns as before -- and logged once; ``streammkl_window_size`` is 0 from then on. The
admission counts the model alone (:mod:`streammkl.daemon.learning.admission`): a record is
never refused for what a metric would cost.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal

import numpy as np

from streammkl.core import OnlineMKL
from streammkl.daemon.config import MonitorSettings
from streammkl.daemon.learning.admission import model_cells
from streammkl.daemon.learning.history import History
from streammkl.monitor import Monitor, MonitoredLoop, Segment
from streammkl.monitor.regret import make_comparator

log = logging.getLogger(__name__)

#: Checkpoint array holding the detector's inputs since its last detection.
INPUTS = "monitor.detector_inputs"
#: The monitor's counters of its comparator's fits: a rebuilt monitor (a wider model) counts
#: them again from 0, so the ones before are added (``snapshot``).
REBUILT_COUNTERS = ("comparator_errors", "comparator_fits_skipped")


def lower_thread_priority(nice: int) -> bool:
    """Give the calling thread the scheduling priority ``nice`` (Linux: threads have their own
    nice value; elsewhere ``setpriority`` would renice the whole process, so nothing is done).
    Whether it was applied."""
    if nice <= 0 or sys.platform != "linux":
        return False
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), nice)
    except OSError as exc:  # e.g. a seccomp profile forbidding it
        log.debug("could not renice the comparator thread: %s", exc)
        return False
    return True


class Throttled:
    """A comparator that keeps its worker thread busy at most a ``duty`` fraction of the time.

    A windowed-regret fit (many epochs over W examples) takes a few tenths of a second of one
    core for the default bank and W = 2000, far longer than the stream takes to bring the next
    window: the worker would fit back to back, taking a whole core (and the GIL for its Python
    parts) from a 2-core machine.

    - A comparator with a ``pace`` hook (:class:`~streammkl.monitor.hindsight.EpochComparator`)
      is paced *within* a fit: after every ``pace_rounds`` (:attr:`PACE_ROUNDS`) rounds of an
      epoch and before
      its objective, the worker sleeps ``busy (1/duty - 1)``, so the fit's CPU is spread over
      its whole duration and no interval sees more than one such stretch (about 1.5 ms of a
      core for the default bank; one objective, ~5 ms) above the duty. (Paced epoch by epoch,
      the first epoch of the first fit, ~15 ms of a core, ran at full speed while a freshly
      started daemon caught up: in the 20,000-record benchmark run that burst was most of the
      comparator's CPU.)
    - Others: a fit of F seconds is followed by ``F (1/duty - 1)`` seconds without one.

    Busy time is the worker thread's **CPU time** (``cpu``, by default ``time.thread_time``),
    not the wall clock: on a loaded machine a starved fit takes long but owes only the idle
    time its CPU share asks for (measured on the wall clock, a starved epoch of 5 s owed 95 s
    of sleep at the default duty, and a 45-s demo saw one estimate). The next fit waits for
    the idle time still owed (the previous estimate is already published); newer windows
    replace the pending one meanwhile (counted as skipped). The learning loop never waits for
    it. :meth:`hurry` (the regret monitor's schedule in examples and seconds: the estimate is
    too old) cuts the pauses short until the current fit ends; :meth:`close` ends them for
    good: the fit in progress finishes at full speed (the worker is stopped after it).

    ``hurry_when`` says which hurries are heeded. ``"always"``: every one. ``"loop_waits"``
    (the daemon's): only those made while the learning loop waits for the fit
    (:meth:`loop_waits`, around :meth:`~streammkl.monitor.regret.WindowedRegret.catch_up`), and
    only while it waits: a hurried fit then runs on the CPU the loop gives up, and otherwise
    the duty holds whatever the estimate's lag. (Heeding the schedule's hurry alone, a backlog
    -- where half the schedule, 15,000 records, passes in a fifth of a second -- had the fits
    back to back at full speed: a third of the process's CPU, more than the learner's.)
    """

    #: Rounds of an epoch between two pauses (the comparator's ``pace_rounds``; ``None``:
    #: pauses between epochs only).
    PACE_ROUNDS = 256

    def __init__(
        self,
        inner: Any,  # a comparator (make_comparator's: EpochComparator, SpicyMKL's, ...)
        duty: float,
        clock: Callable[[], float] = time.monotonic,
        nice: int = 0,
        cpu: Callable[[], float] | None = None,
        hurry_when: Literal["always", "loop_waits"] = "always",
        pace_rounds: int | None = PACE_ROUNDS,
    ) -> None:
        if hurry_when not in ("always", "loop_waits"):
            raise ValueError(f"hurry_when must be 'always' or 'loop_waits'; got {hurry_when!r}")
        self.inner = inner
        self.hurry_when = hurry_when
        self._loop_waiting = False  # inside loop_waits()
        self.duty = duty
        self.nice = nice
        self._niced = False
        self.clock = clock
        # an injected wall clock (tests) is also the busy clock unless a CPU clock is given
        default_cpu = time.thread_time if clock is time.monotonic else clock
        self.cpu = cpu if cpu is not None else default_cpu
        self.closed = threading.Event()
        self._awake = threading.Event()  # hurry() or close(): no more pauses
        self.wait = self._sleep
        self._next_start = -math.inf
        self._resumed = 0.0  # busy clock when the worker last started (or resumed) fitting
        self.n_hurried = 0
        self.n_hurries_declined = 0  # hurries outside loop_waits() ("loop_waits")
        #: CPU seconds of the worker thread spent fitting (the pauses excluded).
        self.busy_seconds = 0.0
        if hasattr(inner, "pace"):
            inner.pace = self._pace
            if hasattr(inner, "pace_rounds"):
                inner.pace_rounds = pace_rounds

    def _sleep(self, seconds: float) -> bool:
        if self.closed.is_set() or self._awake.is_set():
            return True
        return self._awake.wait(seconds)

    def hurry(self) -> None:
        """Skip the pauses until the current (or next) fit ends: the estimate is overdue
        (with ``hurry_when="loop_waits"``, only while the loop waits: see the class)."""
        if self.hurry_when == "loop_waits" and not self._loop_waiting:
            self.n_hurries_declined += 1
            return
        if not self._awake.is_set():
            self.n_hurried += 1
        self._awake.set()

    @contextmanager
    def loop_waits(self) -> Iterator[None]:
        """The learning loop waits for the fit inside this block: its hurries are heeded until
        the fit ends or the block does (after it the pauses are owed again)."""
        self._loop_waiting = True
        try:
            yield
        finally:
            self._loop_waiting = False
            if self.hurry_when == "loop_waits" and not self.closed.is_set():
                self._awake.clear()

    def close(self) -> None:
        """No pause any more (the worker is being stopped)."""
        self.closed.set()
        self._awake.set()

    def __getattr__(self, name: str) -> Any:  # the comparator's own: method, exact, ...
        return getattr(self.inner, name)

    def _idle_for(self, busy: float) -> float:
        return busy * (1.0 / self.duty - 1.0)

    def _pace(self) -> None:
        """Between two epochs: sleep for the idle time the last stretch of work owes."""
        busy = self.cpu() - self._resumed
        self.busy_seconds += busy
        pause = self._idle_for(busy)
        if pause > 0:
            self.wait(pause)
        self._resumed = self.cpu()

    # the comparator's fit, passed through: its arguments and result are its own
    def fit(self, *args: Any, **kwargs: Any) -> Any:
        if not self._niced:
            self._niced = True
            lower_thread_priority(self.nice)
        pause = self._next_start - self.clock()
        if pause > 0:
            self.wait(pause)
        self._resumed = self.cpu()
        try:
            result = self.inner.fit(*args, **kwargs)
        finally:
            if not self.closed.is_set():
                self._awake.clear()  # a hurry lasts one fit
        busy = self.cpu() - self._resumed
        self.busy_seconds += busy
        self._next_start = self.clock() + self._idle_for(busy)
        return result


class StreamMonitor:
    """:class:`~streammkl.monitor.Monitor` + detector replay log + history, for one learner.

    Parameters
    ----------
    settings
        The ``[monitor]`` settings.
    directory
        The checkpoint directory (the history file goes there).
    max_cells
        The windowed regret's bound in cells (``limits.max_record_work``; ``None``: none): see
        the module docstring.
    log_errors
        Whether failed comparator fits are logged (a warm-up's throwaway monitor: not, as they
        are not the daemon's; they are counted either way).
    """

    #: How many times the windowed regret holds the window's inputs and the model.
    WINDOW_COPIES = 3

    def __init__(
        self,
        settings: MonitorSettings,
        directory: str | os.PathLike[str],
        max_cells: int | None = None,
        log_errors: bool = True,
    ) -> None:
        self.settings = settings
        self.max_cells = max_cells
        self.log_errors = log_errors
        #: Whether the windowed regret runs (``monitor.window`` > 0 and within ``max_cells``).
        self.windowed = False
        self._width = 0  # the core's inputs when the window was last judged
        self.history = History(directory, settings.history_every, settings.history_rows)
        self.monitor: Monitor | None = None
        self.loop: MonitoredLoop | None = None  # the loop learning under ``monitor``
        self.values: dict[str, float] = {}  # the latest snapshot (published to metrics)
        self._saved_inputs: list[float] = []  # detector inputs to replay (before the build)
        self._restored: dict[str, Any] | None = None
        self._hits = self._labelled = 0  # prequential accuracy over the observed examples
        self._rises = 0  # the detector's rises already in the history
        self._errors_logged = 0  # comparator errors already in the log
        self._last: dict[str, float] = {"t": 0.0, "hits": 0.0, "labelled": 0.0, "loss": 0.0}
        self._bandwidths: dict[str, float] = {}  # the fitted bandwidths in the history
        self._throttle: Throttled | None = None  # the comparator the monitor fits with
        self._fitted_before = 0.0  # fitting CPU of the comparators replaced by a rebuild
        #: The counters a rebuild's new monitor starts again from 0, as of the replaced ones
        #: (published as their sum: a counter never goes back while the process lives).
        self._counted_before = dict.fromkeys(REBUILT_COUNTERS, 0.0)

    @property
    def stride(self) -> int:
        """B: restarts happen at multiples of B examples (the runs are cut there)."""
        return int(self.settings.stride)

    # -- building -----------------------------------------------------------------------------

    def window_cells(self, core: OnlineMKL) -> int:
        """Cells the learner's model and the windowed regret hold for ``core`` (see the module
        docstring): ``(1 + WINDOW_COPIES) model + WINDOW_COPIES W d``, the model at its arrays'
        capacity."""
        d = len(core.feature_keys)
        support = core.budget if core.budget is not None else core.n_support + 1
        iterates = 1 + len(core.averages) + int(core.average)
        room = d if core.layout is None else core.layout.capacity  # the arrays' inputs
        model = model_cells(core.kernels, room, core.n_outputs, support, iterates)
        return model + self.WINDOW_COPIES * (self.settings.window * d + model)

    def _window_fits(self, core: OnlineMKL) -> bool:
        self._width = len(core.feature_keys)
        if not self.settings.window:
            return False
        return self.max_cells is None or self.window_cells(core) <= self.max_cells

    def _say_window_off(self, core: OnlineMKL) -> None:
        log.warning(
            "windowed regret off: with a model of %d inputs it and the model would hold %d "
            "cells, over limits.max_record_work (%d); the other monitored values go on",
            self._width, self.window_cells(core), self.max_cells,
        )  # fmt: skip

    @property
    def comparator_seconds(self) -> float:
        """CPU seconds the comparator's worker has spent fitting so far (its pauses excluded;
        every comparator this monitor built)."""
        throttle = self._throttle
        return self._fitted_before + (throttle.busy_seconds if throttle is not None else 0.0)

    def _build(self, core: OnlineMKL) -> None:
        s = self.settings
        if self.loop is not None:  # the replaced monitor's counts stay counted (and logged)
            self.snapshot()
            self._counted_before = {key: self.values[key] for key in REBUILT_COUNTERS}
        self.close(timeout=0)
        if self._throttle is not None:
            self._fitted_before += self._throttle.busy_seconds
        self.windowed = self._window_fits(core)
        if s.window and not self.windowed and self.monitor is None:  # built (or restored) wide
            self._say_window_off(core)
        comparator = Throttled(
            make_comparator(s.comparator, core, epochs=s.comparator_epochs),
            s.comparator_duty,
            nice=s.comparator_nice,
            hurry_when="loop_waits",
        )
        self._throttle = comparator
        self.monitor = Monitor(
            core,
            window=s.window if self.windowed else None,
            every=s.every,
            comparator=comparator,
            detector=None if s.detector == "none" else s.detector,
            restart_on_drift=s.restart_on_drift,
            beta_lag=s.beta_lag,
            stride=s.stride,
            detector_memory=s.detector_memory,
            refresh_examples=s.refresh_examples,
            refresh_seconds=s.refresh_seconds,
        )
        self.loop = MonitoredLoop(core, self.monitor, shadows=s.shadows)
        if self._restored is not None:
            self.monitor.restore(self._restored)
            self._restored = None
        self._replay()
        det = self.monitor.detector
        self._rises = det.n_restarts if det is not None else 0

    def _replay(self) -> None:
        monitor = self.built
        det = monitor.detector
        inputs, self._saved_inputs = self._saved_inputs, []
        if det is None or not inputs:
            return
        before = det.n_restarts + det.n_ignored
        first = monitor.n - len(inputs)
        for i, value in enumerate(inputs):
            det.update(value, first + i)
        if det.n_restarts + det.n_ignored != before:  # cannot happen for a faithful log
            raise RuntimeError("the drift detector fired while replaying its checkpointed inputs")

    @property
    def built(self) -> Monitor:
        """The monitor, built by the first round observed (:meth:`loop_for`)."""
        assert self.monitor is not None, "no round observed yet"
        return self.monitor

    @property
    def _inputs(self) -> list[float]:
        """The detector's inputs since its last detection (what the checkpoint holds)."""
        det = self.monitor.detector if self.monitor is not None else None
        return det.inputs if det is not None else self._saved_inputs

    # -- the hot path -------------------------------------------------------------------------

    def loop_for(self, core: OnlineMKL) -> MonitoredLoop:
        """The :class:`~streammkl.monitor.MonitoredLoop` on ``core`` (built, or rebuilt for a
        new core, with the monitor)."""
        if self.monitor is None or self.monitor.model is not core:
            self._build(core)
        elif self.windowed and len(core.feature_keys) != self._width:  # the model grew
            if not self._window_fits(core):
                self._say_window_off(core)
                self._restored = self.monitor.to_state()  # carried over as by a checkpoint
                self._saved_inputs = list(self._inputs)
                self._build(core)
        assert self.loop is not None
        return self.loop

    @property
    def history_every(self) -> int:
        """Examples between history rows now: the interval times the thinning stride
        (:attr:`History.spacing`). The driver cuts its run segments there, so the rows land
        where they land when the runs are cut at every interval; once the history has thinned
        (``history_rows`` rows: 500,000 records at the defaults) a run's accounting takes fewer
        segments (measured on the learner thread: a segment per 100 records cost ~0.9 us of CPU
        per record more than one per 2,000-record run)."""
        return int(self.history.spacing)

    def observed(self, hit: bool | None) -> None:
        """The driver's loop has just observed one learned record (``hit``: predicted correctly,
        or ``None`` for regression)."""
        monitor = self.built
        det = monitor.detector
        if det is not None and det.n_restarts != self._rises:
            self._rises = det.n_restarts
            self.history.add({"t": monitor.n, "event": "drift"})
        if hit is not None:
            self._labelled += 1
            self._hits += bool(hit)
        if self.history.due(monitor.n):
            self._row()
        self._catch_up(monitor)

    def observed_segment(self, segment: Segment, hits: list[bool] | None) -> None:
        """The driver's loop has just learned and observed a run segment
        (:class:`streammkl.monitor.Segment`; ``hits`` per record, None for regression):
        history rows land on the multiples of the history interval, as record by record."""
        monitor = self.built
        for index in segment.rises:
            self.history.add({"t": index + 1, "event": "drift"})
        det = monitor.detector
        self._rises = det.n_restarts if det is not None else 0
        if hits is not None:
            self._labelled += len(hits)
            self._hits += sum(hits)
        if self.history.due(monitor.n, monitor.n - (segment.stop - segment.start)):
            self._row()

    def observed_run(self) -> None:
        """The driver has observed every segment of a compiled run (:meth:`observed_segment`):
        in a backlog, the comparator's turn (once per run, not per segment)."""
        self._catch_up(self.built)

    def _catch_up(self, monitor: Monitor) -> None:
        """In a backlog, give the comparator its turn before the estimate goes stale (bounded:
        :meth:`streammkl.monitor.regret.WindowedRegret.catch_up`)."""
        regret = monitor.regret
        if regret is not None:
            s = self.settings
            assert self._throttle is not None  # (built with the monitor)
            with self._throttle.loop_waits():
                regret.catch_up(monitor.n, s.catch_up_seconds, s.catch_up_share)

    def _row(self) -> None:
        values = self.snapshot()
        monitor = self.built
        model = monitor.model
        t = monitor.n
        last = self._last
        dt = t - last["t"]
        dl = self._labelled - last["labelled"]
        self.history.add(
            {
                "t": t,
                "beta": dict(zip(model.names, monitor.kernel_weights().tolist(), strict=True)),
                "objective": values["online_objective"],
                "loss": values["online_loss"],
                "window_regret": values["window_regret"],
                "window_regret_bound": values["window_regret_bound"],
                "window_end": values["window_end"],
                "window_regret_lag": values["window_regret_lag"],
                "window_regret_stale": values["window_regret_stale"],
                "regret_bound": values["regret_bound"],
                "shadow_regret": values["shadow_regret"],
                "drifts": values["drift_detections"],
                "accuracy": self._hits / self._labelled if self._labelled else None,
                "accuracy_recent": (self._hits - last["hits"]) / dl if dl else None,
                "loss_recent": (values["online_loss"] - last["loss"]) / dt if dt else None,
            }
        )
        bandwidths = model.kernel_bandwidths
        if bandwidths != self._bandwidths:  # fitted at the warm-up, refitted as inputs grow
            self.history.add({"t": t, "event": "bandwidth", "bandwidths": bandwidths})
            self._bandwidths = bandwidths
        self._last = {
            "t": float(t),
            "hits": float(self._hits),
            "labelled": float(self._labelled),
            "loss": values["online_loss"],
        }

    # -- reading and persistence --------------------------------------------------------------

    def snapshot(self) -> dict[str, float]:
        """Every monitored value (``streammkl.monitor.METRICS`` keys); empty before the first
        learned record."""
        if self.loop is not None:
            self.values = self.loop.snapshot()
            for key, before in self._counted_before.items():
                self.values[key] += before
            self._log_errors()
        return self.values

    def _log_errors(self) -> None:
        """Log the comparator fits that failed since the last time (``comparator_errors``)."""
        failed = int(self.values["comparator_errors"]) - self._errors_logged  # as published
        if failed > 0 and self.log_errors:
            regret = self.built.regret
            last = regret.last_error if regret is not None else None
            log.warning("%d comparator fit(s) failed (no windowed regret from them); the last: %s",
                        failed, last)  # fmt: skip
            self._errors_logged += failed

    def to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """JSON state and arrays for the checkpoint."""
        state = self.monitor.to_state() if self.monitor is not None else self._restored
        meta = {
            "monitor": state,
            "hits": self._hits,
            "labelled": self._labelled,
            "last_row": self._last,
            "history_stride": self.history.stride,
        }
        return meta, {INPUTS: np.asarray(self._inputs, dtype=np.float64)}

    def restore(
        self, meta: dict[str, Any] | None, arrays: dict[str, np.ndarray], core: OnlineMKL | None
    ) -> None:
        """Continue from a checkpoint (``meta`` ``None``: a fresh start); trims the history."""
        if meta is not None:
            self._restored = meta["monitor"]
            self._hits, self._labelled = int(meta["hits"]), int(meta["labelled"])
            self._last = {k: float(v) for k, v in meta["last_row"].items()}
            self.history.stride = int(meta["history_stride"])
            self._saved_inputs = [float(v) for v in arrays.get(INPUTS, ())]
        n = int(self._restored["n"]) if self._restored else 0
        self.history.trim(n)
        if core is not None and self._restored is not None:
            self._build(core)

    def close(self, timeout: float = 1.0) -> None:
        """Stop the comparator worker."""
        if self.loop is not None:
            assert self._throttle is not None  # (built with the loop)
            self._throttle.close()
            self.loop.close(timeout=timeout)
