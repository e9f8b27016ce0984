"""SpicyMKL: exact agreement with independent solvers, super-linear gap decay, active-only touches.

Independent references (no code shared with streammkl.batch):
* smooth losses (logistic, squared): FISTA with restart on the primal in the representer
  parametrisation ``f_m = L_m beta_m`` (``K_m = L_m L_m^T``), block proxes from
  ``streammkl.core.regularizers`` (written independently of the batch package);
* hinge and epsilon-insensitive: scipy SLSQP on the Fenchel dual of problem (7); by strong duality
  its optimum equals the primal optimum.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize
from threadpoolctl import threadpool_limits

from streammkl.batch import SpicyMKL
from streammkl.core import kernels, regularizers

N_SAMPLES = 30


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    with threadpool_limits(1):  # the box is shared: BLAS threads only add contention
        yield


def _problem(task: str, seed: int = 0, n: int = N_SAMPLES):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    bank = [
        kernels.RBF(0.5),
        kernels.RBF(2.0),
        kernels.Linear(features=[0], implicit=True),
        kernels.Linear(features=[1], implicit=True),
        kernels.Polynomial(2),
    ]
    K = np.stack([k.gram(X) for k in bank])
    K = K / np.trace(K, axis1=1, axis2=2)[:, None, None]
    f = X[:, 0] + 0.8 * np.sin(2 * X[:, 1]) + 0.2 * rng.normal(size=n)
    y = np.where(f > 0, 1.0, -1.0) if task == "class" else f
    return K, y


def _penalty_value(reg: str, C: float, norms: np.ndarray, mix=0.5, q=1.5) -> float:
    if reg == "l1":
        return C * norms.sum()
    if reg == "elastic_net":
        return C * ((1 - mix) * norms.sum() + 0.5 * mix * norms @ norms)
    if reg == "lq":
        return C / q * np.sum(norms**q)
    return 0.5 * C * norms.sum() ** 2


def _core_prox(reg: str, C: float, mix=0.5, q=1.5):
    """Prox of ``step * penalty`` on the block norms, from streammkl.core (independent code)."""
    if reg == "l1":
        return lambda b, t: regularizers.GroupLasso(C).prox_norms(b, t)
    if reg == "elastic_net":
        l1, l2 = regularizers.GroupLasso(C * (1 - mix)), regularizers.L2(C * mix)
        return lambda b, t: l2.prox_norms(l1.prox_norms(b, t), t)
    if reg == "lq":
        return lambda b, t: regularizers.GroupLq(2 * C / q, q).prox_norms(b, t)
    return lambda b, t: regularizers.SquaredGroupLasso(C).prox_norms(b, t)


def _primal(K, y, loss, reg, C, alpha, b):
    z = np.einsum("mij,mj->i", K, alpha) + b
    norms = np.sqrt(np.maximum(np.einsum("mi,mij,mj->m", alpha, K, alpha), 0))
    if loss == "logistic":
        data = np.sum(np.logaddexp(0, -y * z))
    elif loss == "squared":
        data = 0.5 * np.sum((y - z) ** 2)
    elif loss == "hinge":
        data = np.sum(np.maximum(0, 1 - y * z))
    else:
        data = np.sum(np.maximum(0, np.abs(y - z) - 0.1))
    return data + _penalty_value(reg, C, norms), z


def _fista(K, y, loss, reg, C, bias=True, n_iter=3000):
    """Restarted FISTA on sum_i loss(L beta + b) + penalty(||beta_m||)."""
    M, n = K.shape[:2]
    factors = []
    for Km in K:
        lam, V = np.linalg.eigh(Km)
        factors.append(V * np.sqrt(np.maximum(lam, 0)))
    B = np.hstack(factors)  # n x (M n)
    curv = 0.25 if loss == "logistic" else 1.0
    Lip = curv * np.linalg.eigvalsh(B @ B.T + (1.0 if bias else 0.0))[-1]
    step = 1.0 / Lip
    prox = _core_prox(reg, C)

    def grad(theta):
        z = B @ theta[:-1] + theta[-1]
        r = -y / (1 + np.exp(y * z)) if loss == "logistic" else z - y
        return np.append(B.T @ r, r.sum() if bias else 0.0)

    def value(theta):
        beta = theta[:-1].reshape(M, n)
        z = B @ theta[:-1] + theta[-1]
        data = np.sum(np.logaddexp(0, -y * z)) if loss == "logistic" else 0.5 * np.sum((y - z) ** 2)
        return data + _penalty_value(reg, C, np.linalg.norm(beta, axis=1))

    def prox_step(v):
        beta = v[:-1].reshape(M, n)
        norms = np.linalg.norm(beta, axis=1)
        new = prox(norms, step)
        with np.errstate(invalid="ignore", divide="ignore"):
            scale = np.where(norms > 0, new / norms, 0.0)
        return np.append((beta * scale[:, None]).ravel(), v[-1])

    x = np.zeros(M * n + 1)
    yk, t, fx = x.copy(), 1.0, value(x)
    for _ in range(n_iter):
        x_new = prox_step(yk - step * grad(yk))
        f_new = value(x_new)
        if f_new > fx:  # adaptive restart
            yk, t = x.copy(), 1.0
            continue
        t_new = 0.5 * (1 + np.sqrt(1 + 4 * t * t))
        yk = x_new + (t - 1) / t_new * (x_new - x)
        x, t, fx = x_new, t_new, f_new
    return fx, B @ x[:-1] + x[-1]


def _dual_slsqp(K, y, loss, reg, C, bias=True, eps=0.1):
    """max -sum l*(y, -rho) - sum g*(||rho||_K) s.t. sum rho = 0 (scipy SLSQP)."""
    M, n = K.shape[:2]
    split = loss == "epsilon_insensitive"
    nv = 2 * n if split else n
    extra = reg == "squared_l1"  # epigraph variable t >= max_m ||rho||_K^2

    def rho_of(v):
        return v[:n] - v[n : 2 * n] if split else v[:n]

    def drho(g):  # chain rule back to the variables
        return np.concatenate([g, -g]) if split else g

    def neg_dual(v):
        rho = rho_of(v)
        val = -(y @ rho)
        grad = -y.copy()
        if split:
            val += eps * np.sum(v[: 2 * n])
        norms = np.sqrt(np.maximum(np.einsum("i,mij,j->m", rho, K, rho), 1e-300))
        Kr = K @ rho
        g = drho(grad)
        if split:
            g = g + eps
        if reg == "elastic_net":
            ex = np.maximum(0, norms - C * 0.5)
            val += np.sum(ex**2) / (2 * C * 0.5)
            g = g + drho(np.sum((ex / (C * 0.5) / norms)[:, None] * Kr, axis=0))
        elif reg == "lq":
            r = 3.0  # q = 1.5
            val += np.sum(C ** (1 - r) * norms**r / r)
            g = g + drho(np.sum((C ** (1 - r) * norms ** (r - 2))[:, None] * Kr, axis=0))
        if extra:
            val += v[-1] / (2 * C)
            g = np.append(g, 1 / (2 * C))
        return val, g

    cons = []
    if bias:
        cons.append(
            {
                "type": "eq",
                "fun": lambda v: np.sum(rho_of(v)),
                "jac": lambda v: np.append(drho(np.ones(n)), [0.0] * extra),
            }
        )
    for m in range(M):
        if reg == "l1":
            cons.append(
                {
                    "type": "ineq",
                    "fun": lambda v, m=m: C**2 - rho_of(v) @ K[m] @ rho_of(v),
                    "jac": lambda v, m=m: -2 * drho(K[m] @ rho_of(v)),
                }
            )
        elif extra:
            cons.append(
                {
                    "type": "ineq",
                    "fun": lambda v, m=m: v[-1] - rho_of(v) @ K[m] @ rho_of(v),
                    "jac": lambda v, m=m: np.append(-2 * drho(K[m] @ rho_of(v)), 1.0),
                }
            )
    if split:
        bounds = [(0, 1)] * nv
    else:
        bounds = [(0, 1) if yi > 0 else (-1, 0) for yi in y]
    if extra:
        bounds.append((0, None))
    x0 = np.zeros(nv + extra)
    out = scipy.optimize.minimize(
        neg_dual,
        x0,
        jac=True,
        bounds=bounds,
        constraints=cons,
        method="SLSQP",
        options={"maxiter": 2000, "ftol": 1e-14},
    )
    # status 8 ("positive directional derivative") is SLSQP giving up at rounding level
    assert out.success or out.status == 8, out.message
    for con in cons:  # feasible to rounding
        viol = con["fun"](out.x)
        assert (abs(viol) if con["type"] == "eq" else -viol) <= 1e-9
    return -out.fun


CASES = [
    ("logistic", "l1", 0.1),
    ("logistic", "elastic_net", 0.1),
    ("logistic", "lq", 0.1),
    ("logistic", "squared_l1", 0.01),
    ("squared", "l1", 0.1),
    ("squared", "elastic_net", 0.1),
    ("squared", "lq", 0.1),
    ("squared", "squared_l1", 0.01),
    ("hinge", "l1", 0.1),
    ("hinge", "elastic_net", 0.1),
    ("hinge", "lq", 0.1),
    ("hinge", "squared_l1", 0.01),
    ("epsilon_insensitive", "l1", 0.1),
    ("epsilon_insensitive", "elastic_net", 0.1),
    ("epsilon_insensitive", "lq", 0.1),
    ("epsilon_insensitive", "squared_l1", 0.01),
]


@pytest.mark.parametrize(("loss", "reg", "C"), CASES)
def test_matches_independent_solver(loss, reg, C):
    task = "class" if loss in ("logistic", "hinge") else "reg"
    K, y = _problem(task)
    model = SpicyMKL(
        kernels="precomputed",
        C=C,
        loss=loss,
        regularizer=reg,
        elastic_mix=0.5,
        q=1.5,
        epsilon=0.1,
        normalize=None,
        ridge=0.0,
        tol=1e-10,
        max_iter=200,
    )
    model.fit(K, y)
    assert model.converged_
    primal, z = _primal(K, y, loss, reg, C, model.dual_coef_, model.intercept_)
    # the model's own bookkeeping equals an independent evaluation of objective and predictions
    assert model.objective_ == pytest.approx(primal, rel=1e-9)
    np.testing.assert_allclose(model.decision_function(K), z, atol=1e-9)
    if loss in ("logistic", "squared"):
        ref, z_ref = _fista(K, y, loss, reg, C)
        assert primal <= ref * (1 + 1e-9)  # at least as good as 3000 restarted FISTA steps
        assert primal == pytest.approx(ref, rel=1e-9)
        np.testing.assert_allclose(z, z_ref, atol=1e-5)  # strictly convex loss: unique z
    else:
        dual_opt = _dual_slsqp(K, y, loss, reg, C)
        assert primal >= dual_opt * (1 - 1e-8)  # weak duality (up to SLSQP's feasibility)
        assert primal == pytest.approx(dual_opt, rel=1e-8)  # strong duality, tight
    if reg in ("l1", "squared_l1"):
        assert 0 < len(model.active_kernels_) < K.shape[0]  # a sparse, nontrivial solution
        assert np.all(model.block_norms_[model.block_norms_ < 1e-12] == 0)  # exact zeros


def _random_bank(seed: int, n: int, n_kernels: int):
    """Gaussian kernels on random feature subsets with random widths (§6.2 of the paper)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 20))
    y = np.where(X[:, 0] + X[:, 1] ** 2 - 1 + 0.2 * rng.normal(size=n) > 0, 1.0, -1.0)
    bank = []
    for _ in range(n_kernels):
        feats = rng.choice(20, size=rng.integers(1, 3), replace=False)
        sigma2 = 5 * rng.chisquare(1) + 0.1
        bank.append(kernels.RBF(gamma=1 / (2 * sigma2), features=[int(f) for f in feats]))
    return np.stack([k.gram(X) for k in bank]), y


