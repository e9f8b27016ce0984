"""ProximalGradientMKL (the FISTA baseline of the SpicyMKL benchmark): same optimum as SpicyMKL."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from streammkl.batch import SpicyMKL
from streammkl.batch.proxgrad import ProximalGradientMKL
from streammkl.core import kernels


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    with threadpool_limits(1):
        yield


def _problem(task: str, n: int = 40, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + 20, 3))
    bank = [
        kernels.RBF(0.5),
        kernels.RBF(2.0),
        kernels.Linear(features=[0], implicit=True),
        kernels.Linear(features=[2], implicit=True),
        kernels.Polynomial(2),
    ]
    f = X[:, 0] + 0.8 * np.sin(2 * X[:, 1]) + 0.2 * rng.normal(size=len(X))
    y = np.where(f > 0, 1.0, -1.0) if task == "class" else f
    K = np.stack([k.gram(X[:n]) for k in bank])
    K_test = np.stack([k.gram(X[n:], X[:n]) for k in bank])
    return K, y[:n], K_test


@pytest.mark.parametrize(
    "loss, bias, C",
    [("logistic", True, 0.05), ("logistic", False, 0.5), ("squared", True, 0.2)],
)
def test_reaches_the_spicymkl_optimum(loss, bias, C):
    K, y, K_test = _problem("class" if loss == "logistic" else "reg")
    ref = SpicyMKL(kernels="precomputed", C=C, loss=loss, fit_intercept=bias, tol=1e-9).fit(K, y)
    model = ProximalGradientMKL(C=C, loss=loss, fit_intercept=bias, tol=1e-7).fit(K, y)
    assert model.converged_ and model.duality_gap_history_[-1] <= 1e-7
    assert model.objective_ == pytest.approx(ref.objective_, rel=1e-6)
    assert list(model.active_kernels_) == list(ref.active_kernels_)
    np.testing.assert_allclose(model.block_norms_, ref.block_norms_, atol=1e-3)
    np.testing.assert_allclose(
        model.decision_function(K_test), ref.decision_function(K_test), atol=1e-2
    )


def test_stops_at_the_certified_gap():
    K, y, _ = _problem("class")
    best = SpicyMKL(kernels="precomputed", C=0.05, tol=1e-9).fit(K, y).objective_
    model = ProximalGradientMKL(C=0.05, tol=0.01).fit(K, y)
    gap = model.duality_gap_history_[-1]
    assert model.converged_ and gap <= 0.01
    # the gap certifies the objective: best <= objective <= best / (1 - gap)
    assert best - 1e-9 <= model.objective_ <= best / (1.0 - gap)
    assert model.n_evals_ >= model.n_iter_ and model.rank_ > 0
    labels = model.predict(K)
    assert set(np.unique(labels)) <= {-1.0, 1.0} and np.mean(labels == y) > 0.8


def test_time_limit_and_bad_input():
    K, y, K_test = _problem("class")
    cut = ProximalGradientMKL(C=0.05, tol=1e-12, time_limit=0.0).fit(K, y)
    assert not cut.converged_ and cut.n_iter_ == 1
    with pytest.raises(ValueError, match=r"smooth loss.*SpicyMKL"):
        ProximalGradientMKL(loss="hinge").fit(K, y)
    with pytest.raises(ValueError, match="C must be"):
        ProximalGradientMKL(C=0.0).fit(K, y)
    with pytest.raises(ValueError, match="2 classes"):
        ProximalGradientMKL().fit(K, np.ones(len(y)))
    with pytest.raises(RuntimeError, match="call fit"):
        ProximalGradientMKL().decision_function(K_test)
    model = ProximalGradientMKL().fit(K, y)
    with pytest.raises(ValueError, match="kernels"):
        model.decision_function(K_test[:3])
