"""Bounded support set: memory flat under a budget, block norms exact after every eviction."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from streammkl.core import OnlineMKL, kernels, regularizers, schedules
from tests.naive import support_block_norms


def _model(budget, policy="oldest"):
    return OnlineMKL(
        kernels=(kernels.Linear(implicit=True), kernels.RBF(0.5), kernels.RBF(0.05),
                 kernels.Polynomial(2)),
        regularizer=regularizers.SquaredGroupLasso(1e-3), schedule=schedules.InvSqrt(1.0),
        budget=budget, budget_policy=policy,
    )  # fmt: skip


def _data(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    return X, np.where(X[:, 0] * X[:, 1] + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)


def _state_bytes(model):
    S = model._state
    return sum(a.nbytes for a in vars(S).values() if isinstance(a, np.ndarray))


@pytest.mark.parametrize("policy", ["oldest", "smallest"])
def test_norms_stay_exact_through_evictions(policy):
    X, Y = _data(3000, seed=1)
    model = _model(64, policy)
    for i, (x, y) in enumerate(zip(X, Y, strict=True)):
        model.learn(x, y)
        if i % 500 == 499:
            np.testing.assert_allclose(model.block_norms, support_block_norms(model), rtol=1e-8,
                                       atol=1e-10)  # fmt: skip
    assert model.n_support == 64
    assert model._state.counters[1] > 1000  # many evictions happened


def test_smallest_policy_evicts_the_least_contributing_pair():
    X, Y = _data(200, seed=2)
    model = _model(16, "smallest")
    for x, y in zip(X, Y, strict=True):
        model.learn(x, y)
    S = model._state
    contrib = [
        sum((S.scale[m] * S.coef[m, s]) ** 2 * S.kself[s, m] for m in range(4))
        * (S.sv[s] @ S.sv[s])
        for s in range(16)
    ]
    before = dict(zip(S.age[:16].tolist(), contrib, strict=True))
    victim_age = min(before, key=before.get)
    x = np.full(5, 3.0)  # a point far away that surely violates the margin
    model.learn(x, -np.sign(model.decision(x)) or 1.0)
    assert victim_age not in S.age[:16].tolist()


def test_memory_is_flat_with_a_budget():
    X, Y = _data(100_000, seed=3)
    model = _model(512)
    model.learn_many(X[:1000], Y[:1000])
    bytes_1k = _state_bytes(model)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    for lo in range(1000, 100_000, 9900):
        model.learn_many(X[lo : lo + 9900], Y[lo : lo + 9900])
    grown = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    assert model.t == 100_000 and model.n_support == 512
    assert _state_bytes(model) == bytes_1k
    assert grown < 64 * 1024  # no allocation that survives the rounds
    np.testing.assert_allclose(model.block_norms, support_block_norms(model), rtol=1e-7)


def test_unbounded_support_grows_by_one_pair_per_update():
    X, Y = _data(500)
    model = _model(None)
    updates = 0
    for x, y in zip(X, Y, strict=True):
        updates += model.learn(x, y) > 0  # hinge: an update iff the loss is positive
    assert model.n_support == updates
