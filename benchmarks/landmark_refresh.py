"""Landmarks that move: the default learner with its ``LandmarkRBF`` landmarks refreshed
(``LandmarkRBF(refresh=N)``) against the same learner with fixed landmarks.

The default bank's ``LandmarkRBF(16, 50)`` takes its landmarks from the first 50 standardised
inputs. With ``refresh=N`` the learner itself, at every round ``t`` that is a multiple of ``N``
and whose input it scored with a loss, replaces the landmark whose weight columns have the
smallest norm (among near-duplicate landmarks first) by that input, unless the input lies
within the landmarks' reach (``LandmarkRBF.reach``: ``REACH`` times the landmarks' own spacing,
the median over the landmarks of ``gamma`` times the squared distance to the nearest other one,
or ``CROWD`` while some landmarks are near-duplicates; ``--rule absolute``: ``REACH`` itself)
(its columns restart at zero, the block norm recomputed exactly; see
``streammkl.core.kernels.LandmarkRBF``). The period and reach are chosen on the development
streams (Bananas, Phishing, SEA, Hyperplane) alone and then reported on the validation streams
without re-tuning (``--datasets``).

Learner: ``StandardScaler() | MKLClassifier(kernels=bank, seed=s)`` with the default bank (or
``--bank accurate``: ``defaults.accurate_bank()``) whose landmark kernel takes each period;
prequential accuracy (``predict_one`` then ``learn_one``) on the classification streams of
``benchmarks/river_suite.py`` (same order, 20,000-example caps), mean ± sd over the seeds, and
each period's difference from fixed landmarks (mean over the seeds, in points).

The period and ``LandmarkRBF.REACH`` were chosen on the development streams alone (``--datasets
bananas,phishing,sea-drift,hyperplane``): first the absolute reach (``--rule absolute --periods
0,10,25,50,100 --reach 0|1|2|4``: refresh 100, reach 2, which with 10 inputs let nearly every
checked input replace a landmark), then the reach relative to the spacing (``--rule spacing
--reach 1|2|4``, ``--periods 0,100,200,400``): refresh 100 at 2 x the spacing, the best mean of
the relative rules; the full run reports it on every stream.

Run: ``python benchmarks/landmark_refresh.py [--seeds 5] [--jobs 2] [--periods 0,100]
[--datasets ...] [--bank default|accurate] [--rule spacing|absolute] [--reach 2] [--landmarks M]
[--scale S]``.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import add_out, documented_run, machine, markdown, publish


def bank(kind: str, period: int, m: int = 0, scale: float = 0.0, rule: str = "spacing") -> tuple:
    """The bank ``kind`` with its landmark kernel refreshed every ``period`` rounds (0: not),
    with ``m`` landmarks at ``scale`` / median (0: the bank's), its reach by ``rule``
    (``LandmarkRBF(reach_rule=)``)."""
    from streammkl.core import kernels
    from streammkl.river import defaults

    base = defaults.accurate_bank() if kind == "accurate" else defaults.kernel_bank()
    return tuple(
        kernels.LandmarkRBF(
            scale or k.scale, m or k.n_landmarks, k.features, refresh=period, reach_rule=rule
        )
        if isinstance(k, kernels.LandmarkRBF)
        else k
        for k in base
    )


def _run(job: tuple[str, int, int, str, float, int, float, str]) -> float:
    key, seed, period, kind, reach, m, scale, rule = job
    import river_suite as rs
    from river import preprocessing

    from streammkl.core import kernels
    from streammkl.river import MKLClassifier

    kernels.LandmarkRBF.REACH = reach  # (a worker process of its own: set for its runs)
    data = list(itertools.islice(rs.DATASETS[key].load(), rs.FULL))
    learner = MKLClassifier(kernels=bank(kind, period, m, scale, rule), seed=seed)
    pipe = preprocessing.StandardScaler() | learner
    hits = 0
    for x, y in data:
        hits += pipe.predict_one(x) == y
        pipe.learn_one(x, y)
    return hits / len(data)


def main(argv: list[str] | None = None) -> None:
    import river_suite as rs

    classification = [k for k, d in rs.DATASETS.items() if d.task != "regression"]
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--periods", default="0,100", help="refresh periods (0: fixed)")
    parser.add_argument("--datasets", default=",".join(classification))
    parser.add_argument("--bank", default="default", choices=("default", "accurate"))
    parser.add_argument(
        "--reach", type=float, default=2.0,
        help="LandmarkRBF.REACH: inputs within it of a landmark refresh nothing",
    )  # fmt: skip
    parser.add_argument(
        "--rule", default="spacing", choices=("spacing", "absolute"),
        help="the reach in units of the landmarks' spacing or of gamma (LandmarkRBF(reach_rule=))",
    )  # fmt: skip
    parser.add_argument("--landmarks", type=int, default=0, help="landmarks (0: the bank's)")
    parser.add_argument("--scale", type=float, default=0.0, help="their gamma scale (0: bank's)")
    add_out(parser)
    args = parser.parse_args(argv)
    keys = [k for k in args.datasets.split(",") if k]
    unknown = [k for k in keys if k not in rs.DATASETS]
    if unknown:
        parser.error(f"unknown dataset(s): {unknown}")
    periods = [int(p) for p in args.periods.split(",") if p]
    if 0 not in periods:
        periods.insert(0, 0)  # the reference: fixed landmarks
    header = machine()
    start = time.perf_counter()
    extra = (args.bank, args.reach, args.landmarks, args.scale, args.rule)
    jobs = [(k, s, p, *extra) for k in keys for p in periods for s in range(args.seeds)]
    with ProcessPoolExecutor(args.jobs) as pool:
        accs = dict(zip(jobs, pool.map(_run, jobs), strict=True))

    def seeds(k: str, p: int) -> list[float]:
        return [accs[(k, s, p, *extra)] for s in range(args.seeds)]

    rows = []
    for p in periods:
        cells = []
        for k in keys:
            a = seeds(k, p)
            sd = statistics.stdev(a) if len(a) > 1 else 0.0
            cell = f"{statistics.mean(a):.4f} ± {sd:.4f}"
            if p:
                cell += f" ({100 * (statistics.mean(a) - statistics.mean(seeds(k, 0))):+.2f})"
            cells.append(cell)
        rows.append([f"refresh={p}" if p else "fixed landmarks", *cells])
    names = [f"{rs.DATASETS[k].title} ({rs.DATASETS[k].role})" for k in keys]
    body = "\n\n".join([
        f"{header}; {args.seeds} seeds, bank {args.bank}, reach {args.reach:g} ({args.rule}), "
        "landmarks "
        f"{args.landmarks or 'as the bank'}, scale {args.scale or 'as the bank'}, total "
        f"{time.perf_counter() - start:.0f} s. Prequential accuracy, mean ± sd over the seeds "
        "(in brackets: the difference from fixed landmarks, points).",
        markdown(["landmarks", *names], rows),
    ])  # fmt: skip
    print(body)
    full = documented_run(parser, args)
    publish("landmark_refresh", "Landmarks that move: a measurement", body, full, args.out)


if __name__ == "__main__":
    main()
