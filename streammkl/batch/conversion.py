"""Regularisation constants across formulations (eq. 6 of Suzuki & Tomioka, corrected).

Three objectives share the same minimiser ``f*`` (for matching constants):

* SpicyMKL, block 1-norm, summed loss:    ``sum_i l(y_i, f(x_i)) + C sum_m ||f_m||``
* squared block 1-norm, summed loss:      ``sum_i l(y_i, f(x_i)) + C~/2 (sum_m ||f_m||)^2``
* the online learner (``OnlineMKL`` with ``SquaredGroupLasso(lam)``), *mean* loss:
  ``(1/N) sum_i l(y_i, f(x_i)) + lam/2 (sum_m ||f_m||)^2``

Comparing subgradients, ``d/df_m 1/2 (sum ||f||)^2 = (sum ||f||) d||f_m||``, the squared problem
with
``C~`` has the optimality condition of the block 1-norm problem with ``C = C~ sum_m ||f*_m||``, so

    C~ = C / sum_m ||f*_m||        (ERRATUM: eq. 6 prints C~ = C sum_m ||f*_m||, which is wrong;
                                    checked numerically in tests/test_batch_conversion.py)

and dividing the second objective by N gives ``lam = C~ / N``. Hence
``lam = C / (N sum_m ||f*_m||)``. The norms must be taken in the same kernels on both sides (fit
SpicyMKL with ``normalize=None``, or scale the online kernels by ``gram_scale_``) and the bias must
be
treated alike (``fit_intercept`` on both or neither).
"""

from __future__ import annotations

import numpy as np

__all__ = ["c_to_lambda", "lambda_to_c", "lambda_to_squared_c"]


def _total(block_norms) -> float:
    b = np.asarray(block_norms, dtype=np.float64)
    if b.ndim != 1 or not np.all(np.isfinite(b)) or np.any(b < 0):
        raise ValueError("block_norms: expected a 1-d array of finite norms >= 0")
    total = float(b.sum())
    if total <= 0:
        raise ValueError(
            "block_norms are all zero: the solution is f = 0 and C <-> lambda is not "
            "identifiable (any larger C gives the same solution)"
        )
    return total


def c_to_lambda(C: float, block_norms, n_samples: int) -> float:
    """Online ``lam`` (mean loss, ``lam/2 (sum ||f_m||)^2``) with the same solution as SpicyMKL's C.

    ``block_norms`` are ``||f*_m||`` of the block 1-norm solution at C (``SpicyMKL.block_norms_``).
    """
    if not (C > 0 and n_samples > 0):
        raise ValueError(f"need C > 0 and n_samples > 0, got C={C!r}, n_samples={n_samples!r}")
    return float(C) / (float(n_samples) * _total(block_norms))


def lambda_to_c(lam: float, block_norms, n_samples: int) -> float:
    """SpicyMKL's C with the same solution as the online ``lam``; norms of the lam-solution."""
    if not (lam > 0 and n_samples > 0):
        raise ValueError(
            f"need lam > 0 and n_samples > 0, got lam={lam!r}, n_samples={n_samples!r}"
        )
    return float(lam) * float(n_samples) * _total(block_norms)


def lambda_to_squared_c(lam: float, n_samples: int) -> float:
    """``C~ = N lam``: the summed-loss squared block 1-norm equivalent of the online objective."""
    if not (lam > 0 and n_samples > 0):
        raise ValueError(
            f"need lam > 0 and n_samples > 0, got lam={lam!r}, n_samples={n_samples!r}"
        )
    return float(lam) * float(n_samples)
