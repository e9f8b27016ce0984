"""Group mode: one model for a consumer group by iterative parameter mixing (daemon.group*).

The fold of the mix log is tested on records built in memory; the protocol end to end with
daemons against the real broker, including kill -9 at random moments (exactly-once counts and
equal digests).
"""

from __future__ import annotations

import json
import random
import signal
import time
from pathlib import Path

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from streammkl.core import kernels
from streammkl.daemon.config import ConfigError, load_settings
from streammkl.daemon.group import GroupMember
from streammkl.daemon.group_log import GroupLog, check_group_learner, core_state, learner_digest
from streammkl.daemon.group_topic import MixRecord, MixTopic, decode, encode
from streammkl.daemon.metrics import GroupMetrics
from streammkl.river import MKLClassifier
from tests.daemon_kafka import create_topic, daemon_argv, inspect, produce, start_daemon, unique

BANK = (
    kernels.Linear(),
    kernels.AdditiveRBF(1.0, 8),
    kernels.RBF(0.5, n_components=32),
    kernels.Polynomial(2, explicit=True),
)
KERNELS = [
    "linear",
    {"type": "AdditiveRBF", "gamma": 1.0, "n_components": 8},
    {"type": "RBF", "gamma": 0.5, "n_components": 32},
    {"type": "Polynomial", "degree": 2, "explicit": True},
]


def _stream(n: int, seed: int) -> tuple[list[dict], list[int]]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    Y = (X[:, 0] * X[:, 1] + 0.3 * X[:, 2] > 0).astype(int)
    return [{"a": float(a), "b": float(b), "c": float(c)} for a, b, c in X], [int(y) for y in Y]


def _base() -> tuple:
    learner = MKLClassifier(kernels=BANK)
    learner.declare_classes([0, 1])
    learner.declare_features([])
    return learner.to_state()


def _delta(base: tuple, round_: int, member: str, xs, ys, offsets=None) -> MixRecord:
    learner = MKLClassifier(kernels=BANK)
    learner.load_state(*base)
    start = learner.n_learned
    for x, y in zip(xs, ys, strict=True):
        learner.learn_one(x, y)
    return MixRecord(
        "delta", round_, member, examples=learner.n_learned - start, offsets=offsets or {},
        state=learner.to_state(), base_digest=learner_digest(base),
    )  # fmt: skip


def _roundtrip(rec: MixRecord) -> MixRecord:
    key, value = encode(rec)
    assert key.decode() == rec.key
    return decode(value)


def test_replays_change_nothing_and_every_reader_gets_the_same_model():
    X, Y = _stream(300, 0)
    base = _base()
    head = [MixRecord("base", 0, "a", state=base), MixRecord("hello", 0, "a"),
            MixRecord("hello", 0, "b")]  # fmt: skip
    da = _delta(base, 0, "a", X[:100], Y[:100], {"t/0": 100})
    db = _delta(base, 0, "b", X[100:250], Y[100:250], {"t/1": 150})
    close = MixRecord("close", 0, "b")
    first, second = GroupLog(), GroupLog()
    for rec in [*head, da, db, close]:
        first.apply(_roundtrip(rec))
    replayed = [*head, head[0], da, da, db, close, db, close]  # a member re-published after a crash
    for rec in replayed:
        second.apply(_roundtrip(rec))
    assert first.round == second.round == 1
    assert first.digest == second.digest and first.examples == second.examples == 250
    assert second.duplicates == 3 and second.mismatches == []
    assert len(first.results) == 1  # closed by b's delta (all published); the close is a no-op
    assert first.frontier == {"t/0": 100, "t/1": 150}
    res = first.results[0]
    assert res.members == ("a", "b") and res.late == () and res.active_after <= res.active_before


def test_a_late_member_is_merged_next_round_and_nothing_is_counted_twice():
    X, Y = _stream(400, 1)
    base = _base()
    log = GroupLog()
    for rec in [MixRecord("base", 0, "a", state=base), MixRecord("hello", 0, "a"),
                MixRecord("hello", 0, "b")]:  # fmt: skip
        log.apply(rec)
    log.apply(_delta(base, 0, "a", X[:100], Y[:100]))
    assert not log.complete()  # b is expected
    res0 = log.apply(MixRecord("close", 0, "a", late=("b",)))  # timeout: closed without b
    assert res0 is not None and res0.late == ("b",) and log.members == {"a"}
    log.apply(_delta(base, 0, "b", X[100:200], Y[100:200]))  # b's late delta: from base 0
    base1 = log.base
    log.apply(_delta(base1, 1, "a", X[200:300], Y[200:300]))
    assert log.members == {"a", "b"}  # b is back: its stale delta waits for the next close
    assert log.fresh() == {"a"} and not log.complete()  # ... and round 1 waits for b
    res1 = log.apply(_delta(base1, 1, "b", X[300:400], Y[300:400]))  # complete: closes
    assert res1 is not None and res1.stale == (("b", 1),) and set(res1.members) == {"a", "b"}
    assert log.examples == 400 and log.mismatches == []
    stranger = _delta(_base(), 2, "c", X[:10], Y[:10])
    log.apply(MixRecord("delta", 2, "c", examples=10, state=stranger.state, base_digest="x"))
    assert log.mismatches == [(2, "c")]  # learned from another model than the group's base


