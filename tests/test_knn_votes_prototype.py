"""The neighbour-vote prototype of ``benchmarks/knn_votes.py`` (issue 27): its votes are the
brute-force votes of the window of PAST examples (the vote for x_t never sees y_t), the numba
kernel whose cost it measures votes as a full sort does, and the learner is fed the votes."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import knn_votes as kv


def _stream(n: int, d: int, seed: int = 0) -> list[tuple[dict, int]]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (X[:, 0] + 0.3 * rng.normal(size=n) > 0).astype(int) + (X[:, 1] > 1)
    return [({f"x{j}": float(v) for j, v in enumerate(row)}, int(c)) for row, c in zip(X, y)]


def _brute_knn(past: list[tuple[np.ndarray, int]], x: np.ndarray, k: int, slots: dict) -> dict:
    order = sorted(range(len(past)), key=lambda i: float(((past[i][0] - x) ** 2).sum()))[:k]
    out = {f"vote{j}": 0.0 for j in range(len(slots))}
    for i in order:
        out[f"vote{slots[past[i][1]]}"] += 1.0 / len(order)
    return out


@pytest.mark.parametrize(("window", "k"), [(30, 5), (1000, 10)])
def test_knn_votes_are_the_brute_force_votes_of_the_past_window(window: int, k: int) -> None:
    votes = kv._make_transformer()(kv.Vote("knn", window, k=k))
    past: list[tuple[np.ndarray, int]] = []
    slots: dict = {}
    for x, y in _stream(200, 3):
        row = np.array(list(x.values()))
        got = votes.transform_one(x)
        want = _brute_knn(past[-window:], row, k, slots) if past else {}
        assert set(got) == set(x) | set(want)
        for name, v in want.items():
            assert got[name] == pytest.approx(v, abs=1e-12), name
        votes.learn_one(x, y)
        slots.setdefault(y, len(slots))
        past.append((row, y))


def test_parzen_votes_weigh_the_past_window_by_the_gaussian() -> None:
    vote = kv.Vote("parzen", 50, scale=16.0)
    votes = kv._make_transformer()(vote)
    past: list[tuple[np.ndarray, int]] = []
    slots: dict = {}
    for t, (x, y) in enumerate(_stream(150, 2, seed=1)):
        row = np.array(list(x.values()))
        got = votes.transform_one(x)
        if past:
            gamma = votes.gamma if t >= kv.MEDIAN_AFTER else 16.0 / (2 * 2)
            w = np.zeros(len(slots))
            for z, c in past[-50:]:
                w[slots[c]] += np.exp(-gamma * ((z - row) ** 2).sum())
            w /= w.sum()
            assert [got[f"vote{j}"] for j in range(len(slots))] == pytest.approx(w, abs=1e-12)
        votes.learn_one(x, y)
        slots.setdefault(y, len(slots))
        past.append((row, y))
    Z = np.array([r for r, _ in past[kv.MEDIAN_AFTER - 50 : kv.MEDIAN_AFTER]])  # that window
    d2 = ((Z[:, None] - Z[None]) ** 2).sum(axis=2)[np.triu_indices(50, 1)]
    assert votes.gamma == pytest.approx(16.0 / np.median(d2))


def test_regression_vote_is_the_standardised_knn_mean_of_past_targets() -> None:
    votes = kv._make_transformer()(kv.Vote("knn", 20, k=3), regression=True)
    past: list[tuple[np.ndarray, float]] = []
    for x, c in _stream(80, 2, seed=2):
        y = 10.0 * c + 3.0
        row = np.array(list(x.values()))
        got = votes.transform_one(x)["vote"]
        if past:
            near = sorted(past[-20:], key=lambda p: float(((p[0] - row) ** 2).sum()))[:3]
            ys = np.array([v for _, v in past])
            sd = ys.std() if len(ys) > 1 and ys.std() > 0 else 1.0
            assert got == pytest.approx((np.mean([v for _, v in near]) - ys.mean()) / sd)
        else:
            assert got == 0.0
        votes.learn_one(x, y)
        past.append((row, y))


def test_numba_vote_matches_a_full_sort() -> None:
    vote = kv._numba_vote()
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 5))
    y = rng.integers(0, 4, size=300)
    out = np.zeros(4)
    for m in (1, 7, 300):
        for q in rng.normal(size=(20, 5)):
            vote(X, y, m, q, 10, out)
            d2 = ((X[:m] - q) ** 2).sum(axis=1)
            ref = np.zeros(4)
            kk = min(10, m)
            np.add.at(ref, y[:m][np.argsort(d2, kind="stable")[:kk]], 1.0 / kk)
            assert out == pytest.approx(ref)


@pytest.mark.parametrize("variant", ["(a) bank knn k=10 W=1000", "(b) linear knn k=10 W=1000"])
def test_the_learner_is_fed_the_votes(variant: str) -> None:
    data = _stream(300, 2)
    model = kv._model(variant, 0, ["x0", "x1"], regression=False)
    for x, y in data:
        model.predict_one(x)
        model.learn_one(x, y)
    names = model.learner.rounds().features.names
    assert {"vote0", "vote1", "vote2"} <= set(names)
    weights = model.learner.kernel_weights
    if variant.startswith("(b)"):
        assert "neighbour-votes" in weights
        assert weights["neighbour-votes"] > 0.0


def test_numba_parzen_matches_numpy() -> None:
    parzen = kv._numba_parzen()
    rng = np.random.default_rng(4)
    X = rng.normal(size=(200, 3))
    y = rng.integers(0, 3, size=200)
    out = np.zeros(3)
    for m in (1, 50, 200):
        for q in rng.normal(size=(10, 3)):
            parzen(X, y, m, q, 2.0, out)
            w = np.exp(-2.0 * ((X[:m] - q) ** 2).sum(axis=1))
            assert out == pytest.approx(np.bincount(y[:m], weights=w, minlength=3) / w.sum())
