"""Where the mix writer's ``produce`` of a delta spends its wall time (issue 28, item 1).

In the daemons (2 members, quick form, load ~8) librdkafka's ``produce`` of a ~130 kB delta
took 42-43 us of the loop thread's CPU but 317-712 us of wall time per call, with the GIL held
(confluent-kafka's ``produce`` does not release it). This reproduces the call alone on the
embedded Tansu broker: a :class:`~streammkl.daemon.kafka.clients.confluent.ConfluentMixWriter`
(the mix writer's own settings)
sends ``--n`` records of ``--kb`` kB, one every ``--every-ms`` (a member's rate), each confirmed
before the next as the member does, and each ``produce`` is timed with the wall clock and the
thread's CPU clock (medians, 90th percentiles), with the producing thread's context switches
(voluntary: it blocked, e.g. on a lock; involuntary: the scheduler preempted it) and minor page
faults around it, and a control timed the same way: a copy of the record (a call of about the
same length that holds the GIL and wakes no other thread). Scenarios:

- ``alone``: the writer only;
- ``member``: as in a member, a mix reader polled on the producing thread and a librdkafka
  consumer and producer on another topic in other threads;
- ``member, Python thread``: also a thread that holds the GIL most of the time (a member's
  other Python work), the producing thread doing Python work between sends;
- the same with ``--hogs`` busy-loop processes (the daemons' load), where the writer's settings
  are varied one at a time: ``linger.ms`` 1 and 5, idempotence off, ``batch.size`` above the
  record, ``poll(0)`` before ``produce``, a record of 100 kB.

Run: ``python benchmarks/mix_produce.py [--n 100 --kb 130 --every-ms 40 --hogs 4]``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import confluent_kafka
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import add_out, documented_run, machine, markdown, publish

from streammkl.daemon.commands.broker import EmbeddedBroker
from streammkl.daemon.config import load_settings
from streammkl.daemon.kafka.clients import confluent
from streammkl.daemon.mixing import topic as mix_topic

VARIANTS = {
    "as the writer": {},
    "linger.ms 5": {"linger.ms": 5},
    "idempotence off": {"enable.idempotence": False, "acks": "all"},
    "batch.size 64 MB": {"batch.size": 64 << 20},
    "poll(0) before produce": {"_poll_first": True},
    "record 100 kB": {"_kb": 100},
    "linger.ms 1": {"linger.ms": 1},
}


def hog(stop: Any) -> None:
    x = 0
    while not stop.is_set():
        x += 1


def side_traffic(bootstrap: str, topic: str, stop: threading.Event) -> list[threading.Thread]:
    """A librdkafka producer and consumer on another topic, in their own threads (a member's
    input and sink)."""
    prod = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    cons = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "group.id": "side", "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })  # fmt: skip
    cons.subscribe([topic])

    def produce() -> None:
        payload = b"x" * 200
        while not stop.is_set():
            for _ in range(50):
                prod.produce(topic, payload)
            prod.poll(0)
            time.sleep(0.002)
        prod.flush(5)

    def consume() -> None:
        while not stop.is_set():
            cons.consume(500, 0.01)
        cons.close()

    threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
    for t in threads:
        t.start()
    return threads


def python_work(stop: threading.Event) -> None:
    """A thread that holds the GIL most of the time (a member's other Python threads)."""
    x = np.zeros(64)
    while not stop.is_set():
        for _ in range(200):
            x += 1.0


def run(bootstrap: str, name: str, options: dict[str, Any], member: bool, n: int, kb: int,
        every_ms: float, gil: bool = False) -> tuple[list[float], list[float]]:  # fmt: skip
    """(wall us, thread CPU us) of each ``produce``."""
    kafka = load_settings(env={}, overrides={"kafka.bootstrap_servers": bootstrap}).kafka
    mix_topic.create_mix_topic(kafka, name)
    opts = dict(options)
    poll_first = opts.pop("_poll_first", False)
    kb = opts.pop("_kb", kb)
    writer = confluent.ConfluentMixWriter(kafka, name, mix_topic.MAX_RECORD_BYTES)
    if opts:  # the writer's settings with one changed
        writer.producer.flush(5)
        config = {
            **confluent.mix_config(kafka), "acks": "all", "enable.idempotence": True,
            "linger.ms": 0, "message.max.bytes": mix_topic.MAX_RECORD_BYTES + 1_000_000,
            "request.timeout.ms": 5_000, "message.timeout.ms": 30_000, **opts,
        }  # fmt: skip
        writer.producer = confluent_kafka.Producer(config)
    reader = (
        confluent.ConfluentMixReader(kafka, name, mix_topic.MAX_RECORD_BYTES, 10)
        if member
        else None
    )
    stop = threading.Event()
    threads = side_traffic(bootstrap, f"{name}-side", stop) if member else []
    if gil:
        threads.append(threading.Thread(target=python_work, args=(stop,)))
        threads[-1].start()
    value = np.random.default_rng(0).bytes(kb * 1000)
    wall: list[float] = []
    cpu: list[float] = []
    control_wall: list[float] = []
    control_cpu: list[float] = []
    producer = writer.producer
    try:
        for i in range(n + 5):
            if reader is not None:
                reader.poll(0)
            delivery = confluent.Delivery(producer)
            if poll_first:
                producer.poll(0)
            c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
            bytearray(value)  # a copy of the record that holds the GIL: the control
            t1, c1 = time.perf_counter_ns(), time.thread_time_ns()
            if i >= 5:
                control_wall.append((t1 - t0) / 1e3)
                control_cpu.append((c1 - c0) / 1e3)
            r0 = resource.getrusage(resource.RUSAGE_THREAD)
            c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
            producer.produce(name, value=value, key=b"k%d" % i, partition=0, on_delivery=delivery)
            t1, c1 = time.perf_counter_ns(), time.thread_time_ns()
            r1 = resource.getrusage(resource.RUSAGE_THREAD)
            if i >= 5:
                SWITCHES.append(
                    (
                        r1.ru_nvcsw - r0.ru_nvcsw,
                        r1.ru_nivcsw - r0.ru_nivcsw,
                        r1.ru_minflt - r0.ru_minflt,
                        (t1 - t0) / 1e3,
                    )
                )
            producer.poll(0)
            if i >= 5:
                wall.append((t1 - t0) / 1e3)
                cpu.append((c1 - c0) / 1e3)
            end = time.perf_counter() + every_ms / 1e3
            while time.perf_counter() < end:  # the member's learning, with the reader's polls
                if gil:
                    sum(range(2_000))  # the loop thread's own Python work
                    if reader is not None:
                        reader.poll(0)
                elif reader is not None:
                    reader.poll(10)
                else:
                    time.sleep(0.005)
            delivery.wait(30)
    finally:
        stop.set()
        for t in threads:
            t.join()
        producer.flush(5)
        if reader is not None:
            reader.close()
    CONTROLS.append((control_wall, control_cpu))
    return wall, cpu


SLOW_US = 150

#: (voluntary switches, involuntary switches, minor faults, wall us) of each timed produce
SWITCHES: list[tuple[int, int, int, float]] = []
CONTROLS: list[tuple[list[float], list[float]]] = []


def summary(xs: list[float]) -> str:
    return f"{statistics.median(xs):.0f} / {float(np.percentile(xs, 90)):.0f}"


def row(scenario: str, variant: str, wall: list[float], cpu: list[float]) -> list[Any]:
    control_wall, _ = CONTROLS[-1]
    slow = [x for x in SWITCHES if x[3] > SLOW_US]
    return [
        scenario, variant, summary(wall), summary(cpu), summary(control_wall),
        f"{len(slow)} / {len(SWITCHES)}",
        f"{sum(x[0] for x in slow)} / {sum(x[1] for x in slow)}",
        f"{statistics.median(x[2] for x in SWITCHES):.0f}",
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100, help="records per row")
    ap.add_argument("--kb", type=int, default=130, help="record size, kB")
    ap.add_argument("--every-ms", type=float, default=40.0, help="ms between records")
    ap.add_argument("--hogs", type=int, default=4, help="busy-loop processes for 'hog'")
    ap.add_argument("--variants", nargs="*", default=list(VARIANTS),
                    help="writer settings varied (in the last scenario)")  # fmt: skip
    add_out(ap)
    args = ap.parse_args(argv)
    at = machine()
    rows = []
    hogs: list[Any] = []
    stop = multiprocessing.Event()
    scenarios = [("alone", False, False, 0), ("member", True, False, 0),
                 ("member, Python thread", True, True, 0)]  # fmt: skip
    scenarios += [(f"member, Python thread, {args.hogs} hogs", True, True, args.hogs)]
    with tempfile.TemporaryDirectory(prefix="mix-produce-") as tmp:
        broker = EmbeddedBroker(log_path=Path(tmp) / "tansu.log")
        broker.start()
        try:
            boot = broker.bootstrap_servers
            for k, (label, member, gil, n_hogs) in enumerate(scenarios):
                last = k == len(scenarios) - 1
                while len(hogs) < n_hogs:
                    hogs.append(multiprocessing.Process(target=hog, args=(stop,)))
                    hogs[-1].start()
                for j, variant in enumerate(args.variants if last else ["as the writer"]):
                    SWITCHES.clear()
                    wall, cpu = run(boot, f"mp-{k}-{j}", VARIANTS[variant], member, args.n,
                                    args.kb, args.every_ms, gil)  # fmt: skip
                    rows.append(row(label, variant, wall, cpu))
                    print(rows[-1], flush=True)
        finally:
            stop.set()
            for p in hogs:
                p.join()
            broker.stop(kill=True)
    table = markdown(
        ["scenario", "writer", "produce wall us, median / p90", "produce CPU us, median / p90",
         "a 130 kB copy, wall us", f"produces > {SLOW_US} us",
         "their switches, voluntary / involuntary", "minor faults per produce"],
        rows,
    )  # fmt: skip
    body = (
        f"{at}. Embedded Tansu broker; {args.n} records of {args.kb} kB per row, one every "
        f"{args.every_ms:g} ms, each confirmed before the next. 'member': a mix reader polled "
        "on the producing thread and a librdkafka consumer and producer on another topic; "
        "'Python thread': a thread beside it that holds the GIL most of the time (the "
        "producing thread then does Python work between sends, polling the reader without "
        "waiting); hogs: busy-loop processes. The copy is timed the same way just before each "
        "produce (a call of the same length that holds the GIL and wakes no thread). "
        "Switches and faults: the producing thread's getrusage(RUSAGE_THREAD) around each "
        "produce.\n\n" + table
    )
    publish("mix_produce", "The mix writer's produce of a delta", body,
            documented_run(ap, args), args.out)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
