"""The default round part by part: what each pass of the compiled explicit round costs on the
default learner (``core_update.default_round_ns``'s model: the default bank, softmax, FTRL, three
averaged iterates, past the bandwidth warm-up) on Bananas, Phishing and ImageSegments.

Each part is timed in a compiled loop of its own that calls the library's own compiled function
for that pass (the very code the round inlines) on a copy of the warmed model's pack, the inputs
taken in turn from the standardised stream; the loop's overhead (reading the next row) is timed
alone and taken off. Parts that change the state (the FTRL update, the averages' update) run on
the copy, whose values drift but whose sizes do not. The cosines and the landmarks'
exponentials are timed on the arguments they get in the round (a saved copy of the projections,
copied back before each pass; the copy's cost taken off); the projection is the featurisation
less these two. The whole round (``explicit_round_first``, as ``learn_many`` runs it: the second
of two mirrored score rows left to the end of the run) is timed the same way, so the sum of the
parts can be read against it (the parts do not overlap; inlined into one round the compiler may
schedule them better, or worse, than apart).

Run: ``python benchmarks/round_parts.py``; writes ``benchmarks/results/round_parts.md``.
"""

from __future__ import annotations

import copy
import os
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import machine, markdown, publish
from core_update import standardised_stream

from streammkl.core import OnlineMKL
from streammkl.core._jit import JIT
from streammkl.core._numba.averages import all_average_scores, leader, update_averages
from streammkl.core._numba.codes import MAP_ADDITIVE, MAP_LANDMARK, MAP_RFF
from streammkl.core._numba.features import cosines, explicit_phi, projected
from streammkl.core._numba.losses import loss_grad
from streammkl.core._numba.pack import explicit_view
from streammkl.core._numba.prox import prox_blockwise_steps
from streammkl.core._numba.rounds import (
    block_steps,
    explicit_round_first,
    ftrl_scales,
    ftrl_store,
)
from streammkl.core._numba.scores import explicit_scores

PARTS = (
    "projection (Fourier, additive, landmark; linear and quadratic maps)",
    "cosines (Fourier and additive)",
    "landmark exponentials and normalisation",
    "scores of the last iterate (and ||phi_m||^2)",
    "loss and gradient (softmax)",
    "selection: the leader",
    "scores of the 3 averaged iterates",
    "the averages' losses (3 softmax losses)",
    "schedule: per-block steps",
    "FTRL update of the last iterate (and its norms)",
    "prox and lazy scales",
    "the averages' update",
)


@njit(**JIT)
def _loop(p, X, n, part, saved, kinds):
    """``n`` passes of ``part`` (0: the loop alone, 1..: see ``_PARTS_CODE``) over the rows of X
    in turn; returns a sum so that nothing is optimised away."""
    f = explicit_view(p)
    phi, w, scale, ex_blocks, ex_off = f.phi, f.w, f.scale, f.ex_blocks, f.ex_off
    K = f.fx.shape[0]
    M = f.norms.shape[0]
    rows = X.shape[0]
    total = 0.0
    for i in range(n):
        x = X[i % rows]
        if part == 0:  # the loop alone
            total += x[0]
        elif part == 1:  # featurise (all of explicit_phi)
            explicit_phi(x, ex_blocks, ex_off, f.ex_kind, f.ex_norm, f.phi_src, f.rff_wt,
                         f.rff_b, phi)  # fmt: skip
            total += phi[0]
        elif part == 2 or part == 3 or part == 4:  # copy back; + cosines; + landmarks
            for j in range(phi.shape[0]):
                phi[j] = saved[j]
            for m in ex_blocks:
                a, e = ex_off[m], ex_off[m + 1]
                if part == 3 and (kinds[m] == MAP_RFF or kinds[m] == MAP_ADDITIVE):
                    if kinds[m] == MAP_RFF:
                        projected(phi, a, e, kinds[m], f.phi_src)
                    else:
                        cosines(phi, a, e, 0.25)
                elif part == 4 and kinds[m] == MAP_LANDMARK:
                    projected(phi, a, e, kinds[m], f.phi_src)
            total += phi[0]
        elif part == 5:  # scores of the last iterate
            explicit_scores(phi, w, scale, ex_blocks, ex_off, f.scores, f.fsq, f.mirror)
            total += f.scores[0, 0]
        elif part == 6:  # fx and the loss gradient
            for k in range(K):
                s = f.bias[k]
                for m in range(M):
                    s += f.scores[m, k]
                f.fx[k] = s
            total += loss_grad(f.loss_code, f.loss_p, f.fx, float(i % K), f.v)
            if f.mirror:
                f.v[1] = -f.v[0]
        elif part == 7:  # the leader
            total += leader(f.avg_loss)
        elif part == 8:  # every average's scores
            all_average_scores(phi, ex_blocks, ex_off, f.avg_w, f.avg_bias, f.ascores,
                               f.row_dots, f.mirror)  # fmt: skip
            total += f.ascores[0, 0]
        elif part == 9:  # every average's loss
            for e in range(f.avg_w.shape[0]):
                total += loss_grad(f.loss_code, f.loss_p, f.ascores[e], float(i % K), f.scratch)
        elif part == 10:  # the schedule
            vv = 0.0
            for k in range(K):
                vv += f.v[k] * f.v[k]
            block_steps(f.sched, f.sched_p, 1000 + i, f.acc, f.fsq, vv, f.etas)
            total += f.etas[0]
        elif part == 11:  # FTRL's store
            ftrl_store(f.v, phi, ex_blocks, ex_off, f.etas, f.prev, 1000 + i, w, scale, f.norms,
                       f.zn, f.blk_c, f.blk_steps, f.mirror, False)  # fmt: skip
            total += f.zn[0]
        elif part == 12:  # prox and scales
            prox_blockwise_steps(f.step_codes, f.step_p, f.step_groups, f.blk_c, f.blk_steps,
                                 f.newnorms)  # fmt: skip
            ftrl_scales(ex_blocks, f.norms, scale, f.zn, f.blk_c)
            total += scale[0]
        elif part == 13:  # the averages' update
            update_averages(w, scale, f.bias, ex_blocks, ex_off, f.avg_w, f.avg_bias,
                            f.horizons, f.avg_count, f.every, f.mirror, False)  # fmt: skip
            total += f.avg_w[0, 0, 0]
        else:  # the whole round (as ``learn_many_explicit`` runs it)
            total += explicit_round_first(f, x, float(i % K), 1000 + i)
    return total


