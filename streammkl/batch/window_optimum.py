"""Hindsight comparator for windowed regret (``streammkl.monitor``): the exact batch optimum.

``fit_window_comparator`` returns ``min_f (1/N) sum_i loss(y_i, f(x_i)) + Omega(f)`` over the
window,
the objective ``OnlineMKL`` reports through ``objective_terms`` (loss + regularization value), so

    windowed regret = sum over the window of the online objective - N * comparator.

It is solved by the DAL iteration of SpicyMKL on the raw kernels (no normalisation, no ridge) with
the penalty rescaled by N (summed loss), to a relative duality gap ``tol``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from streammkl.batch._dal import DalResult, dal_solve
from streammkl.batch._dal_losses import make_loss
from streammkl.batch._penalties import BlockLq, ElasticNet, Penalty, SquaredL1
from streammkl.batch.grams import gram_stack

__all__ = ["comparator_penalty", "fit_window_comparator"]


def comparator_penalty(regularizer: object, lam: float | None, n_samples: int) -> Penalty:
    """The summed-loss penalty equal to ``n_samples * Omega`` (Omega as in core.regularizers)."""
    if isinstance(regularizer, str) or regularizer is None:
        kind, params = str(regularizer or "SquaredGroupLasso"), {}
    else:
        kind = type(regularizer).__name__
        params = dict(regularizer.params())  # type: ignore[attr-defined]
        if lam is not None and "lam" in params and not np.isclose(params["lam"], lam):
            raise ValueError(f"lam={lam!r} disagrees with the regularizer's lam={params['lam']!r}")
    aliases = {"squared_group_lasso": "SquaredGroupLasso", "group_lasso": "GroupLasso"}
    kind = aliases.get(kind, kind)
    supported = ("SquaredGroupLasso", "GroupLasso", "GroupLq", "ElasticNetMKL", "L2")
    if kind not in supported:
        raise ValueError(
            f"regularizer {kind} is not supported by the comparator; use one of {supported}"
        )
    lam = float(params.get("lam", lam if lam is not None else np.nan))
    if not (lam > 0 and np.isfinite(lam)):
        raise ValueError(f"lam must be a finite number > 0, got {lam!r}")
    big = n_samples * lam
    if kind == "SquaredGroupLasso":
        return SquaredL1(big, 0.0)
    if kind == "GroupLasso":
        return ElasticNet(big, 0.0)
    if kind == "GroupLq":
        q = float(params.get("q", 1.5))
        return ElasticNet(big / 2.0, 0.0) if q == 1.0 else BlockLq(big * q / 2.0, q)
    if kind == "ElasticNetMKL":
        sigma = float(params.get("sigma", 0.5))
        return SquaredL1(big * (1.0 - sigma), big * sigma)
    return SquaredL1(0.0, big)  # L2


def fit_window_comparator(
    X,
    y,
    kernels: Sequence[object],
    loss: object,
    lam: float | None,
    *,
    regularizer: object = None,
    fit_intercept: bool = False,
    tol: float = 1e-6,
    max_iter: int = 200,
    return_result: bool = False,
) -> float | tuple[float, DalResult]:
    """Exact hindsight optimum of the online objective on a window of examples.

    Parameters
    ----------
    X, y
        The window: ``X`` of shape (N, d); ``y`` in {-1, +1} (Hinge, Logistic) or real.
    kernels
        The online learner's kernel objects (``gram(X, Y)``), used as they are.
    loss
        ``streammkl.core.losses`` Hinge / Logistic / Squared / EpsilonInsensitive (or their names).
    lam
        Regularisation of ``SquaredGroupLasso(lam)`` — the online default. With ``regularizer``
        given (a ``core.regularizers`` object: SquaredGroupLasso, GroupLasso, GroupLq,
        ElasticNetMKL, L2) pass None or the same lam.
    fit_intercept
        Match the online learner's ``fit_intercept`` (an unregularised bias).
    tol
        Relative duality gap of the batch solve: the value returned is the primal objective, within
        ``tol`` (relative) above the true optimum.
    return_result
        Also return the solver's result (coefficients, block norms, gap history).

    Returns
    -------
    float
        ``min (1/N) sum_i loss + Omega``.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] == 0:
        raise ValueError(f"X: expected a non-empty 2-d array, got shape {X.shape}")
    n = X.shape[0]
    dal_loss = make_loss(loss)
    y = np.asarray(y, dtype=np.float64)
    if y.shape != (n,):
        raise ValueError(f"y: expected shape ({n},), got {y.shape}")
    if dal_loss.classification and not np.all(np.isin(y, (-1.0, 1.0))):
        raise ValueError(f"y: {dal_loss.name} loss needs labels in {{-1, +1}}")
    pen = comparator_penalty(regularizer, lam, n)
    K = gram_stack(kernels, X)
    res = dal_solve(
        K, y, dal_loss, pen, fit_intercept=fit_intercept, tol=tol, max_iter=max_iter,
        gamma0=10.0 / max(getattr(pen, "C", 0.0), getattr(pen, "ct", 0.0),
                          getattr(pen, "cr", 0.0)),
    )  # fmt: skip
    value = res.primal / n
    return (value, res) if return_result else value
