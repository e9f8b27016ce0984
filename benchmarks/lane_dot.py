"""The explicit round's dot products: ``lane_dot`` (16 partial sums read four doubles at a time,
``streammkl/core/_numba/lanes.py``) against the four scalar partial sums it replaced (written
out below as they were), on the default bank's rows: 2 and 4 rows of 858 (Bananas' feature map)
and of 1,130 (ImageSegments'), the rows read against one feature vector as ``rows_dot4`` does.

Each row of the table: median ns per call over ``--reps`` interleaved pairs (the two kernels
alternate in one process), process CPU time, each timing a compiled loop of ``--n`` calls.
Also the largest error of each against ``math.fsum`` of the exact products, in units of
``eps * sum |a_j b_j|`` (both are well inside one unit).

Run: ``python benchmarks/lane_dot.py [--n 20000] [--reps 9]``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import add_out, documented_run, machine, markdown, publish

from streammkl.core._jit import JIT, JIT_INLINE
from streammkl.core._numba import rows_dot4


def _four_sums_row(A, r, v, lo, hi):
    """The former ``dot4_row``: four scalar partial sums, the tail into the first."""
    a0 = a1 = a2 = a3 = 0.0
    n = hi - lo
    for q in range(n // 4):
        j = lo + 4 * q
        a0 += A[r, j] * v[j]
        a1 += A[r, j + 1] * v[j + 1]
        a2 += A[r, j + 2] * v[j + 2]
        a3 += A[r, j + 3] * v[j + 3]
    for j in range(lo + n - n % 4, hi):
        a0 += A[r, j] * v[j]
    return (a0 + a1) + (a2 + a3)


four_sums_row = njit(**JIT_INLINE)(_four_sums_row)


@njit(**JIT)
def _loop_four(A, v, out, n):
    s = 0.0
    for _ in range(n):
        for r in range(A.shape[0]):
            out[r] = four_sums_row(A, r, v, 0, A.shape[1])
        s += out[0]
        v[0] = s * 1e-300  # a dependence between calls: the loop cannot be hoisted
    return s


@njit(**JIT)
def _loop_lanes(A, v, out, n):
    s = 0.0
    for _ in range(n):
        rows_dot4(A, v, 0, A.shape[1], out)
        s += out[0]
        v[0] = s * 1e-300
    return s


def _ulps(f, A, v) -> float:
    out = np.zeros(A.shape[0])
    v = v.copy()
    f(A, v.copy(), out, 1)  # the loop changes v[0] after its first call
    worst = 0.0
    for r in range(A.shape[0]):
        exact = math.fsum(A[r] * v)
        worst = max(worst, abs(out[r] - exact) / (np.finfo(float).eps * np.abs(A[r] * v).sum()))
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000, help="calls per timed loop")
    parser.add_argument("--reps", type=int, default=9, help="interleaved pairs per row")
    add_out(parser)
    args = parser.parse_args()
    header = machine()
    rng = np.random.default_rng(0)
    rows = []
    for k, width in ((2, 858), (4, 858), (2, 1130), (4, 1130)):
        A, v = rng.normal(size=(k, width)), rng.normal(size=width)
        out = np.zeros(k)
        err4, errl = _ulps(_loop_four, A, v), _ulps(_loop_lanes, A, v)
        four, lanes = [], []
        for _ in range(args.reps):
            for f, acc in ((_loop_four, four), (_loop_lanes, lanes)):
                t0 = time.process_time_ns()
                f(A, v, out, args.n)
                acc.append((time.process_time_ns() - t0) / args.n)
        m4, ml = float(np.median(four)), float(np.median(lanes))
        rows.append([f"{k} x {width}", f"{m4:,.0f}", f"{ml:,.0f}", f"{ml / m4:.2f}",
                     f"{err4:.2f}", f"{errl:.2f}"])  # fmt: skip
        print(rows[-1], flush=True)
    load_end = f"{os.getloadavg()[0]:.2f}"
    headers = ["rows x width", "four scalar sums ns", "lane_dot ns", "ratio",
               "error, four sums (eps units)", "error, lane_dot (eps units)"]  # fmt: skip
    body = (
        f"Measured on {header} (load average {load_end} at the end); median ns per call of "
        f"{args.reps} interleaved pairs of {args.n:,}-call compiled loops, process CPU time "
        "(`benchmarks/lane_dot.py`).\n\n" + markdown(headers, rows) + "\n"
    )
    publish("lane_dot", "The round's dot products: lane_dot against four scalar sums", body,
            full=documented_run(parser, args), out=args.out)  # fmt: skip


if __name__ == "__main__":
    main()