@pytest.mark.parametrize("loss", ["logistic", "hinge"])
def test_duality_gap_decreases_super_linearly(loss):
    K, y = _random_bank(1, 80, 30)
    model = SpicyMKL(kernels="precomputed", C=0.05, loss=loss, tol=1e-9).fit(K, y)
    gaps = np.array(model.duality_gap_history_)
    gaps = gaps[gaps > 1e-8]  # below that the gap is at rounding level
    ratios = gaps[1:] / gaps[:-1]
    assert len(ratios) >= 8
    # linear convergence would keep the ratio constant; here it keeps shrinking (Theorem 1:
    # error ratio <= 1/(1 + sigma gamma_t)^2 with gamma_t doubling every outer iteration)
    slope = np.polyfit(np.arange(len(ratios)), np.log(ratios), 1)[0]
    assert slope < -0.25  # the ratio shrinks by > 22% per outer iteration on average
    assert np.median(ratios[:3]) > 0.3
    assert np.max(ratios[-3:]) < 0.15
    assert np.all(np.diff(gaps) < 0)  # monotone


@pytest.mark.parametrize("loss", ["logistic", "hinge", "squared"])
def test_inner_loop_touches_only_active_kernels(loss):
    K, y = _random_bank(0, 60, 200)
    y = y if loss != "squared" else y + 0.1
    fast = SpicyMKL(kernels="precomputed", C=0.05, loss=loss, tol=1e-8).fit(K, y)
    slow = SpicyMKL(kernels="precomputed", C=0.05, loss=loss, tol=1e-8, screening=False).fit(K, y)
    # screening is exact: the same solution (up to rounding in the order of the sums)
    assert fast.objective_ == pytest.approx(slow.objective_, rel=1e-8)
    np.testing.assert_array_equal(fast.active_kernels_, slow.active_kernels_)
    np.testing.assert_allclose(fast.decision_function(K), slow.decision_function(K), atol=1e-4)
    assert abs(fast.n_iter_ - slow.n_iter_) <= 1
    n_active = len(fast.active_kernels_)
    assert 3 <= n_active <= 30  # sparse: most of the 200 kernels are unused
    evals, cands, actives = np.array(fast.inner_stats_["per_outer"]).T
    # without screening every inner evaluation touches all 200 kernels
    assert slow.inner_stats_["candidates"] == 200 * slow.inner_stats_["evaluations"]
    # with screening, once the active set has settled, exactly the active kernels are touched
    np.testing.assert_array_equal(cands[-2:], actives[-2:])
    assert np.all(actives[-2:] == evals[-2:] * n_active)
    # and overall the inner loops touch kernels less than half as often
    assert fast.n_kernel_touches_["inner"] < 0.5 * slow.n_kernel_touches_["inner"]
    assert fast.inner_stats_["candidates"] < 0.5 * slow.inner_stats_["candidates"]


