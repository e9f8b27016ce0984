"""``stationary-mixture`` (a Gaussian mixture, no drift) and ``label-noise`` (flip labels of any
classification scenario at a known rate, recording which were flipped)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np

from .base import Param, Scenario, check_float, check_int, child_rng

__all__ = ["LabelNoise", "StationaryMixture"]

_TAG_STRUCTURE, _TAG_DATA, _TAG_REFERENCE, _TAG_FLIP = 1, 2, 3, 4
_DECIMALS = 6


class StationaryMixture(Scenario):
    """Gaussian mixture in R^d; component ``k`` has class ``k % n_classes``; no drift.

    Component means are ``separation * N(0, I)``; covariances are random, with unit mean variance.
    Components are equally likely, so classes are balanced when ``n_components`` is a multiple of
    ``n_classes``. Labels are booleans for two classes (class 1 is ``True``), ints otherwise. The
    ground truth holds the mixture and the Bayes-optimal accuracy (estimated on 20 000 draws);
    :meth:`annotated` gives each example's component and Bayes-optimal label.

    Examples
    --------
    >>> sim = StationaryMixture(seed=3, n_samples=5)
    >>> [type(r.y).__name__ for r in sim]
    ['bool', 'bool', 'bool', 'bool', 'bool']
    """

    name = "stationary-mixture"
    params: ClassVar[dict[str, Param]] = {
        "d": Param("int", 2, "input dimension"),
        "n_components": Param("int", 4, "mixture components"),
        "n_classes": Param("int", 2, "classes (component k has class k % n_classes)"),
        "separation": Param("float", 1.5, "standard deviation of the component means"),
        "n_samples": Param("int", 10_000, "stream length"),
    }

    def __init__(
        self,
        seed: int = 0,
        d: int = 2,
        n_components: int = 4,
        n_classes: int = 2,
        separation: float = 1.5,
        n_samples: int = 10_000,
    ) -> None:
        super().__init__(seed, n_samples)
        self.d = check_int("d", d, 1)
        self.n_classes = check_int("n_classes", n_classes, 2)
        self.n_components = check_int("n_components", n_components, self.n_classes)
        self.separation = check_float("separation", separation, 0.0, 1e6)
        rng = child_rng(self.seed, _TAG_STRUCTURE)
        self.means = self.separation * rng.standard_normal((self.n_components, self.d))
        factors = np.eye(self.d) + 0.5 * rng.standard_normal((self.n_components, self.d, self.d))
        covs = factors @ factors.transpose(0, 2, 1)
        self.covs = covs / (np.trace(covs, axis1=1, axis2=2) / self.d)[:, None, None]
        self._chol = np.linalg.cholesky(self.covs)
        self._prec = np.linalg.inv(self.covs)
        self._logdet = np.linalg.slogdet(self.covs)[1]
        self.component_class = np.arange(self.n_components) % self.n_classes

    @property
    def task(self) -> str:  # type: ignore[override]
        return "binary" if self.n_classes == 2 else "multiclass"

    @property
    def classes(self) -> tuple[Any, ...]:
        return (False, True) if self.n_classes == 2 else tuple(range(self.n_classes))

    def _draw(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        comp = rng.integers(0, self.n_components, n)
        z = rng.standard_normal((n, self.d))
        X = self.means[comp] + np.einsum("nij,nj->ni", self._chol[comp], z)
        return np.round(X, _DECIMALS), comp

    def bayes_class(self, X: np.ndarray) -> np.ndarray:
        """The Bayes-optimal class index of each row of ``X``."""
        diff = np.asarray(X, dtype=float)[:, None, :] - self.means[None]
        maha = np.einsum("nki,kij,nkj->nk", diff, self._prec, diff)
        logp = -0.5 * (maha + self._logdet)
        per_class = np.stack(
            [
                np.logaddexp.reduce(logp[:, self.component_class == c], axis=1)
                for c in range(self.n_classes)
            ],
            axis=1,
        )
        return per_class.argmax(1)

    def _chunk(self, c: int) -> Iterator[tuple[Any, dict[str, Any]]]:
        X, comp = self._draw(child_rng(self.seed, _TAG_DATA, c), self.chunk_size)
        bayes = self.bayes_class(X)
        classes = self.classes
        names = [f"x{j}" for j in range(self.d)]
        for r in range(self.chunk_size):
            x = dict(zip(names, X[r].tolist(), strict=True))
            y = classes[self.component_class[comp[r]]]
            info = {"component": int(comp[r]), "bayes_y": classes[bayes[r]]}
            yield self.make_record(c * self.chunk_size + r, x, y), info

    def _truth(self) -> dict[str, Any]:
        X, comp = self._draw(child_rng(self.seed, _TAG_REFERENCE), 20_000)
        bayes_accuracy = float(np.mean(self.bayes_class(X) == self.component_class[comp]))
        return {
            "means": self.means.tolist(),
            "covariances": self.covs.tolist(),
            "component_class": [self.classes[k] for k in self.component_class],
            "bayes_accuracy": bayes_accuracy,
        }


class LabelNoise(Scenario):
    """Any classification scenario with each label replaced, with probability ``flip_rate``, by a
    different class drawn uniformly (for two classes: flipped).

    Flips are drawn independently of the base stream (their own seeded generator), so the clean
    stream is exactly ``base`` with the same seed. :meth:`annotated` gives ``flipped`` and
    ``clean_y`` per example; the ground truth lists every flipped index.

    Parameters
    ----------
    seed
        Seeds both the base scenario and the flips.
    base
        A registered scenario name (built with ``seed`` and ``**base_params``) or a scenario.
    flip_rate
        Probability in [0, 1] that a label is replaced.
    """

    name = "label-noise"
    params: ClassVar[dict[str, Param]] = {
        "base": Param("str", "stationary-mixture", "the classification scenario to corrupt"),
        "flip_rate": Param("float", 0.1, "probability that a label is replaced"),
    }

    def __init__(
        self,
        seed: int = 0,
        base: str | Scenario = "stationary-mixture",
        flip_rate: float = 0.1,
        **base_params: Any,
    ) -> None:
        if isinstance(base, str):
            from .scenarios import get  # late import: the registry imports this module

            if base == self.name:
                raise ValueError("base: label-noise cannot wrap itself")
            base = get(base, seed=seed, **base_params)
        elif base_params:
            raise TypeError(f"unexpected parameters {sorted(base_params)} with a scenario base")
        if base.task not in ("binary", "multiclass"):
            raise ValueError(
                f"base: label-noise needs a classification scenario, {base.name!r} is {base.task}"
            )
        super().__init__(seed, base.n_samples)
        self.base_scenario = base
        self.base = base.name
        self.flip_rate = check_float("flip_rate", flip_rate, 0.0, 1.0)
        self.chunk_size = base.chunk_size  # type: ignore[misc]

    @property
    def task(self) -> str:  # type: ignore[override]
        return self.base_scenario.task

    @property
    def classes(self) -> tuple[Any, ...] | None:
        return self.base_scenario.classes

    def get_params(self) -> dict[str, Any]:
        return {**self.base_scenario.get_params(), **super().get_params()}

    def _flips(self, c: int) -> tuple[np.ndarray, np.ndarray]:
        rng = child_rng(self.seed, _TAG_FLIP, c)
        flipped = rng.random(self.chunk_size) < self.flip_rate
        shift = rng.integers(1, len(self.classes or ()), self.chunk_size)
        return flipped, shift

    def _chunk(self, c: int) -> Iterator[tuple[Any, dict[str, Any]]]:
        classes = self.classes or ()
        flipped, shift = self._flips(c)
        for r, (record, info) in enumerate(self.base_scenario._chunk(c)):
            y = record.y
            if flipped[r]:
                y = classes[(classes.index(y) + shift[r]) % len(classes)]
            out = {**info, "clean_y": record.y, "flipped": bool(flipped[r])}
            yield self.make_record(c * self.chunk_size + r, record.x, y), out

    def flipped_indices(self) -> list[int]:
        """Indices (within ``n_samples``) whose label was replaced."""
        out: list[int] = []
        for c in range(-(-self.n_samples // self.chunk_size)):
            rows = np.flatnonzero(self._flips(c)[0]) + c * self.chunk_size
            out.extend(int(i) for i in rows if i < self.n_samples)
        return out

    def _truth(self) -> dict[str, Any]:
        flipped = self.flipped_indices()
        base = self.base_scenario.ground_truth()
        return {
            "base": base,
            "flip_rate": self.flip_rate,
            "n_flipped": len(flipped),
            "flipped_indices": flipped,
        }
