"""``lane_dot``: the fixed-order dot product every explicit score is made of.

The compiled vector path (C-contiguous arrays) and the compiled scalar path (a strided view)
must be the same sum bit for bit, at every length around the 16-wide groups and at every
offset; both within a few ulp of the exactly rounded sum (``math.fsum``) and of the Python
original (which has no fused multiply-add)."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest
from numba import njit

from streammkl.core import _numba as nb
from streammkl.core._numba.lanes import OUT_OF_BOUNDS, lane_dot


@njit
def _compiled(a, ao, b, bo, n):
    return lane_dot(a, ao, b, bo, n)


def _written_order(a, ao, b, bo, n):
    """The documented order, written out independently: 16 sums over j mod 16, the tail into
    sum 0, the pairwise tree."""
    s = [0.0] * 16
    whole = 16 * (n // 16)
    for j in range(whole):
        s[j % 16] += a[ao + j] * b[bo + j]
    for j in range(whole, n):
        s[0] += a[ao + j] * b[bo + j]
    while len(s) > 1:
        s = [s[i] + s[i + 1] for i in range(0, len(s), 2)]
    return s[0]


@pytest.mark.parametrize("n", [0, 1, 5, 15, 16, 17, 31, 32, 33, 47, 64, 100, 858])
def test_vector_and_strided_paths_are_the_same_sum(n):
    rng = np.random.default_rng(n)
    a = rng.normal(size=n + 7)
    b = rng.normal(size=n + 9)
    vec = _compiled(a, 3, b, 5, n)
    strided_a = np.repeat(a, 2)[::2]  # the same values, not C-contiguous: the scalar loop
    strided_b = np.repeat(b, 2)[::2]
    assert not strided_a.flags.c_contiguous
    assert _compiled(strided_a, 3, strided_b, 5, n) == vec  # bit for bit
    exact = math.fsum(a[3 + j] * b[5 + j] for j in range(n))  # products exact below 2^-53
    scale = sum(abs(a[3 + j] * b[5 + j]) for j in range(n))
    assert abs(vec - exact) <= 8 * np.finfo(float).eps * scale
    # the Python original is the documented order (without fused multiply-adds)
    assert lane_dot(a, 3, b, 5, n) == _written_order(a, 3, b, 5, n)
    assert abs(vec - lane_dot(a, 3, b, 5, n)) <= 4 * np.finfo(float).eps * scale


def test_a_matrix_row_is_addressed_by_its_flat_offset():
    rng = np.random.default_rng(1)
    A, v = rng.normal(size=(5, 70)), rng.normal(size=70)
    for r in range(5):
        assert _compiled(A, r * 70 + 3, v, 3, 60) == _compiled(np.ascontiguousarray(A[r]), 3, v,
                                                               3, 60)  # fmt: skip


def test_every_sibling_is_the_same_sum_past_one_group():
    """The row, pair and fused-norm forms agree with ``dot4`` bit for bit at lengths that run
    the vector loop (the parity test's rows are shorter than one group)."""
    rng = np.random.default_rng(2)
    A, v = rng.normal(size=(4, 858)), rng.normal(size=858)
    lo, hi = 5, 858
    one = [nb.dot4(A[r], v, lo, hi) for r in range(4)]
    assert nb.dot4_row(A, 2, v, lo, hi) == one[2]
    assert nb.dot4_rows(A, 1, 3, v, lo, hi) == (one[1], one[3])
    assert nb.dot4_row_sq(A, 0, v, lo, hi) == (one[0], nb.dot4(v, v, lo, hi))
    assert nb.dot4_rows_sq(A, 0, 2, v, lo, hi) == (one[0], one[2], nb.dot4(v, v, lo, hi))
    out = np.zeros(4)
    nb.rows_dot4(A, v, lo, hi, out)
    assert out.tolist() == one
    z = rng.normal(size=858)
    assert nb.dot4_pair(z, A, 1, 858) == (nb.dot4(z, A[1], 0, 858), nb.dot4(z, A[2], 0, 858))
    for r in range(4):
        exact = math.fsum(A[r, j] * v[j] for j in range(lo, hi))
        assert abs(one[r] - exact) <= 1e-13 * np.abs(A[r, lo:hi] * v[lo:hi]).sum()


_BOUNDS_SCRIPT = """
import numpy as np
from numba import njit
from streammkl.core import _numba as nb
from streammkl.core._numba.lanes import lane_dot

@njit
def direct(a, ao, b, bo, n):
    return lane_dot(a, ao, b, bo, n)

a, b = np.ones(40), np.ones(40)
print("fits", direct(a, 0, b, 8, 32), nb.dot4(a, b, 0, 40))
for case, call in [
    ("past_b", lambda: direct(a, 0, b, 9, 32)),       # b[9:41]: one past b's end
    ("past_a", lambda: direct(a, 24, b, 0, 17)),      # a[24:41], the tail
    ("negative", lambda: direct(a, -1, b, 0, 4)),
    ("short_row", lambda: nb.dot4_row(np.ones((2, 20)), 1, np.ones(20), 0, 21)),
]:
    try:
        call()
        print(case, "no error")
    except IndexError as err:
        print(case, "IndexError", err)
"""


def test_an_operand_too_short_raises_under_numba_boundscheck(tmp_path):
    """The vector path reads raw pointers, so numba's own checks miss it: under
    ``NUMBA_BOUNDSCHECK=1`` (a fresh process and cache, as the bounds-checked runs) the explicit
    extent check raises ``IndexError`` for an offset plus length past either operand's end, a
    negative offset, and a row read past a matrix's end through a real caller."""
    env = dict(os.environ, NUMBA_BOUNDSCHECK="1", NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    run = subprocess.run(
        [sys.executable, "-c", _BOUNDS_SCRIPT], env=env, capture_output=True, text=True,
        timeout=600, check=True,
    )  # fmt: skip
    lines = dict(line.split(" ", 1) for line in run.stdout.splitlines())
    assert lines["fits"] == "32.0 40.0"
    for case in ("past_b", "past_a", "negative", "short_row"):
        assert lines[case] == f"IndexError {OUT_OF_BOUNDS}", run.stdout + run.stderr
