"""Batch MKL solvers: SpicyMKL (DAL, super-linear), its accelerated proximal-gradient baseline and
randomized mirror descent over polynomial kernels; also the exact hindsight comparator for
windowed regret (docs/batch.md).

Imports only ``streammkl.core`` (never river, kafka or prometheus).
"""

from __future__ import annotations

from streammkl.batch.conversion import c_to_lambda, lambda_to_c, lambda_to_squared_c
from streammkl.batch.explicit_poly import ExplicitPolynomialMKL
from streammkl.batch.proxgrad import ProximalGradientMKL
from streammkl.batch.randomized import RandomizedMKL
from streammkl.batch.spicymkl import SpicyMKL
from streammkl.batch.window_optimum import fit_window_comparator

__all__ = [
    "ExplicitPolynomialMKL",
    "ProximalGradientMKL",
    "RandomizedMKL",
    "SpicyMKL",
    "c_to_lambda",
    "fit_window_comparator",
    "lambda_to_c",
    "lambda_to_squared_c",
]
