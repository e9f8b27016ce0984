"""The regression hedge prototype of ``benchmarks/regression_votes.py`` (issue 27): its neighbour
means are the brute-force means of the window of PAST pairs, its relevance scores are the
textbook ones less their bias, its combinations weigh the experts as computed by hand, the
numba kernels whose cost it measures agree with numpy, and its default head is the pipeline."""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import regression_votes as rv


def _stream(n: int, seed: int = 0, trend: bool = False) -> list[tuple[dict, float]]:
    """Three inputs, the target reads the first two (the second non-monotonically)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    if trend:  # an input that trends, as TrumpApproval's ordinal_date
        X[:, 2] = 1000.0 + np.arange(n)
    y = 3.0 * X[:, 0] + 2.0 * X[:, 1] ** 2 + 0.1 * rng.normal(size=n) + 5.0
    return [({f"x{j}": float(v) for j, v in enumerate(row)}, float(t)) for row, t in zip(X, y)]


def _brute_mean(spec: rv.Neighbours, past: list, row: np.ndarray, r: np.ndarray, gamma: float):
    """The neighbour mean from scratch: raw past rows, differences scaled by the sd of every
    input seen so far (population), weighted by r."""
    window = past[-spec.window :]
    allx = np.array([p[0] for p in past])
    var = allx.var(axis=0) if len(past) > 1 else np.ones(len(row))
    scale = r / np.where(var > 0, var, 1.0) if len(past) > 1 else r
    d2 = np.array([float(((p[0] - row) ** 2) @ scale) for p in window])
    col = 1 if spec.target == "y" else 2
    vals = np.array([p[col] for p in window])
    if spec.kind == "knn":
        order = np.argsort(d2, kind="stable")[: spec.k]
        return float(vals[order].mean())
    w = np.exp(-gamma * (d2 - d2.min()))
    return float(w @ vals / w.sum())


@pytest.mark.parametrize(
    "spec",
    [
        rv.Neighbours("knn", 30, k=5),
        rv.Neighbours("knn", 1000, k=10, relevance="eta2", period=50),
        rv.Neighbours("parzen", 40, relevance="corr2", period=60),
        rv.Neighbours("parzen", 1000, target="residual"),
    ],
)
def test_neighbour_mean_is_the_brute_force_mean_of_the_past_window(spec) -> None:
    nm = rv.NeighbourMean(spec)
    past: list = []
    for t, (x, y) in enumerate(_stream(260, seed=3, trend=True)):
        row = np.array(list(x.values()))
        got = nm.mean(row)
        if past:
            r = nm.r.copy()
            gamma = nm.gamma if not math.isnan(nm.gamma) else spec.scale / (2.0 * len(row))
            want = _brute_mean(spec, past, row, r, gamma)
            assert got == pytest.approx(want, rel=1e-9, abs=1e-9), t
        else:
            assert math.isnan(got)
        residual = y - 0.5 * t  # any value: the ring must keep it beside the target
        nm.learn(row, y, residual)
        past.append((row, y, residual))
    if spec.relevance:  # the relevance was refreshed, from the window standardised now
        assert not np.allclose(nm.r, 1.0)


def test_eta2_is_the_binned_variance_reduction_less_its_bias() -> None:
    rng = np.random.default_rng(0)
    m = 400
    X = rng.normal(size=(m, 3))
    y = X[:, 0] ** 2 + 0.5 * X[:, 1] + 0.05 * rng.normal(size=m)  # x0 non-monotone, x2 noise
    got = rv.relevance(X, y, "eta2")
    raw = []
    for j in range(3):
        b = np.searchsorted(rv.RELEVANCE_EDGES, X[:, j])
        groups = [y[b == k] for k in np.unique(b)]
        between = sum(len(g) * (g.mean() - y.mean()) ** 2 for g in groups)
        eta2 = between / ((y - y.mean()) ** 2).sum()
        raw.append(max(eta2 - (len(groups) - 1) / (m - 1), 0.0))
    raw = np.array(raw)
    assert got == pytest.approx(raw * 3 / raw.sum())
    assert got[0] > got[1] > got[2]  # the correlation misses the non-monotone x0:
    corr2 = rv.relevance(X, y, "corr2")
    assert corr2[0] < corr2[1]


def test_corr2_and_mi_by_their_definitions_and_uniform_without_information() -> None:
    rng = np.random.default_rng(1)
    m = 300
    X = rng.normal(size=(m, 2))
    y = 2.0 * X[:, 1] + 0.5 * rng.normal(size=m)
    rho2 = np.array([np.corrcoef(X[:, j], y)[0, 1] ** 2 for j in range(2)])
    want = np.maximum(rho2 - 1.0 / (m - 1), 0.0)
    assert rv.relevance(X, y, "corr2") == pytest.approx(want * 2 / want.sum())
    # MI with the target cut at its quartiles, counted
    by = np.searchsorted(np.quantile(y, [0.25, 0.5, 0.75]), y)
    mis = []
    for j in range(2):
        bx = np.searchsorted(rv.RELEVANCE_EDGES, X[:, j])
        mi = 0.0
        for a, b in itertools.product(np.unique(bx), np.unique(by)):
            pab = np.mean((bx == a) & (by == b))
            if pab > 0:
                mi += pab * math.log(pab / (np.mean(bx == a) * np.mean(by == b)))
        mis.append(max(mi - (len(np.unique(bx)) - 1) * 3 / (2 * m), 0.0))
    mis = np.array(mis)
    assert rv.relevance(X, y, "mi") == pytest.approx(mis * 2 / mis.sum())
    noise = rng.normal(size=m)
    assert rv.relevance(X[:50], noise[:50] * 0.0 + 1.0, "eta2") == pytest.approx([1.0, 1.0])


def test_gaussian_hedge_weights_by_hand_with_fixed_share() -> None:
    mixer = rv.combiner("hedge gauss eta 4 share 0.002")
    assert mixer.weights() == pytest.approx([0.5, 0.5])
    loss = rv.losses(np.array([0.5, -1.0]), "gauss")
    assert loss == pytest.approx([0.125, 0.5])
    mixer.update(loss)
    q0 = 1.0 / (1.0 + math.exp(-4 * (0.5 - 0.125)))  # exp(-4 x loss), normalised
    w0 = 0.998 * q0 + 0.001
    assert mixer.weights() == pytest.approx([w0, 1 - w0])
    # a second round: the log-weights carry on from the shared ones
    mixer.update(rv.losses(np.array([9.0, 0.0]), "gauss"))  # clipped at 4: loss 8
    q0 = w0 * math.exp(-4 * 8.0) / (w0 * math.exp(-4 * 8.0) + (1 - w0))
    w0 = 0.998 * q0 + 0.001
    assert mixer.weights() == pytest.approx([w0, 1 - w0])


def test_abs_losses_and_the_inverse_error_mixture_by_hand() -> None:
    assert rv.losses(np.array([-0.3, 5.0]), "abs") == pytest.approx([0.3, 4.0])
    mixer = rv.combiner("mixture inverse-mse decay 0.99")
    assert mixer.weights() == pytest.approx([0.5, 0.5])
    mixer.update(rv.losses(np.array([0.0, 1.0]), "sq"))  # a perfect expert takes all
    assert mixer.weights() == pytest.approx([1.0, 0.0])
    mixer.update(rv.losses(np.array([1.0, 0.0]), "sq"))
    S = np.array([1.0, 0.99])
    assert mixer.weights() == pytest.approx((1 / S) / (1 / S).sum())


def test_numba_kernels_match_numpy() -> None:
    knn_mean, nw_mean = rv._nw_kernels()
    rng = np.random.default_rng(2)
    X, v = rng.normal(size=(300, 4)), rng.normal(size=300)
    r = rng.uniform(0.2, 2.0, size=4)
    s = np.zeros(300)
    for q in rng.normal(size=(20, 4)):
        d2 = ((X - q) ** 2) @ r
        assert knn_mean(X, v, 300, q, r, 7) == pytest.approx(v[np.argsort(d2)[:7]].mean())
        assert knn_mean(X, v, 5, q, r, 7) == pytest.approx(v[:5].mean())  # m < k
        w = np.exp(-0.7 * (d2 - d2.min()))
        assert nw_mean(X, v, 300, q, r, 0.7, s) == pytest.approx(w @ v / w.sum())


def test_run_scores_the_default_as_the_pipeline_does_and_the_neighbours_alone() -> None:
    from river import preprocessing

    from streammkl.river import MKLRegressor

    data = _stream(300, seed=5)
    got = rv.run(data, seed=0, only=["knn k=10 W=1000", "residual knn k=10 W=1000 eta2"])
    model = preprocessing.StandardScaler() | MKLRegressor(seed=0)
    err, preds = 0.0, []
    for x, y in data:
        p = model.predict_one(x)
        preds.append(p)
        err += abs(y - p)
        model.learn_one(x, y)
    assert got["default"] == pytest.approx(err / len(data), rel=1e-12)
    # the neighbours alone: the brute-force kNN mean of past targets (the default before any)
    for name, col in (("knn k=10 W=1000", 1), ("residual knn k=10 W=1000 eta2", 2)):
        spec = rv.VOTES[name]
        past: list = []
        total = 0.0
        nm = rv.NeighbourMean(spec)  # its relevance (eta2) taken from the prototype's ring
        for (x, y), p in zip(data, preds, strict=True):
            row = np.array(list(x.values()))
            if past:
                mean = _brute_mean(spec, past, row, nm.r.copy(), math.nan)
                guess = p + mean if col == 2 else mean
            else:
                guess = p
            total += abs(y - guess)
            nm.learn(row, y, y - p)
            past.append((row, y, y - p))
        assert got[f"alone {name}"] == pytest.approx(total / len(data), rel=1e-9), name
    for head in rv.heads():
        if head.endswith(" knn k=10 W=1000"):
            assert 0 < got[head] < 5.0, head
            if not head.startswith("alone"):
                assert 0.0 <= got[f"weight {head}"] <= 1.0


def test_peers_reads_the_best_peer_regression_table(tmp_path: Path) -> None:
    path = tmp_path / "suite.md"
    path.write_text(
        "| stream | role | MKLRegressor MAE | best peer | its MAE | MKL − peer |\n"
        "|---|---|---|---|---|---|\n"
        "| TrumpApproval | validation | 0.382 ± 0.00092 | MOA kNN regressor | 0.348 | +0.03 |\n"
        "| Bananas | development | 0.8920 ± 0.0009 | 0.23 | MOA ARF | 0.8887 | +0.33 |\n"
    )
    assert rv.peers(path) == {"TrumpApproval": ("MOA kNN regressor", 0.348)}
    assert rv.peers(tmp_path / "missing.md") == {}


def test_fixed_share_of_three_by_hand_and_the_two_expert_hedge_at_two() -> None:
    import knn_votes as kv

    three = rv.FixedShare(3, eta=2.0, share=0.03)
    assert three.weights() == pytest.approx([1 / 3] * 3)
    three.update(np.array([0.0, 0.5, 1.0]))
    q = np.exp(-2.0 * np.array([0.0, 0.5, 1.0]))
    want = 0.97 * q / q.sum() + 0.01
    assert three.weights() == pytest.approx(want)
    rng = np.random.default_rng(4)
    two, hedge = rv.FixedShare(2, eta=4.0, share=0.002), kv.Hedge(0.002, "linear", eta=4.0)
    for loss in rng.exponential(size=(200, 2)):
        two.update(loss)
        hedge.update(loss)
        assert two.weights() == pytest.approx(hedge.weights(), rel=1e-12)


def test_a_trio_head_mixes_the_default_and_both_neighbour_experts() -> None:
    data = _stream(250, seed=6)
    pair = rv.TRIOS["parzen 16/median W=1000 eta2 + residual"]
    got = rv.run(data, seed=0, only=list(pair))
    trio_heads = [h for h in rv.heads(list(pair)) if h.startswith("hedge3")]
    assert len(trio_heads) == len(rv.MIXES3)
    assert not [h for h in rv.heads([pair[0]]) if h.startswith("hedge3")]
    experts = [got["default"], got[f"alone {pair[0]}"], got[f"alone {pair[1]}"]]
    for head in trio_heads:
        assert 0.0 < got[f"weight {head}"] < 1.0
        # a convex mix errs by at most the experts' summed errors on every round
        assert got[head] <= sum(experts) + 1e-12
        assert got[head] != pytest.approx(got["default"], rel=1e-6)  # the neighbours count
