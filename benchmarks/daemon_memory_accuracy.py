"""What ``learner.memory_window`` does to a regression daemon's accuracy: prequential MAE on the
suite's regression streams (``river_suite.py``: TrumpApproval, ChickWeights, Friedman capped at
20,000 examples), seeds 0..4, mean ± sd.

- ``daemon``: the regressor the daemon builds from ``learner.task = "regression"`` and
  ``learner.seed = s`` (``MKLRegressor(standardize=True, seed=s)``: it standardises its own
  inputs);
- ``daemon + memory``: the same with ``learner.memory_window = 1000``
  (``MemoryRegressor(MKLRegressor(standardize=True, seed=s), window=1000)``);
- ``library`` and ``library MemoryRegressor()``: the suite's rows (``StandardScaler() |
  MKLRegressor(seed=s)`` and ``MemoryRegressor`` around it), river's scaler in the pipeline.

The daemon's models learn one ``learn_predict_one`` per record (what its generic driver calls),
their feature names as strings (as its decoder gives them); the library's are run as the suite
runs them (``predict_one`` then ``learn_one``).

Run: ``python benchmarks/daemon_memory_accuracy.py [--seeds 5]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import add_out, documented_run, machine, markdown, publish
from river_suite import DATASETS, prequential, stream

CAP = 20_000
STREAMS = ("trump-approval", "chick-weights", "friedman")
WINDOW = 1000


def _daemon(memory: bool) -> Callable[[int], Any]:
    def make(seed: int) -> Any:
        from streammkl.daemon.config import load_settings
        from streammkl.daemon.learning.building import build_learner

        over: dict[str, Any] = {"learner.task": "regression", "learner.seed": seed}
        if memory:
            over["learner.memory_window"] = WINDOW
        return build_learner(load_settings(env={}, overrides=over).learner)

    return make


def _library(memory: bool) -> Callable[[int], Any]:
    def make(seed: int) -> Any:
        from river import preprocessing

        from streammkl.river import MemoryRegressor, MKLRegressor

        learner = preprocessing.StandardScaler() | MKLRegressor(seed=seed)
        return MemoryRegressor(learner) if memory else learner

    return make


#: The rows: (name, model factory by seed, whether the daemon's path runs it).
MODELS: tuple[tuple[str, Callable[[int], Any], bool], ...] = (
    ("daemon", _daemon(False), True),
    ("daemon + memory", _daemon(True), True),
    ("library", _library(False), False),
    ("library MemoryRegressor()", _library(True), False),
)


def _mae_daemon(model: Any, data: list[tuple[dict, Any]]) -> float:
    total = 0.0
    for x, y in data:
        total += abs(model.learn_predict_one({str(k): v for k, v in x.items()}, y) - y)
    return total / len(data)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    add_out(parser)
    args = parser.parse_args(argv)
    header = machine()
    rows = []
    for key in STREAMS:
        data = stream(key, CAP)
        mae: dict[str, list[float]] = {name: [] for name, _, _ in MODELS}
        for seed in range(args.seeds):
            for name, make, daemon in MODELS:
                model = make(seed)
                if daemon:
                    mae[name].append(_mae_daemon(model, data))
                else:
                    mae[name].append(prequential(model, data, "regression")[0]["MAE"])
        mean = {k: statistics.fmean(v) for k, v in mae.items()}
        sd = {k: statistics.stdev(v) if len(v) > 1 else float("nan") for k, v in mae.items()}
        print(DATASETS[key].title, {k: round(v, 4) for k, v in mean.items()}, flush=True)
        rows.append(
            [f"{DATASETS[key].title} ({len(data):,})"]
            + [f"{mean[name]:.4f} ± {sd[name]:.4f}" for name, _, _ in MODELS]
            + [f"{mean['daemon + memory'] - mean['daemon']:+.4f}"]
        )
    body = "\n\n".join([
        header,
        f"Prequential MAE, mean ± sd over seeds 0-{args.seeds - 1} (MAE does not depend on the "
        f"load); memory window {WINDOW:,}.",
        markdown(["stream"] + [name for name, _, _ in MODELS] + ["memory - daemon"], rows),
    ])  # fmt: skip
    publish(
        "daemon_memory_accuracy", "learner.memory_window: a regression daemon's accuracy", body,
        documented_run(parser, args), args.out,
    )  # fmt: skip


if __name__ == "__main__":
    main()
