"""What a batch costs the daemon's loop, whatever its size: CPU per record against batch size.

Why a mixing group member's own prequential path and input source cost about twice a lone
daemon's per record (issue 28; ``group_cpu.md``: 9.1-10.6 µs + 3.7-5.0 in the hooks' drains
against 5.4, input 3.3-5.2 against 1.9): a member's rounds cut its batches at two points per
round (``mixing.ahead_records`` = 60 after its publish, where it takes the merged model, and
K = 250, where it publishes), so it handles a batch of 60 and one of 190 per 250 records,
where a lone daemon takes up to ``kafka.max_poll_records`` = 2,000 at a time. This runs a lone
:class:`~streammkl.daemon.loop.runner.Runner` in process (in-memory Kafka: the tests' fakes,
each poll returning all it has; the default learner, the monitor off, as ``scale_out.py``'s
daemons) over ``scale_out.py``'s kernel-drift stream in 3 partitions, once per batch size
(``kafka.max_poll_records``), and reports the CPU per learned record after the first 2,000:
the loop thread's (``time.thread_time``) and the process's (every thread: the learner's
compiled runs too). The fakes' own Python (the in-memory producer's appends) is in both; its
share per record does not depend on the batch size.

With ``--vs CHECKOUT`` each repetition runs this checkout and that one alternately, each in
its own process; the table gives medians over ``--reps``.

    python benchmarks/loop_batch_cost.py [--records 20000] [--limits 60,190,2000] [--reps 3]
        [--vs ../main]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def child(records: int, limit: int) -> dict[str, float]:
    """One run in this process (the checkout on ``sys.path``): CPU µs per learned record."""
    import random

    from prometheus_client import CollectorRegistry

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import mixing_rounds

    from streammkl.daemon.config import load_settings
    from streammkl.daemon.loop.runner import Runner
    from tests.daemon_fakes import FakeCluster

    class Whole(random.Random):
        """The fakes' fetch without its random holds and sizes: every poll returns all."""

        def random(self) -> float:
            return 0.99

        def randint(self, a: int, b: int) -> int:
            return 1 << 30

    recs, classes = mixing_rounds.stream(records, 0)
    cluster = FakeCluster()
    cluster.create("in", 3)
    for i, r in enumerate(recs):
        cluster.append("in", json.dumps({"x": r.x, "y": r.y}).encode(), i % 3, None, i)
    with tempfile.TemporaryDirectory() as d:
        settings = load_settings(env={}, overrides={
            "records.classes": classes, "monitor.enabled": False, "kafka.topics": ["in"],
            "checkpoint.dir": d, "kafka.max_poll_records": limit, "metrics.enabled": False,
            "kafka.create_topics": False,
        })  # fmt: skip
        runner = Runner(settings, registry=CollectorRegistry(),
                        consumer_client=cluster.consumer(0),
                        producer_client=cluster.producer())  # fmt: skip
        runner.start()
        runner.source.consumer.rng = Whole(0)  # type: ignore[union-attr]
        c = runner.counters
        while c["examples_learned"] < 2000 and runner.tick():
            pass
        p0, t0, n0, ticks = time.process_time(), time.thread_time(), c["examples_learned"], 0
        while c["examples_learned"] < records - 1 and runner.tick():
            ticks += 1
        runner.prequential.drain()
        process, loop = time.process_time() - p0, time.thread_time() - t0
        learned = c["examples_learned"] - n0
        runner._shutdown()
    return {"loop": 1e6 * loop / learned, "process": 1e6 * process / learned,
            "batch": learned / max(ticks, 1)}  # fmt: skip


def fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """``(fixed µs per batch, µs per record)``: the least-squares line through the points
    ``(records per batch, loop µs per record)``, each as the batch's cost (their product)."""
    xs = [b for b, _ in points]
    ys = [b * us for b, us in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    per = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return my - per * mx, per


def run(checkout: Path, records: int, limit: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(checkout), "OPENBLAS_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child", str(checkout),
         "--records", str(records), "--limits", str(limit)],
        env=env, cwd=checkout, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--limits", default="60,190,2000", help="kafka.max_poll_records values")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--vs", default=None, help="another checkout, run alternately")
    ap.add_argument("--out", default=None, help="write the table here too")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    limits = [int(v) for v in args.limits.split(",")]
    if args.child is not None:
        print(json.dumps(child(args.records, limits[0])))
        return 0
    checkouts = [("this checkout", ROOT)]
    if args.vs:
        checkouts.append(("vs", Path(args.vs).resolve()))
    results: dict[tuple[str, int], list[dict[str, float]]] = {}
    load0 = os.getloadavg()[0]
    for _ in range(args.reps):
        for limit in limits:
            for name, path in checkouts:
                res = run(path, args.records, limit)
                results.setdefault((name, limit), []).append(res)
                print(f"{name} batch {limit}: {res}", file=sys.stderr, flush=True)
    load1 = os.getloadavg()[0]
    lines = [
        f"CPython {sys.version.split()[0]}, {os.cpu_count()} cores, load average {load0:.2f} "
        f"at start, {load1:.2f} at the end, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. "
        f"{args.records:,} records, {args.reps} alternated runs per checkout (this checkout: "
        f"{ROOT}{', vs: ' + str(Path(args.vs).resolve()) if args.vs else ''}); medians.",
        "",
        "| kafka.max_poll_records | checkout | records per batch | loop thread µs / record "
        "| process µs / record |",
        "|---|---|---|---|---|",
    ]
    meds: dict[tuple[str, int], dict[str, Any]] = {}
    for limit in limits:
        for name, _ in checkouts:
            rs = results[(name, limit)]
            med = meds[(name, limit)] = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
            runs = ", ".join(f"{r['loop']:.1f}" for r in rs)
            lines.append(f"| {limit:,} | {name} | {med['batch']:.0f} | {med['loop']:.2f} "
                         f"({runs}) | {med['process']:.2f} |")  # fmt: skip
    lines += ["", "A least-squares line through the medians, the loop thread's CPU per batch "
              "against its records:", ""]  # fmt: skip
    for name, _ in checkouts:
        medians = [meds[(name, limit)] for limit in limits]
        fixed, per = fit([(med["batch"], med["loop"]) for med in medians])
        lines.append(f"- {name}: {fixed / 1e3:.3f} ms per batch + {per:.2f} µs per record")
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
