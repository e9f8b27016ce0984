"""Dependency trees as head lists: validation, projectivity, and the words of a CoNLL-U sentence.

A tree over n words is ``heads`` (length n), ``heads[i]`` the head of word ``i + 1`` in ``0..n``
(0 = the root). A sentence is a list of token dicts keyed by CoNLL-U column names, such as a
``conllu.TokenList``; its multiword-token ranges (id ``(1, "-", 2)``) and empty nodes (id
``(1, ".", 1)``) are not words of the basic tree and are skipped.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["check_heads", "is_projective", "words_of"]


def words_of(sentence: Any) -> list[Mapping[str, Any]]:
    """The words of a sentence (token dicts with integer or no ids), checked.

    ValueError/TypeError (naming the token) for an empty sentence, a token that is not a dict, or
    integer ids that are not 1..n in order.
    """
    if isinstance(sentence, Mapping | str | bytes) or not isinstance(sentence, Sequence):
        raise TypeError(
            f"a sentence is a list of token dicts (e.g. a conllu.TokenList), got "
            f"{type(sentence).__name__}"
        )
    words: list[Mapping[str, Any]] = []
    for i, token in enumerate(sentence):
        if not isinstance(token, Mapping):
            raise TypeError(f"token {i} is a {type(token).__name__}, not a dict of CoNLL-U columns")
        tid = token.get("id")
        if isinstance(tid, tuple | list):  # multiword range or empty node: not a word
            continue
        if tid is not None:
            if isinstance(tid, bool) or not isinstance(tid, numbers.Integral):
                raise ValueError(f"token {i}: id {tid!r} is not an integer")
            if int(tid) != len(words) + 1:
                raise ValueError(f"token {i}: id {tid} where {len(words) + 1} was expected")
        words.append(token)
    if not words:
        raise ValueError("the sentence has no words")
    return words


def check_heads(heads: Any, n: int, single_root: bool = True) -> list[int]:
    """``heads`` as a list of ints if it is a tree over n words; ValueError with the reason if not.

    Reasons: not a list of integers, wrong length, a head outside ``0..n`` (unknown index), a
    word that is its own head, a cycle, and (``single_root``) not exactly one word on the root.
    """
    if isinstance(heads, str | bytes | Mapping) or not isinstance(heads, Sequence):
        raise TypeError(f"heads must be a list of integers, got {type(heads).__name__}")
    if len(heads) != n:
        raise ValueError(f"wrong length: {len(heads)} heads for {n} words")
    out = []
    for i, h in enumerate(heads):
        if isinstance(h, bool) or not isinstance(h, numbers.Integral):
            raise ValueError(f"head of word {i + 1} is {h!r}, not an integer")
        if not 0 <= int(h) <= n:
            raise ValueError(f"unknown head index {h} for word {i + 1} (words are 1..{n}, root 0)")
        if int(h) == i + 1:
            raise ValueError(f"word {i + 1} is its own head")
        out.append(int(h))
    state = [0] * (n + 1)  # 0 unvisited, 1 on the current path, 2 reaches the root
    state[0] = 2
    for start in range(1, n + 1):
        path = []
        v = start
        while state[v] == 0:
            state[v] = 1
            path.append(v)
            v = out[v - 1]
        if state[v] == 1:
            cycle = path[path.index(v) :]
            raise ValueError(f"cycle through words {' -> '.join(map(str, [*cycle, v]))}")
        for u in path:
            state[u] = 2
    roots = [i + 1 for i, h in enumerate(out) if h == 0]
    if single_root and len(roots) != 1:
        raise ValueError(f"{len(roots)} words attach to the root ({roots}); a tree has exactly one")
    return out


def is_projective(heads: Sequence[int]) -> bool:
    """True if no two arcs cross (the root arc included)."""
    arcs = [(min(h, i + 1), max(h, i + 1)) for i, h in enumerate(heads)]
    for a, b in arcs:
        for c, d in arcs:
            if a < c < b < d:
                return False
    return True
