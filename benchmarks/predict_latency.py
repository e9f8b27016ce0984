"""Prediction latency of the daemon's model outside Kafka: ``streammkl export`` then ``load``.

The daemon's default learner (``MKLClassifier()``, what ``[learner]`` builds by default) learns
``--train`` records of the ``kernel-drift`` scenario through the daemon's own prequential call
(``learn_predict_one``), is saved and loaded back the way ``streammkl export CKPT model.smkl``
and ``MKLClassifier.load("model.smkl")`` do (the learner's state file), and then predicts
``--n`` unseen records one call each (``predict_proba_one``, after 200 warm-up calls): the p50
and p99 of the wall-clock latency per call. The loaded model's predictions are checked equal to
the trained one's. Against: the Kafka round trip of one record through the daemon on the
bundled broker (p50 259 ms, max 2.7 s; measured in issue 30, not re-measured here). An HTTP
``POST /predict`` on the daemon would add its HTTP cost to the in-process figure (not built yet).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _table

from simulators import get
from streammkl.river import MKLClassifier

KAFKA_ROUND_TRIP_P50_MS = 259.0  # issue 30 (the bundled broker, a quiet machine)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=5000)
    parser.add_argument("--n", type=int, default=5000)
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
    rows = [
        ["exported model, in process (predict_proba_one)", f"{p50:.1f} µs", f"{p99:.1f} µs",
         f"{KAFKA_ROUND_TRIP_P50_MS * 1e3 / p50:,.0f}x faster"],
        ["Kafka round trip through the daemon (issue 30)", f"{KAFKA_ROUND_TRIP_P50_MS:.0f} ms",
         "max 2.7 s", "reference"],
    ]  # fmt: skip
    body = (
        f"{_table.machine()}\n\n"
        f"Model: MKLClassifier() after {args.train} kernel-drift records; state file {size:,} "
        f"bytes; {len(times)} timed calls.\n\n"
        + _table.markdown(["route", "p50", "p99", "vs Kafka p50"], rows)
    )
    full = _table.documented_run(parser, args)
    _table.publish("predict_latency", "Prediction outside Kafka: latency", body, full, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
