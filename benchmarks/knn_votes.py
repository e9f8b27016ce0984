"""Local memory as stacked neighbour votes: a research prototype outside the core (issue 27).

A kernel machine cannot memorise every example cheaply, but it can be *given* a neighbour vote
as features and let MKL weight it. ``NeighbourVotes``, a river supervised transformer placed
between the scaler and the learner (``StandardScaler() | NeighbourVotes(...) | learner``, run by
``Stacked`` as river's pipeline runs a supervised transformer), keeps
a sliding window of the last W standardised inputs and their labels, and appends to each input
the vote of its neighbours in that window, computed from PAST examples only (river's pipeline
transforms an input before the transformer learns it: the vote for x_t never sees y_t):

- ``knn k``: the class-vote fractions of the k nearest window inputs (Euclidean);
- ``parzen S``: Gaussian-weighted (Parzen) class-vote fractions at ``gamma = S / median
  ||x - x'||^2`` (the median of the window's pairwise squared distances once 100 inputs have
  joined it, ``2 d`` before), the ``LandmarkRBF`` scale at S = 16;
- regression: the kNN mean of the window's targets, standardised by the running target mean
  and sd (``MKLRegressor`` standardises its targets).

One feature per class (``vote0``, ``vote1``, ... in order of the labels' first appearance).
Two forms:

- ``(a) bank``: the votes are extra inputs of the whole default bank (``MKLClassifier()``'s
  every block sees them);
- ``(b) linear``: the votes reach only a ``Linear`` block of their own (``Linear(features=
  [vote0, ...])``, kernels select inputs by name), every default block restricted to the
  stream's own inputs (and keeping its default name, hence its random draws).

A ``gain`` (``_more_variants``, by ``--variants``) multiplies the vote features: AdaGrad's steps
do not see it, the group lasso does (the block's gradients scale with it, lambda does not), so
a gain below 1 asks for more evidence before the block enters.

Accuracy: prequential (``predict_one`` then ``learn_one``) through ``StandardScaler() | [votes
|] MKLClassifier(seed=s)``, seeds 0..N-1, the streams of ``benchmarks/river_suite.py`` (same
order, 20,000-example caps); mean ± sd over the seeds and, in brackets, the difference from the
default in points. Regression (unless ``--no-regression``): MAE of ``StandardScaler() | [votes |]
MKLRegressor(seed=s)``. Cost (unless ``--no-cost``): a numba kernel computing the kNN vote (W x d
distances, a partial selection of the k nearest, the k labels counted), µs per call, median of
runs over a ring buffer of the stream's standardised inputs, on Bananas (d = 2) and ImageSegments
(d = 18) at W = 256 and 1,000.

Run: ``python benchmarks/knn_votes.py [--seeds 5] [--jobs 2] [--streams ...] [--variants ...]
[--no-regression] [--no-cost] [--no-accuracy]``; the documented run is every option at its
default.
"""

from __future__ import annotations

import argparse
import itertools
import math
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import add_out, documented_run, machine, markdown, publish

DEVELOPMENT = ("bananas", "phishing", "sea-drift", "hyperplane")
VALIDATION = ("rbf-drift", "image-segments", "shuttle", "sine", "led", "agrawal")
REGRESSION = ("trump-approval", "chick-weights", "friedman")
MAX_CLASSES = 32  # vote slots a (b) learner's Linear block selects by name
REGRESSION_VARIANTS = (
    "default", "(a) bank knn k=10 W=1000", "(b) linear knn k=10 W=1000", "(b) linear knn k=5 W=256",
    "(b) linear parzen 16/median W=1000",
)  # fmt: skip
MEDIAN_AFTER = 100  # the Parzen bandwidth: median pairwise distance of the first 100 inputs


@dataclass(frozen=True)
class Vote:
    """How the vote is computed: ``kind`` "knn" (k nearest) or "parzen" (gamma = scale /
    median), over a window of ``window`` past inputs; ``form`` "bank" (a) or "linear" (b)."""

    kind: str
    window: int
    k: int = 10
    scale: float = 16.0
    form: str = "linear"
    gain: float = 1.0  # the vote features are gain x the fractions (see _more_variants)


