"""Bounded work per record, in process: wire limits, the admission, the in-flight marker.

Against in-memory Kafka (``tests.daemon_fakes``) with the daemon's default learner (a real
``MKLClassifier``): hostile records become dead letters with their reasons, the model grows only
within its limits, and after a death the marker's verdicts (suspects, condemned records, a
careful replay) keep the model exactly the uninterrupted one.
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from streammkl.core import kernels
from streammkl.daemon.checkpoints.inflight import InflightMarker
from streammkl.daemon.learning.admission import REASONS, model_cells
from streammkl.daemon.loop import publishing
from streammkl.daemon.loop.runner import Runner
from streammkl.river import MKLClassifier
from streammkl.statefile import digest_of
from tests.daemon_fakes import FakeCluster, bananas_like, crash_and_resume
from tests.test_daemon_runner import make_settings


def settings(tmp_path: Path, **over: Any) -> Any:
    """The runner tests' settings, with bigger batches, no periodic checkpoint, no monitor."""
    base = {"kafka.max_poll_records": 40, "checkpoint.every_records": 10**6}
    return make_settings(tmp_path, **{**base, "monitor.enabled": False, **over})


def runner(tmp_path: Path, cluster: FakeCluster, seed: int = 0, **over: Any) -> Runner:
    return Runner(
        settings(tmp_path, **over),
        registry=CollectorRegistry(),
        consumer_client=cluster.consumer(seed),
        producer_client=cluster.producer(),
    )


def stream(cluster: FakeCluster, values: list[bytes], partitions: int = 1) -> None:
    cluster.create("in", partitions)
    for i, v in enumerate(values):
        cluster.append("in", v, i % partitions, f"k{i}".encode(), i)


def good(n: int, seed: int = 0) -> list[bytes]:
    return [json.dumps(r).encode() for r in bananas_like(n, seed)]


def dead_letters(cluster: FakeCluster) -> list[dict[str, str]]:
    out = []
    for part in cluster.topics.get("streammkl.dead-letters", []):
        for rec in part:
            out.append({k: v.decode() for k, v in rec.headers})
    return out


def test_hostile_records_are_dead_letters_with_their_reasons_and_the_rest_is_learned(
    tmp_path: Path,
) -> None:
    hostile = {
        "too_many_features": {"x": {f"f{i}": 1.0 for i in range(1001)}, "y": 1},
        "name_too_long": {"x": {"n" * 300: 1.0}, "y": 1},
        "label_too_long": {"x": {"x1": 1.0}, "y": "L" * 300},
        "id_too_long": {"x": {"x1": 1.0}, "y": 1, "id": "i" * 300},
        "vector_too_long": {"x": [0.5] * 5000, "y": 1},
    }
    values = good(60)
    for k, rec in enumerate(hostile.values()):
        values.insert(10 + 7 * k, json.dumps(rec).encode())
    cluster = FakeCluster()
    stream(cluster, values)
    r = runner(tmp_path, cluster)
    r.run()
    assert r.counters["examples_learned"] == 60
    assert r.counters["rejected_by_reason"] == dict.fromkeys(hostile, 1)
    assert sorted(h["reason"] for h in dead_letters(cluster)) == sorted(hostile)
    assert r.learner.rounds().n_features == 2  # nothing of the hostile records was admitted
    reg = r.metrics.registry
    for reason in (*REASONS, "crashed_worker"):  # every reason is a label from the start
        assert reg.get_sample_value("streammkl_records_rejected_total", {"reason": reason}) in (
            0.0,
            1.0,
        )


def test_the_model_admits_features_classes_and_work_up_to_its_limits(tmp_path: Path) -> None:
    values = good(40)
    wide = [{"x": {f"w{j}_{i}": 1.0 for i in range(30)}, "y": j % 2} for j in range(4)]
    labels = [{"x": {"x1": 0.1, "x2": 0.2}, "y": f"class{j}"} for j in range(3)]
    for k, rec in enumerate(wide + labels):
        values.insert(5 + 4 * k, json.dumps(rec).encode())
    cluster = FakeCluster()
    stream(cluster, values)
    r = runner(
        tmp_path, cluster, **{"limits.max_model_features": 70, "limits.max_classes": 3}
    )  # 2 + 30 + 30 = 62 inputs fit, a third wide record does not; one new class of three
    r.run()
    got = r.counters["rejected_by_reason"]
    assert got == {"too_many_features": 2, "too_many_classes": 2}
    assert r.learner.rounds().n_features == 62
    assert len(r.learner.classes_) == 3
    reasons = [h["reason"] for h in dead_letters(cluster)]
    assert reasons.count("too_many_features") == 2 and reasons.count("too_many_classes") == 2
    messages = [h["error"] for h in dead_letters(cluster)]
    assert any("92 inputs, the limit is 70" in m for m in messages)
    assert any("4 classes, the limit is 3" in m for m in messages)


