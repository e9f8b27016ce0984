"""How long a mix record takes from one member to another through the broker.

A mixing round's critical path holds one trip through the mix topic: a member's delta, sent,
read back by the others (docs/scale-out.md). This measures that trip on the embedded Tansu
broker with the mix topic's own clients (:class:`streammkl.daemon.mixing.topic.MixTopic`: an
idempotent producer with ``acks=all``, an assigned reader), for the reader's
``fetch_max_wait_ms`` (the daemon's is 10 ms) and a record the size of a default-bank delta
(``--kb``): a writer sends a record right after the reader's previous record came back, and
the time until the reader has it is taken, ``--n`` times per setting (the median and the 90th
percentile, wall time), with the writer's acknowledgement alone beside it (every other record).

A broker that answers a waiting fetch as soon as a record arrives gives a trip of about the
acknowledgement's time whatever ``fetch_max_wait_ms`` is; a broker that holds the fetch to its
end gives a trip that grows with it.

Run: ``python benchmarks/mix_latency.py [--waits 2 10 50 --n 150 --kb 70]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import add_out, documented_run, machine, markdown, publish

from streammkl.daemon.commands.broker import EmbeddedBroker
from streammkl.daemon.config import load_settings
from streammkl.daemon.mixing import topic as mix_topic


def trips(bootstrap: str, wait_ms: int, n: int, kb: int) -> tuple[list[float], list[float]]:
    """(seconds from send to read back, seconds from send to acknowledgement) of ``n``
    records, the reader's ``fetch_max_wait_ms`` = ``wait_ms``."""
    kafka = load_settings(env={}, overrides={
        "kafka.bootstrap_servers": bootstrap, "kafka.consumer_client": "kafka-python",
        "kafka.producer_client": "kafka-python",
    }).kafka  # fmt: skip
    name = f"mixlatency-{wait_ms}"
    mix_topic.create_mix_topic(kafka, name)
    writer = mix_topic.MixTopic(kafka, name, max_wait_ms=wait_ms)
    reader = mix_topic.MixTopic(kafka, name, max_wait_ms=wait_ms)
    reader.read_to_end()
    state = ({"size": kb}, {"w": np.zeros(kb * 128)})
    read_back: list[float] = []
    acked: list[float] = []
    try:
        for i in range(n):
            rec = mix_topic.MixRecord("delta", i, "writer", state=state, sent=time.time())
            t0 = time.perf_counter()
            handle = writer.send(rec)
            if i % 2:
                writer.confirm(rec, handle)
                acked.append(time.perf_counter() - t0)
            while not reader.read(timeout_ms=20):
                pass
            read_back.append(time.perf_counter() - t0)
            if not i % 2:
                writer.confirm(rec, handle)
            time.sleep(0.003)
    finally:
        writer.close()
        reader.close()
    return read_back, acked


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--waits", type=int, nargs="+", default=[2, 10, 50],
                    help="the reader's fetch_max_wait_ms settings")  # fmt: skip
    ap.add_argument("--n", type=int, default=150, help="records per setting")
    ap.add_argument("--kb", type=int, default=70, help="record size, kB of arrays")
    add_out(ap)
    args = ap.parse_args(argv)
    at = machine()
    rows = []
    with tempfile.TemporaryDirectory(prefix="mix-latency-") as tmp:
        broker = EmbeddedBroker(log_path=Path(tmp) / "tansu.log")
        broker.start()
        try:
            for wait in args.waits:
                back, ack = trips(broker.bootstrap_servers, wait, args.n, args.kb)
                rows.append([
                    wait, f"{1e3 * statistics.median(back):.1f}",
                    f"{1e3 * float(np.percentile(back, 90)):.1f}",
                    f"{1e3 * statistics.median(ack):.1f}",
                ])  # fmt: skip
        finally:
            broker.stop(kill=True)
    table = markdown(
        ["reader's fetch_max_wait_ms", "read back, median ms", "read back, p90 ms",
         "acknowledged, median ms"],
        rows,
    )  # fmt: skip
    body = (
        f"{at}. Embedded Tansu broker, the mix topic's clients (kafka-python), one writer and "
        f"one reader in one process, {args.n} records of {args.kb} kB per setting, each sent "
        "right after the reader got the previous one.\n\n" + table
    )
    publish("mix_latency", "A mix record's trip through the broker", body,
            documented_run(ap, args), args.out)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
