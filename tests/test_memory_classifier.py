"""MemoryClassifier (issue 27's hedged neighbour vote, in the library): the compiled vote and
relevance against brute-force numpy and the research prototype (``benchmarks/knn_votes.py``),
the Hedge against a hand computation, the wrapper's prequential predictions against the
prototype's chosen head, persistence, parameters and wide inputs."""

from __future__ import annotations

import itertools
import math
import pickle
import sys
from pathlib import Path

import numpy as np
import pytest
from river import datasets

from streammkl.core._numba import parzen as kernels
from streammkl.core.hedge import FixedShareHedge, log_loss
from streammkl.core.parzen_memory import ParzenMemory
from streammkl.river import MemoryClassifier, MKLClassifier

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import knn_votes as kv

HEAD_VOTE = "parzen 16/median W=1000 relevance 250 quadratic exp"
HEAD_MIX = "linear eta 0.25 share 0.002 skip 0.2 every 10"


def _window(rng: np.random.Generator, d: int, w: int, c: int) -> tuple:
    columns = rng.normal(size=(d, w)).astype(np.float32)
    labels = rng.integers(0, c, size=w).astype(np.int32)
    return columns, labels


@pytest.mark.parametrize(("d", "w", "m", "c"), [(2, 50, 50, 2), (7, 300, 120, 4), (1, 10, 3, 3)])
def test_the_vote_is_the_normalised_gaussian_vote_of_the_first_m_slots(d, w, m, c) -> None:
    rng = np.random.default_rng(d + w)
    columns, labels = _window(rng, d, w, c)
    weights = rng.uniform(0.2, 2.0, size=d).astype(np.float32)
    dist, bits, out = np.zeros(w, np.float32), np.zeros(w, np.int32), np.zeros(c, np.float32)
    for _ in range(20):
        z = rng.normal(size=d + 1)  # (an input the window has no column for is not read)
        gamma = float(rng.uniform(0.1, 5.0))
        kernels.parzen_vote(columns, labels, m, z, weights, gamma, dist, bits, out)
        d2 = ((columns[:, :m].astype(np.float64) - z[:d, None]) ** 2 * weights[:, None]).sum(0)
        exact = np.exp(-gamma * (d2 - d2.min()))
        want = np.bincount(labels[:m], weights=exact, minlength=c) / exact.sum()
        np.testing.assert_allclose(out, want, atol=3e-3)  # the exp within 0.27 %
        # the prototype's approximate exp (its numpy twin) on the same shifted arguments
        approx = kv.quadratic_exp(-gamma * (d2 - d2.min())).astype(np.float64)
        np.testing.assert_allclose(
            out, np.bincount(labels[:m], weights=approx, minlength=c) / approx.sum(), atol=1e-5
        )
        twin = np.zeros(c, np.float32)
        kernels.parzen_vote.py_func(columns, labels, m, z, weights, gamma, dist, bits, twin)
        np.testing.assert_allclose(out, twin, atol=1e-6)


def test_relevance_and_median_are_the_numpy_formulas() -> None:
    rng = np.random.default_rng(3)
    columns, labels = _window(rng, 5, 200, 3)
    columns[0] += labels  # an informative input
    edges = np.linspace(-2.0, 2.0, 7)
    out = np.zeros(5)
    kernels.relevance(columns, labels, 150, 3, edges, out)
    for j in range(5):  # the prototype's formula (``NeighbourVotes._relevance``)
        x, y = columns[j, :150].astype(np.float64), labels[:150].astype(np.int64)
        b = np.searchsorted(edges, x)
        joint = np.zeros((8, 3))
        np.add.at(joint, (b, y), 1.0 / 150)
        pb, py = joint.sum(1), np.bincount(y, minlength=3) / 150
        nz = joint > 0
        mi = float((joint[nz] * np.log(joint[nz] / np.outer(pb, py)[nz])).sum())
        want = max(mi - (int((pb > 0).sum()) - 1) * (int((py > 0).sum()) - 1) / 300, 0.0)
        assert out[j] == pytest.approx(want, abs=1e-12)
    assert out[0] > 5 * out[1:].max()
    twin = np.zeros(5)
    kernels.relevance.py_func(columns, labels, 150, 3, edges, twin)
    np.testing.assert_allclose(out, twin, atol=1e-12)
    slots = np.array([5, 0, 17, 99, 3])
    r = rng.uniform(0, 2, 5)
    Z = columns[:, slots].T.astype(np.float64)
    d2 = (((Z[:, None] - Z[None]) ** 2) @ r)[np.triu_indices(5, 1)]
    assert kernels.median_distance(columns, slots, r) == pytest.approx(np.median(d2), rel=1e-12)


