"""Kernelized support-set evaluation per query: B1-spline with the projection bound vs without.

The compiled ``support_expansion`` (``streammkl/core/_numba/scores.py``) scores one input against
every stored support pair with one inner product per pair and view. ``b1_pruned_expansion`` (used by
``SequenceLabeler`` for B1-only views, see ``streammkl/structured/pruning.py``) first compares
r projected coordinates (top principal directions of the support inputs) and skips the pair when
the projected distance already exceeds h; the other pairs are evaluated exactly as before.

Table 1, per query. Support set: the training characters of one digit-strings split; queries: test
characters; every coefficient nonzero, K = 10 outputs. Rows: B1 on the plain path, B1 pruned with
r = 8 and 16 projected coordinates, RBF and Q+G (the L+Q+G bank's kernelized blocks) on the plain
path. Time per query (perf_counter, best of ``--repeats``), ns per support pair, the fraction of
pairs the bound skips.

Table 2, whole fits: ``SequenceLabeler`` MKL L+B1 (with and without the bound) and MKL L+Q+G at
the same C and eta_0, 20 epochs on the same split (CPU seconds, best of ``--repeats``), so the
support sets are comparable (Table 1 of ``sequence_table1.py`` picks C per row by CV).
Run: ``python benchmarks/b1_support.py``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _table import add_out, documented_run, machine, markdown, publish

from simulators.digit_strings import load_split
from streammkl.core import _numba as nb
from streammkl.core import kernels, regularizers, schedules
from streammkl.structured import SequenceLabeler, pruning

K_OUT = 10


def support_h(S: np.ndarray, zeros: float) -> float:
    """h with a fraction ``zeros`` of the support pairs at distance >= h (as in Table 1)."""
    sq = np.sum(S * S, axis=1)
    dist = np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2 * S @ S.T, 0.0))
    return float(np.quantile(dist[np.triu_indices(len(S), 1)], 1.0 - zeros))


def config(kinds: list[int], params: list[list[float]], S: np.ndarray) -> tuple:
    """Arguments of ``support_expansion`` for blocks ``kinds`` on one full view over ``S``."""
    n, d = S.shape
    M = len(kinds)
    rng = np.random.default_rng(0)
    return (
        np.arange(M, dtype=np.int64), np.zeros(M, dtype=np.int64), np.ones((1, d)),
        np.ones(1, dtype=np.bool_), np.array(kinds, dtype=np.int64), np.array(params),
        S, np.sum(S * S, axis=1)[:, None].copy(), rng.normal(size=(n, K_OUT)),
        rng.uniform(0.5, 1.5, size=(M, n)), n,
    )  # fmt: skip


def time_plain(args: tuple, Z: np.ndarray, repeats: int) -> tuple[float, np.ndarray]:
    """Best-of-``repeats`` seconds per query of ``support_expansion``, and its outputs."""
    out = np.zeros((Z.shape[0], len(args[0]), K_OUT))
    zsq = np.sum(Z * Z, axis=1)[:, None].copy()
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        for i in range(Z.shape[0]):
            nb.support_expansion(Z[i], zsq[i], *args, out[i])
        best = min(best, time.perf_counter() - t0)
    return best / Z.shape[0], out


def basis(S: np.ndarray, r: int) -> np.ndarray:
    """(1, r, d): the top r principal directions of the support inputs (as B1Pruning fits)."""
    return np.linalg.svd(S - S.mean(axis=0), full_matrices=False)[2][None, :r].copy()


def time_pruned(args: tuple, U: np.ndarray, Z: np.ndarray, repeats: int) -> tuple:
    """``time_plain`` for ``b1_pruned_expansion`` with the basis ``U``. The query's projection
    (r x d multiply-adds, inside ``sequence_scores`` in the learner) is computed beforehand."""
    _, _, masks, full, _, kp, S, ssq, sv, coef, n = args
    sproj = (S @ U[0].T)[None].copy()
    out = np.zeros((Z.shape[0], 1, K_OUT))
    zsq = np.sum(Z * Z, axis=1)
    zp = Z @ U[0].T
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        for i in range(Z.shape[0]):
            nb.b1_pruned_expansion(
                0, 0, Z[i], zsq[i], zp[i], masks, full, kp[0, 0], S, ssq, sproj, sv, coef, n,
                out[i],
            )  # fmt: skip
        best = min(best, time.perf_counter() - t0)
    return best / Z.shape[0], out


def skipped(Z: np.ndarray, S: np.ndarray, U: np.ndarray, h: float) -> float:
    """Fraction of pairs whose projected distance exceeds h (skipped by the bound)."""
    d2 = np.sum(((Z @ U[0].T)[:, None] - (S @ U[0].T)[None]) ** 2, axis=2)
    return float(np.mean(d2 > h * h))


def fit_once(kern: tuple, split, epochs: int) -> tuple[float, int, str]:
    """CPU seconds of one MKL fit (C = 10, eta_0 = 1), its support size and state digest."""
    n = len(split.X_train)
    model = SequenceLabeler(
        kernels=kern, regularizer=regularizers.SquaredGroupLasso(1.0 / (10.0 * n)),
        schedule=schedules.InvSqrt(1.0),
    )  # fmt: skip
    t0 = time.process_time()
    for e in range(epochs):
        for i in np.random.default_rng([0, e]).permutation(n):
            model.learn_one(split.X_train[i], split.y_train[i])
    return time.process_time() - t0, model.n_support, model.digest()


def fits(n_train: int, h: float, repeats: int) -> str:
    """Table 2: whole fits of MKL L+B1 (bound on / off) and MKL L+Q+G, best of ``repeats``
    rounds (the fits interleaved, so a noisy neighbour slows every row alike)."""
    split = load_split(0, n_train=n_train, n_test=10)
    lin = kernels.Linear(normalize=True)
    lb1 = (lin, kernels.B1Spline(h=h))
    lqg = (lin, kernels.Polynomial(degree=2, coef0=1.0, normalize=True), kernels.RBF(gamma=0.1))
    cases = {
        "Linear (L) alone (the per-sequence cost every row pays)": ((lin,), None),
        "MKL L+B1, projection bound": (lb1, None),
        "MKL L+B1, plain path": (lb1, 10**9),
        "MKL L+Q+G": (lqg, None),
    }
    best: dict[str, tuple] = {}
    keep = pruning.MIN_SUPPORT
    for r in range(repeats + 1):  # round 0 compiles
        for label, (kern, min_support) in cases.items():
            pruning.MIN_SUPPORT = keep if min_support is None else min_support
            out = fit_once(kern, split, 20)
            if r and (label not in best or out[0] < best[label][0]):
                best[label] = out
    pruning.MIN_SUPPORT = keep
    lin_s = best[next(iter(cases))][0]
    full_s = best["MKL L+Q+G"][0]
    rows = []
    for label, (sec, n_sup, _) in best.items():
        beyond = (sec - lin_s) / (full_s - lin_s)
        rows.append([label, sec, n_sup, f"{sec / full_s:.2f}", f"{beyond:.2f}"])
    same = best["MKL L+B1, projection bound"][2] == best["MKL L+B1, plain path"][2]
    return (
        f"Whole fits: digit-strings split 0, n_train={n_train} ({sum(map(len, split.y_train))} "
        f"characters), 20 epochs, C=10, η0=1, B1 h={h:.3f}; CPU seconds, best of {repeats} "
        f"interleaved rounds. L+B1 states with and without the bound: "
        f"{'identical' if same else 'DIFFERENT'} (sha256 digest).\n\n"
        + markdown(
            ["fit", "CPU s", "support pairs", "time / L+Q+G", "(time − L) / (L+Q+G − L)"], rows
        )
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-train", type=int, default=100, help="training sequences (support set)")
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--zeros", type=float, default=0.95, help="fraction of B1 zeros (sets h)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--fit-n-train", type=int, default=60, help="training sequences, whole fits")
    p.add_argument("--fit-repeats", type=int, default=15, help="rounds of whole fits")
    add_out(p)
    a = p.parse_args()
    a.documented = documented_run(p, a)
    split = load_split(0, n_train=a.n_train, n_test=100)
    S = np.ascontiguousarray(np.vstack(split.X_train))
    Z = np.ascontiguousarray(np.vstack(split.X_test)[: a.queries])
    h = support_h(S, a.zeros)
    b1, rbf, poly = (nb.K_B1, [h, 0.0, 0.0]), (nb.K_RBF, [0.1, 0.0, 0.0]), (nb.K_POLY, [2, 1, 1])
    plain = {
        "B1, plain (one inner product per pair)": [b1],
        "RBF, plain": [rbf],
        "Q + G, plain (one inner product, two kernels)": [poly, rbf],
    }
    rows, ref = [], None
    for label, blocks in plain.items():
        args = config([k for k, _ in blocks], [q for _, q in blocks], S)
        time_plain(args, Z[:2], 1)  # compile
        sec, out = time_plain(args, Z, a.repeats)
        ref = out if ref is None else ref
        rows.append([label, sec * 1e6, sec * 1e9 / len(S), "-", 0.0])
    args = config([nb.K_B1], [b1[1]], S)
    for r in (8, 16):
        U = basis(S, r)
        time_pruned(args, U, Z[:2], 1)
        sec, out = time_pruned(args, U, Z, a.repeats)
        same = "yes" if np.array_equal(out, ref) else "NO"
        rows.insert(1 + (r == 16), [f"B1, pruned, r={r}", sec * 1e6, sec * 1e9 / len(S), same,
                                    100 * skipped(Z, S, U, h)])  # fmt: skip
    base = rows[0][1]
    for row in rows:
        row.append(f"{base / row[1]:.2f}x")
        print(" | ".join(str(v) for v in row), flush=True)
    headers = ["case", "µs per query", "ns per support pair", "B1 scores identical to plain",
               "% pairs skipped", "speed-up vs B1 plain"]  # fmt: skip
    body = (
        f"Measured on {machine()}. Support set: the {len(S)} training characters of digit-strings "
        f"split 0 (n_train={a.n_train}); {len(Z)} test characters as queries; d=64, K={K_OUT}; "
        f"B1 h={h:.3f} ({100 * a.zeros:.0f}% zeros among support pairs).\n\n"
        + markdown(headers, rows)
    )
    body += "\n\n" + fits(a.fit_n_train, h, a.fit_repeats)
    publish("b1_support", "B1-spline support-set evaluation (projection bound)", body,
            a.documented, a.out)  # fmt: skip


if __name__ == "__main__":
    main()
