"""Table 1 of SPOM (Martins et al. 2011, §4.1) on the ``digit-strings`` scenario.

The paper's OCR letters data cannot be downloaded here; ``simulators.digit_strings`` renders label
sequences of a fixed, seeded bigram chain with scikit-learn's 8x8 digits (train and test images
disjoint). Rows as in the paper — single kernels, their average, MKL with beta_0 = 1 fixed and with
beta_0 learned, for L+Q+G and for L+B1 — plus the no-transition baseline (the MKL L+Q+G learner fed
one character at a time), each with training time and per-character test accuracy, mean ± std
over seeded splits.

Protocol (the paper's, shrunk by default so the script runs in a few minutes; ``--full`` restores
it): eta_0 of ``InvSqrt`` picked from {0.01, 0.1, 1, 10} as the one with the lowest objective
``lambda Omega + mean loss`` after ``--select-epochs`` epochs (at C = ``--c-ref``); then
``C = 1/(lambda N)`` by ``--folds``-fold cross-validation over ``--C``; then ``--epochs`` epochs on
the whole training set, timed. Run from the repository root::

    .venv/bin/python benchmarks/sequence_table1.py            # default, a few minutes (printed)
    .venv/bin/python benchmarks/sequence_table1.py --full     # 10 splits, 5-fold CV, 6 C, 60 seqs
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _table import RESULTS, documented_run

from simulators.digit_strings import load_split
from streammkl.core import kernels, regularizers, schedules
from streammkl.structured import SequenceLabeler

PAPER = {  # [001] Table 1: (runtime, accuracy) on OCR
    "Linear (L)": ("6 s", "71.8 ± 3.9"),
    "Quadratic (Q)": ("116 s", "85.5 ± 0.3"),
    "Gaussian (G)": ("123 s", "84.1 ± 0.4"),
    "Average (L+Q+G)/3": ("118 s", "84.3 ± 0.3"),
    "MKL β1L+β2Q+β3G": ("279 s", "87.5 ± 0.3"),
    "MKL β0, β1L+β2Q+β3G": ("282 s", "87.5 ± 0.4"),
    "B1-spline (B1)": ("8 s", "75.4 ± 0.9"),
    "Average (L+B1)/2": ("15 s", "83.0 ± 0.3"),
    "MKL β1L+β2B1": ("15 s", "85.2 ± 0.3"),
    "MKL β0, β1L+β2B1": ("16 s", "85.2 ± 0.3"),
    "no transitions: MKL L+Q+G, characters alone": ("—", "—"),
}


FULL_N_TRAIN = 60  # --full: training sequences per split (~400 characters; the default is 20)

SHORT = {"linear-normalized": "L", "poly2": "Q", "rbf": "G", "b1": "B1", "transition": "β0"}

PAIRS = [  # (a, b): per-split accuracy differences a - b (the splits are shared by every row)
    ("MKL β1L+β2Q+β3G", "Gaussian (G)"),
    ("MKL β1L+β2Q+β3G", "Quadratic (Q)"),
    ("MKL β1L+β2Q+β3G", "Average (L+Q+G)/3"),
    ("MKL β0, β1L+β2Q+β3G", "MKL β1L+β2Q+β3G"),
    ("MKL β1L+β2B1", "Linear (L)"),
    ("MKL β1L+β2B1", "B1-spline (B1)"),
    ("MKL β1L+β2B1", "Average (L+B1)/2"),
    ("MKL β0, β1L+β2B1", "MKL β1L+β2B1"),
    ("MKL β1L+β2B1", "MKL β1L+β2Q+β3G"),
    ("MKL β1L+β2Q+β3G", "no transitions: MKL L+Q+G, characters alone"),
]


@dataclass(frozen=True)
class Row:
    name: str
    bank: str  # "L", "Q", "G", "B1", "LQG", "LB1"
    mode: str  # "single" | "average" | "mkl"
    learn_beta0: bool = False
    characters: bool = False


ROWS = [
    Row("Linear (L)", "L", "single"),
    Row("Quadratic (Q)", "Q", "single"),
    Row("Gaussian (G)", "G", "single"),
    Row("Average (L+Q+G)/3", "LQG", "average"),
    Row("MKL β1L+β2Q+β3G", "LQG", "mkl"),
    Row("MKL β0, β1L+β2Q+β3G", "LQG", "mkl", learn_beta0=True),
    Row("B1-spline (B1)", "B1", "single"),
    Row("Average (L+B1)/2", "LB1", "average"),
    Row("MKL β1L+β2B1", "LB1", "mkl"),
    Row("MKL β0, β1L+β2B1", "LB1", "mkl", learn_beta0=True),
    Row("no transitions: MKL L+Q+G, characters alone", "LQG", "mkl", characters=True),
]


def bank(name: str, gamma: float, h: float) -> tuple:
    lin = kernels.Linear(normalize=True)
    quad = kernels.Polynomial(degree=2, coef0=1.0, normalize=True)
    gauss = kernels.RBF(gamma=gamma)
    b1 = kernels.B1Spline(h=h)
    return {
        "L": (lin,),
        "Q": (quad,),
        "G": (gauss,),
        "B1": (b1,),
        "LQG": (lin, quad, gauss),
        "LB1": (lin, b1),
    }[name]


def make(row: Row, kern: tuple, C: float, n: int, eta0: float, loss: str) -> SequenceLabeler:
    """The labeler for a row at C = 1/(lambda n) and eta_0 (average kernel: exact block mapping)."""
    lam = 1.0 / (C * n)
    M = len(kern)
    if row.mode == "average":  # (1/M) sum K_m with L2(lam)  ==  blocks, L2(M lam), eta0/M, beta0=M
        return SequenceLabeler(
            kernels=kern,
            loss=loss,
            regularizer=regularizers.L2(M * lam),
            schedule=schedules.InvSqrt(eta0 / M),
            transition_weight=M,
        )
    return SequenceLabeler(
        kernels=kern,
        loss=loss,
        regularizer=regularizers.SquaredGroupLasso(lam),
        schedule=schedules.InvSqrt(eta0),
        learn_transition_weight=row.learn_beta0,
    )


def units(row: Row, X: list, Y: list) -> tuple[list, list]:
    """Training/test units: whole sequences, or (no-transition row) single characters."""
    if not row.characters:
        return X, Y
    return [x[i : i + 1] for x in X for i in range(len(x))], [
        y[i : i + 1] for y in Y for i in range(len(y))
    ]


def train(model: SequenceLabeler, X: list, Y: list, epochs: int, seed: int) -> None:
    for epoch in range(epochs):
        for i in np.random.default_rng([seed, epoch]).permutation(len(X)):
            model.learn_one(X[i], Y[i])


def accuracy(model: SequenceLabeler, X: list, Y: list) -> float:
    hits = [np.equal(model.predict_one(x), y) for x, y in zip(X, Y, strict=True)]
    return float(np.mean(np.concatenate(hits)))


def objective(model: SequenceLabeler, X: list, Y: list) -> float:
    losses = [model.loss_one(x, y) for x, y in zip(X, Y, strict=True)]
    return model.regularization_value() + float(np.mean(losses))


def run_row(row: Row, split, args, seed: int) -> dict:
    Xtr, Ytr = units(row, split.X_train, split.y_train)
    Xte, Yte = units(row, split.X_test, split.y_test)
    kern = bank(row.bank, args.gamma, split_h(split, args))
    n = len(Xtr)
    objs = {}
    for eta0 in args.eta0:
        model = make(row, kern, args.c_ref, n, eta0, args.loss)
        train(model, Xtr, Ytr, args.select_epochs, seed)
        objs[eta0] = objective(model, Xtr, Ytr)
    eta0 = min(objs, key=objs.get)
    cv = {}
    folds = np.array_split(np.random.default_rng([seed, 99]).permutation(n), args.folds)
    for C in args.C:
        accs = []
        for k in range(args.folds) if len(args.C) > 1 else []:
            inner = np.concatenate([f for j, f in enumerate(folds) if j != k])
            model = make(row, kern, C, len(inner), eta0, args.loss)
            train(model, [Xtr[i] for i in inner], [Ytr[i] for i in inner], args.cv_epochs, seed)
            accs.append(accuracy(model, [Xtr[i] for i in folds[k]], [Ytr[i] for i in folds[k]]))
        cv[C] = float(np.mean(accs)) if accs else 0.0
    C = max(cv, key=cv.get)
    model = make(row, kern, C, n, eta0, args.loss)
    start = time.process_time()
    train(model, Xtr, Ytr, args.epochs, seed)
    seconds = time.process_time() - start
    return {
        "acc": accuracy(model, Xte, Yte),
        "time": seconds,
        "eta0": eta0,
        "C": C,
        "beta": model.kernel_weights,
        "n_support": model.n_support,
    }


_H_CACHE: dict[int, tuple[float, float]] = {}


def split_h(split, args) -> float:
    """h with ~95% zeros in the training characters' B1 kernel matrix (5th distance percentile)."""
    if split.seed not in _H_CACHE:
        X = np.vstack(split.X_train)
        sq = np.sum(X * X, axis=1)
        dist = np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2 * X @ X.T, 0.0))
        off = dist[np.triu_indices(len(X), 1)]
        h = float(np.quantile(off, 1.0 - args.b1_zeros))
        _H_CACHE[split.seed] = (h, float(np.mean(off >= h)))
    return _H_CACHE[split.seed][0]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--full", action="store_true", help="the paper's protocol (slow)")
    p.add_argument("--splits", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--n-train", type=int, default=None, help="training sequences per split (20; --full: 60)"
    )
    p.add_argument("--n-test", type=int, default=500)
    p.add_argument("--n-successors", type=int, default=3, help="successors per digit in the chain")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--select-epochs", type=int, default=3)
    p.add_argument("--cv-epochs", type=int, default=10)
    p.add_argument("--folds", type=int, default=3)
    p.add_argument(
        "--C", type=lambda s: [float(v) for v in s.split(",")], default=[1.0, 10.0, 100.0]
    )
    p.add_argument("--c-ref", type=float, default=10.0, help="C at which eta_0 is selected")
    p.add_argument(
        "--eta0", type=lambda s: [float(v) for v in s.split(",")], default=[0.01, 0.1, 1.0, 10.0]
    )
    p.add_argument("--gamma", type=float, default=0.1, help="RBF gamma = 1/(2 sigma^2), sigma^2=5")
    p.add_argument("--b1-zeros", type=float, default=0.95)
    p.add_argument("--loss", choices=("hinge", "crf"), default="hinge")
    p.add_argument("--rows", type=lambda s: [int(v) for v in s.split(",")], default=None)
    p.add_argument(
        "--out",
        default=None,
        help="where to write (default: benchmarks/results/ for the full run, else print only)",
    )
    p.add_argument("--render", metavar="JSON", help="only re-render the tables from a saved run")
    args = p.parse_args(argv)
    documented = documented_run(p, args, full=True)
    if args.render:
        saved = json.loads(Path(args.render).read_text())
        documented = bool(saved["args"].get("full")) and args.out is None
        vars(args).update(saved["args"], out=args.out)
        args.out = target(args.out, documented)
        rows = [r for r in ROWS if r.name in saved["results"]]
        return write(args, rows, saved["splits"], saved["results"], saved["wall"])
    args.out = target(args.out, documented)
    if args.full:
        args.splits, args.epochs, args.select_epochs, args.cv_epochs, args.folds = 10, 20, 5, 20, 5
        args.C = [0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0]
    if args.n_train is None:
        args.n_train = FULL_N_TRAIN if args.full else 20
    rows = [ROWS[i] for i in args.rows] if args.rows else ROWS
    splits = [
        load_split(
            args.seed + s, n_train=args.n_train, n_test=args.n_test, n_successors=args.n_successors
        )
        for s in range(args.splits)
    ]
    warm = SequenceLabeler(kernels=bank("LQG", 0.1, 1.0), loss=args.loss)  # compile outside timing
    warm.learn_one(splits[0].X_train[0], splits[0].y_train[0])
    results: dict[str, list[dict]] = {}
    wall = time.time()
    for row in rows:
        results[row.name] = [run_row(row, sp, args, args.seed + s) for s, sp in enumerate(splits)]
        r = results[row.name]
        acc = 100 * np.array([x["acc"] for x in r])
        print(
            f"{row.name:46s} {np.mean([x['time'] for x in r]):7.2f} s  "
            f"{acc.mean():6.2f} ± {acc.std():.2f}%  ({time.time() - wall:.0f} s)",
            flush=True,
        )
    info = [{"h": _H_CACHE[sp.seed][0], "zeros": _H_CACHE[sp.seed][1],
             "chars": int(sum(len(y) for y in sp.y_train))} for sp in splits]  # fmt: skip
    wall = time.time() - wall
    raw = {"args": vars(args), "splits": info, "results": results, "wall": wall}
    if args.out is not None:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).with_suffix(".json").write_text(json.dumps(raw, indent=1))
    write(args, rows, info, results, wall)


