"""Local memory for the regressor: a hedge of the default regressor and a neighbour prediction
(issue 27; a research prototype outside the core, the regression twin of ``knn_votes.py``'s
classification hedge).

Issue 27 asks ``MKLRegressor`` to match the best of river's and MOA's regressors (MAE) on
TrumpApproval, ChickWeights and Friedman; it misses TrumpApproval (0.382 against MOA kNN's
0.348). ``knn_votes.py`` run 1 tried neighbour means as *features* of the learner (TrumpApproval
0.375 at best); here the learner is untouched and its prediction is combined with a neighbour
prediction, as the classification hedge of runs 4-11 does:

- **neighbours** (``Neighbours``, ``NeighbourMean``): a ring of the last W standardised inputs
  with their targets (and the default's prequential residuals), and, for the current input,
  the mean target of its k nearest (``knn``) or the Nadaraya-Watson mean at ``gamma = scale /
  median`` (``parzen``, the median of the last 100 inputs' pairwise squared distances, ``2 d``
  before 100 inputs), computed from PAST pairs only;
- **relevance** (``relevance``, every 250 pairs): each input's squared distance weighted by a
  target-aware score over the window, scaled to mean 1: ``eta2``, the correlation ratio (the
  fraction of the target's variance removed by cutting the input into 8 bins: the regression
  counterpart of the classification vote's binned MI, no binning of the target, and an exact
  bias under independence, (bins - 1) / (m - 1)); ``mi``, the binned MI with the target cut
  at its window quartiles (bias (bx - 1)(by - 1) / 2m); ``corr2``, the squared correlation (bias
  1 / (m - 1)), which misses non-monotone effects (Friedman's 20 (x2 - 1/2)^2);
- **target** ``residual``: the neighbours' mean of the default's past residuals added to the
  default's prediction (the default corrected locally) instead of the neighbours' mean target;
- **combinations** (``MIXES``), on errors standardised by the running target sd (past only)
  and clipped at ``ERROR_CLIP``: ``hedge gauss``, exponentiated weights on the Gaussian
  log-loss e^2 / 2 (``knn_votes.Hedge``, fixed share); ``hedge abs`` on |e|; ``adahedge``
  (``knn_votes.AdaHedge``, its rate set by the mixability gap, invariant to the loss's scale);
  ``mixture``, convex weights inversely proportional to each expert's discounted squared error
  (``InverseError``); ``alone``, the neighbour prediction alone. The combination predicts
  ``w_b yhat_b + w_v yhat_v``;
- **three experts** (``TRIOS``, ``MIXES3``, ``FixedShare``; run 2 of the results, designed after
  run 1's validation columns): the default, the neighbours' mean target and the default plus
  the neighbours' mean residual under one fixed-share hedge.

Development and validation: Friedman is the development stream (synthetic, 20,000 examples: the
settings are chosen on it only); TrumpApproval (1,001) and ChickWeights (578) are validation.

MAE: prequential through ``StandardScaler() | MKLRegressor(seed=s)`` (run by hand exactly as
river's pipeline runs it: the scaler learns before the learning call's transform), seeds
0..N-1, the suite's streams in the suite's order and caps (``benchmarks/river_suite.py``); one
pass per stream and seed scores every head. Cost (unless ``--no-cost``): the neighbour mean as a
numba kernel (``_numba_knn_mean``, ``_numba_nw_mean``: W x d weighted distances, then a partial
selection of the k nearest or W exponentials), µs per call, on Friedman (d = 10) and
TrumpApproval (d = 6) at W = 256 and 1,000, beside the default's own predict + learn round.

Run: ``python benchmarks/regression_votes.py [--seeds 5] [--jobs 2] [--streams ...] [--votes
...] [--heads ...] [--no-cost] [--no-accuracy]``; the documented run is every option at its
default.
"""

from __future__ import annotations

import argparse
import itertools
import math
import re
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
import knn_votes as kv
from _table import RESULTS, add_out, documented_run, machine, markdown, publish

