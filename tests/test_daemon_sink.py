"""The sink against the real broker, on each producer adapter: delivery, headers, and an outage's
outbox."""

from __future__ import annotations

from pathlib import Path

import pytest

from streammkl.daemon.commands.broker import EmbeddedBroker
from streammkl.daemon.config import load_settings
from streammkl.daemon.kafka.clients import LIBRARIES
from streammkl.daemon.kafka.clients.protocol import Output
from streammkl.daemon.kafka.sink import Sink
from tests.daemon_kafka import create_topic, read_topic

pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group("kafka")]


CLIENTS = pytest.mark.parametrize("client", ["librdkafka", "kafka-python"])


def sink(bootstrap: str, client: str) -> Sink:
    settings = load_settings(env={}, overrides={"kafka.bootstrap_servers": bootstrap}).kafka
    return Sink(settings, LIBRARIES[client].producer).start()


@CLIENTS
def test_every_output_is_delivered_with_key_and_headers(kafka_bootstrap: str, client: str) -> None:
    p, d = f"sink.p.{client}", f"sink.d.{client}"
    create_topic(kafka_bootstrap, p, 1)
    create_topic(kafka_bootstrap, d, 1)
    out = sink(kafka_bootstrap, client)
    for i in range(500):
        out.send_prediction(p, f'{{"i":{i}}}'.encode(), f"k{i}".encode())
    out.send(Output(d, b"bad", None, (("reason", b"invalid_json"),)))
    assert out.flush(timeout=30) == []
    assert out.delivered == 501 and out.pending == [] and out.healthy
    preds = read_topic(kafka_bootstrap, p, 500)
    assert [p.value for p in preds] == [f'{{"i":{i}}}'.encode() for i in range(500)]
    assert [p.key for p in preds] == [f"k{i}".encode() for i in range(500)]
    (dead,) = read_topic(kafka_bootstrap, d, 1)
    assert dead.value == b"bad" and ("reason", b"invalid_json") in list(dead.headers)
    assert out.close(timeout=5) == []


@CLIENTS
def test_outputs_sent_while_the_broker_is_down_come_back_in_the_outbox(
    tmp_path: Path, client: str
) -> None:
    with EmbeddedBroker(log_path=tmp_path / "tansu.log") as broker:  # the test's own, to kill
        bootstrap = broker.bootstrap_servers
        create_topic(bootstrap, "out", 1)
        first = sink(bootstrap, client)
        first.send_prediction("out", b"before", b"k")
        assert first.flush(timeout=30) == []
        broker.stop(kill=True)
        sent = [Output("out", f"during-{i}".encode(), b"k") for i in range(20)]
        for out in sent:
            first.send_prediction(out.topic, out.value, out.key)
        outbox = first.flush(timeout=1.0)  # the broker is away: nothing acknowledged
        assert set(sent) <= set(outbox)  # at least these go into the checkpoint's outbox
        first.close(timeout=0.5)
        broker.start()  # on the same port
        create_topic(bootstrap, "out", 1)  # memory-only broker: a new log
        fresh = sink(bootstrap, client)
        fresh.requeue(outbox)  # what a restarted daemon does with the checkpoint's outbox
        assert fresh.flush(timeout=30) == []
        values = [r.value for r in read_topic(bootstrap, "out", 20)]
        assert sorted(set(values)) == sorted(o.value for o in sent)
