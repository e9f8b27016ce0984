"""What an expert layer over the default learner and its own kernels alone could buy (issue 27,
part 4: "MKL >= every single kernel of its bank").

The default learner (``StandardScaler() | MKLClassifier(seed=s)``) loses to one of its kernels
alone on SEA and Hyperplane (linear) and Agrawal (the additive kernel). This measures the ceiling
of the obvious remedy, before anyone builds it into the compiled round: run the default, the
linear kernel alone and the additive kernel alone side by side (each its own learner, as the
suite's ``single kernel`` rows) and let one of them predict each round, the one with the smallest
discounted (``RHO``) online score so far, the score being the count of errors or the log loss.
The default keeps the lead unless another's score is lower by more than ``margin`` (0, 1, 2, 4
discounted errors, or as many nats). Every learner learns every example, so the chosen
prediction costs the shadows' rounds: this is a ceiling for accuracy, not a design for speed.

Prequential (``predict_proba_one`` then ``learn_one``) accuracy, 5-seed means, the streams and
20,000-example caps of ``benchmarks/river_suite.py``.

Run: ``python benchmarks/expert_ceiling.py [--datasets a,b] [--seeds N] [--out PATH]``.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import river_suite as rs
from _table import add_out, documented_run, machine, markdown, publish
from river import preprocessing

from streammkl.river import MKLClassifier, defaults

STREAMS = (
    "bananas", "phishing", "sea-drift", "hyperplane", "image-segments", "shuttle", "rbf-drift",
    "sine", "led", "agrawal",
)  # fmt: skip
RHO = 0.995  # the discount of the online scores (LambdaChoiceClassifier's)
MARGINS = (0.0, 1.0, 2.0, 4.0)
# the experts: 0 the default learner, 1 the linear kernel alone, 2 the additive kernel alone
SETS = {"default+linear": (0, 1), "default+additive": (0, 2), "all three": (0, 1, 2)}


def _learners(seed: int) -> list[Any]:
    bank = defaults.kernel_bank()
    return [
        preprocessing.StandardScaler() | MKLClassifier(seed=seed),
        preprocessing.StandardScaler() | MKLClassifier(kernels=(bank[0],), seed=seed),
        preprocessing.StandardScaler() | MKLClassifier(kernels=(bank[1],), seed=seed),
    ]


def leader(scores: np.ndarray, experts: tuple, margin: float) -> int:
    """The expert of ``experts`` with the smallest score; the default (expert 0) keeps the lead
    unless another's score is lower than the default's by more than ``margin``."""
    best = min(experts, key=lambda e: scores[e])
    return best if scores[best] < scores[0] - margin else 0


def run(key: str, seed: int) -> dict[str, float]:
    """Accuracy of every learner alone and of every choice rule, one seed."""
    data = list(itertools.islice(rs.DATASETS[key].load(), rs.FULL))
    learners = _learners(seed)
    errors, log_loss = np.zeros(3), np.zeros(3)
    hits: dict[str, int] = {}
    rules = [(s, r, h) for s in SETS for r in ("errors", "log loss") for h in MARGINS]
    for x, y in data:
        probas = [m.predict_proba_one(x) for m in learners]
        preds = [max(p, key=p.get) if p else None for p in probas]
        for e, name in enumerate(("default", "linear alone", "additive alone")):
            hits[name] = hits.get(name, 0) + (preds[e] == y)
        for s, r, h in rules:
            e = leader(errors if r == "errors" else log_loss, SETS[s], h)
            label = f"{s}, {r}, margin {h:g}"
            hits[label] = hits.get(label, 0) + (preds[e] == y)
        for e, p in enumerate(probas):
            errors[e] = RHO * errors[e] + (preds[e] != y)
            log_loss[e] = RHO * log_loss[e] - np.log(max(p.get(y, 0.0), 1e-12) if p else 0.5)
        for m in learners:
            m.learn_one(x, y)
    return {k: v / len(data) for k, v in hits.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default=",".join(STREAMS))
    parser.add_argument("--seeds", type=int, default=5)
    add_out(parser)
    args = parser.parse_args()
    keys = args.datasets.split(",")
    t0 = time.perf_counter()
    means: dict[str, dict[str, float]] = {}
    for key in keys:
        runs = [run(key, seed) for seed in range(args.seeds)]
        means[key] = {k: statistics.mean(r[k] for r in runs) for k in runs[0]}
        print(f"[{key}] " + ", ".join(f"{k} {v:.4f}" for k, v in means[key].items()), flush=True)
    rows = []
    for label in means[keys[0]]:
        cells = []
        for k in keys:
            v, base = means[k][label], means[k]["default"]
            cells.append(f"{v:.4f} ({100 * (v - base):+.2f})")
        rows.append([label, *cells])
    titles = [f"{rs.DATASETS[k].title} ({rs.DATASETS[k].role})" for k in keys]
    body = (
        f"Measured on {machine()}; `benchmarks/expert_ceiling.py`, {args.seeds} seeds, "
        f"{time.perf_counter() - t0:.0f} s. Mean prequential accuracy (change from the default "
        "in points).\n\n" + markdown(["learner / choice", *titles], rows)
    )
    publish("expert_ceiling", "An expert layer over the default and its kernels alone", body,
            documented_run(parser, args), args.out)  # fmt: skip


if __name__ == "__main__":
    main()
