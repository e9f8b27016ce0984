"""The quantities Prop. 3 needs, read off a configured ``OnlineMKL``, and the bounds themselves.

- ``G``: a bound on the norm of the loss subgradient w.r.t. theta, ``lipschitz(loss) * ||phi(x)||``
  with ``||phi(x)||^2 = sum_m k_m(x, x)`` (the joint feature map of the bank; an upper bound for
  random Fourier blocks, whose map has ``||phi_m||^2 <= 2``). Tracked as the maximum over the
  examples seen (:class:`FeatureNorms`).
- ``F``: the diameter of the feasible set, ``2 * radius`` (``radius=`` of the learner, or a
  ``Ball``/``GroupL1Ball`` regularizer); infinite without one.
- ``||theta*||``: the radius if any, else Prop. 9's ``sqrt(2 Lambda / (lambda c))`` when the loss is
  bounded at theta = 0 by Lambda and ``lambda Omega(theta) >= lambda c / 2 ||theta||^2``.

:func:`prop3_bound` is Prop. 3 ([001] eqs 15-17) for the configured schedule, for the rounds since
the schedule's last (re)start; :func:`window_bound` is the same lemma summed over an arbitrary
window (any step sequence, any starting point). Both return ``inf`` when no bound applies: an
unbounded loss (``Squared``), no bounded feasible set where one is needed, an unregularized,
unprojected intercept (``fit_intercept=True``), or an ``InvT`` schedule on an objective that is not
``sigma``-strongly convex. Derivations: ``docs/monitor.md``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from streammkl.core import OnlineMKL, kernels, regularizers, schedules
from streammkl.monitor.bounds import regret_bound

INF = math.inf

# Lambda = max loss at theta = 0 (scores 0), for losses bounded there ([000] App E Prop. 8).
_LOSS_AT_ZERO = {"Hinge": 1.0, "MulticlassHinge": 1.0, "Logistic": math.log(2.0)}


def kernel_diag(kernel: kernels.Kernel, x_sel: np.ndarray) -> float:
    """``||phi(x)||^2`` of one block (an upper bound for random Fourier maps), from x's columns."""
    return _diag_of_sq(kernel)(float(x_sel @ x_sel), x_sel)


def _diag_of_sq(kernel: kernels.Kernel):  # -> (||x_sel||^2, x_sel) -> k(x, x)
    if isinstance(kernel, kernels.Linear):
        if kernel.normalize:
            return lambda sq, _: 1.0 if sq > 0 else 0.0
        return lambda sq, _: sq
    if isinstance(kernel, kernels.Polynomial):
        if kernel.normalize:
            return lambda sq, _: 1.0
        c, p = kernel.coef0, kernel.degree
        return lambda sq, _: (sq + c) ** p
    if isinstance(kernel, kernels.RBF | kernels.MedianRBF):
        value = 1.0 if kernel.implicit else 2.0  # RFF: (2/D) sum_j cos^2(.) <= 2
        return lambda sq, _: value
    if isinstance(kernel, kernels.B1Spline):
        return lambda sq, _: 1.0
    return lambda sq, x_sel: float(kernel.diag(x_sel[None, :])[0])


def _diag_of_sq_many(kernel: kernels.Kernel) -> Any:
    """:func:`_diag_of_sq` over rows (elementwise, so a row's value is that of the row alone),
    or the constant ``k(x, x)`` of a kernel whose diagonal does not depend on x."""
    if isinstance(kernel, kernels.Linear):
        if kernel.normalize:
            return lambda sq, _: np.where(sq > 0, 1.0, 0.0)
        return lambda sq, _: sq
    if isinstance(kernel, kernels.Polynomial):
        if kernel.normalize:
            return 1.0
        c, p = kernel.coef0, kernel.degree
        return lambda sq, _: np.power(sq + c, p)
    if isinstance(kernel, kernels.RBF | kernels.MedianRBF):
        return 1.0 if kernel.implicit else 2.0  # RFF: (2/D) sum_j cos^2(.) <= 2
    if isinstance(kernel, kernels.B1Spline):
        return 1.0
    return lambda sq, X_sel: np.asarray(kernel.diag(X_sel), dtype=np.float64)


def _row_sqnorms(X: np.ndarray) -> np.ndarray:
    # einsum reduces each row on its own (the same digits for a row alone or among others)
    return np.einsum("ij,ij->i", X, X)