def _prototype_rows(data: list) -> list[tuple[dict, np.ndarray]]:
    return [(x, np.array(list(x.values()))) for x, _ in data]


def test_the_memory_keeps_the_prototypes_bandwidth_and_relevance() -> None:
    data = _standardised("phishing", 700)
    proto = kv._make_transformer()(kv.HEDGE_VOTES[HEAD_VOTE])
    memory = ParzenMemory(1000, 16.0, 250)
    slots: dict = {}
    for t, (x, y) in enumerate(data):
        row = np.array(list(x.values()))
        fr = proto.fractions(x)
        mine = memory.vote(row)
        if t == 0:
            assert mine is None and not fr.sum()
        else:  # (the prototype's class slots are in order of first appearance, as here; its
            # exp's arguments are not shifted by the nearest pair's: another 0.27 % error)
            np.testing.assert_allclose(mine, fr[: len(mine)], atol=3e-3)
        proto.learn_one(x, y)
        memory.add(row, slots.setdefault(y, len(slots)))
        if t + 1 in (100, 250, 500):
            assert memory.bandwidth() == pytest.approx(proto.gamma, rel=1e-5)
            np.testing.assert_allclose(memory.relevance, proto.r, rtol=1e-5, atol=1e-9)
    assert memory.count == 700 and memory.size == 700


def test_the_hedge_is_the_fixed_share_update_by_hand() -> None:
    hedge = FixedShareHedge(eta=0.5, share=0.1)
    losses = [(0.2, 1.0), (2.0, 0.1), (9.21, 0.0)]
    w = 0.5
    for first, second in losses:
        a, b = (1 - w) * math.exp(-0.5 * first), w * math.exp(-0.5 * second)
        w = 0.9 * b / (a + b) + 0.05
        hedge.update(first, second)
        assert hedge.weight == pytest.approx(w, rel=1e-14)
    assert log_loss(0.0) == pytest.approx(-math.log(1e-4))
    assert log_loss(0.5) == pytest.approx(math.log(2))
    # the prototype's Hedge (log-weights in numpy), on the same losses
    proto = kv.Hedge(0.1, "linear", 0.5)
    mine = FixedShareHedge(0.5, 0.1)
    for first, second in losses * 5:
        proto.update(np.array([first, second]))
        mine.update(first, second)
        assert mine.weight == pytest.approx(float(proto.weights()[1]), rel=1e-12)


def _standardised(key: str, n: int) -> list[tuple[dict, object]]:
    """The stream's first n examples standardised by their own mean and sd, once: a fixed
    transform, so that the prediction and the learning of an example see the same input in
    the prototype's loop (its ``StandardScaler`` learns between them) and in the wrapper."""
    stream = {"bananas": datasets.Bananas, "phishing": datasets.Phishing}[key]()
    raw = list(itertools.islice(stream, n))
    names = list(raw[0][0])
    X = np.array([[float(x[k]) for k in names] for x, _ in raw])
    mu, sd = X.mean(0), X.std(0)
    sd[sd == 0] = 1.0
    Z = (X - mu) / sd
    return [(dict(zip(names, row.tolist(), strict=True)), y) for row, (_, y) in zip(Z, raw)]


class _Identity:
    """A ``StandardScaler`` that does nothing (the data are standardised already)."""

    def learn_one(self, x: dict) -> None:
        pass

    def transform_one(self, x: dict) -> dict:
        return x


