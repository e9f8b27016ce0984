"""Bounded support set under every budget policy: memory flat, block norms exact after every
budget step (against a brute-force recomputation), state round trips exact."""

from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pytest

from streammkl.core import OnlineMKL, kernels, losses, regularizers, schedules
from tests.naive import support_block_norms, support_gram

POLICIES = ["oldest", "smallest", "merge", "project"]


def _model(budget, policy="oldest", loss=None, bank=None):
    return OnlineMKL(
        kernels=bank or (kernels.Linear(implicit=True), kernels.RBF(0.5), kernels.RBF(0.05),
                         kernels.Polynomial(2)),
        loss=loss, regularizer=regularizers.SquaredGroupLasso(1e-3),
        schedule=schedules.InvSqrt(1.0), budget=budget, budget_policy=policy,
    )  # fmt: skip


def _data(n, seed=0, d=5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, np.where(X[:, 0] * X[:, 1] + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)


def _state_bytes(model):
    S = model._state
    return sum(a.nbytes for a in vars(S).values() if isinstance(a, np.ndarray))


@pytest.mark.parametrize("policy", POLICIES)
def test_norms_stay_exact_through_budget_steps(policy):
    X, Y = _data(3000, seed=1)
    model = _model(64, policy)
    for i, (x, y) in enumerate(zip(X, Y, strict=True)):
        model.learn(x, y)
        if i % 500 == 499:
            np.testing.assert_allclose(model.block_norms, support_block_norms(model), rtol=1e-8,
                                       atol=1e-10)  # fmt: skip
    assert model.n_support == 64
    assert model._state.counters[1] > 1000  # many budget steps happened


MULTI_BANK = (
    kernels.Linear(implicit=True, features=(0, 1)), kernels.RBF(0.5),
    kernels.RBF(2.0, features=(1, 2)), kernels.Polynomial(2), kernels.B1Spline(3.0),
    kernels.RBF(1.0, n_components=8),
)  # fmt: skip


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("loss", [losses.MulticlassHinge(), losses.Softmax()])
def test_norms_stay_exact_with_vector_outputs_views_and_mixed_kernels(policy, loss):
    """Three classes: output directions of different pairs are not parallel (Softmax: never),
    so merges pick a shared direction; kernels on different feature views share the pairs."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(1200, 4))
    Y = (X[:, 0] * X[:, 1] > 0).astype(float) + (X[:, 2] > 0.5)
    model = OnlineMKL(kernels=MULTI_BANK, loss=loss, budget=40, budget_policy=policy,
                      regularizer=regularizers.SquaredGroupLasso(1e-3))  # fmt: skip
    for lo in range(0, 1200, 300):
        model.learn_many(X[lo : lo + 300], Y[lo : lo + 300])
        # (removing old, large pairs cancels digits: oldest drifts to ~2e-7, the others ~5e-9)
        np.testing.assert_allclose(model.block_norms, support_block_norms(model), rtol=1e-6,
                                   atol=1e-10)  # fmt: skip
    assert model.n_support == 40 and model.n_outputs == 3
    assert np.all(model.block_norms[:5] > 0)


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


@pytest.mark.parametrize(("policy", "budget", "n"), [
    ("oldest", 512, 100_000), ("smallest", 512, 100_000), ("merge", 512, 100_000),
    ("project", 64, 20_000),
])  # fmt: skip
def test_memory_is_flat_with_a_budget(policy, budget, n):
    X, Y = _data(n, seed=3)
    model = _model(budget, policy)
    model.learn_many(X[:1000], Y[:1000])
    assert model.n_support == budget
    bytes_full = _state_bytes(model)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    step = (n - 1000) // 10
    for lo in range(1000, n, step):
        model.learn_many(X[lo : lo + step], Y[lo : lo + step])
    grown = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    assert model.t == n and model.n_support == budget
    assert _state_bytes(model) == bytes_full  # no array grew past the budget
    assert max(a.shape[0] for a in (model._state.sx, model._state.sv)) == budget
    assert grown < 64 * 1024  # no allocation that survives the rounds
    np.testing.assert_allclose(model.block_norms, support_block_norms(model), rtol=1e-7)


def test_unbounded_support_grows_by_one_pair_per_update():
    X, Y = _data(500)
    model = _model(None)
    updates = 0
    for x, y in zip(X, Y, strict=True):
        updates += model.learn(x, y) > 0  # hinge: an update iff the loss is positive
    assert model.n_support == updates


@pytest.mark.parametrize("policy", POLICIES)
def test_state_round_trip_resumes_bit_for_bit(policy):
    X, Y = _data(900, seed=5)
    model = _model(48, policy)
    model.learn_many(X[:400], Y[:400])
    meta, arrays = model.to_state()
    copy = OnlineMKL.from_state(json.loads(json.dumps(meta)), arrays)
    assert copy.digest() == model.digest()
    model.learn_many(X[400:], Y[400:])
    copy.learn_many(X[400:], Y[400:])
    assert copy.digest() == model.digest()
    assert (arrays["gram"].size > 0) == (policy == "project")


def test_version_1_states_without_gram_still_load():
    X, Y = _data(300, seed=6)
    model = _model(32, "smallest")
    model.learn_many(X[:200], Y[:200])
    meta, arrays = model.to_state()
    meta["version"] = 1
    del arrays["gram"]
    copy = OnlineMKL.from_state(meta, arrays)
    assert copy.digest() == model.digest()
    copy.learn_many(X[200:], Y[200:])
    model.learn_many(X[200:], Y[200:])
    assert copy.digest() == model.digest()


def test_projection_keeps_each_blocks_gram_matrix_and_its_inverse():
    """G is the pairs' Gram matrix; Q inverts the loaded A = G + diag(1e-6 G_ss) well enough for
    every projection it may be asked (the relative residual of ``A_{-r} d = A[-r, r]`` with
    ``d = -Q[:, r] / Q[r, r]``), also for the rank-deficient linear and quadratic blocks, whose
    A has a condition number ~1e7 (there Q A - I is only ~1e-3: errors along directions that
    A barely sees)."""
    X, Y = _data(1500, seed=7)
    model = _model(40, "project")
    model.learn_many(X, Y)
    S = model._state
    for b, m in enumerate(model._layout.im_blocks):
        G = support_gram(model, m)
        np.testing.assert_allclose(S.gram[b, 0], G, rtol=1e-9, atol=1e-12)
        A = G + np.diag(np.diag(G) * 1e-6 + 1e-200)
        Q = S.gram[b, 1]
        for r in range(40):
            keep = np.arange(40) != r
            d = -Q[keep, r] / Q[r, r]
            res = A[np.ix_(keep, keep)] @ d - A[keep, r]
            assert np.linalg.norm(res) <= 1e-7 * np.linalg.norm(A[keep, r])


def test_projection_survives_runtime_kernel_changes_and_new_inputs():
    X, Y = _data(800, seed=8)
    model = _model(30, "project")
    model.learn_many(X[:300], Y[:300])
    model.add_kernel(kernels.RBF(1.5))
    model.remove_kernel("rbf(gamma=0.05)")
    model.learn_many(X[300:600], Y[300:600])
    wider = np.hstack([X[600:], np.random.default_rng(0).normal(size=(200, 2))])
    model.learn_many(wider, Y[600:])
    np.testing.assert_allclose(model.block_norms, support_block_norms(model), rtol=1e-7)
    S = model._state
    assert S.gram.shape == (4, 2, 30, 30)
    for b, m in enumerate(model._layout.im_blocks):
        np.testing.assert_allclose(S.gram[b, 0], support_gram(model, m), rtol=1e-9, atol=1e-12)


def test_merge_and_projection_keep_accuracy_that_removal_loses():
    """A curved rule, a narrow Gaussian kernel, a budget of 96 pairs (measured on these 4,000
    examples: unbounded 0.942; merge 0.941, project 0.942, smallest 0.831, oldest 0.584)."""
    rng = np.random.default_rng(9)
    X = rng.normal(size=(4000, 2))
    Y = np.where(np.sin(2.5 * X[:, 0]) + 0.5 * X[:, 1] ** 2 > 0.5, 1.0, -1.0)
    acc = {}
    for policy in (*POLICIES, None):
        model = OnlineMKL(kernels=(kernels.RBF(2.0),), loss=losses.Hinge(), fit_intercept=True,
                          budget=96 if policy else None, budget_policy=policy or "merge",
                          regularizer=regularizers.SquaredGroupLasso(1e-4))  # fmt: skip
        _, p = model.learn_many(X, Y)
        acc[policy] = float(np.mean(np.sign(p[:, 0]) == Y))
    assert acc[None] > 0.93
    assert acc["merge"] > acc[None] - 0.005 and acc["project"] > acc[None] - 0.005
    assert acc["smallest"] < acc[None] - 0.08 and acc["oldest"] < acc[None] - 0.3


def test_budget_policy_names_are_checked():
    with pytest.raises(ValueError, match="budget policy"):
        OnlineMKL(budget=10, budget_policy="merged")
