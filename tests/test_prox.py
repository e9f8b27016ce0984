"""Every norm-level prox against a brute-force scipy minimiser, plus the three-point inequality.

Subjects are found automatically: every norm-only regularizer class in ``core.regularizers``
must appear in ``INSTANCES`` (a test fails if a new one is added without an instance).
"""

from __future__ import annotations

import inspect
import zlib

import numpy as np
import pytest

from streammkl.core import regularizers as R
from tests.naive import brute_prox_norms

INSTANCES = {
    "L2": [R.L2(0.3), R.L2(2.0)],
    "GroupLasso": [R.GroupLasso(0.2)],
    "SquaredGroupLasso": [R.SquaredGroupLasso(0.1), R.SquaredGroupLasso(3.0)],
    "GroupLq": [R.GroupLq(0.5, q=1.5), R.GroupLq(0.2, q=1.2), R.GroupLq(0.4, q=2.0)],
    "ElasticNetMKL": [R.ElasticNetMKL(0.5, sigma=0.3), R.ElasticNetMKL(1.0, sigma=0.9)],
    "OverlappingGroupLasso": [R.OverlappingGroupLasso(groups=((0, 1), (2, 3, 4)), lam=(0.3, 0.6))],
    "Ball": [R.Ball(1.5)],
    "GroupL1Ball": [R.GroupL1Ball(2.0)],
}
STEPS = (1e-8, 1e-3, 0.3, 1.0, 7.0, 1e3)


def norm_only_classes():
    return [
        cls
        for name, cls in inspect.getmembers(R, inspect.isclass)
        if issubclass(cls, R.Regularizer)
        and cls is not R.Regularizer
        and not name.startswith("_")
        and cls.norm_only
    ]


def test_every_norm_only_regularizer_has_instances():
    missing = [c.__name__ for c in norm_only_classes() if c.__name__ not in INSTANCES]
    assert missing == []


def _cases(n, seed):
    rng = np.random.default_rng(seed)
    out = [np.zeros(5), np.full(5, 1e-9), np.array([1e6, 0, 3, 0, 1e-3])]
    while len(out) < n:
        scale = 10.0 ** rng.uniform(-3, 2)
        b = np.abs(rng.normal(size=5)) * scale
        b[rng.random(5) < 0.2] = 0.0
        out.append(b)
    return out


PARAMS = [(name, i) for name, regs in INSTANCES.items() for i in range(len(regs))]


@pytest.mark.parametrize(("name", "i"), PARAMS)
def test_prox_norms_matches_brute_force(name, i):
    reg = INSTANCES[name][i]
    rng = np.random.default_rng(zlib.crc32(f"{name}/{i}".encode()))  # not hash(): salted
    worst = 0.0
    for b in _cases(200, seed=i):
        step = float(rng.choice(STEPS))
        ours = reg.prox_norms(b, step)
        ref = brute_prox_norms(reg, b, step)
        assert np.all(np.isfinite(ours))

        def obj(z, b=b, step=step):
            return 0.5 * np.sum((z - b) ** 2) + step * reg.value_norms(z)

        # the brute-force solver may stop early; ours must be at least as good and close
        assert obj(ours) <= obj(ref) + 1e-9 * max(1.0, abs(obj(ref)))
        err = np.max(np.abs(ours - ref)) / max(1.0, np.max(np.abs(b)))
        best = obj(ref)
        if np.isfinite(best) and obj(ours) < best - 1e-12 * max(1.0, abs(best)):
            continue  # the reference stopped short of the minimum ours reaches: no yardstick
        worst = max(worst, err)
    assert worst < 1e-6


@pytest.mark.parametrize(("name", "i"), PARAMS)
def test_three_point_inequality(name, i):
    """||y - xbar||^2 - ||y - x||^2 <= 2 (phi(y) - phi(xbar)) for xbar = prox_phi(x)."""
    reg = INSTANCES[name][i]
    rng = np.random.default_rng(7 + i)
    for _ in range(300):
        x = np.abs(rng.normal(size=5)) * 10 ** rng.uniform(-2, 1)
        step = float(rng.choice(STEPS[1:5]))
        xbar = reg.prox_norms(x, step)
        y = np.abs(rng.normal(size=5)) * 10 ** rng.uniform(-2, 1)
        if isinstance(reg, R.Ball | R.GroupL1Ball):
            y = R.GroupL1Ball(reg.radius).prox_norms(y, 1.0)  # a feasible point for both balls
            y *= min(1.0, reg.radius / max(np.linalg.norm(y), 1e-300))
        lhs = np.sum((y - xbar) ** 2) - np.sum((y - x) ** 2)
        rhs = 2 * step * (reg.value_norms(y) - reg.value_norms(xbar))
        assert lhs <= rhs + 1e-9 * max(1.0, abs(rhs), abs(lhs))


