"""``learner.memory_window``: the daemon builds, drives, checkpoints, exports and serves issue 27's
:class:`~streammkl.river.MemoryClassifier` (classification) and
:class:`~streammkl.river.MemoryRegressor` (regression); the settings refuse it where it cannot
work. Most tests run for both tasks (``TASKS``).

The end-to-end test runs the daemon against the real broker: killed with SIGKILL (or stopped
with SIGTERM) mid-stream and restarted, its model is bit for bit the library's uninterrupted one.
"""

from __future__ import annotations

import json
import logging
import math
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
from streammkl.daemon.checkpoints.inspection import TASKS as CHECKPOINT_TASKS
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
from streammkl.river import MemoryClassifier, MemoryRegressor, MKLClassifier, MKLRegressor
from streammkl.statefile import state_digest
from tests.daemon_fakes import bananas_like

WINDOW = 200
#: The two tasks with a memory preset, and its class for each.
TASKS = ("classification", "regression")
WRAPPER: dict[str, type[Any]] = {
    "classification": MemoryClassifier, "regression": MemoryRegressor,
}  # fmt: skip


def memory_settings(**over: Any) -> Any:
    return load_settings(env={}, overrides={"learner.memory_window": WINDOW, **over})


def task_settings(task: str, **over: Any) -> Any:
    return memory_settings(**{"learner.task": task, **over})


