"""``ProximalGradientMKL``: SpicyMKL's objective by accelerated proximal gradient (a baseline).

Minimises the same problem as ``SpicyMKL(regularizer="l1")`` with a smooth loss,

    sum_i loss(y_i, sum_m f_m(x_i) + b) + C sum_m ||f_m||,

on the same (unit-trace, ridge-added) Grams, by FISTA (Beck & Teboulle) with backtracking on the
step size, a step that is allowed to grow again after every accepted iteration, and adaptive
restart of the momentum when the objective goes up (O'Donoghue & Candès). It exists to time
SpicyMKL against a first-order method on exactly its own objective (``benchmarks/spicymkl.py``).

Parametrisation: ``K_m = L_m L_m^T`` from the eigendecomposition (directions with eigenvalue below
``rank_tol`` times the largest are dropped, then the ridge is added back to the kept ones), so
``f_m = L_m beta_m`` at the training points, ``||f_m|| = ||beta_m||`` and the penalty is a group
lasso whose prox is a block soft threshold. One iteration is one product ``L^T [g+, g-]`` with the
stacked factors (the gradient, and the dual norms of the duality gap for free) plus products with
the *active* blocks only. Stopping: the relative duality gap of SpicyMKL (same dual point: the
loss's dual variable at the current point made feasible and scaled into the ball), so both solvers
stop at the same certified accuracy.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.special import expit

from streammkl.batch._dal import dual_point
from streammkl.batch._dal_losses import make_loss
from streammkl.batch.grams import check_precomputed, trace_scales

__all__ = ["ProximalGradientMKL"]


def _loss_grad(name: str, z: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Summed loss and its derivative in z."""
    if name == "logistic":
        return float(np.sum(np.logaddexp(0.0, -y * z))), -y * expit(-y * z)
    r = z - y
    return 0.5 * float(r @ r), r