def test_the_merged_models_prequential_and_hindsight_views_fold_once():
    """Deltas carry their examples' prequential sums; a member's hindsight report (online vs
    the merged model on the same examples) counts once per (round, member), replays or not."""
    from streammkl.daemon.group import hindsight, prequential

    X, Y = _stream(200, 7)
    base = _base()
    log = GroupLog()
    for rec in [MixRecord("base", 0, "a", state=base), MixRecord("hello", 0, "a")]:
        log.apply(rec)
    learner = MKLClassifier(kernels=BANK)
    learner.load_state(*base)
    kept = []
    for x, y in zip(X[:100], Y[:100], strict=True):
        proba = learner.predict_proba_one(x)
        kept.append((x, y, (max(proba, key=proba.__getitem__) if proba else None, proba)))
        learner.learn_one(x, y)
    view = prequential(kept)
    assert view["labelled"] == 100 and 0 < view["mistakes"] < 60
    delta = MixRecord("delta", 0, "a", examples=100, state=learner.to_state(),
                      base_digest=learner_digest(base), stats=view)  # fmt: skip
    log.apply(_roundtrip(delta))
    log.apply(_roundtrip(delta))  # a replay
    assert (log.loss, log.mistakes, log.labelled) == (view["loss"], view["mistakes"], 100)
    learner.load_state(*log.base)
    report = hindsight(learner, kept, 0)
    again = sum(-np.log(max(learner.predict_proba_one(x).get(y, 0.0), 1e-15))
                for x, y, _ in kept)  # fmt: skip
    assert report["h_loss"] == view["loss"] and report["h_merged_loss"] == pytest.approx(again)
    assert report["h_merged_loss"] < report["h_loss"]  # the merged model has seen them
    bye = MixRecord("bye", 1, "a", stats=report)
    for rec in (bye, bye):  # a replayed bye counts once
        log.apply(_roundtrip(rec))
    assert log.regret == pytest.approx(report["h_loss"] - report["h_merged_loss"])
    assert log.regret_examples == 100 and log.regret_mistakes == int(
        report["h_mistakes"] - report["h_merged_mistakes"]
    )
    registry = CollectorRegistry()
    GroupMetrics(registry).totals(log)  # exported as the streammkl_mix_* gauges
    sample = registry.get_sample_value
    assert sample("streammkl_mix_regret") == log.regret
    assert sample("streammkl_mix_loss_sum") == log.loss
    assert (
        sample("streammkl_mix_labelled") == 100 and sample("streammkl_mix_regret_examples") == 100
    )


def test_group_mode_refuses_what_it_cannot_merge():
    learner = MKLClassifier(kernels=(kernels.RBF(0.5),), budget=64)  # kernelized: merged
    learner.declare_features([])
    check_group_learner(learner.to_state())
    with pytest.raises(ValueError, match="kernelized MedianRBF"):
        learner = MKLClassifier(kernels=(kernels.MedianRBF(1.0, None),), budget=64)
        learner.declare_features([])
        check_group_learner(learner.to_state())
    default = MKLClassifier()  # the default bank (MedianRBF Fourier maps) is accepted
    default.declare_features([])
    check_group_learner(default.to_state())
    for overrides, match in [
        ({"mixing.enabled": True}, "records.classes"),
        ({"mixing.enabled": True, "kafka.assignment": "all"}, "assignment"),
    ]:
        with pytest.raises(ConfigError, match=match):
            settings = load_settings(env={}, overrides=overrides)
            GroupMember(settings, GroupMetrics(CollectorRegistry()))


# -- end to end, real broker ---------------------------------------------------------------------


