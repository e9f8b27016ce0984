"""SequenceLabeler: losses vs brute force, CRF gradient, exact norms, regularization, learning."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from streammkl.core import kernels, regularizers, schedules
from streammkl.structured import TRANSITION, SequenceLabeler


def _chain_task(seed, n, K=4, d=6, noise=1.6):
    """Markov labels (two successors each) as noisy class means: a digit-strings-like task."""
    rng = np.random.default_rng(seed)
    means = np.random.default_rng(99).normal(size=(K, d))
    succ = [(k + 1) % K for k in range(K)], [(k + 2) % K for k in range(K)]
    data = []
    for _ in range(n):
        T = int(rng.integers(3, 9))
        y = [int(rng.integers(K))]
        for _ in range(T - 1):
            y.append(succ[int(rng.random() < 0.2)][y[-1]])
        X = means[y] + rng.normal(0, noise, (T, d))
        data.append((X, y))
    return data


def _trained(loss, n=30, **kw):
    kw.setdefault("kernels", (kernels.Linear(), kernels.RBF(gamma=0.2)))
    model = SequenceLabeler(loss=loss, schedule=schedules.InvSqrt(0.5), **kw)
    for X, y in _chain_task(1, n):
        model.learn_one(X, y)
    return model


def _implicit_sqnorms(model):
    """||theta_m||^2 recomputed from the stored support set with the kernels' exact Gram."""
    S = model._state
    n = S.n_support
    out = {}
    for m, k in enumerate(model.kernels):
        if not k.implicit:
            continue
        c = S.scale[m] * S.coef[m, :n]
        G = k.gram(S.sx[:n], S.sx[:n])
        out[k.name] = float(c @ (G * (S.sv[:n] @ S.sv[:n].T)) @ c)
    return out


@pytest.mark.parametrize("loss", ["hinge", "crf"])
def test_loss_matches_brute_force_enumeration(loss):
    model = _trained(loss, n=20)
    labels = model.labels
    rng = np.random.default_rng(5)
    for T in (1, 2, 4):
        X = rng.normal(size=(T, 6))
        y = [labels[i] for i in rng.integers(0, len(labels), T)]
        unary, trans, _ = model._potentials(X, len(labels))
        yi = np.array([labels.index(v) for v in y])
        score = lambda p: unary[np.arange(T), p].sum() + trans[p[:-1], p[1:]].sum()  # noqa: E731
        paths = [np.array(p) for p in itertools.product(range(len(labels)), repeat=T)]
        if loss == "hinge":
            expected = max(score(p) + np.sum(p != yi) for p in paths) - score(yi)
        else:
            s = np.array([score(p) for p in paths])
            expected = np.log(np.exp(s - s.max()).sum()) + s.max() - score(yi)
        assert model.loss_one(X, y) == pytest.approx(expected, abs=1e-10)


def test_crf_gradient_matches_finite_differences():
    model = _trained("crf", n=25, kernels=(kernels.Linear(),))
    X, y = _chain_task(7, 1)[0]
    yi = np.array([model.labels.index(v) for v in y])
    unary, trans, _ = model._potentials(X, len(model.labels))
    _, V, G0 = model._loss_direction(unary, trans, yi)
    grad_w = -V.T @ X  # dL/dtheta for the explicit linear block (K x d)
    grad_t = -G0
    S = model._state
    h = 1e-6
    for k, j in [(0, 0), (1, 3), (2, 5), (3, 1)]:
        S.w[k, j] += h / S.scale[0]
        up = model.loss_one(X, y)
        S.w[k, j] -= 2 * h / S.scale[0]
        dn = model.loss_one(X, y)
        S.w[k, j] += h / S.scale[0]
        assert (up - dn) / (2 * h) == pytest.approx(grad_w[k, j], abs=1e-7)
    for a, b in [(0, 1), (2, 2), (3, 0)]:
        model.transition[a, b] += h
        up = model.loss_one(X, y)
        model.transition[a, b] -= 2 * h
        dn = model.loss_one(X, y)
        model.transition[a, b] += h
        assert (up - dn) / (2 * h) == pytest.approx(grad_t[a, b], abs=1e-7)


