"""Kernels against textbook formulas; losses against finite differences (found automatically)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from streammkl.core import _numba as nb
from streammkl.core import kernels as Kmod
from streammkl.core import losses as Lmod
from tests.naive import gram as naive_gram

KERNELS = [
    Kmod.Linear(), Kmod.Linear(normalize=True, features=(0, 2)), Kmod.Polynomial(2),
    Kmod.Polynomial(3, coef0=0.5, normalize=False), Kmod.RBF(0.7), Kmod.RBF(0.2, features=(1, 3)),
    Kmod.B1Spline(2.0),
]  # fmt: skip


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.name)
def test_gram_matches_textbook_formula(kernel):
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(7, 4)), rng.normal(size=(5, 4))
    np.testing.assert_allclose(kernel.gram(X, Y), naive_gram(kernel, X, Y), rtol=1e-12, atol=1e-14)
    G = kernel.gram(X)
    assert np.min(np.linalg.eigvalsh(G + G.T) / 2) > -1e-9  # positive semi-definite


def test_names_are_stable_and_distinct():
    assert [k.name for k in KERNELS] == [
        "linear", "linear-normalized[0,2]", "poly2", "poly3(c=0.5)-raw", "rbf(gamma=0.7)",
        "rbf(gamma=0.2)[1,3]", "b1(h=2)",
    ]  # fmt: skip
    assert Kmod.RBF(0.5, n_components=100).name == "rff(gamma=0.5,D=100)"
    for k in KERNELS:
        assert Kmod.from_spec(k.to_spec()) == k and Kmod.from_spec(k.to_spec()).name == k.name


def test_explicit_and_implicit_flags():
    assert not Kmod.Linear().implicit and Kmod.Linear(implicit=True).implicit
    assert Kmod.RBF(1.0).implicit and not Kmod.RBF(1.0, n_components=10).implicit
    assert Kmod.Polynomial().implicit and Kmod.B1Spline().implicit


def test_random_fourier_map_approximates_rbf_and_is_order_independent():
    from streammkl.core import OnlineMKL

    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 3)) * 0.5
    k = Kmod.RBF(0.5, n_components=4000)
    m = OnlineMKL(kernels=(k,), seed=3)
    m.decision(X[0])
    L = m._layout
    Z = np.sqrt(2 / 4000) * np.cos(X @ L.rff_w.T + L.rff_b)
    err = np.abs(Z @ Z.T - k.gram(X)).max()
    assert err < 0.08  # Monte Carlo error ~ 1/sqrt(D)
    # columns are seeded by feature key: the same names in another order give the same columns
    a = k.fourier_columns(["b", "a"], seed=3)
    b = k.fourier_columns(["a", "b"], seed=3)
    np.testing.assert_array_equal(a[:, 0], b[:, 1])
    assert not np.allclose(k.fourier_columns(["a"], seed=4), b[:, :1])


def test_b1_spline_is_sparse():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(200, 4))
    G = Kmod.B1Spline(h=1.0).gram(X)
    assert np.mean(G == 0.0) > 0.8


def test_bad_kernel_parameters_are_rejected_with_the_parameter_named():
    with pytest.raises(ValueError, match="gamma"):
        Kmod.RBF(-1.0)
    with pytest.raises(ValueError, match="degree"):
        Kmod.Polynomial(1.5)
    with pytest.raises(ValueError, match="h must"):
        Kmod.B1Spline(0)
    with pytest.raises(ValueError, match="unknown kernel type"):
        Kmod.from_spec({"type": "Sigmoid"})
    with pytest.raises(ValueError, match="by name"):
        Kmod.Linear(features=("age",)).feature_indices(3)


def _loss_instances():
    out = []
    for name, cls in inspect.getmembers(Lmod, inspect.isclass):
        if issubclass(cls, Lmod.Loss) and cls is not Lmod.Loss:
            out.append(cls())
    return out


@pytest.mark.parametrize("loss", _loss_instances(), ids=repr)
def test_loss_gradient_matches_finite_differences(loss):
    rng = np.random.default_rng(5)
    K = 4 if loss.multiclass else 1
    checked = 0
    for _ in range(200):
        s = rng.normal(size=K) * 2
        y = {"binary": rng.choice([-1.0, 1.0]), "multiclass": float(rng.integers(K))}.get(
            loss.task, float(rng.normal() * 2)
        )
        _val, g = loss.value_grad(s, y)
        h = 1e-6
        fd = np.array([(loss.value(s + h * e, y) - loss.value(s - h * e, y)) / (2 * h)
                       for e in np.eye(K)])  # fmt: skip
        # skip points within h of a kink (hinge, eps-insensitive, Huber, Crammer-Singer)
        kinked = any(
            abs(np.diff([loss.value(s + t * e, y) for t in (-h, 0, h)], n=2)[0]) > 1e-9
            for e in np.eye(K)
        )
        if kinked:
            continue
        np.testing.assert_allclose(g, fd, atol=1e-5)
        if loss.lipschitz is not None:
            assert np.linalg.norm(g) <= loss.lipschitz + 1e-12
        checked += 1
    assert checked > 100


def _additive_features(k, X, keys, seed):
    """The additive map's features by hand: sqrt(2 / (R d)) cos(w x_j + b) per component."""
    freqs, offsets = k.components(keys, seed)
    R, d = k.n_components, X.shape[1]
    cols = [np.cos(np.outer(X[:, j], freqs[j * R : (j + 1) * R]) + offsets[j * R : (j + 1) * R])
            for j in range(d)]  # fmt: skip
    return np.sqrt(2.0 / (R * d)) * np.hstack(cols)


