"""The Kafka producer: delivery checks, fresh producers after errors, rate limit, keys; and the
real thing against the embedded broker (``-m kafka``)."""

from __future__ import annotations

import json
import warnings

import pytest

with warnings.catch_warnings():  # kafka-python 3.0 uses deprecated importlib.resources calls
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.errors import IllegalStateError, UnknownProducerIdError
    from kafka.future import Future

import simulators.kafka_producer as kp
from simulators import cli, get
from simulators.kafka_producer import ProduceError, produce
from streammkl.wire import Record, decode


class FakeProducer:
    """Acknowledges on flush; after ``fail_after`` deliveries every future fails (like an
    idempotent producer after a broker restart); ``send_raises`` makes ``send`` itself fail."""

    def __init__(self, delivered, fail_after=None, send_raises=False):
        self.delivered, self.fail_after, self.send_raises = delivered, fail_after, send_raises
        self.pending, self.count, self.closed = [], 0, False

    def send(self, topic, value=None, key=None):
        if self.send_raises:
            raise IllegalStateError("producer is in a fatal state")
        fut = Future()
        self.pending.append((fut, topic, key, value))
        return fut

    def flush(self, timeout=None):
        for fut, topic, key, value in self.pending:
            if self.fail_after is not None and self.count >= self.fail_after:
                fut.failure(UnknownProducerIdError("lost"))
            else:
                self.delivered.append((topic, key, value))
                self.count += 1
                fut.success(None)
        self.pending = []

    def close(self, timeout=None):
        self.closed = True


class Factory:
    def __init__(self, *behaviours):
        self.behaviours, self.delivered, self.made = list(behaviours), [], []

    def __call__(self):
        kwargs = self.behaviours.pop(0) if self.behaviours else {}
        self.made.append(FakeProducer(self.delivered, **kwargs))
        return self.made[-1]


class FakeTime:
    def __init__(self):
        self.now, self.slept = 100.0, 0.0

    def monotonic(self):
        return self.now

    def time(self):
        return 1e9 + self.now

    def sleep(self, seconds):
        self.now += seconds
        self.slept += seconds


@pytest.fixture
def fake_time(monkeypatch):
    clock = FakeTime()
    monkeypatch.setattr(kp, "time", clock)
    return clock


def test_every_record_delivered_once_through_fresh_producers(fake_time):
    sim = get("kernel-drift", phase_length=400)
    factory = Factory({"fail_after": 700}, {"send_raises": True}, {})
    stats = produce(sim, topic="t", producer_factory=factory, batch_size=500, progress=False)
    assert stats.sent == 1200 and stats.recreated == 2
    assert "IllegalStateError" in stats.last_error
    assert len(factory.made) == 3 and factory.made[0].closed and factory.made[1].closed
    values = [value for _, _, value in factory.delivered]
    assert sorted(decode(v).id for v in values) == sorted(r.id for r in sim)  # each exactly once
    assert [decode(v) for v in values[:700]] == sim.take(700)  # order kept before the failure


def test_gives_up_after_max_failures_naming_the_error(fake_time):
    factory = Factory(*[{"fail_after": 0}] * 10)
    with pytest.raises(ProduceError, match=r"10 records undelivered to 't' .* UnknownProducerId"):
        produce(
            get("kernel-drift", phase_length=10),
            topic="t",
            producer_factory=factory,
            count=10,
            max_failures=3,
            progress=False,
        )
    assert len(factory.made) == 3


def test_rate_limit_paces_the_records(fake_time):
    factory = Factory()
    stats = produce(
        get("stationary-mixture", n_samples=500),
        topic="t",
        rate=100.0,
        count=201,
        producer_factory=factory,
        progress=False,
    )
    assert stats.sent == 201
    assert fake_time.slept == pytest.approx(2.0, abs=0.011)  # record i leaves at t0 + i / rate
    free = FakeTime()
    kp.time = free  # undone by monkeypatch
    produce(
        get("stationary-mixture", n_samples=50),
        topic="t",
        producer_factory=Factory(),
        progress=False,
    )
    assert free.slept == 0.0