@pytest.mark.parametrize("loss", ["hinge", "crf"])
def test_one_round_is_a_gradient_step_then_prox(loss):
    """lam = 0: theta_{t+1} = theta_t - eta g exactly; then L2 shrinks by 1/(1 + eta lam)."""
    for lam in (0.0, 0.3):
        model = _trained(
            loss,
            n=10,
            kernels=(kernels.Linear(),),
            regularizer=regularizers.L2(lam),
            learn_transition_weight=True,
        )
        X, y = _chain_task(3, 1)[0]
        yi = np.array([model.labels.index(v) for v in y])
        unary, trans, _ = model._potentials(X, len(model.labels))
        _, V, G0 = model._loss_direction(unary, trans, yi)
        theta = model._state.scale[0] * model._state.w.copy()
        A = model.transition.copy()
        eta = model._schedule.eta(model._schedule.t + 1)
        model.learn_one(X, y)
        shrink = 1.0 / (1.0 + eta * lam)
        np.testing.assert_allclose(
            model._state.scale[0] * model._state.w, shrink * (theta + eta * V.T @ X), atol=1e-12
        )
        np.testing.assert_allclose(model.transition, shrink * (A + eta * G0), atol=1e-12)


@pytest.mark.parametrize("policy", ["oldest", "smallest", "merge", "project"])
@pytest.mark.parametrize("loss", ["hinge", "crf"])
def test_budget_bounds_support_and_keeps_norms_exact(policy, loss):
    """Every position's budget step corrects the scores of the later positions of its sequence
    (``shift_scores``), which the norm updates of those positions read: exact norms prove it."""
    kern = (kernels.RBF(gamma=0.2), kernels.Polynomial(degree=2), kernels.Linear())
    model = SequenceLabeler(
        kernels=kern,
        loss=loss,
        budget=25,
        budget_policy=policy,
        regularizer=regularizers.SquaredGroupLasso(1e-3),
        radius=5.0,
    )
    for X, y in _chain_task(2, 40):
        model.learn_one(X, y)
        assert model.n_support <= 25
    assert model.n_support == 25
    exact = _implicit_sqnorms(model)
    for name, sq in exact.items():
        assert model.block_norms[name] == pytest.approx(np.sqrt(sq), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("loss", ["hinge", "crf"])
def test_tracked_kernel_norms_equal_recomputed_norms(loss):
    kern = (kernels.RBF(gamma=0.2), kernels.B1Spline(h=4.0), kernels.Polynomial(degree=3))
    model = _trained(loss, n=40, kernels=kern, regularizer=regularizers.GroupLq(1e-2, q=1.5))
    exact = _implicit_sqnorms(model)
    assert len(exact) == 3
    for name, sq in exact.items():
        assert sq > 0
        assert model.block_norms[name] == pytest.approx(np.sqrt(sq), rel=1e-9)


def test_projection_bounds_the_norm_of_all_blocks():
    model = SequenceLabeler(
        kernels=(kernels.Linear(), kernels.RBF(gamma=0.2)),
        radius=0.7,
        regularizer=regularizers.L2(0.0),
        schedule=schedules.Constant(1.0),
    )
    for X, y in _chain_task(4, 30):
        model.learn_one(X, y)
        total = np.sqrt(sum(b * b for b in model.block_norms.values()))
        assert total <= 0.7 * (1 + 1e-12)
    assert total == pytest.approx(0.7)


def test_sparse_mkl_zeroes_a_useless_kernel():
    data = _chain_task(5, 60, d=6, noise=0.5)
    rng = np.random.default_rng(0)
    data = [(np.c_[X, 0.05 * rng.normal(size=(len(X), 6))], y) for X, y in data]  # weak block
    kern = (
        kernels.Linear(features=range(6), name="signal"),
        kernels.Linear(features=range(6, 12), name="noise"),
    )
    model = SequenceLabeler(kernels=kern, regularizer=regularizers.SquaredGroupLasso(0.2))
    for i, (X, y) in enumerate(data):
        model.learn_one(X, y)
        if i >= 40:  # exactly zero, round after round, while the signal block is alive
            assert model.kernel_weights == {"signal": 1.0, "noise": 0.0}
            assert model.block_norms["noise"] == 0.0 and model.block_norms["signal"] > 1.0
    assert model.active_kernels == ["signal"]


def test_fixed_transition_weight_leaves_the_bigram_block_unregularized():
    strong = regularizers.GroupLasso(1e3)  # zeroes every regularized block every round
    fixed = _trained("hinge", n=15, regularizer=strong)
    learned = _trained("hinge", n=15, regularizer=strong, learn_transition_weight=True)
    assert TRANSITION not in fixed.kernel_weights
    assert fixed.block_norms[TRANSITION] > 0.5
    assert all(v == 0.0 for k, v in fixed.block_norms.items() if k != TRANSITION)
    assert all(v == 0.0 for v in learned.block_norms.values())
    assert set(learned.kernel_weights) == {"linear", "rbf(gamma=0.2)", TRANSITION}


def test_transitions_beat_independent_characters():
    """The bigram block matters: sequences beat the same learner fed one character at a time."""
    train, test = _chain_task(10, 150), _chain_task(11, 150)
    kern = (kernels.Linear(), kernels.RBF(gamma=0.2))
    accs = {}
    for mode in ("sequence", "character"):
        model = SequenceLabeler(
            kernels=kern,
            schedule=schedules.InvSqrt(0.3),
            regularizer=regularizers.SquaredGroupLasso(1e-3),
        )
        for _ in range(2):
            for X, y in train:
                if mode == "sequence":
                    model.learn_one(X, y)
                else:
                    for i in range(len(y)):
                        model.learn_one(X[i : i + 1], y[i : i + 1])
        hits = []
        for X, y in test:
            if mode == "sequence":
                pred = model.predict_one(X)
            else:
                pred = [model.predict_one(X[i : i + 1])[0] for i in range(len(y))]
            hits.extend(np.equal(pred, y))
        accs[mode] = float(np.mean(hits))
    assert accs["character"] < 0.75
    assert accs["sequence"] > accs["character"] + 0.1


def test_crf_marginals_are_distributions_and_hinge_refuses():
    model = _trained("crf", n=20)
    X, _ = _chain_task(8, 1)[0]
    marg = model.predict_marginals_one(X)
    assert len(marg) == len(X)
    for row in marg:
        assert set(row) == set(model.labels)
        assert sum(row.values()) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="loss='crf'"):
        _trained("hinge", n=2).predict_marginals_one(X)


