"""Every thread of the daemon busy while the model grows to its limits: memory stays sound.

The real daemon (a child process, against the real broker) learns a stream that brings new
inputs, then new classes, until the limits refuse them, with every thread it runs at work at
once: compiled runs on the learner thread (pipelined with the next batch), the regret comparator
fitting back to back (``comparator_duty = 1``) on windows that hold the new classes, shadow
learners, history rows, and a scraper on ``/metrics`` and ``/healthz``. The process runs under
``NUMBA_BOUNDSCHECK=1`` (an index past an array's end raises instead of writing past a heap
block) and ``faulthandler``. The test waits, after each part of the stream, for the comparator's
fit of the window that ends it, so every fit of the next part starts from a model that met fewer
classes than the window holds.

It must then stop cleanly on SIGTERM (exit 0) with every record learned or dead-lettered with a
limit's reason (each offset exactly once) and no comparator fit failed. Before the fix of
``OnlineMKL.losses_many`` (a warm-started comparator indexed the scores of the classes its model
had not met, past their end) two fits failed here with ``IndexError``; without the bounds check
the same writes past the end aborted the daemon of the label flood
(``test_label_flood_runs_to_the_end_in_one_process``, slow) with heap corruption.

``test_one_thread_at_a_time_touches_a_model`` checks the ownership the runner's docstring states,
call by call, in-process: no model's methods run on two threads at once, and the learner's model
only on the loop and the learner thread (a read of the model slipped in after a run's submit
fails it at once).

Boundschecked machine code is cached apart from the normal cache (numba's cache does not tell
the two apart), in ``tests/__pycache__``, under a fingerprint of the sources. On a fresh clone
(CI) that cache is empty: the growth test's ``all-checked`` case compiles every function the
daemon runs under the check (slow: ``make test-slow``; 620 s of the last CI's 28 minutes), while
``rounds-unchecked``, in CI, loads the machine code of the compiled rounds and runs (``rounds.py``,
``wide.py``) from the tree's cache unchecked and compiles everything else with the check
(:mod:`tests.numba_cache`).
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numba
import pytest

from simulators.hostile import good_record
from streammkl.daemon.commands.broker import free_port
from tests.daemon_kafka import (
    ROOT,
    create_topic,
    daemon_argv,
    http_get,
    inspect,
    metrics,
    produce,
    read_topic,
    subprocess_env,
    unique,
)
from tests.numba_cache import COMPILED_ROUNDS, seed_cache

pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group("kafka")]

LIMIT_REASONS = {"too_many_classes", "too_many_features", "over_work_budget"}


def boundscheck_env(unchecked: tuple[str, ...] = ()) -> dict[str, str]:
    """The daemon's environment: numba's bounds check on (with a cache of its own, keyed by the
    sources, the numba version and ``unchecked``) and faulthandler's tracebacks on fatal
    signals. The machine code of the ``unchecked`` modules is copied from this tree's cache
    (:func:`tests.numba_cache.seed_cache`): those run unchecked, every other function is
    compiled with the check."""
    h = hashlib.sha256(f"{numba.__version__} {sys.version}".encode())
    for src in sorted((ROOT / "streammkl").rglob("*.py")):
        h.update(str(src.relative_to(ROOT)).encode())
        h.update(src.read_bytes())
    base = ROOT / "tests" / "__pycache__" / "numba-boundscheck"
    fingerprint = h.hexdigest()[:16]
    cache = base / "-".join((fingerprint, *unchecked))
    if base.is_dir():
        for old in base.iterdir():
            if not old.name.startswith(fingerprint):
                shutil.rmtree(old, ignore_errors=True)
    if unchecked and not cache.is_dir():
        seed_cache(cache, unchecked)
    env = subprocess_env()
    env.update(NUMBA_BOUNDSCHECK="1", NUMBA_CACHE_DIR=str(cache), PYTHONFAULTHANDLER="1")
    return env


class BusyDaemon:
    """The daemon as a child process under the bounds check, with a thread that scrapes
    ``/metrics`` and ``/healthz`` back to back while it runs (the HTTP threads at work)."""

    def __init__(
        self, argv: list[str], log_path: Path, port: int, unchecked: tuple[str, ...] = ()
    ) -> None:
        self.log_path, self.port = log_path, port
        self.values: dict[str, float] = {}  # the last scrape: sample name -> value (summed)
        self.scrapes = 0
        self._stop = threading.Event()
        with open(log_path, "wb") as log:
            self.proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, env=boundscheck_env(unchecked)
            )
        self._thread = threading.Thread(target=self._scrape, daemon=True)
        self._thread.start()

    def _scrape(self) -> None:
        while not self._stop.is_set():
            samples = metrics(self.port)
            if samples:
                values: dict[str, float] = {}
                for (name, _), value in samples.items():
                    values[name] = values.get(name, 0.0) + value
                self.values, self.scrapes = values, self.scrapes + 1
            http_get(self.port, "/healthz")
            self._stop.wait(0.02)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-6000:]

    def wait_for(self, name: str, at_least: float, timeout: float) -> None:
        """Until the scraped ``name`` reaches ``at_least``; fails at once if the daemon exits or
        a comparator fit fails."""
        deadline = time.monotonic() + timeout
        while self.values.get(name, -1.0) < at_least:
            assert self.proc.poll() is None, f"daemon exited {self.proc.returncode}:\n{self.log()}"
            errors = self.values.get("streammkl_comparator_errors_total", 0.0)
            assert errors == 0, f"{errors:g} comparator fit(s) failed:\n{self.log()}"
            late = time.monotonic() > deadline
            assert not late, f"{name} < {at_least} after {timeout}s: {self.values}"
            time.sleep(0.1)

    def wait(self, timeout: float, stop: bool = False) -> int:
        """The exit code (after SIGTERM with ``stop``: drain, checkpoint, exit)."""
        if stop:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:  # (an assertion failing before it is chained)
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"daemon did not exit in {timeout}s:\n{self.log()}")
        finally:
            self._stop.set()
            self._thread.join()


def check_every_record_accounted(
    bootstrap: str, topic: str, n: int, checkpoint_dir: Path, log_path: Path
) -> tuple[dict[str, Any], Counter[str]]:
    """Every offset predicted (learned) or dead-lettered with a limit's reason, exactly once;
    the checkpoint's counters agree; no fatal error and no failed comparator fit in the log."""
    log = log_path.read_text(errors="replace")
    for bad in ("Fatal Python error", "Traceback", "comparator fit(s) failed", "IndexError"):
        assert bad not in log, f"{bad!r} in the daemon's log:\n{log[-6000:]}"
    info = inspect(checkpoint_dir)
    assert info["records_consumed"] == n
    assert info["examples_learned"] + info["records_rejected"] == n
    predictions = read_topic(bootstrap, f"{topic}.predictions", info["examples_learned"])
    letters = read_topic(bootstrap, f"{topic}.dead-letters", info["records_rejected"])
    reasons: Counter[str] = Counter(dict(r.headers)["reason"].decode() for r in letters)
    assert set(reasons) <= LIMIT_REASONS, reasons
    offsets = [json.loads(r.value)["offset"] for r in predictions]
    offsets += [int(dict(r.headers)["source_offset"]) for r in letters]
    assert sorted(offsets) == list(range(n))  # none lost, none twice
    assert len(predictions) == info["examples_learned"]
    return info, reasons


