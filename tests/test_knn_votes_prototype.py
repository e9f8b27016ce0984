"""The neighbour-vote prototype of ``benchmarks/knn_votes.py`` (issue 27): its votes are the
brute-force votes of the window of PAST examples (the vote for x_t never sees y_t), the numba
kernel whose cost it measures votes as a full sort does, and the learner is fed the votes."""

from __future__ import annotations

import math
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


def _brute_relevance(rows: np.ndarray, labels: list[int]) -> np.ndarray:
    """Binned mutual information minus its bias, floored at 0, scaled to mean 1 (by counting)."""
    m, d = rows.shape
    classes = sorted(set(labels))
    r = np.zeros(d)
    for j in range(d):
        bins = [int(np.sum(v > kv.RELEVANCE_EDGES)) for v in rows[:, j]]  # 0..8
        joint: dict[tuple[int, int], int] = {}
        for b, c in zip(bins, labels, strict=True):
            joint[(b, c)] = joint.get((b, c), 0) + 1
        mi = 0.0
        for (b, c), n in joint.items():
            pb = bins.count(b) / m
            pc = labels.count(c) / m
            mi += n / m * np.log(n / m / (pb * pc))
        r[j] = max(mi - (len(set(bins)) - 1) * (len(classes) - 1) / (2 * m), 0.0)
    return r * d / r.sum()


def test_relevance_weighs_inputs_by_their_binned_mutual_information_with_the_label() -> None:
    rng = np.random.default_rng(5)
    X = rng.normal(size=(400, 3))
    y = (X[:, 1] > 0.3).astype(int)  # only x1 decides; x0 and x2 are noise
    votes = kv._make_transformer()(kv.Vote("parzen", 300, scale=16.0, relevance=100))
    past: list[tuple[np.ndarray, int]] = []
    for t in range(400):
        x = {f"x{j}": float(v) for j, v in enumerate(X[t])}
        got = votes.fractions(x)
        if t > 100:  # weighted distances, gamma refitted to them
            rows = np.array([z for z, _ in past[-300:]])
            wts = np.exp(-votes.gamma * ((rows - X[t]) ** 2) @ votes.r)
            cls = np.array([c for _, c in past[-300:]])
            assert got == pytest.approx(np.bincount(cls, weights=wts) / wts.sum(), abs=1e-12)
        votes.learn_one(x, int(y[t]))
        past.append((X[t], int(y[t])))
        if t + 1 in (100, 200, 300):
            window = past[-300:]
            want = _brute_relevance(np.array([z for z, _ in window]), [c for _, c in window])
            assert votes.r == pytest.approx(want, abs=1e-9)
            last = np.array([z for z, _ in past[-100:]])
            d2 = (((last[:, None] - last[None]) ** 2) @ votes.r)[np.triu_indices(100, 1)]
            assert votes.gamma == pytest.approx(16.0 / np.median(d2))
    assert votes.r[1] > 2.7  # nearly all of the mean-1 weights (sum 3) on the deciding input


def test_hedge_weights_are_the_softmax_of_past_losses_with_fixed_share() -> None:
    rng = np.random.default_rng(6)
    losses = rng.exponential(size=(300, 2)) * np.array([1.0, 1.3])
    for share in (0.0, 0.01):
        hedge = kv.Hedge(share, "linear")
        w = np.array([0.5, 0.5])
        for loss in losses:
            assert hedge.weights() == pytest.approx(w, rel=1e-9, abs=1e-300)
            hedge.update(loss)
            w = w * np.exp(-loss)
            w = (1 - share) * w / w.sum() + share / 2
        if share == 0.0:  # no share: the softmax of minus the summed losses
            total = losses.sum(axis=0)
            ref = np.exp(-(total - total.min()))
            assert hedge.weights() == pytest.approx(ref / ref.sum(), rel=1e-9, abs=1e-300)
    leader = kv.Hedge(0.9, "leader")
    discounted = np.zeros(2)
    for loss in losses:
        want = 0 if discounted[0] <= discounted[1] else 1
        assert int(np.argmax(leader.weights())) == want
        leader.update(loss)
        discounted = 0.9 * discounted + loss