def _make_transformer() -> type:
    class NeighbourVotes:
        """Appends the neighbour vote of the last ``window`` (input, label) pairs to an input."""

        def __init__(self, vote: Vote, regression: bool = False):
            self.vote = vote
            self.regression = regression
            self.names: list[str] = []
            self.X = np.zeros((0, 0))
            self.y = np.zeros(vote.window)
            self.n = 0  # pairs seen (the window holds min(n, W), ring-buffered)
            self.slots: dict[Any, int] = {}
            self.gamma = math.nan
            self.y_mean = 0.0
            self.y_m2 = 0.0

        def _row(self, x: dict) -> np.ndarray:
            if not self.names:
                self.names = list(x)
                self.X = np.zeros((self.vote.window, len(self.names)))
            return np.array([x.get(k, 0.0) for k in self.names], dtype=np.float64)

        def _weights(self, row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            """(indices of the window pairs voting, their weights)."""
            m = min(self.n, self.vote.window)
            d2 = ((self.X[:m] - row) ** 2).sum(axis=1)
            if self.vote.kind == "knn":
                k = min(self.vote.k, m)
                idx = np.argpartition(d2, k - 1)[:k] if k < m else np.arange(m)
                return idx, np.ones(len(idx))
            gamma = self.gamma
            if math.isnan(gamma):
                gamma = self.vote.scale / (2.0 * len(self.names))
            return np.arange(m), np.exp(-gamma * d2)

        def transform_one(self, x: dict) -> dict:
            out = dict(x)
            if self.regression:
                if self.n == 0:
                    out["vote"] = 0.0
                    return out
                idx, w = self._weights(self._row(x))
                sd = math.sqrt(self.y_m2 / self.n) if self.n > 1 else 1.0
                mean = float(w @ self.y[idx]) / max(float(w.sum()), 1e-300)
                out["vote"] = self.vote.gain * (mean - self.y_mean) / (sd if sd > 0 else 1.0)
                return out
            votes = np.zeros(len(self.slots))
            if self.n > 0:
                idx, w = self._weights(self._row(x))
                np.add.at(votes, self.y[idx].astype(np.int64), w)
                total = votes.sum()
                if total > 0:
                    votes /= total
            for j, v in enumerate(votes):
                out[f"vote{j}"] = self.vote.gain * float(v)
            return out

        def learn_one(self, x: dict, y: Any) -> None:
            row = self._row(x)
            if self.regression:
                value = float(y)
                delta = value - self.y_mean
                self.y_mean += delta / (self.n + 1)
                self.y_m2 += delta * (value - self.y_mean)
            else:
                value = float(self.slots.setdefault(y, len(self.slots)))
            at = self.n % self.vote.window
            self.X[at] = row
            self.y[at] = value
            self.n += 1
            if self.vote.kind == "parzen" and self.n == MEDIAN_AFTER:
                Z = self.X[: min(MEDIAN_AFTER, self.vote.window)]  # the window's inputs
                d2 = ((Z[:, None, :] - Z[None, :, :]) ** 2).sum(axis=2)
                med = float(np.median(d2[np.triu_indices(len(Z), 1)]))
                self.gamma = self.vote.scale / med if med > 0 else math.nan

    return NeighbourVotes


def _variants() -> dict[str, Vote | None]:
    out: dict[str, Vote | None] = {"default": None}
    for form, tag in (("bank", "(a) bank"), ("linear", "(b) linear")):
        for w, k in ((1000, 10), (256, 5)):
            out[f"{tag} knn k={k} W={w}"] = Vote("knn", w, k=k, form=form)
        out[f"{tag} parzen 16/median W=1000"] = Vote("parzen", 1000, scale=16.0, form=form)
    out["(b) linear knn k=10 W=256"] = Vote("knn", 256, k=10)
    return out


def _more_variants() -> dict[str, Vote | None]:
    """Variants tried after the first table (by ``--variants``; not in the documented run)."""
    out: dict[str, Vote | None] = {}
    for w, k in ((1000, 30), (256, 30), (1000, 100)):
        out[f"(b) linear knn k={k} W={w}"] = Vote("knn", w, k=k)
    for scale, w in ((4.0, 1000), (1.0, 1000), (16.0, 256), (4.0, 256)):
        out[f"(b) linear parzen {scale:g}/median W={w}"] = Vote("parzen", w, scale=scale)
    # A smaller gain makes the group lasso ask for more evidence before the block enters (its
    # accumulated gradients scale with the gain, the penalty does not)
    for gain in (0.5, 0.35, 0.25, 0.1):
        out[f"(b) linear knn k=10 W=1000 gain {gain:g}"] = Vote("knn", 1000, k=10, gain=gain)
        out[f"(b) linear parzen 16/median W=1000 gain {gain:g}"] = Vote(
            "parzen", 1000, scale=16.0, gain=gain
        )
    return out


def _restricted_bank(bank: tuple, names: list[str], votes: list[str]) -> tuple:
    """The bank's every block on ``names`` only (its default name kept: the same draws), and a
    ``Linear`` block of its own on ``votes``."""
    from streammkl.core import kernels

    out = [kernels.from_spec({**k.to_spec(), "features": names, "name": k.name}) for k in bank]
    return (*out, kernels.Linear(features=votes, name="neighbour-votes"))


def _model(variant: str, seed: int, names: list[str], regression: bool) -> Any:
    """The default learner behind a scaler, with the variant's votes between them."""
    from river import preprocessing

    from streammkl.river import MKLClassifier, MKLRegressor, defaults

    vote = {**_variants(), **_more_variants()}[variant]
    learner_cls = MKLRegressor if regression else MKLClassifier
    if vote is None:
        return preprocessing.StandardScaler() | learner_cls(seed=seed)
    bank = None
    if vote.form == "linear":
        votes = ["vote"] if regression else [f"vote{j}" for j in range(MAX_CLASSES)]
        bank = _restricted_bank(defaults.kernel_bank(), names, votes)
    transformer = _make_transformer()(vote, regression)
    return Stacked(
        preprocessing.StandardScaler(), transformer, learner_cls(kernels=bank, seed=seed)
    )


class Stacked:
    """``scaler | votes | learner`` as river's pipeline runs a supervised transformer (transform,
    then learn it; the unsupervised scaler learns first on a learning call, and only then
    transforms). By hand: this river's ``Pipeline`` does not take a ``SupervisedTransformer``
    for a transformer (it is no ``base.Transformer``) and would feed the learner no votes."""

    def __init__(self, scaler: Any, votes: Any, learner: Any):
        self.scaler, self.votes, self.learner = scaler, votes, learner

    def predict_one(self, x: dict) -> Any:
        return self.learner.predict_one(self.votes.transform_one(self.scaler.transform_one(x)))

    def learn_one(self, x: dict, y: Any) -> None:
        self.scaler.learn_one(x)
        z = self.scaler.transform_one(x)
        zv = self.votes.transform_one(z)  # the window before (z, y) joins it
        self.votes.learn_one(z, y)
        self.learner.learn_one(zv, y)


def _run(job: tuple[str, str, int]) -> float:
    key, variant, seed = job
    import river_suite as rs

    regression = rs.DATASETS[key].task == "regression"
    data = list(itertools.islice(rs.DATASETS[key].load(), rs.FULL))
    names = list(dict.fromkeys(k for x, _ in data for k in x))
    model = _model(variant, seed, names, regression)
    score = 0.0
    for x, y in data:
        p = model.predict_one(x)
        score += abs(p - y) if regression else float(p == y)
        model.learn_one(x, y)
    return score / len(data)


def _table(keys: list[str], names: list[str], seeds: int, jobs: int, what: str) -> str:
    import river_suite as rs

    start = time.perf_counter()
    work = [(k, v, s) for k in keys for v in names for s in range(seeds)]
    done: dict[tuple[str, str, int], float] = {}
    with ProcessPoolExecutor(jobs) as pool:
        for job, value in zip(work, pool.map(_run, work), strict=True):
            done[job] = value
            if job[2] == seeds - 1:
                a = [done[(job[0], job[1], s)] for s in range(seeds)]
                print(f"  {job[0]:15s} {job[1]:40s} {statistics.mean(a):.4f}", flush=True)
    base = {k: statistics.mean(done[(k, names[0], s)] for s in range(seeds)) for k in keys}
    scale = 1.0 if what == "MAE" else 100.0
    rows = []
    for v in names:
        cells = []
        for k in keys:
            a = [done[(k, v, s)] for s in range(seeds)]
            sd = statistics.stdev(a) if len(a) > 1 else 0.0
            mean = statistics.mean(a)
            places = 4 if what == "MAE" else 2
            diff = "" if v == names[0] else f" ({scale * (mean - base[k]):+.{places}f})"
            cells.append(f"{mean:.4f} ± {sd:.4f}{diff}")
        rows.append([v, *cells])
    heads = [f"{rs.DATASETS[k].title} ({rs.DATASETS[k].role})" for k in keys]
    unit = "MAE" if what == "MAE" else "points"
    return "\n\n".join([
        f"{seeds} seeds, {time.perf_counter() - start:.0f} s. Prequential {what}, mean ± sd over "
        f"the seeds (in brackets: the difference from `{names[0]}`, {unit}).",
        markdown(["variant", *heads], rows),
    ])  # fmt: skip


def _numba_vote() -> Callable:
    import numba

    @numba.njit(cache=False, nogil=True)
    def vote(X: np.ndarray, y: np.ndarray, m: int, x: np.ndarray, k: int, out: np.ndarray) -> None:
        """Class-vote fractions of the k nearest of the first m rows of X (labels y) into out."""
        d2 = np.empty(m)
        for i in range(m):
            s = 0.0
            for j in range(x.shape[0]):
                t = X[i, j] - x[j]
                s += t * t
            d2[i] = s
        out[:] = 0.0
        kk = min(k, m)
        # partial selection: keep the kk smallest in a small sorted buffer (k << W)
        best = np.full(kk, np.inf)
        lab = np.zeros(kk, dtype=np.int64)
        for i in range(m):
            v = d2[i]
            if v < best[kk - 1]:
                p = kk - 1
                while p > 0 and best[p - 1] > v:
                    best[p] = best[p - 1]
                    lab[p] = lab[p - 1]
                    p -= 1
                best[p] = v
                lab[p] = y[i]
        for p in range(kk):
            out[lab[p]] += 1.0 / kk

    return vote


def _numba_parzen() -> Callable:
    import numba

    @numba.njit(cache=False, nogil=True)
    def parzen(
        X: np.ndarray, y: np.ndarray, m: int, x: np.ndarray, gamma: float, out: np.ndarray
    ) -> None:
        """Gaussian-weighted class-vote fractions of the first m rows of X (labels y) into out
        (shifted by the nearest row's exponent, as the landmark block's map is)."""
        s = np.empty(m)
        top = -np.inf
        for i in range(m):
            d = 0.0
            for j in range(x.shape[0]):
                t = X[i, j] - x[j]
                d += t * t
            s[i] = -gamma * d
            top = max(top, s[i])
        out[:] = 0.0
        total = 0.0
        for i in range(m):
            w = np.exp(s[i] - top)
            out[y[i]] += w
            total += w
        for c in range(out.shape[0]):
            out[c] /= total

    return parzen


def _cost(reps: int) -> str:
    import river_suite as rs
    from river import preprocessing

    vote, parzen = _numba_vote(), _numba_parzen()
    rows = []
    for key in ("bananas", "image-segments"):
        data = list(itertools.islice(rs.DATASETS[key].load(), rs.FULL))
        scaler = preprocessing.StandardScaler()
        names = list(dict.fromkeys(k for x, _ in data for k in x))
        rows_x, labels, slots = [], [], {}
        for x, y in data:
            scaler.learn_one(x)
            z = scaler.transform_one(x)
            rows_x.append([z.get(k, 0.0) for k in names])
            labels.append(slots.setdefault(y, len(slots)))
        Z = np.ascontiguousarray(rows_x, dtype=np.float64)
        Y = np.asarray(labels, dtype=np.int64)
        out = np.zeros(len(slots))
        for w in (256, 1000):
            X = np.ascontiguousarray(Z[:w])
            yw = np.ascontiguousarray(Y[:w])
            queries = Z[w : w + 1000] if len(Z) >= w + 1000 else Z[:1000]
            vote(X, yw, w, queries[0], 10, out)  # compile
            parzen(X, yw, w, queries[0], 1.0, out)
            # check against numpy's argpartition on the first queries
            for q in queries[:50]:
                d2 = ((X - q) ** 2).sum(axis=1)
                ref = np.zeros(len(slots))
                np.add.at(ref, yw[np.argsort(d2, kind="stable")[:10]], 0.1)
                vote(X, yw, w, q, 10, out)
                assert np.allclose(out, ref), (key, w)
            per = []
            for _ in range(reps):
                t0 = time.process_time_ns()
                for q in queries:
                    vote(X, yw, w, q, 10, out)
                per.append((time.process_time_ns() - t0) / len(queries) / 1000)
            numpy_per = []
            for _ in range(reps):
                t0 = time.process_time_ns()
                for q in queries:
                    d2 = ((X - q) ** 2).sum(axis=1)
                    idx = np.argpartition(d2, 9)[:10]
                    np.add.at(out, yw[idx], 0.1)
                numpy_per.append((time.process_time_ns() - t0) / len(queries) / 1000)
            d = Z.shape[1]
            gamma = 16.0 / float(np.median(((X[:100, None] - X[None, :100]) ** 2).sum(axis=2)))
            for q in queries[:50]:
                wts = np.exp(-gamma * ((X - q) ** 2).sum(axis=1))
                ref = np.bincount(yw, weights=wts, minlength=len(slots)) / wts.sum()
                parzen(X, yw, w, q, gamma, out)
                assert np.allclose(out, ref), (key, w)
            parzen_per = []
            for _ in range(reps):
                t0 = time.process_time_ns()
                for q in queries:
                    parzen(X, yw, w, q, gamma, out)
                parzen_per.append((time.process_time_ns() - t0) / len(queries) / 1000)
            rows.append([
                rs.DATASETS[key].title, d, w, f"{statistics.median(per):.2f}",
                f"{statistics.median(numpy_per):.2f}", f"{statistics.median(parzen_per):.2f}",
            ])  # fmt: skip
            print(rows[-1], flush=True)
    return "\n\n".join([
        f"Cost of one vote, CPU µs per call, medians of {reps} runs of 1,000 queries (the "
        "window: the stream's first W standardised inputs): the kNN vote (k = 10) compiled "
        "(numba; checked against numpy's full sort on 50 queries) and in numpy "
        "(``argpartition``), and the Parzen vote at 16 / median compiled (checked against "
        "numpy).",
        markdown(
            ["stream", "d", "W", "kNN numba µs", "kNN numpy µs", "Parzen numba µs"],
            rows,
        ),
    ])  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--streams", default=",".join(DEVELOPMENT + VALIDATION))
    parser.add_argument("--variants", default=",".join(_variants()), help="comma-separated")
    parser.add_argument("--no-regression", action="store_true", help="skip the regressor table")
    parser.add_argument("--regression-variants", default=",".join(REGRESSION_VARIANTS))
    parser.add_argument("--no-cost", action="store_true", help="skip the vote's cost")
    parser.add_argument("--cost-reps", type=int, default=5)
    parser.add_argument("--no-accuracy", action="store_true")
    add_out(parser)
    args = parser.parse_args(argv)
    keys = [k for k in args.streams.split(",") if k]
    names = [v for v in args.variants.split(",") if v]
    reg_names = [v for v in args.regression_variants.split(",") if v]
    unknown = [v for v in names + reg_names if v not in {**_variants(), **_more_variants()}]
    if unknown:
        parser.error(f"unknown variant(s): {unknown}")
    parts = [machine()]
    if not args.no_accuracy:
        parts.append(_table(keys, names, args.seeds, args.jobs, "accuracy"))
        print(parts[-1], flush=True)
    if not args.no_regression:
        parts.append(_table(list(REGRESSION), reg_names, args.seeds, args.jobs, "MAE"))
        print(parts[-1], flush=True)
    if not args.no_cost:
        parts.append(_cost(args.cost_reps))
    body = "\n\n".join(parts)
    print(body)
    full = documented_run(parser, args)
    publish("knn_votes", "Local memory as stacked neighbour votes", body, full, args.out)


if __name__ == "__main__":
    main()
