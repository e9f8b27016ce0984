"""Gaussian bandwidths from the data (the median heuristic) for ``MedianRBF`` kernels.

A ``MedianRBF(scale)`` in a bank stands for the Gaussian ``gamma = scale / m`` where m is the
median squared distance between inputs. ``OnlineMKL`` fits it in three moments:

1. at its first input (d inputs known): provisionally with ``m = 2 d``, the expected squared
   distance of two standardised inputs with independent coordinates, so the block learns from
   the first example (``2 d / sqrt(pi)``, their expected L1 distance, for a ``RandomBinning``,
   whose median is of L1 distances);
2. after ``WARMUP`` inputs (or :func:`warmup` of the bank: as many as its largest
   ``LandmarkRBF`` has landmarks, when that is more): with the median over all pairs of those
   inputs (kept in a small reservoir); the block is replaced (restarted at zero) only if its
   gamma moves by more than ``TOLERANCE``, so a good provisional guess loses nothing;
3. when the number of inputs has grown by ``TOLERANCE`` since: gamma is rescaled by
   ``d_old / d_new`` (the median of standardised inputs grows with d) and the block restarts.

The fitted bandwidth is the kernel's state (``MedianRBF.fit``, a :class:`~streammkl.core.
kernels.Bandwidth`), never part of its name or specification: the kernel keeps its identity
(``rff(gamma=1/median,D=256)``) while its bandwidth changes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from streammkl.core.kernels import Bandwidth, Kernel, LandmarkRBF, MedianRBF

WARMUP = 50  # inputs kept for the median
TOLERANCE = 1.25  # a bandwidth (or the number of inputs) must move by this factor to be redone
#: The provisional median per input, by the kernel's ``distance``: ``2`` for squared distances
#: (two standardised inputs with independent coordinates), ``2 / sqrt(pi)`` for L1 (``E |z|``,
#: z ~ N(0, 2)).
_PROVISIONAL = {"sq": 2.0, "l1": 2.0 / math.sqrt(math.pi)}


def warmup(kernels: Sequence[Kernel]) -> int:
    """Inputs a bank's warm-up keeps: ``WARMUP``, or the landmarks of its largest
    ``LandmarkRBF`` when they are more (its landmarks are the warm-up's first inputs)."""
    return max([WARMUP, *(k.n_landmarks for k in kernels if isinstance(k, LandmarkRBF))])


def has_pending(kernels: Sequence[Kernel]) -> bool:
    """Whether a bank still waits for the warm-up's median."""
    return any(isinstance(k, MedianRBF) and (k.fit is None or not k.fit.final) for k in kernels)


def fits(kernels: Sequence[Kernel]) -> list[Bandwidth | None]:
    """The fitted state of every kernel of a bank (None: a kernel without one)."""
    return [k.fit if isinstance(k, MedianRBF) else None for k in kernels]


def bank_key(kernels: Sequence[Kernel]) -> list[tuple[dict[str, Any], Bandwidth | None]]:
    """What makes two banks the same: every kernel's specification and fitted state."""
    return [(k.to_spec(), f) for k, f in zip(kernels, fits(kernels), strict=True)]


def saved(kernels: Sequence[Kernel]) -> dict[str, dict[str, Any]]:
    """The fitted bandwidths of a bank, by kernel name, as JSON (a saved model's state)."""
    return {k.name: k.fit.to_dict() for k in kernels if isinstance(k, MedianRBF) and k.fit}


def restored(kernels: Sequence[Kernel], state: Mapping[str, Any]) -> tuple[Kernel, ...]:
    """The bank with the fitted bandwidths :func:`saved` gave (by kernel name)."""
    return tuple(
        k.with_fit(k.fit_type.from_dict(state[k.name]))
        if isinstance(k, MedianRBF) and k.name in state
        else k
        for k in kernels
    )


def for_inputs(kernels: Sequence[Kernel], d: int, rescale: bool = True) -> tuple[Kernel, ...]:
    """The bank for d inputs: bandwidths not fitted yet set provisionally (``m = 2 d``), and
    bandwidths set at fewer inputs rescaled once d has grown by ``TOLERANCE`` (unless
    ``rescale`` is False: a member of a mixing group, whose bandwidths the group decides).
    When no bandwidth changes, the bank is returned as it is (``tuple(kernels)``: a tuple
    given is returned itself, so a caller tells "unchanged" by identity)."""
    out: list[Kernel] = []
    changed = False
    for k in kernels:
        if not isinstance(k, MedianRBF):
            out.append(k)
        elif k.fit is None:
            out.append(k.fitted(k.scale / (_PROVISIONAL[k.distance] * max(d, 1)), d, final=False))
            changed = True
        elif rescale and d >= TOLERANCE * max(k.fit.inputs, 1):
            out.append(k.fitted(k.fit.gamma * (k.fit.inputs / d), d, final=k.fit.final))
            changed = True
        else:
            out.append(k)
    return tuple(out) if changed else tuple(kernels)


def after_warmup(
    kernels: Sequence[Kernel], inputs: np.ndarray, keys: Sequence[str] | None = None
) -> tuple[Kernel, ...]:
    """The bank once the warm-up inputs (n, d) are known (named ``keys``; default: input j is
    ``str(j)``): every provisional bandwidth becomes ``scale / median`` (kept as it was when
    within ``TOLERANCE``), and final; a ``LandmarkRBF`` takes its landmarks from these inputs
    (its block restarts at zero whatever its bandwidth: it had none)."""
    medians = {"sq": median_sq_distance(inputs)}
    if any(isinstance(k, MedianRBF) and k.distance == "l1" for k in kernels):
        medians["l1"] = median_l1_distance(inputs)
    d = inputs.shape[1]
    names = [str(j) for j in range(d)] if keys is None else [str(k) for k in keys][:d]
    out: list[Kernel] = []
    for k in kernels:
        if isinstance(k, MedianRBF) and k.fit is not None and not k.fit.final:
            gamma = k.scale / medians[k.distance]
            if max(gamma, k.fit.gamma) / min(gamma, k.fit.gamma) <= TOLERANCE:
                gamma = k.fit.gamma  # the provisional guess was good: keep the block
            fitted = k.fitted(gamma, d, final=True)
            if isinstance(fitted, LandmarkRBF):
                fitted = fitted.with_landmarks(inputs, names)
            out.append(fitted)
        else:
            out.append(k)
    return tuple(out)


def median_l1_distance(inputs: np.ndarray) -> float:
    """Median of ``||x_i - x_j||_1`` over all pairs i < j (the mean if the median is 0; 1 if
    every input is the same): a ``RandomBinning``'s bandwidth."""
    X = np.asarray(inputs, dtype=np.float64)
    n = X.shape[0]
    if n < 2:
        return 1.0
    Y = X[:, np.any(X != 0.0, axis=0)]
    pairs = np.concatenate([np.abs(Y[i + 1 :] - Y[i]).sum(axis=1) for i in range(n - 1)])
    for value in (float(np.median(pairs)), float(np.mean(pairs))):
        if value > 0 and math.isfinite(value):
            return value
    return 1.0


def median_sq_distance(inputs: np.ndarray) -> float:
    """Median of ``||x_i - x_j||^2`` over all pairs i < j (the mean if the median is 0, e.g.
    mostly repeated inputs; 1 if every input is the same), each a sum of squared differences
    (no cancellation) over the inputs some row is not 0 at, row by row without a BLAS call."""
    X = np.asarray(inputs, dtype=np.float64)
    n = X.shape[0]
    if n < 2:
        return 1.0
    Y = X[:, np.any(X != 0.0, axis=0)]  # the inputs some row uses (a sparse warm-up: few)
    pairs = np.empty(n * (n - 1) // 2)
    p = 0
    for i in range(n - 1):  # no BLAS product: one woke OpenBLAS's threads (10-20 ms per model)
        diff = Y[i + 1 :] - Y[i]
        pairs[p : p + n - 1 - i] = np.einsum("ij,ij->i", diff, diff)
        p += n - 1 - i
    for value in (float(np.median(pairs)), float(np.mean(pairs))):
        if value > 0 and math.isfinite(value):
            return value
    return 1.0


class Reservoir:
    """The first ``size`` inputs (``WARMUP``; a bank's :func:`warmup`), as rows (inputs that
    appear later count as 0 in earlier rows, the learners' convention for a missing
    feature).

    Inputs are kept as they come (a copy each) and stacked into :attr:`rows` when it is read:
    a record's input costs O(its width) to keep, not a copy of every row kept before it (which
    made the warm-up O(size^2 d) on a stream whose inputs grow, such as a bag of words)."""

    def __init__(self, rows: np.ndarray | None = None, size: int = WARMUP):
        self._rows = np.zeros((0, 0)) if rows is None else np.array(rows, dtype=np.float64)
        self._pending: list[np.ndarray] = []  # inputs kept since ``_rows`` was stacked
        self._count = int(self._rows.shape[0])
        self.size = int(size)

    @property
    def rows(self) -> np.ndarray:
        """The inputs kept, one a row, over the widest of them (a fresh array after each
        :meth:`add`; never changed in place)."""
        pending = self._pending
        if pending:
            d = max(self._rows.shape[1], *(x.shape[1] for x in pending))
            rows = np.zeros((self._count, d))
            n0, d0 = self._rows.shape
            rows[:n0, :d0] = self._rows
            i = n0
            for x in pending:
                rows[i : i + x.shape[0], : x.shape[1]] = x
                i += x.shape[0]
            self._rows = rows
            pending.clear()
        return self._rows

    def __len__(self) -> int:
        return self._count

    def __setstate__(self, state: dict[str, Any]) -> None:
        if "rows" in state:  # pickled when the rows were kept stacked: the same inputs
            state = {"_rows": state["rows"], "_pending": [], "_count": len(state["rows"]),
                     "size": state["size"]}  # fmt: skip
        self.__dict__.update(state)

    @property
    def full(self) -> bool:
        return len(self) >= self.size

    def add(self, X: np.ndarray) -> None:
        X = np.atleast_2d(np.asarray(X, dtype=np.float64))[: self.size - len(self)]
        if X.shape[0] == 0:
            return
        self._pending.append(np.array(X, dtype=np.float64))  # (a copy: the caller's may change)
        self._count += X.shape[0]
