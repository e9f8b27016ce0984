"""Where the kernelized river row of ``river_speed.py`` spends its time: ``StandardScaler() |
MKLClassifier(kernels=(RBF(1/d),))`` at the default budget (256 pairs, merge policy),
``predict_one`` then ``learn_one`` per example, on Bananas (d = 2) and Hyperplane (d = 10).

Each learner is warmed on the first 1,100 examples (the support set is full from then on) and
timed on the next ``--n``, every part per example in process CPU time
(``time.process_time_ns``), the median over the examples:

- the pipeline's step as ``river_speed.py`` times it (the two calls);
- river's ``StandardScaler`` (``transform_one`` for the prediction; ``learn_one`` and
  ``transform_one`` for the learning), then our ``predict_one`` and ``learn_one`` on the
  scaled record (the same steps the pipeline takes, timed apart);
- on a copy of the warmed learner, the core model alone on the scaled vectors: its decision
  (``decision_prepared``) and its round (``learn``: the checked compiled round and its Python
  edge), every round at the budget (a merge or a removal in each round that inserts a pair);
- the merge's parts on the warmed state, each in a compiled loop (``merge_profile.py``'s): the
  pair to merge (``smallest_pair``), its partner (``merge_partner``), the merge point
  (``merge_plan`` less the partner search) and the merge with its exact norm update
  (``merge_pairs``, less the copies of the state it runs on).

Run: ``python benchmarks/kernelized_river.py [--n 3000]``.
"""

from __future__ import annotations

import argparse
import copy
import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import add_out, documented_run, machine, markdown, publish
from merge_profile import budget_step_parts
from river_speed import WARM, dense_stream

STREAMS = (("Bananas", 2), ("Hyperplane", 10))


def _make(d: int) -> Any:
    from river import preprocessing

    from streammkl.core import kernels
    from streammkl.river import MKLClassifier

    return preprocessing.StandardScaler() | MKLClassifier(kernels=(kernels.RBF(1.0 / d),))


def _median_us(samples: list[int]) -> float:
    return statistics.median(samples) / 1000


def river_parts(warmed: Any, timed: list) -> dict[str, float]:
    """The pipeline's step, then the same steps timed apart (a fresh copy each)."""
    cpu = time.process_time_ns
    model = copy.deepcopy(warmed)
    step: list[int] = []
    gc.collect()
    for x, y in timed:
        t0 = cpu()
        model.predict_one(x)
        model.learn_one(x, y)
        step.append(cpu() - t0)
    model = copy.deepcopy(warmed)
    scaler, clf = model["StandardScaler"], model["MKLClassifier"]
    river, predict, learn = [], [], []
    gc.collect()
    for x, y in timed:
        t0 = cpu()
        xs = scaler.transform_one(x)
        t1 = cpu()
        clf.predict_one(xs)
        t2 = cpu()
        scaler.learn_one(x)
        xs = scaler.transform_one(x)
        t3 = cpu()
        clf.learn_one(xs, y)
        t4 = cpu()
        river.append(t1 - t0 + t3 - t2)
        predict.append(t2 - t1)
        learn.append(t4 - t3)
    return {
        "step": _median_us(step),
        "river": _median_us(river),
        "predict": _median_us(predict),
        "learn": _median_us(learn),
    }


def core_parts(warmed: Any, timed: list) -> dict[str, float]:
    """The core model's decision and round on the scaled vectors (a copy of the learner)."""
    cpu = time.process_time_ns
    out: dict[str, float] = {}
    model = copy.deepcopy(warmed)
    scaler, clf = model["StandardScaler"], model["MKLClassifier"]
    core = clf.rounds().model
    classes = clf._classes
    decision, rounds = [], []
    gc.collect()
    for x, y in timed:
        scaler.learn_one(x)
        vec = np.array(list(scaler.transform_one(x).values()), dtype=np.float64)
        target = classes.target_of(classes.index[y])
        t0 = cpu()
        core.decision_prepared(vec)
        t1 = cpu()
        core.learn(vec, target)
        t2 = cpu()
        decision.append(t1 - t0)
        rounds.append(t2 - t1)
    out["round"] = _median_us(rounds)
    out["decision"] = _median_us(decision)
    return out


def rows_of(name: str, d: int, n: int, reps: int) -> list[list[object]]:
    data = dense_stream(name)
    warm, timed = data[:WARM], data[WARM : WARM + n]
    warmed = _make(d)
    for x, y in warm:
        warmed.predict_one(x)
        warmed.learn_one(x, y)
    r, c = river_parts(warmed, timed), core_parts(warmed, timed)
    # (the budget step's parts on the warmed support set; no merge: no pairs part)
    m = {"pairs": 0.0, **budget_step_parts(warmed["MKLClassifier"].rounds().model, reps)}
    ours = r["predict"] + r["learn"]
    compiled = c["decision"] + c["round"]
    merge = m["smallest"] + m["partner"] + m["plan"] + m["pairs"]

    def row(part: str, us: float, of: float | None = None) -> list[object]:
        share = f"{us / r['step']:.0%}" if of is None else f"({us / of:.0%} of the merge)"
        return [name, part, f"{us:.2f}", share]

    return [
        row("the pipeline's step (predict_one + learn_one)", r["step"]),
        row("river's StandardScaler (transform; learn + transform)", r["river"]),
        row("MKLClassifier.predict_one + learn_one on the scaled record", ours),
        row("  of which the core's decision + round (on a copy)", compiled),
        row("  of which our Python (the difference)", ours - compiled),
        row("  the core's decision", c["decision"]),
        row("  the core's round at the budget", c["round"]),
        row("  the budget step (merge; one per round): its parts' sum", merge),
        row("    the pair to merge (smallest_pair)", m["smallest"], merge),
        row("    its partner (merge_partner)", m["partner"], merge),
        row("    the merge point (golden-section search)", m["plan"], merge),
        row("    the merge and its norm update (merge_pairs)", m["pairs"], merge),
        row(
            "  the rest of the round (score pass, loss, steps, insertion, prox)", c["round"] - merge
        ),
        row(
            "the rest of the step (pipeline's calls, the medians' spread)",
            r["step"] - r["river"] - ours,
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3000, help="timed examples per stream")
    parser.add_argument("--reps", type=int, default=300, help="calls per compiled loop")
    add_out(parser)
    args = parser.parse_args()
    start = machine()
    rows = [row for name, d in STREAMS for row in rows_of(name, d, args.n, args.reps)]
    body = (
        f"Measured on {start}; medians of process CPU time per example over {args.n:,} "
        f"examples after a warm-up of {WARM:,} (the support set full).\n\n"
        + markdown(["stream", "part", "µs", "share of the step"], rows)
        + "\n\nMethod: see the script's docstring (`benchmarks/kernelized_river.py`)."
    )
    full = documented_run(parser, args)
    publish(
        "kernelized_river_parts",
        "Where the kernelized river row spends its time",
        body,
        full,
        args.out,
    )


if __name__ == "__main__":
    main()
