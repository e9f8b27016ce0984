"""The learned state as plain numpy arrays (the layout it lives on: ``streammkl.core.layout``,
re-exported here).

``BlockState`` holds what learning changes: explicit weights ``w`` (K x P), per-block lazy
``scale`` and exact ``norms``, the shared support set (inputs ``sx``, per-view squared norms
``ssq``, output directions ``sv``, per-block coefficients ``coef``, self-kernel values ``kself``,
insertion ``age``), ``counters = [n_support, next_age]``, the ``bias`` and, for the projection
budget policy only, ``gram``: per implicit block the Gram matrix of the support pairs and its
(loaded) inverse (``core._numba.projection``), and ``lazy``: the factors of the sparse round of
wide records (``core._numba.wide``: ``u_m = alpha_m w_m``, each average ``P abar + Q w``), the
identity (alpha = 1, P = 1, Q = 0) once :meth:`BlockState.settle` folded them: every reader of
the arrays settles them first, and :meth:`BlockState.to_arrays` saves settled arrays only (the
factors are not saved).
``BlockState`` (like ``Layout``) is picklable and serialises to named arrays (``to_arrays``)
without pickle.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields

import numpy as np

from streammkl.core import _numba as nb
from streammkl.core.kernels import Kernel
from streammkl.core.layout import Layout, build_layout, product_map
from streammkl.statefile import state_digest  # re-exported: the digest of a saved state

__all__ = ["BlockState", "Layout", "build_layout", "product_map", "state_digest", "transplant"]


@dataclass
class BlockState:
    w: np.ndarray  # (K, P) explicit weights, unscaled
    w_avg: np.ndarray  # (K, P) running average of the explicit weights (scaled), or (0, 0)
    scale: np.ndarray  # (M,)
    norms: np.ndarray  # (M,) exact ||theta_m||
    sx: np.ndarray  # (cap, d)
    ssq: np.ndarray  # (cap, V)
    sv: np.ndarray  # (cap, K)
    coef: np.ndarray  # (M, cap)
    kself: np.ndarray  # (cap, M)
    age: np.ndarray  # (cap,) int64
    counters: np.ndarray  # [n_support, next_age]
    bias: np.ndarray  # (K,)
    avg_w: np.ndarray  # (E, K, P) averaged iterates of the explicit weights (scaled), E >= 0
    avg_bias: np.ndarray  # (E, K) their biases
    avg_loss: np.ndarray  # (E + 1,) discounted prequential losses: last iterate, then averages
    avg_count: np.ndarray  # (1,) rounds the averages have seen
    step_acc: np.ndarray  # (M + 1,) adaptive schedules: squared gradient norms per block, bias
    step_prev: np.ndarray  # (M,) FTRL: each block's step of the previous round (0: none yet)
    stored_norms: np.ndarray  # (M,) FTRL: ||u_m|| of the stored blocks (theta_m = scale_m u_m)
    gram: np.ndarray  # (n_implicit, 2, cap, cap) Gram matrices G and inverses Q, or (., 2, 0, 0)
    lazy: np.ndarray  # (2 + 2E, M) the sparse round's factors: alpha, writes, P (E rows), Q (E)

    @classmethod
    def empty(
        cls,
        layout: Layout,
        n_outputs: int,
        capacity: int,
        average: bool,
        n_averages: int = 0,
        gram: bool = False,
    ) -> BlockState:
        M = layout.kinds.shape[0]
        d = layout.masks.shape[1]
        K = n_outputs
        cap = capacity if layout.im_blocks.size else 0
        return cls(
            w=np.zeros((K, layout.width)),
            w_avg=np.zeros((K, layout.width)) if average else np.zeros((0, 0)),
            scale=np.ones(M),
            norms=np.zeros(M),
            sx=np.zeros((cap, d)),
            ssq=np.zeros((cap, layout.n_views)),
            sv=np.zeros((cap, K)),
            coef=np.zeros((M, cap)),
            kself=np.zeros((cap, M)),
            age=np.zeros(cap, dtype=np.int64),
            counters=np.zeros(2, dtype=np.int64),
            bias=np.zeros(K),
            avg_w=np.zeros((n_averages, K, layout.width)),
            avg_bias=np.zeros((n_averages, K)),
            avg_loss=np.zeros(n_averages + 1),
            avg_count=np.zeros(1),
            step_acc=np.zeros(M + 1),
            step_prev=np.zeros(M),
            stored_norms=np.zeros(M),
            gram=np.zeros((layout.im_blocks.size, 2, *(2 * (cap if gram else 0,)))),
            lazy=identity_factors(n_averages, M),
        )

    @property
    def n_support(self) -> int:
        return int(self.counters[0])

    @property
    def capacity(self) -> int:
        return int(self.sx.shape[0])

    @staticmethod
    def saved_names() -> tuple[str, ...]:
        """The arrays a saved state holds (every field but the sparse round's ``lazy`` factors,
        which a saved state has at the identity)."""
        return tuple(f.name for f in fields(BlockState) if f.name != "lazy")

    def settle(self, layout: Layout) -> None:
        """Fold the sparse round's factors into ``w`` and ``avg_w`` (the same model, identity
        factors): O(1) per block when already settled (checked here first: a model that never
        took the sparse round never compiles the fold)."""
        if not np.array_equal(self.lazy, _settled(self.lazy)):
            nb.settle(self.w, self.avg_w, layout.ex_blocks, layout.ex_off, self.lazy)

    def restart_columns(self, layout: Layout, m: int, cols: np.ndarray, stored: bool) -> None:
        """Columns ``cols`` of explicit block ``m`` (absolute) restart at zero, in the weights
        and in every average of them (a replaced landmark), in place; the block's norm is
        recomputed exactly, ``||theta_m|| = scale_m ||w_m||`` (and, with ``stored``, FTRL's
        ``||u_m||``, which ``w`` holds), the other blocks untouched."""
        self.settle(layout)
        a, e = int(layout.ex_off[m]), int(layout.ex_off[m + 1])
        cols = np.asarray(cols, dtype=np.int64)
        if cols.size and (cols.min() < a or cols.max() >= e):
            raise IndexError(f"columns {cols.tolist()} are not all in block {m} ({a}..{e - 1})")
        self.w[:, cols] = 0.0
        if self.w_avg.size:
            self.w_avg[:, cols] = 0.0
        if self.avg_w.size:
            self.avg_w[:, :, cols] = 0.0
        u = self.w[:, a:e]
        norm = math.sqrt(float(np.einsum("ka,ka->", u, u)))
        self.norms[m] = self.scale[m] * norm if norm > 0.0 else 0.0
        if stored:
            self.stored_norms[m] = norm

    def copy(self) -> BlockState:
        """A deep copy (every array copied, capacity kept)."""
        return BlockState(**{f.name: getattr(self, f.name).copy() for f in fields(self)})

    def to_arrays(self, layout: Layout | None = None) -> dict[str, np.ndarray]:
        """Named arrays trimmed to the used support set (the serialisable state); with the
        ``layout`` they live on, also to the columns and inputs it fills (the same arrays
        whatever room the layout keeps for inputs to come)."""
        n = self.n_support
        if layout is not None:  # settled, and the write counts restart (as in a loaded state)
            self.settle(layout)
            self.lazy[1] = 0.0
        elif not np.array_equal(self.lazy, _settled(self.lazy)):
            raise ValueError("the state's lazy factors need its layout to be settled")
        cols = None if layout is None else layout.used_columns()
        d = None if layout is None else layout.n_inputs
        out = {}
        for name in self.saved_names():  # (lazy: the identity once settled, not saved)
            arr = getattr(self, name)
            if cols is not None and name in ("w", "avg_w", "w_avg") and arr.shape[-1]:
                out[name] = np.take(arr, cols, axis=-1)  # (a new C-ordered array already)
                continue
            if name == "sx" and d is not None:
                arr = arr[:n, :d]
            elif name in ("sx", "ssq", "sv", "kself", "age"):
                arr = arr[:n]
            elif name == "coef":
                arr = arr[:, :n]
            elif name == "gram" and arr.shape[2]:
                arr = arr[:, :, :n, :n]
            out[name] = np.array(arr, copy=True, order="C")
        return out

    @classmethod
    def from_arrays(
        cls, arrays: Mapping[str, np.ndarray], capacity: int, copy: bool = True
    ) -> BlockState:
        """The state of saved arrays (:meth:`to_arrays`), its support set at ``capacity``
        slots at least. ``copy=False``: the arrays that need no reshaping are the saved ones,
        not copies (a view for a caller that only reads it: never learn on it)."""
        M = np.asarray(arrays["scale"]).shape[0]
        take = np.array if copy else np.asarray
        # arrays added after the first state format: zeros when an older file lacks them
        default: dict[str, int | tuple[int, ...]] = {
            "step_acc": M + 1, "step_prev": M, "stored_norms": M,
            "avg_w": (0, 0, 0), "avg_bias": (0, 0), "avg_loss": 1, "avg_count": 1,
            "gram": (0, 2, 0, 0),  # built by sync_gram when the policy needs it
        }  # fmt: skip
        state = cls(
            **{
                f.name: take(arrays[f.name])
                if f.name in arrays or f.name not in default
                else np.zeros(default[f.name])
                for f in fields(cls)
                if f.name != "lazy"
            },
            lazy=identity_factors(np.asarray(arrays.get("avg_w", np.zeros((0, 0, 0)))).shape[0], M),
        )
        state.resize_support(max(capacity, state.n_support))
        return state

    def spread(self, layout: Layout) -> None:
        """Arrays saved by :meth:`to_arrays` over the ``layout``'s used columns and inputs put
        back on all its columns (the free ones of its capacity at zero), in place."""
        cols = layout.used_columns()
        for name in ("w", "avg_w", "w_avg"):
            arr = getattr(self, name)
            if arr.shape[-1] == cols.size and cols.size != layout.width:
                out = np.zeros((*arr.shape[:-1], layout.width))
                out[..., cols] = arr
                setattr(self, name, out)
        if self.sx.shape[1] < layout.capacity:
            sx = np.zeros((self.sx.shape[0], layout.capacity))
            sx[:, : self.sx.shape[1]] = self.sx
            self.sx = sx

    def resize_support(self, capacity: int) -> None:
        """Reallocate the support arrays to ``capacity`` slots, keeping the first n_support."""
        n = self.n_support
        if capacity < n:
            raise ValueError(f"cannot shrink the support set below its {n} pairs")

        def grow(arr: np.ndarray, axis: int) -> np.ndarray:
            shape = list(arr.shape)
            shape[axis] = capacity
            out = np.zeros(shape, dtype=arr.dtype)
            sl = [slice(None)] * arr.ndim
            sl[axis] = slice(0, n)
            out[tuple(sl)] = arr[tuple(sl)]
            return out

        self.sx = grow(self.sx, 0)
        self.ssq = grow(self.ssq, 0)
        self.sv = grow(self.sv, 0)
        self.kself = grow(self.kself, 0)
        self.age = grow(self.age, 0)
        self.coef = grow(self.coef, 1)
        if self.gram.shape[2]:
            self.gram = grow(grow(self.gram, 2), 3)

    def sync_gram(self, layout: Layout, enabled: bool) -> None:
        """Make ``gram`` what the budget policy needs: with ``enabled`` (projection), the Gram
        matrices and inverses of the current pairs over every slot (kept when already there,
        else computed exactly); otherwise none."""
        n_im, cap = layout.im_blocks.size, self.capacity
        if not enabled:
            if self.gram.shape != (n_im, 2, 0, 0):
                self.gram = np.zeros((n_im, 2, 0, 0))
            return
        if self.gram.shape == (n_im, 2, cap, cap):
            return
        self.gram = np.zeros((n_im, 2, cap, cap))
        n = self.n_support
        V = self.sv[:n] @ self.sv[:n].T
        for b, m in enumerate(layout.im_blocks):
            v = layout.view_of[m]
            p0, p1, norm = layout.kp[m]
            G = self.gram[b, 0]
            nb.gram(
                layout.kinds[m], p0, p1, norm != 0.0, layout.masks[v], layout.view_full[v],
                self.sx[:n], self.sx[:n], G[:n, :n],
            )  # fmt: skip
            G[:n, :n] *= V
            nb.refresh_inverse(G, self.gram[b, 1], n)

    def grow_outputs(self, n_outputs: int) -> None:
        """Add zero rows/columns for new outputs (new classes): theta and norms are unchanged."""
        K = self.w.shape[0]
        extra = n_outputs - K
        if extra <= 0:
            return
        self.w = np.vstack([self.w, np.zeros((extra, self.w.shape[1]))])
        if self.w_avg.size or self.w_avg.shape[0]:
            self.w_avg = np.vstack([self.w_avg, np.zeros((extra, self.w_avg.shape[1]))])
        self.sv = np.hstack([self.sv, np.zeros((self.sv.shape[0], extra))])
        self.bias = np.concatenate([self.bias, np.zeros(extra)])
        E, _, P = self.avg_w.shape
        self.avg_w = np.concatenate([self.avg_w, np.zeros((E, extra, P))], axis=1)
        self.avg_bias = np.hstack([self.avg_bias, np.zeros((E, extra))])


def identity_factors(n_averages: int, n_blocks: int) -> np.ndarray:
    """The sparse round's factors of a settled state: alpha = 1, no writes counted, P = 1, Q =
    0 (``BlockState.lazy``)."""
    lazy = np.zeros((2 + 2 * n_averages, n_blocks))
    lazy[0] = 1.0
    lazy[2 : 2 + n_averages] = 1.0
    return lazy


def _settled(lazy: np.ndarray) -> np.ndarray:
    """``lazy`` with its factors at the identity (its write counts kept)."""
    out = identity_factors((lazy.shape[0] - 2) // 2, lazy.shape[1])
    out[1] = lazy[1]
    return out


def transplant(
    old_layout: Layout,
    old: BlockState,
    old_names: Sequence[str],
    new_layout: Layout,
    new_names: Sequence[str],
    kernels: Sequence[Kernel],
) -> BlockState:
    """State for a new layout (wider input, kernels added or removed, bandwidths refitted),
    keeping every surviving block's weights, coefficients, scale and exact norm. New blocks
    start at zero, and so does a block whose kernel now computes with other parameters (a
    refitted bandwidth: its weights were over another kernel's features). The old state is
    settled first (``BlockState.settle``)."""
    old.settle(old_layout)
    K = old.w.shape[0]
    d_new = new_layout.masks.shape[1]
    cap = old.capacity if new_layout.im_blocks.size else 0
    if new_layout.im_blocks.size and cap == 0:
        cap = max(old.n_support, 64)
    E = old.avg_w.shape[0]
    new = BlockState.empty(new_layout, K, cap, bool(old.w_avg.shape[0]), E)
    new.avg_bias[:] = old.avg_bias
    new.avg_loss[:] = old.avg_loss
    new.avg_count[:] = old.avg_count
    n = min(old.n_support, cap) if new_layout.im_blocks.size else 0
    new.counters[:] = old.counters
    new.counters[0] = n
    new.bias[:] = old.bias
    new.step_acc[-1] = old.step_acc[-1]
    width = min(old.sx.shape[1], d_new)
    new.sx[:n, :width] = old.sx[:n, :width]
    new.sv[:n] = old.sv[:n]
    new.age[:n] = old.age[:n]
    position = {name: i for i, name in enumerate(old_names)}
    for m, name in enumerate(new_names):
        i = position.get(name)
        if i is None or not np.array_equal(old_layout.kp[i], new_layout.kp[m]):
            continue
        new.scale[m] = old.scale[i]
        new.norms[m] = old.norms[i]
        new.step_acc[m] = old.step_acc[i]
        new.step_prev[m] = old.step_prev[i]
        new.stored_norms[m] = old.stored_norms[i]
        if new_layout.is_explicit[m]:
            a, e = old_layout.ex_off[i], old_layout.ex_off[i + 1]
            na = new_layout.ex_off[m]
            new.w[:, na : na + (e - a)] = old.w[:, a:e]
            if old.w_avg.shape[0]:
                new.w_avg[:, na : na + (e - a)] = old.w_avg[:, a:e]
            new.avg_w[:, :, na : na + (e - a)] = old.avg_w[:, :, a:e]
        elif not old_layout.is_explicit[i]:
            new.coef[m, :n] = old.coef[i, :n]
    if n:  # per-view squared norms and self-kernel values under the new layout
        for v in range(new_layout.n_views):
            new.ssq[:n, v] = np.einsum("ij,ij,j->i", new.sx[:n], new.sx[:n], new_layout.masks[v])
        for m in new_layout.im_blocks:
            v = new_layout.view_of[m]
            k = kernels[m]
            p0, p1, normalize = k.code_params()
            sq = new.ssq[:n, v]
            new.kself[:n, m] = [
                nb.kernel_value(k.kind, p0, p1, normalize, s, 0.0, s, s) for s in sq
            ]
    return new