class ProximalGradientMKL:
    """Block 1-norm MKL (SpicyMKL's objective) by FISTA with backtracking and adaptive restart.

    Parameters
    ----------
    C
        Regularisation strength (loss summed over samples, as in ``SpicyMKL``).
    loss
        ``"logistic"`` or ``"squared"`` (``(y - f)^2 / 2``): the method needs a smooth loss.
    fit_intercept, normalize, ridge, tol
        As in ``SpicyMKL`` (unit-trace Grams, 1e-8 on the diagonal, relative duality gap).
    max_iter
        Maximum number of FISTA iterations.
    rank_tol
        Eigen-directions of each normalised Gram below ``rank_tol * largest eigenvalue`` are
        dropped from the factor (they change the optimum by about ``rank_tol`` relative).
    time_limit
        Stop after this many seconds of iterations (None: no limit); ``converged_`` tells.

    Attributes
    ----------
    dual_coef_, intercept_, block_norms_, active_kernels_, gram_scale_
        As in ``SpicyMKL`` (``f_m = sum_i dual_coef_[m, i] k_m(x_i, .)`` in the normalised Grams).
    objective_, duality_gap_history_, objective_history_, n_iter_, n_evals_, converged_
        Final primal value, gap and primal value per iteration, iterations, loss evaluations
        (backtracking included) and whether the gap reached ``tol``.
    factor_time_, solve_time_, rank_
        Seconds for the eigendecompositions and for the iterations; total kept rank.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3)); y = np.sign(X[:, 0] + 0.1 * rng.normal(size=60))
    >>> grams = [np.outer(X[:, j], X[:, j]) for j in range(3)]
    >>> model = ProximalGradientMKL(C=0.5).fit(grams, y)
    >>> [int(m) for m in model.active_kernels_], model.duality_gap_history_[-1] <= 0.01
    ([0], True)
    """

    def __init__(
        self,
        C: float = 0.05,
        loss: str = "logistic",
        fit_intercept: bool = True,
        normalize: str | None = "trace",
        ridge: float = 1e-8,
        tol: float = 0.01,
        max_iter: int = 100_000,
        rank_tol: float = 1e-10,
        time_limit: float | None = None,
    ):
        self.C = C
        self.loss = loss
        self.fit_intercept = fit_intercept
        self.normalize = normalize
        self.ridge = ridge
        self.tol = tol
        self.max_iter = max_iter
        self.rank_tol = rank_tol
        self.time_limit = time_limit

    def _check(self) -> None:
        if self.loss not in ("logistic", "squared"):
            raise ValueError(
                f"loss: proximal gradient needs a smooth loss, 'logistic' or 'squared'; got "
                f"{self.loss!r} (use SpicyMKL for the hinge and epsilon-insensitive losses)"
            )
        if self.normalize not in (None, "trace"):
            raise ValueError(f"normalize: expected 'trace' or None, got {self.normalize!r}")
        if not (self.C > 0 and np.isfinite(self.C)):
            raise ValueError(f"C must be a finite number > 0, got {self.C!r}")
        for name in ("tol", "ridge", "rank_tol"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if int(self.max_iter) < 1:
            raise ValueError(f"max_iter must be >= 1, got {self.max_iter!r}")

    def _factor(self, K: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Stacked factors ``L = [L_1 .. L_M]`` (n x rank) and the block offsets.

        The factors are written as rows of an ``(M n, n)`` buffer that is only touched up to the
        kept rank (untouched pages of ``np.empty`` take no memory), so no second copy is needed.
        """
        M, n = K.shape[0], K.shape[1]
        LT = np.empty((M * n, n))
        offsets = np.zeros(M + 1, dtype=np.intp)
        for m in range(M):
            w, V = np.linalg.eigh(K[m] * self.gram_scale_[m])  # LAPACK syevd: robust
            keep = w > self.rank_tol * max(float(w[-1]), 1e-300)
            w, V = w[keep] + float(self.ridge), V[:, keep]
            offsets[m + 1] = offsets[m] + w.size
            LT[offsets[m] : offsets[m + 1]] = (V * np.sqrt(w)).T
        return LT[: offsets[-1]].T, offsets

    def fit(self, K, y) -> ProximalGradientMKL:
        """Fit on precomputed Grams ``(n_kernels, n, n)`` (or a list of n x n Grams)."""
        self._check()
        K = check_precomputed(K)
        M, n = K.shape[0], K.shape[1]
        y = np.asarray(y)
        if y.shape != (n,):
            raise ValueError(f"y: expected shape ({n},), got {y.shape}")
        dal_loss = make_loss(self.loss)
        if dal_loss.classification:
            self.classes_ = np.unique(y)
            if self.classes_.size != 2:
                raise ValueError(f"y: need exactly 2 classes, got {self.classes_.size}")
            y = np.where(y == self.classes_[1], 1.0, -1.0)
        else:
            y = y.astype(np.float64)
        names = [f"kernel_{m}" for m in range(M)]
        self.gram_scale_ = trace_scales(K, names) if self.normalize == "trace" else np.ones(M)
        t0 = time.perf_counter()
        L, offs = self._factor(K)
        self.factor_time_ = time.perf_counter() - t0
        self.rank_ = int(L.shape[1])
        beta, b = self._solve(L, offs, y, dal_loss)
        alpha = np.zeros((M, n))
        norms = np.sqrt(np.add.reduceat(beta * beta, offs[:-1])) if beta.size else np.zeros(M)
        for m in np.nonzero(norms > 0)[0]:
            Lm = L[:, offs[m] : offs[m + 1]]  # = V sqrt(w): alpha_m = V w^-1/2 beta_m
            alpha[m] = Lm @ (beta[offs[m] : offs[m + 1]] / np.einsum("ij,ij->j", Lm, Lm))
        self.dual_coef_, self.intercept_, self.block_norms_ = alpha, float(b), norms
        self.active_kernels_ = np.nonzero(norms > 0)[0]
        return self

    def _solve(self, L, offs, y, dal_loss) -> tuple[np.ndarray, float]:
        C, bias, name = float(self.C), bool(self.fit_intercept), str(self.loss)
        R, starts = L.shape[1], offs[:-1]
        sizes = np.diff(offs)

        def block_norms(beta):
            return np.sqrt(np.add.reduceat(beta * beta, starts))

        def z_of(beta, b):
            """``L beta + b`` touching only the nonzero blocks."""
            on = np.nonzero(block_norms(beta) > 0)[0]
            if 3 * on.size > sizes.size:  # many active blocks: one product with all of L
                return L @ beta + b
            z = np.full(L.shape[0], b)
            for m in on:
                z += L[:, offs[m] : offs[m + 1]] @ beta[offs[m] : offs[m + 1]]
            return z

        t0 = time.perf_counter()
        x, xb = np.zeros(R), 0.0
        zx = z_of(x, xb)
        yv, yb, zy = x.copy(), xb, zx.copy()
        fx = _loss_grad(name, zx, y)[0] + C * float(block_norms(x).sum())
        t, step_l = 1.0, 1.0
        self.duality_gap_history_: list[float] = []
        self.objective_history_: list[float] = []
        self.n_evals_, self.converged_ = 0, False
        best = (np.inf, x, xb)
        for it in range(int(self.max_iter)):
            ly, g = _loss_grad(name, zy, y)
            self.n_evals_ += 1
            rho = -g
            rho_hat = dual_point(rho, y, dal_loss, bias)
            G = np.stack([g, rho_hat]) @ L  # one pass over the factors for both
            grad, hat_norms = G[0], np.sqrt(np.add.reduceat(G[1] ** 2, starts))
            primal_y = ly + C * float(block_norms(yv).sum())
            scale = max(1.0, float(hat_norms.max(initial=0.0)) / C)
            dual = dal_loss.dual(rho_hat / scale, y)
            gap = (primal_y - dual) / max(abs(primal_y), 1e-300)
            self.duality_gap_history_.append(float(gap))
            self.objective_history_.append(float(primal_y))
            if primal_y < best[0]:
                best = (primal_y, yv.copy(), yb)
            self.n_iter_ = it + 1
            if gap <= self.tol:
                self.converged_ = True
                break
            if self.time_limit is not None and time.perf_counter() - t0 > self.time_limit:
                break
            gb = float(g.sum()) if bias else 0.0
            step_l *= 0.9  # let the step grow again; backtracking below restores it if needed
            while True:
                v = yv - grad / step_l
                nv = np.sqrt(np.add.reduceat(v * v, starts))
                shrink = np.maximum(0.0, 1.0 - (C / step_l) / np.maximum(nv, 1e-300))
                xn = v * np.repeat(shrink, sizes)
                xnb = yb - gb / step_l
                zn = z_of(xn, xnb)
                ln = _loss_grad(name, zn, y)[0]
                self.n_evals_ += 1
                d, db = xn - yv, xnb - yb
                model = ly + grad @ d + gb * db + 0.5 * step_l * (d @ d + db * db)
                if ln <= model + 1e-12 * abs(ly):
                    break
                step_l *= 2.0
            fn = ln + C * float(block_norms(xn).sum())
            if fn > fx:  # adaptive restart: drop the momentum
                t = 1.0
            t_next = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
            mom = (t - 1.0) / t_next
            yv = xn + mom * (xn - x)
            yb = xnb + mom * (xnb - xb)
            zy = zn + mom * (zn - zx)
            x, xb, zx, fx, t = xn, xnb, zn, fn, t_next
        self.solve_time_ = time.perf_counter() - t0
        self.objective_ = float(best[0])
        return best[1], best[2]

    def decision_function(self, K) -> np.ndarray:
        """``sum_m f_m(x) + b`` from test Grams ``(n_kernels, n_test, n_train)``."""
        if not hasattr(self, "dual_coef_"):
            raise RuntimeError("ProximalGradientMKL: call fit before predicting")
        K = check_precomputed(K, n_cols=self.dual_coef_.shape[1], square=False)
        if K.shape[0] != self.dual_coef_.shape[0]:
            raise ValueError(
                f"precomputed Grams: {K.shape[0]} kernels, model has {self.dual_coef_.shape[0]}"
            )
        act = self.active_kernels_
        Ka = K[act] * self.gram_scale_[act, None, None]
        return np.einsum("mij,mj->i", Ka, self.dual_coef_[act]) + self.intercept_

    def predict(self, K) -> np.ndarray:
        f = self.decision_function(K)
        if self.loss == "logistic":
            return np.where(f >= 0, self.classes_[1], self.classes_[0])
        return f
