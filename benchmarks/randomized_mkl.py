"""Randomized mirror descent MKL on the synthetic monomial task (Afkanpour et al. §5.2).

``.venv/bin/python benchmarks/randomized_mkl.py`` is the documented full run (about 30 minutes on
a quiet 2-core box, an hour under load) and the only one that writes
``benchmarks/results/randomized_mkl.md``; ``--quick`` (a smoke run) and partial runs
(``--settings``, ``--r``, ``--runs`` ...) only print their report, or write it where ``--out``
says. Two settings, side by side:

* **paper**: the paper's regularisation grid 1e-8, 1e-7, ..., 1e2 and repeated runs (new inputs
  and new target monomials per run; 3 runs, the paper: 10), mean ± std of the test MSE;
* **ours**: the earlier, cheaper setting — grid {1e-4, 1e-3, 1e-2}, one run — plus the uniform
  coordinate-sampling baseline of §5.1.

Data: inputs uniform on [-1, 1]^r, target = sum of 10 distinct monomials of degree 1-3 drawn
uniformly (noise free), 500 training / 1,000 validation / 1,000 test points, inputs and target
standardised on the training set. Base kernels: the r per-variable linear kernels; the kernel set is
every product of degree 0-3 (C(r+3, 3) distinct kernels, sum_d r^d ordered indices). Methods, each
with lambda chosen on the validation set:

* Stoch — ``RandomizedMKL`` (Alg. 2 + the Alg. 3 sampler, q ∝ |gradient|), T stochastic steps;
* Uniform sampling — the same projected SGD with coordinates drawn uniformly ("ours" only);
* Explicit — ``ExplicitPolynomialMKL``: every kernel explicit, exact alternating minimisation of the
  same objective (the Kloft et al. baseline), where it fits (``--explicit-max-kernels``);
* Sum kernel — kernel ridge on ``sum_{|I| <= 3} K_I`` (all kernels with equal weight, the paper's
  "Uniform").

A third table follows Stoch's objective and test MSE as T grows at r = 20, where the explicit
baseline beats it (see the results file for why).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # shared 2-core box: BLAS threads only contend

import argparse
import math
import sys
import time
from collections import Counter

import numpy as np
import scipy.linalg
from _table import machine, publish

from streammkl.batch.explicit_poly import ExplicitPolynomialMKL, monomial_indices
from streammkl.batch.polysampler import n_ordered_indices
from streammkl.batch.randomized import RandomizedMKL

PAPER_KERNELS = {20: "1,771", 40: "12,341", 60: "39,711", 80: "91,881", 100: "176,851"}
SETTINGS = {
    "paper": dict(lams=[10.0**k for k in range(-8, 3)], runs=3, uniform=False),
    "ours": dict(lams=[1e-4, 1e-3, 1e-2], runs=1, uniform=True),
}


def make_task(r: int, seed: int):
    rng = np.random.default_rng(seed)
    monos = [m for m in monomial_indices(r, 3) if m]
    pick = [monos[i] for i in rng.choice(len(monos), size=10, replace=False)]
    X = rng.uniform(-1.0, 1.0, size=(2500, r))
    y = sum(np.prod(X[:, list(m)], axis=1) for m in pick)
    tr, va, te = slice(0, 500), slice(500, 1500), slice(1500, 2500)
    mu, sd = X[tr].mean(0), X[tr].std(0)
    X = (X - mu) / sd
    y = (y - y[tr].mean()) / y[tr].std()
    return (X[tr], y[tr]), (X[va], y[va]), (X[te], y[te]), pick


def mse(model, X, y) -> float:
    return float(np.mean((model.predict(X) - y) ** 2))


class SumKernelRidge:
    """Kernel ridge with every product kernel at equal weight: sum_{d<=D} (X X^T)^{o d}."""

    def __init__(self, lam: float, degree: int = 3):
        self.lam, self.degree = lam, degree

    def _kernel(self, A, B):
        S = A @ B.T
        return sum(S**d for d in range(self.degree + 1))

    def fit(self, X, y):
        t0 = time.perf_counter()
        K = self._kernel(X, X)
        self.a = scipy.linalg.solve(K + len(y) * self.lam * np.eye(len(y)), y, assume_a="pos")
        self.X, self.fit_time_ = X, time.perf_counter() - t0
        self.objective_ = float("nan")
        return self

    def predict(self, X):
        return self._kernel(X, self.X) @ self.a


def select(factory, lams, train, val, test):
    """Fit at every lambda, keep the best on validation: (row, best model, {lambda: model})."""
    best, models = None, {}
    for lam in lams:
        model = models[lam] = factory(lam).fit(*train)
        score = mse(model, *val)
        if best is None or score < best[0]:
            best = (score, lam, model)
    score, lam, model = best
    return dict(lam=lam, val=score, test=mse(model, *test), time=model.fit_time_,
                J=model.objective_), model, models  # fmt: skip


def run_setting(args, name: str) -> list[dict]:
    cfg = SETTINGS[name]
    rows = []
    for r in args.r:
        n_kernels = math.comb(r + 3, 3)
        print(f"[{name}] r = {r}: {n_kernels} kernels, {n_ordered_indices(r, 3)} ordered indices")
        for run in range(args.runs if args.runs is not None else cfg["runs"]):
            seed = r if name == "ours" else 1000 * run + r  # "ours" keeps the earlier task
            train, val, test, _ = make_task(r, seed=seed)
            lams = args.lams or cfg["lams"]
            found, explicit = [], None
            if n_kernels <= args.explicit_max_kernels:
                row, _, explicit = select(
                    lambda lam: ExplicitPolynomialMKL(degree=3, lam=lam, n_iter=args.explicit_iter),
                    lams, train, val, test,
                )  # fmt: skip
                found.append(dict(method="Explicit (all kernels)", used=n_kernels, **row))
            samplers = [("Stoch (Alg. 3)", "importance")]
            if cfg["uniform"]:
                samplers.append(("Uniform sampling", "uniform"))
            for label, sampler in samplers:
                row, model, _ = select(
                    lambda lam, s=sampler: RandomizedMKL(
                        degree=3, lam=lam, n_iter=args.n_iter, sampler=s, seed=0
                    ),
                    lams, train, val, test,
                )  # fmt: skip
                used = sum(1 for w in model.kernel_weights_.values() if w > 0)
                if explicit is not None:
                    row["J_star"] = explicit[row["lam"]].objective_
                found.append(dict(method=label, used=used, **row))
            row, _, _ = select(lambda lam: SumKernelRidge(lam), lams, train, val, test)
            found.append(dict(method="Sum kernel (ridge)", used=n_kernels, **row))
            for row in found:
                row.update(r=r, run=run, setting=name)
                print(
                    f"  run {run} {row['method']:24s} lam={row['lam']:.0e} "
                    f"test MSE {row['test']:.4f} time {row['time']:6.1f}s"
                )
            rows += found
    return rows


def run_convergence(args) -> list[dict]:
    """Stoch at r = 20 as T grows (last and averaged iterate), at the explicit baseline's lambda."""
    r = args.conv_r
    train, val, test, _ = make_task(r, seed=r)
    _, best, _ = select(
        lambda lam: ExplicitPolynomialMKL(degree=3, lam=lam, n_iter=args.explicit_iter),
        SETTINGS["ours"]["lams"], train, val, test,
    )  # fmt: skip
    rows = [dict(T=0, iterate="explicit optimum", J=best.objective_, test=mse(best, *test),
                 time=best.fit_time_, lam=best.lam)]  # fmt: skip
    for T in args.conv_T:
        for average in (False, True):
            m = RandomizedMKL(degree=3, lam=best.lam, n_iter=T, seed=0, average=average)
            m.fit(*train)
            rows.append(
                dict(T=T, iterate="average" if average else "last", J=m.objective_,
                     test=mse(m, *test), time=m.fit_time_, lam=best.lam)
            )  # fmt: skip
            print(f"  r={r} T={T} {rows[-1]['iterate']}: J/J* {m.objective_ / best.objective_:.3f}")
    return rows


