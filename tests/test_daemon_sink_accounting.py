"""The sink's aggregate delivery accounting and the source's close, on scripted adapters (fast).

The scripted producer holds what it is given "in flight" until the test acknowledges or fails it,
as a real client does between a send and the broker's answer (the real adapters against the
broker: test_kafka_clients.py; the sink end to end on both: test_daemon_sink.py).
"""

from __future__ import annotations

from typing import Any, ClassVar

from prometheus_client import CollectorRegistry

from streammkl.daemon.config import load_settings
from streammkl.daemon.http.metrics import DaemonMetrics
from streammkl.daemon.kafka.clients import Output, Partition
from streammkl.daemon.kafka.sink import Sink
from streammkl.daemon.kafka.source import Source
from tests.daemon_fakes import FakeCluster, FakeConsumer

KAFKA = load_settings(env={}, overrides={"kafka.topics": "in"}).kafka


class ScriptedProducer:
    """A producer adapter whose deliveries the test decides."""

    made: ClassVar[list[ScriptedProducer]] = []

    def __init__(self, settings: Any) -> None:
        self.queue: list[Output] = []  # in flight
        self.delivered: list[Output] = []
        self.failed: list[Output] = []
        self.abandoned = False
        self.events = 0  # librdkafka's queue length also counts unserved events (log lines)
        ScriptedProducer.made.append(self)

    def produce(self, topic: str, value: bytes, key: Any, headers: Any = None) -> None:
        self.queue.append(Output(topic, value, key, tuple(headers or ())))

    def ack(self, n: int) -> None:
        self.delivered += self.queue[:n]
        del self.queue[:n]

    def fail(self, n: int) -> None:
        self.failed += self.queue[:n]
        del self.queue[:n]

    def serve(self, timeout: float) -> None:
        pass

    def failures(self) -> tuple[list[Output], BaseException | None]:
        failed, self.failed = self.failed, []
        return failed, (RuntimeError("refused") if failed else None)

    def in_flight(self) -> int:
        return len(self.queue) + len(self.failed) + self.events

    def flush(self, timeout: float) -> None:
        pass

    def abandon(self) -> None:
        self.abandoned = True
        self.fail(len(self.queue))

    def close(self) -> None:
        pass


def sink() -> tuple[Sink, DaemonMetrics]:
    ScriptedProducer.made = []
    metrics = DaemonMetrics(CollectorRegistry())
    return Sink(KAFKA, ScriptedProducer, metrics).start(), metrics


def values(outputs: list[Any]) -> list[bytes]:
    return [o[1] for o in outputs]


def test_acknowledgements_are_counted_without_a_report_per_message() -> None:
    out, metrics = sink()
    producer = ScriptedProducer.made[0]
    for i in range(5):
        out.send_prediction("p", b"%d" % i, None)
    producer.ack(3)
    out.poll()
    assert out.delivered == 3 and len(out.pending) == 5  # kept until nothing is in flight
    assert values(out.unacknowledged()) == [b"0", b"1", b"2", b"3", b"4"]  # a superset
    producer.ack(2)
    out.poll()
    assert out.delivered == 5 and out.pending == [] and out.healthy
    assert metrics.registry.get_sample_value("streammkl_outputs_acknowledged_total") == 5


def test_a_queue_length_that_also_counts_events_never_uncounts_an_acknowledgement() -> None:
    out, metrics = sink()
    producer = ScriptedProducer.made[0]
    for i in range(4):
        out.send_prediction("p", b"%d" % i, None)
    producer.ack(2)
    out.poll()
    assert out.delivered == 2
    producer.events = 3  # a burst of log events: the queue looks longer than what is in flight
    out.poll()  # used to count -3 acknowledgements (a counter cannot decrease: the loop died)
    assert out.delivered == 2
    producer.events = 0
    producer.ack(2)
    out.poll()
    assert out.delivered == 4 and out.pending == []
    assert metrics.registry.get_sample_value("streammkl_outputs_acknowledged_total") == 4


