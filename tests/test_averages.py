"""Predictions from averaged iterates: exponential averages of theta at a few horizons, and the
prediction of whichever (last iterate included) has the smallest discounted prequential loss."""

from __future__ import annotations

import numpy as np
import pytest

from streammkl.core import OnlineMKL, kernels, losses, regularizers, schedules
from streammkl.core import _numba as nb

BANK = (kernels.Linear(), kernels.RBF(0.5, n_components=16))


def _noisy(n, seed=0, flip=0.2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    Y = np.where(X[:, 0] + 0.5 * X[:, 1] > 0, 1.0, -1.0)
    Y[rng.random(n) < flip] *= -1
    return X, Y


def _theta(model):
    L, S = model._layout, model._state
    out = np.zeros_like(S.w)
    for m in L.ex_blocks:
        a, e = L.ex_off[m], L.ex_off[m + 1]
        out[:, a:e] = S.scale[m] * S.w[:, a:e]
    return out, S.bias.copy()


def test_averages_are_exponential_averages_and_the_leader_predicts():
    """numpy reference: theta_bar_e += max(1/n, 1/h_e) (theta_t+1 - theta_bar_e); the prediction
    at x_t is the scores of argmin of the discounted hinge losses up to t - 1 (losses tied up
    to rounding: any of them)."""
    horizons, rho = (5.0, 50.0), 0.9
    model = OnlineMKL(
        kernels=BANK, loss=losses.Hinge(), schedule=schedules.InvSqrt(0.5), fit_intercept=True,
        averages=horizons, average_discount=rho, average_every=1,
    )  # fmt: skip
    X, Y = _noisy(120)
    avg = bias = None
    L = np.zeros(3)
    for n, (x, y) in enumerate(zip(X, Y, strict=True), start=1):
        if avg is None:
            model.learn(x, y)  # the first round: every predictor is 0
            theta, b = _theta(model)
            avg, bias = [theta.copy(), theta.copy()], [b.copy(), b.copy()]
            L += 1.0  # hinge of a zero score
            continue
        phi = np.zeros(model._layout.width)
        lay = model._layout
        nb.explicit_phi(x, lay.ex_blocks, lay.ex_off, lay.ex_kind, lay.ex_norm, lay.phi_src,
                        lay.rff_wt, lay.rff_b, phi)  # fmt: skip
        theta, b = _theta(model)
        scores = [theta[0] @ phi + b[0], *(a[0] @ phi + c[0] for a, c in zip(avg, bias))]
        # the leader: a predictor of least loss (losses tied up to rounding, as after rounds
        # where the predictors scored alike, may be told apart by the model's last bit)
        tied = np.flatnonzero(L <= L.min() + 2 * nb.LEAD_TOLERANCE * max(1.0, L.min()))
        decision = float(np.ravel(model.decision(x))[0])
        assert any(decision == pytest.approx(scores[i], rel=1e-12, abs=1e-12) for i in tied)
        L = rho * L + np.maximum(0.0, 1.0 - y * np.array(scores))
        model.learn(x, y)
        theta, b = _theta(model)
        for e, h in enumerate(horizons):
            r = max(1.0 / n, 1.0 / h)
            avg[e] += r * (theta - avg[e])
            bias[e] += r * (b - bias[e])
        np.testing.assert_allclose(model._state.avg_loss, L, rtol=1e-10)
        for e in range(2):
            np.testing.assert_allclose(model._state.avg_w[e], avg[e], rtol=1e-9, atol=1e-13)


def _below(v, ulps=1):
    for _ in range(ulps):
        v = np.nextafter(v, -np.inf)
    return v


TOL = nb.LEAD_TOLERANCE
LEADS = [  # discounted losses (last iterate, average 0, average 1, ...), the leader
    ([1.0, _below(1.0)], 0),  # 1 ulp lower: the last iterate keeps the lead (argmin: 1)
    ([250.0, _below(250.0), _below(250.0, 2)], 0),
    ([3.0, 2.5], 1),  # a real lead switches
    ([3.0, 2.5, _below(2.5)], 1),  # ... and an average in the lead keeps it against 1 ulp
    ([3.0, 2.5, 2.0], 2),
    ([200.0, 200.0 * (1 - 2 * TOL)], 1),  # relative: past the tolerance at 200
    ([200.0, 200.0 * (1 - TOL / 2)], 0),  # within it
    ([1e-3, 1e-3 - 2 * TOL], 1),  # absolute below a loss of 1
    ([1e-3, 1e-3 - TOL / 2], 0),
    ([np.nan, 1.0], 0),  # a NaN loss never loses the lead to, nor takes it from, a number
    ([1.0, np.nan, 0.5], 2),
]


@pytest.mark.parametrize("losses_, expected", LEADS)
def test_the_lead_changes_only_on_a_lead_beyond_rounding(losses_, expected):
    """``leader``'s hysteresis (LEAD_TOLERANCE): two loss vectors that differ by an ulp keep the
    incumbent; a lead larger than the tolerance (relative to max(1, |lead|)) switches. The
    compiled function and its Python original agree."""
    L = np.array(losses_)
    assert nb.leader(L) == expected
    assert nb.leader.py_func(L) == expected


def test_the_prediction_of_a_round_and_of_decision_follow_the_same_lead_rule():
    """The compiled round's prediction (learn_predict) and decision take the last iterate when
    the average is 1 ulp ahead, the average when it is really ahead."""
    X, Y = _noisy(80, seed=7)
    model = OnlineMKL(kernels=BANK, averages=(5.0,), average_every=1)
    model.learn_many(X[:60], Y[:60])
    meta, arrays = model.to_state()
    x, y = X[70], Y[70]

    def scores(avg_loss):
        m = OnlineMKL.from_state(meta, {**arrays, "avg_loss": np.array(avg_loss)})
        before = m.decision(x)
        return before, float(m.learn_predict(x, y)[0])

    last, last_round = scores([0.0, 1.0])
    avg, avg_round = scores([1.0, 0.0])
    assert last == last_round and avg == avg_round and abs(last - avg) > 1e-6
    assert scores([1.0, _below(1.0)]) == (last, last_round)
    assert scores([1.0, 0.5]) == (avg, avg_round)


def test_averages_help_on_a_noisy_stream_and_leave_learning_unchanged():
    X, Y = _noisy(4000, seed=1, flip=0.25)
    clean = np.where(X[:, 0] + 0.5 * X[:, 1] > 0, 1.0, -1.0)
    cfg = dict(kernels=BANK, loss=losses.Hinge(), schedule=schedules.Constant(0.3),
               regularizer=regularizers.L2(1e-4))  # fmt: skip
    plain, averaged = OnlineMKL(**cfg), OnlineMKL(**cfg, averages=(100, 1000))
    _, p = plain.learn_many(X, Y)
    _, q = averaged.learn_many(X, Y)
    np.testing.assert_array_equal(plain.block_norms, averaged.block_norms)  # same iterates
    err_plain = np.mean(np.sign(p[2000:, 0]) != clean[2000:])
    err_avg = np.mean(np.sign(q[2000:, 0]) != clean[2000:])
    assert err_avg < 0.7 * err_plain


def test_after_a_restart_the_last_iterate_predicts_and_averages_re_anchor():
    X, Y = _noisy(300, seed=2)
    model = OnlineMKL(kernels=BANK, averages=(1000.0,), average_every=1)
    model.learn_many(X, Y)
    model.restart_schedule()
    assert np.all(model._state.avg_loss == 0.0)
    model.learn(X[0], Y[0])
    theta, _ = _theta(model)
    np.testing.assert_allclose(model._state.avg_w[0], theta)  # r = 1 at the first round


def test_averages_survive_new_classes_new_inputs_kernel_changes_and_persistence():
    rng = np.random.default_rng(3)
    model = OnlineMKL(kernels=BANK, loss=losses.MulticlassHinge(), averages=(10.0, 100.0))
    for i in range(60):
        model.learn(rng.normal(size=3), i % 2)
    model.learn(rng.normal(size=3), 2)  # a third class
    model.learn(rng.normal(size=4), 1)  # a fourth input
    model.add_kernel(kernels.Polynomial(2, explicit=True))
    model.learn_many(rng.normal(size=(30, 4)), rng.integers(0, 3, size=30))
    assert model._state.avg_w.shape == (2, 3, model._layout.width)
    copy = OnlineMKL.from_state(*model.to_state())
    X = rng.normal(size=(20, 4))
    np.testing.assert_array_equal(copy.decision_many(X), model.decision_many(X))


def test_averages_need_explicit_blocks_and_sane_parameters():
    with pytest.raises(ValueError, match="explicit blocks only"):
        OnlineMKL(kernels=(kernels.RBF(0.5),), averages=(100,))
    with pytest.raises(ValueError, match="horizons"):
        OnlineMKL(averages=(0.5,))
    with pytest.raises(ValueError, match="average_discount"):
        OnlineMKL(averages=(10,), average_discount=0.0)


def test_averages_updated_every_few_rounds_are_the_every_round_averages_of_a_subsample():
    """With average_every=k the averages see every k-th iterate (the running mean first, then
    r = 1 - (1 - 1/h)^k) and the losses every k-th example (discount rho^k); the leader's
    prediction is computed every round, from the state the averages are in."""
    X, Y = _noisy(400, seed=5)
    k, h = 4, 50.0
    model = OnlineMKL(kernels=BANK, averages=(h,), average_every=k, average_discount=0.9)
    thetas = []
    for x, y in zip(X, Y, strict=True):
        model.learn(x, y)
        thetas.append(_theta(model)[0])
    avg = np.zeros_like(thetas[0])
    for n, theta in enumerate(thetas[k - 1 :: k], start=1):
        r = max(1.0 / n, 1.0 - (1.0 - 1.0 / h) ** k)
        avg += r * (theta - avg)
    np.testing.assert_allclose(model._state.avg_w[0], avg, rtol=1e-9, atol=1e-13)
    assert int(model._state.avg_count[0]) == 400
    copy = OnlineMKL.from_state(*model.to_state())
    a, b = model.learn_many(X[:37], Y[:37]), copy.learn_many(X[:37], Y[:37])
    np.testing.assert_array_equal(a[1], b[1])
