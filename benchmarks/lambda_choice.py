"""What ``LambdaChoiceClassifier`` (the default learner at lambda 1e-2 and 3e-3, the copy with
the fewest discounted errors predicting) costs per call and buys in accuracy, against the default
learner ``MKLClassifier()``.

Speed: CPU time per example (``time.process_time``) on the dense rows of
``benchmarks/river_speed.py`` (Bananas, Phishing, Hyperplane with 10 inputs; the same warm-up of
1,100 examples before the timed ones), both learners standardising inside
(``standardize=True``), the prequential round as one ``learn_predict_one`` call and as
``predict_proba_one`` + ``learn_one``; the learners interleaved run by run so that they share the
machine's load; medians of ``--reps`` runs and the ratio to the default's one call.

Accuracy: prequential (``predict_one`` then ``learn_one``) accuracy of
``preprocessing.StandardScaler() | LambdaChoiceClassifier(MKLClassifier(seed=s))`` for seeds
``0..--seeds-1`` on the streams of ``benchmarks/river_suite.py`` (its 20,000-example caps),
beside the default's (``StandardScaler() | MKLClassifier(seed=s)``, run here too unless
``--no-default``).

Run: ``python benchmarks/lambda_choice.py [--part speed|accuracy] [--datasets a,b]``.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import add_out, documented_run, machine, markdown, publish

STREAMS = (
    "bananas", "phishing", "sea-drift", "hyperplane", "image-segments", "shuttle", "rbf-drift",
    "sine", "led", "agrawal",
)  # fmt: skip


def _speed_rows(reps: int) -> list[list[Any]]:
    import river_speed as rsp

    from streammkl.river import LambdaChoiceClassifier, MKLClassifier

    def default() -> Any:
        return MKLClassifier(standardize=True)

    def choice() -> Any:
        return LambdaChoiceClassifier(MKLClassifier(standardize=True))

    runs = {
        "default, learn_predict_one": (default, rsp.one_call),
        "default, predict_proba_one + learn_one": (default, rsp.two_calls),
        "choice, learn_predict_one": (choice, rsp.one_call),
        "choice, predict_proba_one + learn_one": (choice, rsp.two_calls),
    }
    rows: list[list[Any]] = []
    for name, meds in rsp.interleaved_per_call(runs, reps).items():
        base = meds["default, learn_predict_one"]
        rows += [[name, r, f"{med:.1f}", f"{med / base:.2f}"] for r, med in meds.items()]
    return rows


def _accuracy(key: str, seed: int, choice: bool) -> float:
    import river_suite as rs
    from river import preprocessing

    from streammkl.river import LambdaChoiceClassifier, MKLClassifier

    learner = MKLClassifier(seed=seed)
    model = preprocessing.StandardScaler() | (
        LambdaChoiceClassifier(learner) if choice else learner
    )
    hits = n = 0
    for x, y in itertools.islice(rs.DATASETS[key].load(), rs.FULL):
        hits += model.predict_one(x) == y
        model.learn_one(x, y)
        n += 1
    return hits / n


def _accuracy_rows(keys: list[str], seeds: int, default: bool) -> list[list[Any]]:
    import river_suite as rs

    rows: list[list[Any]] = []
    for key in keys:
        got = [_accuracy(key, s, True) for s in range(seeds)]
        mean = statistics.mean(got)
        sd = statistics.stdev(got) if seeds > 1 else 0.0
        row = [rs.DATASETS[key].title, f"{mean:.4f} ± {sd:.4f}"]
        if default:
            base = statistics.mean(_accuracy(key, s, False) for s in range(seeds))
            row += [f"{base:.4f}", f"{100 * (mean - base):+.2f}"]
        rows.append(row)
        print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("speed", "accuracy", "both"), default="both")
    parser.add_argument("--reps", type=int, default=7, help="speed runs per learner (medians)")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--datasets", default=",".join(STREAMS))
    parser.add_argument("--no-default", action="store_true", help="accuracy of the choice only")
    add_out(parser)
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    parts = [machine()]
    if args.part in ("speed", "both"):
        rows = _speed_rows(args.reps)
        parts += [
            f"Per call, CPU time, medians of {args.reps} runs, the learners interleaved:",
            markdown(["stream", "learner, round", "µs per call (CPU)", "/ default"], rows),
        ]
    if args.part in ("accuracy", "both"):
        default = not args.no_default
        cols = ["stream", f"choice ({args.seeds} seeds)"]
        cols += ["default", "change (points)"] if default else []
        rows = _accuracy_rows(args.datasets.split(","), args.seeds, default)
        parts += ["Prequential accuracy, mean ± sd over seeds:", markdown(cols, rows)]
    parts.append(f"{time.perf_counter() - t0:.0f} s")
    body = "\n\n".join(parts)
    print(body)
    publish("lambda_choice", "LambdaChoiceClassifier", body, documented_run(parser, args),
            args.out)  # fmt: skip


if __name__ == "__main__":
    main()
