"""The daemon's regret/drift monitor: exported with the monitor's help texts, drift detection
survives crashes exactly, bounded history, ``streammkl report`` figures."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from streammkl import wire
from streammkl.daemon.checkpoints.inspection import inspect_checkpoint
from streammkl.daemon.commands.cli import main
from streammkl.daemon.config import load_settings
from streammkl.daemon.learning import history
from streammkl.daemon.learning.drivers import MKLDriver
from streammkl.daemon.learning.history import History
from streammkl.daemon.learning.stream_monitor import INPUTS
from streammkl.daemon.loop.runner import Runner
from streammkl.monitor import METRICS
from streammkl.statefile import digest_of
from tests.daemon_fakes import FakeCluster, FakeLearner
from tests.test_daemon_runner import make_settings

PHASE = 400
BANK = [{"type": "Linear"}, {"type": "RBF", "gamma": 2.0}, {"type": "Polynomial", "degree": 2}]
MONITOR = {
    "monitor.window": 200,
    "monitor.every": 100,
    "monitor.history_every": 20,
    "learner.kernels": BANK,
    "learner.radius": 141.42,
    "learner.fit_intercept": False,
    "checkpoint.every_records": 150,
    "kafka.max_poll_records": 40,
    # the comparator thread at the process's priority: at nice 19 it starves beside busy
    # processes and the windowed regret the tests compare is late (a loaded machine)
    "monitor.comparator_nice": 0,
}


def drifting(cluster: FakeCluster, partitions: int = 2) -> int:
    """kernel-drift: labels from a linear function, then (abruptly) from narrow RBF bumps."""
    from simulators import get

    records = list(get("kernel-drift", seed=0, phases=("linear", "rbf"), phase_length=PHASE,
                       switch="abrupt"))  # fmt: skip
    cluster.create("in", partitions)
    for i, rec in enumerate(records):
        cluster.append("in", wire.encode(rec), i % partitions, None, i)
    return len(records)


def make(tmp: Path, cluster: FakeCluster, seed: int = 0, **over: Any) -> Runner:
    return Runner(
        make_settings(tmp, **{**MONITOR, **over}),
        registry=CollectorRegistry(),
        consumer_client=cluster.consumer(seed),
        producer_client=cluster.producer(),
    )


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Runner, Path, int]:
    """An uninterrupted run over the drifting stream."""
    tmp = tmp_path_factory.mktemp("reference")
    cluster = FakeCluster()
    n = drifting(cluster)
    r = make(tmp, cluster)
    r.run()
    return r, tmp / "ck", n


def test_drift_is_detected_after_the_switch_and_exported_with_the_monitor_help(
    reference: tuple[Runner, Path, int],
) -> None:
    r, _, n = reference
    assert r.counters["examples_learned"] == n
    # the comparator worker first (an event, not a sleep): its windowed regret is part of the
    # snapshot compared with the exported values below, whatever the machine's load
    assert r.monitor.monitor.wait(300)  # type: ignore[union-attr]
    values = r.monitor.snapshot()  # type: ignore[union-attr]
    assert values["drift_detections"] >= 1
    assert PHASE <= values["last_drift_example"] < PHASE + 100  # soon after the switch
    assert values["examples"] == n
    assert np.isfinite(values["regret_bound"]) and values["regret_bound"] > 0
    r._publish(force_model=True)
    # (a counter's family and its deprecated gauge share a family name: keyed by type too)
    families = {(f.name, f.type): f for f in r.metrics.registry.collect()}
    for key, spec in METRICS.items():
        name = spec.name.removesuffix("_total") if spec.type == "counter" else spec.name
        if name == "streammkl_online_loss":  # the daemon's own counter has this name
            name = "streammkl_monitor_online_loss"
        fam = families[name, spec.type]
        assert fam.documentation == spec.help, key
        value = fam.samples[0].value
        assert value == values[key] or (np.isnan(value) and np.isnan(values[key])), key
        if spec.deprecated:  # the counter's former gauge, one release more, the same value
            old = families[spec.deprecated, "gauge"]
            assert old.documentation.startswith("DEPRECATED") and spec.name in old.documentation
            assert old.samples[0].value == value, key
    exposition = generate_latest(r.metrics.registry).decode()
    for key, name in (
        ("examples", "streammkl_monitor_examples"),
        ("nonfinite_terms", "streammkl_nonfinite_objective_terms"),
        ("comparator_fits_skipped", "streammkl_comparator_fits_skipped"),
        ("comparator_errors", "streammkl_comparator_errors"),
    ):
        assert f"# TYPE {name}_total counter" in exposition
        assert f"# TYPE {name} gauge" in exposition
        for sample in (f"{name}_total", name):
            assert f"\n{sample} {float(values[key])!r}\n" in exposition, sample
    drift = families["streammkl_drift_detections", "counter"]
    assert drift.samples[0].value == values["drift_detections"]
    assert np.isfinite(families["streammkl_window_regret", "gauge"].samples[0].value)
    # the daemon's own log-loss counter is still there, under its own name and help
    assert "log-loss" in families["streammkl_online_loss", "counter"].documentation


@pytest.mark.parametrize("memory", [50_000, 130])
def test_crashes_with_a_drift_detector_give_the_uninterrupted_model(
    reference: tuple[Runner, Path, int], tmp_path: Path, memory: int
) -> None:
    """The detector's state is checkpointed (as its inputs since the last detection) and
    replayed: kill -9 anywhere, same detections, same schedule restarts, same digest. (A small
    ``detector_memory`` also exercises the detector's periodic fresh start.)"""
    _, _, n = reference
    over: dict[str, Any] = {"monitor.detector_memory": memory}
    plain_cluster, cluster = FakeCluster(), FakeCluster()  # (each group commits its offsets)
    drifting(plain_cluster)
    drifting(cluster)
    plain = make(tmp_path / "plain", plain_cluster, **over)
    plain.run()
    restored = []
    for i, steps in enumerate([40, 90, 60, 150]):
        r = make(tmp_path / "run", cluster, seed=10 + i, **over)
        r.start()
        restored.append((r.counters["examples_learned"], len(r.monitor._inputs)))  # type: ignore[union-attr]
        for _ in range(steps):
            r.tick()
        # abandoned: no final checkpoint (kill -9)
    final = make(tmp_path / "run", cluster, seed=99, **over)
    final.start()
    restored.append((final.counters["examples_learned"], len(final.monitor._inputs)))  # type: ignore[union-attr]
    final.run()
    # restarts before and after the switch, with detector inputs to replay
    assert any(0 < t < PHASE and k > 20 for t, k in restored), restored
    assert any(PHASE < t < n and k > 20 for t, k in restored), restored
    assert final.counters["examples_learned"] == n
    assert digest_of(final.learner) == digest_of(plain.learner)
    got, want = final.monitor.snapshot(), plain.monitor.snapshot()  # type: ignore[union-attr]
    for key in ("drift_detections", "last_drift_example", "online_objective", "examples"):
        assert got[key] == pytest.approx(want[key], rel=1e-12), key
    # the detector itself is the uninterrupted one (ADWIN's window: its width and sum)
    det, ref_det = (m.monitor.monitor.detector.detector for m in (final, plain))  # type: ignore[union-attr]
    assert (det.width, det.total) == (ref_det.width, ref_det.total) and det.width > 0
    info = inspect_checkpoint(tmp_path / "run" / "ck")
    assert info["monitor"]["drift_detections"] == want["drift_detections"] >= (memory > PHASE)
    # the history holds each example count once, up to the end, with the same drift events
    rows = history.read(tmp_path / "run" / "ck")
    ts = [r["t"] for r in rows if "event" not in r]
    assert ts == sorted(set(ts)) and ts[-1] == n
    events = [r["t"] for r in rows if "event" in r]
    assert events == [r["t"] for r in history.read(tmp_path / "plain" / "ck") if "event" in r]


@pytest.mark.parametrize(
    ("per_record", "batch"), [(True, 40), (False, 7), (False, 113)], ids=["per-record", "7", "113"]
)
def test_the_model_and_monitor_do_not_depend_on_the_batches(
    reference: tuple[Runner, Path, int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    per_record: bool,
    batch: int,
) -> None:
    """Restarts wait for the monitor's stride: a round per record and compiled runs cut from
    batches of any size learn the same model, with the same drift detections and monitor."""
    ref, _, n = reference
    assert ref.driver.batched  # the monitor on: compiled runs
    if per_record:
        monkeypatch.setattr(MKLDriver, "batched", property(lambda self: False))
    cluster = FakeCluster()
    drifting(cluster)
    r = make(tmp_path, cluster, **{"kafka.max_poll_records": batch})
    r.run()
    assert r.driver.batched is not per_record
    assert r.counters["examples_learned"] == n
    assert digest_of(r.learner) == digest_of(ref.learner)
    (meta, arrays), (ref_meta, ref_arrays) = r.monitor.to_state(), ref.monitor.to_state()  # type: ignore[union-attr]
    assert meta == ref_meta and meta["monitor"]["drift_detections"] >= 1
    assert np.array_equal(arrays[INPUTS], ref_arrays[INPUTS])
    got, want = r.monitor.snapshot(), ref.monitor.snapshot()  # type: ignore[union-attr]
    for key in got:  # (the windowed regret's fits run on a thread, when they can)
        if not key.startswith(("window_", "comparator_")):
            assert got[key] == want[key] or (np.isnan(got[key]) and np.isnan(want[key])), key
    events = [row for row in history.read(tmp_path / "ck") if "event" in row]
    assert events == [row for row in history.read(reference[1]) if "event" in row]


def test_a_thinned_history_cuts_the_runs_at_its_spacing(
    reference: tuple[Runner, Path, int], tmp_path: Path
) -> None:
    """Runs are cut at the history's spacing (the interval times the thinning stride): the
    same model and monitor, and the rows where the rows of the finer cut fall."""
    ref, ref_dir, n = reference
    cluster = FakeCluster()
    drifting(cluster)
    r = make(tmp_path, cluster)
    assert r.monitor is not None
    r.monitor.history.stride = 4  # as after two thinnings
    assert r.monitor.history_every == 4 * 20
    r.run()
    assert r.counters["examples_learned"] == n
    assert digest_of(r.learner) == digest_of(ref.learner)
    meta, ref_meta = r.monitor.to_state()[0], ref.monitor.to_state()[0]  # type: ignore[union-attr]
    assert (meta.pop("history_stride"), ref_meta.pop("history_stride")) == (4, 1)
    assert meta == ref_meta

    def rows(directory: Path) -> dict[int, dict[str, Any]]:
        # (the windowed regret: a thread's; the "recent" values span the spacing)
        return {
            row["t"]: {
                k: v
                for k, v in row.items()
                if not k.startswith("window_") and not k.endswith("_recent")
            }
            for row in history.read(directory)
            if "event" not in row
        }

    thinned, fine = rows(tmp_path / "ck"), rows(ref_dir)
    assert thinned and all(t % 80 == 0 for t in thinned)
    assert thinned == {t: row for t, row in fine.items() if t % 80 == 0}


def test_monitor_settings_disable_parts() -> None:
    cluster = FakeCluster()
    drifting(cluster)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        r = make(Path(tmp), cluster, **{"monitor.detector": "none", "monitor.window": 0})
        r.run()
        values = r.monitor.snapshot()  # type: ignore[union-attr]
        assert values["drift_detections"] == 0 and np.isnan(values["window_regret"])
        off = Runner(
            make_settings(Path(tmp) / "off", **{"monitor.enabled": False}),
            registry=CollectorRegistry(),
            consumer_client=cluster.consumer(),
            producer_client=cluster.producer(),
        )
        off.run()
        names = {f.name for f in off.metrics.registry.collect()}
        assert off.monitor is None and "streammkl_window_regret" not in names
        assert not (Path(tmp) / "off" / "ck" / history.FILENAME).exists()
        # a learner that is not a streammkl one: no monitor, the daemon runs as before
        fake = Runner(
            make_settings(Path(tmp) / "fake"),
            FakeLearner(),
            registry=CollectorRegistry(),
            consumer_client=cluster.consumer(),
            producer_client=cluster.producer(),
        )
        assert fake.monitor is None


def test_history_is_bounded_by_thinning_and_trimmed_on_restart(tmp_path: Path) -> None:
    h = History(tmp_path, every=10, max_rows=12)
    for t in range(10, 310, 10):
        if h.due(t):
            h.add({"t": t, "x": float("nan")})
        if t == 150:
            h.add({"t": t, "event": "drift"})
        if t % 50 == 0:
            h.flush()
    h.flush()
    rows = history.read(tmp_path)
    periodic = [r["t"] for r in rows if "event" not in r]
    assert len(periodic) <= 12 and h.stride == 4
    assert periodic == list(range(40, 310, 40))  # the whole run, every 40 examples
    assert {"t": 150, "event": "drift"} in rows and rows[0]["x"] is None  # NaN -> null
    h.trim(200)
    assert max(r["t"] for r in history.read(tmp_path)) == 200


def test_report_draws_non_trivial_figures(
    reference: tuple[Runner, Path, int], tmp_path: Path
) -> None:
    import matplotlib.image

    _, directory, _ = reference
    assert main(["report", str(directory), "--out", str(tmp_path / "fig")]) == 0
    for name in ("kernel_weights.png", "regret.png", "accuracy.png"):
        path = tmp_path / "fig" / name
        assert path.stat().st_size > 20_000, name
        img = matplotlib.image.imread(path)
        assert img.ndim == 3 and img.shape[0] > 300 and img.shape[1] > 600
        assert float(img[..., :3].std()) > 0.05, name  # not a blank canvas
        assert len(np.unique(img[..., :3].reshape(-1, 3), axis=0)) > 50, name
    # the stacked β chart shows the three kernels' colours and the drift line (crimson)
    img = matplotlib.image.imread(tmp_path / "fig" / "kernel_weights.png")[..., :3]
    crimson = np.array([220, 20, 60]) / 255
    assert np.any(np.all(np.abs(img - crimson) < 0.02, axis=-1))


def test_report_without_history_fails_clearly(tmp_path: Path, capsys: Any) -> None:
    assert main(["report", str(tmp_path), "--out", str(tmp_path / "out")]) == 1
    assert "no history" in capsys.readouterr().err


def test_history_rows_carry_beta_and_accuracy(reference: tuple[Runner, Path, int]) -> None:
    _, directory, n = reference
    rows = [r for r in history.read(directory) if "event" not in r]
    assert rows[-1]["t"] == n
    for r in rows:
        assert sum(r["beta"].values()) == pytest.approx(1.0)
        assert 0.0 <= r["accuracy"] <= 1.0
    before = [r for r in rows if r["t"] <= PHASE]
    after = [r for r in rows if PHASE < r["t"] <= PHASE + 100]
    # the switch shows: accuracy per interval drops right after it
    assert min(r["accuracy_recent"] for r in after) < min(r["accuracy_recent"] for r in before[5:])
    assert json.dumps(rows)  # plain JSON (NaN written as null)


class FakeClock:
    """A clock for :class:`Throttled`: ``wait`` advances it and records the waits."""

    def __init__(self) -> None:
        self.now = 0.0
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        self.now += seconds
        return False

    def throttle(self, inner: Any, duty: float) -> Any:
        from streammkl.daemon.learning.stream_monitor import Throttled

        t = Throttled(inner, duty=duty, clock=self)
        t.wait = self.wait
        return t


def test_throttled_comparator_keeps_the_worker_to_its_duty_cycle() -> None:
    clock = FakeClock()
    waits = clock.waits

    class Slow:  # a comparator whose fits take 2 s of the fake clock
        method, exact = "slow", False

        def fit(self, *args: Any) -> str:
            clock.now += 2.0
            return "fitted"

    t = clock.throttle(Slow(), duty=0.25)
    assert t.fit() == "fitted" and waits == []  # the first fit starts at once
    clock.now += 1.0  # the next window came 1 s later
    assert t.fit() == "fitted" and waits == [5.0]  # 2 s fitting, then 6 s idle: 25 % busy
    clock.now += 10.0
    assert t.fit() == "fitted" and waits == [5.0]  # idle long enough already
    assert (t.method, t.exact) == ("slow", False)  # what RegretEstimate reads


def test_a_paced_comparator_sleeps_between_epochs_to_keep_its_duty() -> None:
    clock = FakeClock()
    waits = clock.waits

    class Epochs:  # three epochs of 0.5 s each on the fake clock, paced between them
        method, exact = "epochs", False
        pace: Any = None

        def fit(self, *args: Any) -> str:
            for epoch in range(3):
                if epoch:
                    self.pace()
                clock.now += 0.5
            return "fitted"

    inner = Epochs()
    t = clock.throttle(inner, duty=0.25)
    assert inner.pace is not None  # the throttle installed its pacer
    assert t.fit() == "fitted"
    assert waits == [1.5, 1.5]  # 0.5 s of work, then 1.5 s idle, after each epoch but the last
    assert clock.now == 4.5  # 1.5 s busy in 4.5 s so far: the last epoch's idle is still owed
    t.fit()
    assert waits == [1.5, 1.5, 1.5, 1.5, 1.5]  # the owed 1.5 s first, then as before
    assert clock.now == 4.5 + 1.5 + 4.5  # 3 s busy in 10.5 s, 1.5 s still owed: 25 %


def test_an_epoch_comparator_is_paced_within_its_epochs_and_fits_the_same() -> None:
    """Paced every ``pace_rounds`` rounds (not only between epochs), the fit is the same, bit
    for bit: the same rounds in the same order, in shorter stretches of work."""
    import numpy as np

    from streammkl.core import OnlineMKL
    from streammkl.daemon.learning.stream_monitor import Throttled
    from streammkl.monitor.hindsight import EpochComparator

    model = OnlineMKL()
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 2))
    Y = np.where(X[:, 0] * X[:, 1] > 0, 1.0, -1.0)
    model.learn_many(X, Y)
    config, keys = model.config(), tuple(model.feature_keys)
    plain = EpochComparator(max_epochs=4, patience=4, rel_tol=-1.0)  # exactly 4 epochs
    inner = EpochComparator(max_epochs=4, patience=4, rel_tol=-1.0)
    throttle = Throttled(inner, duty=1.0, pace_rounds=64)  # (duty 1: no pause owed)
    assert inner.pace_rounds == 64
    paces: list[int] = []
    pace = inner.pace
    assert pace is not None

    def counted() -> None:
        paces.append(1)
        pace()

    inner.pace = counted
    for _ in range(2):  # the second fit warm-starts from the first
        assert throttle.fit(config, keys, X, Y) == plain.fit(config, keys, X, Y)
    # per epoch: after each of the first four chunks of 64 and before the objective (5), and
    # between epochs (3 per fit)
    assert len(paces) == 2 * (4 * 5 + 3)
    assert Throttled(EpochComparator(), duty=0.5).inner.pace_rounds == Throttled.PACE_ROUNDS


