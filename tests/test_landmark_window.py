"""``LandmarkRBF(refresh=P, replace="oldest")``: landmarks as a sliding window over the stream.
Checked against a brute-force replay of the stream: at every round ``t`` a multiple of ``P``
scored with a loss, slot ``(t / P) mod m`` takes that round's input, whatever its reach, so the
landmarks are the last ``m`` such inputs; the replaced columns restart at zero with exact block
norms under FTRL and AdaGrad with the group lasso, the block's map is the brute-force profile
over the window, and runs, saves and restores agree with rounds one at a time bit for bit."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from streammkl.core import OnlineMKL, losses, regularizers, schedules
from streammkl.core import _numba as nb
from streammkl.core import kernels as Kmod

SCHEDULES = {"ftrl": lambda: schedules.FTRL(1.0), "adagrad": lambda: schedules.AdaGrad(1.0)}
M, P = 12, 7  # landmarks, refresh period


def _stream(n: int = 900, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = np.where(np.sin(2.0 * X[:, 0]) + X[:, 1] * X[:, 2] > 0.0, 1.0, -1.0)
    return X, y


def _model(schedule: str) -> OnlineMKL:
    """(The logistic loss: never 0, so every P-th round is checked, as the river learners'
    softmax does; under the hinge a round without a loss keeps the landmarks.)"""
    return OnlineMKL(
        kernels=(Kmod.Linear(), Kmod.LandmarkRBF(16.0, M, refresh=P, replace="oldest")),
        loss=losses.Logistic(),
        regularizer=regularizers.GroupLasso(1e-2),
        schedule=SCHEDULES[schedule](),
        averages=(100,),
        seed=0,
    )


def _brute_profile(x: np.ndarray, Z: np.ndarray, gamma: float) -> np.ndarray:
    k = [math.exp(-gamma * sum((a - b) ** 2 for a, b in zip(x, z, strict=True))) for z in Z]
    norm = math.sqrt(sum(v * v for v in k))
    return np.array([v / norm for v in k])


def test_the_name_and_spec_carry_the_rule_and_bad_rules_are_refused() -> None:
    k = Kmod.LandmarkRBF(16.0, 50, refresh=20, replace="oldest")
    assert k.name == "landmarks(gamma=16/median,m=50,refresh=20,replace=oldest)"
    assert k.to_spec()["replace"] == "oldest"
    again = Kmod.from_spec(k.to_spec())
    assert again == k and again.replace == "oldest"  # type: ignore[attr-defined]
    assert "replace" not in Kmod.LandmarkRBF(16.0, 50, refresh=20).to_spec()  # (as before)
    with pytest.raises(ValueError, match="replace"):
        Kmod.LandmarkRBF(16.0, 50, refresh=20, replace="newest")
    with pytest.raises(ValueError, match="refresh"):  # a window needs a period
        Kmod.LandmarkRBF(16.0, 50, replace="oldest")


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
def test_the_landmarks_are_the_last_checked_inputs_first_in_first_out(schedule: str) -> None:
    X, y = _stream()
    model = _model(schedule)
    Z = None  # the brute-force window, from the round the landmarks are taken
    for i, (x, t) in enumerate(zip(X, y, strict=True)):
        before = model.kernels[1]
        loss = model.learn(x, t)
        kernel = model.kernels[1]
        assert isinstance(kernel, Kmod.LandmarkRBF)
        if Z is None:
            if kernel.landmarks:  # taken at the end of the warm-up: the first inputs
                Z = np.array(kernel.fit.points)  # type: ignore[union-attr]
                np.testing.assert_array_equal(Z, X[:M])
            continue
        r = i + 1  # the round
        assert loss > 0.0
        if r % P == 0:
            Z[(r // P) % M] = x  # the oldest slot takes the round's input, reach or not
        else:
            assert kernel is before  # no other round touches the landmarks
        np.testing.assert_array_equal(np.array(kernel.fit.points), Z)  # type: ignore[union-attr]
    assert Z is not None
    checked = [i for i in range(len(X)) if (i + 1) % P == 0]
    window = np.array(model.kernels[1].fit.points)  # type: ignore[union-attr]
    for i in checked[-M:]:  # the window: the last M checked inputs, each in its slot
        np.testing.assert_array_equal(window[((i + 1) // P) % M], X[i])
    # exact block norm after the refreshes, and the block's map the profile over the window
    S, L = model.state, model.layout
    assert S is not None and L is not None
    a, e = int(L.ex_off[1]), int(L.ex_off[2])
    brute = math.sqrt(sum(float(v) ** 2 for v in S.w[:, a:e].ravel()))
    assert S.norms[1] == pytest.approx(S.scale[1] * brute, rel=1e-13)
    if schedule == "ftrl":
        assert S.stored_norms[1] == pytest.approx(brute, rel=1e-13)
    phi = np.zeros(L.width)
    for x in X[:10]:
        nb.explicit_phi(x, L.ex_blocks, L.ex_off, L.ex_kind, L.ex_norm, L.phi_src, L.rff_wt,
                        L.rff_b, phi)  # fmt: skip
        np.testing.assert_allclose(
            phi[a:e], _brute_profile(x, Z, model.kernels[1].gamma), atol=1e-12
        )  # fmt: skip


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
def test_a_replaced_landmark_restarts_its_columns(schedule: str) -> None:
    X, y = _stream()
    model = _model(schedule)
    n = 20 * P - 1  # the next round (20 P) refreshes slot 20 mod M
    for x, t in zip(X[:n], y[:n], strict=True):
        model.learn(x, t)
    S, L = model.state, model.layout
    assert S is not None and L is not None
    a = int(L.ex_off[1])
    j = 20 % M
    kernel = model.kernels[1]
    assert isinstance(kernel, Kmod.LandmarkRBF)
    z = np.array(kernel.fit.points)[0]  # type: ignore[union-attr]
    assert kernel.within_reach(z, model.feature_keys)  # a landmark itself: within reach,
    assert not kernel.keeps(z, model.feature_keys)  # and still replaced in a sliding window
    assert kernel.to_replace(np.zeros(M), 20 * P) == j  # the slot from the round, not weights
    model._refresh_landmarks(X[n], 20 * P)  # (the hook a round with a loss calls)
    S = model.state
    assert S is not None
    assert not S.w[:, a + j].any() and not S.avg_w[:, :, a + j].any()
    np.testing.assert_array_equal(np.array(model.kernels[1].fit.points)[j], X[n])  # type: ignore[union-attr]


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
def test_runs_and_restores_agree_with_rounds_one_at_a_time(schedule: str) -> None:
    X, y = _stream()
    one = _model(schedule)
    losses = np.array([one.learn(x, t) for x, t in zip(X, y, strict=True)])
    runs = _model(schedule)
    got = []
    for lo, hi in itertools.pairwise((0, 5, 61, 400, 401, 777, len(X))):
        got.append(runs.learn_many(X[lo:hi], y[lo:hi])[0])
    np.testing.assert_array_equal(np.concatenate(got), losses)
    assert runs.digest() == one.digest()
    back = OnlineMKL.from_state(*one.to_state())
    assert back.digest() == one.digest() and back.kernels[1].fit == one.kernels[1].fit
    X2, y2 = _stream(300, seed=9)
    a = one.learn_many(X2, y2)[0]
    b = np.array([back.learn(x, t) for x, t in zip(X2, y2, strict=True)])
    np.testing.assert_array_equal(a, b)
    assert back.digest() == one.digest()
