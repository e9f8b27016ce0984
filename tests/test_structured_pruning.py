"""B1 projection bound (structured/pruning.py): the same scores, bit for bit, with fewer pairs read.

The plain path is the one every kernel takes (``support_expansion``: one inner product per
support pair); ``pruning.MIN_SUPPORT`` set out of reach keeps a labeler on it.
"""

from __future__ import annotations

import numpy as np
import pytest

from simulators.digit_strings import load_split
from streammkl.core import _numba as nb
from streammkl.core import compiled as cnb
from streammkl.core import kernels, regularizers, schedules
from streammkl.structured import SequenceLabeler, pruning

H = 2.1  # about 95% zeros among pairs of digit-strings characters (d = 64)


@pytest.fixture(scope="module")
def digits():
    split = load_split(0, n_train=30, n_test=20)
    return list(zip(split.X_train, split.y_train, strict=True)), split.X_test


def _labeler(kern, budget=None, policy="oldest"):
    return SequenceLabeler(
        kernels=kern, regularizer=regularizers.SquaredGroupLasso(1e-3),
        schedule=schedules.InvSqrt(1.0), budget=budget, budget_policy=policy,
    )  # fmt: skip


def _train(model, data, epochs=3):
    for e in range(epochs):
        for i in np.random.default_rng(e).permutation(len(data)):
            model.learn_one(*data[i])
    return model


def _plain_scores(model, X):
    """Block scores with every implicit block on ``support_expansion`` (no bound)."""
    J, L, S = model._joint, model._joint.layout, model._state
    T, M, K = X.shape[0], len(model.kernels), S.w.shape[0]
    scores, xsqs = np.zeros((T, M, K)), np.zeros((T, L.n_views))
    cnb.sequence_scores(
        X, L.kinds, L.kp, L.view_of, L.masks, L.view_full, L.ex_blocks, L.im_blocks,
        L.ex_off, L.ex_kind, L.ex_norm, L.phi_src, L.rff_wt, L.rff_b,
        S.w, S.scale, S.sx, S.ssq, S.sv, S.coef, S.n_support, np.zeros((T, L.width)), scores,
        xsqs, np.zeros(L.n_views), L.im_blocks[:0], J.pruning.basis, J.pruning.sproj,
        np.zeros(pruning.RANK),
    )  # fmt: skip
    return scores


def _skipped_fraction(model, X):
    """Share of (position, support pair) whose projected distance exceeds h (numpy)."""
    P, S = model._joint.pruning, model._state
    v = P.views[0]
    zp = X @ P.basis[v].T
    sp = S.sx[: S.n_support] @ P.basis[v].T
    return float(np.mean(np.sum((zp[:, None] - sp[None]) ** 2, axis=2) > H * H))


def test_pruned_scores_equal_plain_scores_bit_for_bit(digits):
    data, X_test = digits
    model = _train(_labeler((kernels.Linear(normalize=True), kernels.B1Spline(h=H))), data)
    assert model._joint.pruning.pruned.tolist() == [1]
    assert model.n_support >= pruning.MIN_SUPPORT
    for X in X_test:
        fast = model._joint.block_scores(X)[0]
        np.testing.assert_array_equal(fast, _plain_scores(model, X))
    assert model._joint.pruning.fitted_at > 0
    assert np.abs(fast[:, 1]).max() > 0  # the B1 block scores something
    assert _skipped_fraction(model, np.vstack(X_test)) > 0.5  # and the bound skips most pairs


@pytest.mark.parametrize(
    "kern, budget, policy",
    [
        ((kernels.Linear(normalize=True), kernels.B1Spline(h=H)), None, "oldest"),
        ((kernels.Linear(normalize=True), kernels.B1Spline(h=H)), 90, "oldest"),
        ((kernels.B1Spline(h=H),), 90, "smallest"),
        ((kernels.Linear(), kernels.B1Spline(h=1.8, features=range(8, 56))), None, "oldest"),
    ],
    ids=["L+B1", "L+B1-budget-oldest", "B1-budget-smallest", "B1-masked-view"],
)
def test_training_with_the_bound_is_bit_identical(digits, monkeypatch, kern, budget, policy):
    """A whole run (support growth, capacity growth, basis refits, evictions that refill slots)
    ends in the same state with and without the bound."""
    data, X_test = digits
    fast = _train(_labeler(kern, budget, policy), data)
    assert fast._joint.pruning.pruned.size == 1 and fast._joint.pruning.fitted_at > 0
    with monkeypatch.context() as mp:
        mp.setattr(pruning, "MIN_SUPPORT", 10**9)
        slow = _train(_labeler(kern, budget, policy), data)
        assert slow._joint.pruning.fitted_at == 0
        plain = [slow.predict_one(X) for X in X_test]
    assert fast.digest() == slow.digest()
    assert [fast.predict_one(X) for X in X_test] == plain
    if budget is not None:
        assert fast._state.age.max() > budget  # slots were refilled