def _produce(bootstrap: str, topic: str, n: int, seed: int, partitions: int) -> None:
    create_topic(bootstrap, topic, partitions)
    X, Y = _stream(n, seed)
    values = [json.dumps({"x": x, "y": y}).encode() for x, y in zip(X, Y, strict=True)]
    produce(bootstrap, topic, values, partition_of=lambda i: i % partitions)


def _argv(
    bootstrap, topic, group, ckpt, member, mix, every=500, idle=6.0, bank=KERNELS, learner=None
):
    settings = {
        "mixing.enabled": True, "mixing.every_records": every, "mixing.member": member,
        "mixing.topic": mix, "mixing.round_timeout_seconds": 4.0, "records.classes": [0, 1],
        "monitor.enabled": False, "kafka.max_poll_records": 200,
        "checkpoint.every_records": 300, "kafka.session_timeout_ms": 1000,
        "kafka.heartbeat_interval_ms": 250,
    }  # fmt: skip
    if bank is not None:  # None: the default bank (MedianRBF) and standardised inputs
        settings["learner.kernels"] = bank
    settings.update(learner or {})  # more learner settings (and another bank)
    return daemon_argv(bootstrap, topic, group, ckpt, idle=idle, settings=settings)


def _fold(bootstrap: str, mix: str) -> GroupLog:
    topic = MixTopic(load_settings(env={}, overrides={"kafka.bootstrap_servers": bootstrap}).kafka,
                     mix)  # fmt: skip
    log = GroupLog()
    try:
        for rec in topic.read_to_end(30):
            log.apply(rec)
    finally:
        topic.close()
    return log


def _run_group(
    kafka_bootstrap: str,
    tmp_path: Path,
    n: int,
    kills: int,
    seed: int,
    bank=KERNELS,
    learner=None,
) -> GroupLog:
    topic, mix, group = unique("grp"), unique("mix"), unique("g")
    _produce(kafka_bootstrap, topic, n, seed, partitions=6)
    rng = random.Random(seed)
    argvs = [_argv(kafka_bootstrap, topic, group, tmp_path / f"m{i}", f"m{i}", mix, bank=bank,
                   learner=learner) for i in range(2)]  # fmt: skip
    procs = [start_daemon(a, tmp_path / f"m{i}.log") for i, a in enumerate(argvs)]
    for _ in range(kills):  # kill -9 member 1 at a random moment, restart it
        time.sleep(rng.uniform(1.5, 5.0))
        assert procs[1].poll() is None, "the member ended before it could be killed"
        procs[1].send_signal(signal.SIGKILL)
        assert procs[1].wait(timeout=30) == -signal.SIGKILL
        procs[1] = start_daemon(argvs[1], tmp_path / "m1.log")
    for p in procs:
        assert p.wait(timeout=300) == 0, (tmp_path / "m0.log").read_text()[-3000:]
    log = _fold(kafka_bootstrap, mix)
    assert log.examples == n  # every record learned exactly once in the merged model
    assert log.mismatches == [] and log.dropped == []
    assert log.pending == {}  # the last member's shutdown closed the last round
    views = [inspect(tmp_path / f"m{i}") for i in range(2)]
    final = {v["model_digest"] for v in views}
    assert final <= set(log.digests.values())  # each member holds exactly a merged model
    assert log.digest in final  # the last one out holds the group's final model
    # the merged model's prequential view counts every example once; its hindsight view
    # covers the rounds the members reported (all of them but a killed member's last)
    assert log.labelled == n and 0 < log.mistakes < n / 2 and log.loss > 0
    assert 0 < log.regret_examples <= n
    if not kills:  # nothing unpublished was thrown away: the members' counters agree
        assert log.regret_examples >= n // 5  # every k-th example of every round (<= 128)
        assert sum(v["examples_learned"] for v in views) == n
        assert sum(v["online_loss"] for v in views) == pytest.approx(log.loss, rel=1e-9)
    return log


@pytest.mark.kafka
@pytest.mark.xdist_group("kafka")
@pytest.mark.parametrize(("n", "kills", "seed", "bank"),
                         [(4000, 0, 3, KERNELS), (8000, 1, 4, KERNELS), (8000, 1, 8, None)],
                         ids=["no-fault", "kill9-once", "kill9-once-default-bank"])  # fmt: skip
def test_two_members_learn_one_model_exactly_once(
    kafka_bootstrap: str, tmp_path: Path, n: int, kills: int, seed: int, bank
) -> None:
    """kill9-once: SIGKILL of a member at a random moment, then a restart (with the fixed
    bank, and with the default one: held bandwidths, pooled input statistics)."""
    _run_group(kafka_bootstrap, tmp_path, n=n, kills=kills, seed=seed, bank=bank)


