"""Base kernels and explicit feature maps; every kernel has a stable ``name``.

A kernel's name follows from its configured parameters alone (``rff(gamma=4/median,D=256)`` for
``MedianRBF(4)``, whatever bandwidth it has fitted): it is the kernel's identity for the kernel
weights, the metrics' ``kernel`` label, reloads and merges. What a kernel learns from the data
(a ``MedianRBF``'s bandwidth, :class:`Bandwidth`) is state, kept beside its specification.

A kernel acts on the inputs selected by ``features`` (indices, or names resolved through the
caller's name -> column index; default: all inputs, including ones that appear later). A block is
*explicit* (weights over a feature map: ``Linear()``, ``RBF(gamma, n_components=D)`` with random
Fourier features) or *implicit* (a kernel expansion over the shared support set:
``Linear(implicit=True)``, ``RBF(gamma)``, ``Polynomial``, ``B1Spline``).

Random Fourier columns are standard normals drawn from ``(seed, kernel name, feature key)`` alone
(``kernel_base.normals``: a counter-based generator keyed by CRC-32s of the names; a model saved
before state version 6 draws with numpy's generator per input, as it did), scaled by ``sqrt(2
gamma)``: the map of a feature does not depend on the order in which features arrive, nor its
draws on the bandwidth.
"""

from __future__ import annotations

import base64
import copy
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from scipy import special

from streammkl.core import _numba as nb
from streammkl.core._spec import build
from streammkl.core.kernel_base import DRAWS as _DRAWS  # (AdditiveRBF.DRAWS is another)
from streammkl.core.kernel_base import (
    NUMPY_DRAWS,
    Kernel,
    as_rows,
    check_components,
    generator_for,
    normals,
    stable_seed,
    uniforms,
)

__all__ = [
    "RBF", "AdditiveRBF", "AdditiveStumps", "B1Spline", "Bandwidth", "Kernel", "LandmarkRBF",
    "Landmarks", "Linear", "MedianRBF", "Polynomial", "RandomBinning", "from_spec",
]  # fmt: skip


class Linear(Kernel):
    """``k(x, y) = <x, y>`` (``normalize``: unit diagonal). Explicit unless ``implicit=True``."""

    kind = nb.K_LINEAR

    def __init__(
        self,
        features: Sequence[int | str] | None = None,
        implicit: bool = False,
        normalize: bool = False,
        name: str | None = None,
    ):
        super().__init__(features, name)
        self._implicit = bool(implicit)
        self.normalize = bool(normalize)

    @property
    def implicit(self) -> bool:
        return self._implicit

    def _default_name(self) -> str:
        return "linear-normalized" if self.normalize else "linear"

    def code_params(self) -> tuple[float, float, bool]:
        return 0.0, 0.0, self.normalize

    def params(self) -> dict[str, Any]:
        return {"implicit": self._implicit, "normalize": self.normalize, **super().params()}


class Polynomial(Kernel):
    """``k(x, y) = (<x, y> + coef0)^degree``; ``normalize`` divides by sqrt(k(x,x) k(y,y)).

    Kernelized by default; ``explicit=True`` (degree 2 only) uses the exact quadratic feature
    map instead: O(d^2) weights, no support set, same kernel -- on the first ``max_inputs``
    inputs the kernel selects (in the order they were admitted): 1 + q + q(q+1)/2 weights per
    output for q inputs, 8,385 for the default 128, however many inputs the stream brings.
    Inputs beyond the cap are not in this block's map (the other blocks still see them);
    ``max_inputs=None`` removes the cap (and the protection: 10,000 inputs need 50 million
    weights per output).
    """

    kind = nb.K_POLY

    def __init__(
        self,
        degree: int = 2,
        coef0: float = 1.0,
        normalize: bool = True,
        features: Sequence[int | str] | None = None,
        name: str | None = None,
        explicit: bool = False,
        max_inputs: int | None = 128,
    ):
        if int(degree) != degree or degree < 1:
            raise ValueError(f"Polynomial: degree must be a positive integer, got {degree!r}")
        if explicit and degree != 2:
            raise ValueError("Polynomial: explicit=True supports degree 2 only")
        if coef0 < 0:
            raise ValueError(f"Polynomial: coef0 must be >= 0, got {coef0!r}")
        if max_inputs is not None and (int(max_inputs) != max_inputs or max_inputs < 1):
            raise ValueError(f"Polynomial: max_inputs must be None or >= 1, got {max_inputs!r}")
        super().__init__(features, name)
        self.max_inputs = None if max_inputs is None else int(max_inputs)
        self.degree = int(degree)
        self.coef0 = float(coef0)
        self.normalize = bool(normalize)
        self.explicit = bool(explicit)

    @property
    def implicit(self) -> bool:
        return not self.explicit

    def _default_name(self) -> str:
        base = f"poly{self.degree}"
        if self.coef0 != 1.0:
            base += f"(c={self.coef0:g})"
        return base if self.normalize else base + "-raw"

    def code_params(self) -> tuple[float, float, bool]:
        return float(self.degree), self.coef0, self.normalize

    def params(self) -> dict[str, Any]:
        return {
            "degree": self.degree,
            "coef0": self.coef0,
            "normalize": self.normalize,
            "explicit": self.explicit,
            "max_inputs": self.max_inputs,
            **super().params(),
        }


class _Gaussian(Kernel):
    """What RBF and MedianRBF share: an exact (kernelized) block, or a random Fourier map of
    ``n_components`` features when it is given, ``sqrt(2/D) cos(w_j . x + b_j)`` with
    ``w_j ~ N(0, 2 gamma I)``, its cosines computed by a vectorised polynomial within 4e-16 of
    the C library's (``core._numba.map_cos``; the library's beyond ``|w . x + b| = 1e5``)."""

    kind = nb.K_RBF

    def __init__(
        self,
        kind_name: str,
        n_components: int | None,
        features: Sequence[int | str] | None,
        name: str | None,
    ):
        check_components(kind_name, n_components)
        super().__init__(features, name)
        self._n_components = None if n_components is None else int(n_components)

    @property
    def implicit(self) -> bool:
        return self._n_components is None

    @property
    def n_components(self) -> int | None:
        return self._n_components

    def _bandwidth(self) -> float:
        """The gamma the kernel computes with."""
        raise NotImplementedError

    @property
    def drawn_as(self) -> str:
        """The name the random Fourier features are drawn under (the kernel's own)."""
        return self.name

    def code_params(self) -> tuple[float, float, bool]:
        return self._bandwidth(), 0.0, False

    def fourier_columns(self, keys: Sequence[str], seed: int, draws: int = _DRAWS) -> np.ndarray:
        """Frequency columns (D x len(keys)), one per input key, each ~ N(0, 2 gamma).

        A column is ``sqrt(2 gamma)`` times standard normals drawn from (seed, name, key)
        only (``kernel_base.normals``, as the model's ``draws`` say), so a new bandwidth
        rescales the same draws and a new input's column does not depend on the others. The
        counter-based draws (``DRAWS``) cost ~1 µs per 100 normals in one compiled call: they
        are drawn again whenever needed, nothing is kept per input. numpy's per-input
        generators (``NUMPY_DRAWS``, a model saved before state version 6) cost ~5 µs of
        set-up per input: those columns are kept per key (a layout rebuilt at 10,000 inputs
        would otherwise pay ~1 s)."""
        D = self._n_components or 0
        std = np.sqrt(2.0 * self._bandwidth())
        if draws != NUMPY_DRAWS:
            return normals(seed, self.drawn_as, keys, D, draws, std).T
        out = np.empty((len(keys), D))  # a row per key (contiguous writes), returned transposed
        cache: dict[tuple[int, str, str], np.ndarray] = self.__dict__.setdefault("_columns", {})
        drawn_as = self.drawn_as
        for j, key in enumerate(keys):
            col = cache.get((seed, drawn_as, key))
            if col is None:
                rng = generator_for(seed, drawn_as, key)
                col = cache[(seed, drawn_as, key)] = rng.standard_normal(D)
            np.multiply(col, std, out=out[j])
        return out.T

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_columns", None)  # a cache: rebuilt on demand
        return state

    def fourier_offsets(self, seed: int) -> np.ndarray:
        rng = np.random.default_rng(stable_seed(seed, self.drawn_as, "\x00offset"))
        return rng.uniform(0.0, 2.0 * np.pi, size=self._n_components or 0)

    def fourier_map(
        self, keys: Sequence[str], seed: int, draws: int = _DRAWS
    ) -> tuple[np.ndarray, np.ndarray]:
        """The explicit map's frequencies (D x len(keys)) and offsets (D,) on these inputs."""
        return self.fourier_columns(keys, seed, draws), self.fourier_offsets(seed)