def _num(x: float) -> str:
    return f"{x:.4f}" if x >= 1e-3 or x == 0 else f"{x:.1e}"


def _kcol(r: int) -> str:
    paper = PAPER_KERNELS.get(r)
    return f"{math.comb(r + 3, 3):,}" + (f" ({paper})" if paper else "")


def report_setting(rows, name, args) -> list[str]:
    cfg = SETTINGS[name]
    lams = args.lams or cfg["lams"]
    runs = args.runs if args.runs is not None else cfg["runs"]
    title = "the paper's setting" if name == "paper" else "our earlier setting"
    out = [
        "",
        f"## {'1' if name == 'paper' else '2'}. {title}: lambda grid "
        f"{', '.join(f'{x:.0e}' for x in lams)}, {runs} run(s), T = {args.n_iter} steps",
        "",
        "| r | kernels C(r+3,3) (paper's count) | method | test MSE (mean ± std) | lambda selected "
        "(count) | fit time at it (s) | J / J* (explicit, same lambda) | kernels with weight |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in args.r:
        for method in dict.fromkeys(x["method"] for x in rows if x["r"] == r):
            got = [x for x in rows if x["r"] == r and x["method"] == method]
            test = np.array([x["test"] for x in got])
            picked = Counter(f"{x['lam']:.0e}" for x in got)
            lam = ", ".join(f"{k} ({v})" if len(got) > 1 else k for k, v in picked.most_common())
            ratios = [x["J"] / x["J_star"] for x in got if x.get("J_star")]
            ratio = f"{np.mean(ratios):.3f}" if ratios else "-"
            used = np.mean([x["used"] for x in got])
            out.append(
                f"| {r} | {_kcol(r)} | {method} | {_num(test.mean())} ± {_num(test.std())} | "
                f"{lam} | "
                f"{np.mean([x['time'] for x in got]):.1f} | {ratio} | {used:,.0f} |"
            )
    return out


def report_convergence(rows, args, section2: list[dict]) -> list[str]:
    ref, r = rows[0], args.conv_r
    chosen = {x["method"]: x["lam"] for x in section2 if x["r"] == r and x["run"] == 0}
    last = {x["T"]: x["J"] / ref["J"] for x in rows[1:] if x["iterate"] == "last"}
    avg = {x["T"]: x["J"] / ref["J"] for x in rows[1:] if x["iterate"] == "average"}
    t_lo, t_hi = min(last), max(last)
    out = [
        "",
        f"## 3. Stoch against the explicit optimum as T grows (r = {r}, lambda = "
        f"{ref['lam']:.0e}: the explicit baseline's choice on the task of section 2)",
        "",
        "| T (steps) | iterate | J / J* | test MSE | time (s) |",
        "|---|---|---|---|---|",
        f"| - | explicit optimum (every kernel) | 1.000 | {_num(ref['test'])} | "
        f"{ref['time']:.1f} |",
    ]
    for row in rows[1:]:
        out.append(
            f"| {row['T']:,} | {row['iterate']} | {row['J'] / ref['J']:.3f} | "
            f"{_num(row['test'])} | {row['time']:.1f} |"
        )
    better = "better" if all(avg[T] < last[T] for T in last) else "worse"
    if any(avg[T] < last[T] for T in last) and better == "worse":
        better = "not uniformly better"
    out += [
        "",
        f"Why the explicit baseline wins at r = {r} in section 2: Stoch's last iterate is at "
        f"J / J* = {last[t_lo]:.2f} after {t_lo:,} steps and {last[t_hi]:.2f} after {t_hi:,} "
        f"({n_ordered_indices(r, 3):,} ordered indices). Not converged at small lambda, it "
        "does worse there on the validation set than at a larger lambda, where its gap is "
        "smaller but the model more biased"
        + (
            f" (section 2 selected {chosen['Stoch (Alg. 3)']:.0e} for Stoch, "
            f"{chosen['Explicit (all kernels)']:.0e} for the explicit solver)"
            if {"Stoch (Alg. 3)", "Explicit (all kernels)"} <= set(chosen)
            else ""
        )
        + ". This is a step budget, not a bug: the sampler is "
        "exact (tested: every ordered index drawn with probability |g_I| / ||g||_1 to 1e-10) and "
        "J / J* falls towards 1 as T grows on the same objective. The explicit solver meanwhile "
        f"solves the {math.comb(r + 3, 3):,}-kernel problem exactly in about "
        f"{ref['time']:.1f} s: while every kernel still fits in memory as a feature, a "
        "full-gradient method wins; Stoch is for kernel sets that do not fit (r = 50 here; the "
        f"paper ran Kloft only up to r = 25). The averaged iterate of Theorem 3.1 is {better} "
        "than the last one here (it keeps the early iterates, from theta = 0).",
    ]
    return out


DIFFERENCES = [
    "Where this run differs from the paper (Afkanpour, György, Szepesvári & Bowling, "
    '"A randomized mirror descent algorithm for large scale multiple kernel learning", §5.2):',
    "",
    "* **Methods**: Bach's HKL, Cortes et al.'s polynomial combination and Kloft et al.'s own "
    "code are not run. 'Explicit' is our exact solver of the *same* objective with every kernel "
    "(the role of Kloft et al.'s p-norm MKL, whose p = 2 is this paper's p = 4/3), 'Sum kernel' "
    "is the paper's 'Uniform'. 'Uniform sampling' (§5.1's UCD) is ours.",
    "* **Runs**: 3 (the paper: 10), to keep the full run near an hour on the shared, loaded box.",
    "* **r**: 5, 10, 20, 50 (the paper: 5, 10, 20, ..., 100). The explicit baseline runs where "
    "its features fit (r <= 20 here; the paper ran Kloft up to r = 25).",
    "* **Steps**: the paper does not give Stoch's number of steps or step size; T = 1,000 with "
    "Corollary 3.3's step (each step moves one weight by sqrt(2 / T)), last iterate, in both "
    "settings. Section 3 shows what more steps buy.",
    "* **Regularisation scale**: our objective is `(1/2n) sum (f - y)^2 + lam/2 * penalty` "
    "(the paper's eq. 1 with the mean loss L_n); §5 writes the loss as a sum, which would make "
    "the paper's lambda n = 500 times ours. The grid spans ten decades either way.",
    "* **Target**: 10 distinct monomials of degree 1-3 (the paper: 'of degree 3 or less'; a "
    "degree-0 term is removed by standardising y anyway).",
    "* **Machine**: numpy with one BLAS thread on a shared 2-core box; times are indicative.",
]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run, printed only")
    parser.add_argument("--settings", nargs="*", default=None, choices=list(SETTINGS))
    parser.add_argument("--r", type=int, nargs="*", default=None)
    parser.add_argument("--lams", type=float, nargs="*", default=None, help="override both grids")
    parser.add_argument("--runs", type=int, default=None, help="override both settings' runs")
    parser.add_argument("--n-iter", type=int, default=None)
    parser.add_argument("--explicit-max-kernels", type=int, default=2000)
    parser.add_argument("--explicit-iter", type=int, default=50)
    parser.add_argument("--conv-r", type=int, default=20)
    parser.add_argument("--conv-T", type=int, nargs="*", default=None)
    parser.add_argument("--out", default=None, help="write a partial run's report here")
    args = parser.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    defaults = dict(settings=list(SETTINGS), r=[5, 10, 20, 50], n_iter=1000,
                    conv_T=[1000, 2000, 4000])  # fmt: skip
    if args.quick:
        defaults.update(r=[5, 10], n_iter=200, conv_T=[200, 400])
    official = not args.quick and all(getattr(args, k) in (None, v) for k, v in defaults.items())
    official = official and args.lams is None and args.runs is None
    official = official and (args.explicit_max_kernels, args.explicit_iter, args.conv_r) == (
        2000,
        50,
        20,
    )
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.quick:
        args.runs, args.lams, args.conv_r = 2, [1e-4, 1e-2], 10
    out = [
        "# Randomized mirror descent MKL benchmark (synthetic monomials, §5.2)",
        "",
        f"`{' '.join(['benchmarks/randomized_mkl.py', *argv])}` — {machine()}; 1 BLAS thread; "
        "times are wall-clock seconds of one fit at the selected lambda.",
        "",
        "Test MSE on 1,000 points (the target has unit variance: MSE 1 = predicting the mean); "
        "lambda selected on 1,000 validation points. J / J* is Stoch's objective over the "
        "explicit optimum at the same lambda (1 = converged).",
        "",
        *DIFFERENCES,
    ]
    ours: list[dict] = []
    for name in ("paper", "ours"):
        if name in args.settings:
            rows = run_setting(args, name)
            out += report_setting(rows, name, args)
            ours = rows if name == "ours" else ours
    print("convergence in T")
    out += report_convergence(run_convergence(args), args, ours)
    out += [
        "",
        "Paper (Fig. 2, plots only, 10 runs): Stoch has the best test MSE for every r from "
        "5 to 100 at a training time close to Bach's HKL and Cortes et al.; Cortes degrades as "
        "r grows; Kloft (all kernels explicit) was run only up to r = 25 (8 GB of precomputed "
        "kernels); MSE axis 0-1, time axis 0-250 s.",
    ]
    publish("randomized_mkl", out[0].removeprefix("# "), "\n".join(out[2:]), official, args.out)


if __name__ == "__main__":
    main()
