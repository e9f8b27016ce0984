"""The layout of a kernel bank as plain numpy arrays (``Layout``, built by ``build_layout``),
laid out for inputs that keep arriving.

``Layout`` is fixed by (kernels, the inputs' names in admission order, seed): which blocks are
explicit, their feature maps (``product_map`` for the linear and quadratic maps, random Fourier
frequencies, the additive Gaussian map's sparse components), and the distinct feature subsets
("views") of the implicit blocks. The learned state over it is
``streammkl.core.state.BlockState``.

Inputs arrive over a model's life, so the arrays are allocated for a *capacity* of inputs
(``Layout.capacity`` >= the inputs laid out, ``Layout.n_inputs``) and every block that grows
with the inputs (linear, additive, the quadratic map up to its ``max_inputs``) owns columns
for that capacity. A column that no input fills yet reads the input ``SLACK`` (beyond every
input: it reads 0) and its feature is exactly 0, so the rounds need not know it is there, and
a new input within the capacity only writes its own columns (:meth:`Layout.extend`: O(D) for
the random Fourier rows, O(R) for an additive block, the new input's pairs for the quadratic
map). Beyond the capacity, :func:`grown` lays the inputs out again at twice the capacity (the
old columns copied, O(width)): amortised, a new input costs O(D) once.

The per-input map of each block is also kept (``in_pos``: the position of an input in block
m's map, -1 where the block does not read it; ``ex_used``: the columns its inputs fill, a
prefix of its span), which is what a saved state keeps (:meth:`Layout.used_columns`: the
same arrays whatever the room) and how a sparse round would find the columns of a record's
non-zeros.
"""

from __future__ import annotations

import copy
import operator
import threading
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate

import numpy as np

from streammkl.core import _numba as nb
from streammkl.core._jit import entry_point
from streammkl.core.kernel_base import DRAWS
from streammkl.core.kernels import (
    RBF,
    AdditiveRBF,
    AdditiveStumps,
    Kernel,
    LandmarkRBF,
    Landmarks,
    Linear,
    MedianRBF,
    Polynomial,
    RandomBinning,
)

__all__ = [
    "SLACK",
    "Layout",
    "build_layout",
    "forget_built_layouts",
    "grown",
    "product_map",
    "relaid",
]

#: The input index of a column no input fills yet (beyond any input: it reads 0).
SLACK = float(2**62)


