"""``simulators.zipf_documents``: the streams the generators it replaced gave (the same
documents and labels for the same seed), its lengths and its law."""

from __future__ import annotations

import numpy as np
import pytest

from simulators.zipf_documents import zipf_documents


def _reference(n: int, vocabulary: int, low: int, high: int, noise: bool, seed: int) -> list:
    """The generator ``benchmarks/river_speed.py`` had (``noise``), as the tests had it (not)."""
    rng = np.random.default_rng(seed)
    p = np.arange(1, vocabulary + 1) ** -1.1
    p /= p.sum()
    weight = rng.normal(size=vocabulary)
    out = []
    for _ in range(n):
        words = rng.choice(vocabulary, size=int(rng.integers(low, high + 1)), p=p)
        score = weight[words].sum() + rng.normal() if noise else weight[words].sum()
        out.append((" ".join(f"w{w}" for w in words), bool(score > 0)))
    return out


@pytest.mark.parametrize(
    ("vocabulary", "low", "high", "noise", "seed"),
    [(800, 5, 14, False, 3), (1200, 5, 19, False, 5), (5000, 10, 30, True, 7), (30, 1, 1, True, 0)],
)
def test_the_same_documents_as_the_generators_it_replaced(vocabulary, low, high, noise, seed):
    got = zipf_documents(400, vocabulary, (low, high), noise=1.0 if noise else 0.0, seed=seed)
    assert got == _reference(400, vocabulary, low, high, noise, seed)


def test_lengths_words_labels_and_prefixes():
    docs = zipf_documents(2000, vocabulary=100, words=(3, 6), seed=11)
    lengths = [len(text.split()) for text, _ in docs]
    assert min(lengths) == 3 and max(lengths) == 6
    assert {w for text, _ in docs for w in text.split()} <= {f"w{k}" for k in range(100)}
    assert all(type(y) is bool for _, y in docs) and 0 < sum(y for _, y in docs) < len(docs)
    assert zipf_documents(50, vocabulary=100, words=(3, 6), seed=11) == docs[:50]
    assert zipf_documents(50, vocabulary=100, words=(3, 6), seed=12) != docs[:50]


def test_word_frequencies_follow_the_zipf_law():
    docs = zipf_documents(3000, vocabulary=200, words=(10, 10), exponent=1.5, seed=2)
    counts = np.zeros(200)
    for text, _ in docs:
        for w in text.split():
            counts[int(w[1:])] += 1
    law = np.arange(1, 201) ** -1.5
    law /= law.sum()
    np.testing.assert_allclose(counts[:5] / counts.sum(), law[:5], rtol=0.05)


@pytest.mark.parametrize("kw", [{"n": -1}, {"vocabulary": 0}, {"words": (0, 3)}, {"words": (4, 3)}])
def test_bad_parameters_are_refused(kw):
    with pytest.raises(ValueError):
        zipf_documents(**{"n": 5, **kw})