def test_the_work_budget_counts_the_cells_of_the_grown_model(tmp_path: Path) -> None:
    bank = MKLClassifier().rounds().kernel_names
    assert "poly2" in bank  # the default bank: linear, 3 x RFF(128), exact quadratic (capped)
    default = [
        kernels.Linear(),
        *(kernels.RBF(g, n_components=128) for g in (0.1, 1.0, 10.0)),
        kernels.Polynomial(degree=2, explicit=True),
    ]
    # 2 classes, 100 inputs: weights 2 x (100 + 384 + 1 + 100 + 5050), frequencies 100 x 384
    assert model_cells(default, 100, 2, 256) == 2 * (100 + 384 + 5151) + 100 * 384
    # the quadratic map is capped at 128 inputs: 10,000 inputs cost 2 x 8385 there, not 50 M
    assert model_cells(default, 10_000, 2, 256) == 2 * (10_000 + 384 + 8385) + 10_000 * 384
    cluster = FakeCluster()
    values = good(30)
    values.insert(12, json.dumps({"x": {f"w{i}": 1.0 for i in range(200)}, "y": 1}).encode())
    stream(cluster, values)
    r = runner(tmp_path, cluster, **{"limits.max_record_work": 60_000})
    r.run()
    assert r.counters["rejected_by_reason"] == {"over_work_budget": 1}
    (h,) = dead_letters(cluster)
    assert "the budget is 60000 (limits.max_record_work)" in h["error"]


def test_predictions_carry_the_top_k_probabilities(tmp_path: Path) -> None:
    cluster = FakeCluster()
    values = [
        json.dumps({"x": {"a": (i % 7) / 7.0}, "y": f"c{i % 20}"}).encode() for i in range(100)
    ]
    stream(cluster, values)
    r = runner(tmp_path, cluster, **{"limits.prediction_top_k": 3})
    r.run()
    preds = [json.loads(v) for v in cluster.values("streammkl.predictions")]
    assert len(preds) == 100
    assert max(len(p["proba"]) for p in preds) == 3
    last = preds[-1]
    assert last["prediction"] in last["proba"]  # the most probable class is kept


# -- the in-flight marker ------------------------------------------------------------------------