@dataclass
class Layout:
    kinds: np.ndarray  # (M,) int64 kernel kind codes
    kp: np.ndarray  # (M, 3) p0, p1, normalize
    is_explicit: np.ndarray  # (M,) bool
    view_of: np.ndarray  # (M,) int64 view index of implicit blocks (-1 for explicit)
    masks: np.ndarray  # (V, capacity) float feature masks of the views
    view_full: np.ndarray  # (V,) bool: the view reads every input
    ex_blocks: np.ndarray  # indices of explicit blocks
    im_blocks: np.ndarray  # indices of implicit blocks
    ex_off: np.ndarray  # (M + 1,) column offsets of the blocks in phi / w (capacity included)
    ex_kind: np.ndarray  # (M,) feature-map code of explicit blocks
    ex_norm: np.ndarray  # (M,) bool: normalise phi_m to unit norm
    phi_src: np.ndarray  # (4, P): input / rff row, second input (-1), factor, additive anchor
    rff_wt: np.ndarray  # (>= capacity, R) Fourier frequencies, transposed (loops run along R)
    rff_b: np.ndarray  # (R,) Fourier offsets
    in_pos: np.ndarray  # (M, capacity) int64: position of input j in block m's map, or -1
    blk_inputs: np.ndarray  # (M,) int64: the inputs each explicit block reads so far
    ex_used: np.ndarray  # (M,) int64: the columns of each block its inputs fill (a prefix)
    n_inputs: int = 0  # inputs laid out (the model's width d)
    draws: int = DRAWS  # how the inputs' random features are drawn (``kernel_base.DRAWS``)

    def __getstate__(self) -> dict:
        """Pickled and deep-copied without the frequencies' rows past the capacity (zeros: the
        room ``grown`` keeps for later doublings)."""
        state = dict(self.__dict__)
        state["rff_wt"] = self.rff_wt[: self.capacity]
        return state

    @property
    def rff_w(self) -> np.ndarray:
        """The Fourier frequencies (R, capacity), one row per component (a view of
        ``rff_wt``)."""
        return self.rff_wt.T

    @property
    def n_views(self) -> int:
        return int(self.masks.shape[0])

    @property
    def width(self) -> int:
        """Columns of the explicit blocks (free columns of the capacity included)."""
        return int(self.ex_off[-1])

    @property
    def capacity(self) -> int:
        """Inputs the arrays have room for."""
        return int(self.masks.shape[1])

    def used_columns(self) -> np.ndarray:
        """The columns the inputs fill, block by block (what a saved state keeps: the same
        whatever the capacity)."""
        spans = [np.arange(a, a + n) for a, n in zip(self.ex_off[:-1], self.ex_used, strict=True)]
        return np.concatenate(spans) if spans else np.zeros(0, dtype=np.int64)

    def growth_entries(self, kernels: Sequence[Kernel], n_new: int, rows: int) -> int:
        """Array entries written to lay out ``n_new`` more inputs (an estimate, cheap: no
        allocation): each new input's own columns (``D`` per Fourier block, ``R`` per additive
        block, 1 per linear block, its pairs with the inputs before it in a quadratic map up to
        ``max_inputs``) times the ``rows`` the state keeps per column, plus, when the inputs
        overflow the capacity, the copy of every column into a layout of twice the capacity
        (paid once per doubling: amortised O(1) per input)."""
        if n_new <= 0:
            return 0
        per_input = 0
        quad = 0
        for m, kernel in enumerate(kernels):
            if kernel.implicit or not self.is_explicit[m]:
                per_input += 1  # a mask entry
                continue
            a, e = int(self.ex_off[m]), int(self.ex_off[m + 1])
            if isinstance(kernel, RBF | MedianRBF) and not isinstance(kernel, AdditiveRBF):
                per_input += e - a  # its row of frequencies
            elif isinstance(kernel, AdditiveRBF | AdditiveStumps):
                per_input += kernel.n_components or 0
            elif isinstance(kernel, Polynomial):
                p0 = int(self.blk_inputs[m])
                take = max(min(n_new, _quad_inputs(kernel, self.capacity) - p0), 0)
                quad += _quad_base(kernel.coef0, p0 + take) - _quad_base(kernel.coef0, p0)
            else:
                per_input += 1
        entries = (n_new * per_input + quad) * max(rows, 1)
        if self.n_inputs + n_new > self.capacity:
            entries += 2 * (self.width + self.rff_wt.size) * max(rows, 1)  # the doubling's copy
        return entries

    def extend(
        self,
        kernels: Sequence[Kernel],
        keys: Sequence[str],
        seed: int,
        index: Mapping[str, int] | None = None,
        blocks: np.ndarray | None = None,
    ) -> None:
        """Lay out the inputs ``keys[n_inputs:]`` (the names of every input, in admission
        order; ``index``: name -> position, when the caller keeps one) in place: only their
        own columns are written. Needs ``len(keys) <= capacity`` (else :func:`grown`).
        ``blocks``: lay out only the blocks where it is True (default: every block; the
        others' columns are the caller's: :func:`relaid`).

        A block reads its inputs in column order (``Kernel.feature_indices`` is sorted), so a
        layout grown input by input and one laid out at once agree column for column.

        The new inputs' columns are written in every block at once, in one compiled call
        (``core._numba.place``: the draws made where they go, no per-block Python; block by
        block that cost 3-7 µs per block per record), bit for bit what each kernel's own
        draws give (``fourier_columns``, ``components``); the few cases it does not cover (see
        :class:`_Placer`) are laid out block by block, as are models with numpy's per-input
        draws (``NUMPY_DRAWS``)."""
        d_old, d = self.n_inputs, len(keys)
        if d > self.capacity:
            raise ValueError(f"{d} inputs exceed the layout's capacity of {self.capacity}")
        if d <= d_old:
            return
        fresh = np.arange(d_old, d, dtype=np.int64)
        placer = _placer(kernels, seed, self.draws)
        if placer is None:  # numpy's per-input generators: block by block
            for m in range(len(kernels)):
                if blocks is None or blocks[m]:
                    index = self._extend_block(m, kernels[m], keys, fresh, seed, index)
            self.n_inputs = d
            return
        names = [f"{k}" for k in keys[d_old:d]]  # (as ``kernel_base.draw_keys`` formats them)
        kinds, later, quadratic = placer.kinds, placer.python, placer.quadratic
        if blocks is not None:  # (each block's columns are its own draws: any subset of the
            kinds = np.where(blocks, kinds, nb.PLACE_NONE)  # blocks is laid out the same)
            later = tuple(m for m in later if blocks[m])
            quadratic = tuple(q for q in quadratic if blocks[q[0]])
        lm = [m for m, own in placer.landmarks if not own.isdisjoint(names)]
        if blocks is not None:
            lm = [m for m in lm if blocks[m]]
        if lm:  # landmarks with values of a new input: their columns are not 0
            kinds = kinds.copy()
            kinds[lm] = nb.PLACE_NONE
            later = later + tuple(lm)
        encoded = [k.encode() for k in names]
        koff = np.fromiter(accumulate(map(len, encoded), initial=0), np.int64, len(encoded) + 1)
        _place_inputs(
            fresh, np.frombuffer(b"".join(encoded), dtype=np.uint8), koff,
            placer.start, kinds, placer.comps, placer.scales, placer.crc0, placer.sbytes,
            placer.soff, placer.vals, placer.voff, self.view_of, self.ex_off, self.phi_src,
            self.rff_wt, self.masks, self.in_pos, self.blk_inputs, self.ex_used,
        )  # fmt: skip
        for m in later:
            index = self._extend_block(m, kernels[m], keys, fresh, seed, index)
        for m, most in quadratic:  # the quadratic map, while it has room (its first
            if self.blk_inputs[m] < most and self.blk_inputs[m] < self.capacity:  # inputs)
                kernel = kernels[m]
                assert isinstance(kernel, Polynomial)
                self._place(m, kernel, fresh, names, seed)
        self.n_inputs = d

    def _extend_block(
        self,
        m: int,
        kernel: Kernel,
        keys: Sequence[str],
        fresh: np.ndarray,
        seed: int,
        index: Mapping[str, int] | None,
    ) -> Mapping[str, int] | None:
        """Lay out the inputs ``fresh`` (``keys[fresh[0]:]``) in block ``m`` alone; returns
        ``index`` (made here when a block over named inputs needs it and none was given)."""
        d_old, d = int(fresh[0]), int(fresh[-1]) + 1
        if kernel.features is None:
            new = fresh
        else:
            if index is None:
                index = {k: i for i, k in enumerate(keys)}
            idx = kernel.feature_indices(d, index)
            new = idx[idx >= d_old]
        if new.size == 0:
            return index
        if kernel.implicit:
            self.masks[self.view_of[m], new] = 1.0
            return index
        self._place(m, kernel, new, [keys[j] for j in new.tolist()], seed)
        return index

    def _place(self, m: int, kernel: Kernel, new: np.ndarray, keys: list[str], seed: int) -> None:
        """The columns of the inputs ``new`` (named ``keys``) in explicit block ``m``."""
        a, e = int(self.ex_off[m]), int(self.ex_off[m + 1])
        src = self.phi_src
        if isinstance(kernel, RBF | MedianRBF) and not isinstance(kernel, AdditiveRBF):
            r0 = int(src[0, a])
            D = e - a
            cols = kernel.fourier_columns(keys, seed, self.draws).T
            lo = int(new[0])
            if int(new[-1]) - lo + 1 == new.size:  # (ascending): a run of rows, no gather
                self.rff_wt[lo : lo + new.size, r0 : r0 + D] = cols
            else:
                self.rff_wt[new, r0 : r0 + D] = cols
            self.in_pos[m, new] = new  # (every input is a row of the frequencies)
            self.blk_inputs[m] += new.size
            return
        p0 = int(self.blk_inputs[m])
        if isinstance(kernel, Polynomial):
            q = _quad_inputs(kernel, self.capacity)
            take = new[: max(q - p0, 0)]
            if not take.size:  # the map is full (its first max_inputs): nothing to lay out
                return
            order = np.concatenate([self._block_inputs(m, p0), take])
            cols = _quad_groups(kernel.coef0, order, p0)
            base = a + _quad_base(kernel.coef0, p0)
            src[:3, base : base + cols.shape[1]] = cols
            self.in_pos[m, take] = np.arange(p0, p0 + take.size)
            self.blk_inputs[m] += take.size
            self.ex_used[m] = _quad_base(kernel.coef0, int(self.blk_inputs[m]))
            return
        pos = np.arange(p0, p0 + new.size)
        self.in_pos[m, new] = pos
        self.blk_inputs[m] += new.size
        if isinstance(kernel, AdditiveRBF):
            R = kernel.n_components or 0
            self.ex_used[m] = R * self.blk_inputs[m]
            freqs, offsets = kernel.components(keys, seed, self.draws)
            lo, hi = a + R * p0, a + R * (p0 + new.size)
            src[0, lo:hi] = np.repeat(new.astype(np.float64), R)
            src[1, lo:hi] = offsets
            src[2, lo:hi] = freqs
            src[3, lo:hi] = nb.cos_of(offsets)
            return
        if isinstance(kernel, AdditiveStumps):
            R = kernel.n_components
            self.ex_used[m] = R * self.blk_inputs[m]
            lo, hi = a + R * p0, a + R * (p0 + new.size)
            src[0, lo:hi] = np.repeat(new.astype(np.float64), R)
            src[1, lo:hi] = np.tile(kernel.thresholds(), new.size)
            return
        src[0, a + p0 : a + p0 + new.size] = new  # linear
        src[2, a + p0 : a + p0 + new.size] = 1.0
        self.ex_used[m] = self.blk_inputs[m]

    def with_landmarks_of(
        self, m: int, kernel: LandmarkRBF, keys: Sequence[str], seed: int
    ) -> Layout:
        """A copy of this layout whose landmark block ``m`` has the rows and offsets of
        ``kernel`` (the block's kernel with other landmarks: ``LandmarkRBF.with_landmark``) on
        the inputs it reads (``keys``: every input's name), written as :meth:`extend` writes
        them (``fourier_columns``, ``fourier_offsets``): the layout ``build_layout`` gives for
        the bank with that kernel, bit for bit. O(landmarks x inputs) plus the copy."""
        out = _copied(self)
        out.set_landmarks(m, kernel, keys, seed)
        return out

    def set_landmarks(
        self, m: int, kernel: LandmarkRBF, keys: Sequence[str], seed: int,
        changed: int | None = None,
    ) -> None:  # fmt: skip
        """:meth:`with_landmarks_of` in place: landmark block ``m`` takes the rows and offsets
        of ``kernel`` (only landmark ``changed``'s column of the projection and offset when
        given: the others' are the same numbers), bit for bit what a fresh build gives; the
        arrays stay the same objects, so the round arguments bound to them see the new
        landmarks. O(landmarks x inputs) (O(inputs) for one landmark)."""
        if self.ex_kind[m] != nb.MAP_LANDMARK or not kernel.landmarks:
            raise ValueError(f"block {m} is not a landmark block with landmarks")
        a, e = int(self.ex_off[m]), int(self.ex_off[m + 1])
        r0 = int(self.phi_src[0, a])
        idx = np.flatnonzero(self.in_pos[m, : self.n_inputs] >= 0)
        names = [str(keys[j]) for j in idx.tolist()]
        if changed is not None:  # one landmark's column and offset
            if idx.size:
                self.rff_wt[idx, r0 + changed] = kernel.fourier_column(changed, names)
            self.rff_b[r0 + changed] = kernel.fourier_offset(changed)
            return
        if idx.size:
            cols = kernel.fourier_columns(names, seed, self.draws)
            self.rff_wt[idx, r0 : r0 + e - a] = cols.T
        self.rff_b[r0 : r0 + e - a] = kernel.fourier_offsets(seed)
        self.phi_src[2, a:e] = 1.0  # (a block with landmarks: factor 1)

    def _block_inputs(self, m: int, n: int) -> np.ndarray:
        """The first ``n`` inputs block ``m`` reads, in its map's order."""
        pos = self.in_pos[m, : self.n_inputs]
        cols = np.flatnonzero((pos >= 0) & (pos < n))
        return cols[np.argsort(pos[cols])]