def test_quadrature_additive_map_is_the_same_kernel_for_every_seed_and_near_the_gaussian():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(60, 3))
    keys = ["a", "b", "c"]
    k = Kmod.AdditiveRBF(0.7, 16, draws="quadrature")
    assert k.name == "additive-rff(gamma=0.7,D=16/input,quadrature)"
    assert Kmod.from_spec(k.to_spec()) == k and Kmod.from_spec(k.to_spec()).name == k.name
    # the brute-force reference: the quadrature kernel (1/d) sum_j (1/P) sum_i cos(w_i (x-y))
    P = 8
    w = np.sqrt(2 * 0.7) * np.array([_half_normal_midpoint(i, P) for i in range(P)])
    diff = X[:, None, :] - X[None, :, :]
    want = np.cos(diff[..., None] * w).mean(axis=(2, 3))
    grams = []
    for seed in (0, 1, 7):
        Z = _additive_features(k, X, keys, seed)
        np.testing.assert_allclose(np.sum(Z * Z, axis=1), 1.0, rtol=1e-12)  # exact norms
        grams.append(Z @ Z.T)
        np.testing.assert_allclose(grams[-1], want, atol=1e-12)
    assert not np.allclose(k.components(keys, 0)[1], k.components(keys, 1)[1])  # offsets differ
    # near the exact additive Gaussian kernel, an order closer than 16 i.i.d. components
    exact = k.gram(X)
    quad_err = np.abs(grams[0] - exact).max()
    iid = Kmod.AdditiveRBF(0.7, 16)
    iid_err = np.mean([np.abs(_additive_features(iid, X, keys, s) @ _additive_features(
        iid, X, keys, s).T - exact).max() for s in range(5)])  # fmt: skip
    assert quad_err < 0.05 and quad_err < iid_err / 3


def test_quadrature_components_of_many_inputs_are_each_inputs_own_draws_bit_for_bit():
    """The even-R quadrature components of several inputs, drawn at once, are the per-input
    draws concatenated (the counter-based ``uniforms``; numpy's ``default_rng(stable_seed(seed,
    name, key))`` for a model saved before state version 6), and a kernel's Fourier columns
    are each key's own standard normals times ``sqrt(2 gamma)``."""
    from streammkl.core.kernel_base import DRAWS, NUMPY_DRAWS, normals, stable_seed, uniforms

    k = Kmod.AdditiveRBF(0.7, 16, draws="quadrature")
    keys = [f"w{i}" for i in range(700)]  # past the seedings made by numpy itself
    P, std = 8, np.sqrt(2 * 0.7)
    for draws in (NUMPY_DRAWS, DRAWS):
        freqs, offsets = k.components(keys, 3, draws)
        for j in (0, 1, 350, 699):
            if draws == NUMPY_DRAWS:  # a model saved before state version 6
                rng = np.random.default_rng(stable_seed(3, k.name, keys[j]))
                b = rng.uniform(0, 2 * np.pi, P)
            else:
                b = uniforms(3, k.name, [keys[j]], P, 0.0, 2 * np.pi)[0]
            f, o = freqs[16 * j : 16 * (j + 1)], offsets[16 * j : 16 * (j + 1)]
            np.testing.assert_array_equal(f[0::2], f[1::2])
            np.testing.assert_array_equal(f[0::2], Kmod._strata(P) * std)
            np.testing.assert_array_equal(o[0::2], b)
            np.testing.assert_array_equal(o[1::2], b + 0.5 * np.pi)
        rbf = Kmod.RBF(0.3, n_components=64)
        cols = rbf.fourier_columns(keys[:5], 3, draws)
        assert cols.shape == (64, 5)
        for j, key in enumerate(keys[:5]):
            if draws == NUMPY_DRAWS:
                z = np.random.default_rng(stable_seed(3, rbf.name, key)).standard_normal(64)
                np.testing.assert_array_equal(cols[:, j], z * np.sqrt(2 * 0.3))
            else:
                z = normals(3, rbf.name, [key], 64)[0]
                np.testing.assert_allclose(cols[:, j], z * np.sqrt(2 * 0.3), rtol=1e-15)


