"""Where a kernelized round under the ``merge`` budget policy spends its time.

The bank of ``core_update.py``'s row (b) (linear, two RBF bandwidths, quadratic; hinge loss;
budget 512; d = 20), warmed to the budget. At each of ``--states`` states along the stream
(``--gap`` rounds apart) every part of a merge round is timed alone on that state, in a compiled
loop of ``--reps`` calls (process CPU time, the best of three loops):

- the score pass (``block_scores``: the new input's inner products and kernel row against the
  support set, the expansion), every round;
- the budget step, in the rounds that insert a pair once the support set is full: the pair to
  merge (``smallest_pair``), its partner (``merge_partner``: one pass over the support set), the
  merge point (``merge_plan`` less the partner search: the golden-section search) and the merge
  with its exact block-norm update (``merge_pairs``, on copies of the state; the copies' cost is
  subtracted).

Per round = the score pass + (budget steps per round) x the budget step's parts; "the rest" is
the measured round (``learn_many``, CPU time) less their sum: the loss, the steps, the insertion
and its norm update, the score correction, the prox steps and the calls.

Run: ``python benchmarks/merge_profile.py [--states 20]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import add_out, documented_run, machine, markdown, publish
from core_update import _data, _kernelized

from streammkl.core import _numba as nb


@njit
def _scores(reps, X, p, n):
    for r in range(reps):
        nb.block_scores(X[r % X.shape[0]], p.phi, p.w, p.scale, p.ex_blocks, p.ex_off,
                        p.im_blocks, p.view_of, p.masks, p.view_full, p.kinds, p.kp, p.sx, p.ssq,
                        p.sv, p.coef, n, p.xsq, p.dots, p.scores)  # fmt: skip


@njit
def _smallest(reps, p, n):
    acc = 0
    for _ in range(reps):
        acc += nb.smallest_pair(n, p.im_blocks, p.sv, p.coef, p.kself, p.scale)[0]
    return acc


@njit
def _partner(reps, p, n, i, drow):
    acc = 0
    for _ in range(reps):
        acc += nb.merge_partner(i, n, p.im_blocks, p.view_of, p.masks, p.view_full, p.kinds,
                                p.kp, p.sx, p.ssq, p.sv, p.coef, p.kself, p.scale,
                                drow)[0]  # fmt: skip
    return acc


@njit
def _plan(reps, p, n, i, removal, drow):
    acc = 0
    for _ in range(reps):
        acc += nb.merge_plan(i, removal, n, p.im_blocks, p.view_of, p.masks, p.view_full,
                             p.kinds, p.kp, p.sx, p.ssq, p.sv, p.coef, p.kself, p.scale,
                             drow)[0]  # fmt: skip
    return acc


@njit
def _pairs(reps, p, n, i, j, h, alpha, beta, drow, merge):
    M, K, d, V = p.coef.shape[0], p.sv.shape[1], p.sx.shape[1], p.masks.shape[0]
    acc = 0.0
    for _ in range(reps):
        sx, ssq, sv, coef = p.sx.copy(), p.ssq.copy(), p.sv.copy(), p.coef.copy()
        kself, norms = p.kself.copy(), p.norms.copy()
        tx, tsq, tc, tv = np.zeros((3, d)), np.zeros((3, V)), np.zeros((3, M)), np.zeros((3, K))
        if merge:
            nb.merge_pairs(i, j, h, alpha, beta, n, p.im_blocks, p.view_of, p.masks, p.view_full,
                           p.kinds, p.kp, sx, ssq, sv, coef, kself, p.scale, norms, tx, tsq, tc,
                           tv, drow)  # fmt: skip
        acc += norms[0]
    return acc


def _best_us(run, reps: int) -> float:
    run(2)
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time_ns()
        run(reps)
        best = min(best, (time.process_time_ns() - t0) / reps / 1000)
    return best


def budget_step_parts(model: Any, reps: int) -> dict[str, float]:
    """µs per call of the budget step's parts on ``model``'s support set as it is (compiled
    loops, the best of three): the pair to merge (``smallest``), its partner (``partner``), the
    merge point (``plan``: the plan less its partner search) and the merge with its norm update
    (``pairs``: absent when the pair has no partner)."""
    p, n, S, L = model._args.pack, model.n_support, model._state, model._layout
    drow = np.empty((n, L.n_views))
    i, removal = nb.smallest_pair(n, L.im_blocks, S.sv, S.coef, S.kself, S.scale)
    j, h, alpha, beta = nb.merge_plan(i, removal, n, L.im_blocks, L.view_of, L.masks,
                                      L.view_full, L.kinds, L.kp, S.sx, S.ssq, S.sv, S.coef,
                                      S.kself, S.scale, drow)  # fmt: skip
    out = {"smallest": _best_us(lambda r: _smallest(r, p, n), reps)}
    out["partner"] = _best_us(lambda r: _partner(r, p, n, i, drow), reps)
    out["plan"] = _best_us(lambda r: _plan(r, p, n, i, removal, drow), reps) - out["partner"]
    if j >= 0:
        args = (p, n, i, j, h, alpha, beta, drow)
        merged = _best_us(lambda r: _pairs(r, *args, True), reps)
        out["pairs"] = merged - _best_us(lambda r: _pairs(r, *args, False), reps)
    return out


def profile(states: int, gap: int, reps: int) -> tuple[dict[str, float], float, float]:
    """Mean µs per call of each part over the states, budget steps per round, µs per round."""
    model = _kernelized(512)
    Xw, Yw = _data(5000, 20, seed=1)
    model.learn_many(Xw, Yw)
    X, Y = _data(states * gap, 20, seed=2)
    Xs = _data(64, 20, seed=3)[0]
    parts: dict[str, list[float]] = {k: [] for k in ("score", "smallest", "partner", "plan",
                                                      "pairs")}  # fmt: skip
    steps = 0
    cpu = 0.0
    for k in range(states):
        p, n = model._args.pack, model.n_support
        parts["score"].append(_best_us(lambda r: _scores(r, Xs, p, n), reps))  # noqa: B023
        for part, us in budget_step_parts(model, reps).items():
            parts[part].append(us)
        before = int(model._state.counters[1])
        rows = slice(k * gap, (k + 1) * gap)
        t0 = time.process_time()
        losses, _ = model.learn_many(X[rows], Y[rows])
        cpu += time.process_time() - t0
        inserted = int((losses > 0).sum())  # hinge: a pair is inserted iff the loss is positive
        steps += int(model._state.counters[1]) - before - inserted  # each merge stamps a pair
    mean = {k: float(np.mean(v)) if v else 0.0 for k, v in parts.items()}
    rounds = states * gap
    return mean, steps / rounds, cpu / rounds * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--states", type=int, default=20, help="states profiled along the stream")
    ap.add_argument("--gap", type=int, default=500, help="rounds between two profiled states")
    ap.add_argument("--reps", type=int, default=300, help="calls per timed loop")
    add_out(ap)
    args = ap.parse_args()
    header = machine()
    mean, per_round, round_us = profile(args.states, args.gap, args.reps)
    labels = {
        "score": "score pass: inner products, kernel row and expansion of the new input",
        "smallest": "the pair to merge (smallest contribution)",
        "partner": "its partner (one pass over the support set)",
        "plan": "the merge point (golden-section search)",
        "pairs": "the merge and its exact block-norm update",
    }
    rows: list[list[object]] = []
    total = 0.0
    for key, label in labels.items():
        calls = 1.0 if key == "score" else per_round
        us = mean[key] * calls
        total += us
        rows.append([label, f"{mean[key]:.2f}", f"{calls:.3f}", f"{us:.2f}",
                     f"{100 * us / round_us:.0f} %"])  # fmt: skip
    rest = round_us - total
    rows.append(["the rest (loss, steps, insertion, score correction, prox, calls)", "-", "-",
                 f"{rest:.2f}", f"{100 * rest / round_us:.0f} %"])  # fmt: skip
    rows.append(["measured round (learn_many)", "-", "-", f"{round_us:.2f}", "100 %"])
    headers = ["part of a round", "µs per call", "calls per round", "µs per round", "share"]
    body = (
        f"{header}; {args.states} states {args.gap} rounds apart; "
        f"{per_round:.3f} budget steps (merges) per round; {1e6 / round_us:,.0f} rounds/s.\n\n"
        + markdown(headers, rows)
        + "\n\n"
        + __doc__.split("\n\n", 1)[1]
    )
    publish("merge_profile", "Where a merge-policy round spends its time (budget 512)", body,
            documented_run(ap, args), args.out)  # fmt: skip


if __name__ == "__main__":
    main()