def test_label_set_grows_without_touching_learned_blocks():
    model = SequenceLabeler(kernels=(kernels.Linear(), kernels.RBF(gamma=0.3)))
    assert model.predict_one(np.ones((2, 3))) is None
    model.learn_one(np.eye(3), ["a", "b", "a"])
    w, A, n = model._state.w.copy(), model.transition.copy(), model.n_support
    norms = model.block_norms
    model._label_indices([("c", 1), "a", 7], grow=True)
    assert model.labels == ["a", "b", ("c", 1), 7]
    np.testing.assert_array_equal(model._state.w[:2], w)
    np.testing.assert_array_equal(model._state.w[2:], 0.0)
    np.testing.assert_array_equal(model.transition[:2, :2], A)
    assert np.count_nonzero(model.transition[2:]) == np.count_nonzero(model.transition[:, 2:]) == 0
    assert model.block_norms == norms and model.n_support == n
    for _ in range(30):  # the new labels become predictable once learned
        model.learn_one(np.eye(3) * 3, [("c", 1), 7, ("c", 1)])
    assert model.predict_one(np.eye(3) * 3) == [("c", 1), 7, ("c", 1)]


def test_dict_inputs_equal_array_inputs():
    data = _chain_task(12, 30, d=4)
    kern = (kernels.Linear(), kernels.RBF(gamma=0.3))
    a = SequenceLabeler(kernels=kern, loss="crf")
    b = SequenceLabeler(kernels=kern, loss="crf")
    names = ["f0", "f1", "f2", "f3"]
    for X, y in data:
        a.learn_one(X, y)
        b.learn_one([{n: v for n, v in zip(names, row, strict=True) if v != 0} for row in X], y)
    X, _ = data[0]
    assert a.predict_one(X) == b.predict_one([dict(zip(names, r, strict=True)) for r in X])
    for k, v in a.block_norms.items():
        assert b.block_norms[k] == pytest.approx(v, rel=1e-12)
    # dict inputs may introduce new features later: old blocks are kept
    b.learn_one([{"f0": 1.0, "new": 2.0}], [0])
    assert b.feature_keys == [*names, "new"]


@pytest.mark.parametrize(
    "xs,ys,err,match",
    [
        (np.ones((3, 2)), [0, 1], ValueError, "ys has 2 labels but xs has 3"),
        (np.ones((0, 2)), [], ValueError, "non-empty"),
        ([], [], ValueError, "empty sequence"),
        (np.array([[1.0, np.nan]]), [0], ValueError, r"xs\[0\]\[1\]"),
        ([{"a": "x"}], [0], ValueError, r"xs\[0\]\['a'\]"),
        (np.ones((1, 2)), [None], ValueError, r"ys\[0\] is None"),
        (np.ones((1, 2)), [[1]], TypeError, r"ys\[0\].*not hashable"),
        ("abc", [0, 1, 2], TypeError, "xs must be"),
    ],
)
def test_bad_input_names_the_field(xs, ys, err, match):
    model = SequenceLabeler()
    with pytest.raises(err, match=match):
        model.learn_one(xs, ys)


