"""``digit-strings``: sequences of scikit-learn's 8x8 digits whose labels follow a bigram chain.

The closest honest substitute for the OCR letters data of the SPOM paper (which cannot be
downloaded here): label sequences are drawn from a fixed, seeded :class:`~.markov.BigramChain`
(sparse, informative transitions, as letter bigrams in words), lengths uniform in
``[min_length, max_length]``, and each label is rendered by a random image of that digit, pixels
scaled to [0, 1] (64 features).

Two interfaces:

- the scenario :class:`DigitStrings`, a stream of records with ``x`` a list of 64-float lists and
  ``y`` the list of int labels (``split`` picks the image pool: all, train or test);
- the numpy API for benchmarks, :func:`load_split` / :func:`splits`: lists of (T x 64) arrays and
  label arrays for a train and a test set whose image pools are disjoint (a stratified split of
  the 1797 images), so no image appears in both.

The chain depends only on ``chain_seed`` (default 0, the same "language" for every split); the
image split and the sequences depend on ``seed``.

Examples
--------
>>> data = load_split(seed=0, n_train=20, n_test=10)
>>> len(data.X_train), data.X_train[0].shape[1], data.y_train[0].dtype.kind
(20, 64, 'i')
>>> set(np.concatenate(data.train_images)) & set(np.concatenate(data.test_images))
set()
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .base import Param, Scenario, check_float, check_int, child_rng
from .markov import BigramChain
from .replay import load_digit_images

__all__ = ["DigitStrings", "SequenceSplit", "image_pools", "load_split", "splits"]

_TAG_POOL, _TAG_SEQ, _TAG_TRAIN, _TAG_TEST = 1, 2, 3, 4


def image_pools(seed: int, test_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint train/test image indices, stratified by digit, seeded by ``seed``."""
    test_fraction = check_float("test_fraction", test_fraction, 0.0, 1.0, open_low=True)
    _, labels = load_digit_images()
    rng = child_rng(seed, _TAG_POOL)
    train, test = [], []
    for digit in range(10):
        idx = rng.permutation(np.flatnonzero(labels == digit))
        n_test = round(test_fraction * len(idx))
        if n_test >= len(idx):
            raise ValueError(f"test_fraction={test_fraction} leaves no training image of {digit}")
        test.append(idx[:n_test])
        train.append(idx[n_test:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


def _sample(
    chain: BigramChain,
    pool: np.ndarray,
    n: int,
    rng: np.random.Generator,
    min_length: int,
    max_length: int,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """``n`` label sequences and, for each label, an image index drawn from ``pool``."""
    _, labels = load_digit_images()
    by_digit = [pool[labels[pool] == d] for d in range(chain.n_labels)]
    ys, images = [], []
    for _ in range(n):
        y = chain.sample(rng, int(rng.integers(min_length, max_length + 1)))
        pick = rng.random(len(y))
        images.append(
            np.array([by_digit[d][int(p * len(by_digit[d]))] for d, p in zip(y, pick, strict=True)])
        )
        ys.append(y)
    return ys, images


def _check_lengths(min_length: int, max_length: int) -> tuple[int, int]:
    min_length = check_int("min_length", min_length, 1)
    return min_length, check_int("max_length", max_length, min_length)


class DigitStrings(Scenario):
    """Stream of digit strings (see the module docstring).

    Parameters
    ----------
    seed
        Seeds the image split and the sequences.
    n_samples
        Number of sequences.
    min_length, max_length
        Sequence lengths are uniform in ``[min_length, max_length]``.
    n_successors
        Possible next labels per label in the chain.
    chain_seed
        Seeds the chain (fixed across seeds by default).
    split
        Image pool: ``"all"``, ``"train"`` or ``"test"`` (see :func:`image_pools`).
    test_fraction
        Fraction of each digit's images in the test pool.
    """

    name = "digit-strings"
    task = "sequence"
    chunk_size = 100
    params: ClassVar[dict[str, Param]] = {
        "n_samples": Param("int", 1000, "number of sequences"),
        "min_length": Param("int", 3, "shortest sequence"),
        "max_length": Param("int", 10, "longest sequence"),
        "n_successors": Param("int", 3, "possible next labels per label"),
        "chain_seed": Param("int", 0, "seed of the bigram chain"),
        "split": Param("str", "all", "image pool: all | train | test"),
        "test_fraction": Param("float", 0.5, "fraction of each digit's images in the test pool"),
    }

    def __init__(
        self,
        seed: int = 0,
        n_samples: int = 1000,
        min_length: int = 3,
        max_length: int = 10,
        n_successors: int = 3,
        chain_seed: int = 0,
        split: str = "all",
        test_fraction: float = 0.5,
    ) -> None:
        super().__init__(seed, n_samples)
        self.min_length, self.max_length = _check_lengths(min_length, max_length)
        self.n_successors = check_int("n_successors", n_successors, 1, 10)
        self.chain_seed = check_int("chain_seed", chain_seed, 0)
        if split not in ("all", "train", "test"):
            raise ValueError(f"split must be 'all', 'train' or 'test', got {split!r}")
        self.split = split
        self.test_fraction = check_float("test_fraction", test_fraction, 0.0, 1.0, open_low=True)
        self.chain = BigramChain.random(10, self.n_successors, self.chain_seed)
        train, test = image_pools(self.seed, self.test_fraction)
        self.pool = {"all": np.sort(np.concatenate([train, test])), "train": train, "test": test}[
            split
        ]

    @property
    def classes(self) -> tuple[Any, ...]:
        return tuple(range(10))

    def _chunk(self, c: int) -> Iterator[tuple[Any, dict[str, Any]]]:
        images, _ = load_digit_images()
        rng = child_rng(self.seed, _TAG_SEQ, c)
        ys, picks = _sample(
            self.chain, self.pool, self.chunk_size, rng, self.min_length, self.max_length
        )
        for r, (y, pick) in enumerate(zip(ys, picks, strict=True)):
            record = self.make_record(c * self.chunk_size + r, images[pick].tolist(), y.tolist())
            yield record, {"images": pick.tolist()}

    def _truth(self) -> dict[str, Any]:
        return {"chain": self.chain.to_dict(), "n_pool_images": len(self.pool)}


@dataclass(frozen=True, eq=False)
class SequenceSplit:
    """One train/test split of digit strings (numpy API).

    ``X_*[i]`` is a (T_i x 64) float array in [0, 1], ``y_*[i]`` its (T_i,) int labels, and
    ``*_images[i]`` the indices of the ``load_digits`` images used (train and test disjoint).
    """

    X_train: list[np.ndarray]
    y_train: list[np.ndarray]
    X_test: list[np.ndarray]
    y_test: list[np.ndarray]
    train_images: list[np.ndarray]
    test_images: list[np.ndarray]
    chain: BigramChain
    seed: int


def load_split(
    seed: int = 0,
    n_train: int = 500,
    n_test: int = 500,
    *,
    test_fraction: float = 0.5,
    min_length: int = 3,
    max_length: int = 10,
    n_successors: int = 3,
    chain_seed: int = 0,
) -> SequenceSplit:
    """A seeded train/test split of digit strings; test sequences use only held-out images."""
    seed = check_int("seed", seed, 0)
    n_train = check_int("n_train", n_train, 1)
    n_test = check_int("n_test", n_test, 0)
    min_length, max_length = _check_lengths(min_length, max_length)
    chain = BigramChain.random(10, n_successors, chain_seed)
    images, _ = load_digit_images()
    train_pool, test_pool = image_pools(seed, test_fraction)
    y_tr, im_tr = _sample(
        chain, train_pool, n_train, child_rng(seed, _TAG_TRAIN), min_length, max_length
    )
    y_te, im_te = _sample(
        chain, test_pool, n_test, child_rng(seed, _TAG_TEST), min_length, max_length
    )
    return SequenceSplit(
        X_train=[images[i] for i in im_tr],
        y_train=y_tr,
        X_test=[images[i] for i in im_te],
        y_test=y_te,
        train_images=im_tr,
        test_images=im_te,
        chain=chain,
        seed=seed,
    )


def splits(n_splits: int = 10, seed: int = 0, **kwargs: Any) -> list[SequenceSplit]:
    """``n_splits`` independent splits, split ``s`` being ``load_split(seed + s, **kwargs)``."""
    n_splits = check_int("n_splits", n_splits, 1)
    return [load_split(seed + s, **kwargs) for s in range(n_splits)]
