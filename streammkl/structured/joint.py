"""The parameter blocks of the joint kernel of [001] §2.3, and one SPOM round on them.

Unigram blocks, one per base kernel, are the core's block layout and state
(:mod:`streammkl.core.state`) with the label set as the output dimension K: an explicit block is
a K x D weight matrix over the kernel's feature map, a kernelized block a support set of positions
``x_i`` with label-indexed directions ``v_i`` (``e_{y_i} - e_{yhat_i}`` or ``e_{y_i} - mu_i``), a
lazy per-block scale and an exactly tracked norm. The bigram block is a K x K matrix ``A``;
transition scores are ``sqrt(beta_0) A`` with the fixed ``beta_0 = transition_weight``.

Prox and projection run through the core's compiled ``apply_prox_steps`` on M + 1 blocks, the
bigram block appended as an explicit block without columns (its norm is rescaled by the core like
any other; ``A`` follows the ratio). With a fixed beta_0 the bigram block is left out of every
prox step (unregularized) but not out of the projection.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from streammkl.core import budget as budgets
from streammkl.core import compiled as cnb
from streammkl.core import regularizers as regs_mod
from streammkl.core.kernels import Kernel
from streammkl.core.regularizers import Regularizer
from streammkl.core.state import BlockState, Layout, build_layout, transplant
from streammkl.core.update import step_arrays
from streammkl.structured.pruning import B1Pruning

TRANSITION = "transition"  # name of the bigram block in block_norms / kernel_weights


class JointBlocks:
    """Unigram blocks (core state) + bigram block, for a growing label set and feature set."""

    def __init__(
        self,
        kernels: Sequence[Kernel],
        regularizers: Sequence[Regularizer],
        radius: float | None,
        budget: int | None,
        policy: int,
        seed: int,
        learn_transition_weight: bool,
        transition_weight: float,
    ):
        self.kernels = tuple(kernels)
        self.regularizers = tuple(regularizers)
        self.radius = 0.0 if radius is None else float(radius)
        self.budget = budget
        self.policy = policy
        self.seed = seed
        self.learn_transition_weight = learn_transition_weight
        self.transition_scale = float(np.sqrt(transition_weight))
        self.layout: Layout | None = None
        self.state: BlockState | None = None
        self.pruning: B1Pruning | None = None
        self.transition = np.zeros((0, 0))  # A: (K, K), label a followed by label b

    @property
    def names(self) -> list[str]:
        return [k.name for k in self.kernels]

    @property
    def keeps_gram(self) -> bool:
        """Whether the state keeps Gram matrices (the projection policy under a budget)."""
        return self.budget is not None and self.policy == cnb.B_PROJECT

    @property
    def regularized_names(self) -> list[str]:
        return [*self.names, TRANSITION] if self.learn_transition_weight else self.names

    # --- shape changes ----------------------------------------------------------------------
    def rebuild(self, keys: list[str], n_labels: int) -> None:
        """Layout for ``keys`` and ``n_labels``; learned blocks are kept, new parts start at 0."""
        index = {k: i for i, k in enumerate(keys)}
        layout = build_layout(self.kernels, len(keys), self.seed, index, keys)
        if self.state is None or self.layout is None:
            cap = budgets.initial_capacity(self.budget)
            state = BlockState.empty(layout, n_labels, cap, False)
        else:
            self.state.grow_outputs(n_labels)
            names = self.names
            state = transplant(self.layout, self.state, names, layout, names, self.kernels)
        state.sync_gram(layout, self.keeps_gram)
        self.layout, self.state = layout, state
        self.pruning = B1Pruning(layout)  # a derived cache: refitted for the new layout
        K = self.transition.shape[0]
        if n_labels > K:
            grown = np.zeros((n_labels, n_labels))
            grown[:K, :K] = self.transition
            self.transition = grown
        codes, params, groups = step_arrays(self.regularizers, len(self.kernels) + 1,
                                            [*self.names, TRANSITION])  # fmt: skip
        if not self.learn_transition_weight:
            groups[:, -1] = False  # beta_0 fixed: the bigram block is outside every prox step
        self.steps = (codes, params, groups)
        self.ex_off1 = np.append(layout.ex_off, layout.ex_off[-1])
        self.is_explicit1 = np.append(layout.is_explicit, True)

    def ensure_room(self, incoming: int) -> bool:
        """Grow the support arrays for ``incoming`` more pairs if needed; whether they grew."""
        assert self.state is not None and self.layout is not None
        if self.layout.im_blocks.size:
            cap = budgets.needs_growth(
                self.state.n_support, self.state.capacity, self.budget, incoming
            )
            if cap:
                self.state.resize_support(cap)
                return True
        return False

    def _width(self, X: np.ndarray) -> np.ndarray:
        assert self.state is not None
        d = self.state.sx.shape[1]
        if X.shape[1] == d:
            return X
        return np.ascontiguousarray(np.pad(X, ((0, 0), (0, d - X.shape[1]))))

    # --- scores -----------------------------------------------------------------------------
    def block_scores(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Block scores (T, M, K), feature maps (T, P) and view norms (T, V) at every position."""
        L, S, pruning = self.layout, self.state, self.pruning
        assert L is not None and S is not None and pruning is not None  # set together by rebuild
        X = self._width(X)
        T, K, M = X.shape[0], S.w.shape[0], len(self.kernels)
        phis = np.zeros((T, L.width))
        scores = np.zeros((T, M, K))
        xsqs = np.zeros((T, L.n_views))
        im_blocks, im_pruned, basis, sproj = pruning.arrays(S)
        cnb.sequence_scores(
            X, L.kinds, L.kp, L.view_of, L.masks, L.view_full, L.ex_blocks, im_blocks,
            L.ex_off, L.ex_kind, L.ex_norm, L.phi_src, L.rff_wt, L.rff_b,
            S.w, S.scale, S.sx, S.ssq, S.sv, S.coef, S.n_support, phis, scores, xsqs,
            np.zeros(L.n_views), im_pruned, basis, sproj, np.zeros(basis.shape[1]),
        )  # fmt: skip
        return scores, phis, xsqs

    def potentials(self, X: np.ndarray, n_labels: int) -> tuple[np.ndarray, np.ndarray, tuple]:
        """Unary (T, n) and transition (n, n) scores for ``n >= K`` labels (extra ones: 0)."""
        K = self.transition.shape[0]
        unary = np.zeros((X.shape[0], n_labels))
        cache: tuple = ()
        if self.state is not None:
            cache = self.block_scores(X)
            unary[:, :K] = cache[0].sum(axis=1)
        trans = np.zeros((n_labels, n_labels))
        trans[:K, :K] = self.transition_scale * self.transition
        return unary, trans, cache

    # --- one round --------------------------------------------------------------------------
    def step(self, X: np.ndarray, V: np.ndarray, G0: np.ndarray, eta: float, cache: tuple) -> None:
        """theta_m += eta sum_i phi_m(x_i) (x) V_i; A += eta sqrt(beta_0) G0; then prox."""
        L, S = self.layout, self.state
        assert L is not None and S is not None  # step follows ensure_room, after a rebuild
        scores, phis, xsqs = cache
        active = np.any(V != 0.0, axis=1)
        if active.any():
            cnb.sequence_step(
                self._width(X), V, active, eta, L.kinds, L.kp, L.view_of, L.masks, L.view_full,
                L.ex_blocks, L.im_blocks, L.ex_off, self.policy,
                budgets.capacity_limit(self.budget),
                S.w, S.scale, S.norms, S.sx, S.ssq, S.sv, S.coef, S.kself, S.age, S.counters,
                S.gram, phis, scores, xsqs,
            )  # fmt: skip
        self.transition += (eta * self.transition_scale) * G0
        self.prox(eta)

    def prox(self, eta: float) -> None:
        """J prox steps on the block norms (bigram last), then the projection (core routine)."""
        L, S = self.layout, self.state
        assert L is not None and S is not None
        M = len(self.kernels)
        t_norm = float(np.linalg.norm(self.transition))
        norms = np.append(S.norms, t_norm)
        scale = np.append(S.scale, 1.0)
        codes, params, groups = self.steps
        cnb.apply_prox_steps(
            np.full(M + 1, eta), codes, params, groups, self.radius, self.is_explicit1, L.ex_blocks,
            self.ex_off1, S.w, scale, norms, S.coef, S.n_support, np.zeros(M + 1),
        )  # fmt: skip
        S.norms[:] = norms[:M]
        S.scale[:] = scale[:M]
        if norms[M] != t_norm:
            self.transition *= norms[M] / t_norm if t_norm > 0 and norms[M] > 0 else 0.0

    # --- introspection ----------------------------------------------------------------------
    def block_norms(self) -> dict[str, float]:
        norms = self.state.norms.tolist() if self.state is not None else [0.0] * len(self.kernels)
        out = dict(zip(self.names, norms, strict=True))
        out[TRANSITION] = float(np.linalg.norm(self.transition))
        return out

    def regularized_norms(self) -> np.ndarray:
        b = self.block_norms()
        return np.array([b[n] for n in self.regularized_names])

    def regularization_value(self) -> float:
        """``lambda * Omega(theta)`` over the regularized blocks."""
        l1 = 0.0
        if any(not r.norm_only for r in self.regularizers) and self.state is not None:
            L, S = self.layout, self.state
            assert L is not None  # state and layout are set together by rebuild
            for m in L.ex_blocks:
                l1 += S.scale[m] * float(np.abs(S.w[:, L.ex_off[m] : L.ex_off[m + 1]]).sum())
        b = self.regularized_norms()
        return float(sum(r.value(b, l1) for r in self.regularizers))

    def kernel_weights(self) -> dict[str, float]:
        """beta_m ∝ ||theta_m|| (∝ ||theta_m||^(2-q) for GroupLq) over the regularized blocks."""
        w = regs_mod.kernel_weights(self.regularizers, self.regularized_norms())
        return dict(zip(self.regularized_names, w.tolist(), strict=True))
