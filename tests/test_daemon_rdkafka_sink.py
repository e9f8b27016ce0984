"""The librdkafka sink against the real broker: delivery, headers, and an outage's outbox."""

from __future__ import annotations

from pathlib import Path

import pytest

from streammkl.daemon.broker import EmbeddedBroker, free_port
from streammkl.daemon.config import load_settings
from streammkl.daemon.rdkafka_sink import RdkafkaSink
from streammkl.daemon.sink import Output
from tests.daemon_kafka import create_topic, read_topic

pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group("kafka")]


def kafka_settings(bootstrap: str) -> object:
    return load_settings(env={}, overrides={"kafka.bootstrap_servers": bootstrap}).kafka


def test_every_output_is_delivered_with_key_and_headers(kafka_bootstrap: str) -> None:
    create_topic(kafka_bootstrap, "sink.p", 1)
    create_topic(kafka_bootstrap, "sink.d", 1)
    sink = RdkafkaSink(kafka_settings(kafka_bootstrap)).start()  # type: ignore[arg-type]
    for i in range(500):
        sink.send_prediction("sink.p", f'{{"i":{i}}}'.encode(), f"k{i}".encode())
    sink.send(Output("sink.d", b"bad", None, (("reason", b"invalid_json"),)))
    assert sink.flush(timeout=30) == []
    assert sink.delivered == 501 and sink.pending == [] and sink.healthy
    preds = read_topic(kafka_bootstrap, "sink.p", 500)
    assert [p.value for p in preds] == [f'{{"i":{i}}}'.encode() for i in range(500)]
    assert [p.key for p in preds] == [f"k{i}".encode() for i in range(500)]
    (dead,) = read_topic(kafka_bootstrap, "sink.d", 1)
    assert dead.value == b"bad" and ("reason", b"invalid_json") in list(dead.headers)
    assert sink.close(timeout=5) == []


def test_outputs_sent_while_the_broker_is_down_come_back_in_the_outbox(tmp_path: Path) -> None:
    port = free_port()
    broker = EmbeddedBroker(port=port, log_path=tmp_path / "tansu.log").start()
    try:
        create_topic(broker.bootstrap_servers, "out", 1)
        sink = RdkafkaSink(kafka_settings(broker.bootstrap_servers)).start()  # type: ignore[arg-type]
        sink.send_prediction("out", b"before", b"k")
        assert sink.flush(timeout=30) == []
        broker.stop(kill=True)
        sent = [Output("out", f"during-{i}".encode(), b"k") for i in range(20)]
        for out in sent:
            sink.send_prediction(out.topic, out.value, out.key)
        outbox = sink.flush(timeout=1.0)  # the broker is away: nothing acknowledged
        assert set(sent) <= set(outbox)  # at least these go into the checkpoint's outbox
        sink.close(timeout=0.5)
        broker = EmbeddedBroker(port=port, log_path=tmp_path / "tansu.log").start()
        create_topic(broker.bootstrap_servers, "out", 1)  # memory-only broker: a new log
        fresh = RdkafkaSink(kafka_settings(broker.bootstrap_servers)).start()  # type: ignore[arg-type]
        fresh.requeue(outbox)  # what a restarted daemon does with the checkpoint's outbox
        assert fresh.flush(timeout=30) == []
        values = [r.value for r in read_topic(broker.bootstrap_servers, "out", 20)]
        assert sorted(set(values)) == sorted(o.value for o in sent)
    finally:
        broker.stop(kill=True)