def _half_normal_midpoint(i: int, P: int) -> float:
    """Phi^-1((1 + (i + 1/2) / P) / 2) by bisection on math.erf (independent of scipy)."""
    import math

    target = 0.5 * (1.0 + (i + 0.5) / P)
    lo, hi = 0.0, 10.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if 0.5 * (1.0 + math.erf(mid / math.sqrt(2.0))) < target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def test_additive_draws_keep_old_specs_and_refuse_unknown_ones():
    old = {"type": "AdditiveRBF", "gamma": 1.0, "n_components": 16}  # a spec from before draws
    k = Kmod.from_spec(old)
    assert k.draws == "random" and k.name == "additive-rff(gamma=1,D=16/input)"
    assert "draws" not in k.to_spec()
    odd = Kmod.AdditiveRBF(1.0, 5, draws="quadrature")
    freqs, offsets = odd.components(["a"], 0)
    assert freqs[0] == freqs[1] and offsets[1] - offsets[0] == pytest.approx(np.pi / 2)
    assert freqs.size == 5 and np.isfinite(freqs).all()
    with pytest.raises(ValueError, match="draws"):
        Kmod.AdditiveRBF(1.0, 16, draws="sobol")


def test_stumps_map_matches_its_brute_force_kernel_with_exact_norms():
    from streammkl.core import OnlineMKL

    rng = np.random.default_rng(5)
    X = rng.normal(size=(40, 3))
    X[3, 1] = Kmod.AdditiveStumps(8).thresholds()[2]  # a value on a threshold counts as above
    k = Kmod.AdditiveStumps(8, name=None)
    assert k.name == "stumps(D=8/input)" and not k.implicit and k.n_components == 8
    assert Kmod.from_spec(k.to_spec()) == k and Kmod.from_spec(k.to_spec()).name == k.name
    t = np.array([_normal_quantile((i + 0.5) / 8) for i in range(8)])
    np.testing.assert_allclose(k.thresholds(), t, rtol=1e-9)

    # brute force: (1/(R d)) sum_j sum_i a_i(x_j) a_i(y_j), a_i(v) = s(v - t_i) - s(-t_i)
    # with s(0) = +1 (anchored at 0: the stumps between 0 and v)
    def s(v):
        return 1 if v >= 0 else -1

    def stump(v, ti):
        return s(v - ti) - s(-ti)

    want = np.zeros((40, 40))
    for a in range(40):
        for b in range(40):
            want[a, b] = np.mean([[stump(X[a, j], ti) * stump(X[b, j], ti)
                                   for ti in k.thresholds()] for j in range(3)])  # fmt: skip
    np.testing.assert_allclose(k.gram(X), want, rtol=1e-12, atol=1e-15)
    model = OnlineMKL(kernels=(k,), seed=0)
    model.learn(X[0], 1.0)
    L = model.layout
    Z = np.zeros((40, L.width))
    for i, x in enumerate(X):
        nb.explicit_phi(x, L.ex_blocks, L.ex_off, L.ex_kind, L.ex_norm, L.phi_src, L.rff_wt,
                        L.rff_b, Z[i])  # fmt: skip
    np.testing.assert_allclose(Z @ Z.T, want, atol=1e-12)
    np.testing.assert_array_equal(Z[:, L.ex_used[0] :], 0.0)  # the layout's free room reads 0
    x0 = X[0].copy()
    x0[1] = 0.0  # an input at 0 has no feature
    z0 = np.zeros(L.width)
    nb.explicit_phi(x0, L.ex_blocks, L.ex_off, L.ex_kind, L.ex_norm, L.phi_src, L.rff_wt,
                    L.rff_b, z0)  # fmt: skip
    assert not z0[8:16].any() and z0[:8].any()


def _normal_quantile(p: float) -> float:
    """Phi^-1(p) by bisection on math.erf (independent of scipy)."""
    import math

    lo, hi = -10.0, 10.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if 0.5 * (1.0 + math.erf(mid / math.sqrt(2.0))) < p:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def test_stumps_learn_a_threshold_with_ftrl_and_the_group_lasso():
    from streammkl.core import OnlineMKL, regularizers, schedules

    rng = np.random.default_rng(6)
    X = rng.normal(size=(3000, 4))
    y = np.where((X[:, 2] > 0.4) | (X[:, 0] < -0.8), 1.0, -1.0)  # two one-input rules
    bank = (Kmod.Linear(), Kmod.AdditiveStumps(16), Kmod.RBF(0.05, n_components=64))
    model = OnlineMKL(kernels=bank, loss=Lmod.Logistic(), schedule=schedules.FTRL(1.0),
                      regularizer=regularizers.GroupLasso(1e-2), seed=0)  # fmt: skip
    hits = 0
    for i, (x, t) in enumerate(zip(X, y, strict=True)):
        if i >= 2000:
            hits += np.sign(np.ravel(model.decision(x))[0]) == t
        model.learn(x, t)
    assert hits / 1000 > 0.85  # measured 0.887 (16 fixed thresholds: 0.4, -0.8 fall between)
    norms = model.block_norms
    assert norms[1] == max(norms)  # the stumps carry the rule