def test_adahedge_by_hand_follows_the_leader_then_sets_eta_from_the_mixability_gap() -> None:
    hedge = kv.AdaHedge(0.0)
    assert hedge.eta == math.inf
    assert list(hedge.weights()) == [0.5, 0.5]
    # round 1, losses (1, 0), eta infinite: h = 0.5, m = 0 (the leader), Delta = 0.5
    hedge.update(np.array([1.0, 0.0]))
    assert hedge.gap == pytest.approx(0.5)
    assert hedge.eta == pytest.approx(2.0 * math.log(2.0))
    # weights exp(-2 ln2 x (1, 0)) = (1/4, 1), normalised
    assert hedge.weights() == pytest.approx([0.2, 0.8])
    # round 2, losses (0, 1): h = 0.8, m = -ln(0.2 + 0.8 / 4) / (2 ln 2)
    hedge.update(np.array([0.0, 1.0]))
    assert hedge.gap == pytest.approx(0.5 + 0.8 + math.log(0.4) / (2.0 * math.log(2.0)))
    assert hedge.weights() == pytest.approx([0.5, 0.5])  # L = (1, 1): any eta, equal weights
    # with a share: round 1 moves all to the leader at eta_2, then the share
    shared = kv.AdaHedge(0.1)
    shared.update(np.array([1.0, 0.0]))
    assert shared.weights() == pytest.approx([0.9 * 0.2 + 0.05, 0.9 * 0.8 + 0.05])


def _brute_adahedge(losses: np.ndarray, share: float, memory: bool) -> list[np.ndarray]:
    """The weights before each round, from the paper's definitions without any shift."""
    w, L, gap, out = np.array([0.5, 0.5]), np.zeros(2), 0.0, []
    for loss in losses:
        out.append(w.copy())
        eta = math.log(2) / gap if gap > 0 else math.inf
        h = float(np.dot(w, loss))
        if eta == math.inf:
            m = min(loss[k] for k in range(2) if w[k] > 0)
        else:
            m = -math.log(sum(w[k] * math.exp(-eta * loss[k]) for k in range(2))) / eta
        gap = gap * (1 - share if memory else 1.0) + (h - m)
        L = L + loss
        eta = math.log(2) / gap
        if share == 0:
            q = np.array([math.exp(-eta * L[k]) for k in range(2)])
        else:
            q = np.array([w[k] * math.exp(-eta * loss[k]) for k in range(2)])
        w = (1 - share) * q / q.sum() + share / 2
    return out


def test_adahedge_matches_a_brute_force_reference() -> None:
    rng = np.random.default_rng(9)
    losses = rng.exponential(size=(300, 2)) * np.array([0.3, 0.4])
    for share, memory in ((0.0, False), (0.002, False), (0.01, True)):
        hedge = kv.AdaHedge(share, memory=memory)
        for loss, want in zip(losses, _brute_adahedge(losses, share, memory), strict=True):
            assert hedge.weights() == pytest.approx(want, rel=1e-9), (share, memory)
            hedge.update(loss)
        assert 0 < hedge.eta < 10  # finite and set by the gap
    # the gap grows with the past (no memory): eta falls; with memory it settles
    plain, kept = kv.AdaHedge(0.01), kv.AdaHedge(0.01, memory=True)
    etas_plain, etas_kept = [], []
    for loss in np.tile(losses, (10, 1)):
        plain.update(loss)
        kept.update(loss)
        etas_plain.append(plain.eta)
        etas_kept.append(kept.eta)
    assert etas_plain[-1] < 0.5 * etas_plain[299]
    assert etas_kept[-1] == pytest.approx(etas_kept[-301], rel=0.5)
    assert etas_kept[-1] > 3 * etas_plain[-1]


def test_skipped_vote_is_the_base_hedge_at_floor_zero_and_the_default_when_never_computed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    vote = "parzen 16/median W=1000 relevance 250"
    base = "linear eta 0.25 share 0.002"
    monkeypatch.setattr(kv, "HEDGE_SKIPS", {"always": (base, 0.0, 10), "once": (base, 1.1, 10**9)})
    data = _stream(400, 3, seed=7)
    got = kv._run_hedge(data, seed=0, only=[vote])
    assert got[f"hedge always {vote}"] == got[f"hedge {base} {vote}"]
    assert got[f"computed {vote} always"] == 1.0
    assert got[f"computed {vote} once"] == 1 / len(data)  # round 0 only
    # never computed after round 0 (whose vote is the uniform one): the default learner
    assert got[f"hedge once {vote}"] == pytest.approx(got["default"], abs=1.5 / len(data))
    assert got[f"hedge {base} {vote}"] != got["default"]


