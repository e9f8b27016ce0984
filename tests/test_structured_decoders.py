"""Sequence decoders: brute-force enumeration, numba parity, finite-difference CRF identities."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from streammkl.core import compiled as nb


def _score(unary, trans, y):
    s = sum(unary[i, y[i]] for i in range(len(y)))
    return s + sum(trans[y[i], y[i + 1]] for i in range(len(y) - 1))


def _all_paths(T, K):
    return [np.array(p) for p in itertools.product(range(K), repeat=T)]


def _brute(unary, trans, gold=None):
    T, K = unary.shape
    best, arg = -np.inf, None
    scores = []
    for y in _all_paths(T, K):
        s = _score(unary, trans, y)
        if gold is not None:
            s += float(np.sum(y != gold))
        scores.append(s)
        if s > best:
            best, arg = s, y
    return arg, best, np.array(scores)


def _cases():
    rng = np.random.default_rng(7)
    for T in range(1, 6):
        for K in range(1, 4):
            for _ in range(3):
                yield rng.normal(size=(T, K)) * 2.0, rng.normal(size=(K, K)), rng.integers(0, K, T)


@pytest.mark.parametrize("case", list(_cases()))
def test_viterbi_matches_brute_force(case):
    unary, trans, gold = case
    path, score = nb.viterbi(unary, trans)
    bpath, bscore, _ = _brute(unary, trans)
    np.testing.assert_array_equal(path, bpath)
    assert score == pytest.approx(bscore, abs=1e-12)
    lpath, lscore = nb.viterbi_hamming(unary, trans, gold)
    bpath, bscore, _ = _brute(unary, trans, gold)
    np.testing.assert_array_equal(lpath, bpath)
    assert lscore == pytest.approx(bscore, abs=1e-12)
    # the returned score is the augmented score of the returned path
    assert lscore == pytest.approx(_score(unary, trans, lpath) + np.sum(lpath != gold), abs=1e-12)


@pytest.mark.parametrize("case", list(_cases()))
def test_forward_backward_matches_brute_force(case):
    unary, trans, _ = case
    T, K = unary.shape
    log_z, node, edge = nb.forward_backward(unary, trans)
    paths = _all_paths(T, K)
    scores = np.array([_score(unary, trans, y) for y in paths])
    bz = np.log(np.sum(np.exp(scores - scores.max()))) + scores.max()
    p = np.exp(scores - bz)
    bnode = np.zeros((T, K))
    bedge = np.zeros((max(T - 1, 0), K, K))
    for w, y in zip(p, paths, strict=True):
        bnode[np.arange(T), y] += w
        for i in range(T - 1):
            bedge[i, y[i], y[i + 1]] += w
    assert log_z == pytest.approx(bz, abs=1e-10)
    np.testing.assert_allclose(node, bnode, atol=1e-12)
    np.testing.assert_allclose(edge, bedge, atol=1e-12)
    assert edge.shape == (max(T - 1, 0), K, K)


def test_ties_break_to_smallest_label():
    unary = np.zeros((4, 3))
    trans = np.zeros((3, 3))
    path, score = nb.viterbi(unary, trans)
    np.testing.assert_array_equal(path, [0, 0, 0, 0])
    assert score == 0.0
    # with every label tied, the Hamming cost pushes away from gold; ties among the rest -> min
    path, score = nb.viterbi_hamming(unary, trans, np.array([0, 1, 2, 0]))
    np.testing.assert_array_equal(path, [1, 0, 0, 1])
    assert score == 4.0


def test_forward_backward_is_stable_for_huge_scores():
    rng = np.random.default_rng(0)
    unary = rng.normal(size=(6, 3)) * 1e3
    trans = rng.normal(size=(3, 3)) * 1e3
    log_z, node, edge = nb.forward_backward(unary, trans)
    _, vscore = nb.viterbi(unary, trans)
    assert np.isfinite(log_z) and vscore <= log_z <= vscore + np.log(3**6)
    np.testing.assert_allclose(node.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(edge.sum(axis=(1, 2)), 1.0, atol=1e-12)


def test_log_z_gradient_is_marginals():
    """d logZ / d unary = node marginals, d logZ / d trans = summed edge marginals (FD check)."""
    rng = np.random.default_rng(3)
    unary = rng.normal(size=(5, 3))
    trans = rng.normal(size=(3, 3))
    _, node, edge = nb.forward_backward(unary, trans)
    h = 1e-6
    for arr, grad in ((unary, node), (trans, edge.sum(axis=0))):
        fd = np.zeros_like(arr)
        for idx in np.ndindex(arr.shape):
            arr[idx] += h
            up = nb.forward_backward(unary, trans)[0]
            arr[idx] -= 2 * h
            dn = nb.forward_backward(unary, trans)[0]
            arr[idx] += h
            fd[idx] = (up - dn) / (2 * h)
        np.testing.assert_allclose(fd, grad, atol=1e-8)


@pytest.mark.parametrize("T,K", [(1, 1), (1, 4), (7, 1), (9, 5), (30, 26)])
def test_numba_parity_with_py_func(T, K):
    rng = np.random.default_rng(T * 100 + K)
    unary = rng.normal(size=(T, K))
    trans = rng.normal(size=(K, K))
    gold = rng.integers(0, K, T)
    for fn, args in (
        (nb.viterbi, (unary, trans)),
        (nb.viterbi_hamming, (unary, trans, gold)),
        (nb.viterbi_cost, (unary, trans, gold, 0.5)),
    ):
        p1, s1 = fn(*args)
        p2, s2 = fn.py_func(*args)
        np.testing.assert_array_equal(p1, p2)
        assert s1 == pytest.approx(s2, rel=1e-12, abs=1e-12)
    z1, n1, e1 = nb.forward_backward(unary, trans)
    z2, n2, e2 = nb.forward_backward.py_func(unary, trans)
    assert z1 == pytest.approx(z2, rel=1e-12)
    np.testing.assert_allclose(n1, n2, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(e1, e2, rtol=1e-10, atol=1e-14)
    v = rng.normal(size=K) * 50
    assert nb.logsumexp_row(v) == pytest.approx(nb.logsumexp_row.py_func(v), rel=1e-13)
    assert nb.logsumexp_row(np.full(3, -np.inf)) == -np.inf