def test_bad_configuration_is_refused():
    with pytest.raises(ValueError, match="loss must be"):
        SequenceLabeler(loss="svm")
    with pytest.raises(ValueError, match="distinct"):
        SequenceLabeler(kernels=(kernels.Linear(), kernels.Linear()))
    with pytest.raises(ValueError, match="transition"):
        SequenceLabeler(kernels=(kernels.Linear(name="transition"),))
    with pytest.raises(ValueError, match="explicit blocks"):
        SequenceLabeler(kernels=(kernels.RBF(),), regularizer=regularizers.L1(0.1))
    with pytest.raises(ValueError, match="radius"):
        SequenceLabeler(radius=-1.0)
    model = SequenceLabeler()
    model.learn_one(np.ones((2, 3)), [0, 1])
    with pytest.raises(ValueError, match="array sequences"):
        model.learn_one([{"a": 1.0}], [0])
    with pytest.raises(ValueError, match="has 2 features per position; the model has 3"):
        model.predict_one(np.ones((2, 2)))


@pytest.mark.parametrize("loss", ["hinge", "crf"])
def test_average_kernel_mapping_is_exact(loss):
    """M blocks with L2(M lam), InvSqrt(eta0 / M), transition_weight=M == the average kernel.

    Two explicit linear kernels on disjoint features average to a linear kernel on x / sqrt(2).
    """
    data = _chain_task(13, 60, d=6)
    halves = (
        kernels.Linear(features=range(3), name="a"),
        kernels.Linear(features=range(3, 6), name="b"),
    )
    blocks = SequenceLabeler(
        kernels=halves,
        loss=loss,
        regularizer=regularizers.L2(0.2),
        schedule=schedules.InvSqrt(0.25),
        transition_weight=2.0,
    )
    average = SequenceLabeler(
        kernels=(kernels.Linear(),),
        loss=loss,
        regularizer=regularizers.L2(0.1),
        schedule=schedules.InvSqrt(0.5),
    )
    for X, y in data:
        assert blocks.predict_one(X) == average.predict_one(X / np.sqrt(2))
        blocks.learn_one(X, y)
        average.learn_one(X / np.sqrt(2), y)
        assert blocks.last_loss == pytest.approx(average.last_loss, rel=1e-9, abs=1e-12)
    X, _ = data[0]
    ub, tb, _ = blocks._potentials(X, 4)
    ua, ta, _ = average._potentials(X / np.sqrt(2), 4)
    np.testing.assert_allclose(ub, ua, atol=1e-10)
    np.testing.assert_allclose(tb, ta, atol=1e-10)
    assert blocks.kernel_weights == {"a": 0.5, "b": 0.5}


def test_coordinate_regularizers_work_on_explicit_blocks():
    """SparseGroupLasso (L1 inside the blocks) on explicit blocks: exact zeros, exact norms."""
    kern = (
        kernels.Linear(features=range(3), name="a"),
        kernels.Linear(features=range(3, 6), name="b"),
    )
    model = SequenceLabeler(
        kernels=kern, loss="crf", regularizer=regularizers.SparseGroupLasso(2.0, 0.2)
    )
    for X, y in _chain_task(1, 50):
        model.learn_one(X, y)
    S = model._state
    assert 0 < np.count_nonzero(S.w == 0.0) < S.w.size
    for m, name in enumerate(("a", "b")):
        theta = S.scale[m] * S.w[:, 3 * m : 3 * m + 3]
        assert model.block_norms[name] == pytest.approx(np.linalg.norm(theta), rel=1e-12)
    l1 = sum(S.scale[m] * np.abs(S.w[:, 3 * m : 3 * m + 3]).sum() for m in range(2))
    b = np.array([model.block_norms["a"], model.block_norms["b"]])
    assert model.regularization_value() == pytest.approx(2.0 * (0.2 * b.sum() + 0.8 * l1))


def test_rejected_input_changes_nothing():
    model = SequenceLabeler()
    with pytest.raises(ValueError, match="ys has 2 labels but xs has 1"):
        model.learn_one([{"a": 1.0, "b": 2.0}], [0, 1])
    assert model.input_mode is None and model.feature_keys == [] and model.labels == []
    model.learn_one(np.ones((2, 3)), ["x", "y"])
    digest = model.digest()
    with pytest.raises(TypeError, match="not hashable"):
        model.learn_one(np.ones((2, 5)), ["z", {}])
    assert model.digest() == digest and model.labels == ["x", "y"]
