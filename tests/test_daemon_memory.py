"""``learner.memory_window``: the daemon builds, drives, checkpoints, exports and serves issue 27's
:class:`~streammkl.river.MemoryClassifier`; the settings refuse it where it cannot work.

The end-to-end test runs the daemon against the real broker: killed with SIGKILL (or stopped
with SIGTERM) mid-stream and restarted, its model is bit for bit the library's uninterrupted one.
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from streammkl.daemon.checkpoints.committer import Checkpointer
from streammkl.daemon.checkpoints.export import LEARNERS, export_model
from streammkl.daemon.checkpoints.inspection import inspect_checkpoint
from streammkl.daemon.checkpoints.store import CheckpointStore
from streammkl.daemon.config import ConfigError, LimitSettings, RecordSettings, load_settings
from streammkl.daemon.http.metrics import DaemonMetrics, Snapshot
from streammkl.daemon.http.predict import Predictor
from streammkl.daemon.learning.admission import MKLAdmission, admission_for
from streammkl.daemon.learning.building import LearnerConfigError, build_learner
from streammkl.daemon.learning.drivers import LearnerDriver, driver_for
from streammkl.daemon.learning.learner import introspect
from streammkl.daemon.mixing.member import mixing_learner
from streammkl.river import MemoryClassifier, MKLClassifier
from streammkl.statefile import state_digest
from tests.daemon_fakes import bananas_like

WINDOW = 200


def memory_settings(**over: Any) -> Any:
    return load_settings(env={}, overrides={"learner.memory_window": WINDOW, **over})


def stream(n: int, seed: int = 1) -> tuple[list[dict[str, float]], list[int]]:
    recs = bananas_like(n, seed=seed)
    return [r["x"] for r in recs], [r["y"] for r in recs]


# -- settings and building --------------------------------------------------------------------


def test_memory_window_is_off_by_default_and_read_from_the_environment() -> None:
    assert load_settings(env={}).learner.memory_window is None
    assert isinstance(build_learner(load_settings(env={}).learner), MKLClassifier)
    s = load_settings(env={"STREAMMKL_LEARNER__MEMORY_WINDOW": "300"})
    assert s.learner.memory_window == 300


def test_memory_window_wraps_the_classifier_the_other_settings_build() -> None:
    s = memory_settings(**{"learner.seed": 7, "learner.budget": 64, "learner.standardize": False})
    model = build_learner(s.learner)
    assert isinstance(model, MemoryClassifier) and model.window == WINDOW
    inner = model.learner
    assert isinstance(inner, MKLClassifier)
    assert (inner.seed, inner.budget, inner.standardize) == (7, 64, False)
    plain = build_learner(load_settings(env={}, overrides={
        "learner.seed": 7, "learner.budget": 64, "learner.standardize": False,
    }).learner)  # fmt: skip
    assert state_digest(*inner.to_state()) == state_digest(*plain.to_state())


@pytest.mark.parametrize(
    ("over", "needle"),
    [
        ({"learner.task": "regression"}, "classification only"),
        ({"learner.task": "sequence"}, "classification only"),
        ({"learner.task": "parsing"}, "classification only"),
        ({"learner.factory": "tests.daemon_fakes:make_learner"}, "learner.factory"),
        ({"learner.memory_window": 0}, "memory_window"),
        ({"learner.memory_window": "many"}, "memory_window"),
    ],
)
def test_memory_window_settings_errors_name_the_setting(over: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        memory_settings(**over)
    assert needle in str(info.value) and "memory_window" in str(info.value)


def test_mixing_group_refuses_the_memory_at_start() -> None:
    group = {
        "mixing.enabled": True, "kafka.assignment": "group", "records.classes": ["a", "b"],
    }  # fmt: skip
    load_settings(env={}, overrides=group)  # (valid without the memory)
    with pytest.raises(ConfigError, match=r"learner\.memory_window .*not allowed"):
        memory_settings(**group)
    # and the member's own check, should a MemoryClassifier reach it another way
    with pytest.raises(LearnerConfigError, match=r"^learner\.memory_window: mixing groups"):
        mixing_learner(MemoryClassifier(window=WINDOW))


# -- driving, admission, introspection ------------------------------------------------------


def test_generic_driver_predicts_what_the_library_predicts() -> None:
    """The prequential outcomes are the library's ``learn_predict_one``, record by record."""
    xs, ys = stream(600)
    model = build_learner(memory_settings().learner)
    driver = driver_for(model)
    assert type(driver) is LearnerDriver and not driver.fused and not driver.batched
    assert driver.classifier
    out = driver.learn_predict_many(xs, ys, None)
    ref = build_learner(memory_settings().learner)
    for (pred, proba), x, y in zip(out, xs, ys, strict=True):
        expected = ref.learn_predict_one(x, y)
        assert proba == expected
        assert pred == (max(expected, key=expected.__getitem__) if expected else None)
    assert state_digest(*model.to_state()) == state_digest(*ref.to_state())
    hits = sum(o[0] == y for o, y in zip(out, ys, strict=True) if o is not None)
    assert hits / len(ys) > 0.8  # it learns (the library's own accuracy is tested there)


