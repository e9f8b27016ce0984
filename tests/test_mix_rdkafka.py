"""The mix topic's clients (the mix log adapters of :mod:`streammkl.daemon.kafka.clients`) on a
broker: what one library writes the other reads, record for record, in order, arrays intact."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from streammkl.daemon.config import load_settings
from streammkl.daemon.kafka.clients import (
    ConfluentMixReader,
    ConfluentMixWriter,
    KafkaPythonMixReader,
    KafkaPythonMixWriter,
    mix_reader_for,
    mix_writer_for,
)
from streammkl.daemon.mixing.topic import MixRecord, MixTopic, create_mix_topic


def _kafka(bootstrap: str, client: str = "librdkafka"):
    return load_settings(env={}, overrides={
        "kafka.bootstrap_servers": bootstrap, "kafka.consumer_client": client,
        "kafka.producer_client": client,
    }).kafka  # fmt: skip


def test_the_settings_name_the_mix_topics_clients() -> None:
    kafka_python = _kafka("localhost:1", "kafka-python")
    assert (mix_writer_for(kafka_python), mix_reader_for(kafka_python)) == (
        KafkaPythonMixWriter, KafkaPythonMixReader,
    )  # fmt: skip
    topic = MixTopic(_kafka("localhost:1"), "mix")  # (librdkafka connects in the background)
    try:
        assert isinstance(topic.writer, ConfluentMixWriter)
        assert isinstance(topic.reader, ConfluentMixReader)
    finally:
        topic.close()


def _deltas(n: int) -> list[MixRecord]:
    rng = np.random.default_rng(0)
    return [MixRecord("delta", i, f"m{i % 2}", examples=i, claims={"t/0": (i, i + 1)},
                      state=({"round": i}, {"w": rng.normal(size=(64, 33)), "n": np.arange(i)}))
            for i in range(n)]  # fmt: skip


def _same(a: MixRecord, b: MixRecord) -> bool:
    assert a.state is not None and b.state is not None
    arrays = a.state[1].keys() == b.state[1].keys() and all(
        np.array_equal(a.state[1][k], b.state[1][k]) for k in a.state[1]
    )
    return (a.key, a.examples, a.claims, a.state[0]) == (b.key, b.examples, b.claims,
                                                         b.state[0]) and arrays  # fmt: skip


@pytest.mark.kafka
@pytest.mark.parametrize(("writer", "reader"), [("librdkafka", "librdkafka"),
                                                ("librdkafka", "kafka-python"),
                                                ("kafka-python", "librdkafka")])  # fmt: skip
def test_what_one_library_writes_the_other_reads_in_order(
    kafka_bootstrap: str, writer: str, reader: str
) -> None:
    name = f"mix-rd-{uuid.uuid4().hex[:6]}"
    create_mix_topic(_kafka(kafka_bootstrap), name)
    out = MixTopic(_kafka(kafka_bootstrap, writer), name)
    into = MixTopic(_kafka(kafka_bootstrap, reader), name)
    try:
        assert into.read_to_end(5) == []  # an empty topic: nothing, and no wait for ever
        sent = _deltas(6)
        for rec in sent[:3]:
            out.publish(rec)  # acknowledged one by one
        handles = [(rec, out.send(rec)) for rec in sent[3:]]
        assert all(h is not None for _, h in handles)
        for rec, handle in handles:
            out.confirm(rec, handle)
        got = into.read_to_end(10)
        assert [g.key for g in got] == [s.key for s in sent]
        assert all(_same(g, s) for g, s in zip(got, sent, strict=True))
        # a gap read again: the reader goes back to the first offset it has not read
        into.reader.seek(2)
        into._next = 2
        again = []
        for _ in range(100):
            again += into.read(timeout_ms=50)
            if len(again) >= 4:
                break
        assert [g.key for g in again] == [s.key for s in sent[2:]]
    finally:
        out.close()
        into.close()