def test_keys_count_and_wall_clock_timestamps(fake_time):
    factory = Factory()
    produce(
        get("stationary-mixture", n_samples=50),
        topic="t",
        key="{scenario}/{index}/{id}",
        key_context={"scenario": "sm"},
        count=3,
        wall_clock_ts=True,
        producer_factory=factory,
        progress=False,
    )
    assert [key for _, key, _ in factory.delivered] == [
        f"sm/{i}/stationary-mixture:0:{i}".encode() for i in range(3)
    ]
    assert all(decode(v).ts == 1e9 + 100.0 for _, _, v in factory.delivered)
    factory = Factory()
    produce([Record(x=[1.0], y=True)], topic="t", producer_factory=factory, progress=False)
    assert factory.delivered == [("t", None, b'{"x":[1.0],"y":true}')]
    with pytest.raises(ValueError, match=r"key template '\{nope\}' is invalid"):
        produce([], topic="t", key="{nope}", producer_factory=Factory(), progress=False)
    with pytest.raises(ValueError, match="rate must be > 0"):
        produce([], topic="t", rate=0, producer_factory=Factory(), progress=False)


# --- against a real Kafka-protocol broker -----------------------------------------------------


def consume_all(bootstrap, topic, expected, timeout_ms=5000):
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=timeout_ms,
    )
    try:
        parts = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        out = []
        for msg in consumer:
            out.append(msg)
            if len(out) >= expected:
                break
        return out
    finally:
        consumer.close()


@pytest.mark.kafka
@pytest.mark.xdist_group("kafka")
def test_simulate_to_kafka_round_trip(kafka_bootstrap, tmp_path):
    topic = "simulators-round-trip"
    argv = [
        "kernel-drift",
        "--seed",
        "2",
        "--phase-length",
        "100",
        "--bootstrap-servers",
        kafka_bootstrap,
        "--topic",
        topic,
        "--no-progress",
        "--truth",
        str(tmp_path / "t.json"),
    ]
    assert cli.main(argv) == 0
    messages = consume_all(kafka_bootstrap, topic, 300)
    assert len(messages) == 300
    assert {m.key for m in messages} == {b"kernel-drift"}
    assert len({m.partition for m in messages}) == 1
    records = [decode(m.value) for m in sorted(messages, key=lambda m: m.offset)]
    assert records == list(get("kernel-drift", seed=2, phase_length=100))  # in stream order
    assert json.loads((tmp_path / "t.json").read_text())["n_samples"] == 300


@pytest.mark.kafka
@pytest.mark.xdist_group("kafka")
def test_producer_recreated_after_a_broker_restart(tmp_path):
    """The idempotent producer is broken for good by a restart; a fresh one delivers the rest."""
    from streammkl.daemon.commands.broker import BrokerError, EmbeddedBroker

    broker = EmbeddedBroker(log_path=tmp_path / "tansu.log")
    try:
        broker.start()
    except BrokerError as exc:
        pytest.skip(f"embedded Tansu broker unavailable: {exc}")
    port = int(broker.bootstrap_servers.rsplit(":", 1)[1])
    current = {"broker": broker}

    def records():
        for i, record in enumerate(get("kernel-drift", phase_length=100)):
            if i == 150:  # restart (memory-only: records 0-149 are gone with the old broker)
                current["broker"].stop(kill=True)
                current["broker"] = EmbeddedBroker(port=port, log_path=tmp_path / "tansu2.log")
                current["broker"].start()
            yield record

    try:
        stats = produce(
            records(),
            topic="restart",
            bootstrap_servers=broker.bootstrap_servers,
            batch_size=50,
            flush_timeout=10.0,
            max_failures=4,
            progress=False,
        )
        assert stats.sent == 300 and stats.recreated >= 1
        messages = consume_all(broker.bootstrap_servers, "restart", 150)
        ids = sorted(int(decode(m.value).id.rsplit(":", 1)[1]) for m in messages)
        assert ids == list(range(150, 300))  # everything after the restart, exactly once
    finally:
        current["broker"].stop(kill=True)