STREAMS = ("trump-approval", "chick-weights", "friedman")  # the suite's order
DEVELOPMENT = ("friedman",)
MEDIAN_AFTER = 100
RELEVANCE_EDGES = np.linspace(-2.0, 2.0, 7)  # 8 bins of a standardised input
ERROR_CLIP = 4.0  # standardised errors beyond +-4 sd count as 4 in every loss


@dataclass(frozen=True)
class Neighbours:
    """A neighbour prediction: ``kind`` "knn" (mean of the k nearest) or "parzen"
    (Nadaraya-Watson at gamma = scale / median) over the last ``window`` pairs; ``relevance``
    "" (plain distances), "eta2", "mi" or "corr2" (``relevance``), refreshed every ``period``
    pairs; ``target`` "y" (the neighbours' mean target) or "residual" (the default's prediction
    plus the neighbours' mean residual of the default)."""

    kind: str
    window: int
    k: int = 10
    scale: float = 16.0
    relevance: str = ""
    period: int = 250
    target: str = "y"
    fresh: bool = True  # raw rows scaled by the current sd (NeighbourMean), or rows as given


VOTES: dict[str, Neighbours] = {
    "knn k=10 W=1000": Neighbours("knn", 1000),  # MOA's kNN regressor: k = 10, window 1,000
    # the prototype's rows (knn_votes.py): standardised once, when they joined the ring
    "knn k=10 W=1000 stale": Neighbours("knn", 1000, fresh=False),
    "knn k=10 W=1000 eta2": Neighbours("knn", 1000, relevance="eta2"),
    "knn k=10 W=1000 mi": Neighbours("knn", 1000, relevance="mi"),
    "knn k=10 W=1000 corr2": Neighbours("knn", 1000, relevance="corr2"),
    "knn k=5 W=256 eta2": Neighbours("knn", 256, k=5, relevance="eta2"),
    "parzen 16/median W=1000": Neighbours("parzen", 1000),
    "parzen 16/median W=1000 eta2": Neighbours("parzen", 1000, relevance="eta2"),
    "parzen 4/median W=1000 eta2": Neighbours("parzen", 1000, scale=4.0, relevance="eta2"),
    "parzen 16/median W=256 eta2": Neighbours("parzen", 256, relevance="eta2"),  # 1/4 the cost
    "residual knn k=10 W=1000 eta2": Neighbours("knn", 1000, relevance="eta2", target="residual"),
    "residual parzen 16/median W=1000 eta2": Neighbours(
        "parzen", 1000, relevance="eta2", target="residual"
    ),
}
# (loss, eta or "ada"/"mixture", share | decay); "alone": the neighbour prediction itself
MIXES: dict[str, tuple[str, float | str, float]] = {
    "alone": ("", "", 0.0),
    "hedge gauss eta 1 share 0.002": ("gauss", 1.0, 0.002),
    "hedge gauss eta 4 share 0.002": ("gauss", 4.0, 0.002),
    "hedge gauss eta 16 share 0.002": ("gauss", 16.0, 0.002),
    "hedge abs eta 4 share 0.002": ("abs", 4.0, 0.002),
    "adahedge gauss share 0.002 gap memory": ("gauss", "ada", 0.002),
    "mixture inverse-mse decay 0.99": ("sq", "mixture", 0.99),
}


# Three experts (run 2): the default, the neighbours' mean target and the default corrected by
# the neighbours' mean residual, under one fixed-share hedge (``FixedShare``). Designed after
# run 1's validation columns: the residual wins the development stream (Friedman), the mean
# target wins TrumpApproval. {name: (the mean-target vote, the residual vote)}
TRIOS: dict[str, tuple[str, str]] = {
    "parzen 16/median W=1000 eta2 + residual": (
        "parzen 16/median W=1000 eta2",
        "residual parzen 16/median W=1000 eta2",
    ),
}
MIXES3: dict[str, tuple[str, float, float]] = {  # (loss, eta, share)
    "hedge3 gauss eta 1 share 0.002": ("gauss", 1.0, 0.002),
    "hedge3 gauss eta 4 share 0.002": ("gauss", 4.0, 0.002),
    "hedge3 abs eta 4 share 0.002": ("abs", 4.0, 0.002),
}


