"""Randomized mirror descent MKL: the Alg. 3 sampler is exact, the estimate unbiased, J right."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.stats
from threadpoolctl import threadpool_limits

from streammkl.batch.explicit_poly import ExplicitPolynomialMKL
from streammkl.batch.polysampler import GramBase, LinearBase, PolynomialSampler, n_ordered_indices
from streammkl.batch.randomized import RandomizedMKL
from streammkl.core import kernels


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    with threadpool_limits(1):
        yield


def _ordered(r, D):
    return [idx for d in range(D + 1) for idx in itertools.product(range(r), repeat=d)]


def _bases(seed=0, n=6, r=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, r))
    grams = []
    for _ in range(r):  # generic PSD base kernels
        A = rng.normal(size=(n, n))
        grams.append(A @ A.T / n)
    return {"gram": GramBase(np.stack(grams)), "linear": LinearBase(X)}, rng


def _gradient_abs(base, a, index, rho2):
    """|g_I| / (lam/2) = a^T K_I a / rho_d^2, by forming K_I explicitly."""
    return float(a @ base.product(index) @ a) / rho2[len(index)]


@pytest.mark.parametrize("kind", ["gram", "linear"])
@pytest.mark.parametrize("rho2", [(1.0, 1.0, 1.0, 1.0), (1.0, 1.0, 1.0, 4.0), (0.5, 2.0, 1.0, 3.0)])
def test_sampler_distribution_is_gradient_magnitude_exactly(kind, rho2):
    bases, rng = _bases()
    base, D = bases[kind], 3
    rho2 = np.array(rho2)
    sampler = PolynomialSampler(base, D, rho2)
    a = rng.normal(size=base.n)
    indices = _ordered(base.r, D)
    assert len(indices) == n_ordered_indices(base.r, D) == 40
    g = np.array([_gradient_abs(base, a, idx, rho2) for idx in indices])
    assert np.all(g >= -1e-12)  # Schur products of PSD kernels: every coordinate is <= 0 in J
    # sum_d delta(d) = ||grad J||_1 (up to the common lam/2)
    assert sampler.delta(a).sum() == pytest.approx(g.sum(), rel=1e-12)
    for d in range(D + 1):  # per degree too: delta(d) = sum over |I| = d
        mask = np.array([len(i) == d for i in indices])
        assert sampler.delta(a)[d] == pytest.approx(g[mask].sum(), rel=1e-12)
    prob = np.array([sampler.probability(a, idx) for idx in indices])
    np.testing.assert_allclose(prob, g / g.sum(), rtol=1e-10, atol=1e-15)


def test_sampler_monte_carlo_frequencies_and_unbiased_estimates():
    bases, rng = _bases(seed=1)
    base, D, rho2 = bases["gram"], 3, np.array([1.0, 1.0, 1.0, 4.0])
    sampler = PolynomialSampler(base, D, rho2)
    a = rng.normal(size=base.n)
    indices = _ordered(base.r, D)
    pos = {idx: k for k, idx in enumerate(indices)}
    g = -np.array([_gradient_abs(base, a, idx, rho2) for idx in indices])  # the gradient (<= 0)
    C = -g.sum()
    draws = 20000
    draw_rng = np.random.default_rng(42)
    counts = np.zeros(len(indices))
    for _ in range(draws):
        idx, p = sampler.sample(a, draw_rng)
        counts[pos[idx]] += 1
        assert p == pytest.approx(-g[pos[idx]] / C, rel=1e-10)  # returned probability is exact
    q = -g / C
    keep = q * draws >= 5  # chi-square on the cells with enough mass, the rest pooled
    obs, exp = counts[keep], q[keep] * draws
    if not keep.all():
        obs, exp = np.append(obs, counts[~keep].sum()), np.append(exp, q[~keep].sum() * draws)
    assert scipy.stats.chisquare(obs, exp).pvalue > 1e-3
    # importance-sampled estimate g_hat = (g_I / q_I) e_I = -C e_I: mean = grad J, per coordinate
    mean = -C * counts / draws
    stderr = C * np.sqrt(q * (1 - q) / draws)
    assert np.all(np.abs(mean - g) <= 5 * stderr + 1e-12)
    # the uniform-coordinate estimate |I| g_I e_I is unbiased too (but far noisier)
    uni = np.zeros(len(indices))
    pick = draw_rng.integers(0, len(indices), size=draws)
    np.add.at(uni, pick, len(indices) * g[pick])
    uni /= draws
    uni_err = len(indices) * np.abs(g) * np.sqrt((1 / len(indices)) / draws)
    assert np.all(np.abs(uni - g) <= 5 * uni_err + 1e-12)


def _objective(base, y, lam, theta, rho2):
    n = len(y)
    K = sum(w / rho2[len(i)] * base.product(i) for i, w in theta.items())
    a = np.linalg.solve(K + n * lam * np.eye(n), y)
    return 0.5 * lam * float(y @ a), a


def test_gradient_formula_matches_finite_differences():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(25, 3))
    y = X[:, 0] * X[:, 1] + 0.1 * rng.normal(size=25)
    base, lam, rho2 = LinearBase(X), 0.05, np.array([1.0, 1.0, 2.0])
    theta = {(0,): 0.3, (0, 1): 0.5, (2, 2): 0.2, (): 0.1}
    J, a = _objective(base, y, lam, theta, rho2)
    for index in [(0,), (0, 1), (1, 0), (2,), ()]:
        h = 1e-6
        bumped = dict(theta)
        bumped[index] = bumped.get(index, 0.0) + h
        fd = (_objective(base, y, lam, bumped, rho2)[0] - J) / h
        formula = -0.5 * lam * float(a @ base.product(index) @ a) / rho2[len(index)]
        assert fd == pytest.approx(formula, rel=1e-4)
        # the paper's eq. 12 without the 1/2 would be twice too large
        assert abs(fd - 2 * formula) > 0.4 * abs(formula)


def test_first_step_gradient_norm_and_objective_are_exact():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 3))
    y = X[:, 0] - X[:, 1] * X[:, 2]
    lam, rho2 = 0.01, np.array([1.0, 1.0, 1.0, 4.0])
    model = RandomizedMKL(degree=3, lam=lam, rho_squared=rho2, n_iter=3).fit(X, y)
    a0 = y / (len(y) * lam)  # theta = 0: K_theta = 0
    base = LinearBase(X)
    g = sum(0.5 * lam * _gradient_abs(base, a0, idx, rho2) for idx in _ordered(3, 3))
    assert model.gradient_l1_history_[0] == pytest.approx(g, rel=1e-12)
    assert model.objective_history_[0] == pytest.approx(0.5 * lam * y @ a0, rel=1e-12)
    J, _ = _objective(base, y, lam, model.theta_, rho2)
    assert model.objective_ == pytest.approx(J, rel=1e-10)
    assert np.linalg.norm(list(model.theta_.values())) == pytest.approx(1.0)  # on the sphere
    assert all(w > 0 for w in model.theta_.values())


def _monomial_data(r, n, seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, r))
    y = X[:, 0] * X[:, 1] + X[:, 2] + X[:, 1] * X[:, 2] * X[:, 3]
    return X, (y - y.mean()) / y.std()


def test_converges_to_the_explicit_optimum_and_beats_uniform_sampling():
    X, y = _monomial_data(r=4, n=60, seed=4)
    lam, rho2 = 1e-3, (1.0, 1.0, 1.0, 1.0)
    exact = ExplicitPolynomialMKL(degree=3, lam=lam, rho_squared=rho2, n_iter=2000, tol=1e-13).fit(
        X, y
    )
    stoch = RandomizedMKL(degree=3, lam=lam, rho_squared=rho2, n_iter=1500, seed=0).fit(X, y)
    uniform = RandomizedMKL(
        degree=3, lam=lam, rho_squared=rho2, n_iter=1500, seed=0, sampler="uniform"
    ).fit(X, y)
    j_star = exact.objective_
    # the explicit problem over distinct kernels (rho_u^2 = rho_d^2 / sqrt(#orderings)) has the same
    # optimum as the ordered problem: it lower-bounds every ordered theta, and Stoch approaches it
    assert j_star <= stoch.objective_ * (1 + 1e-9)
    assert j_star <= uniform.objective_ * (1 + 1e-9)
    assert stoch.objective_ <= 1.1 * j_star
    assert (uniform.objective_ - j_star) > 3 * (stoch.objective_ - j_star)
    assert np.mean((stoch.predict(X) - y) ** 2) < 0.05


def test_never_materialises_the_kernel_set():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(40, 60))
    y = X[:, 0] * X[:, 1] * X[:, 2] + X[:, 3]
    model = RandomizedMKL(degree=3, lam=1e-2, n_iter=40).fit(X, y)
    assert model.n_ordered_kernels_ == 1 + 60 + 60**2 + 60**3  # 219,661 ordered indices
    assert len(model.theta_) <= 40  # at most one new coordinate per step
    assert model.objective_ < model.objective_history_[0]
    assert model.predict(X[:5]).shape == (5,)


def test_kernel_objects_give_the_same_sampler_as_the_linear_fast_path():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(12, 3))
    lin = LinearBase(X)
    objs = [kernels.Linear(features=[j], implicit=True) for j in range(3)]
    gram = GramBase(np.stack([k.gram(X) for k in objs]))
    rho2 = np.array([1.0, 2.0, 1.0])
    a = rng.normal(size=12)
    s1, s2 = PolynomialSampler(lin, 2, rho2), PolynomialSampler(gram, 2, rho2)
    np.testing.assert_allclose(s1.delta(a), s2.delta(a), rtol=1e-12)
    for idx in _ordered(3, 2):
        assert s1.probability(a, idx) == pytest.approx(s2.probability(a, idx), rel=1e-10)
    model = RandomizedMKL(degree=2, lam=0.1, n_iter=20, kernels=objs).fit(X, X[:, 0] * X[:, 1])
    fast = RandomizedMKL(degree=2, lam=0.1, n_iter=20).fit(X, X[:, 0] * X[:, 1])
    assert model.cross_kernel(X).shape == fast.cross_kernel(X).shape == (12, 12)
    np.testing.assert_allclose(model.cross_kernel(X[:4]), model.cross_kernel(X)[:4])


def test_bad_parameters_are_named():
    X, y = np.ones((5, 2)), np.ones(5)
    with pytest.raises(ValueError, match="rho_squared"):
        RandomizedMKL(degree=2, rho_squared=(1, 1)).fit(X, y)
    with pytest.raises(ValueError, match="sampler"):
        RandomizedMKL(sampler="gibbs").fit(X, y)
    with pytest.raises(ValueError, match="lam"):
        RandomizedMKL(lam=0).fit(X, y)
    with pytest.raises(ValueError, match="does not fit"):
        ExplicitPolynomialMKL(max_bytes=1e3).fit(np.ones((10, 5)), np.ones(10))
