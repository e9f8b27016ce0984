"""Compile the learner's numerical code before the first record: once, visibly, with progress.

streammkl's rounds, compiled runs and the regret monitor's comparator are numba functions,
compiled on their first call and cached on disk (``__pycache__`` beside the sources, or
``$NUMBA_CACHE_DIR``). On a machine that has never run them, the first record therefore waits
for the compiler: about two minutes on two cores for the daemon's default learner, during
which nothing is learned. :func:`warm_up` pays that price up front, on a throwaway learner built
from the same settings and learning the same kind of records, stage by stage, and tells a
``progress`` callback what it compiles and why; with a warm cache it takes a second or two (numba
loads the machine code).

``make install`` runs it (``streammkl warmup``), ``streammkl demo`` runs it before the simulator
starts; a caller that serves health endpoints can report its progress
(:class:`WarmUpProgress`: stage, function being compiled, count, elapsed).
"""

from __future__ import annotations

import copy
import logging
import math
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba.core import event

from streammkl import statefile
from streammkl.daemon.config import Settings
from streammkl.daemon.learning.building import build_learner
from streammkl.daemon.learning.drivers import LearnerDriver, MKLDriver, driver_for
from streammkl.daemon.learning.learner import Inputs, Target
from streammkl.daemon.learning.stream_monitor import StreamMonitor
from streammkl.monitor.regret import make_comparator

#: What a cold compile takes (measured on 2 cores: the default learner's round 100-140 s quiet;
#: the whole warm-up with the wide sparse stage 4 min of CPU at load 10); said before it starts,
#: so nobody waits without knowing why.
COLD_COMPILE_NOTE = (
    "compiling the learner's numerical code (numba) once: a few minutes on a cold cache, "
    "a second or two afterwards (the machine code is cached on disk)"
)

#: Labelled examples learned one at a time (the model grows), then as compiled runs.
_ONE_BY_ONE = 60
_RUN = 500


@dataclass(frozen=True, slots=True)
class WarmUpProgress:
    """Where a warm-up is (given to the ``progress`` callback at each stage and each compile).

    Parameters
    ----------
    stage
        The stage's number, from 1.
    stages
        How many stages this warm-up has.
    what
        The stage, in words (what is compiled and why).
    compiling
        The function numba is compiling now (``None`` between compiles).
    compiled
        Functions compiled so far (0 with a warm cache: numba loaded them).
    elapsed
        Seconds since the warm-up started.
    done
        The last report: the warm-up is over.
    """

    stage: int
    stages: int
    what: str
    compiling: str | None
    compiled: int
    elapsed: float
    done: bool = False


Progress = Callable[[WarmUpProgress], None]


@dataclass(frozen=True, slots=True)
class WarmUpReport:
    """What a warm-up did: seconds taken, functions compiled (0: all loaded from the cache)."""

    seconds: float
    compiled: int


class _Tracker:
    """Counts numba's compiles (its ``numba:compile`` events) and reports them."""

    def __init__(self, progress: Progress | None, stages: int) -> None:
        self.progress, self.stages = progress, stages
        self.t0 = time.monotonic()
        self.stage, self.what = 0, ""
        self.compiled = 0
        self.depth = 0
        self.lock = threading.Lock()

    def enter(self, what: str) -> None:
        self.stage += 1
        self.what = what
        self.report(None)

    def report(self, compiling: str | None, done: bool = False) -> None:
        if self.progress is not None:
            self.progress(
                WarmUpProgress(self.stage, self.stages, self.what, compiling, self.compiled,
                               time.monotonic() - self.t0, done)
            )  # fmt: skip


class _Listener(event.Listener):
    def __init__(self, tracker: _Tracker) -> None:
        self.tracker = tracker

    def on_start(self, ev: Any) -> None:
        dispatcher = (ev.data or {}).get("dispatcher")
        name = getattr(getattr(dispatcher, "py_func", None), "__qualname__", None)
        module = getattr(getattr(dispatcher, "py_func", None), "__module__", "")
        with self.tracker.lock:
            self.tracker.compiled += 1
        self.tracker.report(f"{module.rsplit('.', 1)[-1]}.{name}" if name else "a function")

    def on_end(self, ev: Any) -> None:
        pass


@contextmanager
def _listening(tracker: _Tracker) -> Iterator[None]:
    listener = _Listener(tracker)
    event.register("numba:compile", listener)
    try:
        yield
    finally:
        event.unregister("numba:compile", listener)