def test_closing_ends_the_pacing_and_the_fit_finishes() -> None:
    import numpy as np

    from streammkl.core import OnlineMKL
    from streammkl.daemon.learning.stream_monitor import Throttled
    from streammkl.monitor.hindsight import EpochComparator
    from streammkl.monitor.regret import WindowedRegret

    model = OnlineMKL()
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    model.learn_many(X, np.where(X[:, 0] > 0, 1.0, -1.0))
    inner = EpochComparator(max_epochs=8, patience=8, rel_tol=-1.0)  # exactly 8 epochs
    throttle = Throttled(inner, duty=1e-6)  # each epoch would owe hours of idle time
    paces: list[int] = []
    pace = inner.pace
    assert pace is not None

    def closing_pace() -> None:
        paces.append(1)
        throttle.close()  # the monitor closes during the fit: waits return at once
        pace()

    inner.pace = closing_pace
    regret = WindowedRegret(model, window=20, every=10, comparator=throttle, background=False)
    for x in X[:10]:
        regret.observe(x, 1.0, 0.5, 0.0, 0.1, 1.0)
    assert len(paces) == 7  # between the 8 epochs
    assert regret.latest is not None and regret.latest.iterations == 8 and regret.n_errors == 0


@pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice values are Linux's")
def test_the_comparator_thread_is_reniced_and_only_it() -> None:
    from streammkl.daemon.learning.stream_monitor import Throttled

    seen: dict[str, int] = {}

    class Probe:
        method, exact = "probe", False

        def fit(self, *args: Any) -> str:
            seen["worker"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
            return "fitted"

    main = os.getpriority(os.PRIO_PROCESS, 0)
    t = Throttled(Probe(), duty=1.0, nice=19)
    worker = threading.Thread(target=t.fit)
    worker.start()
    worker.join()
    assert seen["worker"] == 19
    assert os.getpriority(os.PRIO_PROCESS, 0) == main  # the process (and this thread) unchanged
    assert load_settings(env={}).monitor.comparator_nice == 19


def test_failed_comparator_fits_are_counted_and_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from streammkl.monitor.hindsight import EpochComparator

    def fail(self: Any, *args: Any) -> Any:
        raise IndexError("index is out of bounds")

    monkeypatch.setattr(EpochComparator, "fit", fail)
    cluster = FakeCluster()
    drifting(cluster)
    r = make(tmp_path, cluster, **{"monitor.detector": "none"})
    with caplog.at_level("WARNING", logger="streammkl.daemon.learning.stream_monitor"):
        r.run()
        values = r.monitor.snapshot()  # type: ignore[union-attr]
    assert values["comparator_errors"] > 0 and np.isnan(values["window_regret"])
    logged = [m for m in caplog.messages if "comparator fit(s) failed" in m]
    assert logged and "IndexError: index is out of bounds" in logged[-1]
    failed = sum(int(m.split()[0]) for m in logged)
    assert failed == values["comparator_errors"]  # each failure logged once
