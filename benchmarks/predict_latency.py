"""Prediction latency of the daemon's model outside Kafka: ``streammkl export`` then ``load``.

The daemon's default learner (``MKLClassifier()``, what ``[learner]`` builds by default) learns
``--train`` records of the ``kernel-drift`` scenario through the daemon's own prequential call
(``learn_predict_one``), is saved and loaded back the way ``streammkl export CKPT model.smkl``
and ``MKLClassifier.load("model.smkl")`` do (the learner's state file), and then predicts
``--n`` unseen records one call each (``predict_proba_one``, after 200 warm-up calls): the p50
and p99 of the wall-clock latency per call. The loaded model's predictions are checked equal to
the trained one's.

Then, unless ``--no-daemon``, the real thing: the embedded broker and a daemon process with
``metrics.predict = true`` learn the same ``--train`` records; once ``POST /predict`` serves a
snapshot of all of them, ``--http-n`` requests (one record each, a new connection each, as the
server closes every connection; ``http.client``) give the endpoint's p50/p99, and
``--kafka-n`` predict-only records sent one at a time (each waited for on the predictions topic
before the next is sent) give the Kafka round trip's p50/p99 on the same broker and daemon.
The issue's figure (p50 259 ms, max 2.7 s, measured in issue 30 during a demo) is shown beside.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _table

from simulators import get
from streammkl.river import MKLClassifier

KAFKA_ROUND_TRIP_P50_MS = 259.0  # issue 30 (the bundled broker, during a demo)


def _post(port: int, body: bytes) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", "/predict", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def daemon_latencies(
    records: list[Any], train: int, http_n: int, kafka_n: int
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """(HTTP POST /predict latencies, Kafka round-trip latencies) in ms, on a real daemon."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    from streammkl import wire
    from streammkl.daemon.commands.broker import EmbeddedBroker, free_port
    from tests import daemon_kafka as dk

    tmp = Path(tempfile.mkdtemp(prefix="predict-latency-"))
    broker = EmbeddedBroker(log_path=tmp / "tansu.log")
    broker.start()
    proc = None
    try:
        bootstrap = broker.bootstrap_servers
        topic = dk.unique("latency")
        dk.create_topic(bootstrap, topic, 1)
        port = free_port()
        argv = dk.daemon_argv(
            bootstrap, topic, dk.unique("g"), tmp / "ck", port=port,
            settings={"metrics.predict": True, "checkpoint.every_seconds": 1.0},
        )  # fmt: skip
        proc = dk.start_daemon(argv, tmp / "daemon.log")
        dk.produce(bootstrap, topic, [wire.encode(r) for r in records[:train]])
        probe = [wire.encode(wire.Record(x=r.x)) for r in records[train:]]

        def ready() -> bool:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError((tmp / "daemon.log").read_text())
            try:
                code, body = _post(port, probe[0])
            except OSError:
                return False
            return code == 200 and json.loads(body)["model_version"] == train

        dk.wait_until(ready, 600, "the daemon to serve a snapshot of every record", 0.5)
        for body in probe[:50]:  # warm-up
            _post(port, body)
        http_ms = []
        for i in range(http_n):
            t0 = time.perf_counter()
            code, _ = _post(port, probe[i % len(probe)])
            http_ms.append((time.perf_counter() - t0) * 1e3)
            assert code == 200
        # the Kafka round trip: one predict-only record at a time, its prediction awaited
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        out = TopicPartition(f"{topic}.predictions", 0)
        consumer.assign([out])
        consumer.seek_to_end(out)
        producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
        kafka_ms = []
        for i in range(kafka_n):
            rid = uuid.uuid4().hex
            rec = records[train + i % len(probe)]
            t0 = time.perf_counter()
            producer.send(topic, wire.encode(wire.Record(x=rec.x, id=rid))).get(timeout=30)
            seen = False
            while not seen and time.perf_counter() - t0 < 30:
                for batch in consumer.poll(timeout_ms=50).values():
                    seen = seen or any(json.loads(m.value)["id"] == rid for m in batch)
            if seen:
                kafka_ms.append((time.perf_counter() - t0) * 1e3)
        producer.close(timeout=5)
        consumer.close(autocommit=False)
        info = {"kafka_lost": kafka_n - len(kafka_ms)}
        return np.array(http_ms), np.array(kafka_ms), info
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=60)
        broker.stop(kill=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=5000)
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--http-n", type=int, default=1000, help="POST /predict requests timed")
    parser.add_argument("--kafka-n", type=int, default=100, help="Kafka round trips timed")
    parser.add_argument("--no-daemon", action="store_true", help="the in-process figure only")
    _table.add_out(parser)
    args = parser.parse_args(argv)
    total = args.train + args.n + 200
    records = list(itertools.islice(get("kernel-drift", seed=0, n_samples=total), total))
    model = MKLClassifier()
    for r in records[: args.train]:
        model.learn_predict_one(r.x, r.y)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.smkl"
        model.save(path)
        loaded = MKLClassifier.load(path)
        size = os.path.getsize(path)
    test = [r.x for r in records[args.train :]]
    for x in test[:200]:
        assert loaded.predict_proba_one(x) == model.predict_proba_one(x)
    times = []
    for x in test[200:]:
        t0 = time.perf_counter()
        loaded.predict_proba_one(x)
        times.append(time.perf_counter() - t0)
    us = np.array(times) * 1e6
    p50, p99 = float(np.percentile(us, 50)), float(np.percentile(us, 99))
    kafka_p50 = KAFKA_ROUND_TRIP_P50_MS
    measured: list[list[str]] = []
    notes = ""
    if not args.no_daemon:
        http_ms, kafka_ms, info = daemon_latencies(records, args.train, args.http_n, args.kafka_n)
        if kafka_ms.size:
            kafka_p50 = float(np.percentile(kafka_ms, 50))
        h50, h99 = float(np.percentile(http_ms, 50)), float(np.percentile(http_ms, 99))
        measured = [
            ["daemon POST /predict over HTTP (new connection each)", f"{h50:.2f} ms",
             f"{h99:.2f} ms", f"{kafka_p50 / h50:,.0f}x faster"],
        ]  # fmt: skip
        if kafka_ms.size:
            k99 = float(np.percentile(kafka_ms, 99))
            measured.append(["Kafka round trip through the same daemon (measured)",
                             f"{kafka_p50:.1f} ms", f"{k99:.1f} ms", "reference"])  # fmt: skip
        notes = (
            f" HTTP: {len(http_ms)} requests; Kafka: {kafka_ms.size} round trips, one record at a "
            f"time ({info['kafka_lost']} not seen within 30 s)."
        )
        print("\n".join(" | ".join(row) for row in measured))
    rows = [
        ["exported model, in process (predict_proba_one)", f"{p50:.1f} µs", f"{p99:.1f} µs",
         f"{kafka_p50 * 1e3 / p50:,.0f}x faster"],
        *measured,
        ["Kafka round trip through the daemon (issue 30, a demo)",
         f"{KAFKA_ROUND_TRIP_P50_MS:.0f} ms", "max 2.7 s", "the issue's figure"],
    ]  # fmt: skip
    body = (
        f"{_table.machine()}\n\n"
        f"Model: MKLClassifier() after {args.train} kernel-drift records; state file {size:,} "
        f"bytes; {len(times)} timed calls.{notes}\n\n"
        + _table.markdown(["route", "p50", "p99", "vs Kafka p50"], rows)
    )
    full = _table.documented_run(parser, args)
    _table.publish("predict_latency", "Prediction outside Kafka: latency", body, full, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
