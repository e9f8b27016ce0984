"""Where the default learner loses to the best peer: prequential accuracy per window of the
stream (issue 27's capacity-or-adaptivity question).

For each stream: the default learner (``StandardScaler() | MKLClassifier()``), the same learner
with the last iterate only (``averages=()``), each kernel of the default bank alone, the average
kernel (L2, as ``benchmarks/river_suite.py`` runs it), and the stream's best peer from the suite
(river's LogisticRegression or a MOA learner through CapyMOA), prequential over the suite's first
20,000 examples, accuracy per window of 2,000. For the default learner also: which predictor (the
last iterate or an averaged iterate, ``defaults.AVERAGES``) led in each window (share of rounds),
and the kernel weights at the end. A gap that is the same in every window points to capacity (the
bank cannot express the function); one that grows after drifts, or shrinks with time, points to
adaptivity (steps, averages, selection).

    .venv/bin/python benchmarks/adapt_windows.py --datasets sea-drift,hyperplane --seed 0
    .venv/bin/python benchmarks/adapt_windows.py --datasets sine --levers lambda=3e-3 --no-peer
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path
from typing import Any

import numpy as np
from river import linear_model, preprocessing

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _moa
import adapt_levers
import river_suite as rs

from streammkl.core import _numba as nb
from streammkl.core import regularizers
from streammkl.river import MKLClassifier, defaults

WINDOW = 2000
PEERS = {  # the best peer of benchmarks/results/river_suite.md per stream
    "bananas": "moa:arf",
    "phishing": "moa:srp",
    "image-segments": "moa:knn",
    "shuttle": "moa:lb",
    "sea-drift": "river:lr",
    "hyperplane": "river:lr",
    "rbf-drift": "moa:knn",
    "sine": "moa:arf",
    "led": "moa:srp",
    "agrawal": "moa:arf",
}


def _peer(key: str, data: list, seed: int) -> Any:
    name = PEERS[key]
    if name == "river:lr":
        return preprocessing.StandardScaler() | linear_model.LogisticRegression()
    features = list(dict.fromkeys(f for x, _ in data for f in x))
    classes = _moa.sorted_labels({y for _, y in data})
    return _moa.CapyMOAClassifier(name[4:], features, classes, seed)


def _run(model: Any, data: list, leaders: list | None = None) -> np.ndarray:
    hits = np.zeros(len(data))
    clf = model["MKLClassifier"] if leaders is not None else None
    for i, (x, y) in enumerate(data):
        if clf is not None and clf.classes_:
            leaders.append(int(nb.leader(clf.rounds().model.state.avg_loss)))  # type: ignore
        elif leaders is not None:
            leaders.append(0)
        hits[i] = model.predict_one(x) == y
        model.learn_one(x, y)
    return hits


def _windows(hits: np.ndarray) -> list[float]:
    return [float(hits[a : a + WINDOW].mean()) for a in range(0, len(hits), WINDOW)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default=",".join(PEERS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument(
        "--levers", default="", help="settings of adapt_levers.py: one more default row each"
    )
    args = ap.parse_args()
    names = [k.name for k in defaults.kernel_bank()]
    for key in args.datasets.split(","):
        ds = rs.DATASETS[key]
        data = list(itertools.islice(ds.load(), rs.FULL))
        s = args.seed
        rows: dict[str, np.ndarray] = {}
        leaders: list[int] = []
        mkl = preprocessing.StandardScaler() | MKLClassifier(seed=s)
        rows["mkl"] = _run(mkl, data, leaders)
        for setting in filter(None, args.levers.split(",")):
            rows[f"mkl {setting}"] = _run(adapt_levers.learner(setting, s), data)
        rows["mkl last iterate"] = _run(
            preprocessing.StandardScaler() | MKLClassifier(seed=s, averages=()), data
        )
        for i, nm in enumerate(names):
            k = defaults.kernel_bank()[i]
            rows[f"single {nm}"] = _run(
                preprocessing.StandardScaler() | MKLClassifier(kernels=(k,), seed=s), data
            )
        rows["average"] = _run(
            preprocessing.StandardScaler()
            | MKLClassifier(regularizer=regularizers.L2(defaults.LAMBDA), seed=s),
            data,
        )
        if not args.no_peer:
            rows[f"peer {PEERS[key]}"] = _run(_peer(key, data, s), data)
        print(f"\n### {ds.title} (seed {s}, windows of {WINDOW})\n")
        n_w = (len(data) + WINDOW - 1) // WINDOW
        print("| model | all | " + " | ".join(f"w{j + 1}" for j in range(n_w)) + " |")
        print("|---|---|" + "---|" * n_w)
        for nm, hits in rows.items():
            w = _windows(hits)
            print(f"| {nm} | {hits.mean():.4f} | " + " | ".join(f"{a:.3f}" for a in w) + " |")
        lead = np.array(leaders)
        labels = ["last", *(f"avg{int(h)}" for h in defaults.AVERAGES)]
        print("\nleader share per window: " + "; ".join(
            f"w{j + 1} " + " ".join(
                f"{labels[e]}={np.mean(lead[j * WINDOW:(j + 1) * WINDOW] == e):.2f}"
                for e in range(len(labels)) if np.any(lead[j * WINDOW:(j + 1) * WINDOW] == e)
            ) for j in range(n_w)
        ))  # fmt: skip
        clf = mkl["MKLClassifier"]
        print("kernel weights at the end: " + ", ".join(
            f"{k}={v:.3f}" for k, v in clf.kernel_weights.items()
        ), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