@dataclass(frozen=True)
class _Placer:
    """What :meth:`Layout.extend` hands ``place_inputs`` for a bank (fixed by the kernels, the
    seed and the draws; the layout's own arrays are passed as they are at the call): each
    block's place kind and draws' constants (see ``core._numba.place``), the blocks laid out in
    Python (``python``: over a subset of the inputs, an odd quadrature, an explicit kind it
    does not know), the quadratic maps
    (in Python while they have room: their first ``max_inputs`` inputs) and the landmark
    blocks with their landmarks' inputs (in Python for a record that brings one of those)."""

    kernels: tuple[Kernel, ...]  # (kept: the cache's key is their ids)
    start: np.uint64
    kinds: np.ndarray
    comps: np.ndarray
    scales: np.ndarray
    crc0: np.ndarray
    sbytes: np.ndarray
    soff: np.ndarray
    vals: np.ndarray
    voff: np.ndarray
    python: tuple[int, ...]
    quadratic: tuple[tuple[int, float], ...]  # (block, max_inputs or inf)
    landmarks: tuple[tuple[int, frozenset[str]], ...]


#: The explicit kernels ``place_inputs`` lays out itself (exactly these types: a subclass goes
#: block by block through ``Layout._place``, whatever it overrides).
_PLACED = frozenset({Linear, RBF, MedianRBF, LandmarkRBF, AdditiveRBF, AdditiveStumps, Polynomial})


