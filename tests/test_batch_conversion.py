"""C <-> lambda (eq. 6, with its erratum) and the hindsight comparator vs the online learner."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from streammkl.batch import (
    SpicyMKL,
    c_to_lambda,
    fit_window_comparator,
    lambda_to_c,
    lambda_to_squared_c,
)
from streammkl.core import OnlineMKL, kernels, losses, regularizers, schedules


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    with threadpool_limits(1):
        yield


def _data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    f = X[:, 0] - 0.5 * X[:, 1] + 0.1 * rng.normal(size=n)
    return X, f


BANK = [kernels.Linear(features=[j], name=f"lin{j}") for j in range(5)] + [
    kernels.Linear(name="lin_all")
]
IMPLICIT = [kernels.Linear(features=[j], implicit=True, name=f"lin{j}") for j in range(3)] + [
    kernels.RBF(0.5),
    kernels.Polynomial(2),
]


@pytest.mark.parametrize("loss", ["logistic", "hinge", "squared", "epsilon_insensitive"])
def test_block_l1_and_squared_problems_share_the_solution(loss):
    X, f = _data()
    y = np.sign(f) if loss in ("logistic", "hinge") else f
    n, C = len(y), 0.3
    common = dict(
        kernels=IMPLICIT,
        loss=loss,
        normalize=None,
        ridge=0.0,
        fit_intercept=False,
        tol=1e-11,
        max_iter=300,
    )
    block = SpicyMKL(C=C, **common).fit(X, y)
    S = block.block_norms_.sum()
    lam = c_to_lambda(C, block.block_norms_, n)
    assert lam == pytest.approx(C / (n * S))
    squared = SpicyMKL(C=lambda_to_squared_c(lam, n), regularizer="squared_l1", **common).fit(X, y)
    # same optimal value: the block 1-norm solution is optimal for the squared problem too
    at_block = block._loss.primal(block.decision_function(X), y) + 0.5 * n * lam * S**2
    assert squared.objective_ == pytest.approx(at_block, rel=1e-9)
    # and the same solution (piecewise-linear losses may have a non-unique one: looser)
    tol = 1e-6 if loss in ("logistic", "squared") else 1e-4
    np.testing.assert_allclose(squared.block_norms_, block.block_norms_, rtol=tol, atol=tol / 10)
    np.testing.assert_allclose(squared.decision_function(X), block.decision_function(X), atol=tol)
    # the way back
    assert lambda_to_c(lam, squared.block_norms_, n) == pytest.approx(C, rel=1e-6)
    # the comparator solves the same (mean-loss) objective directly
    value, res = fit_window_comparator(X, y, IMPLICIT, loss, lam, tol=1e-11, return_result=True)
    np.testing.assert_allclose(res.block_norms, block.block_norms_, rtol=tol, atol=tol / 10)
    assert value == pytest.approx(
        block._loss.primal(block.decision_function(X), y) / n + lam / 2 * S**2, rel=1e-9
    )
    if loss in ("logistic", "squared"):  # strictly convex: the solution moves with C
        # ERRATUM check: eq. 6 as printed (C~ = C * S) is another problem with another solution
        printed = SpicyMKL(C=C * S, regularizer="squared_l1", **common).fit(X, y)
        assert abs(printed.block_norms_.sum() - S) > 0.05 * S


@pytest.mark.parametrize(
    ("loss", "target"),
    [(losses.Squared(), "real"), (losses.Hinge(), "sign"), (losses.Logistic(), "sign")],
)
def test_comparator_is_the_online_learners_optimum(loss, target):
    X, f = _data()
    y = f if target == "real" else np.sign(f)
    lam = 0.05
    best = fit_window_comparator(X, y, BANK, loss, lam, tol=1e-10)
    learner = OnlineMKL(
        kernels=BANK,
        loss=loss,
        regularizer=regularizers.SquaredGroupLasso(lam),
        schedule=schedules.InvSqrt(0.5),
    )
    gaps = []
    for _ in range(3):
        for _ in range(100):
            learner.learn_many(X, y)
        objective = np.mean(learner.losses_many(X, y)) + learner.regularization_value()
        assert objective >= best * (1 - 1e-12)  # a valid hindsight comparator: a lower bound
        gaps.append((objective - best) / best)
    assert gaps[-1] < 0.03  # and the online learner converges to it (1/N scaling right)
    assert gaps[-1] < gaps[0]
    # a comparator off by the 1/N factor would be nowhere near the online objective
    n = len(y)
    for wrong in (lam * n, lam / n):
        other = fit_window_comparator(X, y, BANK, loss, wrong, tol=1e-8)
        assert abs(other - best) > 0.1 * best


@pytest.mark.parametrize(
    "reg",
    [
        regularizers.SquaredGroupLasso(0.02),
        regularizers.GroupLasso(0.02),
        regularizers.GroupLq(0.02, 1.5),
        regularizers.ElasticNetMKL(0.02, 0.3),
        regularizers.L2(0.02),
    ],
)
def test_comparator_regularizers_scale_like_the_online_objective(reg):
    X, f = _data(seed=1)
    y = np.sign(f)
    value, res = fit_window_comparator(
        X, y, IMPLICIT, losses.Logistic(), None, regularizer=reg, tol=1e-11, return_result=True
    )
    grams = np.stack([k.gram(X) for k in IMPLICIT])

    def online_objective(alpha):  # mean loss + the core regularizer's own value
        z = np.einsum("mij,mj->i", grams, alpha)
        norms = np.sqrt(np.maximum(np.einsum("mi,mij,mj->m", alpha, grams, alpha), 0))
        return np.mean(np.logaddexp(0, -y * z)) + reg.value_norms(norms)

    assert online_objective(res.alpha) == pytest.approx(value, rel=1e-10)
    rng = np.random.default_rng(0)
    for _ in range(20):  # convex problem: no direction improves on the returned optimum
        step = 1e-3 * rng.normal(size=res.alpha.shape)
        assert online_objective(res.alpha + step) >= value * (1 - 1e-9)


def test_comparator_rejects_what_it_cannot_solve():
    X, f = _data()
    with pytest.raises(ValueError, match="Huber"):
        fit_window_comparator(X, f, BANK, losses.Huber(), 0.1)
    with pytest.raises(ValueError, match=r"\{-1, \+1\}"):
        fit_window_comparator(X, f, BANK, losses.Hinge(), 0.1)
    with pytest.raises(ValueError, match="disagrees"):
        fit_window_comparator(
            X, f, BANK, losses.Squared(), 0.1, regularizer=regularizers.GroupLasso(0.2)
        )
    with pytest.raises(ValueError, match="OverlappingGroupLasso"):
        fit_window_comparator(
            X,
            f,
            BANK,
            losses.Squared(),
            None,
            regularizer=regularizers.OverlappingGroupLasso([[0, 1]], 0.1),
        )
    with pytest.raises(ValueError, match="all zero"):
        c_to_lambda(1.0, np.zeros(3), 10)
