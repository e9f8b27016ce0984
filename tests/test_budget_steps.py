"""One budget step at a time against brute force: what merging and projection change in theta,
that the step reports it (and corrects the scores it is given), and that the merge is the best
one on the segment and no worse than removal."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from streammkl.core import OnlineMKL, kernels, losses, regularizers
from streammkl.core import _numba as nb
from streammkl.core.budget import policy_code
from tests.naive import best_merge_loss, block_terms, expansion_sqdist, support_block_norms

BANK = (
    kernels.Linear(implicit=True, features=(0, 1)), kernels.RBF(0.5),
    kernels.RBF(2.0, features=(1, 2)), kernels.Polynomial(2), kernels.B1Spline(3.0),
)  # fmt: skip


def _full(bank, loss, budget, n=400, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    if loss.multiclass:
        Y = ((X[:, 0] * X[:, 1] > 0).astype(float) + (X[:, 2] > 0.5)).astype(float)
    else:
        Y = np.where(np.sin(2 * X[:, 0]) + X[:, 1] ** 2 > 0.8, 1.0, -1.0)
    model = OnlineMKL(kernels=bank, loss=loss, budget=budget, budget_policy="merge",
                      regularizer=regularizers.SquaredGroupLasso(1e-3))  # fmt: skip
    model.learn_many(X, Y)
    assert model.n_support == budget
    return model


def _step(model, policy, x):
    """One budget step of ``policy`` on a copy of ``model`` (before inserting x): the copy, the
    step's report and the scores at x it corrected."""
    after = copy.deepcopy(model)
    after.budget_policy = policy  # the state must carry what the policy needs
    after._policy = policy_code(policy)
    after._state.sync_gram(after._layout, policy == "project")
    before = copy.deepcopy(after)
    L, S = after._layout, after._state
    scores = after.block_decisions(x)
    report = nb.budget_step(
        after._policy, x, L.masks @ (x * x), L.im_blocks, L.view_of, L.masks, L.view_full,
        L.kinds, L.kp, S.sx, S.ssq, S.sv, S.coef, S.kself, S.age, S.counters, S.scale,
        S.norms, S.gram, scores,
    )  # fmt: skip
    after._refresh_args()
    return before, after, report, scores


def _lost(before, after):
    """sum_m ||theta'_m - theta_m||^2 by brute force."""
    return sum(
        expansion_sqdist(before.kernels[m], block_terms(before, m), block_terms(after, m))
        for m in before._layout.im_blocks
    )


@pytest.mark.parametrize("policy", ["oldest", "smallest", "merge", "project"])
@pytest.mark.parametrize("loss", [losses.Hinge(), losses.MulticlassHinge(), losses.Softmax()])
def test_a_step_reports_its_change_and_corrects_the_scores(policy, loss):
    model = _full(BANK, loss, 24)
    x = np.array([0.4, -0.2, 1.1])
    before, after, (slot, nt, tx, tsq, tc, tv, dense), scores = _step(model, policy, x)
    assert after._state.coef[:, slot].tolist() == [0.0] * 5  # the freed slot holds nothing
    np.testing.assert_allclose(tsq[:nt], (tx[:nt] ** 2) @ after._layout.masks.T, rtol=1e-12)
    np.testing.assert_allclose(after.block_norms, support_block_norms(after), rtol=1e-7)
    np.testing.assert_allclose(scores, after.block_decisions(x), rtol=1e-10, atol=1e-12)
    S = after._state
    for m in after._layout.im_blocks:  # theta + reported change == theta'
        X, a, V = block_terms(before, m)
        keep = np.flatnonzero(np.arange(24) != slot) if dense.shape[1] else np.zeros(0, int)
        reported = (
            np.vstack([X, tx[:nt], S.sx[keep]]),
            np.concatenate([a, tc[:nt, m], dense[m, keep] if dense.shape[1] else []]),
            np.vstack([V, tv[:nt], S.sv[keep]]),
        )
        gap = expansion_sqdist(before.kernels[m], reported, block_terms(after, m))
        assert abs(gap) <= 1e-10 * max(after.block_norms[m] ** 2, 1e-12)
    assert nt == 1 or (policy == "merge" and nt == 3)  # a removal (or projection), or a merge