def test_admission_reads_the_inner_learner() -> None:
    model = build_learner(memory_settings().learner)
    limits = LimitSettings(max_model_features=3)
    admission = admission_for(model, limits)
    assert isinstance(admission, MKLAdmission) and admission.learner is model.learner
    xs, ys = stream(5)
    model.learn_one(xs[0], ys[0])
    assert admission.admit({"a": 1.0, "b": 2.0, "c": 3.0}, 1) is not None  # 5 inputs > 3
    assert admission.admit(xs[1], ys[1]) is None


def test_introspection_and_the_memory_weight_gauge() -> None:
    xs, ys = stream(400)
    model = build_learner(memory_settings().learner)
    for x, y in zip(xs, ys, strict=True):
        model.learn_predict_one(x, y)
    view = introspect(model)
    inner = introspect(model.learner)
    for key in ("kernel_weights", "block_norms", "kernel_bandwidths", "support_vectors"):
        assert view[key] == inner[key], key
    assert view["block_norms"] and view["active_kernels"] == inner["active_kernels"] > 0
    assert view["memory_weight"] == model.memory_weight and 0.0 < model.memory_weight < 1.0
    assert "memory_weight" not in inner

    registry = CollectorRegistry()
    metrics = DaemonMetrics(registry)
    metrics.publish(Snapshot(**view), None)
    assert registry.get_sample_value("streammkl_memory_weight") == model.memory_weight
    metrics.publish(Snapshot(**inner), None)
    assert registry.get_sample_value("streammkl_memory_weight") is None  # only with the memory


def test_kernel_reload_is_refused_and_changes_nothing() -> None:
    from streammkl.daemon.config import ReloadSettings
    from streammkl.daemon.learning.bank import apply_kernels

    model = build_learner(memory_settings().learner)
    xs, ys = stream(50)
    for x, y in zip(xs, ys, strict=True):
        model.learn_one(x, y)
    before = state_digest(*model.to_state())
    same = memory_settings().learner
    assert not apply_kernels(model, same, ReloadSettings())  # the same bank: nothing to do
    other = memory_settings(**{"learner.kernels": ["Linear"]}).learner
    with pytest.raises(LearnerConfigError, match="MemoryClassifier cannot change its kernels"):
        apply_kernels(model, other, ReloadSettings(force=True))
    assert state_digest(*model.to_state()) == before


# -- checkpoints: restore, export, /predict ----------------------------------------------------


def test_checkpoint_restores_exports_and_serves_the_same_model(tmp_path: Path) -> None:
    xs, ys = stream(900)
    settings = memory_settings()
    model = build_learner(settings.learner)
    for x, y in zip(xs[:600], ys[:600], strict=True):
        model.learn_predict_one(x, y)
    assert f"{MemoryClassifier.__module__}:MemoryClassifier" in LEARNERS
    ck = Checkpointer(CheckpointStore(tmp_path / "ck", keep=2), 100, 30.0)
    written = ck.commit("test", model, {"examples_learned": 600}, [])

    restored = Checkpointer(CheckpointStore(tmp_path / "ck", keep=2), 100, 30.0).restore(
        build_learner(settings.learner)
    )
    assert restored is not None
    _, back, _ = restored
    assert isinstance(back, MemoryClassifier)
    assert state_digest(*back.to_state()) == written.meta["summary"]["model_digest"]
    assert inspect_checkpoint(tmp_path / "ck")["memory_weight"] == model.memory_weight

    out = export_model(tmp_path / "ck", tmp_path / "model.smkl")
    exported = MemoryClassifier.load(out.path)

    predictor = Predictor(RecordSettings(), "classification")
    predictor.published(written)
    served = predictor._snapshot
    assert served is not None and isinstance(served.model, MemoryClassifier)

    probe = xs[600:640]
    for x in probe:  # the same predictions from the live model and each copy of it
        expected = model.predict_proba_one(x)
        assert back.predict_proba_one(x) == expected
        assert exported.predict_proba_one(x) == expected
        assert served.model.predict_proba_one(x) == expected
    for x, y in zip(xs[600:], ys[600:], strict=True):  # and the restored one learns on as it
        assert back.learn_predict_one(x, y) == model.learn_predict_one(x, y)
    assert state_digest(*back.to_state()) == state_digest(*model.to_state())


def test_checkpoint_of_a_plain_classifier_does_not_restore_into_the_memory(
    tmp_path: Path,
) -> None:
    from streammkl.daemon.checkpoints.store import CheckpointMismatch

    plain = build_learner(load_settings(env={}).learner)
    xs, ys = stream(50)
    for x, y in zip(xs, ys, strict=True):
        plain.learn_one(x, y)
    Checkpointer(CheckpointStore(tmp_path, keep=2), 100, 30.0).commit("t", plain, {}, [])
    with pytest.raises(CheckpointMismatch, match="MemoryClassifier"):
        Checkpointer(CheckpointStore(tmp_path, keep=2), 100, 30.0).restore(
            build_learner(memory_settings().learner)
        )