def phases(seed: int = 0) -> list[list[bytes]]:
    """Good two-class records; records of which every fifth brings two new inputs; records of
    which every tenth brings a new class; good records again. (Classes grow with the inputs
    fixed: the comparator then starts each fit from the previous one, whose model has met fewer
    classes than the window holds.)"""
    rng = random.Random(seed)
    good = [good_record(i, rng) for i in range(700)]
    inputs = [good_record(700 + i, rng) for i in range(300)]
    for i, rec in enumerate(inputs):
        if i % 5 == 0:
            rec["x"] = {**rec["x"], f"in-{i}-a": rng.random(), f"in-{i}-b": rng.random()}
    classes = [good_record(1000 + i, rng) for i in range(300)]
    for i, rec in enumerate(classes):
        if i % 10 == 0:
            rec["y"] = f"class-{i}"
    more = [good_record(1300 + i, rng) for i in range(700)]
    return [[json.dumps(r).encode() for r in part] for part in (good, inputs, classes, more)]


# The bounds-checked compile of everything (the slow case): 4-5 min on a loaded 2-core machine
# (the whole test: 303 s in one CI run, 417 s and 620 s in later ones on slower machines, over
# 14 min beside four other jobs; on this 2-core EPYC 561 s at load ~1.5, the daemon 561 s of CPU,
# and it failed at 900 s at load 9; ``rounds-unchecked``: 30 s, the daemon 26 s of CPU). In CI the
# compiled rounds' and runs' machine code comes from the tree's cache, unchecked (most of that
# compile: see tests.numba_cache); everything else, the per-record round, the admission of new
# inputs and classes, the losses and the comparator's fits among it, runs bounds-checked.
@pytest.mark.parametrize(
    "unchecked",
    [
        pytest.param(COMPILED_ROUNDS, id="rounds-unchecked"),
        pytest.param((), id="all-checked", marks=pytest.mark.slow),
    ],
)
@pytest.mark.timeout(1500)
def test_growth_to_the_limits_with_every_thread_busy(
    kafka_bootstrap: str, tmp_path: Path, unchecked: tuple[str, ...]
) -> None:
    """The module's docstring. ``all-checked`` (slow: a cold bounds-checked compile of every
    function the daemon runs) checks the compiled rounds and runs too; ``rounds-unchecked`` (in
    CI) checks every other function: the comparator's losses (where the bug was), the record
    rounds, the admission of new inputs and classes."""
    topic = unique("threads")
    create_topic(kafka_bootstrap, topic, 1)
    port = free_port()
    settings = {
        "limits.max_classes": 20,  # 30 new classes come
        "limits.max_model_features": 30,  # 120 new inputs come
        "kafka.max_poll_records": 64,  # many batches: runs pipelined with the next fetch
        "monitor.window": 300,
        "monitor.every": 50,
        "monitor.comparator_duty": 1.0,  # fits back to back, beside the learning
        "monitor.comparator_nice": 0,  # (at 19 it may starve on a loaded machine)
        "monitor.shadows": True,
        "monitor.history_every": 25,
    }
    argv = daemon_argv(kafka_bootstrap, topic, unique("g"), tmp_path / "ck", port, None, settings)
    daemon = BusyDaemon(argv, tmp_path / "daemon.log", port, unchecked)
    n = 0
    try:
        for k, part in enumerate(phases()):
            produce(kafka_bootstrap, topic, part)
            n += len(part)
            # the first wait includes the bounds-checked compile (minutes on a loaded machine)
            daemon.wait_for("streammkl_records_consumed_total", n, timeout=900 if k == 0 else 300)
            # a fit of the window that ends with this phase (the next one starts from it); the
            # first includes the comparator's own bounds-checked compile, in its thread (CI on
            # a loaded box: no window after 180 s, the daemon's warm-up alone took 90 s)
            cut = daemon.values["streammkl_records_learned_total"] // 50 * 50
            daemon.wait_for("streammkl_window_end", cut, timeout=900 if k == 0 else 300)
    finally:
        code = daemon.wait(timeout=120, stop=True)
    assert code == 0, daemon.log()
    _, reasons = check_every_record_accounted(
        kafka_bootstrap, topic, n, tmp_path / "ck", tmp_path / "daemon.log"
    )
    # the limits were reached: classes and inputs grew to them, the rest was refused
    assert reasons["too_many_classes"] > 0, reasons
    assert reasons["too_many_features"] + reasons["over_work_budget"] > 0, reasons
    assert daemon.scrapes > 0 and daemon.values["streammkl_comparator_errors_total"] == 0