def _prototype_head(data: list, seed: int) -> tuple[list, float]:
    """The prototype's head ``hedge <HEAD_MIX> <HEAD_VOTE>``: its prequential predictions (the
    loop of ``knn_votes._run_hedge`` for this one head), each with the margin of its top
    probability over the next, and its accuracy."""
    from streammkl.river import MKLClassifier as Learner

    learner, vote = Learner(seed=seed), kv._make_transformer()(kv.HEDGE_VOTES[HEAD_VOTE])
    mix, floor, every = kv.HEDGE_SKIPS[HEAD_MIX]
    hedge = kv._hedge(kv.HEDGE_MIXES[mix])
    labels: dict = {}
    out, hits = [], 0
    for t, (x, y) in enumerate(data):
        proba = learner.predict_proba_one(x)
        for c in proba:
            labels.setdefault(c, len(labels))
        fr, slots = vote.fractions(x), dict(vote.slots)
        labels.setdefault(y, len(labels))
        inv, k = list(labels), labels[y]
        pb = np.array([proba.get(c, 0.0) for c in inv])
        pv = np.full(len(inv), 1.0 / len(inv))
        if fr.sum() > 0:
            pv = np.full(len(inv), kv.HEDGE_FLOOR / len(inv))
            for c, j in slots.items():
                pv[labels[c]] += (1.0 - kv.HEDGE_FLOOR) * fr[j]
        w = hedge.weights()
        if w[1] >= floor or t % every == 0:
            p = kv._mix(pb, pv, float(w[0]), "linear")
            hedge.update(-np.log(np.maximum([pb[k], pv[k]], kv.LOSS_FLOOR)))
        else:
            p = pb
        top = np.sort(p)[-2:] if len(p) > 1 else np.array([0.0, 1.0])
        out.append((inv[int(np.argmax(p))], float(top[1] - top[0])))
        hits += out[-1][0] == y
        learner.learn_one(x, y)
        vote.learn_one(x, y)
    return out, hits / len(data)


@pytest.mark.parametrize(("key", "seed"), [("bananas", 0), ("phishing", 1)])
def test_prequential_predictions_equal_the_prototypes_head(key, seed, monkeypatch) -> None:
    data = _standardised(key, 600)
    want, accuracy = _prototype_head(data, seed)
    from river import preprocessing

    # the loop above is the prototype's own for this head: the same accuracy from its runner
    monkeypatch.setattr(preprocessing, "StandardScaler", _Identity)
    assert kv._run_hedge(data, seed, only=[HEAD_VOTE])[f"hedge {HEAD_MIX} {HEAD_VOTE}"] == accuracy
    fused = MemoryClassifier(MKLClassifier(seed=seed))
    split = MemoryClassifier(MKLClassifier(seed=seed))
    computed, ties = 0, 0
    for t, (x, y) in enumerate(data):
        computed += fused._votes_now()
        got = split.predict_one(x)
        proba = fused.learn_predict_one(x, y)
        split.learn_one(x, y)
        assert (max(proba, key=proba.__getitem__) if proba else None) == got
        if t and got != want[t][0]:  # (round 0: the prototype knows the label it predicts)
            # a near tie: the library's vote weighs by its approximate exp the distances
            # shifted by the nearest's (the prototype's are not) and sums in another order,
            # both within the exp's 0.27 %
            assert want[t][1] < 2e-3, (t, want[t])
            ties += 1
        assert split.memory_weight == pytest.approx(fused.memory_weight, rel=1e-9)
    assert 0 < computed < len(data)  # both kinds of round happened
    assert ties <= 2


def _learned(model: MemoryClassifier, data: list) -> MemoryClassifier:
    for x, y in data:
        model.learn_predict_one(x, y)
    return model