def test_only_wide_b1_only_views_are_pruned(digits):
    data, _ = digits
    cases = [
        ((kernels.B1Spline(h=H), kernels.RBF(0.1)), []),  # RBF pays for the inner products
        ((kernels.B1Spline(h=H, features=range(20)),), []),  # 20 < 2 * RANK features
        ((kernels.RBF(0.1), kernels.B1Spline(h=H, features=range(40))), [1]),
        ((kernels.Linear(),), []),  # no kernelized block at all
    ]
    for kern, pruned in cases:
        model = _train(_labeler(kern), data[:5], epochs=1)
        P, L = model._joint.pruning, model._joint.layout
        assert P.pruned.tolist() == pruned
        assert P.views.tolist() == sorted({int(L.view_of[m]) for m in pruned})


def _edge_case(rng, h, d=40, r=16):
    """A query, support inputs at distances h(1 + delta) from it, half of them along the
    basis (so the projected distance equals the distance), and an orthonormal basis."""
    U = np.linalg.qr(rng.normal(size=(d, r)))[0].T
    z = rng.normal(size=d)
    deltas = np.array([-1e-6, -1e-12, 0.0, 1e-15, 1e-12, 1e-9, 1e-6, 0.5, -0.5])
    dirs = [U[0], U[3], rng.normal(size=d)]
    S = np.array([z + h * (1 + dl) * u / np.linalg.norm(u) for dl in deltas for u in dirs])
    return z, S, U


def test_bound_keeps_exact_values_at_the_edge_of_the_support(monkeypatch):
    """Pairs at distance h(1 ± tiny) give the same sums as the plain path, compiled and not."""
    from streammkl.core._numba import scores

    py_funcs = {f: getattr(scores, f).py_func for f in ("support_dots", "dots_expansion")}
    rng = np.random.default_rng(3)
    h = 1.7
    z, S, U = _edge_case(rng, h)
    n, d = S.shape
    K = 3
    ssq = np.sum(S * S, axis=1)[:, None].copy()
    sv, coef = rng.normal(size=(n, K)), rng.uniform(0.5, 1.5, size=(1, n))
    coef[0, 5] = 0.0
    masks, full = np.ones((1, d)), np.ones(1, dtype=np.bool_)
    zsq = np.array([z @ z])
    sproj = (S @ U.T)[None].copy()
    dist = np.sqrt(np.sum((S - z) ** 2, axis=1))
    brute = (coef[0] * np.maximum(1 - dist / h, 0.0)) @ sv
    for plain_f, pruned_f in [
        (nb.support_expansion, nb.b1_pruned_expansion),  # compiled (may contract to FMA) ...
        (nb.support_expansion.py_func, nb.b1_pruned_expansion.py_func),  # ... and interpreted
    ]:
        if plain_f is nb.support_expansion.py_func:  # interpreted down to its helpers
            for name, f in py_funcs.items():
                monkeypatch.setattr(scores, name, f)
        plain, out = np.zeros((1, K)), np.zeros((1, K))
        plain_f(
            z, zsq, np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64), masks, full,
            np.array([nb.K_B1]), np.array([[h, 0.0, 0.0]]), S, ssq, sv, coef, n, plain,
        )  # fmt: skip
        np.testing.assert_allclose(plain[0], brute, rtol=1e-9, atol=1e-12)
        pruned_f(0, 0, z, zsq[0], U @ z, masks, full, h, S, ssq, sproj, sv, coef, n, out)
        np.testing.assert_array_equal(out, plain)
    # the bound is not vacuous here: the far pairs along the basis are skipped before pass 2
    lb = np.sum((U @ z - sproj[0]) ** 2, axis=1)
    assert np.sum(lb > h * h * (1 + 1e-9) + 1e-9 * (zsq[0] + ssq[:, 0])) >= 4


def test_sequence_scores_with_pruned_blocks_match_py_func(digits):
    data, X_test = digits
    model = _train(_labeler((kernels.Linear(normalize=True), kernels.B1Spline(h=H))), data)
    J, L, S = model._joint, model._joint.layout, model._state
    im_blocks, im_pruned, basis, sproj = J.pruning.arrays(S)
    X = X_test[0]
    T, M, K = X.shape[0], 2, S.w.shape[0]
    outs = []
    for f in (cnb.sequence_scores, cnb.sequence_scores.py_func):
        scores, phis, xsqs = np.zeros((T, M, K)), np.zeros((T, L.width)), np.zeros((T, 1))
        f(
            X, L.kinds, L.kp, L.view_of, L.masks, L.view_full, L.ex_blocks, im_blocks,
            L.ex_off, L.ex_kind, L.ex_norm, L.phi_src, L.rff_wt, L.rff_b,
            S.w, S.scale, S.sx, S.ssq, S.sv, S.coef, S.n_support, phis, scores, xsqs,
            np.zeros(1), im_pruned, basis, sproj, np.zeros(pruning.RANK),
        )  # fmt: skip
        outs.append((scores, phis, xsqs))
    assert im_pruned.tolist() == [1]
    for a, b in zip(*outs, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)
