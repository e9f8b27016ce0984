"""What local memory costs per unit of accuracy (issue 27, items 2 and 4).

Candidates beside the default bank (``streammkl.river.defaults.kernel_bank()``), each measured
for accuracy and for its cost per call:

- ``kernelized rbf(S/median) oldest B``: a kernelized ``MedianRBF(S)`` (support vectors) whose
  support set is a sliding window: ``budget=B``, ``budget_policy="oldest"`` (the oldest pair
  removed, cheaper than the merge), under per-block schedules (``schedules.FTRL``: FTRL on the
  explicit blocks, AdaGrad on the kernelized one), as ``defaults.kernelized_bank()`` but for
  its budget policy and bandwidth;
- ``kernelized rbf(S/median) merge B``: the same with the merge budget (the learner's default
  policy); at 16/median and 256, ``defaults.kernelized_bank()`` as documented;
- ``landmark window(S/median m=M every P)``: the default's landmark block replaced by
  ``LandmarkRBF(S, M, refresh=P, replace="oldest")``: landmarks taken from the stream as a
  sliding window (every P-th round scored with a loss replaces a landmark, first in first out:
  the landmarks are the last M such inputs), explicit, so FTRL and the explicit round stay.

Accuracy: prequential (``predict_one`` then ``learn_one``) through
``preprocessing.StandardScaler() | MKLClassifier(seed=s)``, seeds 0..N-1, the streams of
``benchmarks/river_suite.py`` (same order, same 20,000-example caps); mean ± sd over the seeds
and, in brackets, the difference from the default in points. Cost: ``learn_predict_one`` of
``MKLClassifier(standardize=True, ...)`` on the dense rows of ``benchmarks/river_speed.py``
(Bananas, Phishing, Hyperplane; 1,100 warm-up examples), CPU time per call, the variants
interleaved run by run, medians of ``--reps`` runs and the ratio to the default.

Run: ``python benchmarks/local_memory.py [--seeds 5] [--jobs 2] [--datasets ...] [--variants
...] [--speed-reps 5] [--no-accuracy] [--no-speed]``.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import add_out, documented_run, machine, markdown, publish

VALIDATION = ("rbf-drift", "image-segments")
DEVELOPMENT = ("bananas", "phishing", "sea-drift", "hyperplane")


@dataclass(frozen=True)
class Variant:
    """A learner: its bank (``bank()``), schedule (None: the learner's), budget and policy."""

    bank: Callable[[], tuple]
    schedule: Callable[[], Any] | None = None
    learner: dict[str, Any] = field(default_factory=dict)


def _default() -> tuple:
    from streammkl.river import defaults

    return defaults.kernel_bank()


def _kernelized(scale: float) -> Callable[[], tuple]:
    def bank() -> tuple:
        from streammkl.core import kernels

        return (*_default(), kernels.MedianRBF(scale, n_components=None))

    return bank


def _window(scale: float, m: int, every: int) -> Callable[[], tuple]:
    def bank() -> tuple:
        from streammkl.core import kernels

        window = kernels.LandmarkRBF(scale, m, refresh=every, replace="oldest")
        return tuple(window if isinstance(k, kernels.LandmarkRBF) else k for k in _default())

    return bank


def _ftrl() -> Any:
    from streammkl.core import schedules
    from streammkl.river import defaults

    return schedules.FTRL(defaults.ETA0)


def _variants() -> dict[str, Variant]:
    out = {"default": Variant(_default)}
    for scale, budget in ((16, 256), (16, 512), (64, 256)):
        out[f"kernelized rbf({scale}/median) merge {budget}"] = Variant(
            _kernelized(float(scale)), _ftrl, {"budget": budget, "budget_policy": "merge"}
        )
    for scale, budget in ((16, 256), (16, 1000), (32, 512), (64, 256), (64, 1000)):
        out[f"kernelized rbf({scale}/median) oldest {budget}"] = Variant(
            _kernelized(float(scale)), _ftrl, {"budget": budget, "budget_policy": "oldest"}
        )
    for scale, m, every in ((16, 50, 20), (16, 128, 8), (64, 128, 8), (16, 50, 100)):
        out[f"landmark window({scale}/median m={m} every {every})"] = Variant(
            _window(float(scale), m, every)
        )
    return out


def _learner(name: str, seed: int = 0, **more: Any) -> Any:
    from streammkl.river import MKLClassifier

    v = _variants()[name]
    schedule = v.schedule() if v.schedule is not None else None
    return MKLClassifier(kernels=v.bank(), schedule=schedule, seed=seed, **v.learner, **more)


def _run(job: tuple[str, str, int]) -> float:
    key, name, seed = job
    import river_suite as rs
    from river import preprocessing

    data = list(itertools.islice(rs.DATASETS[key].load(), rs.FULL))
    model = preprocessing.StandardScaler() | _learner(name, seed)
    hits = 0
    for x, y in data:
        hits += model.predict_one(x) == y
        model.learn_one(x, y)
    return hits / len(data)


def _accuracy(keys: list[str], names: list[str], seeds: int, jobs: int) -> str:
    import river_suite as rs

    start = time.perf_counter()
    work = [(k, b, s) for k in keys for b in names for s in range(seeds)]
    with ProcessPoolExecutor(jobs) as pool:
        accs = dict(zip(work, pool.map(_run, work), strict=True))
    rows = []
    base = {k: statistics.mean(accs[(k, names[0], s)] for s in range(seeds)) for k in keys}
    for b in names:
        cells = []
        for k in keys:
            a = [accs[(k, b, s)] for s in range(seeds)]
            sd = statistics.stdev(a) if len(a) > 1 else 0.0
            mean = statistics.mean(a)
            diff = "" if b == names[0] else f" ({100 * (mean - base[k]):+.2f})"
            cells.append(f"{mean:.4f} ± {sd:.4f}{diff}")
        rows.append([b, *cells])
    heads = [f"{rs.DATASETS[k].title} ({rs.DATASETS[k].role})" for k in keys]
    return "\n\n".join([
        f"{seeds} seeds, {time.perf_counter() - start:.0f} s. Prequential accuracy, mean ± sd "
        f"over the seeds (in brackets: the difference from `{names[0]}`, points).",
        markdown(["variant", *heads], rows),
    ])  # fmt: skip


def _speed(names: list[str], reps: int) -> str:
    import river_speed as rsp

    def make(b: str) -> Callable[[], Any]:
        return lambda: _learner(b, standardize=True)

    runs = {b: (make(b), rsp.one_call) for b in names}
    rows: list[list[Any]] = []
    for stream, meds in rsp.interleaved_per_call(runs, reps).items():
        base = meds[names[0]]
        rows += [[stream, b, f"{meds[b]:.2f}", f"{meds[b] / base:.3f}"] for b in names]
    return "\n\n".join([
        f"Cost per call: medians of {reps} runs per variant, the variants interleaved.",
        markdown(["stream", "variant", "µs per call (CPU)", f"/ {names[0]}"], rows),
    ])  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--datasets", default=",".join(VALIDATION + DEVELOPMENT))
    parser.add_argument("--variants", default=",".join(_variants()), help="comma-separated")
    parser.add_argument("--speed-reps", type=int, default=5)
    parser.add_argument("--no-accuracy", action="store_true")
    parser.add_argument("--no-speed", action="store_true")
    add_out(parser)
    args = parser.parse_args(argv)
    keys = [k for k in args.datasets.split(",") if k]
    names = [b for b in args.variants.split(",") if b]
    unknown = [b for b in names if b not in _variants()]
    if unknown:
        parser.error(f"unknown variant(s): {unknown}")
    parts = [machine()]
    if not args.no_accuracy:
        parts.append(_accuracy(keys, names, args.seeds, args.jobs))
        print(parts[-1], flush=True)
    if not args.no_speed:
        parts.append(_speed(names, args.speed_reps))
    body = "\n\n".join(parts)
    print(body)
    full = documented_run(parser, args)
    publish("local_memory", "What local memory costs per unit of accuracy", body, full, args.out)


if __name__ == "__main__":
    main()