def heads(votes: list[str] | None = None) -> list[str]:
    """Every head one pass over ``votes`` (all of ``VOTES`` when None) scores besides
    ``default``: ``<mix> <vote>``, and ``<mix3> <trio>`` for each trio whose votes are in."""
    chosen = list(VOTES) if votes is None else votes
    out = [f"{m} {v}" for v in chosen for m in MIXES]
    trios = [t for t, pair in TRIOS.items() if set(pair) <= set(chosen)]
    return out + [f"{m} {t}" for t in trios for m in MIXES3]


class FixedShare:
    """Exponentiated weights of n experts on their losses at rate ``eta``, then fixed share
    (w <- (1 - share) w + share / n): ``knn_votes.Hedge``'s linear mix for any n."""

    def __init__(self, n: int, eta: float, share: float):
        self.eta, self.share = eta, share
        self.logw = np.zeros(n)

    def weights(self) -> np.ndarray:
        w = np.exp(self.logw - self.logw.max())
        return w / w.sum()

    def update(self, losses: np.ndarray) -> None:
        lw = self.logw - self.eta * losses
        q = np.exp(lw - lw.max())
        q = (1.0 - self.share) * q / q.sum() + self.share / len(q)
        self.logw = np.log(q) - np.log(q).max()


def relevance(X: np.ndarray, y: np.ndarray, how: str) -> np.ndarray:
    """Per-input distance weights (mean 1; uniform when no input scores above its bias) from
    the window's standardised inputs ``X`` (m x d) and targets ``y``: the score less its
    expectation under independence, floored at 0."""
    m, d = X.shape
    r = np.zeros(d)
    if how == "corr2":
        yc = y - y.mean()
        for j in range(d):
            xc = X[:, j] - X[:, j].mean()
            den = math.sqrt(float(xc @ xc) * float(yc @ yc))
            rho2 = (float(xc @ yc) / den) ** 2 if den > 0 else 0.0
            r[j] = max(rho2 - 1.0 / (m - 1), 0.0)
    elif how == "eta2":
        total = float(((y - y.mean()) ** 2).sum())
        for j in range(d):
            b = np.searchsorted(RELEVANCE_EDGES, X[:, j])
            count = np.bincount(b, minlength=len(RELEVANCE_EDGES) + 1)
            s = np.bincount(b, weights=y, minlength=len(RELEVANCE_EDGES) + 1)
            used = count > 0
            between = float((s[used] ** 2 / count[used]).sum()) - float(y.sum()) ** 2 / m
            eta2 = between / total if total > 0 else 0.0
            r[j] = max(eta2 - (int(used.sum()) - 1) / (m - 1), 0.0)
    elif how == "mi":
        cuts = np.quantile(y, [0.25, 0.5, 0.75])
        by = np.searchsorted(cuts, y)
        py = np.bincount(by, minlength=4) / m
        for j in range(d):
            bx = np.searchsorted(RELEVANCE_EDGES, X[:, j])
            joint = np.zeros((len(RELEVANCE_EDGES) + 1, 4))
            np.add.at(joint, (bx, by), 1.0 / m)
            px = joint.sum(axis=1)
            nz = joint > 0
            mi = float((joint[nz] * np.log(joint[nz] / np.outer(px, py)[nz])).sum())
            bias = (int((px > 0).sum()) - 1) * (int((py > 0).sum()) - 1) / (2.0 * m)
            r[j] = max(mi - bias, 0.0)
    else:
        raise ValueError(f"unknown relevance {how!r}")
    total_r = r.sum()
    return r * (d / total_r) if total_r > 0 else np.ones(d)


