"""What every kernel shares (``Kernel``): a stable ``name``, the inputs it reads
(``features``), its compiled code and parameters, and the exact kernel matrix (``gram``).

The kernels themselves are in ``streammkl.core.kernels`` (which re-exports ``Kernel``).
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from streammkl.core import _numba as nb
from streammkl.core._spec import Spec

__all__ = [
    "DRAWS", "NUMPY_DRAWS", "Kernel", "check_components", "draw_keys", "generator_for", "normals",
    "stable_seed", "uniforms",
]  # fmt: skip

#: How a model draws each input's random features (a saved model says which, so it is drawn
#: again as it was): ``NUMPY_DRAWS`` (1), numpy's ``default_rng(stable_seed(seed, name, key))``
#: per input (models saved before state version 6); ``DRAWS`` (2, every model made since), the
#: counter-based generator ``nb.draw_rows`` keyed by :func:`draw_keys`.
NUMPY_DRAWS = 1
DRAWS = 2
_NORMALS = np.uint64(0)  # the counter-based generator's streams (a counter word of its own)
_UNIFORMS = np.uint64(1)


class Kernel(Spec):
    """Base class: subclasses set ``kind`` and implement ``_default_name`` and ``code_params``."""

    kind: int = -1

    def __init__(self, features: Sequence[int | str] | None = None, name: str | None = None):
        self.features = tuple(features) if features is not None else None
        self._name = name

    # --- identity -------------------------------------------------------------------------
    @property
    def name(self) -> str:
        if self._name is not None:
            return self._name
        base = self._default_name()
        if self.features is None:
            return base
        keys = [str(f) for f in self.features]
        if len(keys) <= 4:
            return f"{base}[{','.join(keys)}]"
        digest = zlib.crc32(",".join(keys).encode()) & 0xFFFFFFFF
        return f"{base}[{len(keys)} features:{digest:08x}]"

    @property
    def implicit(self) -> bool:
        return True

    @property
    def n_components(self) -> int | None:
        """Width of the explicit feature map (None for implicit kernels or the identity map)."""
        return None

    def _default_name(self) -> str:
        raise NotImplementedError

    def code_params(self) -> tuple[float, float, bool]:
        raise NotImplementedError

    def params(self) -> dict[str, Any]:
        """Constructor arguments, JSON-serialisable (``from_spec`` inverts ``to_spec``)."""
        out: dict[str, Any] = {"features": list(self.features) if self.features else None}
        if self._name is not None:
            out["name"] = self._name
        return out

    # --- feature selection ----------------------------------------------------------------
    def feature_indices(self, d: int, index: Mapping[str, int] | None = None) -> np.ndarray:
        """Column indices (< d) this kernel reads; names are looked up in ``index``."""
        if self.features is None:
            return np.arange(d, dtype=np.int64)
        out = []
        for f in self.features:
            if isinstance(f, str):
                if index is None:
                    raise ValueError(
                        f"kernel {self.name!r} selects feature {f!r} by name, but the inputs are "
                        "unnamed arrays; pass integer indices or use a dict-input learner"
                    )
                if f in index and index[f] < d:
                    out.append(index[f])
            elif isinstance(f, int | np.integer) and not isinstance(f, bool):
                if f < 0:
                    raise ValueError(f"kernel {self.name!r}: negative feature index {f}")
                if f < d:
                    out.append(int(f))
            else:
                raise TypeError(
                    f"kernel {self.name!r}: feature {f!r} is neither an index nor a name"
                )
        return np.array(sorted(set(out)), dtype=np.int64)

    def feature_mask(self, d: int, index: Mapping[str, int] | None = None) -> np.ndarray:
        mask = np.zeros(d)
        mask[self.feature_indices(d, index)] = 1.0
        return mask

    # --- numpy reference ------------------------------------------------------------------
    def gram(
        self, X: np.ndarray, Y: np.ndarray | None = None, index: Mapping[str, int] | None = None
    ) -> np.ndarray:
        """Exact kernel matrix ``k(X_i, Y_j)`` (for random-feature kernels: the exact kernel)."""
        X = as_rows(X)
        Y = X if Y is None else as_rows(Y)
        if X.shape[1] != Y.shape[1]:
            raise ValueError(f"gram: X has {X.shape[1]} columns, Y has {Y.shape[1]}")
        mask = self.feature_mask(X.shape[1], index)
        p0, p1, normalize = self.code_params()
        out = np.empty((X.shape[0], Y.shape[0]))
        full = self.features is None
        return nb.gram(self.kind, p0, p1, normalize, mask, full, X, Y, out)

    def diag(self, X: np.ndarray, index: Mapping[str, int] | None = None) -> np.ndarray:
        X = np.atleast_2d(np.asarray(X, dtype=np.float64))
        return np.array([self.gram(row[None, :], index=index)[0, 0] for row in X])


def as_rows(X: np.ndarray) -> np.ndarray:
    """``X`` as float64 C-contiguous rows (a single example is one row): what ``gram`` takes."""
    return np.ascontiguousarray(np.atleast_2d(X), dtype=np.float64)


def check_components(kind: str, n: int | None) -> None:
    if n is not None and (int(n) != n or n < 1):
        raise ValueError(f"{kind}: n_components must be a positive integer or None, got {n!r}")


def draw_keys(seed: int, name: str, keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The counter-based generator's 64-bit key ``(k0[j], k1[j])`` of each input ``keys[j]``
    of the kernel ``name``: two CRC-32s, ``k0 = crc32(name, 0x1f, key)`` and ``k1 = crc32(key,
    0x1f, name)`` continued from ``crc32(seed)`` (``seed`` modulo 2**64, 8 little-endian
    bytes). Stable across processes and platforms; two inputs share draws only if both words
    collide."""
    k0 = np.empty(len(keys), dtype=np.uint64)
    k1 = np.empty(len(keys), dtype=np.uint64)
    start = zlib.crc32((int(seed) & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little"))
    for j, key in enumerate(keys):
        k0[j] = zlib.crc32(f"{name}\x1f{key}".encode())
        k1[j] = zlib.crc32(f"{key}\x1f{name}".encode(), start)
    return k0, k1


def normals(
    seed: int, name: str, keys: Sequence[str], n: int, draws: int = DRAWS,
    scale: float = 1.0, out: np.ndarray | None = None,
) -> np.ndarray:  # fmt: skip
    """``scale`` times standard normals (len(keys), n), row j drawn from (seed, name, keys[j])
    alone, as the model's ``draws`` say (:data:`DRAWS`: independent standard normals, every
    (input, pair of indices) its own Philox counter; :data:`NUMPY_DRAWS`: numpy's generator
    per input); written into ``out`` when given (rows of n float64, each contiguous)."""
    if out is None:
        out = np.empty((len(keys), int(n)))
    if draws == NUMPY_DRAWS:
        for j, key in enumerate(keys):
            out[j] = generator_for(seed, name, key).standard_normal(int(n)) * scale
        return out
    _check_draws(draws)
    k0, k1 = draw_keys(seed, name, keys)
    nb.draw_rows(k0, k1, _NORMALS, True, float(scale), 0.0, out)
    return out


def uniforms(
    seed: int, name: str, keys: Sequence[str], n: int, low: float, high: float,
    draws: int = DRAWS,
) -> np.ndarray:  # fmt: skip
    """Uniforms in [low, high) (len(keys), n), row j drawn from (seed, name, keys[j]) alone
    (a stream of the counter-based generator other than :func:`normals`'s), as ``draws``
    say."""
    out = np.empty((len(keys), int(n)))
    if draws == NUMPY_DRAWS:
        for j, key in enumerate(keys):
            out[j] = generator_for(seed, name, key).uniform(low, high, size=int(n))
        return out
    _check_draws(draws)
    k0, k1 = draw_keys(seed, name, keys)
    nb.draw_rows(k0, k1, _UNIFORMS, False, float(low), float(high), out)
    return out


def _check_draws(draws: int) -> None:
    if draws != DRAWS:
        raise ValueError(f"unknown random draws {draws!r}: {NUMPY_DRAWS} or {DRAWS}")


def stable_seed(seed: int, name: str, key: str) -> int:
    return (int(seed) * 0x9E3779B1 + zlib.crc32(f"{name}\x1f{key}".encode())) & 0xFFFFFFFFFFFF


_PCG_MULT = (2549297995355413924 << 64) + 4865540595714422341  # PCG64's 128-bit multiplier
_M128 = (1 << 128) - 1
_GENERATORS = threading.local()
#: Seedings by numpy's ``default_rng`` before the compiled words take over (the same draws):
#: a model with a few inputs never compiles ``nb.seed_state`` (~0.3 s on a fresh checkout).
_COMPILED_AFTER = 512
_SEEDINGS = [0]


def generator_for(seed: int, name: str, key: str) -> np.random.Generator:
    """``np.random.default_rng(stable_seed(seed, name, key))``: the same draws, seeded in ~1 µs
    instead of ~10 (a new input's features are drawn from its own seed, in every block that
    reads it) once a process has seeded ``_COMPILED_AFTER`` generators (before: numpy's own).
    One generator per thread, re-seeded by each call: draw from it before the next.

    numpy's seeding, step by step: ``SeedSequence(entropy).generate_state(4, uint64)``
    (compiled: ``nb.seed_state``), then PCG64's ``srandom`` with the first two words as the
    initial state and the last two as the stream (``state = inc + initstate``, one step)."""
    entropy = stable_seed(seed, name, key)
    if _SEEDINGS[0] < _COMPILED_AFTER:  # few inputs so far: numpy's own (nothing to compile)
        _SEEDINGS[0] += 1
        return np.random.default_rng(entropy)
    words = np.empty(4, dtype=np.uint64)
    nb.seed_state(np.uint64(entropy), words)
    v0, v1, v2, v3 = words.tolist()
    inc = ((((v2 << 64) | v3) << 1) | 1) & _M128
    state = ((inc + ((v0 << 64) | v1)) * _PCG_MULT + inc) & _M128
    gen = getattr(_GENERATORS, "gen", None)
    if gen is None:
        gen = _GENERATORS.gen = np.random.Generator(np.random.PCG64(0))
    gen.bit_generator.state = {
        "bit_generator": "PCG64",
        "state": {"state": state, "inc": inc},
        "has_uint32": 0,
        "uinteger": 0,
    }
    return gen
