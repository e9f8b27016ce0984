"""Would landmarks that move help? A measurement of refreshing the default bank's landmarks.

The default bank's ``LandmarkRBF(16, 50)`` takes its landmarks from the first 50 standardised
inputs and keeps them (its fitted state). On a stream whose classes move (RandomRBFDrift, where
MOA's kNN leads by 3.6 points) fixed landmarks describe where the classes were. This script
measures a refresh done from outside the learner, through its public state: every ``PERIOD``
examples after the first 1,000, the ``Q`` landmarks whose weight columns have the smallest norm
(over the output rows) are replaced by the ``Q`` most recent standardised inputs (``recent``)
or the ``Q`` most recent inputs the learner misclassified (``errors``), and their weight columns
(and those of the averaged iterates) are reset to 0 (``MKLClassifier.to_state`` ->
edit the landmarks and the columns -> ``MKLClassifier.from_state``). It is a prototype of the
idea, not a feature: the learner does not do this by itself.

Learner: ``StandardScaler() | MKLClassifier(seed=s)`` (the default), prequential accuracy
(``predict_one`` then ``learn_one``) on the classification streams of
``benchmarks/river_suite.py`` (same order, 20,000-example caps), mean ± sd over the seeds.

Run: ``python benchmarks/landmark_refresh.py [--seeds 5] [--jobs 2] [--datasets ...]``.
"""

from __future__ import annotations

import argparse
import base64
import collections
import itertools
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import add_out, documented_run, machine, markdown, publish

LANDMARKS = "landmarks(gamma=16/median,m=50)"
START = 1000  # examples before the first refresh (the bandwidth warm-up is the first 50)
#: (label, period, landmarks replaced, candidates): period 0 is the default (no refresh)
VARIANTS = (
    ("default (fixed landmarks)", 0, 0, "recent"),
    ("refresh 5 per 500 from errors", 500, 5, "errors"),
    ("refresh 10 per 1000 from errors", 1000, 10, "errors"),
    ("refresh 10 per 1000 from recent", 1000, 10, "recent"),
)


def refreshed(pipe: Any, candidates: list[dict], q: int) -> Any:
    """The pipeline with the ``q`` least-weighted landmarks replaced by ``candidates`` (the
    last q) and their weight columns reset to 0 (a new pipeline: river's caches its last
    step)."""
    from streammkl.river import MKLClassifier

    clf = pipe["MKLClassifier"]
    model = clf.rounds().model
    m = [k.name for k in model.kernels].index(LANDMARKS)
    fit = model.kernels[m].fit
    if fit is None or not fit.points or not candidates:
        return pipe
    a, e = int(model.layout.ex_off[m]), int(model.layout.ex_off[m + 1])
    meta, arrays = clf.to_state()
    w, avg = arrays["w"].copy(), arrays["avg_w"].copy()
    before = float(np.sqrt((w[:, a:e] ** 2).sum()))
    drop = np.argsort(np.sqrt((w[:, a:e] ** 2).sum(axis=0)), kind="stable")[:q]
    saved = meta["core"]["bandwidths"][LANDMARKS]
    keys = saved["keys"]
    points = np.frombuffer(base64.b64decode(saved["points_f64"]), dtype="<f8")
    points = points.reshape(-1, len(keys)).copy()
    for j, x in zip(drop.tolist(), candidates[-q:], strict=False):
        named = {str(k): v for k, v in x.items()}
        points[j] = [named.get(k, 0.0) for k in keys]
    saved["points_f64"] = base64.b64encode(points.astype("<f8").tobytes()).decode("ascii")
    w[:, a + drop] = 0.0
    avg[:, :, a + drop] = 0.0
    ratio = float(np.sqrt((w[:, a:e] ** 2).sum())) / before if before > 0 else 0.0
    norms, stored = arrays["norms"].copy(), arrays["stored_norms"].copy()
    norms[m] *= ratio  # the block's norms follow its columns
    stored[m] *= ratio
    arrays = {**arrays, "w": w, "avg_w": avg, "norms": norms, "stored_norms": stored}
    return pipe["StandardScaler"] | MKLClassifier.from_state(meta, arrays)


def _run(job: tuple[str, int, int, int, str]) -> float:
    key, seed, period, q, source = job
    import river_suite as rs
    from river import preprocessing

    from streammkl.river import MKLClassifier

    data = list(itertools.islice(rs.DATASETS[key].load(), rs.FULL))
    pipe = preprocessing.StandardScaler() | MKLClassifier(seed=seed)
    recent: collections.deque[dict] = collections.deque(maxlen=max(q, 1))
    hits = 0
    for i, (x, y) in enumerate(data):
        ok = pipe.predict_one(x) == y
        hits += ok
        pipe.learn_one(x, y)
        if period and not (source == "errors" and ok):
            recent.append(pipe["StandardScaler"].transform_one(x))
        if period and i >= START and i % period == 0:
            pipe = refreshed(pipe, list(recent), q)
    return hits / len(data)


def main(argv: list[str] | None = None) -> None:
    import river_suite as rs

    classification = [k for k, d in rs.DATASETS.items() if d.task != "regression"]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--datasets", default=",".join(classification))
    add_out(parser)
    args = parser.parse_args(argv)
    keys = [k for k in args.datasets.split(",") if k]
    unknown = [k for k in keys if k not in rs.DATASETS]
    if unknown:
        parser.error(f"unknown dataset(s): {unknown}")
    header = machine()
    start = time.perf_counter()
    jobs = [(k, s, p, q, src) for k in keys for _, p, q, src in VARIANTS for s in range(args.seeds)]
    with ProcessPoolExecutor(args.jobs) as pool:
        accs = dict(zip(jobs, pool.map(_run, jobs), strict=True))
    rows = []
    for label, p, q, src in VARIANTS:
        cells = []
        for k in keys:
            a = [accs[(k, s, p, q, src)] for s in range(args.seeds)]
            sd = statistics.stdev(a) if len(a) > 1 else 0.0
            cells.append(f"{statistics.mean(a):.4f} ± {sd:.4f}")
        rows.append([label, *cells])
    names = [f"{rs.DATASETS[k].title} ({rs.DATASETS[k].role})" for k in keys]
    body = "\n\n".join([
        f"{header}; {args.seeds} seeds, total {time.perf_counter() - start:.0f} s. "
        "Prequential accuracy of the default learner, mean ± sd over the seeds, with its "
        "landmarks fixed (the default) or refreshed from outside through its state.",
        markdown(["landmarks", *names], rows),
    ])  # fmt: skip
    print(body)
    full = documented_run(parser, args)
    publish("landmark_refresh", "Landmarks that move: a measurement", body, full, args.out)


if __name__ == "__main__":
    main()
