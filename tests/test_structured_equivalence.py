"""Kernelized <-> explicit equivalence on sequences: the linear kernel as a support-set expansion
(implicit) and as explicit weights must take the same decisions with the same block norms."""

from __future__ import annotations

import numpy as np
import pytest

from streammkl.core import kernels, regularizers, schedules
from streammkl.structured import SequenceLabeler


def _sequences(seed, n, K=4, d=5):
    rng = np.random.default_rng(seed)
    W = rng.normal(size=(K, d))
    out = []
    for _ in range(n):
        T = int(rng.integers(1, 8))
        X = rng.normal(size=(T, d))
        y = [f"L{k}" for k in np.argmax(X @ W.T + rng.normal(size=(T, K)), axis=1)]
        out.append((X, y))
    return out


CASES = [
    ("hinge", regularizers.SquaredGroupLasso(0.01), 3.0, False),
    ("hinge", regularizers.L2(0.02), None, True),
    ("crf", regularizers.SquaredGroupLasso(0.01), 3.0, True),
    ("crf", regularizers.GroupLq(0.01, q=1.5), None, False),
    ("crf", (regularizers.ElasticNetMKL(0.01, 0.5), regularizers.Ball(4.0)), None, True),
]


@pytest.mark.parametrize("loss,reg,radius,learn_beta0", CASES)
def test_linear_implicit_equals_explicit(loss, reg, radius, learn_beta0):
    data = _sequences(1, 300)
    models = [
        SequenceLabeler(
            kernels=(lin, kernels.RBF(gamma=0.3)),
            loss=loss,
            regularizer=reg,
            radius=radius,
            schedule=schedules.InvSqrt(1.0),
            learn_transition_weight=learn_beta0,
        )
        for lin in (kernels.Linear(), kernels.Linear(implicit=True))
    ]
    worst = 0.0
    for X, y in data:
        explicit, implicit = (m.predict_one(X) for m in models)
        assert explicit == implicit
        for m in models:
            m.learn_one(X, y)
        a, b = (np.array(list(m.block_norms.values())) for m in models)
        worst = max(worst, float(np.max(np.abs(a - b))))
        assert models[0].last_loss == pytest.approx(models[1].last_loss, abs=1e-8)
    assert worst < 1e-8
    norms = models[0].block_norms
    assert norms["linear"] > 0.1 and norms["rbf(gamma=0.3)"] > 0.1
    assert models[1].n_support > 100 and models[0].n_support == models[1].n_support
    wa = np.array(list(models[0].kernel_weights.values()))
    wb = np.array(list(models[1].kernel_weights.values()))
    np.testing.assert_allclose(wa, wb, atol=1e-9)
    X, _ = data[0]
    ua, _, _ = models[0]._potentials(X, len(models[0].labels))
    ub, _, _ = models[1]._potentials(X, len(models[1].labels))
    np.testing.assert_allclose(ua, ub, atol=1e-9)


def test_normalized_linear_implicit_equals_explicit():
    data = _sequences(2, 120)
    models = [
        SequenceLabeler(kernels=(lin,), loss="hinge", regularizer=regularizers.L2(0.01))
        for lin in (kernels.Linear(normalize=True), kernels.Linear(normalize=True, implicit=True))
    ]
    for X, y in data:
        assert models[0].predict_one(X) == models[1].predict_one(X)
        for m in models:
            m.learn_one(X, y)
    a, b = (m.block_norms["linear-normalized"] for m in models)
    assert a == pytest.approx(b, rel=1e-10) and a > 0.1
