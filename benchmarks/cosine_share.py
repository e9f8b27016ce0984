"""What the default round's cosines cost, and what a cheaper cosine would save (issue 25, part 2):
a measurement, nothing in the library.

The default round on Bananas computes 800 cosines (three random Fourier maps of 256 and the
additive map's 16 per input), 50 exponentials and ~12,900 multiply-adds; its floor
(``_floor.py``) is above the 3 µs target, so only cheaper arithmetic could meet it. numba has no
SVML here, but the maps' cosine is already ``core._numba.fast_cos`` (Cody-Waite reduction by pi/2,
fdlibm's sine and cosine kernels, the quadrant by selects: within 2 ulp of libm), whose loop
LLVM vectorises (on an AVX-512 machine: eight doubles per instruction; the report counts the
packed FMAs and the calls of each compiled loop, unless ``--no-asm``). Measured here, per
stream (Bananas, Phishing, ImageSegments; the arguments are those the default learner's Fourier
and additive maps produce on the stream's standardised rows after its warm-up):

1. the cosine pass alone (``c cos(z_j)`` over one round's arguments, in a compiled loop of
   ``--rounds`` rounds, median of ``--reps`` runs, process CPU time) under each cosine: libm's
   ``math.cos``; ``fast_cos``; one polynomial after reduction by pi (``k = floor(x / pi)``,
   ``x = (2k + 1) pi/2 + r``, ``cos x = (-1)^(k+1) sin r``, the sine by an odd polynomial of
   degree 17, 11 or 9 fitted near-minimax on [-pi/2, pi/2] in double precision, which limits
   degree 17 to ~2e-14: a fit in higher precision would reach ~1e-16 at the same cost); and a
   stand-in that is no cosine (``c (1 - z^2/2)``: the loop's loads and stores and one
   multiply-add, the pass's own floor);
2. each cosine's largest absolute error against ``np.cos`` on a dense grid of [-50, 50], on
   [-1e5, 1e5] and on the maps' own arguments;
3. the floor (``_floor.floor_time``) and the measured default round (``core_update``'s
   measurement): the cosine pass's share of each.

The round with a cheaper cosine itself cannot be measured from here (the cosine is compiled into
the library's round): the body reports the A/B run of the degree-11 candidate made on a branch
(see the paragraph after the tables), not re-measured by this script.

Run: ``python benchmarks/cosine_share.py [--rounds 20000] [--reps 5] [--no-asm]``.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import add_out, documented_run, machine, markdown, publish

from streammkl.core import _numba as nb
from streammkl.core.jit import JIT

JIT_INLINE = {**JIT, "inline": "always"}
HALF_PI_1, HALF_PI_2 = 1.57079632673412561417e00, 6.07710050630396597660e-11  # 33 bits each
SINE_17 = (-1.6666666666741625e-01, 8.333333338813188e-03, -1.984127125803588e-04,
           2.75574998826746e-06, -2.5064831322205684e-08, 1.6564505837707643e-10,
           -1.8280511773169e-12, 9.502991958984212e-14)  # fmt: skip
SINE_11 = (-1.6666666606458017e-01, 8.3333304953965100e-03, -1.9840804010326252e-04,
           2.7522617592913210e-06, -2.3846674375412593e-08)  # fmt: skip
SINE_9 = (-1.6666657095234538e-01, 8.33301726596105e-03, -1.9806613605179285e-04,
          2.6000516265345586e-06)  # fmt: skip


@njit(**JIT_INLINE)
def _reduced(x):
    """``(r, sign)`` with ``cos x = sign sin r``, r in [-pi/2, pi/2]."""
    k = np.floor(x * 0.31830988618379067154)
    m = 2.0 * k + 1.0
    r = x - m * HALF_PI_1
    r = r - m * HALF_PI_2
    return r, 2.0 * (k - 2.0 * np.floor(k * 0.5)) - 1.0


@njit(**JIT_INLINE)
def cos_17(x):
    r, sign = _reduced(x)
    s = r * r
    c = SINE_17
    p = c[0] + s * (c[1] + s * (c[2] + s * (c[3] + s * (c[4] + s * (c[5] + s * (
        c[6] + s * c[7]))))))  # fmt: skip
    return sign * (r + r * s * p)


@njit(**JIT_INLINE)
def cos_11(x):
    r, sign = _reduced(x)
    s = r * r
    c = SINE_11
    p = c[0] + s * (c[1] + s * (c[2] + s * (c[3] + s * c[4])))
    return sign * (r + r * s * p)


@njit(**JIT_INLINE)
def cos_9(x):
    r, sign = _reduced(x)
    s = r * r
    c = SINE_9
    p = c[0] + s * (c[1] + s * (c[2] + s * c[3]))
    return sign * (r + r * s * p)


@njit(**JIT_INLINE)
def stand_in(x):
    return 1.0 - 0.5 * x * x


def _pass_loop(cos: Any) -> Any:
    """A compiled loop of ``n`` cosine passes over the rows of ``Z`` (one round's arguments per
    row, taken in turn), as ``core._numba.cosines`` writes them: ``phi[j] = c cos(z_j)``."""

    @njit(**JIT)
    def run(n, Z, phi, c):
        total = 0.0
        rows = Z.shape[0]
        for t in range(n):
            z = Z[t % rows]
            for j in range(phi.shape[0]):
                phi[j] = c * cos(z[j])
            total += phi[0]
        return total

    return run


@njit(**JIT)
def _apply(which, xs, out):
    for j in range(xs.shape[0]):
        x = xs[j]
        if which == 0:
            out[j] = math.cos(x)
        elif which == 1:
            out[j] = nb.fast_cos(x)
        elif which == 2:
            out[j] = cos_17(x)
        elif which == 3:
            out[j] = cos_11(x)
        elif which == 4:
            out[j] = cos_9(x)
        else:
            out[j] = stand_in(x)


VARIANTS = [
    ("libm math.cos (a call per cosine)", math.cos),
    ("fast_cos (the library's: two fdlibm kernels, quadrant select)", nb.fast_cos),
    ("one polynomial, degree 17", cos_17),
    ("one polynomial, degree 11", cos_11),
    ("one polynomial, degree 9", cos_9),
    ("stand-in c (1 - z^2/2), not a cosine", stand_in),
]


def _arguments(name: str) -> np.ndarray:
    """The cosine arguments of the default learner's Fourier and additive maps, one row per
    round, over 256 of the stream's standardised rows after the learner's warm-up."""
    from core_update import standardised_stream

    from streammkl.core import OnlineMKL
    from streammkl.river import defaults

    X, Y, _ = standardised_stream(name)
    model = OnlineMKL(kernels=defaults.kernel_bank(), loss=defaults.classifier_loss(),
                      regularizer=defaults.regularizer(), schedule=defaults.schedule(),
                      fit_intercept=True, averages=defaults.AVERAGES)  # fmt: skip
    model.learn_many(X[:1600], Y[:1600])
    lay = model.layout
    rows = X[1600:1856]
    Xp = np.zeros((rows.shape[0], lay.rff_wt.shape[0]))
    Xp[:, : rows.shape[1]] = rows
    parts = []
    for blk in lay.ex_blocks:
        a, e = int(lay.ex_off[blk]), int(lay.ex_off[blk + 1])
        if lay.ex_kind[blk] == nb.MAP_RFF:
            cols = int(lay.phi_src[0, a]) + np.arange(e - a)
            parts.append(Xp @ lay.rff_wt[:, cols] + lay.rff_b[cols])
        elif lay.ex_kind[blk] == nb.MAP_ADDITIVE:
            src = lay.phi_src[:, a:e]
            used = src[0] < rows.shape[1]
            parts.append(src[1, used] + src[2, used] * rows[:, src[0, used].astype(int)])
    return np.ascontiguousarray(np.hstack(parts))


def _round_ns(name: str, reps: int) -> float:
    """The default round's median ns on the stream, as ``core_update.py`` measures it."""
    from core_update import default_round_ns, standardised_stream

    X, Y, _ = standardised_stream(name)
    return default_round_ns(X, Y, reps)