def _time(p, X, n, part, saved, kinds, reps) -> float:
    """Median CPU ns per pass of ``part`` over ``reps`` runs of ``n`` passes."""
    _loop(p, X, 10, part, saved, kinds)
    times = []
    for _ in range(reps):
        t0 = time.process_time_ns()
        _loop(p, X, n, part, saved, kinds)
        times.append((time.process_time_ns() - t0) / n)
    return float(np.median(times))


def profile(name: str, n: int = 20_000, reps: int = 5) -> tuple[list[float], float, float]:
    """Per-part ns on stream ``name`` (the parts of ``PARTS``), the whole round's ns and the
    loop's own."""
    from streammkl.river import defaults

    X, Y, _ = standardised_stream(name)
    model = OnlineMKL(kernels=defaults.kernel_bank(), loss=defaults.classifier_loss(),
                      regularizer=defaults.regularizer(), schedule=defaults.schedule(),
                      fit_intercept=True, averages=defaults.AVERAGES)  # fmt: skip
    model.learn_many(X[:1600], Y[:1600])
    run = copy.deepcopy(model)
    run.learn_many(X[1600:1601], Y[1600:1601])  # the pack built
    args = run._args
    assert args is not None and args.fast
    p = args.pack
    layout = run._layout
    kinds = np.ascontiguousarray(layout.ex_kind)
    Xr = np.ascontiguousarray(X[1600:5600])
    # the projections the round's cosines and exponentials take: explicit_phi without them
    from streammkl.core._numba.features import explicit_phi as _  # noqa: F401 (compiled)

    saved = _projections(layout, Xr[0])
    base = _time(p, Xr, n, 0, saved, kinds, reps)
    copy_ns = _time(p, Xr, n, 2, saved, kinds, reps)
    feat = _time(p, Xr, n, 1, saved, kinds, reps) - base
    cos = _time(p, Xr, n, 3, saved, kinds, reps) - copy_ns
    land = _time(p, Xr, n, 4, saved, kinds, reps) - copy_ns
    parts = [feat - cos - land, cos, land]
    for part in range(5, 14):
        parts.append(_time(p, Xr, n, part, saved, kinds, reps) - base)
    whole = _time(p, Xr, n, 99, saved, kinds, reps) - base
    return parts, whole, base


def _projections(layout, x: np.ndarray) -> np.ndarray:
    """``phi`` of ``x`` with the Fourier and additive cosines and the landmark exponentials
    left out: their arguments (what the round's ``projected`` and ``cosines`` get)."""
    phi = np.zeros(layout.width)
    d = x.shape[0]
    for m in layout.ex_blocks:
        a, e = int(layout.ex_off[m]), int(layout.ex_off[m + 1])
        kind = int(layout.ex_kind[m])
        src = layout.phi_src
        if kind == MAP_ADDITIVE:
            for j in range(a, e):
                i = int(src[0, j])
                phi[j] = src[1, j] + src[2, j] * (x[i] if i < d else 0.0)
        elif kind in (MAP_RFF, MAP_LANDMARK):
            r0 = int(src[0, a])
            rows = min(d, layout.rff_wt.shape[0])
            cols = slice(r0, r0 + e - a)
            phi[a:e] = layout.rff_b[cols] + x[:rows] @ layout.rff_wt[:rows, cols]
    return phi


def main() -> None:
    start = machine()
    headers = ["part"]
    cols: list[list[object]] = [[label] for label in PARTS]
    sums: list[object] = ["sum of the parts"]
    wholes: list[object] = ["the whole round (`explicit_round_first`, as `learn_many` runs it)"]
    for name in ("Bananas", "Phishing", "ImageSegments"):
        parts, whole, base = profile(name)
        total = sum(parts)
        headers += [f"{name} ns", "share"]
        for row, v in zip(cols, parts, strict=True):
            row += [f"{v:,.0f}", f"{100 * v / total:.0f} %"]
        sums += [f"{total:,.0f}", "100 %"]
        wholes += [f"{whole:,.0f}", f"{100 * whole / total:.0f} %"]
        print(name, [round(v) for v in parts], round(whole), round(base), flush=True)
    body = (
        "Each part of the default round in a compiled loop of its own (median of 5 runs of "
        "20,000 passes, process CPU time, the loop's own cost taken off; see the module "
        "docstring), on a copy of the default learner's state after the bandwidth warm-up "
        "(1,600 rounds), the stream's standardised rows in turn:\n\n"
        + markdown(headers, [*cols, sums, wholes])
        + f"\n\nMeasured on {start} (load average {os.getloadavg()[0]:.2f} at the end).\n"
    )
    publish("round_parts", "The default round, part by part", body, full=True, out=None)


if __name__ == "__main__":
    main()
