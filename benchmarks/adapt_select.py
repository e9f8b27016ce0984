"""Choosing the group-lasso lambda online (issue 27): several default learners that differ only in
lambda run side by side, and each round the one with the smallest discounted prequential log loss
so far predicts (the rule the default already uses among its averaged iterates: discount 0.995,
ties to the first). What it would buy, per stream, as 5-seed means (20,000-example caps), against
the default alone; it costs one learner per lambda per call, so it is a candidate for a preset,
not for the default.

    .venv/bin/python benchmarks/adapt_select.py --lambdas 1e-2,3e-3,3e-2

Prints, per stream: each lambda alone, the choice among the first two and among all, by the
discounted log loss and by the discounted count of errors.
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from river import preprocessing

sys.path.insert(0, str(Path(__file__).resolve().parent))
import river_suite as rs

from streammkl.core import regularizers
from streammkl.river import MKLClassifier

DISCOUNT = 0.995
STREAMS = (
    "bananas", "phishing", "sea-drift", "hyperplane", "image-segments", "shuttle", "rbf-drift",
    "sine", "led", "agrawal",
)  # fmt: skip


def _experts(data: list, lambdas: list[float], seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Hits and log losses (n_lambdas x n) of the default learner at each lambda."""
    hits = np.zeros((len(lambdas), len(data)))
    loss = np.zeros((len(lambdas), len(data)))
    for e, lam in enumerate(lambdas):
        reg = regularizers.GroupLasso(lam)
        model = preprocessing.StandardScaler() | MKLClassifier(regularizer=reg, seed=seed)
        for i, (x, y) in enumerate(data):
            p = model.predict_proba_one(x)
            hits[e, i] = bool(p) and max(p, key=p.get) == y
            loss[e, i] = -math.log(max(p.get(y, 0.0), 1e-12))
            model.learn_one(x, y)
    return hits, loss


def _chosen(hits: np.ndarray, loss: np.ndarray) -> float:
    """Accuracy when the expert with the smallest discounted loss so far predicts."""
    total = np.zeros(hits.shape[0])
    got = 0.0
    for i in range(hits.shape[1]):
        got += hits[int(np.argmin(total)), i]
        total = DISCOUNT * total + loss[:, i]
    return got / hits.shape[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default=",".join(STREAMS))
    ap.add_argument("--lambdas", default="1e-2,3e-3,3e-2")
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args()
    lambdas = [float(v) for v in args.lambdas.split(",")]
    names = [f"lambda {v:g}" for v in lambdas]
    two = f"{lambdas[0]:g}, {lambdas[1]:g}"
    cols = [*names, f"choice of {two}", "choice of all", f"choice of {two} by errors",
            "choice of all by errors"]  # fmt: skip
    print("| stream | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))
    t0 = time.perf_counter()
    for key in args.datasets.split(","):
        data = list(itertools.islice(rs.DATASETS[key].load(), rs.FULL))
        rows: list[list[float]] = [[] for _ in cols]
        for seed in range(args.seeds):
            hits, loss = _experts(data, lambdas, seed)
            for e in range(len(lambdas)):
                rows[e].append(float(hits[e].mean()))
            rows[-4].append(_chosen(hits[:2], loss[:2]))
            rows[-3].append(_chosen(hits, loss))
            rows[-2].append(_chosen(hits[:2], 1.0 - hits[:2]))
            rows[-1].append(_chosen(hits, 1.0 - hits))
        base = statistics.mean(rows[0])
        cells = [
            f"{statistics.mean(r):.4f} ({100 * (statistics.mean(r) - base):+.2f})" for r in rows
        ]
        print(f"| {rs.DATASETS[key].title} | " + " | ".join(cells) + " |", flush=True)
    print(f"\n{args.seeds} seeds, {time.perf_counter() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