# -- end to end: the real broker, SIGKILL, SIGTERM, restart -----------------------------------

N_E2E = 2000


@pytest.mark.kafka
@pytest.mark.xdist_group("kafka")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "stop"])
def test_daemon_interrupted_learns_the_uninterrupted_memory_model(
    kafka_bootstrap: str, tmp_path: Path, sig: signal.Signals
) -> None:
    """The daemon learns a stream with ``learner.memory_window``; killed with SIGKILL after a
    checkpoint (or stopped with SIGTERM) mid-stream, then restarted and run to the end: its
    model is the library's MemoryClassifier that learned the stream uninterrupted, to the last
    bit, and the exported model predicts what that one predicts."""
    from streammkl.daemon.commands.broker import free_port
    from tests import daemon_kafka as dk

    recs = bananas_like(N_E2E, seed=3)
    topic = dk.unique("memory")
    dk.create_topic(kafka_bootstrap, topic, 1)
    dk.produce(kafka_bootstrap, topic, [json.dumps(r).encode() for r in recs])
    settings = {
        "learner.memory_window": WINDOW, "checkpoint.every_records": 250,
        "kafka.max_poll_records": 100,
    }  # fmt: skip
    group, ck, log = dk.unique("mem"), tmp_path / "ck", tmp_path / "daemon.log"

    port = free_port()
    proc = dk.start_daemon(
        dk.daemon_argv(kafka_bootstrap, topic, group, ck, port=port, settings=settings), log
    )
    key = ("streammkl_records_consumed_total", (("topic", topic),))
    try:
        dk.wait_until(lambda: proc.poll() is not None or dk.metrics(port).get(key, 0) >= 600,
                      120, "600 records consumed", 0.02)  # fmt: skip
        assert proc.poll() is None, log.read_text()[-3000:]
        scraped = dk.metrics(port)  # the Hedge's weight is exported; the monitor is off
        assert 0.0 <= scraped[("streammkl_memory_weight", ())] <= 1.0
        assert ("streammkl_kernel_weight", (("kernel", "linear"),)) in scraped
        assert not any("regret" in name for name, _ in scraped)
        if sig == signal.SIGKILL:  # after a checkpoint: the restart resumes from one
            dk.wait_until(lambda: any(ck.glob("ckpt-*")), 30, "a checkpoint")
        proc.send_signal(sig)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == (-signal.SIGKILL if sig == signal.SIGKILL else 0), log.read_text()[-3000:]
    progress = inspect_checkpoint(ck)["examples_learned"]
    assert 0 < progress < N_E2E, progress  # interrupted mid-stream, after a checkpoint
    final = dk.daemon_argv(kafka_bootstrap, topic, group, ck, idle=1.5, settings=settings)
    assert dk.run_daemon(final, log) == 0, log.read_text()[-3000:]
    result = dk.inspect(ck)

    reference = build_learner(load_settings(env={}, overrides=settings).learner)
    for r in recs:
        reference.learn_predict_one(r["x"], r["y"])
    assert result["examples_learned"] == N_E2E
    assert result["model_digest"] == state_digest(*reference.to_state())
    assert result["memory_weight"] == reference.memory_weight
    assert result["kernel_weights"] == reference.kernel_weights
    assert np.isfinite(result["online_loss"]) and result["online_loss"] > 0

    out = tmp_path / "model.smkl"
    subprocess.run(
        [sys.executable, "-m", "streammkl.daemon", "export", str(ck), str(out)],
        check=True, env=dk.subprocess_env(), timeout=120, capture_output=True,
    )  # fmt: skip
    exported = MemoryClassifier.load(out)
    for x in stream(50, seed=9)[0]:
        assert exported.predict_proba_one(x) == reference.predict_proba_one(x)


def test_a_changed_window_is_kept_from_the_checkpoint_and_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = build_learner(memory_settings().learner)
    xs, ys = stream(50)
    for x, y in zip(xs, ys, strict=True):
        model.learn_one(x, y)
    Checkpointer(CheckpointStore(tmp_path, keep=2), 100, 30.0).commit("t", model, {}, [])
    other = build_learner(memory_settings(**{"learner.memory_window": 40}).learner)
    assert isinstance(model, MemoryClassifier) and isinstance(other, MemoryClassifier)
    assert other.window != model.window
    with caplog.at_level(logging.WARNING, logger="streammkl.daemon.checkpoints.committer"):
        restored = Checkpointer(CheckpointStore(tmp_path, keep=2), 100, 30.0).restore(other)
    assert restored is not None
    assert restored[1].window == model.window
    assert "keeps its window of" in caplog.text and "memory_window = 40" in caplog.text
