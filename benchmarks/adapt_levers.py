"""Cheap levers of the default learner (issue 27): settings that cost no time per call (step
sizes, forgetting in FTRL's AdaGrad accumulators, the group-lasso lambda, the choice among the
averaged iterates), measured as the 5-seed mean prequential accuracy of
``StandardScaler() | MKLClassifier(...)`` on the suite's streams (20,000-example caps) against the
default. Settings are chosen on the development streams (Bananas, Phishing, SEA with drift,
Hyperplane); the validation streams are reported as measured.

    .venv/bin/python benchmarks/adapt_levers.py --levers default,eta0=0.5,forget=0.9999
    .venv/bin/python benchmarks/adapt_levers.py --datasets agrawal,sine --levers default,lambda=3e-3

A lever is ``name=value``: ``eta0`` (FTRL's eta0), ``delta`` (FTRL's initial accumulator),
``lambda`` (GroupLasso), ``forget`` (FTRL's
accumulators discounted, ``acc <- forget acc + ||g||^2``), ``horizons`` (the averages' horizons,
``/`` between them); ``+`` joins levers into one setting. Every lever goes through the river
learner's public constructor; the averaged iterates' loss discount (``OnlineMKL(
average_discount=)``) is not one of its arguments, so it is not a lever here (its row in
``results/adapt_diagnosis.md`` was measured once with a patched model class, since removed).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from river import preprocessing

sys.path.insert(0, str(Path(__file__).resolve().parent))
import river_suite as rs

from streammkl.core import regularizers, schedules
from streammkl.river import MKLClassifier, defaults

DEV = ("bananas", "phishing", "sea-drift", "hyperplane")


class _Forgetting(schedules.FTRL):
    """FTRL whose accumulators forget (the compiled round reads ``constants[2]``)."""

    def __init__(self, eta0: float, forget: float, delta: float = 1e-8):
        super().__init__(eta0, delta)
        self.forget = forget

    @property
    def constants(self) -> np.ndarray:
        return np.array([self.eta0, self.delta, self.forget])


def learner(setting: str, seed: int) -> Any:
    """The default learner with ``setting``'s levers."""
    opts = dict(kv.split("=") for kv in setting.split("+") if kv != "default")
    unknown = set(opts) - {"eta0", "delta", "forget", "lambda", "horizons"}
    if unknown:
        raise SystemExit(f"unknown lever(s) {sorted(unknown)} in {setting!r}")
    eta0 = float(opts.get("eta0", defaults.ETA0))
    kw: dict[str, Any] = {"seed": seed}
    delta = float(opts.get("delta", 1e-8))
    if "forget" in opts:
        kw["schedule"] = _Forgetting(eta0, float(opts["forget"]), delta)
    elif "eta0" in opts or "delta" in opts:
        kw["schedule"] = schedules.FTRL(eta0, delta)
    if "lambda" in opts:
        kw["regularizer"] = regularizers.GroupLasso(float(opts["lambda"]))
    if "horizons" in opts:
        kw["averages"] = tuple(float(h) for h in opts["horizons"].split("/"))
    return preprocessing.StandardScaler() | MKLClassifier(**kw)


def _accuracy(setting: str, seed: int, data: list) -> float:
    model = learner(setting, seed)
    hit = 0
    for x, y in data:
        hit += model.predict_one(x) == y
        model.learn_one(x, y)
    return hit / len(data)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default=",".join(DEV))
    ap.add_argument("--levers", default="default")
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args()
    keys = args.datasets.split(",")
    settings = args.levers.split(",")
    if "default" not in settings:
        settings.insert(0, "default")
    data = {k: list(itertools.islice(rs.DATASETS[k].load(), rs.FULL)) for k in keys}
    t0 = time.perf_counter()
    means: dict[str, dict[str, float]] = {}
    print("| setting | " + " | ".join(rs.DATASETS[k].title for k in keys) + " | dev min delta |")
    print("|---|" + "---|" * (len(keys) + 1))
    for s in settings:
        means[s] = {}
        cells = []
        for k in keys:
            accs = [_accuracy(s, seed, data[k]) for seed in range(args.seeds)]
            means[s][k] = m = statistics.mean(accs)
            sd = statistics.pstdev(accs)
            delta = 100 * (m - means["default"][k])
            cells.append(f"{m:.4f} ± {sd:.4f} ({delta:+.2f})")
        dev = [100 * (means[s][k] - means["default"][k]) for k in keys if k in DEV]
        worst = f"{min(dev):+.2f}" if dev else ""
        print(f"| {s} | " + " | ".join(cells) + f" | {worst} |", flush=True)
    print(f"\n{args.seeds} seeds, {time.perf_counter() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