def test_saved_loaded_and_pickled_copies_predict_the_same(tmp_path) -> None:
    data = _standardised("phishing", 400)
    model = _learned(MemoryClassifier(MKLClassifier(seed=2), window=300), data[:300])
    assert 0 < model.memory_weight < 1 and model.memory is not None
    assert sum(model.kernel_weights.values()) == pytest.approx(1.0)
    loaded = MemoryClassifier.load(model.save(tmp_path / "m.zip"))
    pickled = pickle.loads(pickle.dumps(model))
    for copy in (loaded, pickled):
        assert copy.memory_weight == model.memory_weight
    for x, y in data[300:]:
        want = model.learn_predict_one(x, y)
        for copy in (loaded, pickled):
            assert copy.learn_predict_one(x, y) == want
    meta, arrays = model.to_state()
    again = MemoryClassifier.from_state(meta, arrays)
    assert again.classifier is not None and again.window == 300
    assert MemoryClassifier.from_state(*MemoryClassifier().to_state()).classifier is None


@pytest.mark.parametrize(
    ("params", "error", "match"),
    [
        ({"classifier": object()}, TypeError, "MKLClassifier"),
        ({"window": 0}, ValueError, "window"),
        ({"window": 2.5}, TypeError, "window"),
        ({"bandwidth": -1.0}, ValueError, "bandwidth"),
        ({"relevance_every": -1}, ValueError, "relevance_every"),
        ({"eta": 0.0}, ValueError, "eta"),
        ({"eta": math.nan}, ValueError, "eta"),
        ({"share": 1.0}, ValueError, "share"),
        ({"share": -0.1}, ValueError, "share"),
        ({"vote_floor": 1.5}, ValueError, "vote_floor"),
        ({"skip_below": "0.2"}, TypeError, "skip_below"),
        ({"check_every": 0}, ValueError, "check_every"),
        ({"max_inputs": -1}, ValueError, "max_inputs"),
        ({"max_inputs": True}, TypeError, "max_inputs"),
    ],
)
def test_bad_parameters_raise_clear_errors(params, error, match) -> None:
    with pytest.raises(error, match=match):
        MemoryClassifier(**params)


def test_above_max_inputs_the_memory_is_dropped_and_the_learner_alone_predicts() -> None:
    rng = np.random.default_rng(5)
    words = [f"w{i}" for i in range(60)]
    data = []
    for _ in range(300):
        on = rng.choice(60, size=4, replace=False)
        data.append(({words[i]: 1.0 for i in on}, bool(on.min() < 20)))
    model = MemoryClassifier(max_inputs=30, skip_below=0.0)
    alone = MKLClassifier()
    dropped_at = None
    for t, (x, y) in enumerate(data):
        p, q = model.learn_predict_one(x, y), alone.learn_predict_one(x, y)
        if model.memory is None and dropped_at is None:
            dropped_at = t
        if dropped_at is not None and t > dropped_at:
            assert p == q  # the learner's own probabilities
            assert model.predict_proba_one(x) == alone.predict_proba_one(x)
    assert dropped_at is not None and model.learner.rounds().n_features > 30
    assert model.memory_weight == 0.0
    assert MemoryClassifier.from_state(*model.to_state()).memory is None


def test_the_vote_wins_weight_where_classes_move() -> None:
    """Moving Gaussian blobs (the suite's RandomRBFDrift, 3,000 examples): the vote earns the
    Hedge's trust and the mixture beats the learner alone (2,825 against 2,714 when written)."""
    from river import preprocessing
    from river.datasets import synth

    stream = synth.RandomRBFDrift(
        seed_model=42, seed_sample=42, n_classes=2, n_features=10, n_centroids=50,
        change_speed=1e-4, n_drift_centroids=25,
    )  # fmt: skip
    model, alone, scaler = MemoryClassifier(), MKLClassifier(), preprocessing.StandardScaler()
    hits = [0, 0]
    for x, label in itertools.islice(stream, 3000):
        scaler.learn_one(x)
        z = scaler.transform_one(x)
        p, q = model.learn_predict_one(z, label), alone.learn_predict_one(z, label)
        hits[0] += bool(p) and max(p, key=p.__getitem__) == label
        hits[1] += bool(q) and max(q, key=q.__getitem__) == label
    assert model.memory_weight > 0.5
    assert hits[0] > hits[1] + 50