class FeatureNorms:
    """``max_t ||phi(x_t)||^2`` over the examples seen, for a learner's bank (O(M) per example).

    One example (:meth:`update`) or many (:meth:`update_many`) give the same numbers: both
    compute over rows, elementwise.
    """

    def __init__(self) -> None:
        self.max_sq = 0.0
        self._kernels: tuple = ()
        self._shape: tuple[int, int] = (-1, -1)
        self._plan: tuple[float, list] = (0.0, [])

    def _terms(self, model: OnlineMKL, d: int) -> tuple[float, list]:
        """(the constant part of ``||phi(x)||^2``, the (columns, diagonal) of the other
        kernels), cached for a bank and an input width."""
        shape = (d, len(model.feature_keys))
        if model.kernels is not self._kernels or shape != self._shape:
            index = {k: i for i, k in enumerate(model.feature_keys)} or None
            const, plan = 0.0, []
            for k in model.kernels:
                diag = _diag_of_sq_many(k)
                if isinstance(diag, float):
                    const += diag
                else:
                    cols = None if k.features is None else k.feature_indices(d, index)
                    plan.append((cols, diag))
            self._plan = (const, plan)
            self._kernels, self._shape = model.kernels, shape
        return self._plan

    def norm_sq_many(self, model: OnlineMKL, X: np.ndarray) -> np.ndarray:
        """``||phi(x)||^2 = sum_m k_m(x, x)`` of each row of X, for the model's current bank."""
        X = np.ascontiguousarray(X, dtype=np.float64)
        const, plan = self._terms(model, X.shape[1])
        total = None
        full = None
        for cols, diag in plan:
            if cols is None:
                full = _row_sqnorms(X) if full is None else full
                term = diag(full, X)
            else:
                xs = np.ascontiguousarray(X[:, cols])
                term = diag(_row_sqnorms(xs), xs)
            total = term if total is None else total + term
        if total is None:
            return np.full(X.shape[0], const)
        return total + const

    def norm_sq(self, model: OnlineMKL, x: np.ndarray) -> float:
        """``||phi(x)||^2`` of one example."""
        return float(self.norm_sq_many(model, np.asarray(x, dtype=np.float64)[None, :])[0])

    def update(self, model: OnlineMKL, x: np.ndarray) -> float:
        sq = self.norm_sq(model, x)
        if sq > self.max_sq:
            self.max_sq = sq
        return sq

    def update_many(self, model: OnlineMKL, X: np.ndarray) -> np.ndarray:
        """:meth:`update` of each row; returns the rows' ``||phi(x)||^2``."""
        sq = self.norm_sq_many(model, X)
        if sq.shape[0]:
            top = float(np.fmax.reduce(sq))  # NaN-skipping, as the comparison one by one
            if top > self.max_sq:
                self.max_sq = top
        return sq


def lipschitz(model: OnlineMKL) -> float:
    """Lipschitz constant of the loss w.r.t. the score vector (inf if unbounded)."""
    lip = model.loss.lipschitz
    return INF if lip is None else float(lip)


def radius(model: OnlineMKL) -> float:
    """Radius of the feasible set (inf if theta is not confined to a ball)."""
    r = model.radius if model.radius and model.radius > 0 else INF
    for reg in model.regularizers:
        if isinstance(reg, regularizers.Ball):  # GroupL1Ball: ||theta|| <= sum_m ||theta_m|| <= r
            r = min(r, float(reg.radius))
    return INF if model.fit_intercept else r


def prop9_norm(model: OnlineMKL) -> float:
    """Prop. 9: ``||theta*|| <= sqrt(2 Lambda / (lambda c))`` on any window (inf if inapplicable).

    ``Lambda`` bounds the loss at theta = 0 and ``lambda Omega(theta) >= lambda c / 2 ||theta||^2``.
    """
    name = type(model.loss).__name__
    big_lambda = _LOSS_AT_ZERO.get(name)
    if name == "Softmax":
        big_lambda = math.log(max(model.n_outputs, 2))
    lam_c = sum(r.strong_convexity() * getattr(r, "lam", 0.0) for r in model.regularizers)
    if big_lambda is None or lam_c <= 0:
        return INF
    return math.sqrt(2.0 * big_lambda / lam_c)


def theta_star_norm(model: OnlineMKL) -> float:
    """A bound on the hindsight minimizer's norm: min(radius, Prop. 9) (inf with an intercept)."""
    if model.fit_intercept:
        return INF
    return min(radius(model), prop9_norm(model))


def strong_convexity(model: OnlineMKL) -> float:
    """Modulus mu of ``lambda Omega`` (``lambda Omega - mu/2 ||theta||^2`` is convex); 0 if none."""
    mu = 0.0
    for reg in model.regularizers:
        lam = float(getattr(reg, "lam", 0.0))
        if isinstance(reg, regularizers.L2):
            mu += lam
        elif isinstance(reg, regularizers.ElasticNetMKL):
            mu += lam * reg.sigma
        elif isinstance(reg, regularizers.GroupLq) and reg.q == 2.0:
            mu += lam
        elif isinstance(reg, regularizers.SquaredGroupLasso) and len(model.kernels) == 1:
            mu += lam  # one block: lam/2 ||theta||^2
    return 0.0 if model.fit_intercept else mu


