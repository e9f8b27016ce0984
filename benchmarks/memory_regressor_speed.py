"""CPU cost of ``MemoryRegressor`` per prequential round against the default regressor alone.

The default: ``StandardScaler() | MKLRegressor(seed=0)``, ``predict_one`` then ``learn_one``.
MemoryRegressor around it, two ways: ``predict_one`` then ``learn_one`` (river's evaluator: the
neighbour mean is computed twice a round) and ``learn_predict_one`` (once). And the memory's
residual mean alone on a full window. 1,000 rounds after a warm-up of 1,200 (a full window, the
bandwidth and relevance fitted), medians of ``--reps`` runs interleaved A/B, CPU time
(``time.process_time_ns``); the load average is printed beside.

Run: ``python benchmarks/memory_regressor_speed.py [--reps 5] [--out PATH]``
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import river_suite as rs
from river import preprocessing

from streammkl.river import MemoryRegressor, MKLRegressor

WARM, TIMED = 1200, 1000


def _round_cost(make, data, how: str) -> float:
    model = make()
    for x, y in data[:WARM]:
        model.predict_one(x)
        model.learn_one(x, y)
    t0 = time.process_time_ns()
    if how == "learn_predict_one":
        for x, y in data[WARM : WARM + TIMED]:
            model.learn_predict_one(x, y)
    else:
        for x, y in data[WARM : WARM + TIMED]:
            model.predict_one(x)
            model.learn_one(x, y)
    return (time.process_time_ns() - t0) / TIMED / 1000


def _mean_cost(data) -> float:
    model = MemoryRegressor(preprocessing.StandardScaler() | MKLRegressor(seed=0))
    for x, y in data[:WARM]:
        model.learn_predict_one(x, y)
    rows = [np.array([float(x[k]) for k in model._names]) for x, _ in data[WARM : WARM + TIMED]]
    t0 = time.process_time_ns()
    for row in rows:
        model.memory.residual_mean(row)
    return (time.process_time_ns() - t0) / TIMED / 1000


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    lines = [f"load average at start {os.getloadavg()[0]:.2f}", ""]
    lines += [
        "| stream | d | default µs | memory predict+learn µs | memory learn_predict µs "
        "| residual mean µs |",
        "|---|---|---|---|---|---|",
    ]
    for key in ("friedman", "trump-approval"):
        data = list(itertools.islice(rs.DATASETS[key].load(), WARM + TIMED))
        if len(data) < WARM + TIMED:  # TrumpApproval has 1,001: loop it (costs, not accuracy)
            data = (data * 3)[: WARM + TIMED]
        base, pl, lp, mean = [], [], [], []
        for _ in range(args.reps):  # interleaved
            base.append(
                _round_cost(lambda: preprocessing.StandardScaler() | MKLRegressor(seed=0), data, "")
            )
            pl.append(
                _round_cost(
                    lambda: MemoryRegressor(preprocessing.StandardScaler() | MKLRegressor(seed=0)),
                    data,
                    "",
                )
            )
            lp.append(
                _round_cost(
                    lambda: MemoryRegressor(preprocessing.StandardScaler() | MKLRegressor(seed=0)),
                    data,
                    "learn_predict_one",
                )
            )
            mean.append(_mean_cost(data))
        med = statistics.median
        lines.append(
            f"| {rs.DATASETS[key].title} | {len(data[0][0])} | {med(base):.0f} | {med(pl):.0f} "
            f"| {med(lp):.0f} | {med(mean):.0f} |"
        )
        print(lines[-1], flush=True)
    lines += ["", f"load average at end {os.getloadavg()[0]:.2f}"]
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
