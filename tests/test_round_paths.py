"""The default round's faster routes against the general one: the explicit round without
reference counting (``p.fast``) gives the same numbers bit for bit, and two mirrored score rows
(``p.mirror``) the same numbers up to rounding, with the second row exactly the first's
negation."""

from __future__ import annotations

import numpy as np
import pytest

from streammkl.core import OnlineMKL, kernels, losses, regularizers, schedules
from streammkl.core import update as update_mod


def _data(n: int = 400, d: int = 3, classes: int = 2, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (X[:, 0] * X[:, 1] + 0.5 * X[:, 2] > 0).astype(float)
    if classes > 2:
        y = y + (X[:, 0] > 1.0)
    return X, y


def _model(loss=None, averages=(5.0, 50.0)) -> OnlineMKL:
    bank = (kernels.Linear(), kernels.AdditiveRBF(1.0, 4), kernels.RBF(0.5, n_components=32),
            kernels.Polynomial(2, explicit=True))  # fmt: skip
    return OnlineMKL(kernels=bank, loss=loss or losses.Softmax(),
                     regularizer=regularizers.GroupLasso(1e-2), schedule=schedules.FTRL(1.0),
                     fit_intercept=True, averages=averages)  # fmt: skip


def _run(model: OnlineMKL, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    _, head = model.learn_many(X[:200], Y[:200])
    tail = [model.learn_predict(x, y) for x, y in zip(X[200:], Y[200:], strict=True)]
    return np.vstack([head, np.array(tail)])


@pytest.mark.parametrize("classes", [2, 3])
def test_explicit_round_is_the_general_round_bit_for_bit(monkeypatch, classes):
    X, Y = _data(classes=classes)
    fast = _model()
    fast_scores = _run(fast, X, Y)
    assert fast._args is not None and fast._args.fast
    monkeypatch.setattr(update_mod, "fast_round", lambda *a: False)
    slow = _model()
    slow_scores = _run(slow, X, Y)
    assert slow._args is not None and not slow._args.fast
    np.testing.assert_array_equal(fast_scores, slow_scores)
    for key, arr in fast.to_state()[1].items():
        np.testing.assert_array_equal(arr, slow.to_state()[1][key], err_msg=key)
    x = X[0]
    np.testing.assert_array_equal(fast.decision(x), slow.decision(x))


@pytest.mark.parametrize("loss", [losses.Softmax(), losses.MulticlassHinge()])
def test_mirrored_rows_match_the_general_rows(monkeypatch, loss):
    X, Y = _data()
    mirrored = _model(loss)
    scores = _run(mirrored, X, Y)
    assert mirrored._args is not None and mirrored._args.mirror
    state = mirrored.to_state()[1]
    np.testing.assert_array_equal(state["w"][1], -state["w"][0])
    np.testing.assert_array_equal(state["avg_w"][:, 1], -state["avg_w"][:, 0])
    assert state["bias"][1] == -state["bias"][0]
    monkeypatch.setattr(update_mod, "mirrored", lambda *a: False)
    general = _model(loss)
    reference = _run(general, X, Y)
    assert general._args is not None and not general._args.mirror
    if isinstance(loss, losses.MulticlassHinge):  # v[1] = -v[0] exactly: the same numbers
        np.testing.assert_array_equal(scores, reference)
    else:  # the softmax's v[1] is -v[0] up to rounding
        np.testing.assert_allclose(scores, reference, rtol=1e-9, atol=1e-12)


def test_mirror_ends_when_a_third_class_arrives():
    X, Y = _data()
    model = _model()
    model.learn_many(X[:50], Y[:50])
    assert model._args is not None and model._args.mirror
    model.learn(X[50], 2.0)  # a third class: three rows, none mirrored
    assert model._args is not None and not model._args.mirror
    w = model.to_state()[1]["w"]
    assert w.shape[0] == 3 and np.any(w[2] != 0.0)  # the third row learned from its example
    model.learn_many(X[51:120], Y[51:120])
    w = model.to_state()[1]["w"]
    assert not np.array_equal(w[1], -w[0])  # the rows now evolve apart
    assert np.isfinite(model.decision(X[121])).all()


@pytest.mark.parametrize("every", [1, 3])
def test_a_run_of_mirrored_rounds_writes_the_second_rows_once_with_the_same_bits(every):
    """``learn_many`` on two mirrored rows leaves the second rows to the end of its run
    (``explicit_round_first``): its scores, and every array to the sign of its zeros, are
    those of the same rounds one call each (``explicit_round``, the second rows every round),
    whatever the runs' lengths against the averages' period."""
    X, Y = _data()
    run, each = _model(), _model()
    run.average_every = each.average_every = every
    start = 0
    for n in (1, 2, 1, 5, 40, 3, 148):
        _, scores = run.learn_many(X[start : start + n], Y[start : start + n])
        one = [each.learn_predict(x, y) for x, y in zip(X[start : start + n], Y[start : start + n],
                                                         strict=True)]  # fmt: skip
        np.testing.assert_array_equal(scores, np.array(one))
        start += n
    assert run._args is not None and run._args.fast and run._args.mirror
    a, b = run.to_state()[1], each.to_state()[1]
    for key, arr in a.items():
        assert arr.tobytes() == b[key].tobytes(), key