def friedman_like(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` deterministic records of Friedman's first function on 5 inputs (its local
    ``10 sin(pi x0 x1)`` is what the residual memory corrects), noise sd 1."""
    rng = np.random.default_rng(seed)
    X, noise = rng.uniform(size=(n, 5)), rng.normal(size=n)
    out = []
    for i, (row, e) in enumerate(zip(X, noise, strict=True)):
        y = (10 * math.sin(math.pi * row[0] * row[1]) + 20 * (row[2] - 0.5) ** 2
             + 10 * row[3] + 5 * row[4] + e)  # fmt: skip
        x = {f"x{j}": round(float(v), 6) for j, v in enumerate(row)}
        out.append({"x": x, "y": round(y, 6), "id": f"r{i}"})
    return out


def records(task: str, n: int, seed: int = 1) -> list[dict[str, Any]]:
    return bananas_like(n, seed=seed) if task == "classification" else friedman_like(n, seed)


def stream(n: int, seed: int = 1, task: str = "classification") -> tuple[list[Any], list[Any]]:
    recs = records(task, n, seed)
    return [r["x"] for r in recs], [r["y"] for r in recs]


def prediction(model: Any, x: Any) -> Any:
    """What the model predicts for ``x``: a classifier's probabilities, a regressor's value."""
    if isinstance(model, MemoryClassifier):
        return model.predict_proba_one(x)
    return model.predict_one(x)


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


def test_memory_window_wraps_the_regressor_as_a_library_user_would() -> None:
    """A regression task with the setting runs ``MemoryRegressor(MKLRegressor(standardize=True,
    ...), window=W)``: the regressor the other settings build (standardising its own inputs, as
    without the memory), the memory reading the raw ones; the library's model built so is the
    same model, fresh and after a stream."""
    over = {"learner.seed": 7, "learner.budget": 64}
    model = build_learner(task_settings("regression", **over).learner)
    assert isinstance(model, MemoryRegressor) and model.window == WINDOW
    inner = model.learner
    assert type(inner) is MKLRegressor
    assert (inner.seed, inner.budget, inner.standardize) == (7, 64, True)
    plain = build_learner(load_settings(env={}, overrides={
        "learner.task": "regression", **over,
    }).learner)  # fmt: skip
    assert state_digest(*inner.to_state()) == state_digest(*plain.to_state())
    library = MemoryRegressor(MKLRegressor(seed=7, budget=64, standardize=True), window=WINDOW)
    assert state_digest(*model.to_state()) == state_digest(*library.to_state())
    xs, ys = stream(300, task="regression")
    for x, y in zip(xs, ys, strict=True):
        assert model.learn_predict_one(x, y) == library.learn_predict_one(x, y)
    assert state_digest(*model.to_state()) == state_digest(*library.to_state())
    unscaled = build_learner(task_settings("regression", **{"learner.standardize": False}).learner)
    assert isinstance(unscaled, MemoryRegressor) and not unscaled.learner.standardize


def test_a_regression_window_below_two_is_refused_naming_the_setting() -> None:
    spec = task_settings("regression", **{"learner.memory_window": 1}).learner  # (a valid int)
    with pytest.raises(LearnerConfigError, match=r"^learner\.memory_window: window must be"):
        build_learner(spec)
    assert build_learner(memory_settings(**{"learner.memory_window": 1}).learner).window == 1


@pytest.mark.parametrize(
    ("over", "needle"),
    [
        ({"learner.task": "sequence"}, "classification and regression only"),
        ({"learner.task": "parsing"}, "classification and regression only"),
        ({"learner.factory": "tests.daemon_fakes:make_learner"}, "learner.factory"),
        (
            {"learner.factory": "tests.daemon_fakes:make_learner", "learner.task": "regression"},
            "learner.factory",
        ),
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
    # and the member's own check, should a memory preset reach it another way
    for model in (MemoryClassifier(window=WINDOW), MemoryRegressor(window=WINDOW)):
        with pytest.raises(LearnerConfigError, match=r"^learner\.memory_window: mixing groups"):
            mixing_learner(model)
    # a regression group is refused for its task first (a group learns classifiers only)
    with pytest.raises(ConfigError, match=r"classification models only"):
        memory_settings(**group, **{"learner.task": "regression"})


# -- driving, admission, introspection ------------------------------------------------------


@pytest.mark.parametrize("task", TASKS)
def test_generic_driver_predicts_what_the_library_predicts(task: str) -> None:
    """The prequential outcomes are the library's ``learn_predict_one``, record by record."""
    xs, ys = stream(600, task=task)
    model = build_learner(task_settings(task).learner)
    driver = driver_for(model)
    assert type(driver) is LearnerDriver and not driver.fused and not driver.batched
    assert driver.classifier == (task == "classification")
    out = driver.learn_predict_many(xs, ys, None)
    ref = build_learner(task_settings(task).learner)
    for (pred, proba), x, y in zip(out, xs, ys, strict=True):
        expected = ref.learn_predict_one(x, y)
        if task == "classification":
            assert proba == expected
            assert pred == (max(expected, key=expected.__getitem__) if expected else None)
        else:
            assert (pred, proba) == (expected, None)
    assert state_digest(*model.to_state()) == state_digest(*ref.to_state())
    # it learns (the library's own accuracy is tested there)
    if task == "classification":
        hits = sum(o[0] == y for o, y in zip(out, ys, strict=True) if o is not None)
        assert hits / len(ys) > 0.8
    else:  # the last third's MAE well under the target's sd (~4.9 on this stream)
        errors = [abs(o[0] - y) for o, y in zip(out[400:], ys[400:], strict=True) if o]
        assert np.mean(errors) < 2.0 < np.std(ys)


@pytest.mark.parametrize("task", TASKS)
def test_admission_reads_the_inner_learner(task: str) -> None:
    model = build_learner(task_settings(task).learner)
    limits = LimitSettings(max_model_features=len(stream(1, task=task)[0][0]) + 1)
    admission = admission_for(model, limits)
    assert isinstance(admission, MKLAdmission) and admission.learner is model.learner
    xs, ys = stream(5, task=task)
    model.learn_one(xs[0], ys[0])
    wider = {**xs[1], "a": 1.0, "b": 2.0}  # two new inputs: one more than the limit allows
    assert admission.admit(wider, ys[1]) is not None
    assert admission.admit(xs[1], ys[1]) is None


@pytest.mark.parametrize("task", TASKS)
def test_introspection_and_the_memory_weight_gauge(task: str) -> None:
    xs, ys = stream(400, task=task)
    model = build_learner(task_settings(task).learner)
    for x, y in zip(xs, ys, strict=True):
        model.learn_predict_one(x, y)
    view = introspect(model)
    inner = introspect(model.learner)
    for key in ("kernel_weights", "block_norms", "kernel_bandwidths", "support_vectors"):
        assert view[key] == inner[key], key
    assert view["block_norms"] and view["active_kernels"] == inner["active_kernels"] > 0
    assert view["kernel_weights"] == model.learner.kernel_weights
    assert math.isclose(sum(view["kernel_weights"].values()), 1.0)
    assert view["memory_weight"] == model.memory_weight and 0.0 < model.memory_weight < 1.0
    assert "memory_weight" not in inner

    registry = CollectorRegistry()
    metrics = DaemonMetrics(registry)
    metrics.publish(Snapshot(**view), None)
    assert registry.get_sample_value("streammkl_memory_weight") == model.memory_weight
    metrics.publish(Snapshot(**inner), None)
    assert registry.get_sample_value("streammkl_memory_weight") is None  # only with the memory


@pytest.mark.parametrize("task", TASKS)
def test_kernel_reload_is_refused_and_changes_nothing(task: str) -> None:
    from streammkl.daemon.config import ReloadSettings
    from streammkl.daemon.learning.bank import apply_kernels

    model = build_learner(task_settings(task).learner)
    xs, ys = stream(50, task=task)
    for x, y in zip(xs, ys, strict=True):
        model.learn_one(x, y)
    before = state_digest(*model.to_state())
    same = task_settings(task).learner
    assert not apply_kernels(model, same, ReloadSettings())  # the same bank: nothing to do
    other = task_settings(task, **{"learner.kernels": ["Linear"]}).learner
    name = WRAPPER[task].__name__
    with pytest.raises(LearnerConfigError, match=f"{name} cannot change its kernels"):
        apply_kernels(model, other, ReloadSettings(force=True))
    assert state_digest(*model.to_state()) == before


# -- checkpoints: restore, export, /predict ----------------------------------------------------


@pytest.mark.parametrize("task", TASKS)
def test_checkpoint_restores_exports_and_serves_the_same_model(task: str, tmp_path: Path) -> None:
    xs, ys = stream(900, task=task)
    settings = task_settings(task)
    wrapper = WRAPPER[task]
    model = build_learner(settings.learner)
    for x, y in zip(xs[:600], ys[:600], strict=True):
        model.learn_predict_one(x, y)
    path = f"{wrapper.__module__}:{wrapper.__name__}"
    assert LEARNERS[path] is wrapper and CHECKPOINT_TASKS[path] == task
    assert set(CHECKPOINT_TASKS) <= set(LEARNERS)  # (inspect's table names real classes)
    ck = Checkpointer(CheckpointStore(tmp_path / "ck", keep=2), 100, 30.0)
    written = ck.commit("test", model, {"examples_learned": 600}, [])

    restored = Checkpointer(CheckpointStore(tmp_path / "ck", keep=2), 100, 30.0).restore(
        build_learner(settings.learner)
    )
    assert restored is not None
    _, back, _ = restored
    assert isinstance(back, wrapper)
    assert state_digest(*back.to_state()) == written.meta["summary"]["model_digest"]
    inspected = inspect_checkpoint(tmp_path / "ck")
    assert inspected["memory_weight"] == model.memory_weight
    assert inspected["task"] == task

    out = export_model(tmp_path / "ck", tmp_path / "model.smkl")
    exported = wrapper.load(out.path)

    predictor = Predictor(RecordSettings(), task)
    predictor.published(written)
    served = predictor._snapshot
    assert served is not None and isinstance(served.model, wrapper)

    probe = xs[600:640]
    for x in probe:  # the same predictions from the live model and each copy of it
        expected = prediction(model, x)
        assert prediction(back, x) == expected
        assert prediction(exported, x) == expected
        assert prediction(served.model, x) == expected
    for x, y in zip(xs[600:], ys[600:], strict=True):  # and the restored one learns on as it
        assert back.learn_predict_one(x, y) == model.learn_predict_one(x, y)
    assert state_digest(*back.to_state()) == state_digest(*model.to_state())


@pytest.mark.parametrize("task", TASKS)
def test_checkpoint_of_a_plain_learner_does_not_restore_into_the_memory(
    task: str, tmp_path: Path
) -> None:
    from streammkl.daemon.checkpoints.store import CheckpointMismatch

    plain = build_learner(load_settings(env={}, overrides={"learner.task": task}).learner)
    xs, ys = stream(50, task=task)
    for x, y in zip(xs, ys, strict=True):
        plain.learn_one(x, y)
    Checkpointer(CheckpointStore(tmp_path, keep=2), 100, 30.0).commit("t", plain, {}, [])
    with pytest.raises(CheckpointMismatch, match=WRAPPER[task].__name__):
        Checkpointer(CheckpointStore(tmp_path, keep=2), 100, 30.0).restore(
            build_learner(task_settings(task).learner)
        )


# -- end to end: the real broker, SIGKILL, SIGTERM, restart -----------------------------------

N_E2E = 2000


def library_model(task: str) -> Any:
    """The library's model the daemon's default settings with ``memory_window`` build, as a user
    builds it (the daemon's learners standardise their inputs: ``standardize=True``)."""
    if task == "classification":
        return MemoryClassifier(MKLClassifier(seed=0, standardize=True), window=WINDOW)
    return MemoryRegressor(MKLRegressor(seed=0, standardize=True), window=WINDOW)


@pytest.mark.kafka
@pytest.mark.xdist_group("kafka")
@pytest.mark.parametrize(
    ("task", "sig"),
    [
        ("classification", signal.SIGKILL),
        ("classification", signal.SIGTERM),
        ("regression", signal.SIGKILL),
    ],
    ids=["kill-9", "stop", "regression-kill-9"],
)
def test_daemon_interrupted_learns_the_uninterrupted_memory_model(
    kafka_bootstrap: str, tmp_path: Path, task: str, sig: signal.Signals
) -> None:
    """The daemon learns a stream with ``learner.memory_window``; killed with SIGKILL after a
    checkpoint (or stopped with SIGTERM) mid-stream, then restarted and run to the end: its
    model is the library's memory preset that learned the stream uninterrupted, to the last
    bit, and the exported model predicts what that one predicts."""
    from streammkl.daemon.commands.broker import free_port
    from tests import daemon_kafka as dk

    recs = records(task, N_E2E, seed=3)
    topic = dk.unique("memory")
    dk.create_topic(kafka_bootstrap, topic, 1)
    dk.produce(kafka_bootstrap, topic, [json.dumps(r).encode() for r in recs])
    settings = {
        "learner.task": task, "learner.memory_window": WINDOW,
        "checkpoint.every_records": 250, "kafka.max_poll_records": 100,
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

    reference = library_model(task)
    for r in recs:
        reference.learn_predict_one(r["x"], r["y"])
    assert result["task"] == task
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
    exported = WRAPPER[task].load(out)
    for x in stream(50, seed=9, task=task)[0]:
        assert prediction(exported, x) == prediction(reference, x)


@pytest.mark.parametrize("task", TASKS)
def test_a_changed_window_is_kept_from_the_checkpoint_and_said(
    task: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = build_learner(task_settings(task).learner)
    xs, ys = stream(50, task=task)
    for x, y in zip(xs, ys, strict=True):
        model.learn_one(x, y)
    Checkpointer(CheckpointStore(tmp_path, keep=2), 100, 30.0).commit("t", model, {}, [])
    other = build_learner(task_settings(task, **{"learner.memory_window": 40}).learner)
    wrapper = WRAPPER[task]
    assert isinstance(model, wrapper) and isinstance(other, wrapper)
    assert other.window != model.window
    with caplog.at_level(logging.WARNING, logger="streammkl.daemon.checkpoints.committer"):
        restored = Checkpointer(CheckpointStore(tmp_path, keep=2), 100, 30.0).restore(other)
    assert restored is not None
    assert restored[1].window == model.window
    assert f"checkpointed {wrapper.__name__} keeps its window of {WINDOW}" in caplog.text
    assert "memory_window = 40" in caplog.text