class OwnerGuard:
    """Wraps the methods of ``OnlineMKL`` that read or change its arrays and records, per model,
    the threads that call them and every call made while another thread was inside one."""

    METHODS = (
        "learn", "learn_predict", "learn_many", "learn_many_prepared",
        "decision", "decision_many", "decision_prepared", "losses_many", "objective_terms",
        "regularization_value", "regularization_values", "kernel_weights_of", "declare_features",
        "restart_schedule", "save_point", "restore_point", "to_state", "digest", "config",
        "_rebuild", "_ensure_room",
    )  # fmt: skip

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from streammkl.core import OnlineMKL

        self.lock = threading.Lock()
        self.inside: dict[int, tuple[int, int]] = {}  # id(model) -> (thread, depth)
        self.threads: dict[int, set[str]] = {}  # id(model) -> names of the threads seen
        self.violations: list[str] = []
        for name in self.METHODS:
            monkeypatch.setattr(OnlineMKL, name, self._wrap(name, getattr(OnlineMKL, name)))

    def _wrap(self, name: str, method: Any) -> Any:
        def guarded(model: Any, *args: Any, **kwargs: Any) -> Any:
            me = threading.get_ident()
            with self.lock:
                owner, depth = self.inside.get(id(model), (me, 0))
                if owner != me:
                    other = threading.current_thread().name
                    self.violations.append(f"{name} on {other} while thread {owner} is inside")
                self.inside[id(model)] = (me, depth + 1)
                self.threads.setdefault(id(model), set()).add(threading.current_thread().name)
            try:
                return method(model, *args, **kwargs)
            finally:
                with self.lock:
                    owner, depth = self.inside[id(model)]
                    if depth <= 1:
                        del self.inside[id(model)]
                    else:
                        self.inside[id(model)] = (owner, depth - 1)

        return guarded


