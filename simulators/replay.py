"""Replays of bundled datasets: river's file datasets and scikit-learn's 8x8 digits.

Nothing is downloaded: only datasets shipped inside the installed river and scikit-learn wheels are
offered. A replay yields the rows in their original order (``shuffle=False``) or in a permutation
seeded by ``seed``; ``n_samples`` truncates, or, with ``loop=True``, may exceed the dataset's size:
the replay then starts over (a new seeded permutation per pass when shuffled). Features are the
dataset's own names, as floats.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import numpy as np

from .base import Param, Scenario, check_int, child_rng

__all__ = [
    "Bananas",
    "ChickWeights",
    "Digits",
    "ImageSegments",
    "Phishing",
    "Replay",
    "Shuttle",
    "TrumpApproval",
    "load_digit_images",
]

_TAG_ORDER = 1
_REPLAY_PARAMS = {
    "shuffle": Param("bool", False, "replay in a seeded random order instead of the original"),
    "n_samples": Param("int", None, "replay only the first n rows (default: all)"),
    "loop": Param("bool", False, "start over at the end (n_samples may exceed the rows)"),
}


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value JSON expects."""
    return value.item() if isinstance(value, np.generic) else value


@functools.lru_cache(maxsize=8)
def _river_rows(dataset: str) -> tuple[tuple[dict[str, float], Any], ...]:
    from river import datasets

    rows = []
    for i, (x, y) in enumerate(getattr(datasets, dataset)()):
        features = {}
        for key, value in x.items():
            if isinstance(value, bool) or not isinstance(value, int | float | np.number):
                raise TypeError(
                    f"river dataset {dataset}: row {i} feature {key!r} is {value!r}, not a number"
                )
            features[str(key)] = float(value)
        rows.append((features, _plain(y)))
    return tuple(rows)


@functools.lru_cache(maxsize=1)
def load_digit_images() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's bundled digits: ``(images (1797 x 64) scaled to [0, 1], labels)``."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    images = np.asarray(bunch.data, dtype=float) / 16.0
    images.setflags(write=False)
    labels = np.asarray(bunch.target, dtype=np.int64)
    labels.setflags(write=False)
    return images, labels


class Replay(Scenario):
    """Base of the dataset replays; subclasses implement :meth:`rows` and set ``task``."""

    params = _REPLAY_PARAMS
    source = ""

    def __init__(
        self, seed: int = 0, shuffle: bool = False, n_samples: int | None = None, loop: bool = False
    ) -> None:
        for key, value in (("shuffle", shuffle), ("loop", loop)):
            if not isinstance(value, bool):
                raise TypeError(f"{key} must be a boolean, got {value!r}")
        self.shuffle, self.loop = shuffle, loop
        total = len(self.rows())
        if n_samples is not None:
            n_samples = check_int("n_samples", n_samples, 1)
            if n_samples > total and not loop:
                raise ValueError(
                    f"n_samples: {self.name} has {total} rows, asked for {n_samples}; ask for "
                    f"at most {total}, or pass loop=true to start over at the end"
                )
        super().__init__(seed, total if n_samples is None else n_samples)
        self.n_samples_arg = n_samples
        self.n_rows = total
        self._orders: dict[int, np.ndarray] = {}

    def _order(self, epoch: int) -> np.ndarray:
        """The row order of pass ``epoch`` (a seeded permutation per pass when shuffled)."""
        order = self._orders.get(epoch)
        if order is None:
            if self.shuffle:
                key = (_TAG_ORDER,) if epoch == 0 else (_TAG_ORDER, epoch)
                order = child_rng(self.seed, *key).permutation(self.n_rows)
            else:
                order = np.arange(self.n_rows)
            self._orders = {epoch: order}  # one pass kept: chunks are read in order
        return order

    @property
    def order(self) -> np.ndarray:
        """The order of the first pass."""
        return self._order(0)

    def rows(self) -> tuple[tuple[Any, Any], ...]:
        """Every ``(x, y)`` of the dataset, in its original order."""
        raise NotImplementedError

    def get_params(self) -> dict[str, Any]:
        return {"shuffle": self.shuffle, "n_samples": self.n_samples_arg, "loop": self.loop}

    @property
    def classes(self) -> tuple[Any, ...] | None:
        if self.task == "regression":
            return None
        return tuple(sorted({y for _, y in self.rows()}))

    def _chunk(self, c: int) -> Iterator[tuple[Any, dict[str, Any]]]:
        rows = self.rows()
        start = c * self.chunk_size
        for i in range(start, start + self.chunk_size):
            epoch, position = divmod(i, self.n_rows)
            row = int(self._order(epoch)[position])
            x, y = rows[row]
            yield self.make_record(i, dict(x), y), {"row": row, "pass": epoch}

    def _truth(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "n_rows": self.n_rows,
            "order": "shuffled" if self.shuffle else "original",
            "features": list(self.rows()[0][0]),
        }


class _RiverReplay(Replay):
    dataset = ""

    def rows(self) -> tuple[tuple[Any, Any], ...]:
        return _river_rows(self.dataset)

    @property
    def source(self) -> str:  # type: ignore[override]
        return f"river.datasets.{self.dataset}"


class Bananas(_RiverReplay):
    """river's ``Bananas``: 5300 points in R^2, two banana-shaped classes (``True``/``False``)."""

    name, task, dataset = "bananas", "binary", "Bananas"


class Phishing(_RiverReplay):
    """river's ``Phishing``: 1250 web pages, 9 features, phishing or not (``True``/``False``)."""

    name, task, dataset = "phishing", "binary", "Phishing"


class ImageSegments(_RiverReplay):
    """river's ``ImageSegments``: 2310 image regions, 18 features, 7 string classes."""

    name, task, dataset = "image-segments", "multiclass", "ImageSegments"


class Shuttle(_RiverReplay):
    """river's ``Shuttle``: 49 097 rows, 9 integer features, labels 0/1 (heavily imbalanced)."""

    name, task, dataset = "shuttle", "binary", "Shuttle"


class TrumpApproval(_RiverReplay):
    """river's ``TrumpApproval``: 1001 days, 6 poll features, approval rating (regression)."""

    name, task, dataset = "trump-approval", "regression", "TrumpApproval"


class ChickWeights(_RiverReplay):
    """river's ``ChickWeights``: 578 rows (time, chick, diet), chick weight (regression)."""

    name, task, dataset = "chick-weights", "regression", "ChickWeights"


class Digits(Replay):
    """scikit-learn's ``load_digits``: 1797 8x8 images; features ``p0..p63`` in [0, 1]; labels 0-9.

    Examples
    --------
    >>> rec = Digits(n_samples=1).take(1)[0]
    >>> len(rec.x), rec.y, max(rec.x.values())
    (64, 0, 0.9375)
    """

    name, task, source = "digits", "multiclass", "sklearn.datasets.load_digits"

    def rows(self) -> tuple[tuple[Any, Any], ...]:
        return _digit_rows()


@functools.lru_cache(maxsize=1)
def _digit_rows() -> tuple[tuple[dict[str, float], int], ...]:
    images, labels = load_digit_images()
    names = [f"p{j}" for j in range(images.shape[1])]
    return tuple(
        (dict(zip(names, img.tolist(), strict=True)), int(lab))
        for img, lab in zip(images, labels, strict=True)
    )
