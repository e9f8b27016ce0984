"""What the local memory costs per call: ``MemoryClassifier(MKLClassifier(standardize=True))``
against the default learner alone (``MKLClassifier(standardize=True)``) and river's
``StandardScaler() | LogisticRegression()``, in one run.

CPU time per example (``time.process_time``) on the dense streams of ``river_speed.py``
(Bananas, Phishing, Hyperplane with 10 inputs; warmed on the first 1,100 examples, timed on the
rest), each learner's round in one call (``learn_predict_one``) and as river's evaluation
calls it (``predict_proba_one`` + ``learn_one``; river's model only so), the runs interleaved
repetition by repetition (``river_speed.interleaved_per_call``): medians of ``--reps``. Also the
fraction of the timed rounds that computed the vote and the Hedge's weight on it at the end
(the cost is the vote's where the Hedge trusts it, a check every 10th round elsewhere).

Run: ``python benchmarks/memory_classifier_speed.py [--reps 5]``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import add_out, documented_run, machine, markdown, publish
from river_speed import (
    DENSE_STREAMS,
    WARM,
    dense_stream,
    interleaved_per_call,
    one_call,
    two_calls,
)


def _memory() -> Any:
    from streammkl.river import MemoryClassifier, MKLClassifier

    return MemoryClassifier(MKLClassifier(standardize=True))


def _default() -> Any:
    from streammkl.river import MKLClassifier

    return MKLClassifier(standardize=True)


def _logistic() -> Any:
    from river import linear_model, preprocessing

    return preprocessing.StandardScaler() | linear_model.LogisticRegression()


def _computed(stream: str) -> tuple[float, float]:
    """(fraction of the timed rounds that computed the vote, the weight at the end)."""
    data = dense_stream(stream)
    model = _memory()
    for x, y in data[:WARM]:
        model.learn_predict_one(x, y)
    computed = 0
    for x, y in data[WARM:]:
        computed += model._votes_now()
        model.learn_predict_one(x, y)
    return computed / len(data[WARM:]), model.memory_weight


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    add_out(parser)
    args = parser.parse_args(argv)
    header = machine()
    runs = {
        "default one call": (_default, one_call),
        "memory one call": (_memory, one_call),
        "default two calls": (_default, two_calls),
        "memory two calls": (_memory, two_calls),
        "LogisticRegression two calls": (_logistic, two_calls),
    }
    out = interleaved_per_call(runs, args.reps)
    rows = []
    for stream in DENSE_STREAMS:
        t = out[stream]
        share, weight = _computed(stream)
        lr = t["LogisticRegression two calls"]
        rows.append([
            stream, f"{t['default one call']:.2f}", f"{t['memory one call']:.2f}",
            f"{t['memory one call'] / t['default one call'] - 1:+.0%}",
            f"{t['default two calls']:.2f}", f"{t['memory two calls']:.2f}",
            f"{t['memory two calls'] / t['default two calls'] - 1:+.0%}",
            f"{lr:.2f}", f"{lr / t['memory one call']:.2f}x", f"{lr / t['memory two calls']:.2f}x",
            f"{share:.3f}", f"{weight:.3f}",
        ])  # fmt: skip
    body = "\n\n".join([
        header,
        f"CPU µs per example, medians of {args.reps} interleaved runs (warm-up {WARM:,} "
        f"examples). `memory`: `MemoryClassifier(MKLClassifier(standardize=True))`; "
        f"`default`: `MKLClassifier(standardize=True)`; LR: `StandardScaler() | "
        f"LogisticRegression()`, `predict_proba_one` + `learn_one`. Load average at the end: "
        f"{os.getloadavg()[0]:.2f}.",
        markdown(
            ["stream", "default 1 call", "memory 1 call", "cost", "default 2 calls",
             "memory 2 calls", "cost", "LR 2 calls", "LR / memory 1 call",
             "LR / memory 2 calls", "vote computed", "weight at end"],
            rows,
        ),
    ])  # fmt: skip
    print(body)
    publish(
        "memory_classifier_speed", "MemoryClassifier: cost per call", body,
        documented_run(parser, args), args.out,
    )  # fmt: skip


if __name__ == "__main__":
    main()