def _packed_fmas(loop: Any) -> str:
    asm = next(iter(loop.inspect_asm().values()))
    counts = {w: len(re.findall(rf"vfmadd\w*pd[^\n]*%{w}", asm)) for w in ("xmm", "ymm", "zmm")}
    return ", ".join(f"{w} {n}" for w, n in counts.items())


def main() -> None:
    from _floor import floor_time

    from streammkl.river import defaults

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--no-asm", action="store_true", help="skip counting the loops' FMAs")
    add_out(parser)
    args = parser.parse_args()
    start = machine()
    rng = np.random.default_rng(0)
    wide = rng.uniform(-nb.FAST_COS_LIMIT, nb.FAST_COS_LIMIT, 200_000)
    grid = np.concatenate([np.linspace(-50.0, 50.0, 2_000_001), wide])
    streams = ("Bananas", "Phishing", "ImageSegments")
    args_of = {s: _arguments(s) for s in streams}
    own = np.concatenate([z.ravel() for z in args_of.values()])
    loops = [_pass_loop(cos) for _, cos in VARIANTS]
    err_rows, asm_rows = [], []
    for i, (label, _) in enumerate(VARIANTS):
        out_grid, out_own = np.empty_like(grid), np.empty_like(own)
        _apply(i, grid, out_grid)
        _apply(i, own, out_own)
        small = np.abs(grid) <= 50.0
        e50 = np.abs(out_grid[small] - np.cos(grid[small])).max()
        e_all = np.abs(out_grid - np.cos(grid)).max()
        e_own = np.abs(out_own - np.cos(own)).max()
        err_rows.append([label, f"{e50:.2e}", f"{e_all:.2e}", f"{e_own:.2e}"])
    pass_rows, share_rows = [], []
    for s in streams:
        Z = args_of[s]
        phi = np.zeros(Z.shape[1])
        c = math.sqrt(2.0 / 256)
        times: list[list[float]] = [[] for _ in VARIANTS]
        for loop in loops:
            loop(10, Z, phi, c)
        for _ in range(args.reps):  # the variants interleaved rep by rep
            for i, loop in enumerate(loops):
                t0 = time.process_time_ns()
                loop(args.rounds, Z, phi, c)
                times[i].append((time.process_time_ns() - t0) / args.rounds)
        med = [float(np.median(t)) for t in times]
        pass_rows.append([s, Z.shape[1], f"{np.abs(Z).max():.1f}", *[f"{m:,.0f}" for m in med]])
        print(pass_rows[-1], flush=True)
        X_d = {"Bananas": 2, "Phishing": 9, "ImageSegments": 18}[s]
        classes = {"Bananas": 2, "Phishing": 2, "ImageSegments": 7}[s]
        floor, _ = floor_time(X_d, classes, len(defaults.AVERAGES), 1 + X_d + X_d * (X_d + 1) // 2,
                              n_rff=len(defaults.RBF_SCALES) * defaults.RFF_COMPONENTS,
                              per_input=defaults.ADDITIVE_COMPONENTS, n_land=defaults.LANDMARKS,
                              reps=args.reps)  # fmt: skip
        measured = _round_ns(s, args.reps)
        cos_part = med[1] - med[-1]  # fast_cos's pass less the stand-in's: the cosines' own cost
        best = med[1] - med[3]
        share_rows.append([s, f"{measured:,.0f}", f"{floor:,.0f}", f"{cos_part:,.0f}",
                           f"{100 * cos_part / measured:.0f} %", f"{100 * cos_part / floor:.0f} %",
                           f"{measured - cos_part:,.0f}", f"{measured - best:,.0f}"])  # fmt: skip
        print(share_rows[-1], flush=True)
    if not args.no_asm:
        for (label, _), loop in zip(VARIANTS, loops, strict=True):
            asm_rows.append([label, _packed_fmas(loop)])
    names = [label for label, _ in VARIANTS]
    share_heads = ["stream", "round ns", "floor ns", "cosines ns (fast_cos)", "of the round",
                   "of the floor", "round, free cosines", "round, degree 11"]  # fmt: skip
    err_heads = ["cosine", "[-50, 50] (2,000,001 points)", "[-1e5, 1e5] (200,000 uniform)",
                 "the maps' arguments"]  # fmt: skip
    parts = [
        f"The cosine pass of one round (ns, median of {args.reps} runs of {args.rounds:,} passes "
        "in a compiled loop, process CPU time, the cosines interleaved run by run; the "
        "arguments: the default learner's Fourier and additive maps on the stream's rows, "
        "their largest |z| given):",
        markdown(["stream", "cosines", "max abs z", *names], pass_rows),
        "The cosines' share: the default round (measured as `core_update.py` does) and its "
        "floor (`_floor.py`) against the cosines' own cost in the pass (fast_cos less the "
        "stand-in); the round if its cosines cost nothing, and with the degree-11 polynomial "
        "(the round less the pass's saving):",
        markdown(share_heads, share_rows),
        "Largest absolute error against `np.cos`:",
        markdown(err_heads, err_rows),
    ]
    if asm_rows:
        parts += ["Packed FMAs in each pass's compiled loop, by register width (zmm: eight "
                  "doubles; libm's loop calls cos once per element):",
                  markdown(["cosine", "vfmadd*pd"], asm_rows)]  # fmt: skip
    parts += [f"Measured on {start}.", CANDIDATE]
    body = "\n\n".join(parts)
    publish("cosine_share", "The default round's cosines", body,
            full=documented_run(parser, args), out=args.out)  # fmt: skip