def test_merge_is_the_best_single_pair_on_the_segment():
    """One Gaussian block, binary outputs: the merged pair lies on the segment between the two
    it replaces and loses as little as a free search of the merge point over R^2 finds."""
    gauss = kernels.RBF(2.0)
    model = _full((gauss,), losses.Hinge(), 32, d=2, seed=1)
    x = np.array([0.1, 0.2])
    before, after, (slot, nt, *_), _ = _step(model, "merge", x)
    assert nt == 3
    S0, S1 = before._state, after._state
    i = int(np.flatnonzero(S1.age != S0.age)[0])  # the slot that received the merged pair
    j = int(slot)
    xi, xj, z = S0.sx[i], S0.sx[j], S1.sx[i]
    h = float((z - xj) @ (xi - xj) / ((xi - xj) @ (xi - xj)))
    assert 0.0 <= h <= 1.0
    np.testing.assert_allclose(z, h * xi + (1 - h) * xj, atol=1e-12)
    ai, aj = S0.scale[0] * S0.coef[0, i], S0.scale[0] * S0.coef[0, j]
    best = best_merge_loss(gauss, xi, xj, ai, aj, S0.sv[i])
    assert _lost(before, after) == pytest.approx(best, rel=1e-6, abs=1e-14)
    # the partner: within 2 % of the best partner of pair i (ranked by the lookup table)
    candidates = [
        best_merge_loss(gauss, xi, S0.sx[t], ai, S0.scale[0] * S0.coef[0, t], S0.sv[i])
        for t in range(32)
        if t != i and S0.sv[t] @ S0.sv[i] > 0
    ]
    assert _lost(before, after) <= 1.02 * min(candidates) + 1e-15


@pytest.mark.parametrize("loss", [losses.Hinge(), losses.MulticlassHinge(), losses.Softmax()])
def test_merge_and_projection_lose_less_than_removing_the_same_amount(loss):
    """Over many states: a merge never loses more than removing the smallest pair; a projection
    never more than removing the pair it projects out (and it is orthogonal to the others)."""
    model = _full(BANK, loss, 20, n=200, seed=2)
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 3))
    Y = (X[:, 0] > 0).astype(float) if loss.multiclass else np.sign(X[:, 0])
    for x, y in zip(X, Y, strict=True):
        smallest = _step(model, "smallest", x)
        removal = _lost(smallest[0], smallest[1])
        merged = _step(model, "merge", x)
        assert _lost(merged[0], merged[1]) <= removal * (1 + 1e-9) + 1e-14
        before, after, (slot, *_), _ = _step(model, "project", x)
        S0 = before._state
        removed = sum(  # removing the same pair instead
            (S0.scale[m] * S0.coef[m, slot]) ** 2 * S0.kself[slot, m] * (S0.sv[slot] @ S0.sv[slot])
            for m in before._layout.im_blocks
        )
        assert _lost(before, after) <= removed * (1 + 1e-9) + 1e-14
        model.learn(x, y)


def test_projection_change_is_orthogonal_to_the_pairs_that_stay():
    """Replacing ``a_r psi_r`` by ``a_r sum_t d_t psi_t`` with ``d`` solving the loaded normal
    equations ``(G + eps diag G) d = G[:, r]`` leaves ``<psi_t, theta' - theta> =
    -a_r eps G_tt d_t`` for every pair t that stays: orthogonal up to the loading eps = 1e-6."""
    gauss = (kernels.RBF(0.7), kernels.RBF(3.0, features=(0,)))
    model = _full(gauss, losses.MulticlassHinge(), 16, seed=4)
    before, after, (slot, *_), _ = _step(model, "project", np.array([0.3, 0.3, -0.5]))
    keep = np.arange(16) != slot
    for m in range(2):
        X0, a0, V0 = block_terms(before, m)
        X1, a1, V1 = block_terms(after, m)
        G10 = before.kernels[m].gram(X1[keep], X0) * (V1[keep] @ V0.T)
        G11 = before.kernels[m].gram(X1[keep], X1) * (V1[keep] @ V1.T)
        inner = G11 @ a1 - G10 @ a0  # <psi_t, theta' - theta> for every pair t that stays
        a_r = a0[slot]
        d = (a1[keep] - a0[keep]) / a_r
        expected = -a_r * 1e-6 * np.diag(G11[:, keep]) * d
        assert np.abs(d).max() > 0.1  # a real projection, not a removal
        np.testing.assert_allclose(inner, expected, rtol=1e-4, atol=1e-12 * abs(a_r))
        assert after._state.coef[m, slot] == 0.0
