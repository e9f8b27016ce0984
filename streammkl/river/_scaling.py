"""Online standardisation of a learner's inputs: ``(x - mean) / std`` per input, with running
statistics (Welford), applied before the core sees a vector.

A vector is transformed with the statistics *including* it (as river's
``StandardScaler`` in a pipeline: counted, then transformed); ``predict_one(x)`` computes the same
statistics without storing them, so the prediction and the learning round on ``x`` see the same
transformed vector (the prequential prediction is the round's own), and a run of rows is
transformed exactly as the same rows one by one. A missing input is read as 0, as the learner
does anyway; an input first seen late starts its statistics then. A constant input (variance
zero, e.g. its first value) becomes ``x - mean`` = 0; the variance is the population one.

**Rare 0/1 inputs are not centred.** An input is *binary* while every value counted for it has
been exactly 0 or 1 (an absent value is a 0) and it is rare: 1 in at most a third of its values
once it has 64 of them (``core._numba.known.RARE_AFTER``, ``RARE_SHARE``; before that, any
share). A one-hot category, a rare flag, a word present or not is binary. A binary input is left
at 0/1, so an absent category stays 0 and a record whose non-zeros are few stays sparse (it takes
the core's sparse round; centring would turn every absent category into ``-mean/std``, a dense
record). A frequent 0/1 input is dense anyway, and centred it keeps what the learner learned
with before the rule (LEDDrift's 24 segments, on in 40 to 90 % of the records: 76.17 %
standardised, 75.70 % left at 0/1, 76.17 % with the share; one-hot Agrawal 86.43 % either way;
5 seeds). An input's statistics are counted all the same: its first other value (a 2, a 0.5, a
count), or the count that makes it frequent, is standardised with the statistics of every value
counted so far and makes it a standardised input for good (the flag is cleared when that value
is counted; a prediction on such a value already standardises it, as the round that learns it
will). From then on the model sees that input on another scale than before, as after any change
of the input's distribution; an input that starts with a run of 0/1 values and only later takes
others (an integer categorical coded 0, 1, 2, ...) goes through that switch once. An input whose
values so far were all 0 gives 0 either way, so a numeric input that takes no value exactly 1
before its first other value (a dense stream's) is standardised as before the rule, bit for
bit. Counts (bag of words, TF-IDF) are binary until the first count of 2 or the first fractional
weight, then standardised (centred: dense); keep ``standardize=False`` for them.

The flags are part of the statistics (``binary``: 1.0 while binary) and of the learner's state;
a state saved before the rule holds none and loads with no input binary (its inputs keep being
standardised as before; inputs first met after the load start binary).

The hot loop is the core's (``streammkl.core.compiled.standardize_rows``), compiled without
fastmath, the same code for one row, for a run and inside the round of a record of known inputs
(``OnlineMKL.learn_bound``), so all give the same numbers bit for bit.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from streammkl.core.compiled import standardize_one, standardize_rows
from streammkl.core.jit import entry_point

#: The compiled one-row entry points, by ``learn`` (resolved on first use).
_ONE: dict[bool, Any] = {}


class InputScaler:
    """Running per-input mean and variance, and whether each input has only been 0 or 1; grows
    with the learner's inputs."""

    def __init__(self, width: int = 0) -> None:
        self.count = np.zeros(width)
        self.mean = np.zeros(width)
        self.m2 = np.zeros(width)
        #: 1.0 for an input every counted value of which was 0 or 1 (left at 0/1), else 0.0.
        self.binary = np.ones(width)
        #: Called whenever the statistics' arrays are replaced by others (:meth:`fit_width`,
        #: :meth:`assign`; whoever bound them elsewhere binds them again); not pickled.
        self.on_replace: Callable[[], None] | None = None

    def fit_width(self, width: int) -> None:
        """Grow the statistics to ``width`` inputs (new ones start at zero counts, binary)."""
        extra = width - self.count.shape[0]
        if extra > 0:
            self.count, self.mean, self.m2 = (
                np.concatenate([a, np.zeros(extra)]) for a in (self.count, self.mean, self.m2)
            )
            self.binary = np.concatenate([self.binary, np.ones(extra)])
            self._replaced()

    def _replaced(self) -> None:
        """Report that the statistics' arrays were replaced (:attr:`on_replace`)."""
        if self.on_replace is not None:
            self.on_replace()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("on_replace", None)  # (its owner's: set again by it)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        # (the names interned, as pickle's default does: a pickle of the copy is the same bytes)
        self.__dict__.update({sys.intern(k): v for k, v in state.items()})
        self.on_replace = None

    @property
    def stats(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The statistics as the compiled calls take them: ``(count, mean, m2, binary)``."""
        return self.count, self.mean, self.m2, self.binary

    def nonzeros(self, x: Mapping[Any, Any], index: Mapping[str, int]) -> int:
        """How many entries of ``x`` standardised are non-zero, about: every known standardised
        input (centred: non-zero whether ``x`` holds it or not) and each non-zero value of a
        binary or unknown input of ``x`` (``index``: an input's name to its column)."""
        binary = self.binary
        width = binary.shape[0]
        dense = width - int(np.count_nonzero(binary))
        for key, v in x.items():
            if v:
                j = index.get(key if type(key) is str else str(key), -1)
                if j < 0 or j >= width or binary[j] != 0.0:
                    dense += 1
        return dense

    def transform(self, x: np.ndarray) -> np.ndarray:
        """One vector, standardised as if it were counted (nothing is stored)."""
        return self._one(x, False)

    def learn_transform(self, x: np.ndarray) -> np.ndarray:
        """One vector, counted and standardised."""
        return self._one(x, True)

    def _one(self, x: np.ndarray, learn: bool) -> np.ndarray:
        """One float64 vector through the compiled row (its entry point for these types: no
        per-call type resolution); the numbers of :meth:`rows` on it."""
        if x.shape[0] != self.count.shape[0]:
            self.fit_width(x.shape[0])
        if x.dtype != np.float64 or not x.flags.c_contiguous:
            x = np.ascontiguousarray(x, dtype=np.float64)
        out = np.empty_like(x)
        one = _ONE.get(learn)
        if one is None:
            one = _ONE[learn] = entry_point(standardize_one, (x, x, x, x, x, x, learn))
        one(x, self.count, self.mean, self.m2, self.binary, out, learn)
        return out

    def rows(self, X: np.ndarray, learn: bool) -> np.ndarray:
        """Rows (n, d), each standardised with the statistics of everything counted before and
        of itself; with ``learn`` every row is counted (so row i sees rows < i), else each row
        is standardised alone against the stored statistics."""
        X = np.ascontiguousarray(X, dtype=np.float64)
        self.fit_width(X.shape[1])
        out = np.empty_like(X)
        if X.shape[0]:
            standardize_rows(X, self.count, self.mean, self.m2, self.binary, out, learn)
        return out

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        return {
            f"{prefix}count": self.count,
            f"{prefix}mean": self.mean,
            f"{prefix}m2": self.m2,
            f"{prefix}binary": self.binary,
        }

    def assign(self, other: InputScaler) -> None:
        """Hold ``other``'s statistics: copied into this scaler's arrays when they have the
        same widths (the compiled calls bound to them stay bound: a group member takes its
        group's statistics every round), else ``other``'s arrays taken."""
        mine, theirs = self.stats, other.stats
        if all(a.shape == b.shape for a, b in zip(mine, theirs, strict=True)):
            for a, b in zip(mine, theirs, strict=True):
                np.copyto(a, b)
        else:
            self.count, self.mean, self.m2, self.binary = theirs
            self._replaced()

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], prefix: str) -> InputScaler:
        """The statistics :meth:`to_arrays` saved; without ``binary`` (a state saved before the
        0/1 rule) no input is binary, so the saved inputs keep their numbers."""
        scaler = cls()
        scaler.count = np.array(arrays[f"{prefix}count"], dtype=np.float64)
        scaler.mean = np.array(arrays[f"{prefix}mean"], dtype=np.float64)
        scaler.m2 = np.array(arrays[f"{prefix}m2"], dtype=np.float64)
        binary = arrays.get(f"{prefix}binary")
        scaler.binary = (
            np.zeros(scaler.count.shape[0])
            if binary is None
            else np.array(binary, dtype=np.float64)
        )
        return scaler


