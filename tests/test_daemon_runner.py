"""The daemon loop against in-memory Kafka fakes (fast): order, crashes, poison, sink failures."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from streammkl.daemon.checkpoints.inspection import inspect_checkpoint
from streammkl.daemon.checkpoints.store import CheckpointError, CheckpointStore, encode_offsets
from streammkl.daemon.config import load_settings
from streammkl.daemon.loop.runner import Runner
from streammkl.statefile import digest_of
from tests.daemon_fakes import FakeCluster, FakeLearner, TopicPartition, bananas_like

N = 240


def make_settings(tmp_path: Path, **over: Any) -> Any:
    base: dict[str, Any] = {
        "kafka.topics": "in",
        "kafka.create_topics": False,
        "kafka.poll_timeout_ms": 0,
        "kafka.max_poll_records": 25,
        "checkpoint.dir": str(tmp_path / "ck"),
        "checkpoint.every_records": 40,
        "run.exit_when_idle": 0.05,
        "metrics.enabled": False,
    }
    base.update(over)
    return load_settings(env={}, overrides=base)


def fill(cluster: FakeCluster, n: int = N, partitions: int = 3, topic: str = "in") -> list[Any]:
    """``n`` examples over ``partitions``; timestamps tie across partitions (merge tie-breaks)."""
    cluster.create(topic, partitions)
    recs = []
    for i, r in enumerate(bananas_like(n)):
        part = (i * 7) % partitions
        recs.append(cluster.append(topic, json.dumps(r).encode(), part, f"k{i}".encode(), i // 4))
    return recs


def runner(tmp_path: Path, cluster: FakeCluster, seed: int = 0, **over: Any) -> Runner:
    return Runner(
        make_settings(tmp_path, **over),
        FakeLearner(),
        registry=CollectorRegistry(),
        consumer_client=cluster.consumer(seed),
        producer_client=cluster.producer(),
    )


def reference_digest(records: list[Any]) -> str:
    """Learn the records in the documented merge order: (timestamp, topic, partition, offset)."""
    learner = FakeLearner()
    for r in sorted(records, key=lambda r: (r.timestamp, r.topic, r.partition, r.offset)):
        d = json.loads(r.value)
        learner.learn_one(d["x"], d["y"])
    return digest_of(learner)


def predictions(cluster: FakeCluster) -> list[dict[str, Any]]:
    return [json.loads(v) for v in cluster.values("streammkl.predictions")]


def test_merge_order_is_a_function_of_the_logs_not_of_fetch_timing(tmp_path: Path) -> None:
    digests = set()
    for seed in range(4):
        cluster = FakeCluster()
        records = fill(cluster)
        r = runner(tmp_path / str(seed), cluster, seed=seed)
        assert r.run() == 0
        digests.add(digest_of(r.learner))
        assert r.counters["examples_learned"] == N
        preds = predictions(cluster)
        assert sorted((p["partition"], p["offset"]) for p in preds) == sorted(
            (x.partition, x.offset) for x in records
        )
        assert sorted(p["model_version"] for p in preds) == list(range(N))
    assert digests == {reference_digest(records)}


def test_single_partition_is_learned_in_log_order(tmp_path: Path) -> None:
    cluster = FakeCluster()
    records = fill(cluster, partitions=1)
    r = runner(tmp_path, cluster)
    r.run()
    learner = FakeLearner()
    for rec in records:
        d = json.loads(rec.value)
        learner.learn_one(d["x"], d["y"])
    assert digest_of(r.learner) == digest_of(learner)
    assert [p["offset"] for p in predictions(cluster)] == list(range(N))


@pytest.mark.parametrize("crash_steps", [[1], [3, 2, 7], [5, 1, 1, 4, 2, 9]])
def test_crash_anywhere_then_restart_gives_the_uninterrupted_model(
    tmp_path: Path, crash_steps: list[int]
) -> None:
    ref_cluster = FakeCluster()
    fill(ref_cluster)
    ref = runner(tmp_path / "ref", ref_cluster)
    ref.run()
    cluster = FakeCluster()
    records = fill(cluster)
    for i, steps in enumerate(crash_steps):
        r = runner(tmp_path / "run", cluster, seed=100 + i)
        r.start()
        for _ in range(steps):
            r.tick()
        # kill -9: the object is abandoned, nothing is flushed or checkpointed
    final = runner(tmp_path / "run", cluster, seed=999)
    assert final.run() == 0
    assert digest_of(final.learner) == digest_of(ref.learner) == reference_digest(records)
    info = inspect_checkpoint(tmp_path / "run" / "ck")
    assert info["examples_learned"] == N
    assert info["model_digest"] == digest_of(ref.learner)
    assert info["offsets"] == {"in": {"0": 80, "1": 80, "2": 80}}
    # outputs are at-least-once: every record predicted, replays give identical predictions
    by_offset: dict[tuple[int, int], set[str]] = {}
    for p in predictions(cluster):
        by_offset.setdefault((p["partition"], p["offset"]), set()).add(
            json.dumps(p, sort_keys=True)
        )
    assert len(by_offset) == N
    assert all(len(v) == 1 for v in by_offset.values())


POISON = [
    (b"\xff\xfe", "invalid_utf8"),
    (b"{nope", "invalid_json"),
    (b"[1]", "not_an_object"),
    (b'{"y": 1}', "missing_x"),
    (b'{"x": "s", "y": 1}', "bad_x"),
    (b'{"x": {"a": "s"}, "y": 1}', "non_numeric"),
    (b'{"x": {"a": NaN}, "y": 1}', "non_finite"),
    (b'{"x": [1, 2, 3], "y": 1}', "wrong_dim"),
    (b'{"x": [[1, 2]], "y": [1]}', "wrong_kind"),
    (b'{"x": {"a": 1}, "y": {"o": 1}}', "bad_label"),
    (b'{"x": {"a": 1}, "y": 9}', "unknown_class"),
    (b'{"x": {"a": 1}, "y": 1, "id": 5}', "bad_id"),
    (b'{"x": {"a": 1}, "y": 1, "ts": "x"}', "bad_ts"),
    (b'{"x": {"a": 1}, "y": 1, "q": 0}', "unknown_field"),
    (b'{"x": {"a": 1}, "y": 1, "pad": "' + b"p" * 300 + b'"}', "too_large"),
    (b'{"x": {"boom": 1}, "y": 1}', "learner_error"),
]


def test_poison_records_are_dead_lettered_with_reason_and_counted(tmp_path: Path) -> None:
    cluster = FakeCluster()
    cluster.create("in", 2)
    good = bananas_like(60)
    valid = poison = 0
    for i in range(60):
        cluster.append("in", json.dumps(good[i]).encode(), i % 2, None, i)
        valid += 1
        if i < len(POISON):
            cluster.append("in", POISON[i][0], i % 2, b"key", i)
            poison += 1
    over = {"records.dim": 2, "records.classes": [0, 1], "records.strict": True}
    r = runner(tmp_path, cluster, **{**over, "records.max_bytes": 200})
    r.run()
    assert r.counters["examples_learned"] == valid
    assert r.counters["records_consumed"] == valid + poison
    dead = [rec for part in cluster.topics["streammkl.dead-letters"] for rec in part]
    assert len(dead) == poison
    got = {(d.value, dict(d.headers)["reason"].decode()) for d in dead}
    assert got == set(POISON)
    for d in dead:
        h = dict(d.headers)
        assert h["source_topic"] == b"in"
        src = cluster.topics["in"][int(h["source_partition"])][int(h["source_offset"])]
        assert src.value == d.value and d.key == b"key"
        assert h["error"]
    expected = {reason: 1 for _, reason in POISON}
    assert r.counters["rejected_by_reason"] == expected
    reg = r.metrics.registry
    for reason, n in expected.items():
        assert reg.get_sample_value("streammkl_records_rejected_total", {"reason": reason}) == n
    assert reg.get_sample_value("streammkl_dead_letters_total") == poison
    assert reg.get_sample_value("streammkl_records_learned_total") == valid
    assert (
        reg.get_sample_value("streammkl_records_consumed_total", {"topic": "in"}) == valid + poison
    )
    # the learner-error record was predicted first (prequential), then refused by learn_one
    assert len(predictions(cluster)) == valid + 1


def test_predict_only_records_are_predicted_not_learned(tmp_path: Path) -> None:
    cluster = FakeCluster()
    cluster.create("in", 1)
    for i, rec in enumerate(bananas_like(20)):
        if i >= 10:
            rec = {"x": rec["x"], "id": rec["id"]}
        cluster.append("in", json.dumps(rec).encode(), 0, None, i)
    r = runner(tmp_path, cluster)
    r.run()
    assert r.counters["examples_learned"] == 10
    assert r.counters["records_predicted"] == 20
    preds = predictions(cluster)
    assert [p["model_version"] for p in preds[10:]] == [10] * 10
    assert all(set(p["proba"]) == {"0", "1"} for p in preds[10:])
    assert preds[0]["prediction"] is None and preds[0]["proba"] == {}  # before any class


def test_regression_uses_numeric_labels(tmp_path: Path) -> None:
    cluster = FakeCluster()
    cluster.create("in", 1)
    for i in range(30):
        cluster.append("in", json.dumps({"x": [i / 30], "y": 2.0 * i / 30}).encode(), 0, None, i)
    cluster.append("in", b'{"x": [0.5], "y": "high"}', 0, None, 99)
    r = Runner(
        make_settings(tmp_path),
        FakeLearner(task="regression"),
        registry=CollectorRegistry(),
        consumer_client=cluster.consumer(),
        producer_client=cluster.producer(),
    )
    r.run()
    assert r.counters["examples_learned"] == 30
    assert r.counters["rejected_by_reason"] == {"bad_label": 1}
    assert isinstance(predictions(cluster)[-1]["prediction"], float)
    assert r.counters["online_loss"] > 0


def test_sink_failures_are_retried_and_nothing_is_lost(tmp_path: Path) -> None:
    cluster = FakeCluster()
    fill(cluster)
    cluster.fail_sends = 7
    r = runner(tmp_path, cluster)
    r.run()
    assert len({(p["partition"], p["offset"]) for p in predictions(cluster)}) == N
    reg = r.metrics.registry
    assert reg.get_sample_value("streammkl_sink_errors_total") == 7
    assert reg.get_sample_value("streammkl_producer_restarts_total") >= 1


def test_undelivered_outputs_survive_a_crash_in_the_outbox(tmp_path: Path) -> None:
    cluster = FakeCluster()
    fill(cluster, n=30, partitions=1)
    cluster.fail_sends = 10**9  # the broker refuses every output
    r = runner(tmp_path, cluster, **{"checkpoint.every_records": 10**6})
    r.start()
    while r.counters["records_consumed"] < 30:
        r.tick()
    r.sink.flush = lambda timeout=5.0: r.sink.unacknowledged()  # type: ignore[method-assign]
    assert r.checkpoint("test")
    assert inspect_checkpoint(tmp_path / "ck")["outbox"] == 30
    cluster.fail_sends = 0  # broker healthy again; the daemon was killed meanwhile
    again = runner(tmp_path, cluster, seed=5)
    again.run()
    assert sorted(p["offset"] for p in predictions(cluster)) == list(range(30))
    assert again.counters["examples_learned"] == 30


def test_checkpoint_offset_beyond_highwater_is_counted_and_restarts_at_earliest(
    tmp_path: Path,
) -> None:
    cluster = FakeCluster()
    fill(cluster, n=50, partitions=1)
    store = CheckpointStore(tmp_path / "ck")
    learner = FakeLearner()
    store.save(
        {
            "offsets": encode_offsets({("in", 0): 500}),
            "counters": {"examples_learned": 500},
            "model": {"class": "tests.daemon_fakes:FakeLearner", "meta": learner.to_state()[0]},
            "summary": {"model_digest": digest_of(learner)},
        },
        learner.to_state()[1],
    )
    r = runner(tmp_path, cluster)
    r.run()
    assert r.counters["offset_resets"] == 1
    assert r.counters["examples_learned"] == 550
    assert r.offsets[("in", 0)] == 50
    labels = {"topic": "in", "partition": "0"}
    assert r.metrics.registry.get_sample_value("streammkl_offset_resets_total", labels) == 1


def test_restore_refuses_another_learner_class(tmp_path: Path) -> None:
    cluster = FakeCluster()
    fill(cluster, n=10, partitions=1)
    runner(tmp_path, cluster).run()

    class Other(FakeLearner):
        pass

    r = Runner(
        make_settings(tmp_path), Other(), registry=CollectorRegistry(),
        consumer_client=cluster.consumer(), producer_client=cluster.producer(),
    )  # fmt: skip
    with pytest.raises(CheckpointError, match=r"holds a tests\.daemon_fakes:FakeLearner"):
        r.run()


def test_revocation_checkpoints_first_and_new_partitions_start_at_committed(
    tmp_path: Path,
) -> None:
    cluster = FakeCluster()
    fill(cluster, n=60, partitions=2)
    cluster.committed["streammkl"] = {TopicPartition("in", 1): 20}  # another member's commit
    r = runner(tmp_path, cluster, **{"run.exit_when_idle": None})
    r.start()
    consumer = r.source.consumer
    consumer.pending_assignment = [TopicPartition("in", 0)]
    while r.offsets.get(("in", 0)) != 30:
        r.tick()
    before = len(r.store.list())
    learned = r.counters["examples_learned"]
    consumer.rebalance([TopicPartition("in", 1)])
    r.tick()
    assert len(r.store.list()) == before + 1  # checkpoint on revocation
    assert r.store.load_latest().counters["examples_learned"] == learned  # type: ignore[union-attr]
    while r.offsets.get(("in", 1)) != 30:
        r.tick()
    assert r.counters["examples_learned"] == 30 + 10  # partition 1 from its committed offset 20
    r.stop()
    r.run()


def test_stop_ends_at_a_batch_boundary_with_a_final_checkpoint(tmp_path: Path) -> None:
    cluster = FakeCluster()
    fill(cluster, n=N, partitions=3)
    r = runner(tmp_path, cluster, **{"run.exit_when_idle": None, "checkpoint.every_records": 10**6})
    t = threading.Thread(target=r.run)
    t.start()
    while r.counters["records_consumed"] < 30:
        pass
    r.stop()
    t.join(10)
    assert not t.is_alive()
    info = inspect_checkpoint(tmp_path / "ck")
    assert info["reason"] == "shutdown"
    assert info["examples_learned"] == r.counters["examples_learned"]
    assert sum(int(v) for v in info["offsets"]["in"].values()) == r.counters["records_consumed"]
    assert r.source.consumer is None  # closed


def scrape(port: int, path: str = "/metrics") -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_metrics_endpoint_values_and_probes(tmp_path: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    cluster = FakeCluster()
    fill(cluster, n=N, partitions=2)
    r = runner(
        tmp_path,
        cluster,
        **{"metrics.enabled": True, "metrics.port": 0, "run.exit_when_idle": None},
    )
    r.keep_http = True
    r.start()
    port = r.http.port  # type: ignore[union-attr]
    assert scrape(port, "/readyz")[0] == 503  # not assigned yet
    while r.counters["records_consumed"] < N:
        r.tick()
    r.tick()
    code, body = scrape(port, "/readyz")
    assert code == 200 and json.loads(body)["assigned"] == ["in/0", "in/1"]
    assert scrape(port, "/healthz")[0] == 200
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(scrape(port)[1])
        for s in fam.samples
    }
    assert samples[("streammkl_records_consumed_total", (("topic", "in"),))] == N
    assert samples[("streammkl_records_learned_total", ())] == N
    assert samples[("streammkl_model_version", ())] == N
    assert samples[("streammkl_learn_duration_seconds_count", ())] == N
    weights = {k[1][0][1]: v for k, v in samples.items() if k[0] == "streammkl_kernel_weight"}
    assert set(weights) == {"linear", "square"}
    assert sum(weights.values()) == pytest.approx(1.0)
    assert weights == pytest.approx(r.learner.kernel_weights)
    acc = (
        samples[("streammkl_prequential_correct_total", ())]
        / samples[("streammkl_prequential_labelled_total", ())]
    )
    assert acc == pytest.approx(r.counters["correct_predictions"] / N) and acc > 0.5
    assert samples[("streammkl_consumer_lag_records", (("partition", "0"), ("topic", "in")))] == 0
    assert samples[("streammkl_rebalances_total", ())] == 1
    assert samples[("streammkl_outputs_acknowledged_total", ())] == N
    ckpts = samples[("streammkl_checkpoints_total", ())]
    assert (
        ckpts >= N // 50 and ckpts == samples[("streammkl_checkpoint_duration_seconds_count", ())]
    )
    assert samples[("streammkl_up", ())] == 1
    assert samples[("streammkl_ready", ())] == 1
    assert samples[("streammkl_checkpoint_size_bytes", ())] > 0
    assert 0 <= samples[("streammkl_checkpoint_age_seconds", ())] < 60
    assert (
        "streammkl_records_rejected_total",
        (("reason", "wrong_dim"),),
    ) in samples  # pre-declared
    r.stop()
    r.run()
    r.http.stop()  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("task", "monitor", "stride"),
    [
        ("classification", True, 50),
        ("classification", True, 1),
        ("classification", False, 50),
        ("regression", True, 50),
    ],
    ids=["classification-monitored-runs", "classification-per-record",
         "classification-pipelined-runs", "regression"],
)  # fmt: skip
def test_default_learner_survives_crashes_exactly(
    tmp_path: Path, task: str, monitor: bool, stride: int
) -> None:
    """The real MKLClassifier / MKLRegressor through checkpoints: same digest after crashes.
    The classifier takes the pipelined compiled runs (cut at the monitor's stride when it is
    on): a crash then also abandons a batch in flight. A stride of 1 takes a round per
    record."""
    pytest.importorskip("streammkl.river")

    def stream(cluster: FakeCluster) -> None:
        cluster.create("in", 2)
        for i, r in enumerate(bananas_like(300, seed=5)):
            y = r["y"] if task == "classification" else r["x"]["x1"] * 2 - r["x"]["x2"]
            cluster.append("in", json.dumps({"x": r["x"], "y": y}).encode(), i % 2, None, i)

    over = {
        "learner.task": task,
        "checkpoint.every_records": 30,
        "kafka.max_poll_records": 25,
        "monitor.enabled": monitor,
        "monitor.stride": stride,
    }

    def make(cluster: FakeCluster, seed: int, sub: str) -> Runner:
        return Runner(
            make_settings(tmp_path / sub, **over),
            registry=CollectorRegistry(),
            consumer_client=cluster.consumer(seed),
            producer_client=cluster.producer(),
        )

    ref_cluster, cluster = FakeCluster(), FakeCluster()
    stream(ref_cluster)
    stream(cluster)
    ref = make(ref_cluster, 0, "ref")
    ref.run()
    assert type(ref.learner).__name__ == (
        "MKLClassifier" if task == "classification" else "MKLRegressor"
    )
    for i, steps in enumerate([4, 9, 2]):
        r = make(cluster, 10 + i, "run")
        r.start()
        for _ in range(steps):
            r.tick()
    final = make(cluster, 99, "run")
    final.run()
    assert ref.driver.batched is (task == "classification" and stride > 1)
    assert final.counters["examples_learned"] == ref.counters["examples_learned"] == 300
    assert digest_of(final.learner) == digest_of(ref.learner)
    assert {(p["partition"], p["offset"]) for p in predictions(cluster)} == {
        (i % 2, i // 2) for i in range(300)
    }  # every record predicted (at least once)
    assert sum(final.learner.kernel_weights.values()) == pytest.approx(1.0)


def test_unreachable_broker_at_start_is_retried_not_fatal(tmp_path: Path) -> None:
    from streammkl.daemon.kafka.clients import ClientUnavailable

    cluster = FakeCluster()
    fill(cluster, n=30, partitions=1)
    calls = {"n": 0}
    real = cluster.consumer()

    def flaky(settings: Any) -> Any:
        calls["n"] += 1
        if calls["n"] <= 2:
            raise ClientUnavailable("Unable to bootstrap")
        return real(settings)

    r = Runner(
        make_settings(tmp_path, **{"run.exit_when_idle": None}), FakeLearner(),
        registry=CollectorRegistry(), consumer_client=flaky, producer_client=cluster.producer(),
    )  # fmt: skip
    r.start()
    r.tick()
    assert r.source.consumer is None and not r.publisher.status["ready"]
    while r.counters["examples_learned"] < 30:
        r.tick()
    assert calls["n"] == 3
    assert r.publisher.status["ready"]
    r.stop()
    r.run()


def test_an_idle_run_that_consumed_nothing_still_leaves_a_checkpoint(tmp_path: Path) -> None:
    """``run --exit-when-idle`` on an empty topic used to write no checkpoint, so ``inspect``
    then failed with "no checkpoint"."""
    cluster = FakeCluster()
    cluster.create("in", 1)
    runner(tmp_path, cluster).run()
    info = inspect_checkpoint(tmp_path / "ck")
    assert info["records_consumed"] == 0 and info["reason"] == "shutdown"


def ticks(source: Any, now: list[float], seconds: float) -> None:
    """Fetch once per second of a fake clock (``now[0]``, the source's ``clock``) for
    ``seconds``."""
    end = now[0] + seconds
    while now[0] < end:
        now[0] += 1.0
        source.fetch(0)


def test_a_member_rejoins_only_when_a_topic_it_saw_missing_came_back_unassigned(
    tmp_path: Path,
) -> None:
    """The return watch (``Source._watch_return``), on an injected clock: a member left without
    partitions while its topics exist all along (one member too many) never rejoins; one that
    saw its topic missing, then back, and still owns nothing 8 s later rejoins once with a new
    consumer, which gets the partitions."""
    from streammkl.daemon.kafka.source import Source

    now = [0.0]
    kafka = make_settings(tmp_path).kafka

    cluster = FakeCluster()
    cluster.create("in", 1)
    extra = Source(kafka, {}, cluster.consumer(), group=True, clock=lambda: now[0]).start()
    assert extra.consumer is not None
    extra.consumer.rebalance([])  # the group gives this member nothing
    ticks(extra, now, 60.0)
    assert extra.rejoins == 0 and extra.assignment == []

    cluster = FakeCluster()  # the topic missing (a restarted memory-only broker)
    back = Source(kafka, {}, cluster.consumer(), group=True, clock=lambda: now[0]).start()
    ticks(back, now, 10.0)
    assert back.assignment == [] and back.rejoins == 0
    cluster.create("in", 1)  # back; the group (this fake's subscription) still gives nothing
    ticks(back, now, 6.0)
    assert back.rejoins == 0  # not yet: 8 s after it was seen back
    ticks(back, now, 10.0)
    assert back.rejoins == 1
    assert [(tp.topic, tp.partition) for tp in back.assignment] == [("in", 0)]


def test_a_member_rejoins_when_its_topic_was_re_created_between_two_looks(tmp_path: Path) -> None:
    """A topic deleted and re-created between two looks of the return watch is never seen
    missing (kafka-python answers from metadata up to 5 s old; a CI run of the real-broker test
    missed an 8-s absence that way and never rejoined): its new id says it was re-created, so
    the member that owned it, left with nothing, rejoins 8 s later and the re-created topic's
    own offsets restart at 0."""
    from streammkl.daemon.kafka.source import Source

    now = [0.0]
    kafka = make_settings(tmp_path).kafka

    cluster = FakeCluster()
    cluster.create("in", 1)
    offsets = {("in", 0): 40}
    member = Source(kafka, offsets, cluster.consumer(), group=True, clock=lambda: now[0]).start()
    assert member.consumer is not None
    member.consumer.rebalance([TopicPartition("in", 0)])
    ticks(member, now, 1.0)
    assert [(tp.topic, tp.partition) for tp in member.assignment] == [("in", 0)]
    old_id = member.topic_ids["in"]
    cluster.delete("in")
    member.consumer.rebalance([])  # the group gives nothing after the broker came back
    ticks(member, now, 1.0)
    assert member.assignment == []
    cluster.create("in", 1)  # a new id: gone and back between two looks
    ticks(member, now, 6.0)
    assert member.rejoins == 0
    ticks(member, now, 8.0)
    assert member.rejoins == 1
    assert [(tp.topic, tp.partition) for tp in member.assignment] == [("in", 0)]
    assert member.topic_ids["in"] != old_id and member.offsets[("in", 0)] == 0


def test_a_member_that_owns_nothing_asks_for_topic_ids_only_every_30_s(tmp_path: Path) -> None:
    """With a client whose topic id is a request of its own (librdkafka's DescribeTopics), a
    member left with nothing compares its topics' ids every ``ID_CHECK_SECONDS`` (30 s), not at
    every 5-s look of the return watch: a topic re-created unseen is still noticed (later).
    While some input topic was seen vanished it asks at every look (every second); a client
    that reads the ids from its metadata (kafka-python) is asked at every look."""
    from streammkl.daemon.kafka.source import ID_CHECK_SECONDS, Source

    now = [0.0]
    kafka = make_settings(tmp_path, **{"kafka.topics": "in,other"}).kafka

    def left_with_nothing(cluster: FakeCluster, asks: bool) -> Any:
        """A member that owned both topics (their ids remembered) and then nothing, 2 s after
        its start; its return watch looked at 1 s (nothing owned yet), so it looks at 6, 11,
        16 s... and, asking, compares the ids at 31, 61, 91 s..."""
        member = Source(kafka, {}, cluster.consumer(), group=True, clock=lambda: now[0]).start()
        member.consumer.topic_id_is_a_request = asks
        member.consumer.rebalance([TopicPartition("in", 0), TopicPartition("other", 0)])
        ticks(member, now, 1.0)
        assert len(member.assignment) == 2 and set(member.topic_ids) == {"in", "other"}
        member.consumer.rebalance([])  # one member too many: the group gives it nothing
        ticks(member, now, 1.0)
        assert member.assignment == []
        member.consumer.id_requests = 0
        return member

    def cluster_with_both() -> FakeCluster:
        cluster = FakeCluster()
        cluster.create("in", 1)
        cluster.create("other", 1)
        return cluster

    cheap = left_with_nothing(cluster_with_both(), asks=False)
    ticks(cheap, now, 120.0)  # to 122 s
    assert cheap.consumer.id_requests == 2 * 120 // 5  # both topics at every 5-s look
    assert cheap.rejoins == 0

    cluster = cluster_with_both()
    member = left_with_nothing(cluster, asks=True)
    ticks(member, now, 120.0)  # to 122 s: the ids compared at 31, 61, 91 and 121 s
    assert member.consumer.id_requests == 2 * 120 // ID_CHECK_SECONDS  # every 30 s, not 5
    assert member.rejoins == 0
    cluster.delete("in")  # re-created between two looks: never seen missing
    cluster.create("in", 1)
    ticks(member, now, 20.0)  # to 142 s (asked at every look: seen at 126 s, rejoined at 134)
    assert member.rejoins == 0
    ticks(member, now, 18.0)  # the new id seen at 151 s, then 8 s and a look every second
    assert member.rejoins == 1
    assert [(tp.topic, tp.partition) for tp in member.assignment] == [("in", 0), ("other", 0)]

    cluster = cluster_with_both()
    member = left_with_nothing(cluster, asks=True)
    cluster.delete("other")
    ticks(member, now, 5.0)  # seen missing at 6 s (no id is asked while a topic is missing)
    cluster.create("other", 1)  # back: the member waits 8 s, looking every second
    asked = member.consumer.id_requests
    ticks(member, now, 6.0)
    assert member.consumer.id_requests - asked == 6  # "in"'s id at every look ("other" vanished)
    assert member.rejoins == 0


_FIRST_BATCHES = """
import json, sys
from pathlib import Path
from numba.core import caching, event
from prometheus_client import CollectorRegistry
from streammkl.daemon.loop.runner import Runner
from tests.daemon_fakes import FakeCluster
from tests.test_daemon_runner import fill, make_settings

compiles, loads = [], []
event.register("numba:compile", event.Listener.__new__(type("L", (event.Listener,), {
    "on_start": lambda self, ev: compiles.append(1), "on_end": lambda self, ev: None})))
cluster = FakeCluster()
fill(cluster, 240, 1)
runner = Runner(make_settings(Path(sys.argv[1])), registry=CollectorRegistry(),
                consumer_client=cluster.consumer(0), producer_client=cluster.producer())
runner.start()
started_cold = bool(compiles)
load = caching.Cache.load_overload
caching.Cache.load_overload = lambda self, *a: loads.append(1) or load(self, *a)
runner.run()
print(json.dumps({"cold": started_cold, "loads": len(loads), "compiles": len(compiles),
                  "learned": runner.counters["examples_learned"]}))
"""


def test_a_warm_start_loads_the_batch_paths_before_the_first_batch(tmp_path: Path) -> None:
    """With numba's cache warm, the start loads the code of every path the batches take
    (compiled runs, the monitor, the comparator): the loop loads nothing from the cache
    afterwards (a fresh process: code loaded by an earlier test would hide a load)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-c", _FIRST_BATCHES, str(tmp_path)],
        cwd=root, capture_output=True, text=True, timeout=600, check=True,
    )  # fmt: skip
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    if seen["cold"]:
        pytest.skip("numba's cache is cold here: the start compiles, and leaves the rest")
    assert seen["learned"] == 240
    assert seen["loads"] == 0 and seen["compiles"] == 0, seen


class DudLearner(FakeLearner):
    """:class:`FakeLearner` whose prediction fails on a feature named ``dud``."""

    def predict_proba_one(self, x: dict[str, float]) -> dict[Any, float]:
        if "dud" in x:
            raise ValueError("feature 'dud' cannot be predicted")
        return super().predict_proba_one(x)


def test_predictions_and_dead_letters_leave_in_record_order(tmp_path: Path) -> None:
    """A batch with learner errors is sent record by record: a failed prediction is a dead
    letter; a failed update a dead letter, then the prediction; each prediction carries the
    count of examples learned before it (the batches around it: none of that)."""
    cluster = FakeCluster()
    cluster.create("in", 1)
    boom, dud, unlabelled = {25, 31, 36, 44}, {30, 37, 49}, {33, 36, 40, 41}
    for i, rec in enumerate(bananas_like(75)):  # batches of 25: the second has the errors
        x = {
            **rec["x"],
            **({"boom": 1.0} if i in boom else {}),
            **({"dud": 1.0} if i in dud else {}),
        }
        value = {"x": x, "id": rec["id"]} if i in unlabelled else {**rec, "x": x}
        cluster.append("in", json.dumps(value).encode(), 0, None, i)
    sent: list[tuple[str, Any]] = []
    append = cluster.append

    def recorded(topic: str, value: bytes, *args: Any, **kwargs: Any) -> Any:
        headers = dict(kwargs.get("headers") or ())
        sent.append((topic, json.loads(value)["id"] if topic != "streammkl.dead-letters" else
                     (int(headers["source_offset"]), headers["error"].decode()[:13])))  # fmt: skip
        return append(topic, value, *args, **kwargs)

    cluster.append = recorded  # type: ignore[method-assign]
    r = Runner(
        make_settings(tmp_path),
        DudLearner(),
        registry=CollectorRegistry(),
        consumer_client=cluster.consumer(0),
        producer_client=cluster.producer(),
    )
    r.run()
    want: list[tuple[str, Any]] = []
    learned = 0
    versions = []
    for i in range(75):  # the loop of single records
        if i in dud:
            want.append(("streammkl.dead-letters", (i, "predict faile")))
            continue
        if i in boom and i not in unlabelled:
            want.append(("streammkl.dead-letters", (i, "learn failed:")))
        want.append(("streammkl.predictions", f"r{i}"))
        versions.append(learned)
        learned += i not in unlabelled and i not in boom
    assert sent == want
    assert [p["model_version"] for p in predictions(cluster)] == versions
    c = r.counters
    assert (c["records_predicted"], c["examples_learned"], c["dead_letters"]) == (72, 65, 6)
    assert c["labelled_predictions"] == 72 - len(unlabelled - dud)
