"""What ``learner.memory_window`` costs the daemon's learner: CPU per record through the daemon's
drivers (``streammkl.daemon.learning.drivers.driver_for``), batches of 2,000 records (the
default ``kafka.max_poll_records``), monitor off.

- ``default, runs``: the default learner (``[learner]`` defaults) as the daemon drives it
  (:class:`MKLDriver`): a classifier in compiled runs; a regressor one round per record (the
  driver has no runs for it);
- ``default, per record``: the same learner one ``learn_predict_one`` per record (the generic
  :class:`LearnerDriver`): what losing the compiled runs alone costs;
- ``memory``: ``learner.memory_window = 1000`` (a ``MemoryClassifier`` or ``MemoryRegressor``
  around the same learner), which the daemon drives with :class:`LearnerDriver`, one record at a
  time.

CPU time (``time.process_time``) per record on the dense classification streams of
``river_speed.py`` and on the first 5,000 examples of the suite's Friedman regression stream
(``synth.Friedman(seed=42)``) (warmed on the first 1,100 examples, timed on the rest), the
three runs interleaved repetition by repetition: medians of ``--reps``. Kafka, decoding and the
sink are not in it (see ``daemon_throughput.py`` for those).

Run: ``python benchmarks/daemon_memory.py [--reps 5] [--streams Friedman]``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import add_out, documented_run, machine, markdown, publish
from river_speed import DENSE_STREAMS, WARM, dense_stream

BATCH = 2000
#: Each stream and the task it is learned as.
STREAMS = {**dict.fromkeys(DENSE_STREAMS, "classification"), "Friedman": "regression"}
N_FRIEDMAN = 5000


def _data(stream: str) -> list[tuple[dict, Any]]:
    if stream == "Friedman":
        from river.datasets import synth

        return list(itertools.islice(synth.Friedman(seed=42), N_FRIEDMAN))
    return dense_stream(stream)


def _driver(run: str, task: str) -> Any:
    from streammkl.daemon.config import load_settings
    from streammkl.daemon.learning.building import build_learner
    from streammkl.daemon.learning.drivers import LearnerDriver, driver_for

    over: dict[str, Any] = {"learner.task": task}
    if run == "memory":
        over["learner.memory_window"] = 1000
    learner = build_learner(load_settings(env={}, overrides=over).learner)
    return LearnerDriver(learner) if run == "default, per record" else driver_for(learner)


def _timed(run: str, task: str, data: list[tuple[dict, Any]]) -> float:
    """CPU µs per record of ``run`` over ``data`` after the warm-up, in daemon batches."""
    driver = _driver(run, task)
    # feature names as the daemon's decoder gives them (strings: Hyperplane's are ints)
    xs = [{str(k): v for k, v in x.items()} for x, _ in data]
    ys = [y for _, y in data]
    driver.learn_predict_many(xs[:WARM], ys[:WARM], None)
    t0 = time.process_time()
    for i in range(WARM, len(xs), BATCH):
        driver.learn_predict_many(xs[i : i + BATCH], ys[i : i + BATCH], None)
    return (time.process_time() - t0) / (len(xs) - WARM) * 1e6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--streams", nargs="+", choices=list(STREAMS), default=list(STREAMS))
    add_out(parser)
    args = parser.parse_args(argv)
    header = machine()
    runs = ("default, runs", "default, per record", "memory")
    rows = []
    for stream in args.streams:
        data, task = _data(stream), STREAMS[stream]
        times: dict[str, list[float]] = {r: [] for r in runs}
        for _ in range(args.reps):
            for run in runs:
                times[run].append(_timed(run, task, data))
        med = {r: statistics.median(t) for r, t in times.items()}
        print(stream, {r: round(v, 1) for r, v in med.items()}, flush=True)
        rows.append([
            f"{stream} ({task})", f"{med['default, runs']:.1f}",
            f"{med['default, per record']:.1f}",
            f"{med['memory']:.1f}", f"{med['memory'] / med['default, runs']:.2f}x",
            f"{med['memory'] / med['default, per record'] - 1:+.0%}",
        ])  # fmt: skip
    body = "\n\n".join([
        header,
        f"CPU µs per record through the daemon's drivers, batches of {BATCH:,}, monitor off, "
        f"medians of {args.reps} interleaved runs (warm-up {WARM:,} records). Load average at "
        f"the end: {os.getloadavg()[0]:.2f}.",
        markdown(
            ["stream", "default, runs", "default, per record", "memory (window 1000)",
             "memory / runs", "memory vs per record"],
            rows,
        ),
    ])  # fmt: skip
    print(body)
    publish(
        "daemon_memory", "learner.memory_window: the daemon's learner cost per record", body,
        documented_run(parser, args), args.out,
    )  # fmt: skip


if __name__ == "__main__":
    main()
