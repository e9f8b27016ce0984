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

Two ways to trust the vote less blindly than a fixed gain (runs 4-8 of the results file):

- **relevance** (``Vote.relevance``, every 250 pairs): distances weighted per input by its
  binned mutual information with the label over the window (bias-corrected, mean 1), the
  Parzen bandwidth refitted to the weighted distances: inputs that do not inform the label stop
  deciding who is a neighbour;
- **hedge** (``Hedge``, ``_run_hedge``): no vote features at all: the default learner's class
  probabilities and the vote's (floored at 2 %) mixed by exponentiated weights on their past
  log-losses (fixed share, geometric, or the leader of discounted losses); one pass scores the
  default and every head of ``_hedge_heads()``;
- **a rate that sets itself** (``AdaHedge``, runs 9-10): eta_t = ln 2 / Delta_{t-1}, Delta the
  mixability gap (de Rooij et al. 2014), over the whole past or over the share's time scale;
- **a cheaper vote** (``HEDGE_SKIPS``, runs 10-11): the vote computed only while the hedge's weight
  on it is above a floor, and every k-th round besides.
- **a cheaper vote computation** (``Vote.exp``, ``_numba_parzen_fast``, runs 12-14): the Parzen
  weights by a bit-trick exp (``fast_exp``, within 3.1 %, or ``quadratic_exp``, within 0.27 %)
  and the class sums as masked passes, so that every loop of the kernel vectorises.

Accuracy: prequential (``predict_one`` then ``learn_one``) through ``StandardScaler() | [votes
|] MKLClassifier(seed=s)``, seeds 0..N-1, the streams of ``benchmarks/river_suite.py`` (same
order, 20,000-example caps); mean ± sd over the seeds and, in brackets, the difference from the
default in points. Regression (unless ``--no-regression``): MAE of ``StandardScaler() | [votes |]
MKLRegressor(seed=s)``. Cost (unless ``--no-cost``): a numba kernel computing the kNN vote (W x d
distances, a partial selection of the k nearest, the k labels counted), µs per call, median of
runs over a ring buffer of the stream's standardised inputs, on Bananas (d = 2) and ImageSegments
(d = 18) at W = 256, 500 and 1,000.

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
RELEVANCE_EDGES = np.linspace(-2.0, 2.0, 7)  # 8 bins of a standardised input
HEDGE_FLOOR = 0.02  # the vote's probabilities: (1 - floor) x fractions + floor / C
# A cheaper exp (Schraudolph 1999, float32): the bits of int32(x 2^23 / ln 2 + 127 2^23 - c) read
# as a float32 are 2^(x / ln 2) with its fraction's 2^f replaced by 1 + f; c centres the error, so
# that the result is within a factor of 1.031 of exp(x) (|x| <= 87; below -87: ~1.8e-38)
FAST_EXP_SCALE = np.float32(2**23 / math.log(2.0))
_FAST_EXP_PEAK = (1.0 / math.log(2.0)) / 2.0 ** (1.0 / math.log(2.0) - 1.0)  # max (1 + f) / 2^f
FAST_EXP_OFFSET = np.float32(127 * 2**23 - round(2**23 * 0.5 * math.log2(_FAST_EXP_PEAK)))
FAST_EXP_FLOOR = np.float32(-87.0)
# Its refinement by one more term: x / ln 2 = n + f (n = floor), 2^f ~ 1 + f (1 - c + c f), the
# quadratic through 2^0 and 2^1 of the smallest relative error (c = 0.33977: within 0.27 %), put
# in the exponent and mantissa bits of a float32 as they are
QUADRATIC_EXP_C = np.float32(0.33977)


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
    relevance: int = 0  # > 0: distances weighted per input, refreshed every this many pairs
    select: float = 0.0  # > 0: weights 1 on the inputs of relevance >= select x the largest, else 0
    exp: str = "exact"  # Parzen weights by np.exp, "fast" (``fast_exp``, within 3.1 %),
    # "quadratic" (``quadratic_exp``, within 0.27 %) or "float32" (np.exp in float32)


def fast_exp(x: np.ndarray) -> np.ndarray:
    """exp(x) for x <= 0 within a factor of 1.031 (float32; Schraudolph's bit trick, the
    ``FAST_EXP_*`` constants); the numpy twin of ``_numba_parzen_fast``'s loop."""
    z = np.maximum(np.asarray(x, dtype=np.float32), FAST_EXP_FLOOR)
    return (z * FAST_EXP_SCALE + FAST_EXP_OFFSET).astype(np.int32).view(np.float32)


