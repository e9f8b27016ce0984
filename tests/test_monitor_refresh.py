"""The windowed regret refreshes on a schedule in examples and seconds (a loaded machine slows
it, never stops it), says when it is stale, and the history and report tell the truth about
missing values and infinite bounds (issue 17 items 2-3)."""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from streammkl.core import OnlineMKL, kernels, schedules
from streammkl.daemon.commands import report
from streammkl.daemon.learning import history
from streammkl.daemon.learning.stream_monitor import Throttled
from streammkl.monitor import Monitor
from streammkl.monitor.regret import WindowedRegret, make_comparator


def epochs(model: OnlineMKL, **kw: Any) -> Any:
    """The default epoch comparator with these settings (its module is not named here)."""
    return type(make_comparator("epochs", model))(**kw)


def trained(n: int = 60, **kw: Any) -> tuple[OnlineMKL, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 2))
    Y = np.where(X[:, 0] > 0, 1.0, -1.0)
    model = OnlineMKL(**kw)
    model.learn_many(X, Y)
    return model, X, Y


def test_the_prop3_bound_after_a_restart_is_never_a_made_up_zero() -> None:
    # FTRL (the default) has no proven bound: +inf before and right after a restart, not 0.0
    model, X, Y = trained()
    monitor = Monitor(model, window=None, detector=None)
    monitor.observe(X[0], Y[0], 0.5, 0.0)
    assert monitor.snapshot()["regret_bound"] == math.inf
    model.restart_schedule()
    monitor.restarted()
    assert monitor.snapshot()["regret_bound"] == math.inf
    # a schedule with a bound: 0 over zero rounds is then the truth
    bounded, X, Y = trained(
        kernels=(kernels.Linear(),), schedule=schedules.InvSqrt(0.5), radius=2.0,
        fit_intercept=False,
    )  # fmt: skip
    watch = Monitor(bounded, window=None, detector=None)
    watch.observe(X[0], Y[0], 0.5, 0.0)
    assert 0 < watch.snapshot()["regret_bound"] < math.inf
    bounded.restart_schedule()
    watch.restarted()  # the caller restarted the schedule: the monitor's bound starts again
    assert watch.snapshot()["regret_bound"] == 0.0


def test_history_keeps_infinite_apart_from_unknown() -> None:
    row = {
        "regret_bound": math.inf,
        "window_regret": math.nan,
        "beta": {"a": -math.inf},
        "t": 3,
        "loss": 0.5,
        "lag": np.float64(np.nan),
        "deep": {"b": {"c": math.nan, "d": 2.5}},
    }
    assert history.clean(row) == {
        "regret_bound": "+inf", "window_regret": None, "beta": {"a": "-inf"}, "t": 3,
        "loss": 0.5, "lag": None, "deep": {"b": {"c": None, "d": 2.5}},
    }  # fmt: skip


def test_the_report_draws_missing_as_gaps_and_infinite_bounds_as_no_finite_bound(
    tmp_path: Path,
) -> None:
    rows: list[dict[str, Any]] = [
        {"t": 100, "regret_bound": "+inf", "objective": 1.0, "beta": {"linear": 1.0}},
        {"t": 200, "regret_bound": "+inf", "objective": None},  # not known then
        {"t": 300, "regret_bound": 4.0, "objective": 3.0},
        {"t": 400, "regret_bound": None, "objective": 4.0},
        {"t": 500, "regret_bound": 6.0, "objective": 5.0,
         "window_end": 100, "window_regret": 2.0, "window_regret_lag": 400,
         "window_regret_stale": 1},
    ]  # fmt: skip
    t, values = report._series(rows, "regret_bound")
    assert t == [100.0, 200.0, 300.0, 400.0, 500.0]  # every row: gaps stay gaps
    assert [v for v in values if not math.isnan(v)] == [4.0, 6.0]  # never a 0.0 for +inf
    assert report.infinite_spans(rows, "regret_bound") == [(100.0, 300.0)]
    assert math.isnan(report._series(rows, "objective")[1][1])
    directory = tmp_path / "ck"
    directory.mkdir()
    (directory / history.FILENAME).write_text("".join(__import__("json").dumps(r) + "\n"
                                                      for r in rows))  # fmt: skip
    paths = report.write_report(directory, tmp_path / "out")
    assert [p.name for p in paths] == list(report.FIGURES) and all(p.stat().st_size for p in paths)