def test_one_thread_at_a_time_touches_a_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ownership the runner's docstring states, checked call by call (in-process, in-memory
    Kafka): the learner's model is touched by the loop and the learner thread, never by both at
    once; the comparator's and the shadows' models by one thread at a time; no HTTP thread
    touches a model."""
    from prometheus_client import CollectorRegistry

    from streammkl.daemon.loop.runner import Runner
    from tests.daemon_fakes import FakeCluster
    from tests.test_daemon_runner import make_settings

    guard = OwnerGuard(monkeypatch)
    cluster = FakeCluster()
    cluster.create("in", 2)
    for i, value in enumerate(v for part in phases(seed=1) for v in part[:300]):
        cluster.append("in", value, i % 2, None, i)
    settings = make_settings(tmp_path, **{
        "limits.max_classes": 12, "limits.max_model_features": 20, "metrics.enabled": True,
        "metrics.port": 0, "monitor.window": 200, "monitor.every": 25,
        "monitor.comparator_duty": 1.0, "monitor.comparator_nice": 0, "monitor.shadows": True,
    })  # fmt: skip
    runner = Runner(
        settings,
        registry=CollectorRegistry(),
        consumer_client=cluster.consumer(),
        producer_client=cluster.producer(),
    )
    runner.start()
    assert runner.http is not None
    done = threading.Event()

    def scrape(port: int = runner.http.port) -> None:
        while not done.is_set():
            http_get(port, "/metrics")
            http_get(port, "/readyz")

    scraper = threading.Thread(target=scrape, daemon=True)
    scraper.start()
    try:
        runner.run()
    finally:
        done.set()
        scraper.join()
    assert not guard.violations, guard.violations[:5]
    core = runner.learner.rounds().model
    assert guard.threads[id(core)] == {threading.current_thread().name, "streammkl-learn_0"}
    seen = set().union(*guard.threads.values())
    assert "streammkl-regret" in seen  # the comparator fitted (its own models)
    assert not any(name.startswith("streammkl-http") for name in seen)


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_label_flood_runs_to_the_end_in_one_process(kafka_bootstrap: str, tmp_path: Path) -> None:
    """The probe of the label flood, with the default settings: 20,000 records, 1,000 records
    each bringing a new class (the default limit admits 1,000 classes: the two known ones and
    998 of them), 20,000 records. Before the fix: heap-corruption aborts or segfaults, 3 of 3
    runs (2 of 2 here)."""
    rng = random.Random(0)
    records = [good_record(i, rng) for i in range(20_000)]
    records += [{"x": {"x1": rng.random(), "x2": rng.random()}, "y": f"label-{i}"}
                for i in range(1000)]  # fmt: skip
    records += [good_record(21_000 + i, rng) for i in range(20_000)]
    values = [json.dumps(r).encode() for r in records]
    topic = unique("flood")
    create_topic(kafka_bootstrap, topic, 1)
    produce(kafka_bootstrap, topic, values)
    port = free_port()
    argv = daemon_argv(kafka_bootstrap, topic, unique("g"), tmp_path / "ck", port, 5.0)
    log_path = tmp_path / "daemon.log"
    daemon = BusyDaemon(argv, log_path, port)
    code = daemon.wait(timeout=1800)
    assert code == 0, daemon.log()
    _, reasons = check_every_record_accounted(
        kafka_bootstrap, topic, len(values), tmp_path / "ck", log_path
    )
    assert reasons == Counter({"too_many_classes": 2}), reasons
    assert daemon.values["streammkl_comparator_errors_total"] == 0