def prop3_bound(
    model: OnlineMKL,
    max_phi_sq: float,
    *,
    theta_start_norm: float = 0.0,
    reg_start: float = 0.0,
    rounds: int | None = None,
) -> float:
    """Prop. 3 for the configured schedule over the ``model.schedule.t`` rounds since (re)start
    (or over ``rounds`` of them).

    With ``theta_start_norm = reg_start = 0`` (a fresh learner) this is [001] eqs 15-17 as printed,
    except ``InvT``, whose strong convexity comes from the regularizer through the prox (composite
    form: ``+ mu ||theta*||^2 / 2``). After a restart from ``theta_1 != 0`` the comparator distance
    becomes ``(||theta*|| + ||theta_1||)`` and ``lambda Omega(theta_1)`` is added.
    """
    T = int(model.schedule.t if rounds is None else rounds)
    if T <= 0:  # no round since the (re)start: 0 if a bound applies, +inf ("none") otherwise
        one = prop3_bound(model, max_phi_sq, theta_start_norm=theta_start_norm, rounds=1)
        return 0.0 if math.isfinite(one) else INF
    G = lipschitz(model) * math.sqrt(max_phi_sq)
    if not math.isfinite(G):
        return INF
    sched = model.schedule
    if isinstance(sched, schedules.AdaGrad):
        # Duchi, Hazan & Singer (2011), Thm. 5 with one scalar per block: the prox and the
        # projection run in the metric of the steps, so with ||theta_m,t - theta*_m|| <= F,
        # Reg_T <= sum_m (F^2 / (2 eta0) + eta0) sqrt(delta + sum_t ||g_m,t||^2).
        F = 2.0 * radius(model)
        if not math.isfinite(F) or sched.forget != 1.0:
            return INF  # forgetting: the sums are not the bound's sums any more
        sums = np.sqrt(sched.delta + model.gradient_sq_sums[:-1])
        return float((F * F / (2.0 * sched.eta0) + sched.eta0) * np.sum(sums)) + reg_start
    if isinstance(sched, schedules.FTRL):
        return INF  # not proven here for the sequential prox + projection: none exported
    if isinstance(sched, schedules.InvSqrt):
        F = 2.0 * radius(model)
        if not math.isfinite(F):
            return INF
        return regret_bound("InvSqrt", T, G, eta=sched.eta0, F=F) + reg_start
    dist = theta_star_norm(model) + theta_start_norm
    if not math.isfinite(dist):
        return INF
    if isinstance(sched, schedules.Constant):
        return regret_bound("Constant", T, G, eta=sched.eta0, theta_star_norm=dist) + reg_start
    if isinstance(sched, schedules.InvT):
        sigma = sched.sigma
        if len(model.regularizers) != 1 or strong_convexity(model) < sigma:
            return INF
        return regret_bound("InvT", T, G, sigma=sigma) + sigma * dist * dist / 2.0 + reg_start
    return INF


def window_bound(etas: np.ndarray, F: float, G: float, reg_start: float) -> float:
    """Bound on the regret over a window ``s..e`` with steps ``etas`` (any sequence, restarts too).

    Summing the lemma ([001] Lemma 2) over the window and by parts:
    ``F^2/2 (1/eta_s + sum_{t>s} (1/eta_t - 1/eta_{t-1})^+) + G^2/2 sum_t eta_t
    + lambda Omega(theta_s)`` (``= F^2 / (2 eta_e) + ...`` for non-increasing steps).
    """
    etas = np.asarray(etas, dtype=np.float64)
    if etas.size == 0:
        return 0.0
    if not (math.isfinite(F) and math.isfinite(G)) or not np.all(etas > 0):
        return INF
    inv = 1.0 / etas
    rises = float(np.sum(np.maximum(np.diff(inv), 0.0)))
    return float(0.5 * F * F * (inv[0] + rises) + 0.5 * G * G * np.sum(etas) + reg_start)


def theta_norm(model: OnlineMKL) -> float:
    """``||theta||`` from the block norms."""
    return float(np.sqrt(np.sum(np.square(model.block_norms))))


__all__: Sequence[str] = (
    "FeatureNorms",
    "kernel_diag",
    "lipschitz",
    "prop3_bound",
    "prop9_norm",
    "radius",
    "strong_convexity",
    "theta_norm",
    "theta_star_norm",
    "window_bound",
)


def etas_of(schedule: Any, n: int, ahead: int = 0) -> np.ndarray:
    """The global steps of ``n`` rounds that ended ``ahead`` rounds before the schedule's
    current round (NaN for the adaptive schedules, whose steps differ per block: the window
    bound then reads +Inf, none being derived for them)."""
    if schedule.adaptive:
        return np.full(n, math.nan)
    return schedule.etas(schedule.t - ahead - n + 1, n)