class Clocks:
    """A wall clock and a CPU clock for :class:`Throttled`; ``wait`` advances the wall."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0
        self.waits: list[float] = []

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        self.wall += seconds
        return False


def test_a_starved_fit_owes_idle_time_for_its_cpu_not_its_wall_time() -> None:
    clocks = Clocks()

    class Starved:  # 10 s of wall clock for 1 s of CPU: a loaded machine
        method, exact = "starved", False

        def fit(self, *args: Any) -> str:
            clocks.wall += 10.0
            clocks.cpu += 1.0
            return "fitted"

    t = Throttled(Starved(), duty=0.25, clock=lambda: clocks.wall, cpu=lambda: clocks.cpu)
    t.wait = clocks.wait
    t.fit()
    t.fit()
    assert clocks.waits == [3.0]  # 1 s of CPU owes 3 s at 25 % (its 10 s of wall clock: 30 s)


def _published(regret: WindowedRegret, end: int, n: int, timeout: float = 30.0) -> bool:
    """Whether an estimate up to ``end`` is published within ``timeout``, the schedule checked
    meanwhile as the daemon's snapshots do (every 0.5 s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if regret.latest is not None and regret.latest.end >= end:
            return True
        regret.check(n)
        time.sleep(0.01)
    return False


def test_an_overdue_estimate_hurries_the_comparator_past_its_pauses() -> None:
    model, X, Y = trained(200)
    inner = epochs(model, max_epochs=4, patience=4, rel_tol=-1.0)
    throttle = Throttled(inner, duty=1e-6)  # each epoch would owe days of idle time
    # stale 100 examples behind; hurried from half of that on
    regret = WindowedRegret(model, window=40, every=20, comparator=throttle, refresh_examples=100)
    try:
        for x, y in zip(X[:40], Y[:40], strict=True):  # two windows: fits paced for days
            regret.observe(x, y, 0.5, 0.0, 0.1, 1.0)
        assert not _published(regret, 20, 40, timeout=0.5) and not regret.due(40)
        for x, y in zip(X[40:60], Y[40:60], strict=True):  # 60 examples without an estimate
            regret.observe(x, y, 0.5, 0.0, 0.1, 1.0)
        assert regret.due(60) and not regret.overdue(60)
        assert _published(regret, 20, 60)  # hurried: the pauses are skipped
        assert throttle.n_hurried == 1
        for x, y in zip(X[60:200], Y[60:200], strict=True):  # and so on, however slow
            regret.observe(x, y, 0.5, 0.0, 0.1, 1.0)
        assert _published(regret, 200 - 60, 200)  # at most refresh_examples behind
        assert throttle.n_hurried >= 2
    finally:
        throttle.close()
        regret.close(timeout=5)


def test_the_daemon_s_comparator_is_hurried_only_while_the_loop_waits_for_it() -> None:
    """``hurry_when="loop_waits"`` (the daemon's): the schedule's hurry alone is declined (the
    duty holds however far the estimate lags: a backlog), the hurry of a loop that waits for
    the fit is heeded, and once the loop stops waiting the pauses are owed again."""
    model, X, Y = trained(200)
    inner = epochs(model, max_epochs=4, patience=4, rel_tol=-1.0)
    throttle = Throttled(inner, duty=1e-6, hurry_when="loop_waits")  # pauses of days
    regret = WindowedRegret(model, window=40, every=20, comparator=throttle, refresh_examples=100)
    try:
        for x, y in zip(X[:80], Y[:80], strict=True):  # 80 examples without an estimate
            regret.observe(x, y, 0.5, 0.0, 0.1, 1.0)
        assert regret.due(80)
        assert not _published(regret, 20, 80, timeout=0.5)  # the schedule's hurry: declined
        assert throttle.n_hurried == 0 and throttle.n_hurries_declined >= 1
        with throttle.loop_waits():
            waited = regret.catch_up(80, timeout=30)
        assert 0 < waited < 30 and regret.latest is not None and regret.latest.end >= 20
        assert throttle.n_hurried >= 1 and throttle.busy_seconds > 0
        fits = len(regret.history)
        for x, y in zip(X[80:200], Y[80:200], strict=True):  # far behind again, nobody waits
            regret.observe(x, y, 0.5, 0.0, 0.1, 1.0)
        assert regret.overdue(200)
        assert not _published(regret, 200 - 60, 200, timeout=0.5)
        assert len(regret.history) <= fits + 1  # (at most the fit the wait had begun)
    finally:
        throttle.close()
        regret.close(timeout=5)
    try:
        Throttled(inner, duty=0.5, hurry_when="sometimes")  # type: ignore[arg-type]
    except ValueError as exc:
        assert "hurry_when" in str(exc)
    else:
        raise AssertionError("an unknown hurry_when was accepted")