@contextmanager
def logging_compiles(logger: logging.Logger, every: float = 15.0) -> Iterator[_Tracker]:
    """Log what numba compiles meanwhile: one INFO line at the first compile (what and why, how
    long it takes), then one every ``every`` seconds with the function and the count, and one at
    the end. Silent when nothing is compiled (a warm cache): the daemon's start wraps its
    learner's warm-up in it, so a first run on a new machine never compiles in silence."""
    state = {"said": -math.inf, "first": True}

    def report(p: WarmUpProgress) -> None:
        if p.compiling is None:
            return
        if state["first"]:
            state["first"] = False
            state["said"] = p.elapsed
            logger.info("%s; now: %s (streammkl warmup does it ahead)", COLD_COMPILE_NOTE,
                        p.compiling)  # fmt: skip
        elif p.elapsed - state["said"] >= every:
            state["said"] = p.elapsed
            logger.info("still compiling: %s (#%d, %.0f s)", p.compiling, p.compiled, p.elapsed)

    tracker = _Tracker(report, 1)
    with _listening(tracker):
        yield tracker
    if tracker.compiled:
        logger.info(
            "compiled %d functions in %.0f s (cached for the next starts)",
            tracker.compiled, time.monotonic() - tracker.t0,
        )  # fmt: skip


