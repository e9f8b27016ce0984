"""The Chu-Liu-Edmonds decoder against brute-force enumeration of every tree."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from streammkl.core import _numba as nb
from streammkl.structured.trees import check_heads, is_projective


def brute_force(scores: np.ndarray, single_root: bool) -> tuple[float, tuple[int, ...]]:
    """The best tree by enumerating every head assignment (n <= 6: at most 6^6 = 46656), all at
    once: an assignment is a tree when following heads n times from every word reaches 0."""
    n = scores.shape[0] - 1
    heads = np.array(list(itertools.product(range(n + 1), repeat=n)), dtype=np.int64)
    parent = np.hstack([np.zeros((heads.shape[0], 1), dtype=np.int64), heads])
    walk = np.tile(np.arange(1, n + 1), (heads.shape[0], 1))
    rows = np.arange(heads.shape[0])[:, None]
    for _ in range(n):
        walk = parent[rows, walk]
    ok = np.all(walk == 0, axis=1)
    if single_root:
        ok &= (heads == 0).sum(axis=1) == 1
    totals = scores[heads, np.arange(1, n + 1)].sum(axis=1)
    totals[~ok] = -np.inf
    best = int(np.argmax(totals))
    return float(totals[best]), tuple(heads[best].tolist())


def decode(scores: np.ndarray, single_root: bool = True) -> tuple[float, list[int]]:
    heads = np.empty(scores.shape[0], dtype=np.int64)
    total = nb.max_arborescence(scores, single_root, heads)
    assert heads[0] == -1
    return float(total), heads[1:].tolist()


@pytest.mark.parametrize("single_root", [True, False])
def test_the_decoder_finds_the_brute_force_optimum(single_root):
    rng = np.random.default_rng(0)
    non_projective = multi_root_free = 0
    for trial in range(150):
        n = int(rng.integers(1, 7))
        scores = rng.normal(size=(n + 1, n + 1))
        if trial % 3 == 0:  # root arcs favoured: the unconstrained optimum has several
            scores[0] += 3.0
        total, heads = decode(scores, single_root)
        best, arg = brute_force(scores, single_root)
        assert total == pytest.approx(best, abs=1e-9)
        assert tuple(heads) == arg
        non_projective += not is_projective(heads)
        multi_root_free += heads.count(0) > 1
    assert non_projective > 20  # the optima include many non-projective trees
    if single_root:
        assert multi_root_free == 0
    else:
        assert multi_root_free > 10  # the constraint matters on these scores


def test_exactly_one_root_arc_even_when_every_root_arc_dominates():
    rng = np.random.default_rng(1)
    for n in (2, 5, 6):
        scores = rng.normal(size=(n + 1, n + 1))
        scores[0, 1:] = 100.0 + rng.normal(size=n)
        _, heads = decode(scores, True)
        assert heads.count(0) == 1
        assert brute_force(scores, True)[1] == tuple(heads)
        assert decode(scores, False)[1] == [0] * n  # unconstrained: all on the root


def test_planted_non_projective_gold_trees_are_decoded():
    gold_trees = [
        [3, 4, 0, 3],  # 1 <- 3, 2 <- 4 cross
        [0, 5, 1, 2, 1, 4],  # 2 <- 5 crosses 3 <- 1, 4 <- 2
        [2, 0, 5, 2, 2, 3, 6],
    ]
    rng = np.random.default_rng(2)
    for gold in gold_trees:
        assert not is_projective(gold)
        n = len(gold)
        scores = rng.normal(0.0, 1.0, size=(n + 1, n + 1))
        for m, h in enumerate(gold, start=1):
            scores[h, m] += 4.0
        _, heads = decode(scores)
        assert heads == gold
        if n <= 6:
            assert brute_force(scores, True)[1] == tuple(gold)


def test_longer_sentences_give_valid_trees_at_least_as_good_as_greedy_repair():
    rng = np.random.default_rng(3)
    for n in (10, 25, 60):
        scores = rng.normal(size=(n + 1, n + 1))
        total, heads = decode(scores)
        assert check_heads(heads, n)  # a tree with one root arc
        assert total == pytest.approx(sum(scores[h, m] for m, h in enumerate(heads, 1)))
        # no single head change that keeps a one-root tree scores higher (a local optimum check)
        for m in range(1, n + 1):
            for h in range(n + 1):
                trial = list(heads)
                trial[m - 1] = h
                try:
                    check_heads(trial, n)
                except ValueError:
                    continue
                assert scores[h, m] <= scores[heads[m - 1], m] + 1e-12


def test_single_word_and_empty_sentences():
    assert decode(np.zeros((2, 2)))[1] == [0]
    heads = np.empty(1, dtype=np.int64)
    assert nb.max_arborescence(np.zeros((1, 1)), True, heads) == 0.0
    assert heads[0] == -1


def test_compiled_decoder_matches_python():
    rng = np.random.default_rng(4)
    for n in (1, 4, 9):
        scores = rng.normal(size=(n + 1, n + 1))
        a, b = np.empty(n + 1, dtype=np.int64), np.empty(n + 1, dtype=np.int64)
        assert nb.max_arborescence(scores, True, a) == pytest.approx(
            nb.max_arborescence.py_func(scores, True, b)
        )
        np.testing.assert_array_equal(a, b)
        best_c, best_p = np.zeros(n + 1, np.int64), np.zeros(n + 1, np.int64)
        nb.greedy_heads(scores, n + 1, best_c)
        nb.greedy_heads.py_func(scores, n + 1, best_p)
        np.testing.assert_array_equal(best_c, best_p)
        mark_c, mark_p = np.zeros(n + 1, np.int64), np.zeros(n + 1, np.int64)
        assert nb.find_cycle(best_c, n + 1, mark_c) == nb.find_cycle.py_func(best_p, n + 1, mark_p)
        np.testing.assert_array_equal(mark_c, mark_p)