CANDIDATE = """\
The degree-11 candidate in the library (branch `dense4-mapcos`, parked): `map_cos` in place of
`fast_cos` for every feature map's cosine (the dense and sparse routes, the additive anchors;
the frequency draws keep `fast_cos`), measured against `main` in alternated processes, medians of
5 pairs, 2026-11-29 04:40-04:55 UTC:

| measure | main | map_cos | change |
|---|---|---|---|
| core_update round, Bananas (load 1.9-2.6) | 4,048 ns | 3,796 ns | -6 % |
| core_update round, Phishing | 5,734 ns | 5,379 ns | -6 % |
| core_update round, ImageSegments | 19,497 ns | 19,168 ns | -2 % |
| floor, Bananas | 3,056 ns | 2,722 ns | -11 % |
| river_speed Bananas, 1 call / 2 calls (load 1.4-1.7) | 5.84 / 9.03 µs | 5.54 / 8.64 µs | -5/-4 % |
| river_speed Phishing | 8.31 / 12.34 µs | 8.03 / 11.84 µs | -3 / -4 % |
| river_speed Hyperplane | 7.98 / 11.70 µs | 7.71 / 11.21 µs | -3 / -4 % |

Accuracy (default learner, `StandardScaler() | MKLClassifier(seed=s)`, seeds 0-4, 20,000-example
caps): Bananas 0.8920, Phishing 0.9058, Hyperplane 0.9319, ImageSegments 0.8996, SEA (drift)
0.8786, Agrawal 0.9728 on both; not one of the 344,300 predictions differs.

Not taken: the Bananas target (<= 3 µs) stays MISSED with it (3.8 µs), and cosines at no cost
would still leave the round above 3 µs (the table above); the saved models of
`tests/data/v3_states` and `v5_states` predict within 1.1e-11 of their golden decisions
(rtol 1e-12 pinned), and the daemon's restart-equals-uninterrupted test on the additive bank
differed by 1.5e-11 (cause not found: the runs part at the first record after the restart, the
one that brings a new input, in that input's 8 additive columns only; the layouts, anchors
included, are equal before and after, and no argument reached libm's fallback)."""


if __name__ == "__main__":
    main()