class NeighbourMean:
    """The ring of the last W (input, target, residual) triples and the neighbour mean of a
    query (``Neighbours`` says which). ``fresh`` (the default): the ring keeps raw inputs and
    scales their differences by the CURRENT running sd of each input (Welford over every input
    learned; the mean cancels in a difference), so that an input that trends (TrumpApproval's
    ``ordinal_date``) keeps its meaning; otherwise the rows are taken as given (the prototype's
    rows standardised when they joined, whose scale goes stale on such an input)."""

    def __init__(self, spec: Neighbours):
        self.spec = spec
        self.X = np.zeros((0, 0))
        self.values = np.zeros((spec.window, 2))  # target, the default's residual
        self.n = 0
        self.gamma = math.nan
        self.r = np.zeros(0)  # relevance (mean 1)
        self.mu = np.zeros(0)  # running input means and sums of squares (fresh)
        self.m2 = np.zeros(0)

    def _ensure(self, d: int) -> None:
        if self.X.shape[1] != d:
            self.X = np.zeros((self.spec.window, d))
            self.r, self.mu, self.m2 = np.ones(d), np.zeros(d), np.zeros(d)

    def scale(self) -> np.ndarray:
        """Per-input weights of the squared differences: relevance / current variance (1 where
        the variance is 0, and for rows taken as given)."""
        if not self.spec.fresh or self.n < 2:
            return self.r
        var = self.m2 / self.n
        return self.r / np.where(var > 0, var, 1.0)

    def weights(self, row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(indices of the window pairs in the mean, their weights); the window must be
        non-empty."""
        self._ensure(len(row))
        m = min(self.n, self.spec.window)
        d2 = ((self.X[:m] - row) ** 2) @ self.scale()
        if self.spec.kind == "knn":
            k = min(self.spec.k, m)
            idx = np.argpartition(d2, k - 1)[:k] if k < m else np.arange(m)
            return idx, np.ones(len(idx))
        gamma = self.gamma if not math.isnan(self.gamma) else self.spec.scale / (2.0 * len(row))
        s = -gamma * d2
        return np.arange(m), np.exp(s - s.max())

    def mean(self, row: np.ndarray) -> float:
        """The neighbours' weighted mean of the spec's target (nan before the first pair)."""
        if self.n == 0:
            return math.nan
        idx, w = self.weights(row)
        col = 0 if self.spec.target == "y" else 1
        return float(w @ self.values[idx, col]) / float(w.sum())

    def learn(self, row: np.ndarray, y: float, residual: float) -> None:
        self._ensure(len(row))
        at = self.n % self.spec.window
        self.X[at] = row
        self.values[at] = (y, residual)
        self.n += 1
        delta = row - self.mu
        self.mu = self.mu + delta / self.n
        self.m2 = self.m2 + delta * (row - self.mu)
        m = min(self.n, self.spec.window)
        period = self.spec.period
        if self.spec.relevance and self.n % period == 0:
            Z = self.X[:m]
            if self.spec.fresh:  # the window standardised by the current running statistics
                sd = np.sqrt(self.m2 / self.n)
                Z = (Z - self.mu) / np.where(sd > 0, sd, 1.0)
            self.r = relevance(Z, self.values[:m, 0], self.spec.relevance)
        if self.spec.kind == "parzen" and (
            self.n == MEDIAN_AFTER or (self.n > MEDIAN_AFTER and self.n % period == 0)
        ):  # gamma refitted to the current scaled distances of the last 100 inputs
            last = (self.n - 1 - np.arange(min(MEDIAN_AFTER, m))) % self.spec.window
            Z = self.X[last]
            d2 = ((Z[:, None, :] - Z[None, :, :]) ** 2) @ self.scale()
            med = float(np.median(d2[np.triu_indices(len(Z), 1)]))
            if med > 0:
                self.gamma = self.spec.scale / med


class InverseError:
    """Convex weights inversely proportional to each expert's discounted squared error,
    S <- decay S + e^2 (equal weights while both are 0)."""

    def __init__(self, decay: float):
        self.decay = decay
        self.S = np.zeros(2)

    def weights(self) -> np.ndarray:
        if (self.S <= 0).any():
            zero = (self.S <= 0).astype(np.float64)
            return zero / zero.sum()
        inv = 1.0 / self.S
        return inv / inv.sum()

    def update(self, losses: np.ndarray) -> None:
        self.S = self.decay * self.S + losses


def combiner(mix: str) -> Any:
    """The weights keeper of a ``MIXES`` entry: ``weights()`` on (default, neighbours), then
    ``update(losses)`` (``losses`` of the entry's loss)."""
    _, how, param = MIXES[mix]
    if how == "mixture":
        return InverseError(param)
    if how == "ada":
        return kv.AdaHedge(param, memory=True)
    return kv.Hedge(param, "linear", eta=float(how))


def losses(errors: np.ndarray, loss: str) -> np.ndarray:
    """The experts' losses from their standardised errors, clipped at ``ERROR_CLIP``: "gauss"
    the Gaussian log-loss at unit variance less its constant, e^2 / 2; "sq" e^2; "abs" |e|."""
    e = np.clip(errors, -ERROR_CLIP, ERROR_CLIP)
    if loss == "gauss":
        return 0.5 * e * e
    if loss == "sq":
        return e * e
    return np.abs(e)


def run(data: list, seed: int, only: list[str] | None = None) -> dict[str, float]:
    """One prequential pass of the default regressor (exactly as ``StandardScaler() |
    MKLRegressor(seed)``) with every vote of ``VOTES`` (or ``only``) beside it: the MAE of
    ``default`` and of every head, and ``weight <head>``, the mean weight on the neighbours."""
    from river import preprocessing

    from streammkl.river import MKLRegressor

    scaler, learner = preprocessing.StandardScaler(), MKLRegressor(seed=seed)
    chosen = list(VOTES) if only is None else only
    means = {v: NeighbourMean(VOTES[v]) for v in chosen}
    mixers = {(v, m): combiner(m) for v in chosen for m in MIXES if m != "alone"}
    trios = {t: pair for t, pair in TRIOS.items() if set(pair) <= set(chosen)}
    mixers3 = {
        (t, m): FixedShare(3, eta, share) for t in trios for m, (_, eta, share) in MIXES3.items()
    }
    err = dict.fromkeys(["default", *heads(chosen)], 0.0)
    wsum = {f"weight {m} {v}": 0.0 for v, m in mixers}
    wsum.update({f"weight {m} {t}": 0.0 for t, m in mixers3})  # on the two neighbour experts
    names: list[str] = []
    y_mean, y_m2 = 0.0, 0.0
    for t, (x, y) in enumerate(data):
        names = names or list(x)
        z = scaler.transform_one(x)
        yb = float(learner.predict_one(z))
        raw = np.array([float(x.get(k, 0.0)) for k in names])
        zrow = np.array([z.get(k, 0.0) for k in names])
        sd = math.sqrt(y_m2 / t) if t > 1 else 1.0
        sd = sd if sd > 0 else 1.0
        err["default"] += abs(y - yb)
        guesses = {}
        for v, nm in means.items():
            mean = nm.mean(raw if nm.spec.fresh else zrow)
            if nm.spec.target == "residual":
                yv = yb + (0.0 if math.isnan(mean) else mean)
            else:
                yv = yb if math.isnan(mean) else mean
            guesses[v] = yv
            err[f"alone {v}"] += abs(y - yv)
            e = np.array([(y - yb) / sd, (y - yv) / sd])
            for m, (loss, _, _) in MIXES.items():
                if m == "alone":
                    continue
                mixer = mixers[(v, m)]
                w = mixer.weights()
                wsum[f"weight {m} {v}"] += float(w[1])
                err[f"{m} {v}"] += abs(y - (w[0] * yb + w[1] * yv))
                mixer.update(losses(e, loss))
        for (trio, m), mixer3 in mixers3.items():
            g = np.array([yb, *(guesses[v] for v in trios[trio])])
            w3 = mixer3.weights()
            wsum[f"weight {m} {trio}"] += float(w3[1:].sum())
            err[f"{m} {trio}"] += abs(y - float(w3 @ g))
            mixer3.update(losses((y - g) / sd, MIXES3[m][0]))
        delta = y - y_mean
        y_mean += delta / (t + 1)
        y_m2 += delta * (y - y_mean)
        scaler.learn_one(x)
        z = scaler.transform_one(x)
        learner.learn_one(z, y)
        zrow = np.array([z.get(k, 0.0) for k in names])
        for nm in means.values():
            nm.learn(raw if nm.spec.fresh else zrow, float(y), float(y - yb))
    n = len(data)
    return {**{h: v / n for h, v in err.items()}, **{h: v / n for h, v in wsum.items()}}


def _job(job: tuple[str, int, tuple[str, ...] | None]) -> tuple[str, int, dict[str, float]]:
    import river_suite as rs

    key, seed, votes = job
    data = list(itertools.islice(rs.DATASETS[key].load(), rs.FULL))
    return key, seed, run(data, seed, None if votes is None else list(votes))


def peers(path: Path = RESULTS / "river_suite.md") -> dict[str, tuple[str, float]]:
    """The best peer regressor per stream title, from the suite's "Best peer per stream"
    regression table (``{title: (peer, MAE)}``; empty if the file is not there)."""
    if not path.exists():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and re.fullmatch(r"[-+]?\d+(\.\d+)?", cells[4]) and "±" in cells[2]:
            out[cells[0]] = (cells[3], float(cells[4]))
    return out


def _accuracy(
    keys: list[str], shown: list[str], seeds: int, jobs: int, votes: tuple[str, ...] | None
) -> str:
    import river_suite as rs

    start = time.perf_counter()
    done: dict[tuple[str, str, int], float] = {}
    work = [(k, s, votes) for k in keys for s in range(seeds)]
    with ProcessPoolExecutor(jobs) as pool:
        for key, seed, value in pool.map(_job, work):
            for head, score in value.items():
                done[(key, head, seed)] = score
            print(f"  {key} seed {seed}: default {value['default']:.4f}", flush=True)

    def stat(k: str, h: str) -> tuple[float, float]:
        a = [done[(k, h, s)] for s in range(seeds)]
        return statistics.mean(a), statistics.stdev(a) if len(a) > 1 else 0.0

    best = peers()
    titles = [rs.DATASETS[k].title for k in keys]
    rows = []
    for h in ["default", *shown]:
        cells = []
        for k, title in zip(keys, titles, strict=True):
            mean, sd = stat(k, h)
            diff = "" if h == "default" else f" ({mean - stat(k, 'default')[0]:+.4f})"
            peer = best.get(title)
            mark = "" if peer is None else (" met" if mean <= peer[1] else " MISSED")
            cells.append(f"{mean:.4f} ± {sd:.4f}{diff}{mark}")
        rows.append([h, *cells])
    roles = ["development" if k in DEVELOPMENT else "validation" for k in keys]
    peer_row = [
        "best peer (river_suite.md)",
        *[f"{best[t][0]} {best[t][1]:g}" if t in best else "—" for t in titles],
    ]
    weights = [
        [f"weight {h}", *[f"{stat(k, f'weight {h}')[0]:.3f}" for k in keys]]
        for h in shown
        if not h.startswith("alone")
    ]
    return "\n\n".join([
        f"{seeds} seeds, {time.perf_counter() - start:.0f} s. Prequential MAE, mean ± sd over "
        "the seeds (in brackets: the difference from `default`; met / MISSED: against the best "
        "peer's MAE, the last row).",
        markdown(
            ["head", *[f"{t} ({r})" for t, r in zip(titles, roles, strict=True)]],
            [*rows, peer_row],
        ),
        "The mean weight on the neighbour prediction over the stream, mean over the seeds:",
        markdown(["weight", *titles], weights),
    ])  # fmt: skip


def _nw_kernels() -> tuple[Callable, Callable]:
    import numba

    @numba.njit(cache=False, nogil=True)
    def knn_mean(
        X: np.ndarray, v: np.ndarray, m: int, x: np.ndarray, r: np.ndarray, k: int
    ) -> float:
        """Mean of v over the k nearest of the first m rows of X (squared distances weighted
        per input by r), by a small sorted buffer (k << W)."""
        kk = min(k, m)
        best = np.full(kk, np.inf)
        val = np.zeros(kk)
        for i in range(m):
            s = 0.0
            for j in range(x.shape[0]):
                t = X[i, j] - x[j]
                s += r[j] * t * t
            if s < best[kk - 1]:
                p = kk - 1
                while p > 0 and best[p - 1] > s:
                    best[p] = best[p - 1]
                    val[p] = val[p - 1]
                    p -= 1
                best[p] = s
                val[p] = v[i]
        return val.sum() / kk

    @numba.njit(cache=False, nogil=True)
    def nw_mean(
        X: np.ndarray, v: np.ndarray, m: int, x: np.ndarray, r: np.ndarray, gamma: float,
        s: np.ndarray,
    ) -> float:  # fmt: skip
        """Nadaraya-Watson mean of v over the first m rows of X (weighted squared distances,
        shifted by the nearest row's exponent); ``s``: a W scratch buffer."""
        top = -np.inf
        for i in range(m):
            d = 0.0
            for j in range(x.shape[0]):
                t = X[i, j] - x[j]
                d += r[j] * t * t
            s[i] = -gamma * d
            top = max(top, s[i])
        num = 0.0
        den = 0.0
        for i in range(m):
            w = np.exp(s[i] - top)
            num += w * v[i]
            den += w
        return num / den

    return knn_mean, nw_mean


def _cost(reps: int) -> str:
    import river_suite as rs
    from river import preprocessing

    from streammkl.river import MKLRegressor

    knn_mean, nw_mean = _nw_kernels()
    rows = []
    for key in ("friedman", "trump-approval"):
        data = list(itertools.islice(rs.DATASETS[key].load(), rs.FULL))
        scaler = preprocessing.StandardScaler()
        names = list(data[0][0])
        Z, zs = [], []
        for x, _ in data:
            scaler.learn_one(x)
            z = scaler.transform_one(x)
            zs.append(z)
            Z.append([z[k] for k in names])
        Zs = np.ascontiguousarray(Z, dtype=np.float64)
        Y = np.array([float(y) for _, y in data])
        d = Zs.shape[1]
        base = []  # the default's own round through river's API, on the same standardised rows
        for _ in range(reps):
            learner = MKLRegressor(seed=0)
            for z, (_, y) in zip(zs[:200], data[:200], strict=True):  # warm-up and fit
                learner.predict_one(z)
                learner.learn_one(z, y)
            t0 = time.process_time_ns()
            for z, (_, y) in zip(zs[200:1200], data[200:1200], strict=True):
                learner.predict_one(z)
                learner.learn_one(z, y)
            base.append((time.process_time_ns() - t0) / min(1000, len(zs) - 200) / 1000)
        for w in (256, 1000):
            X, v = np.ascontiguousarray(Zs[:w]), np.ascontiguousarray(Y[:w])
            queries = Zs[w : w + 1000] if len(Zs) >= w + 1000 else Zs[:1000]
            r = relevance(X, v, "eta2")
            last = X[-MEDIAN_AFTER:]
            med = float(np.median(
                (((last[:, None] - last[None]) ** 2) @ r)[np.triu_indices(len(last), 1)]
            ))  # fmt: skip
            gamma, s = 16.0 / med, np.zeros(w)
            for q in queries[:50]:  # against numpy (a full sort; the exact Gaussian weights)
                d2 = ((X - q) ** 2) @ r
                want = float(v[np.argsort(d2, kind="stable")[:10]].mean())
                assert math.isclose(knn_mean(X, v, w, q, r, 10), want, rel_tol=1e-9), (key, w)
                g = np.exp(-gamma * (d2 - d2.min()))
                want = float(g @ v / g.sum())
                assert math.isclose(nw_mean(X, v, w, q, r, gamma, s), want, rel_tol=1e-9)
            knn_per, nw_per, rel_per = [], [], []
            for _ in range(reps):  # interleaved
                t0 = time.process_time_ns()
                for q in queries:
                    knn_mean(X, v, w, q, r, 10)
                knn_per.append((time.process_time_ns() - t0) / len(queries) / 1000)
                t0 = time.process_time_ns()
                for q in queries:
                    nw_mean(X, v, w, q, r, gamma, s)
                nw_per.append((time.process_time_ns() - t0) / len(queries) / 1000)
                t0 = time.process_time_ns()
                for _ in range(20):
                    relevance(X, v, "eta2")
                rel_per.append((time.process_time_ns() - t0) / 20 / 1000)
            rows.append([
                rs.DATASETS[key].title, d, w, f"{statistics.median(base):.2f}",
                f"{statistics.median(knn_per):.2f}", f"{statistics.median(nw_per):.2f}",
                f"{statistics.median(rel_per):.0f}",
                f"{statistics.median(rel_per) / 250:.2f}",
            ])  # fmt: skip
            print(rows[-1], flush=True)
    return "\n\n".join([
        f"Cost, CPU µs per call, medians of {reps} interleaved runs of 1,000 queries (the "
        "window: the stream's first W standardised inputs; k = 10, gamma = 16 / median, "
        "distances weighted by the ``eta2`` relevance; both kernels checked against numpy on 50 "
        "queries). The default: ``MKLRegressor(seed=0)``'s predict_one + learn_one through "
        "river's API on the same standardised rows (1,000 rounds after 200). The relevance "
        "refresh in numpy, per refresh and amortised over its period of 250.",
        markdown(
            ["stream", "d", "W", "default round µs", "kNN mean numba µs", "NW mean numba µs",
             "relevance refresh µs", "its share per call µs"],
            rows,
        ),
    ])  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--streams", default=",".join(STREAMS))
    parser.add_argument("--heads", default="", help="comma-separated heads shown (all if empty)")
    parser.add_argument("--votes", default="", help="comma-separated votes run (all if empty)")
    parser.add_argument("--no-cost", action="store_true")
    parser.add_argument("--cost-reps", type=int, default=5)
    parser.add_argument("--no-accuracy", action="store_true")
    add_out(parser)
    args = parser.parse_args(argv)
    keys = [k for k in args.streams.split(",") if k]
    votes = tuple(v for v in args.votes.split(",") if v) or None
    if votes is not None and not set(votes) <= set(VOTES):
        parser.error(f"unknown vote(s): {sorted(set(votes) - set(VOTES))}")
    available = heads(None if votes is None else list(votes))
    shown = [h for h in args.heads.split(",") if h] or available
    unknown = [h for h in shown if h not in available]
    if unknown:
        parser.error(f"unknown head(s): {unknown}")
    parts = [machine()]
    if not args.no_accuracy:
        parts.append(_accuracy(keys, shown, args.seeds, args.jobs, votes))
        print(parts[-1], flush=True)
    if not args.no_cost:
        parts.append(_cost(args.cost_reps))
    body = "\n\n".join(parts)
    full = documented_run(parser, args)
    publish("regression_votes", "Local memory for the regressor", body, full, args.out)
    if not full and args.out is None:
        print(body)


if __name__ == "__main__":
    main()
