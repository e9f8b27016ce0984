"""OnlineMKL's public behaviour: API, validation, persistence, runtime kernel changes."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from streammkl.core import OnlineMKL, kernels, losses, regularizers, schedules


def _bank():
    return (kernels.Linear(), kernels.RBF(gamma=0.5), kernels.Polynomial(degree=2))


def _data(n=600, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, np.where(X[:, 0] + X[:, 1] ** 2 - 1 > 0, 1.0, -1.0)


def test_issue_api_example_learns():
    m = OnlineMKL(
        kernels=_bank(),
        loss=losses.Hinge(),
        regularizer=regularizers.SquaredGroupLasso(lam=1e-3),
        schedule=schedules.InvSqrt(eta0=1.0),
        radius=None,
        budget=None,
        seed=0,
    )
    assert np.all(m.kernel_weights == 0) and m.kernel_weights.shape == (3,)
    X, Y = _data()
    errors = 0
    for x, y in zip(X, Y, strict=True):
        errors += np.sign(m.decision(x)) != y
        m.learn(x, y)
    assert errors / len(X) < 0.25
    assert isinstance(m.decision(X[0]), float)
    assert m.block_norms.shape == (3,) and np.all(m.block_norms >= 0)
    assert abs(m.kernel_weights.sum() - 1) < 1e-12
    assert m.n_support > 0
    loss, reg = m.objective_terms(X[0], Y[0])
    assert loss >= 0 and reg == pytest.approx(0.5e-3 * m.block_norms.sum() ** 2)


def test_multiclass_scores_and_growing_classes():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(900, 2))
    Y = np.argmax(X @ np.array([[1, 0, -1], [0, 1, -1]]), axis=1)
    m = OnlineMKL(kernels=(kernels.Linear(), kernels.RBF(1.0)), loss=losses.MulticlassHinge())
    for x, y in zip(X[:300], np.minimum(Y[:300], 1), strict=True):
        m.learn(x, int(y))
    assert m.n_outputs == 2
    for x, y in zip(X[300:], Y[300:], strict=True):
        m.learn(x, int(y))
    assert m.n_outputs == 3 and m.decision(X[0]).shape == (3,)
    acc = np.mean([np.argmax(m.decision(x)) == y for x, y in zip(X[-200:], Y[-200:], strict=True)])
    assert acc > 0.85


def test_losses_of_classes_not_met_yet_leave_the_model_as_it_is():
    # The regret comparator's warm start evaluated a window holding classes its model had not
    # met: the loss was computed over the old scores while the targets widened the model, and
    # the compiled loss indexed past the end of the scores (heap corruption in the daemon).
    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 2))
    m = OnlineMKL(kernels=(kernels.Linear(), kernels.RBF(1.0, n_components=8)),
                  loss=losses.Softmax(), averages=(10.0,))  # fmt: skip
    m.learn_many(X, np.arange(60) % 2)
    digest = m.digest()
    Y = np.arange(60) % 40  # classes 2..39 never met
    values = m.losses_many(X, Y)
    loss, reg = m.objective_terms(X[5], 39)
    assert m.digest() == digest and m.n_outputs == 2  # a reading changes nothing
    # an unmet class scores 0, as after learning widens the model for it (zero weights)
    scores = np.hstack([m.decision_many(X), np.zeros((60, 38))])
    expected = [losses.Softmax().value(s, y) for s, y in zip(scores, Y, strict=True)]
    np.testing.assert_allclose(values, expected, rtol=1e-12)
    assert loss == pytest.approx(losses.Softmax().value(scores[5], 39), rel=1e-12)
    assert reg == m.regularization_value()
    with pytest.raises(ValueError, match="class index"):
        losses.Softmax().value(np.zeros(2), 5.0)


def test_new_classes_in_one_run_widen_the_model_as_one_at_a_time():
    rng = np.random.default_rng(4)
    X, Y = rng.normal(size=(80, 2)), rng.permutation(np.arange(80) % 9)
    a = OnlineMKL(kernels=(kernels.Linear(),), loss=losses.MulticlassHinge())
    b = OnlineMKL(kernels=(kernels.Linear(),), loss=losses.MulticlassHinge())
    for x, y in zip(X, Y, strict=True):
        a.learn(x, int(y))
    b.learn_many(X, Y)
    assert a.digest() == b.digest() and b.n_outputs == 9
    with pytest.raises(ValueError, match="integer class index"):
        b.learn_many(X[:2], [20, -1])  # refused before anything changes (no widening to 21)
    assert b.digest() == a.digest()


def test_learn_many_equals_repeated_learn():
    X, Y = _data(300)
    a, b = OnlineMKL(kernels=_bank(), budget=50), OnlineMKL(kernels=_bank(), budget=50)
    losses_a = [a.learn(x, y) for x, y in zip(X, Y, strict=True)]
    losses_b, _ = b.learn_many(X, Y)
    np.testing.assert_allclose(losses_a, losses_b, rtol=1e-12)
    assert a.digest() == b.digest()


def test_state_round_trip_is_exact_and_json_serialisable():
    X, Y = _data(400)
    m = OnlineMKL(kernels=(*_bank(), kernels.RBF(0.1, n_components=16)), budget=64, seed=5)
    m.learn_many(X[:200], Y[:200])
    meta, arrays = m.to_state()
    json.dumps(meta)  # no pickle needed
    copy = OnlineMKL.from_state(json.loads(json.dumps(meta)), arrays)
    assert copy.digest() == m.digest()
    m.learn_many(X[200:], Y[200:])
    copy.learn_many(X[200:], Y[200:])
    assert copy.digest() == m.digest()
    assert pickle.loads(pickle.dumps(m)).digest() == m.digest()


def test_newer_state_version_is_refused_clearly():
    meta, arrays = OnlineMKL(kernels=_bank()).to_state()
    meta["version"] = 99
    with pytest.raises(ValueError, match="newer"):
        OnlineMKL.from_state(meta, arrays)


def test_add_and_remove_kernel_keep_other_blocks():
    X, Y = _data(300)
    m = OnlineMKL(kernels=_bank(), budget=100)
    m.learn_many(X, Y)
    before = dict(zip(m.names, m.block_norms, strict=True))
    f_before = m.block_decisions(X[0])
    m.add_kernel(kernels.B1Spline(h=2.0))
    assert m.names[-1] == "b1(h=2)" and m.block_norms[-1] == 0
    np.testing.assert_allclose(m.block_decisions(X[0])[:3], f_before)
    m.remove_kernel("rbf(gamma=0.5)")
    after = dict(zip(m.names, m.block_norms, strict=True))
    assert after["linear"] == before["linear"] and after["poly2"] == before["poly2"]
    m.learn_many(X, Y)  # keeps learning with the new shape
    from tests.naive import support_block_norms

    np.testing.assert_allclose(m.block_norms, support_block_norms(m), rtol=1e-8)
    with pytest.raises(ValueError, match="already"):
        m.add_kernel(kernels.Linear())
    with pytest.raises(KeyError):
        m.remove_kernel("nope")


def test_new_inputs_mid_stream_keep_the_model():
    X, Y = _data(200, d=3)
    m = OnlineMKL(kernels=(kernels.Linear(), kernels.RBF(0.5)))
    m.learn_many(X, Y)
    f = m.decision(X[0])
    wider = np.concatenate([X[0], [0.0, 0.0]])
    assert m.decision(wider) == pytest.approx(f)  # new inputs are 0 for the old model
    with pytest.raises(ValueError, match="features"):
        m.decision(X[0][:2])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(kernels=()), "at least one kernel"),
        (dict(kernels=(kernels.RBF(1.0), kernels.RBF(1.0))), "distinct"),
        (dict(budget=0), "budget"),
        (dict(budget_policy="random"), "budget policy"),
        (dict(radius=-1.0), "radius"),
        (dict(radius="auto", regularizer=regularizers.GroupLasso(0.1)), "auto"),
        (dict(kernels=(kernels.RBF(1.0),), regularizer=regularizers.L1(0.1)), "explicit"),
        (dict(kernels=(kernels.RBF(1.0),), average=True), "explicit"),
    ],
)
def test_bad_configuration_is_rejected(kwargs, match):
    with pytest.raises(ValueError, match=match):
        OnlineMKL(**kwargs)


def test_bad_examples_are_rejected_without_changing_the_model():
    m = OnlineMKL(kernels=_bank())
    m.learn(np.ones(3), 1)
    digest = m.digest()
    with pytest.raises(ValueError, match="not finite"):
        m.learn(np.array([1.0, np.nan, 0.0]), 1)
    with pytest.raises(ValueError, match="-1, \\+1"):
        m.learn(np.ones(3), 0)
    with pytest.raises(ValueError, match="1-D"):
        m.learn(np.ones((2, 3)), 1)
    assert m.digest() == digest


def test_averaged_model_is_the_mean_of_the_iterates():
    X, Y = _data(200)
    m = OnlineMKL(kernels=(kernels.Linear(),), average=True, regularizer=regularizers.L2(0.01))
    iterates = []
    for x, y in zip(X, Y, strict=True):
        m.learn(x, y)
        iterates.append(m._state.scale[0] * m._state.w[0].copy())
    probe = X[3]
    assert m.decision(probe, averaged=True) == pytest.approx(np.mean(iterates, axis=0) @ probe)


def test_group_lq_kernel_weights_use_power_two_minus_q():
    X, Y = _data(300)
    m = OnlineMKL(kernels=_bank(), regularizer=regularizers.GroupLq(1e-2, q=1.5))
    m.learn_many(X, Y)
    b = m.block_norms
    np.testing.assert_allclose(m.kernel_weights, b**0.5 / np.sum(b**0.5))
    assert np.all(b > 0)  # non-sparse MKL keeps every kernel
