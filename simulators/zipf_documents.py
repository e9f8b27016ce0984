"""Short text documents over a Zipf vocabulary, for bag-of-words learners (river's
``feature_extraction.BagOfWords`` reads each document into a dict of word counts).

Word ``w{k}`` (``k`` from 0) has probability proportional to ``(k + 1) ** -exponent``, so a
few words are frequent and rare words keep arriving as the stream goes on: a model's inputs
grow throughout. A document's label is the sign of the sum of a random weight per word
(plus Gaussian noise, if asked). Everything is a function of the seed, and a shorter stream
is a prefix of a longer one with the same parameters.

>>> zipf_documents(3, vocabulary=50, words=(2, 4), seed=1)
[('w0 w16 w0 w0', True), ('w22 w23 w25 w3', False), ('w0 w7 w11', True)]
"""

from __future__ import annotations

import numpy as np

__all__ = ["zipf_documents"]


def zipf_documents(
    n: int,
    vocabulary: int = 5_000,
    words: tuple[int, int] = (10, 30),
    exponent: float = 1.1,
    noise: float = 0.0,
    seed: int = 0,
) -> list[tuple[str, bool]]:
    """``n`` documents with their labels: ``(text, label)``, the text its words separated by
    spaces (``"w3 w0 w17"``).

    Parameters
    ----------
    n
        Documents.
    vocabulary
        Distinct words (``w0`` .. ``w{vocabulary - 1}``, in decreasing probability).
    words
        The fewest and the most words of a document (both included; uniform in between).
    exponent
        The Zipf law's exponent.
    noise
        The standard deviation of the Gaussian noise added to a document's score before its
        sign is taken (0: none, and none drawn).

    The random draws, in order (what keeps a stream the same for a seed): the weights of the
    words (``vocabulary`` normal draws), then for each document its length, its words and
    (with ``noise``) its noise.
    """
    if n < 0 or vocabulary < 1 or not 1 <= words[0] <= words[1]:
        raise ValueError("n must be >= 0, vocabulary >= 1 and 1 <= words[0] <= words[1]")
    rng = np.random.default_rng(seed)
    p = np.arange(1, vocabulary + 1) ** -exponent
    p /= p.sum()
    weight = rng.normal(size=vocabulary)
    out = []
    for _ in range(n):
        drawn = rng.choice(vocabulary, size=int(rng.integers(words[0], words[1] + 1)), p=p)
        score = weight[drawn].sum()
        if noise:
            score += noise * rng.normal()
        out.append((" ".join(f"w{w}" for w in drawn), bool(score > 0)))
    return out