def test_squared_group_lasso_is_algorithm_2_with_eta_lambda():
    """Erratum E3: the prox of lam/2 (sum b)^2 at step eta is Alg. 2 run with eta * lam."""
    b = np.array([3.0, 1.0, 0.5, 0.0])
    z = R.SquaredGroupLasso(0.5).prox_norms(b, 2.0)  # Alg. 2 with lambda = 1
    # rho: j=1: 3 - 1/2*3 = 1.5 > 0; j=2: 1 - 1/3*4 < 0 -> rho = 1, tau = 1/2 * 3 = 1.5
    np.testing.assert_allclose(z, [1.5, 0.0, 0.0, 0.0])


def test_group_lq_newton_solves_corrected_equation():
    """Erratum E2: b - b0 + (eta lam q / 2) b^(q-1) = 0 (the 1/2 of Omega kept)."""
    reg = R.GroupLq(lam=0.8, q=1.5)
    b0 = np.array([2.0, 0.7, 1e-4])
    z = reg.prox_norms(b0, 0.5)
    resid = z - b0 + 0.5 * 0.8 * 1.5 / 2 * z ** (1.5 - 1)
    np.testing.assert_allclose(resid, 0.0, atol=1e-12)
    assert np.all(z > 0)  # q > 1 gives no sparsity


def test_overlapping_groups_apply_one_exact_prox_per_group_in_order():
    reg = R.OverlappingGroupLasso(groups=((0, 1), (1, 2)), lam=0.5)
    b = np.array([1.0, 2.0, 0.5])
    z = reg.prox_norms(b, 1.0)
    first = R.OverlappingGroupLasso(groups=((0, 1),), lam=0.5).prox_norms(b, 1.0)
    second = R.OverlappingGroupLasso(groups=((1, 2),), lam=0.5).prox_norms(first, 1.0)
    np.testing.assert_allclose(z, second)
    np.testing.assert_allclose(first[:2], b[:2] * (1 - 0.5 / np.linalg.norm(b[:2])))


def test_sparse_group_lasso_matches_brute_force_on_coordinates():
    """L1, then block soft-threshold: the exact prox of lam(sigma sum||th_m|| + (1-sigma)|th|_1)."""
    from scipy.optimize import minimize

    from streammkl.core import OnlineMKL, kernels, losses, schedules

    rng = np.random.default_rng(3)
    for _ in range(20):
        lam, sigma, eta = 0.4, 0.6, 0.7
        model = OnlineMKL(
            kernels=(kernels.Linear(features=(0, 1, 2)), kernels.Linear(features=(3, 4))),
            loss=losses.Squared(), regularizer=R.SparseGroupLasso(lam, sigma),
            schedule=schedules.Constant(eta),
        )  # fmt: skip
        x = rng.normal(size=5)
        y = float(rng.normal() * 3)
        model.learn(x, y)
        theta0 = eta * y * x  # gradient step from 0 with the squared loss
        groups = (slice(0, 3), slice(3, 5))

        def obj(t, theta0=theta0):
            pen = sigma * sum(np.sqrt(t[g] @ t[g] + 1e-30) for g in groups)
            return 0.5 * np.sum((t - theta0) ** 2) + eta * lam * (
                pen + (1 - sigma) * np.abs(t).sum()
            )

        ref = minimize(obj, theta0, method="Powell", options={"xtol": 1e-12, "ftol": 1e-15}).x
        S, L = model._state, model._layout
        ours = np.concatenate(
            [S.scale[m] * S.w[0, L.ex_off[m] : L.ex_off[m + 1]] for m in range(2)]
        )
        assert obj(ours) <= obj(ref) + 1e-10
        np.testing.assert_allclose(ours, ref, atol=1e-5)


@pytest.mark.parametrize(("name", "i"), PARAMS)
def test_prox_in_the_metric_of_per_block_steps_matches_brute_force(name, i):
    """AdaGrad's metric: argmin sum_m (z_m - b_m)^2 / (2 s_m) + Omega(z), per-block steps s."""
    reg = INSTANCES[name][i]
    rng = np.random.default_rng(100 + i)
    worst = 0.0
    for b in _cases(120, seed=50 + i):
        steps = 10.0 ** rng.uniform(-2, 1, size=b.shape) * float(rng.choice(STEPS[1:5]))
        ours = reg.prox_norms(b, steps)
        ref = brute_prox_norms(reg, b, steps)
        assert np.all(np.isfinite(ours))

        def obj(z, b=b, steps=steps):
            return np.sum((z - b) ** 2 / (2 * steps)) + reg.value_norms(z)

        assert obj(ours) <= obj(ref) + 1e-9 * max(1.0, abs(obj(ref)))
        err = np.max(np.abs(ours - ref)) / max(1.0, np.max(np.abs(b)))
        best = obj(ref)
        if np.isfinite(best) and obj(ours) < best - 1e-12 * max(1.0, abs(best)):
            continue  # the reference stopped short of the minimum ours reaches: no yardstick
        worst = max(worst, err)
    assert worst < 1e-6


@pytest.mark.parametrize(("name", "i"), PARAMS)
def test_equal_per_block_steps_give_the_papers_prox_exactly(name, i):
    reg = INSTANCES[name][i]
    for b in _cases(50, seed=9 + i):
        for step in STEPS:
            np.testing.assert_array_equal(
                reg.prox_norms(b, np.full(b.shape, step)), reg.prox_norms(b, step)
            )
