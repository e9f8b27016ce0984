"""The layout of a kernel bank as plain numpy arrays (``Layout``, built by ``build_layout``).

``Layout`` is fixed by (kernels, input width d, feature names, seed): which blocks are explicit,
their feature maps (``product_map`` for the linear and quadratic maps, random Fourier frequencies,
the additive Gaussian map's sparse components), and the distinct feature subsets ("views") of
the implicit blocks. The learned state over it is ``streammkl.core.state.BlockState``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from streammkl.core import _numba as nb
from streammkl.core.kernels import RBF, AdditiveRBF, AdditiveStumps, Kernel, MedianRBF, Polynomial

__all__ = ["Layout", "build_layout", "product_map"]


@dataclass
class Layout:
    kinds: np.ndarray  # (M,) int64 kernel kind codes
    kp: np.ndarray  # (M, 3) p0, p1, normalize
    is_explicit: np.ndarray  # (M,) bool
    view_of: np.ndarray  # (M,) int64 view index of implicit blocks (-1 for explicit)
    masks: np.ndarray  # (V, d) float feature masks of the views
    view_full: np.ndarray  # (V,) bool: the view reads every input
    ex_blocks: np.ndarray  # indices of explicit blocks
    im_blocks: np.ndarray  # indices of implicit blocks
    ex_off: np.ndarray  # (M + 1,) column offsets of the blocks in phi / w
    ex_kind: np.ndarray  # (M,) feature-map code of explicit blocks
    ex_norm: np.ndarray  # (M,) bool: normalise phi_m to unit norm
    phi_src: np.ndarray  # (3, P): input index / rff row, second input index (-1), factor
    rff_wt: np.ndarray  # (d, R) Fourier frequencies, transposed (the feature loop runs along R)
    rff_b: np.ndarray  # (R,) Fourier offsets

    @property
    def rff_w(self) -> np.ndarray:
        """The Fourier frequencies (R, d), one row per component (a view of ``rff_wt``)."""
        return self.rff_wt.T

    @property
    def n_views(self) -> int:
        return int(self.masks.shape[0])

    @property
    def width(self) -> int:
        return int(self.ex_off[-1])


def build_layout(
    kernels: Sequence[Kernel],
    d: int,
    seed: int,
    index: Mapping[str, int] | None = None,
    keys: Sequence[str] | None = None,
) -> Layout:
    """Arrays describing the bank on ``d`` inputs; ``keys[j]`` names input j (seeds RFF maps)."""
    keys = [str(j) for j in range(d)] if keys is None else list(keys)
    M = len(kernels)
    kinds = np.array([k.kind for k in kernels], dtype=np.int64)
    kp = np.array([k._code_params() for k in kernels], dtype=np.float64)  # (p0, p1, normalize)
    kp = kp.reshape(M, 3)
    is_explicit = np.array([not k.implicit for k in kernels], dtype=np.bool_)
    view_keys: list[tuple] = []
    masks: list[np.ndarray] = []
    full: list[bool] = []
    view_of = np.full(M, -1, dtype=np.int64)
    ex_off = np.zeros(M + 1, dtype=np.int64)
    ex_kind = np.zeros(M, dtype=np.int64)
    ex_norm = np.zeros(M, dtype=np.bool_)
    phi_src: list[np.ndarray] = []
    rff_rows: list[np.ndarray] = []
    rff_offsets: list[np.ndarray] = []
    n_rff = 0
    for m, kernel in enumerate(kernels):
        idx = kernel.feature_indices(d, index)
        if kernel.implicit:
            key = ("all",) if kernel.features is None else tuple(idx.tolist())
            if key not in view_keys:
                view_keys.append(key)
                mask = np.zeros(d)
                mask[idx] = 1.0
                masks.append(mask)
                full.append(kernel.features is None)
            view_of[m] = view_keys.index(key)
            ex_off[m + 1] = ex_off[m]
            continue
        if isinstance(kernel, AdditiveRBF):  # sparse: (input, offset, frequency) per component
            freqs, offsets = kernel.components([keys[j] for j in idx], seed)
            R = kernel.n_components or 0
            inputs = np.repeat(idx.astype(np.float64), R)
            ex_kind[m] = nb.MAP_ADDITIVE
            phi_src.append(np.vstack([inputs, offsets, freqs]).reshape(3, R * idx.size))
            ex_off[m + 1] = ex_off[m] + R * idx.size
        elif isinstance(kernel, AdditiveStumps):  # sparse: (input, threshold, unused)
            R = kernel.n_components or 0
            inputs = np.repeat(idx.astype(np.float64), R)
            thresholds = np.tile(kernel.thresholds(), idx.size)
            ex_kind[m] = nb.MAP_STUMPS
            phi_src.append(np.vstack([inputs, thresholds, np.zeros(R * idx.size)]))
            ex_off[m + 1] = ex_off[m] + R * idx.size
        elif isinstance(kernel, RBF | MedianRBF):
            sel, offsets = kernel.fourier_map([keys[j] for j in idx], seed)
            D = sel.shape[0]
            cols = np.zeros((D, d))
            if idx.size:
                cols[:, idx] = sel
            rff_rows.append(cols)
            rff_offsets.append(offsets)
            ex_kind[m] = nb.MAP_RFF
            rows = np.arange(n_rff, n_rff + D, dtype=np.float64)
            phi_src.append(np.vstack([rows, -np.ones(D), np.ones(D)]))
            n_rff += D
            ex_off[m + 1] = ex_off[m] + D
        else:  # product maps: explicit linear (plain gather) or the exact quadratic map
            ex_kind[m] = nb.MAP_GATHER if isinstance(kernel, Polynomial) else nb.MAP_LINEAR
            ex_norm[m] = bool(kernel._code_params()[2])
            src = product_map(kernel, idx)
            phi_src.append(src)
            ex_off[m + 1] = ex_off[m] + src.shape[1]
    if not masks:
        masks.append(np.ones(d))
        full.append(True)
    return Layout(
        kinds=kinds,
        kp=kp,
        is_explicit=is_explicit,
        view_of=view_of,
        masks=np.ascontiguousarray(np.array(masks).reshape(len(masks), d)),
        view_full=np.array(full, dtype=np.bool_),
        ex_blocks=np.flatnonzero(is_explicit).astype(np.int64),
        im_blocks=np.flatnonzero(~is_explicit).astype(np.int64),
        ex_off=ex_off,
        ex_kind=ex_kind,
        ex_norm=ex_norm,
        phi_src=np.hstack(phi_src) if phi_src else np.zeros((3, 0)),
        rff_wt=np.ascontiguousarray(np.vstack(rff_rows).T) if rff_rows else np.zeros((d, 0)),
        rff_b=np.concatenate(rff_offsets) if rff_offsets else np.zeros(0),
    )


def product_map(kernel: Kernel, idx: np.ndarray) -> np.ndarray:
    """(3, P) rows (first input, second input or -1, factor) of an explicit product map.

    Linear: one entry per input. Quadratic (``(<x, y> + c)^2``): the constant ``c``, then per input
    j, in input order, ``sqrt(2c) x_j``, ``sqrt(2) x_i x_j`` for i < j and ``x_j^2`` — a new
    input only appends entries, so maps of a growing input keep their prefix. The quadratic map
    reads the first ``kernel.max_inputs`` inputs only (its size stays bounded).
    """
    if isinstance(kernel, Polynomial):
        if kernel.max_inputs is not None:
            idx = idx[: kernel.max_inputs]
        c = kernel.coef0
        cols: list[tuple[float, float, float]] = [(-1.0, -1.0, c)] if c > 0 else []
        for pos, j in enumerate(idx):
            if c > 0:
                cols.append((j, -1.0, np.sqrt(2 * c)))
            cols.extend((i, j, np.sqrt(2.0)) for i in idx[:pos])
            cols.append((j, j, 1.0))
        return np.ascontiguousarray(np.array(cols, dtype=np.float64).T.reshape(3, len(cols)))
    return np.vstack([idx.astype(np.float64), -np.ones(idx.size), np.ones(idx.size)])
