"""Does every kernel of the bank earn its place, and does the learner hang on its seed?

The default learner (``StandardScaler() | MKLClassifier(seed=s)``) and variants of its bank,
each over seeds 0..N-1, prequential accuracy (``predict_one`` then ``learn_one``) on the
classification streams of ``benchmarks/river_suite.py`` (same streams, same order, same
20,000-example caps). Per stream and bank: mean ± standard deviation over the seeds and the
seed spread (max - min), in points. Banks:

- ``default``: ``streammkl.river.defaults.kernel_bank()`` (its last block the landmarks,
  ``LandmarkRBF(16, 50)``);
- ``- landmarks``: the default without its landmark block (the default before it);
- ``landmarks(S/median m=M)``: the default with ``LandmarkRBF(S, M)`` in place of its
  landmark block (local memory as an explicit block, so FTRL stays: the normalised Gaussian
  profile over the first M standardised inputs at ``gamma = S / median``);
- ``i.i.d. additive draws``: the default with its additive Gaussian block drawn i.i.d. (the
  default before the quadrature draws: what they change);
- ``+ stumps``: the default with ``AdditiveStumps(32)`` (thresholds on single inputs);
- ``+ narrow rff``: the default with ``MedianRBF(64, 256)`` (a narrower Gaussian: local memory);
- ``+ stumps + narrow rff``: both (``defaults.accurate_bank()`` before its random binning);
- ``+ kernelized rbf(16/median) mixed schedules``: the default with a kernelized
  ``MedianRBF(16)`` (support vectors, the learner's merge budget of 256) under ``FTRL``: per-block
  schedules, FTRL on the explicit blocks and AdaGrad's mirror descent on the kernelized one in
  the same round (``defaults.kernelized_bank()``; the default's averaged iterates, of the
  explicit blocks, each predicting with the kernelized block's current scores);
- ``+ kernelized rbf(16/median) all AdaGrad``: the same bank under ``AdaGrad`` for every block
  (what a kernelized block gave the whole learner before per-block schedules; no averages).
- ``+ binning(S/median-l1 R=R B=B)``: the default with ``RandomBinning(R, S, B)`` (random
  binning features: R random grids, each input's cell hashed into B columns per grid; the
  Laplacian kernel ``exp(-||x - y||_1 / sigma)``, ``1 / sigma = S / median L1 distance``), at the
  settings of ``BINNING``;
- ``+ stumps + narrow rff + binning(4/median-l1 R=64 B=4)``: the accurate bank with
  ``RandomBinning(64, 4, 4)`` (``defaults.accurate_bank()``).

Targets (issue 27 section 3): the default's seed spread <= 0.5 point on every stream.

Run: ``python benchmarks/bank_ablation.py [--seeds 5] [--jobs 2] [--datasets ...]``; the
documented run is every option at its default.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import add_out, documented_run, machine, markdown, publish

SPREAD_TARGET = 0.5  # points


def _with(
    *extra: object, iid: bool = False, landmarks: object | None = None, drop: bool = False
) -> Callable[[], tuple]:
    """The default bank with ``extra`` blocks; ``iid``: its additive block drawn i.i.d.;
    ``landmarks``: this block in place of its landmark block; ``drop``: without it."""

    def bank() -> tuple:
        from streammkl.core import kernels
        from streammkl.river import defaults

        out = [
            (landmarks if landmarks is not None else k) if isinstance(k, kernels.LandmarkRBF) else k
            for k in defaults.kernel_bank()
            if not (drop and isinstance(k, kernels.LandmarkRBF))
        ]
        if iid:
            out = [
                kernels.AdditiveRBF(k.gamma, k.n_components or 0)
                if isinstance(k, kernels.AdditiveRBF)
                else k
                for k in out
            ]
        return (*out, *extra)

    return bank


#: Random binning beside the default bank (``RandomBinning(R, S, B)``: R grids, 1 / sigma = S /
#: median L1 distance, B columns per grid): the two best means over the development streams of
#: a sweep of S in {0.25, 1, 4, 16, 64} and (R, B) in {(16, 16), (32, 8), (64, 4), (32, 16)}
#: (5 seeds each; every variant within 0.1 point of the default on each development stream).
BINNING = ((16, 0.25, 16), (64, 4.0, 4))
MIXED = "+ kernelized rbf(16/median) mixed schedules"
ALL_ADAGRAD = "+ kernelized rbf(16/median) all AdaGrad"


def _schedule(bank: str) -> object | None:
    """The schedule a bank's learner is given (None: the learner's default)."""
    from streammkl.core import schedules
    from streammkl.river import defaults

    return {
        MIXED: schedules.FTRL(defaults.ETA0),
        ALL_ADAGRAD: schedules.AdaGrad(defaults.ETA0),
    }.get(bank)


def _banks() -> dict[str, Callable[[], tuple]]:
    from streammkl.core import kernels
    from streammkl.river import defaults

    stumps = kernels.AdditiveStumps(32)
    narrow = kernels.MedianRBF(64.0, 256)
    kernelized = defaults.kernelized_bank()[-1]  # MedianRBF(16, n_components=None)
    return {
        "default": _with(),
        "- landmarks": _with(drop=True),
        **{
            f"landmarks({s:g}/median m={m})": _with(landmarks=kernels.LandmarkRBF(s, m))
            for s, m in (
                (4.0, 50),
                (64.0, 50),
                (16.0, 128),
                (4.0, 256),
                (16.0, 256),
                (64.0, 256),
            )
        },
        "i.i.d. additive draws": _with(iid=True),
        "+ stumps": _with(stumps),
        "+ narrow rff": _with(narrow),
        "+ stumps + narrow rff": _with(stumps, narrow),
        MIXED: _with(kernelized),
        ALL_ADAGRAD: _with(kernelized),
        **{
            f"+ binning({s:g}/median-l1 R={r} B={b})": _with(kernels.RandomBinning(r, s, b))
            for r, s, b in BINNING
        },
        "+ stumps + narrow rff + binning(4/median-l1 R=64 B=4)": _with(
            stumps, narrow, kernels.RandomBinning(64, 4.0, 4)
        ),
    }


def _run(job: tuple[str, str, int]) -> float:
    key, bank, seed = job
    import river_suite as rs
    from river import preprocessing

    from streammkl.river import MKLClassifier

    data = list(itertools.islice(rs.DATASETS[key].load(), rs.FULL))
    learner = MKLClassifier(kernels=_banks()[bank](), schedule=_schedule(bank), seed=seed)
    model = preprocessing.StandardScaler() | learner
    hits = 0
    for x, y in data:
        hits += model.predict_one(x) == y
        model.learn_one(x, y)
    return hits / len(data)


def main(argv: list[str] | None = None) -> None:
    import river_suite as rs

    classification = [k for k, d in rs.DATASETS.items() if d.task != "regression"]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--datasets", default=",".join(classification))
    parser.add_argument("--banks", default=",".join(_banks()), help="comma-separated bank names")
    add_out(parser)
    args = parser.parse_args(argv)
    keys = [k for k in args.datasets.split(",") if k]
    banks = [b for b in args.banks.split(",") if b]
    unknown = [b for b in banks if b not in _banks()] + [k for k in keys if k not in rs.DATASETS]
    if unknown:
        parser.error(f"unknown bank(s) or dataset(s): {unknown}")
    header = machine()
    start = time.perf_counter()
    jobs = [(k, b, s) for k in keys for b in banks for s in range(args.seeds)]
    with ProcessPoolExecutor(args.jobs) as pool:
        accs = dict(zip(jobs, pool.map(_run, jobs), strict=True))
    names = [rs.DATASETS[k].title for k in keys]
    rows, verdicts = [], []
    for b in banks:
        cells = []
        for k in keys:
            a = [accs[(k, b, s)] for s in range(args.seeds)]
            sd = statistics.stdev(a) if len(a) > 1 else 0.0
            spread = 100 * (max(a) - min(a))
            cells.append(f"{statistics.mean(a):.4f} ± {sd:.4f} ({spread:.2f})")
            if b == "default":
                status = "met" if spread <= SPREAD_TARGET else "MISSED"
                ds = rs.DATASETS[k]
                verdicts.append([ds.title, ds.role, f"{spread:.2f}", status])
        rows.append([b, *cells])
    body = "\n\n".join([
        f"{header}; {args.seeds} seeds, total {time.perf_counter() - start:.0f} s. "
        "Prequential accuracy, mean ± sd over the seeds (seed spread max - min, in points).",
        markdown(["bank", *names], rows),
        f"The default's seed spread (target <= {SPREAD_TARGET} point):",
        markdown(["stream", "role", "spread (points)", "status"], verdicts),
    ])  # fmt: skip
    print(body)
    full = documented_run(parser, args)
    publish("bank_ablation", "Bank ablation and seed spread", body, full, args.out)


if __name__ == "__main__":
    main()
