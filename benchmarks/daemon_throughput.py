"""Daemon throughput: raw kafka-python consume + JSON decode vs the daemon end to end.

One broker (the embedded Tansu, or ``KAFKA_BOOTSTRAP``), the same records (river's Bananas, cycled
to ``--records``, one partition), every path measured back to back in each of ``--reps``
repetitions; the table gives medians (and the min-max range) because the machine is shared:

1. raw: a kafka-python group consumer, ``poll(max_records=2000)``, ``json.loads`` of every value,
   one commit per batch (KAFKA.md's reference loop);
2. the daemon (:class:`streammkl.daemon.runner.Runner`, in-process, default learner and
   settings): decode -> fused predict+learn round -> produce a prediction, checkpoints on;
3. the same daemon without the predictions topic (what producing costs);
4. the daemon with the previous hot path: predict then learn (two model evaluations per record)
   and the previous producer settings (linger 5 ms, 16 KiB batches);
5. the producer alone: one prediction-sized message per record with the daemon's producer
   settings, acknowledged (the ceiling of any path that produces a message per record);
6. the learner alone, no Kafka: predict_proba_one + learn_one, and the daemon's fused round.

Rates are records per second from the partition assignment to the last record handled (daemon:
predictions acknowledged); CPU is the process's CPU time (all threads) per record over the same
span — less sensitive to the machine's load than the rate. Learn latency: every learning round
inside the daemon, timed (p50/p99). Writes ``benchmarks/results/daemon_throughput.md``.

    python benchmarks/daemon_throughput.py [--records 20000] [--reps 5] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

import numpy as np

warnings.filterwarnings("ignore", category=DeprecationWarning)

from kafka import ConsumerRebalanceListener, KafkaConsumer, KafkaProducer  # noqa: E402
from kafka.structs import OffsetAndMetadata  # noqa: E402
from prometheus_client import CollectorRegistry  # noqa: E402

from streammkl import wire  # noqa: E402
from streammkl.daemon.broker import EmbeddedBroker  # noqa: E402
from streammkl.daemon.config import load_settings  # noqa: E402
from streammkl.daemon.learner import build_learner  # noqa: E402
from streammkl.daemon.monitoring import StreamMonitor  # noqa: E402
from streammkl.daemon.runner import Runner  # noqa: E402
from streammkl.daemon.sink import producer_config  # noqa: E402
from streammkl.daemon.steps import LearnerStep, make_step  # noqa: E402
from streammkl.daemon.topics import ensure_topics  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "daemon_throughput.md"
FAST = {"session_timeout_ms": 2000, "heartbeat_interval_ms": 500}
PREVIOUS = {"kafka.producer_linger_ms": 5, "kafka.producer_batch_bytes": 16_384}


def bananas(n: int) -> list[bytes]:
    from river import datasets

    rows = [({k: float(v) for k, v in x.items()}, bool(y)) for x, y in datasets.Bananas()]
    out = []
    for i in range(n):
        x, y = rows[i % len(rows)]
        out.append(json.dumps({"x": x, "y": y, "id": str(i)}, separators=(",", ":")).encode())
    return out


class Clock:
    """Wall and process-CPU time between ``start`` and ``stop``."""

    def start(self) -> None:
        self.t0, self.c0 = time.perf_counter(), time.process_time()

    def stop(self, n: int) -> dict[str, float]:
        wall, cpu = time.perf_counter() - self.t0, time.process_time() - self.c0
        return {"rate": n / wall, "cpu_us": cpu / n * 1e6}


def produce(
    bootstrap: str, topic: str, values: list[bytes], warm: bool = False, **config: Any
) -> dict[str, float]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, **config)
    if warm:  # metadata and connection before the clock
        producer.send(topic, values[0]).get(timeout=30)
    clock = Clock()
    clock.start()
    for i, v in enumerate(values):
        producer.send(topic, value=v, key=str(i).encode())
    producer.flush(timeout=120)
    out = clock.stop(len(values))
    producer.close()
    return out


def raw_consume(bootstrap: str, topic: str, n: int) -> dict[str, float]:
    clock = Clock()

    class Start(ConsumerRebalanceListener):  # the clock starts when partitions are assigned
        def on_partitions_revoked(self, revoked: Any) -> None:
            pass

        def on_partitions_assigned(self, assigned: Any) -> None:
            clock.start()

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=f"raw-{uuid.uuid4().hex[:6]}",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **FAST,
    )
    consumer.subscribe([topic], listener=Start())
    seen = 0
    while seen < n:
        batch = consumer.poll(timeout_ms=500, max_records=2000)
        for tp, records in batch.items():
            for rec in records:
                json.loads(rec.value)
            seen += len(records)
            consumer.commit({tp: OffsetAndMetadata(records[-1].offset + 1, "", -1)})
    out = clock.stop(n)
    consumer.close(autocommit=False)
    return out


def time_rounds(step: Any, seconds: list[float]) -> None:
    """Time every learning round of a learner step (fused or not) into ``seconds``."""
    perf = time.perf_counter

    def timed(method: Any) -> Any:
        def call(x: Any, y: Any) -> Any:
            t0 = perf()
            out = method(x, y)
            if out is not None or method.__name__ == "learn":
                seconds.append(perf() - t0)
            return out

        call.__name__ = method.__name__
        return call

    step.predict_learn = timed(step.predict_learn)
    step.learn = timed(step.learn)


def daemon(
    bootstrap: str,
    topic: str,
    n: int,
    workdir: str,
    predictions: bool,
    previous: bool = False,
    monitor: bool = True,
) -> dict[str, float]:
    overrides = {
        "kafka.bootstrap_servers": bootstrap,
        "kafka.topics": topic,
        "kafka.group_id": f"daemon-{uuid.uuid4().hex[:6]}",
        "kafka.predictions_topic": f"{topic}.predictions" if predictions else "",
        "kafka.dead_letter_topic": f"{topic}.dead-letters",
        "checkpoint.dir": workdir,
        "metrics.enabled": False,
        **{f"kafka.{k}": v for k, v in FAST.items()},
        **(PREVIOUS if previous else {}),
        "monitor.enabled": monitor and not previous,
    }
    runner = Runner(load_settings(env={}, overrides=overrides), registry=CollectorRegistry())
    if previous:
        runner.learner_step = LearnerStep(runner.learner)  # predict, then learn
    rounds: list[float] = []
    time_rounds(runner.learner_step, rounds)
    runner.start()  # restores, warms the learner up, joins the group
    while not runner.source.buffers:  # the clock starts when partitions are assigned
        runner.step()
    clock = Clock()
    clock.start()
    while runner.counters["records_consumed"] < n:
        runner.step()
    left = runner.sink.flush(timeout=60)
    out = clock.stop(n)
    runner.stop()
    runner.run()
    lat = np.array(rounds) * 1e6
    assert runner.counters["examples_learned"] == n and not left, (runner.counters, len(left))
    return {**out, "p50_us": float(np.percentile(lat, 50)), "p99_us": float(np.percentile(lat, 99))}


def learner_alone(
    values: list[bytes], fused: bool, monitor: dict[str, Any] | None = None, repeat: int = 1
) -> dict[str, float]:
    """The learner on decoded records (``repeat`` times over), optionally with the daemon's
    monitor (``monitor``: its settings overrides) — its steady-state cost, comparator included."""
    recs = [wire.decode(v) for v in values] * repeat
    learner = build_learner(load_settings(env={}).learner)
    step = make_step(learner) if fused else LearnerStep(learner)
    step.warm_up()
    watch = None
    if monitor is not None:
        step.track = True
        settings = load_settings(env={}, overrides={f"monitor.{k}": v for k, v in monitor.items()})
        watch = StreamMonitor(settings.monitor, tempfile.mkdtemp())
    clock = Clock()
    clock.start()
    for rec in recs:
        if step.predict_learn(rec.x, rec.y) is None:
            step.predict(rec.x)
            step.learn(rec.x, rec.y)
        if watch is not None:
            watch.observe(learner.core, step.last_round, None)
    out = clock.stop(len(recs))
    if watch is not None:
        watch.close()
    return out


def summary(runs: list[dict[str, float]], key: str) -> tuple[float, float, float]:
    values = [r[key] for r in runs]
    return statistics.median(values), min(values), max(values)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="5000 records, 2 repetitions")
    args = parser.parse_args(argv)
    n, reps = (5_000, 2) if args.quick else (args.records, args.reps)
    external = os.environ.get("KAFKA_BOOTSTRAP")
    broker = None if external else EmbeddedBroker().start()
    bootstrap = external or broker.bootstrap_servers  # type: ignore[union-attr]
    settings = load_settings(env={})
    sink_config = {
        k: v for k, v in producer_config(settings.kafka).items()
        if k in ("acks", "enable_idempotence", "linger_ms", "batch_size")
    }  # fmt: skip
    runs: dict[str, list[dict[str, float]]] = {}
    try:
        topic = f"bench-{uuid.uuid4().hex[:6]}"
        ensure_topics(bootstrap, {topic: 1, f"{topic}.sink": 1})
        values = bananas(n)
        produce_in = produce(bootstrap, topic, values, acks="all", linger_ms=5)
        prediction = b'{"id":"12345","prediction":true,"proba":{"false":0.12345678901234567,'
        prediction += b'"true":0.8765432109876543},"model_version":12345,"topic":"bench-abcdef",'
        prediction += b'"partition":0,"offset":12345}'
        for rep in range(reps):
            order = [
                ("raw", lambda d: raw_consume(bootstrap, topic, n)),
                ("daemon", lambda d: daemon(bootstrap, topic, n, d, True)),
                ("nomonitor", lambda d: daemon(bootstrap, topic, n, d, True, monitor=False)),
                ("nopred", lambda d: daemon(bootstrap, topic, n, d, False, monitor=False)),
                ("previous", lambda d: daemon(bootstrap, topic, n, d, True, previous=True)),
                ("producer", lambda d: produce(
                    bootstrap, f"{topic}.sink", [prediction] * n, True, **sink_config)),
            ]  # fmt: skip
            for name, run in order:
                with tempfile.TemporaryDirectory() as workdir:
                    runs.setdefault(name, []).append(run(workdir))
                print(f"rep {rep + 1}/{reps} {name}: {runs[name][-1]}", flush=True)
        alone = {
            "alone_fused": lambda: learner_alone(values, True),
            "alone_generic": lambda: learner_alone(values, False),
            "alone_monitor": lambda: learner_alone(values, True, {}, repeat=4),
            "alone_monitor_hot": lambda: learner_alone(values, True, {"window": 0}),
        }
        for name, run in alone.items():
            runs[name] = [run() for _ in range(reps)]
    finally:
        if broker is not None:
            broker.stop(kill=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    rows = [
        ("raw kafka-python consume + json.loads (1 commit/batch)", "raw"),
        ("**daemon end to end**, default settings (regret/drift monitor on)", "daemon"),
        ("daemon end to end, monitor off", "nomonitor"),
        ("daemon without the predictions topic, monitor off", "nopred"),
        (
            "daemon, previous hot path (predict then learn; linger 5 ms, 16 KiB; no monitor)",
            "previous",
        ),
        ("producer alone: one prediction-sized message per record, acknowledged", "producer"),
        ("learner alone: fused round (the daemon's), no Kafka", "alone_fused"),
        ("learner alone: predict_proba_one + learn_one, no Kafka", "alone_generic"),
        (f"learner alone + monitor, defaults, steady state ({4 * n} records)", "alone_monitor"),
        ("learner alone + monitor without windowed regret (window = 0)", "alone_monitor_hot"),
    ]
    raw = summary(runs["raw"], "rate")[0]
    lines = [
        "# Daemon throughput",
        "",
        f"Generated by `benchmarks/daemon_throughput.py` — {n} Bananas records (river), one "
        f"partition, default learner and settings, broker "
        f"{'external ' + external if external else 'embedded Tansu'}; {reps} repetitions, each "
        "path back to back in every repetition; medians (min-max). Python "
        f"{platform.python_version()}, {os.cpu_count()} CPUs shared with other jobs, 1-min load "
        f"average {load:.1f} at the end.",
        "",
        "| path | records/s | of raw | CPU µs/record | learn p50 / p99 (µs) |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, key in rows:
        rate, lo, hi = summary(runs[key], "rate")
        cpu = summary(runs[key], "cpu_us")[0]
        lat = ""
        if "p99_us" in runs[key][0]:
            lat = f"{summary(runs[key], 'p50_us')[0]:.0f} / {summary(runs[key], 'p99_us')[0]:.0f}"
        rates = f"{rate:,.0f} ({lo:,.0f}-{hi:,.0f})"
        lines.append(f"| {label} | {rates} | {rate / raw:.0%} | {cpu:.0f} | {lat} |")
    daemon_rate = summary(runs["daemon"], "rate")[0]
    cpu = {key: summary(runs[key], "cpu_us")[0] for key in runs}
    parts = cpu["raw"] + cpu["alone_fused"] + cpu["producer"]
    budget, round_us = 1e6 / (0.8 * raw), 1e6 / summary(runs["alone_fused"], "rate")[0]
    lines += [
        "",
        f"- daemon / raw consume: **{daemon_rate / raw:.0%}** (target ≥ 80%); monitor off: "
        f"{summary(runs['nomonitor'], 'rate')[0] / raw:.0%}.",
        f"- where the CPU goes (µs/record, monitor off): consuming {cpu['raw']:.0f} + the learning "
        f"round {cpu['alone_fused']:.0f} + producing the prediction {cpu['producer']:.0f} = "
        f"{parts:.0f}, against {cpu['nomonitor']:.0f} measured (the rest: decoding, bookkeeping, "
        "GIL hand-offs between the loop and kafka-python's threads).",
        f"- the monitor: {cpu['alone_monitor_hot'] - cpu['alone_fused']:.0f} µs/record on the "
        f"loop (observe, λΩ(θ_t)), and its comparator fits, throttled to 25 % of a core: "
        f"{cpu['alone_monitor'] - cpu['alone_fused']:.0f} µs/record in all over a long run. In the "
        f"daemon rows above (a few seconds each) the first fit weighs more: +"
        f"{cpu['daemon'] - cpu['nomonitor']:.0f} µs/record.",
        f"- 80% of the raw rate is {0.8 * raw:,.0f} records/s, {budget:.0f} µs per record for "
        f"everything; the learning round alone takes {round_us:.0f} µs "
        f"({'more than' if round_us > budget else 'within'} that budget), producing one message "
        f"{1e6 / summary(runs['producer'], 'rate')[0]:.0f} µs.",
        f"- producer settings of the daemon: {json.dumps(sink_config)}; producing the input "
        f"(acks=all, linger 5 ms): {produce_in['rate']:,.0f} records/s.",
        "",
    ]
    text = "\n".join(lines)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