def quadratic_exp(x: np.ndarray) -> np.ndarray:
    """exp(x) for x <= 0 within 0.27 % (float32; ``QUADRATIC_EXP_C``); the numpy twin of
    ``_numba_parzen_fast(quadratic=True)``'s loop."""
    t = np.maximum(np.asarray(x, dtype=np.float32), FAST_EXP_FLOOR) * np.float32(1 / math.log(2))
    n = np.floor(t)
    f = t - n
    mantissa = f * ((np.float32(1.0) - QUADRATIC_EXP_C) + QUADRATIC_EXP_C * f)
    bits = ((n.astype(np.int32) + 127) << 23) + (mantissa * np.float32(2**23)).astype(np.int32)
    return bits.view(np.float32)


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
            self.r = np.zeros(0)  # per-input distance weights (mean 1), when vote.relevance

        def _row(self, x: dict) -> np.ndarray:
            if not self.names:
                self.names = list(x)
                self.X = np.zeros((self.vote.window, len(self.names)))
                self.r = np.ones(len(self.names))
            return np.array([x.get(k, 0.0) for k in self.names], dtype=np.float64)

        def _weights(self, row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            """(indices of the window pairs voting, their weights)."""
            m = min(self.n, self.vote.window)
            diff2 = (self.X[:m] - row) ** 2
            d2 = diff2 @ self.r if self.vote.relevance else diff2.sum(axis=1)
            if self.vote.kind == "knn":
                k = min(self.vote.k, m)
                idx = np.argpartition(d2, k - 1)[:k] if k < m else np.arange(m)
                return idx, np.ones(len(idx))
            gamma = self.gamma
            if math.isnan(gamma):
                gamma = self.vote.scale / (2.0 * len(self.names))
            if self.vote.exp == "float32":
                return np.arange(m), np.exp((-gamma * d2).astype(np.float32)).astype(np.float64)
            if self.vote.exp != "exact":
                approx = fast_exp if self.vote.exp == "fast" else quadratic_exp
                return np.arange(m), approx(-gamma * d2).astype(np.float64)
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
            for j, v in enumerate(self.fractions(x)):
                out[f"vote{j}"] = self.vote.gain * float(v)
            return out

        def fractions(self, x: dict) -> np.ndarray:
            """The vote fractions per class slot (zeros before the first pair)."""
            votes = np.zeros(len(self.slots))
            if self.n > 0:
                idx, w = self._weights(self._row(x))
                np.add.at(votes, self.y[idx].astype(np.int64), w)
                total = votes.sum()
                if total > 0:
                    votes /= total
            return votes

        def _relevance(self) -> None:
            """Per-input distance weights from the window: the mutual information between the
            input, cut into 8 bins of its standardised value, and the label, less its bias
            under independence ((bins - 1)(classes - 1) / 2m nats), floored at 0 and scaled to
            mean 1 (uniform when no input is informative); for Parzen, gamma refitted to the
            weighted distances of the last 100 inputs."""
            m = min(self.n, self.vote.window)
            X, y = self.X[:m], self.y[:m].astype(np.int64)
            c = int(y.max()) + 1
            py = np.bincount(y, minlength=c) / m
            r = np.zeros(X.shape[1])
            for j in range(X.shape[1]):
                b = np.searchsorted(RELEVANCE_EDGES, X[:, j])
                joint = np.zeros((len(RELEVANCE_EDGES) + 1, c))
                np.add.at(joint, (b, y), 1.0 / m)
                pb = joint.sum(axis=1)
                nz = joint > 0
                mi = float((joint[nz] * np.log(joint[nz] / np.outer(pb, py)[nz])).sum())
                used = int((pb > 0).sum())
                r[j] = max(mi - (used - 1) * (int((py > 0).sum()) - 1) / (2.0 * m), 0.0)
            if self.vote.select > 0 and r.max() > 0:
                r = (r >= self.vote.select * r.max()).astype(np.float64)
            total = r.sum()
            self.r = r * (len(r) / total) if total > 0 else np.ones(len(r))
            if self.vote.kind == "parzen":
                last = (self.n - 1 - np.arange(min(MEDIAN_AFTER, m))) % self.vote.window
                Z = self.X[last]
                d2 = (((Z[:, None, :] - Z[None, :, :]) ** 2) @ self.r)[np.triu_indices(len(Z), 1)]
                med = float(np.median(d2))
                if med > 0:
                    self.gamma = self.vote.scale / med

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
            period = self.vote.relevance
            if period and not self.regression and self.n % period == 0:
                self._relevance()

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
    # Votes that ignore irrelevant inputs: distances weighted per input by its mutual
    # information with the label over the window, refreshed every 250 pairs (Vote.relevance)
    for gain in (1.0, 0.5):
        out[f"(b) linear parzen 16/median W=1000 gain {gain:g} relevance 250"] = Vote(
            "parzen", 1000, scale=16.0, gain=gain, relevance=250
        )
        out[f"(b) linear knn k=10 W=1000 gain {gain:g} relevance 250"] = Vote(
            "knn", 1000, k=10, gain=gain, relevance=250
        )
        # or selected: the inputs of relevance >= 0.1 x the largest, equally weighted
        out[f"(b) linear parzen 16/median W=1000 gain {gain:g} select 0.1 250"] = Vote(
            "parzen", 1000, scale=16.0, gain=gain, relevance=250, select=0.1
        )
        out[f"(b) linear knn k=10 W=1000 gain {gain:g} select 0.1 250"] = Vote(
            "knn", 1000, k=10, gain=gain, relevance=250, select=0.1
        )
    return out


# Hedge: the default learner and a vote, mixed by exponentiated weights on their past log-losses
# (loss = -log max(p(y), 1e-4); eta = 1), then "fixed share" (w <- (1 - share) w + share / 2) so
# that a switch back after drift takes ~1 / share rounds, not the whole past.
HEDGE_VOTES: dict[str, Vote] = {
    "parzen 16/median W=1000": Vote("parzen", 1000, scale=16.0),
    "parzen 16/median W=1000 relevance 250": Vote("parzen", 1000, scale=16.0, relevance=250),
    "knn k=10 W=1000 relevance 250": Vote("knn", 1000, k=10, relevance=250),
    # selection, not weighting: the inputs of relevance >= 0.1 x the largest, equally weighted
    "parzen 16/median W=1000 select 0.1 250": Vote(
        "parzen", 1000, scale=16.0, relevance=250, select=0.1
    ),
    "knn k=10 W=1000 select 0.1 250": Vote("knn", 1000, k=10, relevance=250, select=0.1),
    # a quarter of the window: a quarter of the cost
    "parzen 16/median W=256 relevance 250": Vote("parzen", 256, scale=16.0, relevance=250),
    "parzen 16/median W=256 select 0.1 250": Vote(
        "parzen", 256, scale=16.0, relevance=250, select=0.1
    ),
    # half the window: half the cost
    "parzen 16/median W=500 relevance 250": Vote("parzen", 500, scale=16.0, relevance=250),
    # the same vote, its weights by a cheaper exp (within 3.1 %; _numba_parzen_fast)
    "parzen 16/median W=1000 relevance 250 fast exp": Vote(
        "parzen", 1000, scale=16.0, relevance=250, exp="fast"
    ),
    # exact exp on float32 arguments: the approximations' rounding without their error
    "parzen 16/median W=1000 relevance 250 float32": Vote(
        "parzen", 1000, scale=16.0, relevance=250, exp="float32"
    ),
    # one more term: within 0.27 % (_numba_parzen_fast(quadratic=True))
    "parzen 16/median W=1000 relevance 250 quadratic exp": Vote(
        "parzen", 1000, scale=16.0, relevance=250, exp="quadratic"
    ),
}
HEDGE_MIXES: dict[
    str, tuple[float, str] | tuple[float, str, float]
] = {  # (share|decay, how[, eta])
    "linear share 0.002": (0.002, "linear"),
    "linear share 0.0005": (0.0005, "linear"),
    "linear share 0": (0.0, "linear"),
    "geometric share 0.002": (0.002, "geometric"),
    "linear eta 0.25 share 0.002": (0.002, "linear", 0.25),
    "linear eta 0.1 share 0.002": (0.002, "linear", 0.1),
    "linear eta 0.5 share 0.002": (0.002, "linear", 0.5),
    "linear eta 0.05 share 0.002": (0.002, "linear", 0.05),
    "linear eta 0.025 share 0.002": (0.002, "linear", 0.025),
    # no mixture: the expert of the smaller discounted past log-loss (sum of decay^age x loss)
    "leader decay 0.999": (0.999, "leader"),
    "leader decay 0.9999": (0.9999, "leader"),
    # an eta that sets itself (AdaHedge, class AdaHedge): eta_t = ln 2 / Delta_{t-1}
    "adahedge share 0.002": (0.002, "adahedge"),  # Delta: the whole past's mixability gap
    "adahedge share 0.002 gap memory": (0.002, "adahedge memory"),  # Delta x (1 - share) a round
    "adahedge share 0": (0.0, "adahedge"),  # de Rooij et al.'s AdaHedge, no share
}
LOSS_FLOOR = 1e-4
# the per-stream numbers a job reports besides its scores (the table after the accuracies)
EXTRAS = ("weight", "block", "eta", "computed")


# A cheaper vote: computed only while the hedge's weight on it is >= floor, and on every k-th
# round besides (so that its losses keep coming). A round without the vote predicts with the
# base learner alone and does NOT update the hedge: the hedge's clock (its updates, its share)
# runs on the computed rounds only. (Scaling the sampled losses by k instead would be a k times
# larger eta for a fixed-rate hedge, and nothing at all for AdaHedge, whose weights do not
# change when every loss is scaled.) {name: (mix of HEDGE_MIXES, floor, k)}
HEDGE_SKIPS: dict[str, tuple[str, float, int]] = {
    f"{mix} skip {floor:g} every {k}": (mix, floor, k)
    for mix in ("linear eta 0.25 share 0.002", "adahedge share 0.002 gap memory")
    for floor, k in ((0.05, 10), (0.1, 10), (0.2, 10), (0.2, 50))
}


def _hedge_heads() -> list[str]:
    """The variants one hedge job scores at once (besides ``default``, its base learner)."""
    out = [f"vote alone {v}" for v in HEDGE_VOTES]
    out += [f"hedge {m} {v}" for v in HEDGE_VOTES for m in [*HEDGE_MIXES, *HEDGE_SKIPS]]
    return out


class Hedge:
    """Two experts' trust from their past log-losses only: ``weights()`` before the round,
    ``update(losses)`` after it. "linear" / "geometric": exponentiated weights (at eta = 1 the
    weights are the softmax of minus the summed losses; eta scales the losses) with fixed
    share ``param`` after each update (w <- (1 - share) w + share / 2); "leader": all the
    weight on the expert of the smaller discounted loss (sum of ``param``^age x loss; the first
    expert on a tie)."""

    def __init__(self, param: float, how: str, eta: float = 1.0):
        self.param, self.how, self.eta = param, how, eta
        self.logw = np.zeros(2)  # leader: minus the discounted losses

    def weights(self) -> np.ndarray:
        lw = self.logw
        if self.how == "leader":
            return np.array([1.0, 0.0]) if lw[0] >= lw[1] else np.array([0.0, 1.0])
        w = np.exp(lw - lw.max())
        return w / w.sum()

    def update(self, losses: np.ndarray) -> None:
        if self.how == "leader":
            self.logw = self.param * self.logw - losses
            return
        lw = self.logw - self.eta * losses
        if self.param > 0:
            q = np.exp(lw - lw.max())
            q = (1.0 - self.param) * q / q.sum() + self.param / 2.0
            lw = np.log(q)
        self.logw = lw - lw.max()


class AdaHedge:
    """Hedge of two experts whose rate sets itself (AdaHedge, de Rooij, van Erven, Grunwald and
    Koolen 2014, "Follow the leader if you can, hedge if you must"): eta_t = ln 2 / Delta_{t-1},
    Delta the cumulative mixability gap, delta_t = h_t - m_t >= 0, where h_t = w_t . l_t is the
    hedge's expected loss and m_t = -ln(sum_k w_k exp(-eta_t l_k)) / eta_t its mix loss (eta
    infinite while Delta = 0: follow the leader, m_t = the smallest loss of an expert of
    positive weight). With ``share`` 0 the weights are the paper's, exp(-eta_t L_{t-1})
    normalised, L the summed losses (a smaller eta flattens the whole past). With a share the
    weights cannot be a function of L: they are updated in place, w <- w exp(-eta_t l_t)
    normalised, then fixed share (w <- (1 - share) w + share / 2). ``memory``: Delta decays by
    (1 - share) a round, so that the rate is set by the mixability gap of the share's own time
    scale (~1 / share rounds) rather than of the whole past; no new parameter."""

    def __init__(self, share: float, memory: bool = False):
        self.share, self.memory = share, memory
        self.w = np.full(2, 0.5)
        self.L = np.zeros(2)  # summed losses (the weights when share = 0)
        self.gap = 0.0  # Delta
        self.etas = 0.0  # the summed finite rates of the rounds so far (for reporting)
        self.finite = 0  # how many rounds had a finite rate

    @property
    def eta(self) -> float:
        return math.log(2.0) / self.gap if self.gap > 0 else math.inf

    def weights(self) -> np.ndarray:
        return self.w.copy()

    def update(self, losses: np.ndarray) -> None:
        eta, w = self.eta, self.w
        live = w > 0
        h = float(w @ losses)
        if math.isinf(eta):
            m = float(losses[live].min())
        else:
            lo = float(losses.min())
            m = lo - math.log(float(w @ np.exp(-eta * (losses - lo)))) / eta
            self.etas += eta
            self.finite += 1
        self.gap = (1.0 - self.share) * self.gap if self.memory else self.gap
        self.gap += max(h - m, 0.0)  # >= 0 by Jensen; max() only against rounding
        self.L = self.L + losses
        eta = self.eta  # eta_{t+1}: the rate of the next round
        if self.share == 0:  # the paper's weights: exp(-eta L) normalised
            if math.isinf(eta):
                best = self.L == self.L.min()
                self.w = best / best.sum()
            else:
                q = np.exp(-eta * (self.L - self.L.min()))
                self.w = q / q.sum()
            return
        # in place at the next round's rate (as the paper's weights of round t + 1 use
        # eta_{t+1}), then the share
        if math.isinf(eta):
            best = live & (losses == losses[live].min())
            q = best / best.sum()
        else:
            q = w * np.exp(-eta * (losses - losses.min()))
            q = q / q.sum()
        self.w = (1.0 - self.share) * q + self.share / 2.0


def _hedge(mix: tuple) -> Hedge | AdaHedge:
    """The hedge of a ``HEDGE_MIXES`` entry."""
    if mix[1].startswith("adahedge"):
        return AdaHedge(mix[0], memory=mix[1].endswith("memory"))
    return Hedge(*mix)


def _mix(pb: np.ndarray, pv: np.ndarray, wb: float, how: str) -> np.ndarray:
    """The mixed class probabilities at weight ``wb`` on the base learner."""
    if how == "leader":
        return pb if wb >= 0.5 else pv
    if how == "linear":
        return wb * pb + (1.0 - wb) * pv
    logp = wb * np.log(np.maximum(pb, LOSS_FLOOR)) + (1.0 - wb) * np.log(np.maximum(pv, LOSS_FLOOR))
    q = np.exp(logp - logp.max())
    return q / q.sum()


def _run_hedge(data: list, seed: int, only: list[str] | None = None) -> dict[str, float]:
    """One pass of the default learner (exactly as ``StandardScaler() | MKLClassifier(seed)``:
    the scaler learns before the learning call's transform, not before the prediction's) with
    every vote of ``HEDGE_VOTES`` beside it (past examples only) and every mix of
    ``HEDGE_MIXES``: accuracy of each head, and ``weight ...``: the mean weight on the vote.
    ``only``: the votes of ``HEDGE_VOTES`` to run (all when None)."""
    from river import preprocessing

    from streammkl.river import MKLClassifier

    scaler, learner = preprocessing.StandardScaler(), MKLClassifier(seed=seed)
    chosen = list(HEDGE_VOTES) if only is None else only
    votes = {name: _make_transformer()(HEDGE_VOTES[name]) for name in chosen}
    hedges = {(v, m): _hedge(HEDGE_MIXES[m]) for v in chosen for m in HEDGE_MIXES}
    skips = {(v, m): _hedge(HEDGE_MIXES[HEDGE_SKIPS[m][0]]) for v in chosen for m in HEDGE_SKIPS}
    computed: dict[str, float] = {f"computed {v} {m}": 0.0 for v in chosen for m in HEDGE_SKIPS}
    heads = [h for h in _hedge_heads() if any(h.endswith(f" {v}") for v in chosen)]
    hits: dict[str, float] = dict.fromkeys(["default", *heads], 0.0)
    wsum: dict[str, float] = {f"weight {v} {m}": 0.0 for v in chosen for m in HEDGE_MIXES}
    labels: dict[Any, int] = {}  # the union of the classes, in order of first appearance
    for t_round, (x, y) in enumerate(data):
        z = scaler.transform_one(x)
        proba = learner.predict_proba_one(z)
        for c in proba:
            labels.setdefault(c, len(labels))
        fr = {name: t.fractions(z) for name, t in votes.items()}
        slots = {name: dict(t.slots) for name, t in votes.items()}
        labels.setdefault(y, len(labels))
        inv = list(labels)
        C = len(inv)
        pb = np.array([proba.get(c, 0.0) for c in inv])
        if pb.sum() > 0:
            hits["default"] += float(inv[int(np.argmax(pb))] == y)
        k = labels[y]
        for name in votes:
            pv = np.full(C, 1.0 / C)
            if fr[name].sum() > 0:
                pv = np.full(C, HEDGE_FLOOR / C)
                for c, j in slots[name].items():
                    pv[labels[c]] += (1.0 - HEDGE_FLOOR) * fr[name][j]
                hits[f"vote alone {name}"] += float(int(np.argmax(pv)) == k)
            loss = -np.log(np.maximum([pb[k], pv[k]], LOSS_FLOOR))
            for mix, (_, how, *_eta) in HEDGE_MIXES.items():
                hedge = hedges[(name, mix)]
                w = hedge.weights()
                wsum[f"weight {name} {mix}"] += float(w[1])
                p = _mix(pb, pv, float(w[0]), "linear" if how.startswith("adahedge") else how)
                hits[f"hedge {mix} {name}"] += float(int(np.argmax(p)) == k)
                hedge.update(loss)
            for mix, (_, floor, every) in HEDGE_SKIPS.items():
                hedge = skips[(name, mix)]
                w = hedge.weights()
                if w[1] >= floor or t_round % every == 0:
                    computed[f"computed {name} {mix}"] += 1.0
                    p = _mix(pb, pv, float(w[0]), "linear")
                    hedge.update(loss)
                else:
                    p = pb
                hits[f"hedge {mix} {name}"] += float(int(np.argmax(p)) == k)
        scaler.learn_one(x)
        z = scaler.transform_one(x)
        learner.learn_one(z, y)
        for t in votes.values():
            t.learn_one(z, y)
    n = len(data)
    etas = {
        f"eta {v} {m}": hedge.etas / max(hedge.finite, 1)
        for (v, m), hedge in hedges.items()
        if isinstance(hedge, AdaHedge)
    }
    return {
        **{h: v / n for h, v in hits.items()},
        **{h: v / n for h, v in wsum.items()},
        **{h: v / n for h, v in computed.items()},
        **etas,
    }


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


def _run(job: tuple[str, str, int]) -> dict[str, float]:
    """The scores of one pass: ``{variant: score}`` (a "hedge" job: every hedge head and the
    default; a stacked (b) variant: its score and ``block weight <variant>``, the vote block's
    final share of the kernel weight)."""
    key, variant, seed = job
    import river_suite as rs

    regression = rs.DATASETS[key].task == "regression"
    data = list(itertools.islice(rs.DATASETS[key].load(), rs.FULL))
    if variant.startswith("hedge"):  # "hedge" or "hedge:<vote>|<vote>...": the votes to run
        only = [v for v in variant[6:].split("|") if v] if ":" in variant else None
        return _run_hedge(data, seed, only)
    names = list(dict.fromkeys(k for x, _ in data for k in x))
    model = _model(variant, seed, names, regression)
    score = 0.0
    for x, y in data:
        p = model.predict_one(x)
        score += abs(p - y) if regression else float(p == y)
        model.learn_one(x, y)
    out = {variant: score / len(data)}
    if isinstance(model, Stacked):
        weights = model.learner.kernel_weights
        total = sum(weights.values())
        share = weights.get("neighbour-votes", 0.0) / total if total > 0 else 0.0
        out[f"block weight {variant}"] = share
    return out


def _table(keys: list[str], names: list[str], seeds: int, jobs: int, what: str) -> str:
    import river_suite as rs

    start = time.perf_counter()
    heads = set(_hedge_heads())
    hedged = what != "MAE" and any(v in heads or v == "default" for v in names)
    used = [v for v in HEDGE_VOTES if any(n in heads and n.endswith(f" {v}") for n in names)]
    kind = "hedge" if len(used) == len(HEDGE_VOTES) else "hedge:" + "|".join(used)
    kinds = ([kind] if hedged else []) + [
        v for v in names if not (hedged and (v in heads or v == "default"))
    ]
    work = [(k, v, s) for k in keys for v in kinds for s in range(seeds)]
    done: dict[tuple[str, str, int], float] = {}
    with ProcessPoolExecutor(jobs) as pool:
        for job, value in zip(work, pool.map(_run, work), strict=True):
            for head, score in value.items():
                done[(job[0], head, job[2])] = score
                if job[2] == seeds - 1 and (head in names or head.startswith(EXTRAS)):
                    a = [done[(job[0], head, s)] for s in range(seeds)]
                    print(f"  {job[0]:15s} {head:60s} {statistics.mean(a):.4f}", flush=True)
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
    titles = [f"{rs.DATASETS[k].title} ({rs.DATASETS[k].role})" for k in keys]
    unit = "MAE" if what == "MAE" else "points"
    parts = [
        f"{seeds} seeds, {time.perf_counter() - start:.0f} s. Prequential {what}, mean ± sd over "
        f"the seeds (in brackets: the difference from `{names[0]}`, {unit}).",
        markdown(["variant", *titles], rows),
    ]
    wanted = {h for h in {d[1] for d in done} if h.startswith(EXTRAS)}
    extra = [h for h in dict.fromkeys(d[1] for d in done) if h in wanted]
    if extra:
        parts.append(
            "The vote's weight, mean over the seeds: ``weight <vote> <mix>``, the hedge's weight "
            "on the vote averaged over the stream; ``block weight <variant>``, the vote block's "
            "share of the kernel weights at the end (``kernel_weights``); ``eta <vote> <mix>``, "
            "AdaHedge's rate averaged over its rounds of finite rate; ``computed <vote> <mix>``, "
            "the fraction of rounds a skipping head computed the vote."
        )
        parts.append(markdown(["weight", *[rs.DATASETS[k].title for k in keys]], [
            [h, *[f"{statistics.mean(done[(k, h, s)] for s in range(seeds)):.3f}" for k in keys]]
            for h in extra
        ]))  # fmt: skip
    return "\n\n".join(parts)


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


def _numba_parzen_columns() -> Callable:
    import numba

    @numba.njit(cache=False, nogil=True, fastmath=True)
    def parzen_columns(
        XT: np.ndarray,
        y: np.ndarray,
        m: int,
        x: np.ndarray,
        r: np.ndarray,
        gamma: float,
        s: np.ndarray,
        out: np.ndarray,
    ) -> None:
        """The Parzen vote of ``_numba_parzen`` on a window stored by columns (``XT``: d x W,
        float32: the loop over the window is the inner one, vectorised), its distances weighted
        per input by ``r`` (``Vote.relevance``); ``s`` is a W-float32 scratch buffer."""
        for i in range(m):
            s[i] = 0.0
        for j in range(XT.shape[0]):
            xj = x[j]
            rj = r[j] * gamma
            for i in range(m):
                t = XT[j, i] - xj
                s[i] -= rj * t * t
        top = np.float32(-np.inf)
        for i in range(m):
            top = max(top, s[i])
        out[:] = 0.0
        total = np.float32(0.0)
        for i in range(m):
            w = np.exp(s[i] - top)
            out[y[i]] += w
            total += w
        for c in range(out.shape[0]):
            out[c] /= total

    return parzen_columns  # type: ignore[no-any-return]


def _numba_parzen_fast(quadratic: bool = False) -> Callable:
    import numba

    scale, offset, floor = FAST_EXP_SCALE, FAST_EXP_OFFSET, FAST_EXP_FLOOR
    log2e, cq = np.float32(1 / math.log(2)), QUADRATIC_EXP_C
    one, two23 = np.float32(1.0), np.float32(2**23)

    @numba.njit(cache=False, nogil=True, fastmath=True)
    def parzen_fast(
        XT: np.ndarray,
        y: np.ndarray,
        m: int,
        x: np.ndarray,
        r: np.ndarray,
        gamma: float,
        s: np.ndarray,
        bits: np.ndarray,
        out: np.ndarray,
    ) -> None:
        """``_numba_parzen_columns`` with every loop vectorisable: the weights by ``fast_exp``
        (``bits``: a W-int32 scratch buffer, read as float32) instead of a call of expf per
        row, and the class sums as one masked pass per class instead of a scatter
        (``out[y[i]] += w``, which no compiler vectorises); ``y`` int32. ``quadratic``: the
        weights by ``quadratic_exp`` instead."""
        for i in range(m):
            s[i] = 0.0
        for j in range(XT.shape[0]):
            xj = x[j]
            rj = r[j] * gamma
            for i in range(m):
                t = XT[j, i] - xj
                s[i] -= rj * t * t
        top = np.float32(-np.inf)
        for i in range(m):
            top = max(top, s[i])
        if quadratic:
            for i in range(m):
                t = max(s[i] - top, floor) * log2e
                n = np.floor(t)
                f = t - n
                mantissa = f * ((one - cq) + cq * f)
                bits[i] = ((np.int32(n) + 127) << 23) + np.int32(mantissa * two23)
        else:
            for i in range(m):
                bits[i] = np.int32(max(s[i] - top, floor) * scale + offset)
        w = bits.view(np.float32)
        total = np.float32(0.0)
        for i in range(m):
            total += w[i]
        for c in range(out.shape[0]):
            acc = np.float32(0.0)
            for i in range(m):
                acc += w[i] if y[i] == c else np.float32(0.0)
            out[c] = acc / total

    return parzen_fast  # type: ignore[no-any-return]


def _cost(reps: int) -> str:
    import river_suite as rs
    from river import preprocessing

    vote, parzen, columns = _numba_vote(), _numba_parzen(), _numba_parzen_columns()
    fast, quadratic = _numba_parzen_fast(), _numba_parzen_fast(quadratic=True)
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
        for w in (256, 500, 1000):
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
            XT = np.ascontiguousarray(X.T, dtype=np.float32)
            r = np.ones(d, dtype=np.float32)
            scratch = np.zeros(w, dtype=np.float32)
            out32 = np.zeros(len(slots), dtype=np.float32)
            q32 = np.ascontiguousarray(queries, dtype=np.float32)
            g32 = np.float32(gamma)
            bits = np.zeros(w, dtype=np.int32)
            y32 = yw.astype(np.int32)
            fast_out = np.zeros(len(slots), dtype=np.float32)
            for q, q_ in zip(queries[:50], q32[:50], strict=True):
                parzen(X, yw, w, q, gamma, out)
                columns(XT, yw, w, q_, r, g32, scratch, out32)
                assert np.allclose(out32, out, atol=1e-4), (key, w)
                fast(XT, y32, w, q_, r, g32, scratch, bits, fast_out)
                assert np.allclose(fast_out, out, atol=0.02), (key, w)
                quadratic(XT, y32, w, q_, r, g32, scratch, bits, fast_out)
                assert np.allclose(fast_out, out, atol=0.002), (key, w)
            parzen_per, columns_per, fast_per, quadratic_per = [], [], [], []
            for _ in range(reps):  # interleaved: the two layouts in the same window
                t0 = time.process_time_ns()
                for q in queries:
                    parzen(X, yw, w, q, gamma, out)
                parzen_per.append((time.process_time_ns() - t0) / len(queries) / 1000)
                t0 = time.process_time_ns()
                for q_ in q32:
                    columns(XT, yw, w, q_, r, g32, scratch, out32)
                columns_per.append((time.process_time_ns() - t0) / len(queries) / 1000)
                t0 = time.process_time_ns()
                for q_ in q32:
                    fast(XT, y32, w, q_, r, g32, scratch, bits, fast_out)
                fast_per.append((time.process_time_ns() - t0) / len(queries) / 1000)
                t0 = time.process_time_ns()
                for q_ in q32:
                    quadratic(XT, y32, w, q_, r, g32, scratch, bits, fast_out)
                quadratic_per.append((time.process_time_ns() - t0) / len(queries) / 1000)
            rows.append([
                rs.DATASETS[key].title, d, w, f"{statistics.median(per):.2f}",
                f"{statistics.median(numpy_per):.2f}", f"{statistics.median(parzen_per):.2f}",
                f"{statistics.median(columns_per):.2f}", f"{statistics.median(fast_per):.2f}",
                f"{statistics.median(quadratic_per):.2f}",
            ])  # fmt: skip
            print(rows[-1], flush=True)
    return "\n\n".join([
        f"Cost of one vote, CPU µs per call, medians of {reps} runs of 1,000 queries (the "
        "window: the stream's first W standardised inputs): the kNN vote (k = 10) compiled "
        "(numba; checked against numpy's full sort on 50 queries) and in numpy "
        "(``argpartition``), and the Parzen vote at 16 / median compiled (checked against "
        "numpy): rows of float64 (``_numba_parzen``) and, in the same runs interleaved, "
        "columns of float32 with per-input distance weights (``_numba_parzen_columns``, "
        "checked against the rows to 1e-4), and the same columns with a cheaper exp and "
        "masked class sums (``_numba_parzen_fast``, checked against the rows to 0.02), or "
        "with the quadratic exp (``quadratic=True``, checked to 0.002).",
        markdown(
            ["stream", "d", "W", "kNN numba µs", "kNN numpy µs", "Parzen numba µs",
             "Parzen f32 columns µs", "Parzen f32 fast exp µs",
             "Parzen f32 quadratic exp µs"],
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
    known = {**_variants(), **_more_variants()}.keys() | set(_hedge_heads())
    unknown = [v for v in names + reg_names if v not in known]
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