def target(out: str | None, documented: bool) -> str | None:
    """Where the report goes: ``--out``, else the results file for the full documented run
    only; a partial run never writes into benchmarks/results/ (the README's source)."""
    if out is not None:
        if not documented and Path(out).resolve().parent == RESULTS.resolve():
            raise SystemExit(f"refusing to write a partial run into {RESULTS}: another --out")
        return out
    return str(RESULTS / "sequence_table1.md") if documented else None


def command(args) -> str:
    """The command-line options that reproduce the run (the defaults left out)."""
    out = " --full" if args.full else ""
    if args.n_train != (FULL_N_TRAIN if args.full else 20):
        out += f" --n-train {args.n_train}"
    return out


def write(args, rows, info, results, wall) -> None:
    h = [(x["h"], x["zeros"]) for x in info]
    chars = np.mean([x["chars"] for x in info])
    lines = [
        "# SPOM Table 1 on digit-strings (sequence labeling, structured hinge)",
        "",
        f"Command: `.venv/bin/python benchmarks/sequence_table1.py{command(args)}` "
        f"({wall / 60:.1f} min wall clock, 1 process).",
        "",
        f"Data: `simulators.digit_strings.load_split(seed, n_train={args.n_train}, "
        f"n_test={args.n_test}, n_successors={args.n_successors})` — bigram chain with "
        f"{args.n_successors} successors per digit, lengths 3–10, "
        f"sklearn 8x8 digits in [0, 1], train/test images disjoint; {chars:.0f} training "
        f"characters per split on average. {args.splits} splits (seeds {args.seed}.."
        f"{args.seed + args.splits - 1}).",
        "",
        f"Protocol: loss={args.loss}; eta_0 ∈ {args.eta0} by the lowest objective after "
        f"{args.select_epochs} epochs at C={args.c_ref:g}; C = 1/(λN) ∈ {args.C} by "
        f"{args.folds}-fold CV ({args.cv_epochs} epochs per fit); final model {args.epochs} "
        "epochs; training time = CPU seconds of the final fit, mean over splits. "
        f"Kernels: Linear normalized (explicit), (x·x'+1)² normalized, Gaussian γ={args.gamma:g} "
        f"(σ²=5 as in the paper), B1-spline h={np.mean([v[0] for v in h]):.3f} "
        f"({100 * np.mean([v[1] for v in h]):.1f}% zeros among training pairs).",
        "",
        "| Kernel | train time | support pairs | test acc. per char | paper [001] time | "
        "paper acc. | η0 / C picked | β (mean) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        r = results[row.name]
        acc = 100 * np.array([x["acc"] for x in r])
        t = np.array([x["time"] for x in r])
        picks = ", ".join(sorted({f"{x['eta0']:g}/{x['C']:g}" for x in r}))
        short = [{SHORT[k.split("(")[0]]: v for k, v in x["beta"].items()} for x in r]
        bstr = " ".join(f"{k}={np.mean([b[k] for b in short]):.2f}" for k in short[0])
        pt, pa = PAPER[row.name]
        n_sup = np.mean([x["n_support"] for x in r])
        lines.append(
            f"| {row.name} | {t.mean():.2f} s | {n_sup:.0f} | {acc.mean():.2f} ± {acc.std():.2f}% "
            f"| {pt} | {pa}% | {picks} | {bstr} |"
        )
    lines += [
        "",
        "Paired differences over the same splits (percentage points, mean ± std; time ratio "
        "of the final fits):",
        "",
        "| a − b | Δ accuracy | time a / time b |",
        "|---|---|---|",
    ]
    for a, b in PAIRS:
        if a in results and b in results:
            ra, rb = results[a], results[b]
            d = 100 * np.array([x["acc"] - y["acc"] for x, y in zip(ra, rb, strict=True)])
            ratio = np.mean([x["time"] for x in ra]) / np.mean([y["time"] for y in rb])
            lines.append(f"| {a} − {b} | {d.mean():+.2f} ± {d.std():.2f} | {ratio:.2f} |")
    lines += claims(results)
    print("\n".join(lines))
    if args.out is None:
        print("\n(a partial run: not written; --full is the documented run, --out PATH elsewhere)")
        return
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")


NOTES = [
    "",
    "Reading the numbers:",
    "",
    "- The data differ: sklearn's 8x8 digits (64 grey levels, 10 classes) are much easier than "
    "the OCR letters (16x8 binary, 26 classes), and the training set is smaller (--full: 60 "
    "sequences, ~400 characters; the paper trains on one fold, ~5,200 characters), so every "
    "row lands in the high 90s and most row-to-row gaps are within the split-to-split spread; "
    "the paired deltas above are the ones to read. With 20 training sequences (~135 characters, "
    "the --full of commit 05a7a6a) the rows were in the low-to-mid 90s and MKL(L+Q+G) was not "
    "above the best single kernel either (−0.65 ± 0.90 pp against the Gaussian). The CV grid is "
    "the paper's "
    "(6 values of C, 5 folds, 20 epochs): at 60 sequences it still fits in one process; η0 and C "
    "are picked on the training sequences only, never on the test set.",
    "- Times are CPU seconds of the final fit on this shared 2-core box; absolute values are not "
    "comparable with the paper's (2011 hardware, 13x more characters). Every row pays about the "
    "same per-sequence cost (Python, decoding, prox), close to the Linear row's time. The "
    "kernelized work on top of it grows with the support set (mean size after the final fit in "
    "the table; it depends on the C picked, and the local B1 kernel makes more margin "
    "violations, so stores more pairs) and is one inner product per support pair for Q and G "
    "(one for both, as they read the same features); a B1 block whose features no other kernel "
    "reads first compares 16 projected coordinates (principal directions of the support inputs) "
    "and skips the pair when the projected distance already exceeds h — about 90% of the pairs "
    "at 95% zeros — with bit-identical results (structured/pruning.py, "
    "benchmarks/b1_support.py). The paper's L+B1 speed (0.05) came from a precomputed sparse "
    "kernel matrix of the training set, which an online learner on an unbounded stream does not "
    "have; here the pairs the bound cannot skip and the shared per-sequence cost remain. At the "
    "same C and η0 (so comparable support sets), benchmarks/results/b1_support.md times whole "
    "fits of MKL L+B1 with and without the bound against MKL L+Q+G.",
    "- 'β0 fixed' leaves the bigram block unregularized (the documents do not say; NOTES.md "
    "§1.3); 'β0 learned' puts it inside the squared group lasso. The average kernel is run "
    "exactly through L2(Mλ), η0/M and transition_weight=M (tested in "
    "tests/test_structured_labeler.py).",
]


def claims(results: dict) -> list[str]:
    """The paper's claims about Table 1, checked on these results (per-split paired deltas)."""

    def acc(name):
        return 100 * np.array([x["acc"] for x in results[name]])

    def sec(name):
        return np.mean([x["time"] for x in results[name]])

    def delta(a, b):
        d = acc(a) - acc(b)
        return f"{d.mean():+.2f} ± {d.std():.2f} pp ({int(np.sum(d > 0))}/{len(d)} splits > 0)"

    need = ["Linear (L)", "Quadratic (Q)", "Gaussian (G)", "Average (L+Q+G)/3",
            "MKL β1L+β2Q+β3G", "MKL β0, β1L+β2Q+β3G", "B1-spline (B1)", "Average (L+B1)/2",
            "MKL β1L+β2B1", "MKL β0, β1L+β2B1", ROWS[-1].name]  # fmt: skip
    if any(n not in results for n in need):
        return []
    best = max(need[:3], key=lambda n: acc(n).mean())
    mkl, mkl_b1 = "MKL β1L+β2Q+β3G", "MKL β1L+β2B1"
    return [
        "",
        "The paper's claims, checked here (paired over splits):",
        "",
        f"- MKL(L+Q+G) ≥ the best single kernel ({best}), paper +2.0: {delta(mkl, best)}",
        f"- MKL(L+Q+G) > Average(L+Q+G), paper +3.2: {delta(mkl, need[3])}",
        f"- learning β0 makes no difference, paper 0.0: {delta(need[5], mkl)} (L+Q+G), "
        f"{delta(need[9], mkl_b1)} (L+B1)",
        f"- MKL(L+B1) beats L and B1 by ~10, paper +13.4/+9.8: {delta(mkl_b1, need[0])} / "
        f"{delta(mkl_b1, need[6])}",
        f"- MKL(L+B1) > Average(L+B1) by > 2, paper +2.2: {delta(mkl_b1, need[7])}",
        f"- MKL(L+B1) almost as accurate as MKL(L+Q+G), paper −2.3: {delta(mkl_b1, mkl)}; "
        f"and much faster, paper 15 s / 279 s = 0.05: {sec(mkl_b1):.2f} s / {sec(mkl):.2f} s = "
        f"{sec(mkl_b1) / sec(mkl):.2f}; beyond the Linear row's {sec(need[0]):.2f} s (the cost "
        f"every row pays per sequence): {sec(mkl_b1) - sec(need[0]):.2f} s / "
        f"{sec(mkl) - sec(need[0]):.2f} s = "
        f"{(sec(mkl_b1) - sec(need[0])) / (sec(mkl) - sec(need[0])):.2f}",
        f"- the bigram block matters (not in the paper): MKL(L+Q+G) on sequences vs the same "
        f"learner on characters alone {delta(mkl, need[10])}",
        *NOTES,
    ]


if __name__ == "__main__":
    main()
