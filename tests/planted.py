"""Planted synthetic treebanks for the parser's fast tests.

A hidden first-order model scores every arc from the POS of head and modifier, the direction and
the distance (a random table: a few strong head-modifier-direction rules, a penalty on length,
some noise); each sentence's gold tree is the maximum spanning arborescence of
those scores, so it is exactly what the template ``h.upos+m.upos+dir+dist`` can express, and
non-projective trees occur. Words are drawn per POS; ``misc`` carries a ``Noise`` field with no
signal (a template on it is useless, which sparse MKL should find).
"""

from __future__ import annotations

import numpy as np

from streammkl.core import _numba as cnb

POS = ("NOUN", "VERB", "ADJ", "DET", "ADP", "ADV")


def planted_treebank(n_sentences: int, seed: int = 0, min_len: int = 3, max_len: int = 9):
    """``[(tokens, heads), ...]``: tokens are CoNLL-U-like dicts (form, upos, misc)."""
    planted = np.random.default_rng(12345)
    rules = planted.random((len(POS) + 1, len(POS), 2, 1)) < 0.3  # head POS, mod POS, direction
    noise = planted.normal(0.0, 0.2, size=(len(POS) + 1, len(POS), 2, 8))
    table = 6.0 * rules - 1.5 * np.arange(8) + noise  # (head POS, mod POS, h < m, distance)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_sentences):
        n = int(rng.integers(min_len, max_len + 1))
        pos = rng.integers(0, len(POS), size=n)
        tokens = [
            {
                "id": i + 1,
                "form": f"{POS[p].lower()}{rng.integers(0, 5)}",
                "upos": POS[p],
                "misc": {"Noise": str(rng.integers(0, 50))},
            }
            for i, p in enumerate(pos)
        ]
        scores = np.zeros((n + 1, n + 1))
        for h in range(n + 1):
            for m in range(1, n + 1):
                if h == m:
                    continue
                ph = len(POS) if h == 0 else pos[h - 1]
                d = int(cnb.distance_bucket(abs(h - m)))
                scores[h, m] = table[ph, pos[m - 1], int(h < m), d]
        heads = np.empty(n + 1, dtype=np.int64)
        cnb.max_arborescence(scores, True, heads)
        out.append((tokens, heads[1:].tolist()))
    return out


def non_projective_count(bank) -> int:
    from streammkl.structured.trees import is_projective

    return sum(not is_projective(h) for _, h in bank)