class RBF(_Gaussian):
    """Gaussian ``k(x, y) = exp(-gamma ||x - y||^2)``; ``n_components=D`` -> random Fourier map
    of D features."""

    def __init__(
        self,
        gamma: float = 1.0,
        n_components: int | None = None,
        features: Sequence[int | str] | None = None,
        name: str | None = None,
    ):
        if not gamma > 0:
            raise ValueError(f"RBF: gamma must be > 0, got {gamma!r}")
        super().__init__("RBF", n_components, features, name)
        self.gamma = float(gamma)

    def _bandwidth(self) -> float:
        return self.gamma

    def _default_name(self) -> str:
        if self._n_components is None:
            return f"rbf(gamma={self.gamma:g})"
        return f"rff(gamma={self.gamma:g},D={self._n_components})"

    def params(self) -> dict[str, Any]:
        return {"gamma": self.gamma, "n_components": self._n_components, **super().params()}


class AdditiveRBF(RBF):
    """Sum of one-dimensional Gaussian kernels, one per input:
    ``k(x, y) = (1/d) sum_j exp(-gamma (x_j - y_j)^2)``, as random Fourier features
    (``n_components`` per input, each reading that input alone; explicit only).

    It fits a separate smooth function of each input (a generalised additive model): per-value
    effects of discrete inputs (a feature in {0, 0.5, 1} whose middle value matters) and
    monotone or bumpy effects of continuous ones, at a cost linear in the number of inputs.
    On standardised inputs ``gamma = 1`` puts the kernel's width at the inputs' scale.

    ``draws`` is how an input's components are drawn: ``"random"`` (i.i.d. frequencies
    ``w ~ N(0, 2 gamma)`` and offsets ``b ~ U[0, 2 pi)``: the plain random Fourier map) or
    ``"quadrature"`` (a deterministic quadrature of the Gaussian's spectral integral ``E_w
    cos(w (x - y))``: ``P = n_components // 2`` frequencies at the midpoints of ``P`` strata
    of equal probability of the half-normal, ``w_i = sqrt(2 gamma) Phi^-1((1 + (i + 1/2) / P)
    / 2)``, each used twice, at a random offset ``b_i`` and at ``b_i + pi/2``). A pair's
    product is ``(2/R) cos(w_i (x - y))`` whatever ``b_i``, so the block's kernel, ``(1/P)
    sum_i cos(w_i (x - y))`` per input, is the same for every seed: a positive semi-definite
    shift-invariant kernel within 0.03 of the Gaussian for ``|x - y| sqrt(gamma) <= 2`` and
    0.07 up to 4 at 16 components (0.017 / 0.035 at 32), where 16 random components are off
    by ~0.25 (their standard deviation). Only the offsets depend on the seed, and they only
    rotate each pair's two features (which per-block steps and block norms do not see). On
    Agrawal the default learner's 5-seed spread falls from 3.4 to 0.13 point with it, at the
    same cost (``streammkl.river.defaults``). An odd ``n_components`` gives the last component
    an i.i.d. draw. The name says ``quadrature``.
    """

    DRAWS = ("random", "quadrature")

    def __init__(
        self,
        gamma: float = 1.0,
        n_components: int = 16,
        features: Sequence[int | str] | None = None,
        name: str | None = None,
        draws: str = "random",
    ):
        if draws not in self.DRAWS:
            raise ValueError(f"AdditiveRBF: draws must be one of {self.DRAWS}, got {draws!r}")
        super().__init__(gamma, n_components, features, name)
        self.draws = draws

    def _default_name(self) -> str:
        how = "" if self.draws == "random" else f",{self.draws}"
        return f"additive-rff(gamma={self.gamma:g},D={self._n_components}/input{how})"

    def params(self) -> dict[str, Any]:
        out = super().params()
        if self.draws != "random":  # specs written before ``draws`` existed stay the same
            out["draws"] = self.draws
        return out

    def quadrature_frequencies(self) -> np.ndarray:
        """The ``n_components`` frequencies of every input's components under the quadrature
        draws with an even ``n_components`` (the same for every input: only the offsets are
        drawn), as :meth:`components` gives them."""
        R = self._n_components or 0
        if self.draws != "quadrature" or R % 2:
            raise ValueError(f"{self.name}: no common frequencies (an even quadrature only)")
        return np.repeat(_strata(R // 2) * np.sqrt(2.0 * self.gamma), 2)

    def components(
        self, keys: Sequence[str], seed: int, draws: int = _DRAWS
    ) -> tuple[np.ndarray, np.ndarray]:
        """Frequencies and offsets (each ``n_components * len(keys)``): the components of
        input j are ``j * n_components ...``, each reading x_j alone, drawn from (seed, name,
        key) only (``kernel_base.normals`` / ``uniforms`` as the model's ``draws`` say), so a
        new input appends components and leaves the others unchanged (up to the 1/d). Stored
        sparsely in the layout: no d x D frequency matrix."""
        R = self._n_components or 0
        std = np.sqrt(2.0 * self.gamma)
        name = self.name
        if self.draws == "quadrature" and R % 2 == 0:  # one draw per key: the rest at once
            return _quadrature_rows(
                uniforms(seed, name, keys, R // 2, 0.0, 2.0 * np.pi, draws), std
            )
        if draws != NUMPY_DRAWS and self.draws == "random":
            freqs = normals(seed, name, keys, R, draws, std)
            return freqs.ravel(), uniforms(seed, name, keys, R, 0.0, 2.0 * np.pi, draws).ravel()
        freqs = np.empty(R * len(keys))
        offsets = np.empty(R * len(keys))
        for j, key in enumerate(keys):
            if draws != NUMPY_DRAWS:  # an odd quadrature: its offsets, then the last frequency
                b = uniforms(seed, name, [key], R // 2 + 1, 0.0, 2.0 * np.pi, draws)[0]
                z = normals(seed, name, [key], 1, draws)[0, 0]
                freqs[j * R : (j + 1) * R], offsets[j * R : (j + 1) * R] = _quadrature_of(R, b, z)
                freqs[j * R : (j + 1) * R] *= std
                continue
            rng = generator_for(seed, name, key)
            if self.draws == "random":
                freqs[j * R : (j + 1) * R] = std * rng.standard_normal(R)
                offsets[j * R : (j + 1) * R] = rng.uniform(0.0, 2.0 * np.pi, size=R)
            else:
                freqs[j * R : (j + 1) * R], offsets[j * R : (j + 1) * R] = _quadrature(R, rng)
                freqs[j * R : (j + 1) * R] *= std
        return freqs, offsets

    def gram(
        self, X: np.ndarray, Y: np.ndarray | None = None, index: Mapping[str, int] | None = None
    ) -> np.ndarray:
        X = as_rows(X)
        Y = X if Y is None else as_rows(Y)
        idx = self.feature_indices(X.shape[1], index)
        if idx.size == 0:
            return np.zeros((X.shape[0], Y.shape[0]))
        diff = X[:, None, idx] - Y[None, :, idx]
        return np.exp(-self.gamma * diff * diff).mean(axis=2)


class AdditiveStumps(Kernel):
    """Thresholds on single inputs: ``n_components`` stumps per input at the thresholds ``t_i =
    Phi^-1((i + 1/2) / R)``, the midpoints of ``R`` strata of equal probability of the standard
    normal (so on standardised inputs each input is cut at its quantiles, as a tree's split
    would be); explicit only, no seed.

    Anchored at 0 like the additive Gaussian map (an input at 0 has no feature, so a sparse
    record's map stays sparse): the stump ``i`` of input ``j`` is ``a_i(x_j) = (sign(x_j - t_i)
    - sign(-t_i)) / 2`` (``sign(0) = +1``), i.e. ``+1`` if ``x_j >= t_i > 0``, ``-1`` if ``x_j <
    t_i <= 0``, else 0, and ``phi(x) = 2 n^(-1/2) (a_i(x_j))_{j, i}`` over the ``n = R d``
    components laid out (the sign map ``n^(-1/2) sign(x_j - t_i)`` minus its value at 0; the
    same scale, measured better than half of it: Agrawal 0.9816 vs 0.9768 in the accurate
    bank), so ``k(x, y) = (4/n) sum_j #{i : t_i between 0 and both x_j and y_j}``:
    the additive *min* (intersection) kernel on the inputs' quantile scale, ``min(F(x_j),
    F(y_j))`` on each side of 0 with ``F`` the stumps' count, an additive model of step
    functions (what one-attribute rules of a tree express), piecewise constant where the
    additive Gaussian is smooth. Cost as the additive Gaussian map's, without cosines.
    """

    kind = -1  # explicit only: gram below

    def __init__(
        self,
        n_components: int = 16,
        features: Sequence[int | str] | None = None,
        name: str | None = None,
    ):
        check_components("AdditiveStumps", n_components)
        super().__init__(features, name)
        self._n_components = int(n_components)

    @property
    def implicit(self) -> bool:
        return False

    @property
    def n_components(self) -> int:
        return self._n_components

    def _default_name(self) -> str:
        return f"stumps(D={self._n_components}/input)"

    def code_params(self) -> tuple[float, float, bool]:
        return 0.0, 0.0, False

    def thresholds(self) -> np.ndarray:
        """The ``n_components`` thresholds every input is cut at (increasing)."""
        R = self._n_components
        return np.asarray(special.ndtri((np.arange(R) + 0.5) / R), dtype=np.float64)

    def gram(
        self, X: np.ndarray, Y: np.ndarray | None = None, index: Mapping[str, int] | None = None
    ) -> np.ndarray:
        X = as_rows(X)
        Y = X if Y is None else as_rows(Y)
        idx = self.feature_indices(X.shape[1], index)
        if idx.size == 0:
            return np.zeros((X.shape[0], Y.shape[0]))
        t = self.thresholds()
        sx, sy = _stumps(X[:, idx], t), _stumps(Y[:, idx], t)  # n x d x R
        return 4.0 * np.einsum("ajr,bjr->ab", sx, sy) / (idx.size * t.size)

    def params(self) -> dict[str, Any]:
        return {"n_components": self._n_components, **super().params()}


@dataclass(frozen=True)
class Bandwidth:
    """A ``MedianRBF``'s fitted bandwidth (state, not configuration): ``gamma``, the number of
    ``inputs`` it was set for, whether it is ``final`` (measured after the warm-up, not the
    provisional guess) and ``drawn_as``, the name its random features were drawn under when it
    is not the kernel's own (a model saved before state version 4, whose kernel was named after
    its bandwidth; kept until the bandwidth next changes)."""

    gamma: float
    inputs: int
    final: bool
    drawn_as: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"gamma": self.gamma, "inputs": self.inputs, "final": self.final}
        if self.drawn_as is not None:
            out["drawn_as"] = self.drawn_as
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Bandwidth:
        drawn_as = d.get("drawn_as")
        return cls(
            float(d["gamma"]), int(d["inputs"]), bool(d["final"]),
            None if drawn_as is None else str(drawn_as),
        )  # fmt: skip


class MedianRBF(_Gaussian):
    """A Gaussian kernel whose bandwidth comes from the data, not from the unit cube: the median
    heuristic, ``gamma = scale / median ||x_i - x_j||^2`` over the first ``warmup`` inputs
    (``core.bandwidth``; ``OnlineMKL`` fits it: provisionally at the first input, measured after
    the warm-up, rescaled by d_old / d_new when the number of inputs has grown by a quarter; a
    block whose bandwidth changes restarts at zero, the other blocks learn on).

    The kernel is named after its configuration (``rff(gamma=4/median,D=256)``) for the model's
    whole life; the bandwidth it fitted is :attr:`fit` (None until fitted), state that the
    model saves, reports (``kernel_bandwidths``) and restores. :meth:`fitted` gives the same
    kernel with a bandwidth; ``to_spec`` is the configuration alone.
    """

    fit: Bandwidth | None = None
    fit_type: ClassVar[type[Bandwidth]] = Bandwidth  # what a saved ``fit`` is restored as
    #: What the median is of (``core.bandwidth``): ``"sq"``, squared Euclidean distances
    #: (``gamma = scale / median``); ``"l1"``, L1 distances (``RandomBinning``).
    distance: ClassVar[str] = "sq"

    def __init__(
        self,
        scale: float = 1.0,
        n_components: int | None = 256,
        features: Sequence[int | str] | None = None,
        name: str | None = None,
    ):
        if not (scale > 0 and np.isfinite(scale)):
            raise ValueError(f"MedianRBF: scale must be a finite number > 0, got {scale!r}")
        super().__init__("MedianRBF", n_components, features, name)
        self.scale = float(scale)

    def _default_name(self) -> str:
        if self._n_components is None:
            return f"rbf(gamma={self.scale:g}/median)"
        return f"rff(gamma={self.scale:g}/median,D={self._n_components})"

    @property
    def gamma(self) -> float:
        """The fitted bandwidth; ``TypeError`` before it is fitted."""
        if self.fit is None:
            raise TypeError(f"{self.name}: no bandwidth yet (OnlineMKL fits it from the inputs)")
        return self.fit.gamma

    def _bandwidth(self) -> float:
        return self.gamma

    @property
    def drawn_as(self) -> str:
        if self.fit is not None and self.fit.drawn_as is not None:
            return self.fit.drawn_as
        return self.name

    def fitted(self, gamma: float, inputs: int, final: bool) -> MedianRBF:
        """This kernel with the bandwidth ``gamma`` (set for ``inputs`` inputs; ``final``:
        measured, not provisional); a copy (kernels are never changed in place). An unchanged
        gamma keeps the features the block was learned over."""
        if not (gamma > 0 and np.isfinite(gamma)):
            raise ValueError(f"{self.name}: a bandwidth must be a finite number > 0, got {gamma!r}")
        drawn_as = self.fit.drawn_as if self.fit is not None and self.fit.gamma == gamma else None
        out = copy.copy(self)
        out.fit = Bandwidth(float(gamma), int(inputs), bool(final), drawn_as)
        return out

    def with_fit(self, fit: Bandwidth | None) -> MedianRBF:
        """This kernel with the fitted state ``fit`` as it is (a restored model's)."""
        out = copy.copy(self)
        out.fit = fit
        return out

    def params(self) -> dict[str, Any]:
        return {"scale": self.scale, "n_components": self._n_components, **super().params()}


#: The last landmarks written (:func:`_points_f64`): (points, width, text), by the points'
#: identity (a tuple: never changed; the pair holds it, so that its id stays its own).
_WRITTEN: dict[int, tuple[tuple[tuple[float, ...], ...], int, str]] = {}


def _points_f64(points: tuple[tuple[float, ...], ...], width: int) -> str:
    """``points`` as the base64 of their little-endian float64 bytes (``Landmarks.to_dict``),
    written once per landmark set (a mixing member saves the same landmarks every round:
    10 µs each time for 50 landmarks of 4 inputs)."""
    hit = _WRITTEN.get(id(points))
    if hit is not None and hit[0] is points and hit[1] == width:
        return hit[2]
    array = np.asarray(points, dtype="<f8").reshape(len(points), width)
    text = base64.b64encode(array.tobytes()).decode("ascii")
    if isinstance(points, tuple):  # (kept only when it cannot change in place)
        _WRITTEN[id(points)] = (points, width, text)
        while len(_WRITTEN) > 8:
            del _WRITTEN[next(iter(_WRITTEN))]
    return text


@dataclass(frozen=True)
class Landmarks(Bandwidth):
    """A ``LandmarkRBF``'s fitted state: its bandwidth and its landmarks, ``points[j]`` the
    ``j``-th landmark's values of the inputs ``keys`` (the inputs the kernel read when the
    landmarks were taken; any other input counts as 0 in every landmark). Empty: no landmarks
    yet (a provisional bandwidth)."""

    keys: tuple[str, ...] = ()
    points: tuple[tuple[float, ...], ...] = ()

    def __hash__(self) -> int:
        """The fields' hash, computed once (the fit is immutable; its landmarks over a few
        hundred inputs cost ~0.25 ms to hash, and ``layout.build_layout`` keys its cache by
        the fits); neither pickled nor copied (:meth:`__getstate__`)."""
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.gamma, self.inputs, self.final, self.drawn_as, self.keys, self.points))
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_hash", None)  # (a string's hash differs from process to process)
        return state

    def to_dict(self) -> dict[str, Any]:
        """The fitted state as JSON, the landmarks as the bytes of a little-endian float64
        array (base64, ``points_f64``: exact, and short to write, digest and read: a model's
        state is serialised several times per round in a mixing group, and as lists of numbers
        50 landmarks of 10 inputs took 1.4 ms per ``json.dumps``, 12 times the rest of the
        state's JSON)."""
        out = super().to_dict()
        out["keys"] = list(self.keys)
        out["points_f64"] = _points_f64(self.points, len(self.keys))
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Landmarks:
        """The fitted state :meth:`to_dict` wrote (or, saved before ``points_f64``, with the
        landmarks as lists of numbers)."""
        base = Bandwidth.from_dict(d)
        keys = tuple(str(k) for k in d.get("keys", ()))
        if "points_f64" in d:
            raw = np.frombuffer(base64.b64decode(d["points_f64"], validate=True), dtype="<f8")
            if len(keys) == 0 and raw.size:
                raise ValueError("landmarks without the inputs they are over")
            rows = raw.reshape(-1, len(keys)).tolist() if keys else []
            points = tuple(tuple(row) for row in rows)
        else:
            points = tuple(tuple(float(v) for v in p) for p in d.get("points", ()))
        return cls(base.gamma, base.inputs, base.final, None, keys, points)


@dataclass(eq=False)
class _FitCache:
    """What a :class:`LandmarkRBF` derives from one fit, kept while the kernel's ``fit`` is
    that very object and dropped as a whole when it is not (the one invalidation rule: a fit is
    never changed in place, a new landmark or bandwidth is a new fit). Filled lazily; neither
    copied nor pickled with the kernel (``__getstate__``)."""

    fit: Any  # the Landmarks these numbers are of
    Z: np.ndarray  # the landmarks over their own inputs (m x len(keys)): read it, never write
    col: dict[str, int]  # an input's column in Z
    d2: np.ndarray | None = None  # squared distances between landmarks (m x m, inf diagonal)
    reach: float | None = None  # the relative reach (``reach_rule="spacing"``)
    over: tuple | None = None  # (keys, len(keys), index, idx, Z on idx, own order): ``_over``


class LandmarkRBF(MedianRBF):
    """Local memory that stays explicit (FTRL keeps serving the bank): the Gaussian profile of
    an input over ``n_landmarks`` landmarks kept from the stream, normalised,

        ``phi(x) = k(x, Z) / ||k(x, Z)||``,  ``k(x, z) = exp(-gamma ||x - z||^2)``,

    so ``k~(x, y) = <phi(x), phi(y)>`` (the cosine of the two inputs' landmark profiles, 1 on
    the diagonal): inputs near the same landmarks score alike, which a narrow bandwidth makes
    local (a soft nearest-landmark code; far from every landmark it tends to the nearest
    one's indicator). A Nystroem-type map without the ``K_mm^{-1/2}`` whitening (measured no
    better on the development streams, and it costs an m x m product per input).

    The landmarks are the first ``n_landmarks`` inputs: those of the warm-up that fits the
    median bandwidths (``core.bandwidth``: the first ``max(50, n_landmarks)`` standardised
    inputs of a bank with this kernel; a mixing group's pooled rows may be fewer: the missing
    landmarks sit at 0, the inputs' mean), taken with the final bandwidth ``gamma = scale /
    median ||x - x'||^2`` and frozen: they are the kernel's fitted state
    (:class:`Landmarks`, saved and restored with the model, equal in every member of a mixing
    group, whose bandwidths the group fits from the pooled warm-up inputs). Before the
    warm-up ends the block has no landmarks and its map is 0; when
    the landmarks arrive (or the bandwidth is rescaled because the inputs have grown by a
    quarter) the block restarts at zero like a ``MedianRBF``'s. Inputs that appear after the
    landmarks were taken count as 0 in every landmark.

    Computed like a Fourier block (``core._numba.features``, ``MAP_LANDMARK``): the rows of
    the projection are ``2 gamma z_j`` and its offsets ``-gamma ||z_j||^2``, then
    ``exp(. - max)`` and the normalisation; same cost as a random Fourier map of
    ``n_landmarks`` components. The name is the configuration:
    ``landmarks(gamma=16/median,m=50)`` (``landmarks(gamma=16/median,m=50,refresh=100)`` with a
    refresh).

    ``refresh`` (0: never) lets the landmarks move with the stream: once the landmarks are
    taken, at every round ``t`` that is a multiple of ``refresh`` whose input the model scored
    with a loss (a margin violation: where the bank lacks capacity) and lies out of the
    landmarks' reach (:meth:`within_reach`; ``reach_rule="spacing"``, the default: ``gamma
    min_j ||x - z_j||^2 > REACH`` times the landmarks' own spacing, :meth:`spacing`: farther from
    every landmark than they lie from each other, so that a refresh is rare on a stream the
    landmarks already cover; ``"absolute"``: ``gamma min_j ||x - z_j||^2 > REACH``), the
    landmark whose weight columns have the smallest norm over the outputs, among the crowded
    ones (near-duplicates) if there are any (:meth:`to_replace`), is replaced by that input
    (:meth:`with_landmark`), its weight columns (and those of the averaged iterates) restart
    at zero and the block's norm is recomputed exactly (``OnlineMKL``; not in a mixing group,
    whose landmarks the group decides). The new landmarks are the kernel's fitted state, saved
    and restored with the model like the first ones.

    ``replace="oldest"`` makes the landmarks a sliding window over the stream instead: every
    check replaces (no reach test), and the landmark replaced at round ``t`` is the slot
    ``(t / refresh) mod n_landmarks`` (:meth:`to_replace`), so that slot after slot the oldest
    landmark gives way, first in first out, and the landmarks are the last ``n_landmarks``
    checked inputs (those scored with a loss: every input under the logistic and softmax
    losses, whose loss is never 0). Local memory as a window of ``refresh x n_landmarks``
    rounds, like a k-nearest-neighbours learner's, kept explicit. The slot follows from the
    round alone: nothing more to save.
    """

    fit_type: ClassVar[type[Bandwidth]] = Landmarks
    #: An input within ``gamma ||x - z||^2 <= REACH * spacing()`` of a landmark ``z``
    #: refreshes nothing (``reach_rule="spacing"``; ``"absolute"``: within ``gamma ||x -
    #: z||^2 <= REACH``, its Gaussian above e^-REACH there). Chosen with the period on the
    #: development streams (benchmarks/landmark_refresh.py).
    REACH: ClassVar[float] = 2.0
    #: The reach rules: relative to the landmarks' own spacing (:meth:`spacing`; with 10 inputs
    #: nearly every input lies beyond ``gamma ||x - z||^2 = 2`` of every landmark), or not.
    REACH_RULES: ClassVar[tuple[str, ...]] = ("spacing", "absolute")
    #: Which landmark a refresh replaces: the smallest weights among the out-of-reach checks,
    #: or the oldest at every check (a sliding window).
    REPLACE_RULES: ClassVar[tuple[str, ...]] = ("smallest", "oldest")
    #: Landmarks within ``gamma ||z - z'||^2 <= CROWD`` of another one are crowded
    #: (near-duplicates: :meth:`to_replace` gives them up first).
    CROWD: ClassVar[float] = 2.0

    def __init__(
        self,
        scale: float = 16.0,
        n_landmarks: int = 50,
        features: Sequence[int | str] | None = None,
        name: str | None = None,
        refresh: int = 0,
        reach_rule: str = "spacing",
        replace: str = "smallest",
    ):
        if isinstance(n_landmarks, bool) or int(n_landmarks) != n_landmarks or n_landmarks < 1:
            raise ValueError(
                f"LandmarkRBF: n_landmarks must be a positive integer, got {n_landmarks!r}"
            )
        if isinstance(refresh, bool) or int(refresh) != refresh or refresh < 0:
            raise ValueError(f"LandmarkRBF: refresh must be an integer >= 0, got {refresh!r}")
        if reach_rule not in self.REACH_RULES:
            raise ValueError(
                f"LandmarkRBF: reach_rule must be one of {self.REACH_RULES}, got {reach_rule!r}"
            )
        if replace not in self.REPLACE_RULES:
            raise ValueError(
                f"LandmarkRBF: replace must be one of {self.REPLACE_RULES}, got {replace!r}"
            )
        if replace != "smallest" and not refresh:
            raise ValueError(f"LandmarkRBF: replace={replace!r} needs a refresh period > 0")
        super().__init__(scale, int(n_landmarks), features, name)
        self.refresh = int(refresh)
        self.reach_rule = str(reach_rule)
        self.replace = str(replace)
        self._fit_cache: _FitCache | None = None

    @property
    def n_landmarks(self) -> int:
        return self._n_components or 0

    def _default_name(self) -> str:
        base = f"landmarks(gamma={self.scale:g}/median,m={self.n_landmarks}"
        base += f",refresh={self.refresh}" if self.refresh else ""
        base += f",replace={self.replace}" if self.replace != "smallest" else ""
        return f"{base},reach={self.reach_rule})" if self.reach_rule != "spacing" else f"{base})"

    def params(self) -> dict[str, Any]:
        out = super().params()
        del out["n_components"]
        more: dict[str, Any] = {"refresh": self.refresh} if self.refresh else {}
        if self.reach_rule != "spacing":  # (specs without either: as before)
            more["reach_rule"] = self.reach_rule
        if self.replace != "smallest":
            more["replace"] = self.replace
        return {"scale": self.scale, "n_landmarks": self.n_landmarks, **more, **out}

    def fitted(self, gamma: float, inputs: int, final: bool) -> LandmarkRBF:
        """This kernel with the bandwidth ``gamma`` and the landmarks it has (a copy)."""
        out = super().fitted(gamma, inputs, final)
        assert out.fit is not None
        keys, points = self._landmarks()
        out.fit = Landmarks(out.fit.gamma, out.fit.inputs, out.fit.final, None, keys, points)
        return out  # type: ignore[return-value]

    def with_landmarks(
        self, rows: np.ndarray, keys: Sequence[str], index: Mapping[str, int] | None = None
    ) -> LandmarkRBF:
        """This (fitted) kernel with its landmarks taken from ``rows`` (n x len(keys), the
        inputs named ``keys``): the first ``n_landmarks`` rows, on the inputs the kernel reads
        and some landmark is not 0 at (missing rows: at 0). A copy."""
        if self.fit is None:
            raise TypeError(f"{self.name}: landmarks need a bandwidth first")
        rows = np.atleast_2d(np.asarray(rows, dtype=np.float64))
        keys = [str(k) for k in keys]
        if rows.shape[1] != len(keys):
            raise ValueError(f"{self.name}: {rows.shape[1]} columns for {len(keys)} input names")
        if index is None:
            index = {k: i for i, k in enumerate(keys)}
        idx = self.feature_indices(len(keys), index)
        take = rows[: self.n_landmarks][:, idx]
        kept = np.flatnonzero(np.any(take != 0.0, axis=0))  # an input at 0 in every landmark
        idx, take = idx[kept], take[:, kept]  # is 0 without being kept (sparse inputs: small)
        Z = np.zeros((self.n_landmarks, idx.size))
        Z[: take.shape[0]] = take
        out = copy.copy(self)
        f = self.fit
        own = tuple(keys[i] for i in idx.tolist())
        out.fit = Landmarks(
            f.gamma, f.inputs, f.final, None, own, tuple(tuple(r) for r in Z.tolist()),
        )  # fmt: skip
        # the fit's numbers from Z itself (the same doubles as the points read back, without
        # reading them back: ~0.3 ms for 50 landmarks over ~400 inputs)
        out._fit_cache = _FitCache(out.fit, Z, {k: i for i, k in enumerate(own)})
        return out

    def with_landmark(
        self, j: int, row: np.ndarray, keys: Sequence[str], index: Mapping[str, int] | None = None
    ) -> LandmarkRBF:
        """This kernel (with its landmarks) with landmark ``j`` replaced by ``row`` (the values
        of the inputs ``keys``; the kernel's own inputs only are read); the other landmarks
        are kept. A copy."""
        if not self.landmarks:
            raise TypeError(f"{self.name}: no landmarks to replace yet")
        if not 0 <= j < self.n_landmarks:
            raise IndexError(f"{self.name}: no landmark {j} (it has {self.n_landmarks})")
        idx, Z, ordered = self._over(keys, index)
        if ordered:  # the landmarks are over the inputs the kernel reads, in order: no name lookups
            Z = Z.copy()
            z = Z[j] = np.asarray(row, dtype=np.float64)[idx]
            if z.all() or (Z != 0.0).any(axis=0).all():  # (else an input leaves the landmarks)
                out = copy.copy(self)
                f = self.fit
                assert f is not None
                names, points = self._landmarks()
                points = (*points[:j], tuple(z.tolist()), *points[j + 1 :])  # (the others kept)
                fit = out.fit = Landmarks(f.gamma, f.inputs, f.final, None, names, points)
                mine = self._cache()
                cache = out._fit_cache = _FitCache(fit, Z, mine.col)
                cache.over = (keys, len(keys), index, idx, Z, True)
                if mine.d2 is not None:  # one landmark's distances anew
                    diff = Z - z
                    d2 = cache.d2 = mine.d2.copy()
                    d2[j] = d2[:, j] = np.einsum("ij,ij->i", diff, diff)
                    d2[j, j] = np.inf
                return out
        keys = [str(k) for k in keys]
        Z = self.landmark_matrix(keys)
        Z[j] = np.asarray(row, dtype=np.float64)
        own = set(self._landmarks()[0])
        lost = own.difference(keys)  # (inputs of the landmarks the caller did not name)
        if lost:
            raise ValueError(f"{self.name}: the landmarks' inputs {sorted(lost)} are not named")
        return self.with_landmarks(Z, keys, index)

    def to_replace(self, weights: np.ndarray, t: int = 0) -> int:
        """The landmark a refresh at round ``t`` gives up, given each landmark's squared weight
        norm (``weights``, one per landmark): among the crowded landmarks (within ``CROWD`` of
        another one: near-duplicates, e.g. the first inputs through a scaler that had seen
        one or two examples), else among all, the one with the smallest weights (the first
        of equals); with ``replace="oldest"`` the slot ``(t / refresh) mod n_landmarks``
        (the weights unread)."""
        if self.replace == "oldest":
            return (t // self.refresh) % self.n_landmarks
        weights = np.asarray(weights, dtype=np.float64)
        crowded = self.gamma * self._distances().min(axis=1) <= self.CROWD
        if crowded.any():
            weights = np.where(crowded, weights, np.inf)
        return int(np.argmin(weights))

    def _distances(self) -> np.ndarray:
        """The landmarks' squared distances to each other (m x m, infinite on the diagonal;
        read it, never write it), kept with the fit (:meth:`with_landmark` computes one
        landmark's row anew)."""
        cache = self._cache()
        if cache.d2 is None:
            own, _ = self._landmarks()
            Z = self.landmark_matrix(own)
            diff = Z[:, None, :] - Z[None, :, :]  # (no BLAS product: it wakes OpenBLAS's threads)
            cache.d2 = np.einsum("ijk,ijk->ij", diff, diff)
            np.fill_diagonal(cache.d2, np.inf)
        return cache.d2

    def keeps(
        self, x: np.ndarray, keys: Sequence[str], index: Mapping[str, int] | None = None
    ) -> bool:
        """Whether a refresh's check at the input ``x`` (the values of the inputs ``keys``)
        leaves the landmarks as they are: ``x`` within their reach (:meth:`within_reach`);
        never under ``replace="oldest"``, whose every check replaces (a sliding window)."""
        return self.replace != "oldest" and self.within_reach(x, keys, index)

    def within_reach(
        self, x: np.ndarray, keys: Sequence[str], index: Mapping[str, int] | None = None
    ) -> bool:
        """Whether the input ``x`` (the values of the inputs ``keys``) lies within ``REACH``
        of a landmark, ``gamma min_j ||x - z_j||^2 <= REACH`` over the inputs the kernel
        reads (False before the landmarks)."""
        if not self.landmarks:
            return False
        idx, Z, _ = self._over(keys, index)
        near = self.gamma * nb.nearest_sq(Z, np.ascontiguousarray(x, dtype=np.float64), idx)
        return bool(near <= self.reach())

    def reach(self) -> float:
        """The reach of the landmarks (:meth:`within_reach`): ``REACH`` times their spacing
        (:meth:`spacing`), or ``CROWD`` if less while some landmarks are crowded (a
        near-duplicate is given up for any input beyond it); ``REACH`` itself unless
        ``reach_rule="spacing"``. Kept with the fit."""
        if self.reach_rule != "spacing":
            return self.REACH
        cache = self._cache()
        if cache.reach is None:
            d2 = self._distances()
            near = self.gamma * (d2.min(axis=1) if d2.shape[0] > 1 else np.zeros(1))
            reach = self.REACH * float(np.median(near))
            if (near <= self.CROWD).any():
                reach = min(reach, self.CROWD)
            cache.reach = reach
        return float(cache.reach)

    def spacing(self) -> float:
        """The landmarks' own spacing: the median over the landmarks of ``gamma`` times the
        squared distance to the nearest other landmark (0 with fewer than two landmarks)."""
        d2 = self._distances()
        return self.gamma * float(np.median(d2.min(axis=1))) if d2.shape[0] > 1 else 0.0

    def _over(
        self, keys: Sequence[str], index: Mapping[str, int] | None
    ) -> tuple[np.ndarray, np.ndarray, bool]:
        """The inputs the kernel reads among ``keys`` (their columns ``idx``), the landmarks on
        them (``landmark_matrix``, m x len(idx): read it, never write it) and whether the
        landmarks are over exactly those inputs in that order; kept for the same fit and the
        same ``keys`` and ``index`` objects at the same length (a model's own list and
        index, which only grow), so that a refresh's checks cost no name lookups."""
        cache = self._cache()
        o = cache.over
        if o is not None and o[0] is keys and o[1] == len(keys) and o[2] is index:
            return o[3], o[4], o[5]
        idx = self.feature_indices(len(keys), index)
        names = [str(keys[j]) for j in idx.tolist()]
        Z = self.landmark_matrix(names)
        own = tuple(names) == self._landmarks()[0]
        cache.over = (keys, len(keys), index, idx, Z, own)
        return idx, Z, own

    def _cache(self) -> _FitCache:
        """The numbers kept for the current fit (:class:`_FitCache`), rebuilt when the fit is
        another object than the one they were computed from; a fit with the same landmarks
        (the very ``keys`` and ``points`` tuples: a new bandwidth, :meth:`fitted`) takes the
        numbers that depend on them alone (``Z``, ``col``, ``d2``, ``over``; not ``reach``,
        which depends on the bandwidth) from the last fit's (read, never written: ~0.4 ms for
        50 landmarks over ~400 inputs at the bandwidth warm-up)."""
        cache = self._fit_cache
        if cache is None or cache.fit is not self.fit:
            own, points = self._landmarks()
            last = None if cache is None else cache.fit
            if (
                isinstance(last, Landmarks)
                and isinstance(self.fit, Landmarks)
                and last.keys is own
                and last.points is points
            ):
                assert cache is not None
                kept = _FitCache(self.fit, cache.Z, cache.col, cache.d2, None, cache.over)
                self._fit_cache = kept
                return kept
            Z = np.array(points, dtype=np.float64).reshape(len(points), len(own))
            cache = self._fit_cache = _FitCache(self.fit, Z, {k: i for i, k in enumerate(own)})
        return cache

    @property
    def landmarks(self) -> bool:
        """Whether the kernel has taken its landmarks."""
        return bool(self._landmarks()[1])

    def _landmarks(self) -> tuple[tuple[str, ...], tuple[tuple[float, ...], ...]]:
        if isinstance(self.fit, Landmarks):
            return self.fit.keys, self.fit.points
        return (), ()

    def landmark_matrix(self, keys: Sequence[str]) -> np.ndarray:
        """The landmarks on the inputs ``keys`` (m x len(keys); 0 where a landmark has no
        value: before the landmarks, or an input that appeared after them)."""
        out = np.zeros((self.n_landmarks, len(keys)))
        if not self.landmarks:
            return out
        cache = self._cache()
        Z, col = cache.Z, cache.col
        if Z.shape[0] == out.shape[0] and tuple(keys) == self._landmarks()[0]:
            return Z.copy()  # (its own inputs, in order)
        for j, key in enumerate(keys):
            i = col.get(str(key))
            if i is not None:
                out[:, j] = Z[:, i]
        return out

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_fit_cache"] = None  # numbers of the fit: rebuilt on demand
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("_fit_cache", None)  # (pickled before the cache had a name)
        self.__dict__.setdefault("reach_rule", "spacing")  # (... or the rule)
        self.__dict__.setdefault("replace", "smallest")  # (... or the replacement rule)

    def fourier_columns(self, keys: Sequence[str], seed: int, draws: int = _DRAWS) -> np.ndarray:
        """The projection's columns (m x len(keys)) on these inputs: ``2 gamma z_j`` (nothing
        drawn: ``seed`` and ``draws`` unused)."""
        return 2.0 * self.gamma * self.landmark_matrix(keys)

    def fourier_column(self, j: int, keys: Sequence[str]) -> np.ndarray:
        """Row ``j`` of :meth:`fourier_columns` (landmark ``j``'s, the same numbers)."""
        return 2.0 * self.gamma * self._over_names(keys)[j]

    def fourier_offset(self, j: int) -> float:
        """Entry ``j`` of :meth:`fourier_offsets` (landmark ``j``'s, the same number)."""
        z = self._cache().Z[j : j + 1]
        return float(-self.gamma * np.einsum("ij,ij->i", z, z)[0])

    def _over_names(self, keys: Sequence[str]) -> np.ndarray:
        """:meth:`landmark_matrix` on ``keys`` (read it, never write it: the kept array when
        ``keys`` are the landmarks' own inputs)."""
        Z = self._cache().Z
        if Z.shape[0] == self.n_landmarks and tuple(keys) == self._landmarks()[0]:
            return Z
        return self.landmark_matrix(keys)

    def fourier_offsets(self, seed: int) -> np.ndarray:
        """``-gamma ||z_j||^2`` per landmark (the inputs it has values of)."""
        own, _ = self._landmarks()
        Z = self.landmark_matrix(own)
        return -self.gamma * np.einsum("ij,ij->i", Z, Z)

    def profiles(self, X: np.ndarray, index: Mapping[str, int] | None = None) -> np.ndarray:
        """The normalised landmark profiles of the rows of ``X`` (n x m): ``k(x, Z) /
        ||k(x, Z)||`` computed directly (the reference the compiled map is tested against).
        Columns of ``X`` are inputs; ``index`` maps names to columns (default: input ``j``
        is named ``str(j)``)."""
        X = as_rows(X)
        if not self.landmarks:
            return np.zeros((X.shape[0], self.n_landmarks))
        d = X.shape[1]
        idx = self.feature_indices(d, index)
        names = {j: str(j) for j in range(d)} if index is None else {
            j: k for k, j in index.items() if j < d
        }  # fmt: skip
        Z = self.landmark_matrix([names.get(int(j), "\x00none") for j in idx.tolist()])
        diff = X[:, None, idx] - Z[None, :, :]
        s = -self.gamma * np.einsum("nmj,nmj->nm", diff, diff)
        P = np.exp(s - s.max(axis=1, keepdims=True))
        return P / np.linalg.norm(P, axis=1, keepdims=True)

    def gram(
        self, X: np.ndarray, Y: np.ndarray | None = None, index: Mapping[str, int] | None = None
    ) -> np.ndarray:
        PX = self.profiles(X, index)
        PY = PX if Y is None else self.profiles(Y, index)
        return PX @ PY.T


class RandomBinning(MedianRBF):
    """Random binning features (Rahimi and Recht, "Random features for large-scale kernel
    machines", NIPS 2007, section 4): ``n_grids`` random grids over the inputs, each putting
    an input in one cell; the indicator of that cell, over many grids, approximates the
    Laplacian kernel

        ``k(x, y) = exp(-||x - y||_1 / sigma)``,  ``1 / sigma = scale / median ||x - x'||_1``

    (the bandwidth from the data like a ``MedianRBF``'s, over the L1 distance: ``core.
    bandwidth``; :attr:`gamma` is the fitted ``1 / sigma``). Grid r cuts axis i at a pitch
    ``delta_ri ~ Gamma(2, sigma)`` (density ``delta / sigma^2 exp(-delta / sigma)``) shifted by
    ``u_ri ~ U[0, delta_ri)``: two inputs share the axis' interval with probability ``max(0, 1
    - |x_i - y_i| / delta)``, whose mean over the pitch is ``exp(-|x_i - y_i| / sigma)``; the
    axes' pitches are independent, so two inputs share a grid's cell with probability
    ``k(x, y)``. The cells are cut along the axes: what the block expresses is axis-aligned
    (piecewise constant on boxes, like a tree's leaves, averaged over random trees of cuts).

    The map: the cell's hash (``core._numba.features.binning_column``: a sum modulo 2**32 of
    each axis' interval index, counted from the interval of 0, times a random odd multiplier,
    then MurmurHash3's finaliser) picks one of the grid's ``n_bins`` columns, set to ``1 /
    sqrt(n_grids)``; ``phi`` has ``n_grids * n_bins`` columns and unit norm. ``<phi(x),
    phi(y)>`` is the share of grids that put x and y in the same cell, plus the cells that hash
    to the same column (about ``(1 - k) / n_bins``). An input at 0 adds nothing to a hash, so
    a sparse record's map costs its non-zeros (the sparse round computes it so), an input that
    appears later enters every grid with its own axis, and the draws of an input (per grid: two
    exponentials for the pitch, the shift, the multiplier) come from ``(seed, name, input
    key)`` alone (``kernel_base.uniforms``), kept as the input's row of the layout's Fourier
    rows: ``1 / delta``, the shift in pitches and the multiplier, at columns ``r``, ``R + r``
    and ``2 R + r`` of the block's ``R * B`` (the rest 0). A new bandwidth rescales the same
    draws. The name is the configuration: ``binning(1/sigma=4/median-l1,R=16,B=16)``.
    """

    distance: ClassVar[str] = "l1"  # 1 / sigma = scale / median L1 distance

    def __init__(
        self,
        n_grids: int = 16,
        scale: float = 4.0,
        n_bins: int = 16,
        features: Sequence[int | str] | None = None,
        name: str | None = None,
    ):
        for what, v, low in (("n_grids", n_grids, 1), ("n_bins", n_bins, 3)):
            if isinstance(v, bool) or int(v) != v or v < low:
                raise ValueError(f"RandomBinning: {what} must be an integer >= {low}, got {v!r}")
        super().__init__(scale, int(n_grids) * int(n_bins), features, name)
        self.n_grids = int(n_grids)
        self.n_bins = int(n_bins)

    def _default_name(self) -> str:
        return f"binning(1/sigma={self.scale:g}/median-l1,R={self.n_grids},B={self.n_bins})"

    def params(self) -> dict[str, Any]:
        out = super().params()
        del out["n_components"]
        return {"n_grids": self.n_grids, "n_bins": self.n_bins, **out}

    def grids(
        self, keys: Sequence[str], seed: int, draws: int = _DRAWS
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per input (rows) and grid (columns): the pitch in units of sigma (``Gamma(2, 1)``:
        the sum of two standard exponentials), the shift in pitches (in [0, 1)) and the odd
        32-bit multiplier of the cell's hash; drawn from (seed, name, key) alone."""
        R = self.n_grids
        u = uniforms(seed, self.drawn_as, keys, 4 * R, 0.0, 1.0, draws)
        pitch = -np.log1p(-u[:, :R]) - np.log1p(-u[:, R : 2 * R])
        np.maximum(pitch, 1e-12, out=pitch)  # (both uniforms 0: probability 2**-106)
        mult = 2.0 * np.floor(u[:, 3 * R :] * 2.0**31) + 1.0
        return pitch, u[:, 2 * R : 3 * R].copy(), mult

    def fourier_columns(self, keys: Sequence[str], seed: int, draws: int = _DRAWS) -> np.ndarray:
        """The block's rows of the layout (``R * B`` x len(keys)): ``1 / delta = gamma /
        pitch``, the shift and the multiplier of each grid (:meth:`grids`), then zeros."""
        R = self.n_grids
        pitch, shift, mult = self.grids(keys, seed, draws)
        out = np.zeros((self.n_components or 0, len(keys)))
        out[:R] = (self.gamma / pitch).T
        out[R : 2 * R] = shift.T
        out[2 * R : 3 * R] = mult.T
        return out

    def fourier_offsets(self, seed: int) -> np.ndarray:
        """No offsets (zeros): the map reads its rows alone."""
        return np.zeros(self.n_components or 0)

    def gram(
        self, X: np.ndarray, Y: np.ndarray | None = None, index: Mapping[str, int] | None = None
    ) -> np.ndarray:
        """The exact Laplacian kernel ``exp(-gamma ||x - y||_1)`` on the inputs it reads."""
        X = as_rows(X)
        Y = X if Y is None else as_rows(Y)
        idx = self.feature_indices(X.shape[1], index)
        dist = np.abs(X[:, None, idx] - Y[None, :, idx]).sum(axis=2)
        return np.exp(-self.gamma * dist)


class B1Spline(Kernel):
    """Generalised B1-spline ``max(0, 1 - ||x - y|| / h)``: compactly supported (sparse Gram)."""

    kind = nb.K_B1

    def __init__(
        self, h: float = 1.0, features: Sequence[int | str] | None = None, name: str | None = None
    ):
        if not h > 0:
            raise ValueError(f"B1Spline: h must be > 0, got {h!r}")
        super().__init__(features, name)
        self.h = float(h)

    def _default_name(self) -> str:
        return f"b1(h={self.h:g})"

    def code_params(self) -> tuple[float, float, bool]:
        return self.h, 0.0, False

    def params(self) -> dict[str, Any]:
        return {"h": self.h, **super().params()}


def _stumps(X: np.ndarray, t: np.ndarray) -> np.ndarray:
    """``a_i(x) = +1`` if ``x >= t_i > 0``, ``-1`` if ``x < t_i <= 0``, else 0 (n x d x R)."""
    v = X[:, :, None]
    return np.where((t > 0) & (v >= t), 1.0, 0.0) - np.where((t <= 0) & (v < t), 1.0, 0.0)


@functools.lru_cache(maxsize=32)
def _strata(P: int) -> np.ndarray:
    """The midpoints of ``P`` equal-probability strata of the half-normal (read-only: computed
    once per ``P``, not once per input)."""
    w = special.ndtri(0.5 + 0.5 * (np.arange(P) + 0.5) / P)
    w.setflags(write=False)
    return w


def _quadrature_rows(b: np.ndarray, std: float) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_quadrature`'s frequencies (times ``std``) and offsets of an even ``R = 2 P``
    for several inputs at once, from their offsets ``b`` (inputs x P, each row the input's
    draw): the same numbers, concatenated input after input."""
    n, P = b.shape
    freqs = np.empty((n, P, 2))
    offsets = np.empty((n, P, 2))
    freqs[:, :, 0] = _strata(P) * std
    freqs[:, :, 1] = freqs[:, :, 0]
    offsets[:, :, 0] = b
    offsets[:, :, 1] = b + 0.5 * np.pi
    return freqs.reshape(-1), offsets.reshape(-1)


def _quadrature(R: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_quadrature_of` drawn from numpy's generator ``rng`` (``NUMPY_DRAWS``): the
    ``P`` offsets, then (an odd ``R``) the last frequency and offset."""
    P = R // 2
    b = np.empty(P + 1)
    b[:P] = rng.uniform(0.0, 2.0 * np.pi, size=P)
    z = 0.0
    if R % 2:
        z = float(rng.standard_normal())
        b[P] = rng.uniform(0.0, 2.0 * np.pi)
    return _quadrature_of(R, b, z)


def _quadrature_of(R: int, b: np.ndarray, z: float) -> tuple[np.ndarray, np.ndarray]:
    """``R`` unit-variance frequencies and offsets of the quadrature one-dimensional Gaussian
    map (``AdditiveRBF(draws="quadrature")``): the midpoints of ``P = R // 2`` equal-probability
    strata of the half-normal (``cos`` is even), each twice, at offsets ``b[:P]`` and ``b[:P] +
    pi/2``; an odd ``R`` ends with an i.i.d. draw, the frequency ``z`` (a standard normal) at
    the offset ``b[P]``."""
    P = R // 2
    w = _strata(P)
    freqs = np.empty(R)
    offsets = np.empty(R)
    freqs[0 : 2 * P : 2] = w
    freqs[1 : 2 * P : 2] = w
    offsets[0 : 2 * P : 2] = b[:P]
    offsets[1 : 2 * P : 2] = b[:P] + 0.5 * np.pi
    if R % 2:
        freqs[-1] = z
        offsets[-1] = b[P]
    return freqs, offsets


_TYPES: dict[str, type[Kernel]] = {
    c.__name__: c
    for c in (
        Linear,
        Polynomial,
        RBF,
        AdditiveRBF,
        AdditiveStumps,
        MedianRBF,
        LandmarkRBF,
        RandomBinning,
        B1Spline,
    )
}


def from_spec(spec: Mapping[str, Any] | Kernel) -> Kernel:
    """Build a kernel from ``{"type": "RBF", "gamma": 0.5, ...}`` (the output of ``to_spec``)."""
    return build(spec, Kernel, _TYPES, "kernel", _features_as_tuple)


def _features_as_tuple(params: dict[str, Any]) -> None:
    if params.get("features") is not None:
        params["features"] = tuple(params["features"])
