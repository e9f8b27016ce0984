"""Mixing kernelized blocks: support sets united, weighted, cut back to the budget
(core.support_merge through core.mixing.merge), checked against brute-force kernel sums."""

from __future__ import annotations

import numpy as np
import pytest

from streammkl.core import OnlineMKL, kernels, losses, regularizers, schedules
from streammkl.core import _numba as nb
from streammkl.core.mixing import MemberRound, merge
from streammkl.core.support_merge import pairs_of, unite
from tests.test_numba_parity import _both

BANK = (kernels.RBF(0.5), kernels.RBF(2.0, features=(0, 1), name="rbf01"),
        kernels.Linear(implicit=True))  # fmt: skip
POLICIES = ["merge", "project", "smallest", "oldest"]


def _stream(n, seed, d=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, np.where(X[:, 0] * X[:, 1] + 0.3 * X[:, 2] > 0, 1.0, -1.0)


def _kernel(kernel, A, B):
    """k(A_i, B_j) by numpy, from the kernel's own parameters (no compiled code)."""
    cols = list(kernel.features) if kernel.features is not None else slice(None)
    A, B = A[:, cols], B[:, cols]
    if isinstance(kernel, kernels.RBF):
        sq = (A * A).sum(1)[:, None] + (B * B).sum(1)[None, :] - 2 * A @ B.T
        return np.exp(-kernel.gamma * np.maximum(sq, 0.0))
    return A @ B.T


def _brute(model):
    """Per-block (scaled coefficients, inputs, directions) of a model's saved state."""
    _, arrays = model.to_state()
    coef = arrays["coef"] * arrays["scale"][:, None]
    return coef, arrays["sx"], arrays["sv"]


def _brute_norms(model):
    coef, sx, sv = _brute(model)
    V = sv @ sv.T
    return np.array([np.sqrt(max(coef[m] @ (_kernel(k, sx, sx) * V) @ coef[m], 0.0))
                     for m, k in enumerate(model.kernels)])  # fmt: skip


def _brute_scores(kernels_, coef, sx, sv, X):
    """f_m(x) = sum_s coef[m, s] k_m(x_s, x) v_s for every probe x: (n_probe, M, K)."""
    return np.stack([(_kernel(k, X, sx) * coef[m]) @ sv for m, k in enumerate(kernels_)], 1)


def _members(cfg, parts, base_rows=80, seed=0):
    base = OnlineMKL(**cfg)
    X, Y = _stream(base_rows + sum(parts), seed)
    base.learn_many(X[:base_rows], Y[:base_rows])
    rounds, models, a = [], [], base_rows
    for i, n in enumerate(parts):
        member = OnlineMKL.from_state(*base.to_state())
        member.learn_many(X[a : a + n], Y[a : a + n])
        a += n
        rounds.append(MemberRound(f"m{i}", n, *member.to_state()))
        models.append(member)
    return base, rounds, models


def test_the_union_is_the_example_weighted_function_pointwise_even_after_members_budget_steps():
    """Members that merged the base's pairs under their budget: the base's originals are missing
    from them (matched by stamp and bytes, not by value), so the union is still exactly
    f_base + sum_i (n_i / N) (f_i - f_base) on probe points."""
    cfg = dict(kernels=BANK, budget=40, budget_policy="merge")
    base, _, models = _members(cfg, [120, 200])
    assert all(m.n_support == 40 for m in models)  # both members made room by merging pairs
    layout = models[0]._layout
    keys = base.feature_keys
    P = [pairs_of(m, keys, layout, 1) for m in (base, *models)]
    union, _ = unite([(0.0, P[0]), (120 / 320, P[1]), (200 / 320, P[2])], 10**6)
    assert len(union) < sum(len(p) for p in P)  # the base's surviving pairs were matched
    probes = _stream(50, 7)[0]
    got = _brute_scores(BANK, union.coef, union.sx, union.sv, probes)
    f = [np.stack([m.block_decisions(x) for x in probes]) for m in (base, *models)]
    want = f[0] + 120 / 320 * (f[1] - f[0]) + 200 / 320 * (f[2] - f[0])
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_merged_blocks_are_the_weighted_function_then_the_prox():
    """No budget: the merged model's per-block scores are the weighted function scaled by the
    prox (L2 with a constant step: 1 / (1 + eta lambda)), and a stale member's change is taken
    from its own base."""
    cfg = dict(kernels=BANK, loss=losses.Logistic(), schedule=schedules.Constant(0.2),
               regularizer=regularizers.L2(0.5))  # fmt: skip
    base, rounds, models = _members(cfg, [60, 90])
    merged = merge(*base.to_state(), rounds)
    probes = _stream(40, 8)[0]
    f = [np.stack([m.block_decisions(x) for x in probes]) for m in (base, *models)]
    want = (f[0] + 0.4 * (f[1] - f[0]) + 0.6 * (f[2] - f[0])) / (1 + 0.2 * 0.5)
    got = np.stack([merged.block_decisions(x) for x in probes])
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(merged.block_norms, _brute_norms(merged), rtol=1e-9)
    # m0 is late: merged next round from the old base, with a fresh m1 from the new one
    X, Y = _stream(100, 9)
    m1 = OnlineMKL.from_state(*merged.to_state())
    m1.learn_many(X[:50], Y[:50])
    late = MemberRound("m0", 60, rounds[0].meta, rounds[0].arrays, since=base.to_state())
    again = merge(*merged.to_state(), [late, MemberRound("m1", 50, *m1.to_state())])
    g = [np.stack([m.block_decisions(x) for x in probes]) for m in (merged, m1)]
    want = (g[0] + 60 / 110 * (f[1] - f[0]) + 50 / 110 * (g[1] - g[0])) / (1 + 0.2 * 0.5)
    got = np.stack([again.block_decisions(x) for x in probes])
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("policy", POLICIES)
def test_budget_holds_norms_are_exact_and_every_member_computes_the_same_digest(policy):
    cfg = dict(kernels=BANK, budget=48, budget_policy=policy, fit_intercept=True)
    base, rounds, _ = _members(cfg, [150, 100, 70], seed=2)
    stats: dict[str, float] = {}
    merged = merge(*base.to_state(), rounds, stats)
    assert merged.n_support <= 48 < stats["support_union"]
    assert stats["budget_steps"] == stats["support_union"] - merged.n_support
    np.testing.assert_allclose(merged.block_norms, _brute_norms(merged), rtol=1e-9, atol=1e-12)
    assert (merged.block_norms > 0).all()
    for order in ([2, 0, 1], [1, 2, 0]):  # whatever order the deltas arrive in
        assert merge(*base.to_state(), [rounds[i] for i in order]).digest() == merged.digest()
    copy = OnlineMKL.from_state(*merged.to_state())  # a member that reloaded the merged model
    assert copy.digest() == merged.digest()
    X, Y = _stream(60, 3)  # it learns on as any model, norms still exact
    merged.learn_many(X, Y)
    copy.learn_many(X, Y)
    assert copy.digest() == merged.digest()
    np.testing.assert_allclose(merged.block_norms, _brute_norms(merged), rtol=1e-7)


def test_a_base_pair_every_member_dropped_leaves_the_set_and_ages_stay_unique():
    cfg = dict(kernels=BANK, budget=30, budget_policy="oldest")
    base, rounds, models = _members(cfg, [80, 80], base_rows=40)
    merged = merge(*base.to_state(), rounds)
    _, arrays = merged.to_state()
    base_ages = set(base.to_state()[1]["age"].tolist())
    kept = [set(m.to_state()[1]["age"].tolist()) & base_ages for m in models]
    assert kept == [set(), set()]  # both members evicted every base pair ...
    assert not set(arrays["age"].tolist()) & base_ages  # ... so the merged set has none
    assert len(set(arrays["age"].tolist())) == merged.n_support
    assert arrays["counters"][1] > arrays["age"].max()


def test_support_loops_match_python():
    base, rounds, _ = _members(dict(kernels=BANK, budget=20, budget_policy="project"), [40, 40])
    merged = merge(*base.to_state(), rounds)
    L, S = merged._layout, merged._state.copy()
    n = S.n_support
    geo = (L.im_blocks, L.view_of, L.masks, L.view_full, L.kinds, L.kp)
    _both("pair_views", n, *geo, S.sx, S.ssq, S.kself)
    _both("support_sqnorms", n, *geo, S.sx, S.ssq, S.sv, S.coef, np.zeros(3))
    _both("move_pair", n - 1, 0, S.sx, S.ssq, S.sv, S.coef, S.kself, S.age, S.gram)
    _both("shrink_support", nb.B_PROJECT, n - 5, *geo, S.sx, S.ssq, S.sv, S.coef, S.kself,
          S.age, S.counters, S.scale, S.norms, S.gram)  # fmt: skip
    _both("shrink_support", nb.B_MERGE, n - 5, *geo, S.sx, S.ssq, S.sv, S.coef, S.kself,
          S.age, S.counters, S.scale, S.norms, np.zeros((2, 2, 0, 0)))  # fmt: skip
