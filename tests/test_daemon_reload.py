"""SIGHUP: a changed kernel list is applied at a batch boundary, keeping the other blocks, and
checkpointed; against the real broker, the new kernel shows in the metrics and in ``inspect``."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from streammkl.daemon.checkpoints.inspection import inspect_checkpoint
from streammkl.daemon.commands.broker import free_port
from streammkl.daemon.loop.runner import Runner
from tests.daemon_fakes import FakeCluster, bananas_like
from tests.daemon_kafka import (
    create_topic,
    daemon_argv,
    inspect,
    metrics,
    produce,
    start_daemon,
    unique,
    wait_until,
)
from tests.test_daemon_runner import make_settings

LINEAR, RBF, POLY = {"type": "Linear"}, {"type": "RBF", "gamma": 2.0}, {"type": "Polynomial"}


def kernels_of(r: Runner) -> dict[str, float]:
    return dict(r.learner.rounds().block_norms)


def reloading(tmp_path: Path, n: int, wanted: dict[str, Any]) -> tuple[Runner, FakeCluster]:
    """A runner over ``n`` records whose settings re-read ``wanted`` (edit it, then reload)."""
    cluster = FakeCluster()
    cluster.create("in", 1)
    for i, rec in enumerate(bananas_like(n, seed=2)):
        cluster.append("in", json.dumps(rec).encode(), 0, None, i)
    r = Runner(
        make_settings(tmp_path, **wanted),
        registry=CollectorRegistry(),
        consumer_client=cluster.consumer(),
        producer_client=cluster.producer(),
        reload_settings=lambda: make_settings(tmp_path, **wanted),
    )
    return r, cluster


def test_reload_adds_and_removes_kernels_keeping_the_other_blocks(tmp_path: Path) -> None:
    wanted: dict[str, Any] = {"learner.kernels": [LINEAR, RBF]}
    r, cluster = reloading(tmp_path, 300, wanted)
    r.start()
    while r.counters["examples_learned"] < 100:
        r.tick()
    r.prequential.drain()  # the batch in flight on the learner thread: whatever reads drains
    before = kernels_of(r)
    assert set(before) == {"linear", "rbf(gamma=2)"} and all(v > 0 for v in before.values())
    learned, seq = r.counters["examples_learned"], r.checkpoints.last.seq

    wanted["learner.kernels"] = [LINEAR, RBF, POLY]
    assert r.reload() is True
    after = kernels_of(r)
    assert list(after) == ["linear", "rbf(gamma=2)", "poly2"]
    assert {k: after[k] for k in before} == before and after["poly2"] == 0.0  # others kept
    assert r.counters["examples_learned"] == learned  # at a batch boundary: nothing learned
    assert r.checkpoints.last.seq == seq + 1 and r.checkpoints.last.meta["reason"] == "reload"
    info = inspect_checkpoint(tmp_path / "ck")
    assert set(info["kernel_weights"]) == {"linear", "rbf(gamma=2)", "poly2"}
    assert info["examples_learned"] == learned

    assert r.reload() is False  # same list again: unchanged
    wanted["learner.kernels"] = [{"type": "Nope"}]
    assert r.reload() is False  # invalid: refused, nothing changes
    wanted["learner.kernels"] = [LINEAR, LINEAR]
    assert r.reload() is False  # two kernels with one name: refused
    assert list(kernels_of(r)) == ["linear", "rbf(gamma=2)", "poly2"]

    wanted["learner.kernels"] = [RBF, POLY]  # remove linear
    r.request_reload()
    r.tick()  # applied at the start of the next step, then the step learns
    assert list(kernels_of(r)) == ["rbf(gamma=2)", "poly2"]
    r.run()
    assert r.counters["examples_learned"] == 300
    reg = r.metrics.registry
    counts = {
        result: reg.get_sample_value("streammkl_config_reloads_total", {"result": result})
        for result in ("applied", "unchanged", "failed")
    }
    assert counts == {"applied": 2, "unchanged": 1, "failed": 2}
    weights = {
        s.labels["kernel"]: s.value
        for fam in reg.collect()
        if fam.name == "streammkl_kernel_weight"
        for s in fam.samples
    }
    assert set(weights) == {"rbf(gamma=2)", "poly2"} and sum(weights.values()) == pytest.approx(1)

    # a restart with the same settings restores the new shape; editing the file while stopped
    # is applied at the restored position (and checkpointed), like a SIGHUP there
    again = Runner(
        make_settings(tmp_path, **{"learner.kernels": [RBF, POLY, LINEAR]}),
        registry=CollectorRegistry(),
        consumer_client=cluster.consumer(),
        producer_client=cluster.producer(),
    )
    again.start()
    assert list(kernels_of(again)) == ["rbf(gamma=2)", "poly2", "linear"]
    assert again.checkpoints.last.meta["reason"] == "reload"
    np.testing.assert_equal(
        [kernels_of(again)[k] for k in ("rbf(gamma=2)", "poly2")],
        [kernels_of(r)[k] for k in ("rbf(gamma=2)", "poly2")],
    )


def test_a_reload_that_looks_like_a_mistake_is_refused_unless_forced(tmp_path: Path) -> None:
    """A kernel on a feature the stream never had (a typo), or a list that drops most of what
    was learned, leaves the model alone (and is counted as failed); reload.force applies it."""
    wanted: dict[str, Any] = {"learner.kernels": [LINEAR, RBF, POLY]}
    r, cluster = reloading(tmp_path, 200, wanted)
    r.run()
    before = kernels_of(r)
    assert sum(v > 0 for v in before.values()) == 3
    seq = r.checkpoints.last.seq
    typo = {"type": "RBF", "gamma": 1.0, "features": ["x_1"]}  # the stream has x1, x2
    wanted["learner.kernels"] = [LINEAR, RBF, POLY, typo]
    assert r.reload() is False
    wanted["learner.kernels"] = [{"type": "RBF", "gamma": 0.5}]  # drops 3 of 3 learned blocks
    assert r.reload() is False
    assert kernels_of(r) == before and r.checkpoints.last.seq == seq  # nothing applied
    reg = r.metrics.registry
    assert reg.get_sample_value("streammkl_config_reloads_total", {"result": "failed"}) == 2
    wanted["reload.force"] = True
    assert r.reload() is True
    assert list(kernels_of(r)) == ["rbf(gamma=0.5)"] and r.checkpoints.last.seq == seq + 1
    # the same guard at start: settings edited while stopped
    wanted.pop("reload.force")
    again = Runner(
        make_settings(tmp_path, **{"learner.kernels": [LINEAR, typo]}),
        registry=CollectorRegistry(),
        consumer_client=cluster.consumer(),
        producer_client=cluster.producer(),
    )
    from streammkl.daemon.learning.building import LearnerConfigError

    with pytest.raises(LearnerConfigError, match=r"features never seen: \['x_1'\]"):
        again.start()


def test_every_error_while_reloading_is_a_counted_refusal(tmp_path: Path, monkeypatch) -> None:
    """An empty bank (refused by the settings), or anything the learner raises while the change
    is tried (here a numba-style AssertionError): counted as failed, the model untouched, and
    the loop goes on to learn the whole stream."""
    wanted: dict[str, Any] = {"learner.kernels": [LINEAR, RBF]}
    r, _ = reloading(tmp_path, 200, wanted)
    r.start()
    while r.counters["examples_learned"] < 100:
        r.tick()
    r.prequential.drain()
    before = kernels_of(r)
    wanted.update({"learner.kernels": [], "reload.force": True})
    assert r.reload() is False
    import streammkl.daemon.learning.bank as reloading_mod

    def broken(learner: Any, wanted: Any) -> Any:
        raise AssertionError("Failed in nopython mode pipeline (step: nopython frontend)")

    monkeypatch.setattr(reloading_mod, "change_kernels", broken)
    wanted["learner.kernels"] = [LINEAR, RBF, POLY]
    r.request_reload()
    assert r.tick() is True  # the refused reload did not end the loop
    assert kernels_of(r).keys() == before.keys()
    r.run()
    assert r.counters["examples_learned"] == 200
    failed = r.metrics.registry.get_sample_value(
        "streammkl_config_reloads_total", {"result": "failed"}
    )
    assert failed == 2


@pytest.mark.kafka
@pytest.mark.xdist_group("kafka")
def test_sighup_adds_a_kernel_mid_stream_against_the_broker(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    topic = unique("reload")
    create_topic(kafka_bootstrap, topic, 1)
    config = tmp_path / "streammkl.toml"

    def write(kernels: str, extra: str = "") -> None:
        config.write_text(f"{extra}[learner]\nkernels = [{kernels}]\n")

    write('{type = "Linear"}, {type = "RBF", gamma = 2.0}')
    port = free_port()
    argv = [
        *daemon_argv(kafka_bootstrap, topic, unique("g"), tmp_path / "ck", port=port),
        "--config",
        str(config),
    ]
    proc = start_daemon(argv, tmp_path / "daemon.log")
    values = [json.dumps(r).encode() for r in bananas_like(600, seed=4)]

    def weights() -> dict[str, float]:
        return {
            dict(labels)["kernel"]: v
            for (name, labels), v in metrics(port).items()
            if name == "streammkl_kernel_weight"
        }

    def learned() -> float:
        return metrics(port).get(("streammkl_model_examples_learned_total", ()), 0.0)

    try:
        produce(kafka_bootstrap, topic, values[:300])
        wait_until(lambda: learned() == 300, 60, "the first 300 records learned")
        assert set(weights()) == {"linear", "rbf(gamma=2)"}
        write('{type = "Linear"}, {type = "RBF", gamma = 2.0}, {type = "Polynomial", degree = 2}')
        proc.send_signal(signal.SIGHUP)
        key = ("streammkl_config_reloads_total", (("result", "applied"),))
        wait_until(lambda: metrics(port).get(key) == 1, 30, "the reload to be applied")
        assert set(weights()) == {"linear", "rbf(gamma=2)", "poly2"}
        # an empty bank, even forced: refused and counted, and the daemon goes on
        write("", "[reload]\nforce = true\n")
        proc.send_signal(signal.SIGHUP)
        failed = ("streammkl_config_reloads_total", (("result", "failed"),))
        wait_until(lambda: metrics(port).get(failed) == 1, 30, "the empty bank to be refused")
        assert proc.poll() is None and set(weights()) == {"linear", "rbf(gamma=2)", "poly2"}
        produce(kafka_bootstrap, topic, values[300:])
        wait_until(lambda: learned() == 600, 60, "all 600 records learned")
        assert set(weights()) == {"linear", "rbf(gamma=2)", "poly2"}
        wait_until(lambda: weights()["poly2"] > 0, 60, "the new block to grow")  # it learns
        assert sum(weights().values()) == pytest.approx(1.0)
    finally:
        proc.terminate()
        assert proc.wait(timeout=60) == 0, (tmp_path / "daemon.log").read_text()[-3000:]
    info = inspect(tmp_path / "ck")
    assert info["examples_learned"] == 600
    assert set(info["kernel_weights"]) == {"linear", "rbf(gamma=2)", "poly2"}
    assert info["kernel_weights"]["poly2"] > 0 and info["block_norms"]["poly2"] > 0
    text = (tmp_path / "daemon.log").read_text()
    assert "kernels added ['poly2'], removed []" in text
    assert "reload failed, settings unchanged" in text and "at least one kernel" in text


@pytest.mark.kafka
@pytest.mark.xdist_group("kafka")
@pytest.mark.parametrize("bank", ["default", "every-kernel"])
def test_restart_and_sighup_with_unchanged_settings_keep_the_model_against_the_broker(
    kafka_bootstrap: str, tmp_path: Path, bank: str
) -> None:
    """Real daemon processes: 240 records (the bandwidth warm-up, then a rescale as a third
    input appears), SIGHUP with the same settings, a restart with the same settings, more
    records (another rescale), SIGHUP again. Nothing is added or removed, the kernel labels are
    the configured names all along, and the final model is bit for bit the one an uninterrupted
    run learns (before: a SIGHUP or a restart replaced every learned MedianRBF block by an empty
    one, its name having changed with its fitted bandwidth)."""
    from tests.test_kernel_identity import EVERY_KERNEL, records

    topic, group = unique("identity"), unique("g")
    create_topic(kafka_bootstrap, topic, 1)
    over = {} if bank == "default" else {"learner.kernels": list(EVERY_KERNEL.values())}
    recs = records(300)
    port = free_port()
    argv = daemon_argv(kafka_bootstrap, topic, group, tmp_path / "ck", port=port, settings=over)

    def labels(name: str) -> dict[str, float]:
        return {dict(lab)["kernel"]: v for (n, lab), v in metrics(port).items() if n == name}

    def learned() -> float:
        return metrics(port).get(("streammkl_model_examples_learned_total", ()), 0.0)

    def sighup_unchanged(proc: Any, count: int) -> None:
        before = labels("streammkl_block_norm"), labels("streammkl_kernel_bandwidth")
        proc.send_signal(signal.SIGHUP)
        key = ("streammkl_config_reloads_total", (("result", "unchanged"),))
        wait_until(lambda: metrics(port).get(key) == count, 30, "the reload (unchanged)")
        assert (labels("streammkl_block_norm"), labels("streammkl_kernel_bandwidth")) == before

    def stop(proc: Any, log: Path) -> None:
        proc.terminate()
        assert proc.wait(timeout=60) == 0, log.read_text()[-3000:]

    values = [json.dumps(r).encode() for r in recs]
    first = start_daemon(argv, tmp_path / "a.log")
    try:
        produce(kafka_bootstrap, topic, values[:240])
        wait_until(lambda: learned() == 240, 120, "240 records learned")
        names = list(labels("streammkl_kernel_weight"))
        fitted = labels("streammkl_kernel_bandwidth")
        # the default: three Fourier blocks and the landmarks fit a bandwidth
        assert len(fitted) == 4 if bank == "default" else len(fitted) == 2
        sighup_unchanged(first, 1)
    finally:
        stop(first, tmp_path / "a.log")
    assert inspect(tmp_path / "ck")["kernel_bandwidths"] == fitted

    second = start_daemon(argv, tmp_path / "b.log")
    try:
        wait_until(lambda: learned() == 240, 120, "the checkpoint restored")
        assert list(labels("streammkl_kernel_weight")) == names
        assert labels("streammkl_kernel_bandwidth") == fitted
        produce(kafka_bootstrap, topic, values[240:])
        wait_until(lambda: learned() == 300, 120, "all 300 records learned")
        sighup_unchanged(second, 1)
        assert list(labels("streammkl_kernel_weight")) == names
        assert labels("streammkl_kernel_bandwidth") != fitted  # rescaled at 4 inputs
    finally:
        stop(second, tmp_path / "b.log")
    logs = (tmp_path / "a.log").read_text() + (tmp_path / "b.log").read_text()
    assert "kernels added" not in logs and "forced change" not in logs
    info = inspect(tmp_path / "ck")
    assert info["examples_learned"] == 300 and list(info["kernel_weights"]) == sorted(names)

    cluster = FakeCluster()  # the same records learned by one uninterrupted run, in-process
    cluster.create("in", 1)
    for i, value in enumerate(values):
        cluster.append("in", value, 0, None, i)
    alone = Runner(
        make_settings(tmp_path / "alone", **over),
        registry=CollectorRegistry(),
        consumer_client=cluster.consumer(),
        producer_client=cluster.producer(),
    )
    alone.run()
    assert sorted(alone.learner.rounds().kernel_names) == names
    assert info["model_digest"] == alone.learner.rounds().digest()