def _placer(kernels: Sequence[Kernel], seed: int, draws: int) -> _Placer | None:
    """The bank's :class:`_Placer` (cached by the kernels' identities: kernels never change in
    place), or None for numpy's per-input generators (``NUMPY_DRAWS``), laid out block by
    block."""
    if draws != DRAWS:
        return None
    last = _LAST_PLACER  # (one read of a tuple: the bank a model's growth asks for again)
    if last is not None and last[1] == seed and _same_kernels(last[0], kernels):
        return last[2]
    key = (tuple(map(id, kernels)), seed)
    with _PLACERS_LOCK:
        placer = _PLACERS.get(key)
    if placer is not None:
        _remember_placer(kernels, seed, placer)
        return placer
    M = len(kernels)
    kinds = np.zeros(M, dtype=np.int64)
    comps = np.ones(M, dtype=np.int64)
    scales = np.zeros(M)
    crc0 = np.zeros(M, dtype=np.uint64)
    suffixes: list[bytes] = []
    vals: list[np.ndarray] = []
    python: list[int] = []
    quadratic: list[tuple[int, float]] = []
    landmarks: list[tuple[int, frozenset[str]]] = []
    for m, kernel in enumerate(kernels):
        name, row = kernel.name, np.zeros(0)
        if kernel.features is not None:
            python.append(m)
        elif kernel.implicit:
            kinds[m] = nb.PLACE_MASK
        elif isinstance(kernel, LandmarkRBF):
            kinds[m], comps[m] = nb.PLACE_ZERO, kernel.n_landmarks
            if isinstance(kernel.fit, Landmarks) and kernel.landmarks:
                landmarks.append((m, frozenset(kernel.fit.keys)))
        elif type(kernel) not in _PLACED:
            # a subclass may draw its own rows (``fourier_columns``: RandomBinning's are grids,
            # a test's kernel dies there): only the kinds whose draws the placer writes itself
            # are placed by it; any other explicit kernel goes block by block
            python.append(m)
        elif isinstance(kernel, RBF | MedianRBF) and not isinstance(kernel, AdditiveRBF):
            kinds[m], comps[m] = nb.PLACE_RFF, kernel.n_components or 0
            scales[m] = np.sqrt(2.0 * kernel.code_params()[0])  # (``fourier_columns``'s)
            name = kernel.drawn_as
        elif isinstance(kernel, AdditiveRBF):
            R = kernel.n_components or 0
            comps[m], scales[m] = R, np.sqrt(2.0 * kernel.gamma)
            if kernel.draws == "random":
                kinds[m] = nb.PLACE_ADDITIVE
            elif R % 2 == 0:
                kinds[m] = nb.PLACE_QUADRATURE
                row = kernel.quadrature_frequencies()
            else:
                python.append(m)
        elif isinstance(kernel, AdditiveStumps):
            kinds[m], comps[m], row = nb.PLACE_STUMPS, kernel.n_components, kernel.thresholds()
        elif isinstance(kernel, Polynomial):
            quadratic.append((m, np.inf if kernel.max_inputs is None else kernel.max_inputs))
        elif isinstance(kernel, Linear):
            kinds[m] = nb.PLACE_LINEAR
        else:  # a kind this placer does not know: its own ``_place`` branch, block by block
            python.append(m)
        crc0[m] = zlib.crc32(f"{name}\x1f".encode())
        suffixes.append(f"\x1f{name}".encode())
        vals.append(np.asarray(row, dtype=np.float64))
    placer = _Placer(
        kernels=tuple(kernels),
        start=np.uint64(zlib.crc32((int(seed) & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little"))),
        kinds=kinds,
        comps=comps,
        scales=scales,
        crc0=crc0,
        sbytes=np.frombuffer(b"".join(suffixes), dtype=np.uint8),
        soff=_offsets([len(b) for b in suffixes]),
        vals=np.concatenate(vals) if vals else np.zeros(0),
        voff=_offsets([v.size for v in vals]),
        python=tuple(python),
        quadratic=tuple(quadratic),
        landmarks=tuple(landmarks),
    )
    with _PLACERS_LOCK:
        while len(_PLACERS) >= _KEEP_PLACERS:
            _PLACERS.pop(next(iter(_PLACERS)))
        _PLACERS[key] = placer
    _remember_placer(kernels, seed, placer)
    return placer


#: The last bank :func:`_placer` answered for: ``(its kernels, seed, placer)``, read without
#: the lock (a model admitting a record's new inputs asks for the same bank every time: the
#: cache's key, a tuple of the kernels' ids, and the lock cost ~1 µs of a ~15 µs admission).
_LAST_PLACER: tuple[tuple[Kernel, ...], int, _Placer] | None = None


def _remember_placer(kernels: Sequence[Kernel], seed: int, placer: _Placer) -> None:
    global _LAST_PLACER
    _LAST_PLACER = (tuple(kernels), seed, placer)


def _same_kernels(a: Sequence[Kernel], b: Sequence[Kernel]) -> bool:
    """The same kernel objects, in order (identity: kernels never change in place)."""
    return len(a) == len(b) and all(map(operator.is_, a, b))


def _place_inputs(*args: object) -> None:
    """``nb.place_inputs(*args)`` through its compiled entry point (``core.jit.entry_point``:
    no type resolution of its 20 arguments on each call, ~1.5 µs; the arguments' types never
    change: ``Layout``'s arrays and :class:`_Placer`'s)."""
    fn = nb.place_inputs
    entry = _PLACE_ENTRY.get(fn)
    if entry is None:
        entry = _PLACE_ENTRY[fn] = entry_point(fn, args)
    entry(*args)


#: ``place_inputs``'s entry point, by the function it was made for.
_PLACE_ENTRY: dict[object, Callable[..., None]] = {}


def _offsets(sizes: Sequence[int]) -> np.ndarray:
    out = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=out[1:])
    return out


#: Placers of the banks laid out lately, by their kernels' ids and the seed (see :func:`_placer`).
_PLACERS: dict[tuple, _Placer] = {}
_KEEP_PLACERS = 16
_PLACERS_LOCK = threading.Lock()


def _inputs_cap(kernel: Kernel, capacity: int) -> int:
    """Inputs a block reads at most when the model holds ``capacity`` inputs."""
    return capacity if kernel.features is None else min(len(kernel.features), capacity)


def _quad_inputs(kernel: Polynomial, capacity: int) -> int:
    q = _inputs_cap(kernel, capacity)
    return q if kernel.max_inputs is None else min(q, kernel.max_inputs)


def _quad_base(c: float, p: int) -> int:
    """Offset, within the quadratic map, of the group of the input at position p (after the
    constant and the groups of positions < p)."""
    lead = 1 if c > 0 else 0
    return lead * (1 + p) + p * (p + 1) // 2


def _quad_groups(c: float, order: np.ndarray, p0: int) -> np.ndarray:
    """(3, n) columns of the groups of positions ``p0 .. len(order) - 1`` in the quadratic map
    (``order``: the inputs at positions 0, 1, ...), contiguous from ``_quad_base(c, p0)``; the
    group of the input j at position p: ``sqrt(2c) x_j`` (when c > 0), ``sqrt(2) x_i x_j`` for
    the inputs i before it, ``x_j^2``. Built at once (a group per input in Python cost O(p)
    interpreted steps each: ~3 ms for a map of 128 inputs laid out again)."""
    order = np.asarray(order, dtype=np.int64)
    lead = 1 if c > 0 else 0
    ps = np.arange(p0, order.size)
    sizes = lead + ps + 1
    n = int(sizes.sum())
    k = np.arange(n) - np.repeat(np.cumsum(sizes) - sizes, sizes)  # column within its group
    p = np.repeat(ps, sizes)
    j = np.repeat(order[p0:], sizes).astype(np.float64)
    pair = (k >= lead) & (k < lead + p)
    out = np.empty((3, n))
    out[0] = j
    out[0, pair] = order[(k - lead)[pair]]
    out[1] = j
    out[1, k < lead] = -1.0
    out[2] = 1.0
    out[2, k < lead] = np.sqrt(2 * c) if lead else 0.0
    out[2, pair] = np.sqrt(2.0)
    return out


def _block_width(kernel: Kernel, capacity: int) -> int:
    if kernel.implicit:
        return 0
    if isinstance(kernel, AdditiveRBF | AdditiveStumps):
        return (kernel.n_components or 0) * _inputs_cap(kernel, capacity)
    if isinstance(kernel, RBF | MedianRBF):
        return kernel.n_components or 0
    if isinstance(kernel, Polynomial):
        return _quad_base(kernel.coef0, _quad_inputs(kernel, capacity))  # the constant too
    return _inputs_cap(kernel, capacity)


def _empty(
    kernels: Sequence[Kernel],
    capacity: int,
    seed: int,
    draws: int = DRAWS,
    rff_b: np.ndarray | None = None,
    rff_rows: int | None = None,
    blocks: np.ndarray | None = None,
    reuse: Layout | None = None,
) -> Layout:
    """A layout of the bank with room for ``capacity`` inputs and none laid out, its inputs'
    random features drawn as ``draws`` say; ``rff_b``: the Fourier offsets when the caller has
    them already (a layout of the same bank: they do not depend on the inputs); ``rff_rows``:
    the Fourier frequencies' rows (default ``capacity``; more: room for later inputs, zeros).

    ``blocks`` (for :func:`relaid`): only the blocks where it is True get their columns'
    sources and Fourier offsets (the others' are left at a free column's and 0: the caller
    writes them); ``reuse``: a layout whose blocks line up with these (the same offsets, kinds
    and views) and that the caller drops: its column sources become the result's, the
    ``blocks``' columns written again in place and the others' left as they are (no new
    (4, width) array nor a copy of the kept columns: ~0.35 ms at the bandwidth warm-up's
    ~18,000 columns)."""
    M = len(kernels)
    kinds = np.array([k.kind for k in kernels], dtype=np.int64)
    kp = np.array([k.code_params() for k in kernels], dtype=np.float64).reshape(M, 3)
    is_explicit = np.array([not k.implicit for k in kernels], dtype=np.bool_)
    view_keys: list[tuple] = []
    full: list[bool] = []
    view_of = np.full(M, -1, dtype=np.int64)
    ex_off = np.zeros(M + 1, dtype=np.int64)
    ex_kind = np.zeros(M, dtype=np.int64)
    ex_norm = np.zeros(M, dtype=np.bool_)
    ex_used = np.zeros(M, dtype=np.int64)
    for m, kernel in enumerate(kernels):
        if kernel.implicit:
            key = ("all",) if kernel.features is None else tuple(kernel.features)
            if key not in view_keys:
                view_keys.append(key)
                full.append(kernel.features is None)
            view_of[m] = view_keys.index(key)
        ex_off[m + 1] = ex_off[m] + _block_width(kernel, capacity)
        if isinstance(kernel, AdditiveRBF):
            ex_kind[m] = nb.MAP_ADDITIVE
        elif isinstance(kernel, AdditiveStumps):
            ex_kind[m] = nb.MAP_STUMPS  # a free column: input SLACK, threshold -1: phi = 0
        elif isinstance(kernel, LandmarkRBF):
            ex_kind[m] = nb.MAP_LANDMARK  # (rows and offsets as a Fourier block's)
        elif isinstance(kernel, RandomBinning):
            ex_kind[m] = nb.MAP_BINNING  # (its draws as a Fourier block's rows)
        elif isinstance(kernel, RBF | MedianRBF) and not kernel.implicit:
            ex_kind[m] = nb.MAP_RFF
        elif not kernel.implicit:
            ex_kind[m] = nb.MAP_GATHER if isinstance(kernel, Polynomial) else nb.MAP_LINEAR
            ex_norm[m] = bool(kernel.code_params()[2])
    if not view_keys:
        full.append(True)
    P = int(ex_off[-1])
    if (
        reuse is not None
        and blocks is not None
        and np.array_equal(ex_off, reuse.ex_off)
        and np.array_equal(ex_kind, reuse.ex_kind)
        and np.array_equal(view_of, reuse.view_of)
    ):
        src = reuse.phi_src  # (the kept blocks' columns stay; the others' start again)
        for m in np.flatnonzero(blocks).tolist():
            a, e = int(ex_off[m]), int(ex_off[m + 1])
            src[:, a:e] = np.array([[SLACK], [-1.0], [0.0], [0.0]])
    else:
        src = np.zeros((4, P))
        src[0] = SLACK
        src[1] = -1.0
    rff_offsets: list[np.ndarray] = []
    n_rff = 0
    for m, kernel in enumerate(kernels):
        a, e = int(ex_off[m]), int(ex_off[m + 1])
        kind = ex_kind[m]
        if kernel.implicit:
            continue
        if blocks is not None and not blocks[m]:  # (the caller's columns and offsets)
            if kind in (nb.MAP_RFF, nb.MAP_LANDMARK, nb.MAP_BINNING):
                if rff_b is None:
                    rff_offsets.append(np.zeros(e - a))
                n_rff += e - a
            continue
        if kind in (nb.MAP_RFF, nb.MAP_LANDMARK, nb.MAP_BINNING):
            assert isinstance(kernel, RBF | MedianRBF)
            D = e - a
            src[0, a:e] = np.arange(n_rff, n_rff + D, dtype=np.float64)
            if isinstance(kernel, RandomBinning):
                src[1, a:e] = kernel.n_grids
            # a landmark block without landmarks yet: factor 0, its map is 0
            src[2, a:e] = 0.0 if isinstance(kernel, LandmarkRBF) and not kernel.landmarks else 1.0
            ex_used[m] = D
            if rff_b is None:
                rff_offsets.append(_fourier_offsets(kernel, seed))
            n_rff += D
        elif kind == nb.MAP_ADDITIVE:
            src[1, a:e] = 0.0  # a free component: offset 0, frequency 0, anchor cos(0) = 1
            src[3, a:e] = 1.0
        elif kind == nb.MAP_GATHER:
            assert isinstance(kernel, Polynomial)
            if kernel.coef0 > 0:
                src[:3, a] = (-1.0, -1.0, kernel.coef0)  # the constant
                ex_used[m] = 1
        else:
            src[2, a:e] = 1.0
    if rff_b is not None:
        offsets = rff_b.copy()
    else:
        offsets = np.concatenate(rff_offsets) if rff_offsets else np.zeros(0)
    return Layout(
        kinds=kinds,
        kp=kp,
        is_explicit=is_explicit,
        view_of=view_of,
        masks=np.zeros((len(full), capacity)),
        view_full=np.array(full, dtype=np.bool_),
        ex_blocks=np.flatnonzero(is_explicit).astype(np.int64),
        im_blocks=np.flatnonzero(~is_explicit).astype(np.int64),
        ex_off=ex_off,
        ex_kind=ex_kind,
        ex_norm=ex_norm,
        phi_src=src,
        rff_wt=np.zeros((capacity if rff_rows is None else rff_rows, n_rff)),
        rff_b=offsets,
        in_pos=np.full((M, capacity), -1, dtype=np.int64),
        blk_inputs=np.zeros(M, dtype=np.int64),
        ex_used=ex_used,
        n_inputs=0,
        draws=int(draws),
    )


def _fourier_offsets(kernel: RBF | MedianRBF, seed: int) -> np.ndarray:
    """``kernel.fourier_offsets(seed)`` (a fresh array), kept for an ``RBF`` or a ``MedianRBF``
    (exactly these types), whose offsets are drawn from (seed, the name its features are drawn
    under, D) alone, not from the bandwidth: a model's rebuilds at a new bandwidth draw the same
    offsets again (a generator seeded per block, ~45 µs each, three blocks in the default
    bank). Forgotten with the built layouts (:func:`forget_built_layouts`)."""
    if type(kernel) not in (RBF, MedianRBF):
        return kernel.fourier_offsets(seed)
    key = (type(kernel), int(seed), kernel.drawn_as, kernel.n_components)
    kept = _OFFSETS.get(key)
    if kept is None:
        kept = kernel.fourier_offsets(seed)
        with _BUILT_LOCK:
            while len(_OFFSETS) >= _KEEP_OFFSETS:
                _OFFSETS.pop(next(iter(_OFFSETS)))
            _OFFSETS[key] = kept
    return kept.copy()


#: Fourier offsets of the Gaussian blocks laid out lately (see :func:`_fourier_offsets`).
_OFFSETS: dict[tuple, np.ndarray] = {}
_KEEP_OFFSETS = 32


def build_layout(
    kernels: Sequence[Kernel],
    d: int,
    seed: int,
    index: Mapping[str, int] | None = None,
    keys: Sequence[str] | None = None,
    capacity: int | None = None,
    draws: int = DRAWS,
    like: tuple[Layout, Sequence[Kernel]] | None = None,
    owned: bool = False,
) -> Layout:
    """Arrays describing the bank on ``d`` inputs; ``keys[j]`` names input j (seeds the random
    maps, drawn as ``draws`` say: ``kernel_base.DRAWS``); room for ``capacity`` inputs (at
    least d; ``d`` by default).

    The last few layouts built are kept and handed out as copies: a group member rebuilds the
    same layout for every state it loads, merges or rebases each round (the random Fourier
    rows cost ~1.7 ms for the default bank on 10 inputs, a copy ~0.02 ms).

    ``like``: a layout of these inputs' first ones (at this capacity) and its bank, whose
    kept kernels' columns a layout not kept is made from (:func:`relaid`: the same arrays,
    drawn only for the changed kernels; a model's bank change). ``owned``: ``like``'s layout
    is the caller's alone, dropped for the result (:func:`relaid` then reuses its Fourier
    frequencies in place; the numbers are the same). Such a layout is not kept either: its
    key (the bank's specs, every input's name) and a copy of its arrays (every input's row of
    frequencies: ~2.6 MB at the warm-up's ~400 inputs of the default bank, written into fresh
    pages) cost a growing model each such rebuild (3 of the 7 over a bag-of-words learner's
    first 300 documents: 674 -> 113 rows copied), for the hit of a second learner of the same
    stream in the same process."""
    keys = [str(j) for j in range(d)] if keys is None else list(keys[:d])
    if (
        owned
        and like is not None
        and like[0].draws == draws
        and like[0].capacity == max(d, capacity or 0)
    ):  # a model's own bank change: laid out again in place, neither looked up nor kept
        layout = relaid(like[0], like[1], kernels, keys, seed, index, owned)
        if layout is not None:
            return layout
    key = (
        tuple((repr(k.to_spec()), getattr(k, "fit", None)) for k in kernels),  # (fits hash)
        tuple(keys), max(d, capacity or 0), seed, int(draws),
        None if index is None else (tuple(index), tuple(index.values())),  # (no pair each)
    )  # fmt: skip
    with _BUILT_LOCK:
        cached = _BUILT.get(key)
    if cached is not None:
        return _copied(cached)
    layout = None
    if like is not None and like[0].draws == draws and like[0].capacity == max(d, capacity or 0):
        layout = relaid(like[0], like[1], kernels, keys, seed, index, owned)
    if layout is None:
        layout = _empty(kernels, max(d, capacity or 0), seed, draws)
        layout.extend(kernels, keys, seed, index)
    kept = _copied(layout)  # (never handed out: copies only)
    with _BUILT_LOCK:
        while len(_BUILT) >= _KEEP_BUILT:
            _BUILT.pop(next(iter(_BUILT)))
        _BUILT[key] = kept
    return layout


def relaid(
    layout: Layout,
    old: Sequence[Kernel],
    kernels: Sequence[Kernel],
    keys: Sequence[str],
    seed: int,
    index: Mapping[str, int] | None = None,
    owned: bool = False,
) -> Layout | None:
    """:func:`build_layout` for the bank ``kernels`` on the inputs ``layout`` (the bank
    ``old``'s, untouched) lays out, at its capacity, bit for bit, drawing only the blocks
    whose kernel is not the same object as before: a block's columns are its own draws (keyed
    by its kernel and each input's name), so a kept kernel's columns are ``layout``'s; a
    changed kernel's are drawn afresh (a Fourier block at another bandwidth: its rows are the
    normals times the bandwidth's scale inside Box-Muller's radius, ``draws.draw_row``, so
    rescaling the old rows would not give the same numbers). None when the banks' blocks do
    not line up (another number of blocks, other widths or kinds) or ``keys`` (every input's
    name, ``layout``'s first) exceed its capacity: :func:`build_layout` then. Inputs named
    since ``layout`` was laid out are laid out after, in every block (a layout grown input by
    input is the one built at once: :meth:`Layout.extend`).
    The bandwidth warm-up's bank change (its Gaussian blocks refitted, the others kept)
    skips the kept blocks' draws and the build's cache key (the kernels' specs, the inputs'
    names).

    ``owned``: no one but the caller holds ``layout``, which it drops for the result: the
    result takes ``layout``'s Fourier frequencies (the same array: the changed blocks'
    columns zeroed and drawn again in place, the kept blocks' left where they are) instead of
    writing every input's row into fresh pages (the warm-up's rebuild at ~400 inputs of the
    default bank: ~2.5 MB of rows first touched); ``layout`` must not be used after (its
    frequencies are the result's)."""
    M = len(kernels)
    d = layout.n_inputs
    if len(old) != M or not d <= len(keys) <= layout.capacity:
        return None
    draw = np.array([k is not o for k, o in zip(kernels, old, strict=True)], dtype=np.bool_)
    out = _empty(
        kernels, layout.capacity, seed, layout.draws, None, 0 if owned else None, draw,
        layout if owned else None,
    )  # fmt: skip
    if not (
        np.array_equal(out.ex_off, layout.ex_off)
        and np.array_equal(out.ex_kind, layout.ex_kind)
        and np.array_equal(out.view_of, layout.view_of)
        and out.rff_wt.shape[1] == layout.rff_wt.shape[1]
        and out.masks.shape == layout.masks.shape
    ):
        return None
    rff = (nb.MAP_RFF, nb.MAP_LANDMARK, nb.MAP_BINNING)
    if owned:  # the frequencies kept in place: a drawn block's columns start at zero again
        out.rff_wt = layout.rff_wt  # (but for a block over every input: its rows are all
        for m in np.flatnonzero(draw).tolist():  # written again below, ~0.25 ms at ~400 inputs)
            kernel = kernels[m]
            if not kernel.implicit and kernel.features is not None and out.ex_kind[m] in rff:
                a, e = int(out.ex_off[m]), int(out.ex_off[m + 1])
                r0 = int(out.phi_src[0, a])
                out.rff_wt[:d, r0 : r0 + e - a] = 0.0
    for m in np.flatnonzero(~draw).tolist():
        if kernels[m].implicit:
            out.masks[out.view_of[m]] = layout.masks[layout.view_of[m]]
        else:
            a, e = int(layout.ex_off[m]), int(layout.ex_off[m + 1])
            if out.phi_src is not layout.phi_src:  # (else kept in place: ``_empty``'s reuse)
                out.phi_src[:, a:e] = layout.phi_src[:, a:e]
            if layout.ex_kind[m] in rff:
                r0 = int(layout.phi_src[0, a])
                if not owned:
                    out.rff_wt[:d, r0 : r0 + e - a] = layout.rff_wt[:d, r0 : r0 + e - a]
                out.rff_b[r0 : r0 + e - a] = layout.rff_b[r0 : r0 + e - a]
        out.in_pos[m] = layout.in_pos[m]
        out.blk_inputs[m] = layout.blk_inputs[m]
        out.ex_used[m] = layout.ex_used[m]
    out.extend(kernels, list(keys[:d]), seed, index, blocks=draw)
    out.extend(kernels, keys, seed, index)  # the inputs named since (every block)
    return out


def _copied(layout: Layout) -> Layout:
    """A copy of ``layout`` that shares no array with it (``copy.deepcopy``'s result), made
    without reading the room: the rows of frequencies of the inputs not laid out yet are 0 in
    a layout (``_empty``, then only laid-out inputs write theirs), so they are fresh zeros
    (pages the system hands out zeroed, touched only when an input fills them), not a copy.
    A layout of 750 inputs' room, default bank: ~5 MB of frequencies, most of what its copy
    cost."""
    out = copy.copy(layout)
    for name, value in vars(layout).items():
        if isinstance(value, np.ndarray) and name != "rff_wt":
            setattr(out, name, value.copy())
    n = layout.n_inputs
    out.rff_wt = np.zeros(layout.rff_wt.shape)  # (calloc: zeroed pages; zeros_like writes)
    out.rff_wt[:n] = layout.rff_wt[:n]
    return out


#: Layouts built lately, by everything that fixes them (see :func:`build_layout`).
_BUILT: dict[tuple, Layout] = {}
_KEEP_BUILT = 8
_BUILT_LOCK = threading.Lock()  # (a daemon loads models from more than one thread)


def forget_built_layouts() -> None:
    """Forget the layouts built lately (:func:`build_layout` hands out copies of the last
    ones it built) and the Fourier offsets kept (:func:`_fourier_offsets`), so that the next
    builds are made, not copied: what a learner pays on a
    stream no learner of the process has met. For benchmarks that time fresh learners on a
    stream an earlier learner of the process has seen."""
    with _BUILT_LOCK:
        _BUILT.clear()
        _OFFSETS.clear()


#: A doubling's Fourier frequencies get rows for this many times its capacity when that makes
#: at least ``ROOM_BYTES``: the rows past the inputs are zero pages no one touches until an
#: input fills its row, and the next doubling of a layout no one else holds keeps the array
#: instead of copying every known input's row into fresh pages (on a 2-core VM, ~5 us per 4 KB
#: page first touched: a doubling at 6,016 inputs of the default bank copied 20 MB in ~45 ms).
RFF_ROOM = 2
#: Below this, no room: glibc's calloc serves a block under its mmap threshold (which rises to
#: 32 MB as a process frees large blocks) from the heap and zero-fills all of it, room included
#: (measured: room at every doubling made a bag-of-words learner's first 300 documents ~20 %
#: slower); from 32 MB on it maps fresh pages, which cost nothing until touched.
ROOM_BYTES = 32 << 20


def grown(
    layout: Layout,
    kernels: Sequence[Kernel],
    keys: Sequence[str],
    seed: int,
    index: Mapping[str, int] | None = None,
    owned: bool = False,
) -> Layout:
    """``layout`` with the inputs ``keys[layout.n_inputs:]`` laid out too: in place when they
    fit its capacity (the same object), else a new layout with room for twice as many inputs
    (the old columns copied, the old draws reused).

    ``owned``: no one but the caller holds ``layout``, which it drops for the result: a
    doubling then keeps ``layout``'s Fourier frequencies (the same array, the old rows where
    they are) when it has rows for the new capacity (``RFF_ROOM``, ``ROOM_BYTES``); the old
    layout must not be used after (its rows past its inputs are the new layout's)."""
    if len(keys) <= layout.capacity:
        layout.extend(kernels, keys, seed, index)
        return layout
    capacity = max(2 * layout.capacity, len(keys))
    keep = owned and layout.rff_wt.shape[0] >= capacity
    room = RFF_ROOM * capacity
    rows = 0 if keep else room if room * layout.rff_wt.shape[1] * 8 >= ROOM_BYTES else capacity
    out = _empty(kernels, capacity, seed, layout.draws, layout.rff_b, rows)
    d_old = layout.n_inputs
    for m in range(len(kernels)):
        a, e = int(layout.ex_off[m]), int(layout.ex_off[m + 1])
        na = int(out.ex_off[m])
        out.phi_src[:, na : na + (e - a)] = layout.phi_src[:, a:e]
    if keep:
        out.rff_wt = layout.rff_wt
    else:
        out.rff_wt[:d_old] = layout.rff_wt[:d_old]
    out.masks[:, :d_old] = layout.masks[:, :d_old]
    out.in_pos[:, :d_old] = layout.in_pos[:, :d_old]
    out.blk_inputs[:] = layout.blk_inputs
    out.ex_used[:] = layout.ex_used
    out.n_inputs = d_old
    out.extend(kernels, keys, seed, index)
    return out


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
        cols = [np.array([[-1.0], [-1.0], [c]])] if c > 0 else []
        cols.append(_quad_groups(c, idx, 0))
        return np.ascontiguousarray(np.hstack(cols))
    return np.vstack([idx.astype(np.float64), -np.ones(idx.size), np.ones(idx.size)])