def synthetic_examples(
    n: int = _ONE_BY_ONE + _RUN + 200, seed: int = 0
) -> list[tuple[Inputs, Target]]:
    """Dense labelled examples (5 inputs named ``"0"``..``"4"``, as the daemon names a dense
    record's features; two classes), for a classifier or a regressor (labels are booleans,
    learned as 0/1 by a regressor)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    return [({str(j): float(v) for j, v in enumerate(row)}, bool(row[0] * row[1] > 0)) for row in X]


def sparse_examples(n: int = 300, words: int = 2_000, seed: int = 0) -> list[tuple[Inputs, Target]]:
    """Wide sparse labelled examples, as a bag of words gives them: each about a dozen word
    counts (integers) drawn from a Zipf vocabulary of ``words`` words, so that new inputs keep
    arriving; labelled by whether the record counts more of the odd-numbered words than of the
    even-numbered ones (two classes; a regressor learns them as 0/1)."""
    rng = np.random.default_rng(seed)
    examples: list[tuple[Inputs, Target]] = []
    for _ in range(n):
        counts: dict[str, float] = {}
        odd = 0
        for k in np.minimum(rng.zipf(1.3, size=12), words):
            counts[f"w{k}"] = counts.get(f"w{k}", 0) + 1
            odd += 1 if k % 2 else -1
        examples.append((counts, odd > 0))
    return examples


def warm_up(
    settings: Settings,
    examples: Iterable[tuple[Inputs, Target]] | None = None,
    progress: Progress | None = None,
    wide: bool = True,
) -> WarmUpReport:
    """Compile (or load from numba's cache) the code the daemon runs for ``settings``' learner.

    A throwaway learner is built from ``settings.learner`` and learns ``examples`` (the records'
    ``(x, y)`` as the daemon decodes them; default :func:`synthetic_examples`, for a
    classifier or regressor) the way the daemon does: a few records one at a time (the model
    grows), then compiled runs of a batch, each observed by the regret monitor when it is on,
    then one fit of the monitor's windowed-regret comparator; with the default examples a
    second and a third throwaway learner then learn wide sparse records (:func:`sparse_examples`,
    the path of a bag of words or one-hot record, for the daemon and for river's defaults);
    last the learner's state (a checkpoint). Nothing the daemon keeps is touched.

    Parameters
    ----------
    settings
        The daemon's settings (its learner and monitor sections are used).
    examples
        Labelled examples of the stream to come; more than ~800 are not needed.
    progress
        Called with a :class:`WarmUpProgress` at each stage and each function numba starts
        compiling (on the calling thread), and once with ``done=True``.
    wide
        With the default examples, also learn the wide sparse records (``False``: the dense
        stages only, as the daemon's warm start does: it loads what the dense stream runs
        and must not compile what a wide one would).

    Returns
    -------
    WarmUpReport
    """
    learner = build_learner(settings.learner)
    sequence = settings.learner.task == "sequence"
    driver = driver_for(learner, sequence)
    fused = isinstance(driver, MKLDriver)
    task = settings.learner.task
    wide = wide and fused and examples is None and task in ("classification", "regression")
    if examples is None and task in ("classification", "regression"):
        examples = synthetic_examples()
    data = list(examples)[: _ONE_BY_ONE + _RUN + 200] if examples is not None else []
    if task == "regression":  # (a regressor learns numbers: booleans as 0/1)
        data = [(x, float(y)) for x, y in data if isinstance(y, int | float)]
    monitor_on = fused and settings.monitor.enabled
    stages = 1 + (2 if data else 0) + (1 if monitor_on and data else 0) + int(wide) + 1
    tracker = _Tracker(progress, stages)
    with _listening(tracker), tempfile.TemporaryDirectory(prefix="streammkl-warmup-") as tmp:
        tracker.enter("the learner's round: predict then learn one record")
        driver.warm_up()
        monitor: StreamMonitor | None = None
        if monitor_on:
            monitor = StreamMonitor(settings.monitor, tmp, log_errors=False)  # not the daemon's
            driver.track, driver.observer = True, monitor
        try:
            if data:
                _learn(driver, data, tracker)
            if monitor is not None and data:
                tracker.enter("the regret monitor's comparator (the windowed regret's fit)")
                _fit_comparator(driver, settings, data)
            if wide:
                tracker.enter("wide sparse records (a bag of words: new inputs keep arriving)")
                _learn_wide(settings)
            tracker.enter("the learner's state (what a checkpoint writes and a restart reads)")
            _round_trip(learner, data)
            if monitor is not None:
                monitor.to_state()
        finally:
            if monitor is not None:
                monitor.close(timeout=0)
    tracker.report(None, done=True)
    return WarmUpReport(time.monotonic() - tracker.t0, tracker.compiled)


def _round_trip(learner: Any, data: list[tuple[Inputs, Target]]) -> None:
    """A checkpoint's round trip: ``to_state``, ``from_state``, the digest compared, and a
    prediction of the restored model (the code a restart runs)."""
    meta, arrays = learner.to_state()
    restored = type(learner).from_state(meta, arrays)
    if statefile.digest_of(restored) != statefile.digest_of(learner):
        raise RuntimeError("the warm-up's checkpoint round trip changed the model")
    if data and hasattr(restored, "predict_one"):
        restored.predict_one(data[-1][0])


def _learn(driver: LearnerDriver, data: list[tuple[Inputs, Target]], tracker: _Tracker) -> None:
    xs, ys = [x for x, _ in data], [y for _, y in data]
    tracker.enter("prequential rounds one record at a time (while the model grows)")
    driver.learn_predict_many(xs[:_ONE_BY_ONE], ys[:_ONE_BY_ONE], None)
    tracker.enter("compiled runs of a batch (the daemon's fast path, with the monitor)")
    rest_x, rest_y = xs[_ONE_BY_ONE:], ys[_ONE_BY_ONE:]
    end, X, Y = driver.plan_run(rest_x, rest_y)
    if end:
        assert X is not None and Y is not None
        driver.run_rounds(X, Y)
    driver.learn_predict_many(rest_x[end:], rest_y[end:], None)


def _learn_wide(settings: Settings) -> None:
    """Throwaway learners learn :func:`sparse_examples`: one built from the settings through
    the daemon's path (prequential rounds), then one with its class's own defaults (river's
    ``MKLClassifier()`` / ``MKLRegressor()``, which do not standardise) through river's
    (``predict_proba_one`` or ``predict_one``, then ``learn_one``): the code a record with many
    new inputs runs (admission, growth, the sparse round), which a dense stream never reaches.
    numba compiles a function once per argument types, and the two settings give it different
    ones."""
    learner = build_learner(settings.learner)
    driver = driver_for(learner, False)
    data = sparse_examples()
    if settings.learner.task == "regression":
        data = [(x, 1.0 if y else 0.0) for x, y in data]
    for x, y in data:
        driver.learn_predict_many([x], [y], None)
    default = type(learner)()
    predict = getattr(default, "predict_proba_one", default.predict_one)
    for x, y in data:
        predict(x)
        default.learn_one(x, y)


def _fit_comparator(
    driver: LearnerDriver, settings: Settings, data: list[tuple[Inputs, Target]]
) -> None:
    """One fit of the windowed regret's comparator on a small window, as its worker does."""
    assert isinstance(driver, MKLDriver)
    rounds = driver.rounds
    core = rounds.model
    if core is None:
        return
    xs, ys = [x for x, _ in data][-200:], [y for _, y in data][-200:]
    end, X, Y = rounds.plan(xs, ys, 0, validated=True)  # type: ignore[arg-type]
    if not end or X is None or Y is None:
        return
    monitor = settings.monitor
    comparator = make_comparator(monitor.comparator, core, epochs=monitor.comparator_epochs)
    config = {**core.config(), "kernels": [copy.copy(k) for k in core.kernels]}
    comparator.fit(config, tuple(core.feature_keys), rounds.prepare_rows(X), Y)


__all__ = [
    "COLD_COMPILE_NOTE",
    "WarmUpProgress",
    "WarmUpReport",
    "logging_compiles",
    "sparse_examples",
    "synthetic_examples",
    "warm_up",
]