def test_a_failure_restarts_the_producer_and_every_unacknowledged_output_is_sent_again() -> None:
    out, metrics = sink()
    first = ScriptedProducer.made[0]
    for i in range(4):
        out.send(Output("p", b"%d" % i, b"k", (("h", b"v"),)))
    first.ack(1)
    first.fail(1)  # "1" failed; "2" and "3" still in flight when the producer is replaced
    out.poll()
    assert first.abandoned and len(ScriptedProducer.made) == 2
    second = ScriptedProducer.made[1]
    assert second.queue == [Output("p", b"1", b"k", (("h", b"v"),))]  # re-sent at once
    assert not out.healthy
    # the abandoned producer's "2", "3": parked (one restart per second at most), and in the
    # outbox if a checkpoint came now (with "0", acknowledged: a superset, each output once)
    assert sorted(values(out.flush(timeout=0.0))) == [b"0", b"1", b"2", b"3"]
    second.ack(1)
    out._next_retry = 0.0  # (the retry delay elapsed)
    out.poll()
    third = ScriptedProducer.made[-1]
    assert len(ScriptedProducer.made) == 3 and values(third.queue) == [b"2", b"3"]
    third.ack(2)
    assert out.flush(timeout=1.0) == [] and out.healthy
    assert out.delivered == 4  # "0" to "3", each acknowledged once
    reg = metrics.registry
    assert reg.get_sample_value("streammkl_sink_errors_total") == 3  # each failed send counted
    assert reg.get_sample_value("streammkl_producer_restarts_total") == 2


def test_outputs_not_acknowledged_by_the_deadline_are_returned_for_the_outbox() -> None:
    out, _ = sink()
    producer = ScriptedProducer.made[0]
    out.send_prediction("p", b"a", None)
    out.send_prediction("p", b"b", None)
    producer.ack(1)
    left = out.flush(timeout=0.05)
    assert values(left) == [b"a", b"b"]  # a superset: "a" was acknowledged meanwhile
    assert all(isinstance(o, Output) for o in left)


def test_a_revocation_while_closing_does_not_call_on_revoke() -> None:
    cluster = FakeCluster()
    cluster.create("in", 2)
    revokes: list[int] = []
    consumers: list[FakeConsumer] = []

    def client(settings: Any) -> FakeConsumer:
        consumer = FakeConsumer(cluster, settings, 0)
        consumer.close = lambda: consumer.on_revoke(list(consumer.assigned))  # type: ignore[method-assign]
        consumers.append(consumer)
        return consumer

    source = Source(KAFKA, {}, client, on_revoke=lambda: revokes.append(1)).start()
    source.fetch(0)
    assert source.assignment == [Partition("in", 0), Partition("in", 1)]
    consumers[0].rebalance([Partition("in", 1)])
    source.fetch(0)
    assert revokes == [1] and source.assignment == [Partition("in", 1)]
    source.close()  # the runner checkpointed before closing: no second checkpoint
    assert revokes == [1] and source.assignment == [] and source.consumer is None


class RefusingProducer(ScriptedProducer):
    """Refuses the sends the test lists (by their order): ``BufferError`` (a full queue) or
    another exception (no metadata, ...)."""

    refuse: ClassVar[dict[int, type[Exception]]] = {}

    def __init__(self, settings: Any) -> None:
        super().__init__(settings)
        self.calls = 0

    def produce(self, topic: str, value: bytes, key: Any, headers: Any = None) -> None:
        self.calls += 1
        error = self.refuse.get(self.calls)
        if error is not None:
            raise error("refused")
        super().produce(topic, value, key, headers)


def test_a_batch_of_predictions_is_sent_as_one_prediction_after_the_other() -> None:
    """``send_predictions`` leaves the sink as ``send_prediction`` of each message does: what is
    queued, pending, failed (to be sent again) and unacknowledged, a refused send included."""
    values_ = [b"%d" % i for i in range(7)]
    keys = [None, b"k1", None, b"k3", b"k4", None, b"k6"]
    # "2": a full queue, then accepted; "4": a full queue three times; "6": an error, twice
    RefusingProducer.refuse = {3: BufferError, 6: BufferError, 7: BufferError, 8: BufferError,
                               10: RuntimeError, 11: RuntimeError}  # fmt: skip
    got = []
    for batch in (True, False):
        ScriptedProducer.made = []
        out = Sink(KAFKA, RefusingProducer, DaemonMetrics(CollectorRegistry())).start()
        if batch:
            out.send_predictions("p", values_, keys)
        else:
            for value, key in zip(values_, keys, strict=True):
                out.send_prediction("p", value, key)
        (producer,) = ScriptedProducer.made
        got.append((producer.queue, list(out.pending), out._failed_outputs, out.unacknowledged()))
    assert got[0] == got[1]
    queued, _, failed, _ = got[0]
    assert values(queued) == [b"0", b"1", b"2", b"3", b"5"]
    assert failed == [Output("p", b"4", b"k4"), Output("p", b"6", b"k6")]


def test_a_batch_of_predictions_without_a_producer_waits_to_be_sent() -> None:
    def unavailable(settings: Any) -> Any:
        raise RuntimeError("no broker")

    out = Sink(KAFKA, unavailable, None).start()
    out.send_predictions("p", [b"a", b"b"], [None, b"k"])
    assert out.pending == [] and out.unacknowledged() == [
        Output("p", b"a"),
        Output("p", b"b", b"k"),
    ]