@pytest.mark.kafka
@pytest.mark.xdist_group("kafka")
def test_two_members_learn_one_model_with_the_default_bank(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The default bank (MedianRBF bandwidths, standardised inputs): the group agrees on one
    bandwidth per kernel (decided by the merge from the members' pooled warm-up inputs), every
    record is learned once, and every member holds the merged models."""
    log = _run_group(kafka_bootstrap, tmp_path, n=4000, kills=0, seed=6, bank=None)
    final = learner_digest(log.base)  # type: ignore[arg-type]
    assert final == log.digest
    learner = MKLClassifier.from_state(*log.base)  # type: ignore[misc]
    medians = [k for k in learner.core.kernels if isinstance(k, kernels.MedianRBF)]
    assert len(medians) == 3 and all(k.fit.final for k in medians)
    assert learner.core.warmup_left == 0 and log.results[0].examples <= 2 * 50  # warm-up round
    count = learner.to_state()[1]["inputs.count"]
    assert count.tolist() == [4000.0] * 3  # the pooled input statistics count every record once


@pytest.mark.kafka
@pytest.mark.xdist_group("kafka")
def test_a_kernelized_bank_merges_its_support_sets_exactly_once(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Kernelized blocks (support sets under a budget) next to an explicit one: two members,
    every record learned once in the merged model, equal digests, the budget held."""
    learner = {
        "learner.kernels": ["linear", {"type": "RBF", "gamma": 0.5},
                            {"type": "Polynomial", "degree": 2}],
        "learner.budget": 64,
    }  # fmt: skip
    log = _run_group(kafka_bootstrap, tmp_path, n=3000, kills=0, seed=6, learner=learner)
    assert len(log.results) >= 3  # several merges of support sets
    assert log.base is not None
    _, arrays = core_state(log.base)
    assert 0 < arrays["coef"].shape[1] <= 64  # the merged support set within the budget


@pytest.mark.slow
@pytest.mark.kafka
@pytest.mark.xdist_group("kafka")
def test_repeated_kill9_loses_nothing_and_counts_nothing_twice(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    _run_group(kafka_bootstrap, tmp_path, n=60000, kills=4, seed=5)


def test_a_failed_publish_is_retried_on_a_new_producer(monkeypatch):
    from kafka.errors import KafkaTimeoutError

    import streammkl.daemon.group_topic as gt

    monkeypatch.setattr(gt.time, "sleep", lambda s: None)
    sent, producers = [], []

    class Producer:
        def __init__(self, **options):
            producers.append(self)

        def send(self, topic, key, value, partition):
            if len(producers) == 1:  # the first producer is broken (e.g. after a broker restart)
                raise KafkaTimeoutError("broken")
            sent.append(key)
            return type("F", (), {"get": lambda self, timeout: None})()

        def close(self, timeout):
            pass

    class Consumer:
        def __init__(self, **options):
            pass

        def assign(self, tps):
            pass

        def seek_to_beginning(self, tp):
            pass

    kafka = load_settings(env={}).kafka
    topic = MixTopic(kafka, "mix", producer_factory=Producer, consumer_factory=Consumer)
    topic.publish(MixRecord("hello", 0, "a"))
    assert sent == [b"hello/0000000000/a"] and len(producers) == 2
    with pytest.raises(KafkaTimeoutError):  # bounded at shutdown
        broken = MixTopic(kafka, "mix", producer_factory=Producer, consumer_factory=Consumer)
        producers[:] = [broken.producer]
        broken.publish(MixRecord("bye", 0, "a"), attempts=1)


def test_group_members_standardize_like_one_daemon(tmp_path: Path) -> None:
    """learner.standardize is on by default for a group member as for one daemon (the merge
    pools the members' statistics: streammkl.river.pooling), and can be turned off."""
    from streammkl.daemon.runner import Runner

    base = {"records.classes": [0, 1], "records.dim": 2, "checkpoint.dir": str(tmp_path / "a")}
    alone = Runner(load_settings(env={}, overrides=base), registry=CollectorRegistry())
    assert alone.learner.standardize is True
    group = {**base, "mixing.enabled": True, "checkpoint.dir": str(tmp_path / "b")}
    member = Runner(load_settings(env={}, overrides=group), registry=CollectorRegistry())
    assert member.learner.standardize is True
    off = {**group, "learner.standardize": False, "checkpoint.dir": str(tmp_path / "c")}
    assert (
        Runner(
            load_settings(env={}, overrides=off), registry=CollectorRegistry()
        ).learner.standardize
        is False
    )