def test_the_snapshot_says_when_the_windowed_regret_is_stale() -> None:
    model, X, Y = trained(200)
    gate = threading.Event()
    gate.set()

    class Gated:  # fits wait for the gate: a worker that gets no CPU
        method, exact = "gated", False

        def fit(self, config: Any, keys: Any, Xw: Any, Yw: Any) -> Any:
            gate.wait()
            return epochs(model, max_epochs=1).fit(config, keys, Xw, Yw)

    monitor = Monitor(model, window=40, every=20, comparator=Gated(), detector=None,
                      refresh_examples=60)  # fmt: skip
    try:
        snap = monitor.snapshot()  # 0 or 1, never NaN: an alert can fire on it
        assert snap["window_regret_stale"] == 0.0 and math.isnan(snap["window_regret_lag"])
        for x, y in zip(X[:20], Y[:20], strict=True):
            monitor.observe(x, y, 0.5, 0.0)
        assert monitor.wait(timeout=30)
        gate.clear()
        for x, y in zip(X[20:100], Y[20:100], strict=True):
            monitor.observe(x, y, 0.5, 0.0)
        snap = monitor.snapshot()
        assert snap["window_regret_stale"] == 1.0 and snap["window_regret_lag"] == 80.0
        gate.set()
        assert monitor.wait(timeout=30)
        snap = monitor.snapshot()
        assert snap["window_regret_stale"] == 0.0 and snap["window_regret_lag"] == 0.0
    finally:
        gate.set()
        monitor.close(timeout=5)


def test_stale_before_the_first_estimate_when_no_fit_ends() -> None:
    """A backlog from the start: no fit ever ends, no estimate exists, and the flag says 1
    (it read NaN there, so nothing could alert on it)."""
    model, X, Y = trained(200)
    gate = threading.Event()

    class Starved:  # a worker that gets no CPU: its first fit never ends
        method, exact = "starved", False

        def fit(self, config: Any, keys: Any, Xw: Any, Yw: Any) -> Any:
            gate.wait()
            return epochs(model, max_epochs=1).fit(config, keys, Xw, Yw)

    monitor = Monitor(model, window=40, every=20, comparator=Starved(), detector=None,
                      refresh_examples=60)  # fmt: skip
    try:
        for x, y in zip(X[:40], Y[:40], strict=True):
            monitor.observe(x, y, 0.5, 0.0)
        assert monitor.snapshot()["window_regret_stale"] == 0.0  # within the schedule
        for x, y in zip(X[40:100], Y[40:100], strict=True):
            monitor.observe(x, y, 0.5, 0.0)
        snap = monitor.snapshot()
        assert snap["window_regret_stale"] == 1.0 and math.isnan(snap["window_regret"])
    finally:
        gate.set()
        monitor.close(timeout=5)
    assert Monitor(model, window=None).snapshot()["window_regret_stale"] == 0.0


class _OneAtATime:
    """A comparator whose fits each wait for a release (a worker given CPU on demand)."""

    method, exact = "gated", False

    def __init__(self, model: OnlineMKL) -> None:
        self.model = model
        self.go = threading.Semaphore(0)

    def fit(self, config: Any, keys: Any, Xw: Any, Yw: Any) -> Any:
        self.go.acquire()
        return epochs(self.model, max_epochs=1).fit(config, keys, Xw, Yw)