class TargetScale:
    """Online standardisation of a regressor's target: running mean and variance (Welford,
    the sample variance), applied before the loss; a core score ``s`` predicts
    ``center + scale * s``. With ``standardize`` off the target is learned as it is."""

    def __init__(self, standardize: bool = True) -> None:
        self.standardize = standardize
        self.n = 0
        self.mean = 0.0
        self.m2 = 0.0

    def std(self) -> float:
        if not self.standardize or self.n < 2:
            return 1.0
        var = self.m2 / (self.n - 1)
        return math.sqrt(var) if var > 1e-24 else 1.0

    def advance(self, y: float) -> float:
        """Count the target in the running statistics and return it standardised as the core
        learns it."""
        if self.standardize:
            self.n += 1
            delta = y - self.mean
            self.mean += delta / self.n
            self.m2 += delta * (y - self.mean)
        center = self.mean if self.standardize else 0.0
        return (y - center) / self.std()

    def prediction(self, scores: np.ndarray) -> float:
        """The prediction of the core's ``scores`` (its first): ``center + scale * score``
        (:meth:`center_scale`'s, inline: a Python frame fewer on ``predict_one``'s lane)."""
        center = self.mean if self.standardize else 0.0
        return center + self.std() * scores.item(0)

    def mark(self) -> tuple[int, float, float]:
        """The running statistics now (:meth:`back_to` returns to them)."""
        return self.n, self.mean, self.m2

    def back_to(self, mark: tuple[int, float, float]) -> None:
        """Return to the statistics of :meth:`mark` (a target counted, then refused)."""
        self.n, self.mean, self.m2 = mark

    def center_scale(self) -> tuple[float, float]:
        """(center, scale): a core score s predicts ``center + scale * s``."""
        return (self.mean if self.standardize else 0.0), self.std()

    def to_meta(self) -> dict[str, float]:
        return {"n": self.n, "mean": self.mean, "m2": self.m2}

    def restore(self, meta: dict[str, float]) -> None:
        self.n = int(meta.get("n", 0))
        self.mean = float(meta.get("mean", 0.0))
        self.m2 = float(meta.get("m2", 0.0))
