"""Defaults of the river learners, chosen by measurement (``benchmarks/river_defaults.py``).

The default bank assumes standardised inputs (``preprocessing.StandardScaler() | MKLClassifier()``):
a linear kernel, Gaussian kernels whose bandwidths span two orders of magnitude, and a normalised
quadratic kernel; sparse MKL (the squared group lasso) picks among them per stream.
"""

from __future__ import annotations

from streammkl.core import kernels, regularizers, schedules

RBF_GAMMAS = (0.1, 1.0, 10.0)
RFF_COMPONENTS = 128
LAMBDA = 1e-4
ETA0 = 1.0
BUDGET = 256
AVERAGES: tuple = ()


def kernel_bank() -> tuple:
    return (
        kernels.Linear(),
        *(kernels.RBF(gamma=g, n_components=RFF_COMPONENTS) for g in RBF_GAMMAS),
        kernels.Polynomial(degree=2, explicit=True),
    )


def regularizer() -> regularizers.Regularizer:
    return regularizers.SquaredGroupLasso(LAMBDA)


def schedule() -> schedules.Schedule:
    return schedules.InvSqrt(ETA0)


# Regression: Huber on standardised targets (bounded steps: the squared loss with eta0 = 1 diverges
# once eta ||phi(x)||^2 > 2, i.e. on any input with more than a couple of standardised features).
REGRESSION_ETA0 = 0.3
HUBER_DELTA = 1.0


def regression_schedule() -> schedules.Schedule:
    return schedules.InvSqrt(REGRESSION_ETA0)