def test_a_window_waits_from_its_own_cut_not_from_the_first_unanswered_one() -> None:
    """In a backlog a newer window is always pending when a fit ends: the seconds schedule
    must restart from the cut of the oldest window still unanswered (it used to keep the first
    window's time for good, and the estimate read stale however fresh it was)."""
    model, X, Y = trained(200)
    gated = _OneAtATime(model)
    regret = WindowedRegret(model, window=40, every=20, comparator=gated, refresh_seconds=1.0)
    try:
        for x, y in zip(X[:20], Y[:20], strict=True):  # cut at 20: its fit waits
            regret.observe(x, y, 0.5, 0.0, 0.1, 1.0)
        time.sleep(0.7)
        for x, y in zip(X[20:40], Y[20:40], strict=True):  # cut at 40: pending, 0.7 s later
            regret.observe(x, y, 0.5, 0.0, 0.1, 1.0)
        time.sleep(0.5)
        assert regret.overdue(40)  # the window cut at 20 has waited 1.2 s
        gated.go.release()  # the fit of 20 ends; 40's starts (and waits)
        deadline = time.monotonic() + 30
        while (regret.latest is None or regret.latest.end != 20) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert regret.latest is not None and regret.latest.end == 20
        assert not regret.overdue(40)  # 40 has waited ~0.5 s of its 1 s
        time.sleep(0.6)
        assert regret.overdue(40)  # ... and now more than 1 s
    finally:
        for _ in range(3):
            gated.go.release()
        regret.close(timeout=5)


def test_the_learning_loop_catches_up_with_a_bounded_wait() -> None:
    """A stream faster than the comparator: at 60 % of the schedule the loop waits for the
    hurried fits until a fresh estimate is out (so it is never stale); a comparator that
    never ends holds the loop at most ``timeout``."""
    model, X, Y = trained(200)
    inner = epochs(model, max_epochs=1, patience=1, rel_tol=-1.0)  # (no pause within a fit)
    throttle = Throttled(inner, duty=1e-6)  # pauses of days between fits
    regret = WindowedRegret(model, window=40, every=20, comparator=throttle, refresh_examples=100)
    try:
        for x, y in zip(X[:20], Y[:20], strict=True):  # the first fit runs at once
            regret.observe(x, y, 0.5, 0.0, 0.1, 1.0)
        assert regret.wait(timeout=30) and regret.latest is not None
        assert regret.catch_up(20, timeout=5) == 0.0  # nothing lags
        for x, y in zip(X[20:80], Y[20:80], strict=True):  # 60 behind; its fit paced for days
            regret.observe(x, y, 0.5, 0.0, 0.1, 1.0)
        assert regret.latest.end == 20
        waited = regret.catch_up(80, timeout=30)
        assert 0 < waited < 30 and regret.latest.end == 80 and not regret.overdue(80)
    finally:
        throttle.close()
        regret.close(timeout=5)
    gated = _OneAtATime(model)
    stuck = WindowedRegret(model, window=40, every=20, comparator=gated, refresh_examples=100)
    try:
        for x, y in zip(X[:80], Y[:80], strict=True):
            stuck.observe(x, y, 0.5, 0.0, 0.1, 1.0)
        t0 = time.monotonic()
        waited = stuck.catch_up(80, timeout=0.3)
        assert 0.3 <= waited < 5 and time.monotonic() - t0 < 5 and stuck.latest is None
    finally:
        for _ in range(5):
            gated.go.release()
        stuck.close(timeout=5)


def test_the_catch_up_takes_at_most_its_share_of_the_loop_s_time() -> None:
    """With a share below 1 the waits come out of a budget earned at ``share`` seconds per
    second from the first call that lags (at most ``timeout`` saved up): a comparator that
    never ends costs the loop nothing at first, then what it earned, then nothing again."""
    model, X, Y = trained(200)
    gated = _OneAtATime(model)
    regret = WindowedRegret(model, window=40, every=20, comparator=gated, refresh_examples=100)
    try:
        for x, y in zip(X[:80], Y[:80], strict=True):
            regret.observe(x, y, 0.5, 0.0, 0.1, 1.0)
        assert regret.catch_up(80, timeout=0.5, share=0.1) == 0.0  # nothing earned yet
        time.sleep(1.5)  # earns 0.15 s
        earned = regret.catch_up(80, timeout=0.5, share=0.1)
        assert 0.1 <= earned < 0.4, earned
        assert regret.catch_up(80, timeout=0.5, share=0.1) == 0.0  # the budget is spent
        time.sleep(10)  # earns 1 s, of which 0.5 s (the timeout) is kept
        kept = regret.catch_up(80, timeout=0.5, share=0.1)
        assert 0.45 <= kept < 1.0, kept
        assert regret.catch_up(80, timeout=0.5, share=0.0) == 0.0  # share 0: never
    finally:
        for _ in range(5):
            gated.go.release()
        regret.close(timeout=5)