def test_marker_verdicts_strikes_span_and_coverage(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        m = InflightMarker(tmp_path / "ck", strikes=2)
        assert m.recover().clean
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(m.path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(m.path.parent).st_mode) == 0o700
    m.entered({("t", 0): 41, ("t", 1): 9})
    m.begin("t", 0, 37)  # dies here (no end, no close)
    again = InflightMarker(tmp_path / "ck", strikes=2)
    state = again.recover()
    assert not state.clean and state.suspects == {("t", 0, 37): 1} and not state.condemned
    assert again.alone("t", 0, 37) and not again.alone("t", 0, 38)
    again.begin("t", 0, 37)  # the suspect, marked with its strike: dies again
    third = InflightMarker(tmp_path / "ck", strikes=2)
    state = third.recover()
    assert state.condemned == {("t", 0, 37): 2} and not state.suspects
    assert third.condemned("t", 0, 37) == 2
    third.covered({("t", 0): 30})  # a checkpoint before it: still to be dead-lettered
    assert third.condemned("t", 0, 37) == 2
    third.covered({("t", 0): 38})  # a checkpoint past it: settled
    assert not third.watching
    third.entered({("t", 1): 12})
    third.close(clean=False)  # an exception ended the loop outside a marked step
    fourth = InflightMarker(tmp_path / "ck", strikes=2)
    state = fourth.recover()
    assert state.careful == {("t", 1): 12} and not state.condemned
    assert fourth.alone("t", 1, 12) and not fourth.alone("t", 1, 13)
    fourth.close(clean=True)
    assert InflightMarker(tmp_path / "ck").recover().clean


def test_a_torn_record_slot_is_ignored(tmp_path: Path) -> None:
    m = InflightMarker(tmp_path, strikes=1)
    m.recover()
    m.begin("t", 0, 5)
    with open(m.path, "r+b") as fh:  # a write cut by the death: the slot's CRC fails
        fh.seek(20)
        fh.write(b"\xff\xff")
    state = InflightMarker(tmp_path, strikes=1).recover()
    assert not state.clean and not state.condemned  # unknown record: a careful replay instead


KEY = b"0123456789abcdef0123456789abcdef"


def test_a_signed_marker_believes_only_its_own_signatures(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    m = InflightMarker(tmp_path, strikes=1, key=KEY)
    m.recover()
    m.entered({("t", 0): 9})
    m.begin("t", 0, 7)  # dies here: a genuine slot and journal
    genuine = (tmp_path / "inflight").read_bytes()
    state = InflightMarker(tmp_path, strikes=1, key=KEY).recover()
    assert state.condemned == {("t", 0, 7): 1}  # as without a key
    # without the key the CRC alone is checked: a signed marker still reads
    (tmp_path / "inflight").write_bytes(genuine)
    assert InflightMarker(tmp_path, strikes=1).recover().condemned == {("t", 0, 7): 1}

    # another key's signatures (a forger without this key): both parts ignored, with a warning
    (tmp_path / "inflight").write_bytes(genuine)
    other = InflightMarker(tmp_path, strikes=1, key=b"another key, not ours, 32 bytes!")
    with caplog.at_level("WARNING", logger="streammkl.daemon.checkpoints.inflight"):
        state = other.recover()
    assert not state.condemned and not state.suspects and not state.careful
    assert other.rejected == [("slot", "forged"), ("journal", "forged")]
    assert sum("not signed" in r.getMessage() for r in caplog.records) == 2

    # a CRC-only marker (written without the key, or by hand): unsigned, ignored
    plain = InflightMarker(tmp_path / "plain", strikes=1)
    plain.recover()
    plain.entered({("t", 0): 3})
    plain.begin("t", 0, 2)
    keyed = InflightMarker(tmp_path / "plain", strikes=1, key=KEY)
    state = keyed.recover()
    assert not state.condemned and not state.careful
    assert keyed.rejected == [("slot", "unsigned"), ("journal", "unsigned")]
    keyed.close(clean=True)  # from now on signed: believed
    assert InflightMarker(tmp_path / "plain", strikes=1, key=KEY).recover().clean


def test_the_daemon_counts_an_ignored_marker(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_bytes(KEY)
    key.chmod(0o600)
    cluster = FakeCluster()
    stream(cluster, good(20))
    ck = tmp_path / "ck"
    forged = InflightMarker(ck)  # CRC only: what someone without the key can write
    forged.recover()
    forged.state.condemned = {("in", 0, o): 2 for o in range(0, 20, 2)}
    forged.close(clean=False)
    r = runner(tmp_path, cluster, **{"checkpoint.hmac_key_file": str(key)})
    r.run()
    assert r.counters["examples_learned"] == 20 and not dead_letters(cluster)
    value = r.metrics.registry.get_sample_value
    labels = {"part": "journal", "reason": "unsigned"}
    assert value("streammkl_inflight_rejected_total", labels) == 1


@pytest.mark.parametrize("partitions", [1, 3])
def test_a_careful_replay_learns_the_uninterrupted_model(tmp_path: Path, partitions: int) -> None:
    """After a death outside a marked step, the records the dead process had in hand are
    learned one by one, each marked; the model is the one of a run that never died."""
    values = good(300, seed=3)
    ref_cluster = FakeCluster()
    stream(ref_cluster, values, partitions)
    ref = runner(tmp_path / "ref", ref_cluster)
    ref.run()

    cluster = FakeCluster()
    stream(cluster, values, partitions)
    ck = tmp_path / "run" / "ck"
    dead = InflightMarker(ck)
    dead.recover()
    dead.entered({("in", p): 150 // partitions for p in range(partitions)})  # then it died
    r = runner(tmp_path / "run", cluster, seed=7)
    marked: list[tuple[str, int, int]] = []
    begin = r.marker.begin

    def spy(topic: str, partition: int, offset: int) -> None:
        marked.append((topic, partition, offset))
        begin(topic, partition, offset)

    r.marker.begin = spy  # type: ignore[method-assign]
    r.run()
    assert digest_of(r.learner) == digest_of(ref.learner)
    careful = {("in", p, o) for p in range(partitions) for o in range(150 // partitions + 1)}
    assert careful <= set(marked)  # every record of the span alone and marked
    assert len(marked) < 300  # and then compiled runs again


def test_readyz_is_not_ready_while_one_piece_of_work_runs_too_long(tmp_path: Path) -> None:
    cluster = FakeCluster()
    stream(cluster, good(10))
    r = runner(tmp_path, cluster, **{"metrics.slow_record_seconds": 5.0})
    assert r.publisher.health()["started"] is False  # not started: alive, not ready
    r.publisher.starting = None  # (as Runner.start leaves it)
    r.publisher.status = {"ready": True, "last_tick": time.monotonic()}
    assert r.publisher.health()["ready"] and r.publisher.health()["busy_seconds"] == 0.0
    r.publisher.work_started = time.monotonic() - 2.0
    assert r.publisher.health()["ready"]
    r.publisher.work_started = time.monotonic() - 6.0
    state = r.publisher.health()
    assert not state["ready"] and state["slow_work"] and state["busy_seconds"] >= 6.0


def test_the_status_is_published_on_a_clock_while_batches_flow_back_to_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A busy tick's publication within STATUS_SECONDS of another busy one is skipped; an idle
    one, and the first busy one after it, always publish (a scrape sees counts <= 0.1 s old)."""
    cluster = FakeCluster()
    stream(cluster, good(10))
    r = runner(tmp_path, cluster)
    clock = [100.0]
    monkeypatch.setattr(publishing, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    pub, c = r.publisher, r.counters

    def published(learned: int, after: float, busy: bool) -> int:
        c["examples_learned"], clock[0] = learned, clock[0] + after
        pub.publish(r.learner, None, False, busy=busy)
        assert pub.status["last_tick"] <= clock[0]
        return int(pub.status["examples_learned"])

    assert published(1, 0.0, busy=True) == 1  # the first: published
    assert published(2, 0.05, busy=True) == 1  # busy again 50 ms later: skipped
    assert published(3, 0.06, busy=True) == 3  # 110 ms after the last: published
    assert published(4, 0.01, busy=False) == 4  # idle: always
    assert published(5, 0.01, busy=True) == 5  # the first busy one after an idle one: always
    assert published(6, 0.01, busy=True) == 5
    c["examples_learned"] = 7
    pub.publish(r.learner, None, False, force_model=True, busy=True)  # forced: always
    assert pub.status["examples_learned"] == 7
    assert publishing.STATUS_SECONDS == 0.1


@pytest.mark.parametrize(
    ("monitor", "budget", "windowed"),
    [(False, 1_000_000, None), (True, 1_000_000, False), (True, 16_000_000, True)],
)
def test_the_work_budget_counts_the_model_once_and_the_monitor_bounds_its_window(
    tmp_path: Path, monitor: bool, budget: int, windowed: bool | None
) -> None:
    """The admission counts the model alone: a record the model can take is admitted with the
    regret monitor on too. The monitor keeps its windowed regret within the same budget: with
    the model, the window (3 x monitor.window cells per input) and the comparator's three
    models must fit, else it gives the windowed regret up, its counters carried on."""
    cluster = FakeCluster()
    values = good(30)
    values.insert(12, json.dumps({"x": {f"w{i}": 1.0 for i in range(300)}, "y": 1}).encode())
    stream(cluster, values)
    over = {"limits.max_record_work": budget, "monitor.enabled": monitor, "monitor.window": 2000}
    r = runner(tmp_path, cluster, **over)
    r.run()
    core = r.learner.rounds().model
    assert core is not None
    support = core.n_support + 1
    assert core.layout is not None and core.layout.capacity >= 302  # room for more inputs
    # the arrays' capacity, w and 3 averaged iterates
    model = model_cells(core.kernels, core.layout.capacity, 2, support, iterates=4)
    assert model < 1_000_000
    assert r.counters["rejected_by_reason"] == {}
    assert r.learner.rounds().n_features == 302
    if not monitor:
        assert r.monitor is None
        return
    assert r.monitor is not None
    assert r.monitor.window_cells(core) == 4 * model + 3 * 2000 * 302
    assert r.monitor.windowed is windowed
    assert r.monitor.built.n == r.counters["examples_learned"] == 31


def test_a_model_too_wide_for_the_windowed_regret_keeps_its_monitor_and_its_exactly_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A record that takes the model beyond what the windowed regret may hold is learned; the
    monitor drops the windowed regret at that round and goes on (examples counted, detector
    kept), and a crash and restart around it end on the uninterrupted model's digest."""
    values = good(60)
    values.insert(20, json.dumps({"x": {f"w{i}": 1.0 for i in range(300)}, "y": 1}).encode())
    over = {"limits.max_record_work": 1_000_000, "monitor.enabled": True,
            "monitor.window": 2000, "kafka.max_poll_records": 8,
            "checkpoint.every_records": 16}  # fmt: skip

    def make(name: str, cluster: FakeCluster, seed: int) -> Runner:
        return runner(tmp_path / name, cluster, seed, **over)

    with caplog.at_level("WARNING"):
        reference, final = crash_and_resume(make, values, steps=(4, 7))
    for r in (reference, final):
        assert r.counters["rejected_by_reason"] == {}
        assert r.learner.rounds().n_features == 302
        assert r.monitor is not None and not r.monitor.windowed
        assert r.monitor.built.n == 61
        assert r.monitor.snapshot()["window_size"] == 0.0
    assert digest_of(final.learner) == digest_of(reference.learner)
    assert any("windowed regret off" in rec.getMessage() for rec in caplog.records)


def test_health_thresholds_come_from_the_settings_and_answer_over_http(tmp_path: Path) -> None:
    import urllib.error
    import urllib.request

    cluster = FakeCluster()
    stream(cluster, good(5))
    r = runner(
        tmp_path, cluster,
        **{"metrics.enabled": True, "metrics.port": 0, "metrics.stall_seconds": 3.0,
           "metrics.slow_record_seconds": 2.0},
    )  # fmt: skip
    r.start()
    try:
        assert r.http is not None and r.publisher.settings.stall_seconds == 3.0

        def code(path: str) -> int:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{r.http.port}{path}", timeout=30):
                    return 200
            except urllib.error.HTTPError as exc:
                return exc.code

        assert code("/startupz") == 200  # started: restored, compiled, connected
        r.publisher.status = {"ready": True, "last_tick": time.monotonic()}
        assert code("/healthz") == 200 and code("/readyz") == 200
        r.publisher.work_started = time.monotonic() - 2.5  # one piece of work running too long
        assert code("/healthz") == 200 and code("/readyz") == 503
        r.publisher.work_started = None
        r.publisher.status = {
            "ready": True,
            "last_tick": time.monotonic() - 3.5,
        }  # the loop stalled
        assert code("/healthz") == 503 and code("/readyz") == 503
    finally:
        r.run()  # drains the stream and shuts down (the HTTP server too)


def test_fetched_records_are_bounded_in_bytes_per_partition(tmp_path: Path) -> None:
    """Big records (but under records.max_bytes) pause their partition once its buffer holds
    kafka.max_buffered_bytes_per_partition, whatever the record count; it resumes below half."""
    from streammkl.daemon.kafka.source import Source

    cluster = FakeCluster()
    stream(cluster, [b"x" * 20_000] * 200)
    s = settings(tmp_path, **{"kafka.max_buffered_bytes_per_partition": 100_000})
    offsets: dict[tuple[str, int], int] = {}
    source = Source(s.kafka, offsets, cluster.consumer(1), group=True).start()
    most = 0
    paused_seen = False
    for _ in range(300):
        source.fetch(0)
        (tp,) = source.assignment or [None]
        if tp is None:
            continue
        held = sum(len(r.value) for r in source.buffers[tp])
        most = max(most, held)
        paused_seen |= tp in source._paused
        if held >= 100_000:
            taken = source.take(4)  # the loop takes some: below half, it resumes
            assert len(taken) == 4
    assert paused_seen
    assert most < 100_000 + 8 * 20_000  # one fetch beyond the bound at most (<= 7 records)
