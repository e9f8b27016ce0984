"""``SpicyMKL``: batch sparse MKL by the dual augmented Lagrangian (Suzuki & Tomioka, 2011).

Minimises ``sum_i loss(y_i, sum_m f_m(x_i) + b) + C sum_m g(||f_m||)`` — note the *summed* loss:
``streammkl.batch.conversion`` maps C to the online learner's lambda (mean loss), eq. 6.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from streammkl.batch._dal import dal_solve
from streammkl.batch._dal_losses import make_loss
from streammkl.batch._penalties import make_penalty
from streammkl.batch.grams import check_precomputed, gram_stack, kernel_names, trace_scales

__all__ = ["SpicyMKL"]


class SpicyMKL:
    """Sparse iterative MKL (SpicyMKL): proximal minimisation with growing gamma, inner Newton.

    Parameters
    ----------
    kernels
        A sequence of kernel objects (``streammkl.core.kernels``; anything with ``gram(X, Y)``) —
        the Grams are built in ``fit`` — or ``"precomputed"``: ``fit`` then takes an array
        ``(n_kernels, n, n)`` (or a list of n x n Grams) and ``decision_function`` an array
        ``(n_kernels, n_test, n)``.
    C
        Regularisation strength multiplying the penalty; the loss is summed over samples.
    loss
        ``"logistic"``, ``"hinge"`` (slack augmented Lagrangian, §3.4.1), ``"squared"``
        (``(y - f)^2 / 2``) or ``"epsilon_insensitive"`` (§3.4.2); or a ``streammkl.core.losses``
        object of those kinds.
    regularizer
        ``"l1"`` (block 1-norm, sparse), ``"elastic_net"`` (``C((1 - mix)||f|| + mix ||f||^2 / 2)``
        per block, eq. 43), ``"lq"`` (``C/q ||f||^q``, q > 1) or ``"squared_l1"``
        (``C/2 (sum ||f_m||)^2``, eq. 5).
    elastic_mix
        The paper's lambda of the elastic net (0 = block 1-norm, 1 = uniform weights).
    q
        Exponent of the block q-norm.
    epsilon
        Tube width of the epsilon-insensitive loss.
    fit_intercept
        Learn an unregularised bias b (the dual then carries ``sum rho = 0``).
    normalize
        ``"trace"`` scales every training Gram to unit trace (§6.1; test Grams by the same factor);
        None keeps the kernels as given (needed to compare with the online learner at equal lambda).
    ridge
        Added to the diagonal of every (normalised) training Gram (footnote 1 of the paper: 1e-8).
    tol
        Stop when the relative duality gap ``(primal - dual) / primal`` is at most this.
    max_iter
        Maximum number of outer (proximal) iterations.
    gamma0, gamma_growth
        ``gamma_t = gamma0 * gamma_growth^t``, t = 0, 1, ... (default ``gamma0 = 10 / C``, about
        half the outer iterations; ``gamma0=2.0`` is the paper's ``2^t`` from t = 1).
    inner_tol, max_newton
        Inner Newton stops at ``||grad||_inf <= inner_tol`` or after ``max_newton`` steps.
    screening
        Skip kernels that provably stay inactive (exact bound); False computes every kernel at
        every inner evaluation (for the touch-count comparison).

    Attributes
    ----------
    dual_coef_
        ``alpha`` of shape ``(n_kernels, n_samples)``; ``f_m = sum_i alpha_{m,i} k_m(x_i, .)``.
    intercept_, block_norms_, kernel_weights_, active_kernels_
        Bias, ``||f_m||`` (in the normalised kernels), the paper's kernel weights ``d_m`` scaled to
        sum 1, and the indices of kernels with ``f_m != 0``.
    duality_gap_history_, objective_history_, n_iter_, objective_, dual_objective_
        Per outer iteration; final primal and best dual value.
    n_kernel_touches_
        ``{"inner": O(n^2) kernel operations inside the Newton loops, "full": those of the one
        full pass per outer iteration, "inner_if_unscreened": what the inner loops would have cost
        touching every kernel}``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3)); y = np.sign(X[:, 0] + 0.1 * rng.normal(size=60))
    >>> grams = [np.outer(X[:, j], X[:, j]) for j in range(3)]
    >>> model = SpicyMKL(kernels="precomputed", C=0.5).fit(grams, y)
    >>> [int(m) for m in model.active_kernels_], model.duality_gap_history_[-1] <= 0.01
    ([0], True)
    """

    def __init__(
        self,
        kernels: Sequence[object] | str | None = None,
        C: float = 0.05,
        loss: object = "logistic",
        regularizer: str = "l1",
        elastic_mix: float = 0.5,
        q: float = 1.5,
        epsilon: float = 0.1,
        fit_intercept: bool = True,
        normalize: str | None = "trace",
        ridge: float = 1e-8,
        tol: float = 0.01,
        max_iter: int = 100,
        gamma0: float | None = None,
        gamma_growth: float = 2.0,
        inner_tol: float = 1e-8,
        max_newton: int = 100,
        screening: bool = True,
    ):
        self.kernels = kernels
        self.C = C
        self.loss = loss
        self.regularizer = regularizer
        self.elastic_mix = elastic_mix
        self.q = q
        self.epsilon = epsilon
        self.fit_intercept = fit_intercept
        self.normalize = normalize
        self.ridge = ridge
        self.tol = tol
        self.max_iter = max_iter
        self.gamma0 = gamma0
        self.gamma_growth = gamma_growth
        self.inner_tol = inner_tol
        self.max_newton = max_newton
        self.screening = screening

    # --- data -------------------------------------------------------------------------------
    def _precomputed(self) -> bool:
        if self.kernels is None:
            raise ValueError("SpicyMKL: give kernels=(kernel objects, ...) or 'precomputed'")
        if isinstance(self.kernels, str):
            if self.kernels != "precomputed":
                raise ValueError(
                    f"kernels: expected a sequence or 'precomputed', got {self.kernels!r}"
                )
            return True
        if len(self.kernels) == 0:
            raise ValueError("kernels: give at least one kernel")
        return False

    def _train_grams(self, X) -> np.ndarray:
        if self._precomputed():
            K = check_precomputed(X)
            self.X_fit_ = None
        else:
            # not precomputed: _precomputed() rejected None, so kernels is the sequence
            assert self.kernels is not None and not isinstance(self.kernels, str)
            K = gram_stack(self.kernels, X)
            self.X_fit_ = np.array(X, dtype=np.float64)
        self.kernel_names_ = kernel_names(None if self._precomputed() else self.kernels, len(K))
        if self.normalize not in (None, "trace"):
            raise ValueError(f"normalize: expected 'trace' or None, got {self.normalize!r}")
        self.gram_scale_ = (
            trace_scales(K, self.kernel_names_) if self.normalize == "trace" else np.ones(len(K))
        )
        K = K * self.gram_scale_[:, None, None]  # a fresh array: the caller's is not modified
        if self.ridge:
            K[:, np.arange(K.shape[1]), np.arange(K.shape[1])] += float(self.ridge)
        return K

    def _targets(self, y, n: int, classification: bool) -> np.ndarray:
        y = np.asarray(y)
        if y.ndim != 1 or y.shape[0] != n:
            raise ValueError(f"y: expected shape ({n},), got {y.shape}")
        if classification:
            self.classes_ = np.unique(y)
            if self.classes_.size != 2:
                raise ValueError(
                    f"y: binary classification needs exactly 2 classes, got {self.classes_.size}"
                )
            return np.where(y == self.classes_[1], 1.0, -1.0)
        y = y.astype(np.float64)
        if not np.all(np.isfinite(y)):
            raise ValueError("y contains NaN or infinite values")
        return y

    # --- fit / predict ----------------------------------------------------------------------
    def fit(self, X, y) -> SpicyMKL:
        loss = make_loss(self.loss, self.epsilon)
        pen = make_penalty(self.regularizer, self.C, self.elastic_mix, self.q)
        for name in ("tol", "ridge"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if not self.gamma_growth >= 1.0:
            raise ValueError(f"gamma_growth must be >= 1, got {self.gamma_growth!r}")
        K = self._train_grams(X)
        yy = self._targets(y, K.shape[1], loss.classification)
        gamma0 = 10.0 / self.C if self.gamma0 is None else float(self.gamma0)
        if not gamma0 > 0:
            raise ValueError(f"gamma0 must be > 0, got {self.gamma0!r}")
        res = dal_solve(
            K, yy, loss, pen,
            fit_intercept=bool(self.fit_intercept), tol=float(self.tol),
            max_iter=int(self.max_iter), gamma0=gamma0, gamma_growth=float(self.gamma_growth),
            inner_tol=float(self.inner_tol), max_newton=int(self.max_newton),
            screening=bool(self.screening),
        )  # fmt: skip
        self.dual_coef_ = res.alpha
        self.intercept_ = res.intercept
        self.block_norms_ = res.block_norms
        self.active_kernels_ = np.nonzero(res.block_norms > 0)[0]
        w = pen.weights(res.block_norms)
        self.kernel_weights_ = w / w.sum() if w.sum() > 0 else w
        self.duality_gap_history_ = list(res.gap_history)
        self.objective_history_ = list(res.primal_history)
        self.active_history_ = list(res.active_history)
        self.time_history_ = list(res.time_history)
        self.objective_ = res.primal
        self.dual_objective_ = res.dual
        self.n_iter_ = res.n_iter
        self.n_newton_iter_ = res.n_newton
        self.converged_ = res.converged
        self.n_kernel_touches_ = {
            "inner": res.touches_inner,
            "full": res.touches_full,
            "inner_if_unscreened": res.n_evals * K.shape[0],
        }
        self.inner_stats_ = {
            "evaluations": res.n_evals,
            "candidates": res.inner_candidates,
            "active": res.inner_active,
            "touched_kernels": sorted(res.touched_kernels),
            "retries": res.n_retries,
            "per_outer": list(res.inner_history),
        }
        self._loss = loss
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "dual_coef_"):
            raise RuntimeError("SpicyMKL: call fit before predicting")

    def decision_function(self, X) -> np.ndarray:
        """``sum_m f_m(x) + b``; only the active kernels are evaluated."""
        self._check_fitted()
        act = self.active_kernels_
        if self._precomputed():
            K = check_precomputed(X, n_cols=self.dual_coef_.shape[1], square=False)
            if K.shape[0] != self.dual_coef_.shape[0]:
                raise ValueError(
                    f"precomputed Grams: {K.shape[0]} kernels, model has {self.dual_coef_.shape[0]}"
                )
            K = K[act]
        else:
            # not precomputed: _precomputed() rejected None, so kernels is the sequence
            assert self.kernels is not None and not isinstance(self.kernels, str)
            K = gram_stack(self.kernels, X, self.X_fit_, which=act)
        K = K * self.gram_scale_[act, None, None]
        return np.einsum("mij,mj->i", K, self.dual_coef_[act]) + self.intercept_

    def predict(self, X) -> np.ndarray:
        f = self.decision_function(X)
        if self._loss.classification:
            return np.where(f >= 0, self.classes_[1], self.classes_[0])
        return f

    def score(self, X, y) -> float:
        """Accuracy (classification) or the coefficient of determination R^2 (regression)."""
        pred = self.predict(X)
        y = np.asarray(y)
        if self._loss.classification:
            return float(np.mean(pred == y))
        y = y.astype(float)
        return 1.0 - float(np.sum((y - pred) ** 2)) / max(
            float(np.sum((y - y.mean()) ** 2)), 1e-300
        )
