"""digit-strings: Markov-chain statistics, images, the numpy API and its disjoint splits."""

from __future__ import annotations

import numpy as np
import pytest

from simulators import get
from simulators.digit_strings import image_pools, load_split, splits
from simulators.markov import BigramChain
from simulators.replay import load_digit_images


def test_chain_is_fixed_sparse_informative_and_irreducible():
    chain = BigramChain.random(10, 3, seed=0)
    assert np.array_equal(chain.transition, BigramChain.random(10, 3, seed=0).transition)
    assert not np.array_equal(chain.transition, BigramChain.random(10, 3, seed=1).transition)
    assert np.allclose(chain.transition.sum(1), 1) and np.allclose(chain.start.sum(), 1)
    assert ((chain.transition > 0).sum(1) == 3).all()  # exactly 3 successors per label
    reach = np.linalg.matrix_power(np.eye(10) + (chain.transition > 0), 10) > 0
    assert reach.all()  # every label reachable from every label
    assert np.allclose(chain.stationary(), 0.1)  # doubly stochastic: labels equally frequent
    assert chain.conditional_entropy_bits() < 0.5 * np.log2(10)  # the previous label informs


def test_stream_follows_the_chain():
    sim = get("digit-strings", seed=3, n_samples=3000)
    truth = sim.ground_truth()
    P, start = np.array(truth["chain"]["transition"]), np.array(truth["chain"]["start"])
    counts, first, lengths = np.zeros((10, 10)), np.zeros(10), []
    for rec in sim:
        y = rec.y
        lengths.append(len(y))
        first[y[0]] += 1
        np.add.at(counts, (y[:-1], y[1:]), 1)
    assert counts[P == 0].sum() == 0  # no transition outside the chain's support, ever
    rows = counts.sum(1, keepdims=True)
    se = np.sqrt(P * (1 - P) / rows)
    assert (np.abs(counts / rows - P) <= 4 * se + 1e-12).all()
    assert np.abs(first / len(lengths) - start).max() < 4 * np.sqrt(0.1 * 0.9 / len(lengths))
    hist = np.bincount(lengths, minlength=11)[3:]
    assert min(lengths) == 3 and max(lengths) == 10
    assert np.abs(hist / len(lengths) - 1 / 8).max() < 0.03  # uniform lengths 3..10


def test_tokens_are_images_of_their_labels():
    images, labels = load_digit_images()
    sim = get("digit-strings", seed=1, n_samples=200, split="test")
    _, test_pool = image_pools(1, 0.5)
    for rec, info in sim.annotated():
        assert rec.is_sequence and len(rec.x) == len(rec.y) == len(info["images"])
        idx = np.array(info["images"])
        assert np.array_equal(labels[idx], rec.y)
        assert np.array_equal(np.array(rec.x), images[idx])
        assert np.isin(idx, test_pool).all()
        assert all(len(tok) == 64 and 0.0 <= min(tok) and max(tok) <= 1.0 for tok in rec.x)


def test_numpy_split_is_seeded_and_never_shares_images():
    data = load_split(seed=4, n_train=300, n_test=200)
    assert len(data.X_train) == 300 and len(data.X_test) == 200
    for X, y in zip(data.X_train + data.X_test, data.y_train + data.y_test, strict=True):
        assert X.shape == (len(y), 64) and X.dtype == np.float64 and y.dtype == np.int64
        assert 3 <= len(y) <= 10 and X.min() >= 0.0 and X.max() <= 1.0
    train = set(np.concatenate(data.train_images).tolist())
    test = set(np.concatenate(data.test_images).tolist())
    assert not train & test
    pool_train, pool_test = image_pools(4, 0.5)
    assert train <= set(pool_train.tolist()) and test <= set(pool_test.tolist())
    assert len(pool_train) + len(pool_test) == 1797
    again = load_split(seed=4, n_train=300, n_test=200)
    assert all(np.array_equal(a, b) for a, b in zip(data.X_train, again.X_train, strict=True))
    assert all(np.array_equal(a, b) for a, b in zip(data.y_test, again.y_test, strict=True))


def test_splits_differ_but_share_the_chain():
    parts = splits(3, seed=10, n_train=20, n_test=20)
    assert [p.seed for p in parts] == [10, 11, 12]
    assert all(np.array_equal(p.chain.transition, parts[0].chain.transition) for p in parts)
    assert not np.array_equal(np.concatenate(parts[0].y_train), np.concatenate(parts[1].y_train))
    assert not set(np.concatenate(parts[0].train_images)) == set(
        np.concatenate(parts[1].train_images)
    )


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="max_length must be"):
        load_split(min_length=5, max_length=4)
    with pytest.raises(ValueError, match="split must be"):
        get("digit-strings", split="validation")
    with pytest.raises(ValueError, match="test_fraction"):
        load_split(test_fraction=1.0)