def test_hedge_job_scores_the_default_learner_as_the_pipeline_does() -> None:
    from river import preprocessing

    from streammkl.river import MKLClassifier

    data = _stream(400, 3, seed=7)
    got = kv._run_hedge(data, seed=0)
    model = preprocessing.StandardScaler() | MKLClassifier(seed=0)
    hits = 0
    for x, y in data:
        hits += model.predict_one(x) == y
        model.learn_one(x, y)
    assert got["default"] == hits / len(data)
    for head in kv._hedge_heads():
        assert 0.3 < got[head] <= 1.0, head


def test_numba_parzen_on_float32_columns_matches_numpy_with_input_weights() -> None:
    columns = kv._numba_parzen_columns()
    rng = np.random.default_rng(8)
    X = rng.normal(size=(200, 4))
    y = rng.integers(0, 3, size=200)
    r = np.array([2.0, 0.0, 1.5, 0.5])
    XT = np.ascontiguousarray(X.T, dtype=np.float32)
    out = np.zeros(3, dtype=np.float32)
    scratch = np.zeros(200, dtype=np.float32)
    for m in (1, 50, 200):
        for q in rng.normal(size=(10, 4)):
            columns(XT, y, m, q.astype(np.float32), r.astype(np.float32), 0.7, scratch, out)
            w = np.exp(-0.7 * ((X[:m] - q) ** 2) @ r)
            want = np.bincount(y[:m], weights=w, minlength=3) / w.sum()
            assert out == pytest.approx(want, abs=1e-5)


def test_relevance_selection_keeps_only_the_informative_inputs() -> None:
    rng = np.random.default_rng(9)
    X = rng.normal(size=(300, 4))
    y = (X[:, 1] + 0.5 * X[:, 3] > 0).astype(int)  # x1 and x3 decide; x0 and x2 are noise
    votes = kv._make_transformer()(kv.Vote("knn", 300, relevance=300, select=0.1))
    for t in range(300):
        votes.learn_one({f"x{j}": float(v) for j, v in enumerate(X[t])}, int(y[t]))
    assert list(votes.r) == [0.0, 2.0, 0.0, 2.0]  # equal weights on the kept inputs, mean 1


def test_fast_exp_is_within_its_stated_factor_of_exp_and_monotone() -> None:
    x = np.linspace(-87.0, 0.0, 400_001).astype(np.float32)
    got = kv.fast_exp(x).astype(np.float64)
    ratio = got / np.exp(x.astype(np.float64))
    assert 1 / 1.031 < ratio.min() < 0.975  # the error is centred: both sides are reached
    assert 1.025 < ratio.max() < 1.031
    assert np.all(np.diff(got) >= 0)
    assert np.all(kv.fast_exp(np.array([-100.0, -1e6])) < 2e-38)  # floored, never negative


def test_numba_parzen_fast_matches_numpy_with_the_fast_exp_and_the_exact_vote_closely() -> None:
    fast = kv._numba_parzen_fast()
    rng = np.random.default_rng(10)
    X = rng.normal(size=(300, 4))
    y = rng.integers(0, 4, size=300)
    r = np.array([2.0, 0.0, 1.5, 0.5])
    XT = np.ascontiguousarray(X.T, dtype=np.float32)
    out = np.zeros(4, dtype=np.float32)
    scratch = np.zeros(300, dtype=np.float32)
    bits = np.zeros(300, dtype=np.int32)
    worst = 0.0
    for m in (1, 50, 300):
        for q in rng.normal(size=(10, 4)):
            args = (XT, y.astype(np.int32), m, q.astype(np.float32), r.astype(np.float32))
            fast(*args, np.float32(0.7), scratch, bits, out)
            s = -0.7 * ((X[:m] - q) ** 2) @ r
            w = kv.fast_exp(s - s.max()).astype(np.float64)
            want = np.bincount(y[:m], weights=w, minlength=4) / w.sum()
            assert out == pytest.approx(want, abs=1e-5)
            exact = np.exp(s - s.max())
            exact_fractions = np.bincount(y[:m], weights=exact, minlength=4) / exact.sum()
            assert out == pytest.approx(exact_fractions, abs=0.031)
            worst = max(worst, float(np.abs(out - exact_fractions).max()))
    assert worst > 1e-4  # the approximation is not the exact vote


