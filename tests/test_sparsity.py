"""Sparse MKL selects kernels: 2 of 8 kernels carry the signal, the other 6 end exactly at zero.

The stream follows the regime where online proximal steps give exact zeros (the paper's
feature-template setting): each kernel reads its own group of inputs, the two informative groups
are always active, the six noise groups fire rarely (1%) with random values. Between firings the
prox (Alg. 2) shrinks the noise blocks to exactly 0. With dense i.i.d. noise inputs, single-example
subgradients kick every block every round and online sparsity is only approximate.
"""

from __future__ import annotations

import numpy as np
import pytest

from streammkl.core import OnlineMKL, kernels, regularizers, schedules

G = 3  # inputs per group


def _group(g):
    return tuple(range(g * G, (g + 1) * G))


def _stream(seed, n=5000, activity=0.01):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 8 * G))
    active = rng.random((n, 8)) < activity
    active[:, :2] = True
    X *= np.repeat(active, G, axis=1)
    f = X[:, 0] + X[:, 1] - X[:, 2] + 2 * X[:, 3] * X[:, 4]
    return X, np.where(f > 0, 1.0, -1.0)


def _bank():
    def poly(g):
        return kernels.Polynomial(2, coef0=0.0, normalize=False, features=_group(g))

    noise = [kernels.Linear(features=_group(g)) if g < 5 else poly(g) for g in range(2, 8)]
    return (kernels.Linear(features=_group(0)), poly(1), *noise)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sparse_mkl_zeroes_the_uninformative_kernels(seed):
    X, Y = _stream(seed)
    model = OnlineMKL(
        kernels=_bank(), regularizer=regularizers.SquaredGroupLasso(0.1),
        schedule=schedules.InvSqrt(1.0), budget=200,
    )  # fmt: skip
    noise_alive = 0
    for i, (x, y) in enumerate(zip(X, Y, strict=True)):
        model.learn(x, y)
        if i >= len(X) // 2:
            noise_alive += bool(np.any(model.block_norms[2:] > 0))
    norms, beta = model.block_norms, model.kernel_weights
    assert np.all(norms[2:] == 0.0) and np.all(beta[2:] == 0.0)
    assert np.all(norms[:2] > 0.1) and np.all(beta[:2] > 0.05)
    assert abs(beta.sum() - 1.0) < 1e-12
    assert model.active_kernels == [k.name for k in _bank()[:2]]
    # and not just at the last round: the noise blocks are zero most of the time
    assert noise_alive / (len(X) - len(X) // 2) < 0.35
