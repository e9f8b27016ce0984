"""Kernelized <-> explicit equivalence (catches erratum E1 in the block-norm update)."""

from __future__ import annotations

import numpy as np
import pytest

from streammkl.core import OnlineMKL, kernels, losses, regularizers, schedules
from tests.naive import support_block_norms

CASES = [
    (losses.Hinge(), regularizers.SquaredGroupLasso(1e-2), None),
    (losses.Logistic(), regularizers.GroupLasso(1e-3), 3.0),
    (losses.Squared(), regularizers.ElasticNetMKL(1e-2, 0.5), None),
    (losses.Huber(0.5), (regularizers.GroupLq(1e-2, 1.5), regularizers.Ball(5.0)), None),
    (losses.MulticlassHinge(), regularizers.SquaredGroupLasso(1e-3), "auto"),
    (losses.Softmax(), regularizers.L2(1e-2), None),
]


def _stream(loss, n=2000, d=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    f = X[:, 0] - 2 * X[:, 1] + 0.5 * X[:, 2] * X[:, 3]
    if loss.task == "binary":
        return X, np.where(f > 0, 1.0, -1.0)
    if loss.task == "multiclass":
        return X, np.digitize(f, [-1.0, 1.0]).astype(float)
    return X, f + 0.1 * rng.normal(size=n)


@pytest.mark.parametrize(("loss", "reg", "radius"), CASES, ids=lambda c: repr(c)[:30])
def test_linear_implicit_equals_explicit(loss, reg, radius):
    X, Y = _stream(loss)
    bank = (kernels.Linear(features=(0, 1, 2)), kernels.Linear(features=(2, 3, 4, 5)))
    bank_implicit = tuple(kernels.Linear(features=k.features, implicit=True) for k in bank)
    kw = dict(loss=loss, regularizer=reg, schedule=schedules.InvSqrt(0.5), radius=radius)
    explicit = OnlineMKL(kernels=bank, **kw)
    implicit = OnlineMKL(kernels=bank_implicit, **kw)
    worst_score = worst_norm = 0.0
    for x, y in zip(X, Y, strict=True):
        explicit.learn(x, y)
        implicit.learn(x, y)
        worst_score = max(
            worst_score,
            np.max(np.abs(np.atleast_1d(explicit.decision(x)) - implicit.decision(x))),
        )
        worst_norm = max(worst_norm, np.max(np.abs(explicit.block_norms - implicit.block_norms)))
    assert worst_score < 1e-8
    assert worst_norm < 1e-8
    # the tracked norms are the true norms of the stored expansion, recomputed from scratch
    np.testing.assert_allclose(implicit.block_norms, support_block_norms(implicit), atol=1e-8)
    assert implicit.n_support > 100  # the test really exercised the support set


def test_mixed_bank_matches_all_implicit_bank():
    X, Y = _stream(losses.Hinge(), n=1000)
    kw = dict(regularizer=regularizers.SquaredGroupLasso(1e-2), schedule=schedules.InvSqrt(1.0))
    a = OnlineMKL(kernels=(kernels.Linear(), kernels.RBF(0.3)), **kw)
    b = OnlineMKL(kernels=(kernels.Linear(implicit=True), kernels.RBF(0.3)), **kw)
    for x, y in zip(X, Y, strict=True):
        la, lb = a.learn(x, y), b.learn(x, y)
        assert abs(la - lb) < 1e-9
    np.testing.assert_allclose(a.block_norms, b.block_norms, atol=1e-8)
    np.testing.assert_allclose(b.block_norms, support_block_norms(b), atol=1e-8)


def test_printed_norm_update_would_be_wrong():
    """The paper's printed update (-2 eta <theta, phi(u)> only) disagrees with the true norm."""
    X, Y = _stream(losses.Hinge(), n=50)
    m = OnlineMKL(kernels=(kernels.Linear(implicit=True),), regularizer=regularizers.L2(0.0),
                  schedule=schedules.Constant(0.5))  # fmt: skip
    for x, y in zip(X[:49], Y[:49], strict=True):
        m.learn(x, y)
    x, y = X[49], Y[49]
    norm_before = m.block_norms[0]
    f = m.decision(x)
    m.learn(x, y)
    true = support_block_norms(m)[0]
    assert abs(m.block_norms[0] - true) < 1e-10
    if y * f < 1:  # an update happened: the corrected formula is the only consistent one
        printed = np.sqrt(norm_before**2 - 2 * 0.5 * f * y + 0.25 * (x @ x))
        assert abs(printed - true) > 1e-3


@pytest.mark.parametrize("normalize", [True, False])
def test_explicit_quadratic_map_equals_kernelized_polynomial(normalize):
    X, Y = _stream(losses.MulticlassHinge(), n=800)
    kw = dict(loss=losses.MulticlassHinge(), regularizer=regularizers.SquaredGroupLasso(1e-3))
    feats = (0, 2, 3, 5)
    explicit = OnlineMKL(
        kernels=(kernels.Polynomial(2, coef0=0.7, normalize=normalize, features=feats,
                                    explicit=True), kernels.Linear()), **kw,
    )  # fmt: skip
    implicit = OnlineMKL(
        kernels=(kernels.Polynomial(2, coef0=0.7, normalize=normalize, features=feats),
                 kernels.Linear()), **kw,
    )  # fmt: skip
    for x, y in zip(X, Y, strict=True):
        explicit.learn(x, y)
        implicit.learn(x, y)
    probe = np.random.default_rng(9).normal(size=(20, 6))
    np.testing.assert_allclose(explicit.decision_many(probe), implicit.decision_many(probe),
                               rtol=1e-8, atol=1e-9)  # fmt: skip
    np.testing.assert_allclose(explicit.block_norms, implicit.block_norms, rtol=1e-8)