def test_kernel_objects_and_prediction_api():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(80, 4))
    y = np.where(X[:, 2] + 0.3 * X[:, 3] > 0, "spam", "ham")
    bank = [kernels.Linear(features=[j], implicit=True) for j in range(4)] + [kernels.RBF(0.3)]
    model = SpicyMKL(kernels=bank, C=0.5, loss="hinge").fit(X[:60], y[:60])
    assert model.duality_gap_history_[-1] <= 0.01 < model.duality_gap_history_[0]
    assert list(model.classes_) == ["ham", "spam"]
    assert set(model.predict(X[60:])) <= {"ham", "spam"}
    assert model.score(X[60:], y[60:]) >= 0.8
    assert 2 in model.active_kernels_  # the informative feature's kernel is selected
    assert model.kernel_weights_.sum() == pytest.approx(1.0)
    assert model.kernel_names_[0] == bank[0].name
    # the same Grams, precomputed, give the same model
    K = np.stack([k.gram(X[:60]) for k in bank])
    pre = SpicyMKL(kernels="precomputed", C=0.5, loss="hinge").fit(K, y[:60])
    np.testing.assert_allclose(pre.dual_coef_, model.dual_coef_, atol=1e-10)
    Kt = np.stack([k.gram(X[60:], X[:60]) for k in bank])
    np.testing.assert_allclose(pre.decision_function(Kt), model.decision_function(X[60:]))


def test_bad_input_names_the_problem():
    K, y = _problem("class")
    with pytest.raises(ValueError, match="kernels"):
        SpicyMKL().fit(K, y)
    with pytest.raises(ValueError, match="2 classes"):
        SpicyMKL(kernels="precomputed").fit(K, np.ones(N_SAMPLES))
    with pytest.raises(ValueError, match="loss"):
        SpicyMKL(kernels="precomputed", loss="huber").fit(K, y)
    with pytest.raises(ValueError, match="regularizer"):
        SpicyMKL(kernels="precomputed", regularizer="l0").fit(K, y)
    with pytest.raises(ValueError, match="C must be"):
        SpicyMKL(kernels="precomputed", C=-1).fit(K, y)
    bad = K.copy()
    bad[2, 0, 1] = np.nan
    with pytest.raises(ValueError, match="kernel 2"):
        SpicyMKL(kernels="precomputed").fit(bad, y)
    model = SpicyMKL(kernels="precomputed").fit(K, y)
    with pytest.raises(ValueError, match="columns"):
        model.decision_function(K[:, :, :5])