def test_a_fast_exp_vote_is_the_brute_force_vote_with_fast_exp_weights() -> None:
    fast = kv._make_transformer()(kv.Vote("parzen", 40, exp="fast"))
    exact = kv._make_transformer()(kv.Vote("parzen", 40))
    past: list[tuple[np.ndarray, int]] = []
    for x, y in _stream(150, 3, seed=3):
        got = fast.fractions(x)
        if past:
            rows = np.array([p[0] for p in past[-40:]])
            gamma = fast.gamma if not math.isnan(fast.gamma) else 16.0 / 6.0
            w = kv.fast_exp(-gamma * ((rows - np.array(list(x.values()))) ** 2).sum(axis=1))
            labels = np.array([fast.slots[p[1]] for p in past[-40:]])
            want = np.bincount(labels, weights=w.astype(np.float64), minlength=len(fast.slots))
            assert got == pytest.approx(want / want.sum(), abs=1e-6)
            assert got == pytest.approx(exact.fractions(x), abs=0.031)
        fast.learn_one(x, y)
        exact.learn_one(x, y)
        past.append((np.array(list(x.values())), y))


def test_quadratic_exp_is_within_0_27_percent_of_exp_and_monotone() -> None:
    x = np.linspace(-87.0, 0.0, 400_001).astype(np.float32)
    got = kv.quadratic_exp(x).astype(np.float64)
    ratio = got / np.exp(x.astype(np.float64))
    assert 0.9972 < ratio.min() < 0.998
    assert 1.002 < ratio.max() < 1.0028
    assert np.all(np.diff(got) >= 0)
    assert kv.quadratic_exp(np.zeros(1))[0] == 1.0
    assert np.all(kv.quadratic_exp(np.array([-100.0, -1e6])) < 2e-38)


def test_numba_parzen_fast_quadratic_matches_numpy_with_the_quadratic_exp() -> None:
    quadratic = kv._numba_parzen_fast(quadratic=True)
    rng = np.random.default_rng(11)
    X = rng.normal(size=(300, 5))
    y = rng.integers(0, 3, size=300)
    r = np.array([1.0, 0.5, 0.0, 2.0, 1.5])
    XT = np.ascontiguousarray(X.T, dtype=np.float32)
    out = np.zeros(3, dtype=np.float32)
    scratch = np.zeros(300, dtype=np.float32)
    bits = np.zeros(300, dtype=np.int32)
    for m in (1, 60, 300):
        for q in rng.normal(size=(10, 5)):
            args = (XT, y.astype(np.int32), m, q.astype(np.float32), r.astype(np.float32))
            quadratic(*args, np.float32(0.4), scratch, bits, out)
            s = -0.4 * ((X[:m] - q) ** 2) @ r
            w = kv.quadratic_exp(s - s.max()).astype(np.float64)
            want = np.bincount(y[:m], weights=w, minlength=3) / w.sum()
            assert out == pytest.approx(want, abs=1e-5)
            exact = np.exp(s - s.max())
            exact_fractions = np.bincount(y[:m], weights=exact, minlength=3) / exact.sum()
            assert out == pytest.approx(exact_fractions, abs=0.003)


def test_a_float32_vote_rounds_the_exact_vote_only_at_float32_precision() -> None:
    low = kv._make_transformer()(kv.Vote("parzen", 50, exp="float32"))
    exact = kv._make_transformer()(kv.Vote("parzen", 50))
    differ = 0
    for x, y in _stream(160, 4, seed=5):
        got, want = low.fractions(x), exact.fractions(x)
        assert got == pytest.approx(want, abs=1e-5)
        differ += int(not np.array_equal(got, want))
        low.learn_one(x, y)
        exact.learn_one(x, y)
    assert differ > 0  # the rounding is there
