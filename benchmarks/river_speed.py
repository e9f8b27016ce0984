"""The river learners per call against river's linear models, in one run: CPU time per example
(``time.process_time``), medians of ``--reps`` repeated runs, with a MET / MISSED verdict per
target of issue 25.

Rows:

- dense classification streams (Bananas, Phishing, Hyperplane with 10 inputs and 10,000
  examples): ``MKLClassifier(standardize=True).learn_predict_one`` (target >= 1x) and its
  ``predict_proba_one`` + ``learn_one`` (target >= 0.6x) against ``StandardScaler() |
  LogisticRegression()`` doing ``predict_proba_one`` + ``learn_one``;
- regression streams (Friedman with 10 inputs, TrumpApproval): ``MKLRegressor(standardize=True)``
  likewise against ``StandardScaler() | LinearRegression()``;
- a kernelized Gaussian block at the default budget (``StandardScaler() |
  MKLClassifier(kernels=(RBF(1/d),))``, ``predict_one`` + ``learn_one``): target >= 20,000
  examples/s on a 2-D (Bananas) and a 10-D (Hyperplane) stream;
- sparse streams: a bag-of-words stream (documents of ~20 words from a 5,000-word Zipf
  vocabulary, ``simulators.zipf_documents``, so new words arrive throughout;
  ``BagOfWords() | MKLClassifier()`` against ``BagOfWords() | LogisticRegression()``) and a
  one-hot categorical stream (``synth.Agrawal`` with its categorical attributes one-hot
  encoded; ``MKLClassifier(standardize=True)`` against ``StandardScaler() |
  LogisticRegression()``): target >= 0.5x at >= its accuracy. Both learners run on prefixes
  of ``--sparse-n`` examples (300 and 3,000 by default, one row each): the first 300
  documents bring new words in nearly every record (the growth at its most expensive), the
  first 3,000 show where the cost and the accuracy go as the stream goes on.

Every timed run starts after a full garbage collection (``gc.collect()``): a full collection
costs ~0.1 s in a process that has imported numba and river, and one owed by earlier work (the
compile, another learner's rows) would otherwise land in whichever learner's run comes next
(it moved the 300-document row between 130 and 590 µs per document). The collector stays on
during the run, so collections a learner's own allocations cause are charged to it.

Each learner warms up (compiled code loaded, the bandwidth warm-up passed) on the first
examples before the timed ones, except the sparse rows, which are timed from each learner's
first example (their cost includes the growth; the process warmed by a throwaway learner, whose
layouts are forgotten before each timed learner so that its rebuilds are made, not copied), then
again over the same examples once every input is known. Also measured: a fresh process's import
and first ``learn_one`` with an empty numba cache (what a fresh checkout pays once), unless
``--no-cold``.

Run: ``python benchmarks/river_speed.py [--reps 3] [--only kernelized]`` (``--only``: one
section's rows, printed, not written to ``results/``).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from simulators.zipf_documents import zipf_documents

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import add_out, documented_run, machine, markdown, publish

WARM = 1100  # examples before the timed ones (past the default bandwidth warm-up of 1,000)
VOCABULARY = 5000


def _bag_of_words(n: int) -> list[tuple[str, bool]]:
    """Documents of 10-30 words drawn from a Zipf(1.1) law over a 5,000-word vocabulary (rare
    words keep arriving), labelled by the sign of a random weight per word plus noise."""
    return zipf_documents(n, vocabulary=VOCABULARY, words=(10, 30), noise=1.0, seed=7)


def _one_hot_agrawal(n: int) -> list[tuple[dict, Any]]:
    """``synth.Agrawal`` with its categorical attributes (elevel, car, zipcode) one-hot."""
    from river.datasets import synth

    out = []
    for x, y in synth.Agrawal(seed=42, classification_function=0).take(n):
        row = {k: float(v) for k, v in x.items() if k not in ("elevel", "car", "zipcode")}
        for k in ("elevel", "car", "zipcode"):
            row[f"{k}={x[k]}"] = 1.0
        out.append((row, y))
    return out


def dense_stream(name: str) -> list[tuple[dict, Any]]:
    """The examples of a dense stream of the speed rows, in order."""
    from river import datasets
    from river.datasets import synth

    if name == "Bananas":
        return list(datasets.Bananas())
    if name == "Phishing":
        return list(datasets.Phishing())
    if name == "Hyperplane":
        return list(synth.Hyperplane(seed=42, n_features=10).take(10_000))
    if name == "Friedman":
        return list(synth.Friedman(seed=42).take(10_000))
    if name == "TrumpApproval":
        return list(datasets.TrumpApproval())
    raise ValueError(name)


def cpu_per_call(make: Callable[[], Any], warm: list, timed: list,
                  step: Callable[[Any, Any, Any], Any], reps: int) -> float:  # fmt: skip
    """Median µs of CPU time per example of ``step(model, x, y)`` over ``timed``, each run on a
    fresh model warmed on ``warm``."""
    times = []
    for _ in range(reps):
        model = make()
        for x, y in warm:
            step(model, x, y)
        gc.collect()  # a collection owed by earlier work is not charged to this run
        t0 = time.process_time()
        for x, y in timed:
            step(model, x, y)
        times.append((time.process_time() - t0) / len(timed) * 1e6)
    return statistics.median(times)


def two_calls(model: Any, x: Any, y: Any) -> None:
    """A classifier's round as river's evaluation calls it."""
    model.predict_proba_one(x)
    model.learn_one(x, y)


def two_calls_reg(model: Any, x: Any, y: Any) -> None:
    """A regressor's round as river's evaluation calls it."""
    model.predict_one(x)
    model.learn_one(x, y)


def one_call(model: Any, x: Any, y: Any) -> None:
    """The round in one call (``learn_predict_one``)."""
    model.learn_predict_one(x, y)


Step = Callable[[Any, Any, Any], Any]
DENSE_STREAMS = ("Bananas", "Phishing", "Hyperplane")


def interleaved_per_call(
    runs: dict[str, tuple[Callable[[], Any], Step]], reps: int,
    streams: Iterable[str] = DENSE_STREAMS,
) -> dict[str, dict[str, float]]:  # fmt: skip
    """Median µs of CPU time per call of every run (a learner's factory and a step, e.g.
    :func:`one_call`) on each dense stream, warmed and timed on the examples the dense rows
    use, the runs interleaved repetition by repetition so that they share the machine's
    moments: ``{stream: {run: median}}``. Prints each stream's medians as it ends."""
    out: dict[str, dict[str, float]] = {}
    for stream in streams:
        data = dense_stream(stream)
        warm, timed = data[:WARM], data[WARM:]
        times: dict[str, list[float]] = {r: [] for r in runs}
        for _ in range(reps):
            for r, (make, step) in runs.items():
                times[r].append(cpu_per_call(make, warm, timed, step, 1))
        out[stream] = {r: statistics.median(v) for r, v in times.items()}
        print(stream, {r: round(v, 2) for r, v in out[stream].items()}, flush=True)
    return out


def _verdict(ratio: float, target: float) -> str:
    return "met" if ratio >= target else "MISSED"


def dense_rows(reps: int) -> list[list[object]]:
    from river import linear_model, preprocessing

    from streammkl.river import MKLClassifier, MKLRegressor

    rows: list[list[object]] = []
    for name in ("Bananas", "Phishing", "Hyperplane"):
        data = dense_stream(name)
        warm, timed = data[:WARM], data[WARM:]

        def lr() -> Any:
            return preprocessing.StandardScaler() | linear_model.LogisticRegression()

        def mkl() -> Any:
            return MKLClassifier(standardize=True)

        ref = cpu_per_call(lr, warm, timed, two_calls, reps)
        one = cpu_per_call(mkl, warm, timed, one_call, reps)
        two = cpu_per_call(mkl, warm, timed, two_calls, reps)
        rows.append([name, "LogisticRegression", f"{ref:.2f}", f"{one:.2f}", f"{ref / one:.2f}x",
                     _verdict(ref / one, 1.0), f"{two:.2f}", f"{ref / two:.2f}x",
                     _verdict(ref / two, 0.6)])  # fmt: skip
        print(rows[-1], flush=True)
    for name in ("Friedman", "TrumpApproval"):
        data = dense_stream(name)
        cut = min(WARM, len(data) // 2)  # TrumpApproval has 1,001 examples
        warm, timed = data[:cut], data[cut:]

        def linreg() -> Any:
            return preprocessing.StandardScaler() | linear_model.LinearRegression()

        def mklr() -> Any:
            return MKLRegressor(standardize=True)

        ref = cpu_per_call(linreg, warm, timed, two_calls_reg, reps)
        one = cpu_per_call(mklr, warm, timed, one_call, reps)
        two = cpu_per_call(mklr, warm, timed, two_calls_reg, reps)
        rows.append([name, "LinearRegression", f"{ref:.2f}", f"{one:.2f}", f"{ref / one:.2f}x",
                     _verdict(ref / one, 1.0), f"{two:.2f}", f"{ref / two:.2f}x",
                     _verdict(ref / two, 0.6)])  # fmt: skip
        print(rows[-1], flush=True)
    return rows


def kernelized_rows(reps: int) -> list[list[object]]:
    from river import preprocessing

    from streammkl.core import kernels
    from streammkl.river import MKLClassifier

    rows: list[list[object]] = []
    for name, d in (("Bananas", 2), ("Hyperplane", 10)):
        data = dense_stream(name)
        warm, timed = data[:WARM], data[WARM : WARM + 5000]

        def make(d: int = d) -> Any:
            return preprocessing.StandardScaler() | MKLClassifier(kernels=(kernels.RBF(1.0 / d),))

        def step(model: Any, x: Any, y: Any) -> None:
            model.predict_one(x)
            model.learn_one(x, y)

        us = cpu_per_call(make, warm, timed, step, reps)
        rate = 1e6 / us
        rows.append([f"{name} ({d}-D)", f"{rate:,.0f}", ">= 20,000",
                     "met" if rate >= 20_000 else "MISSED"])  # fmt: skip
        print(rows[-1], flush=True)
    return rows


def _accuracy_and_time(model: Any, data: Iterable[tuple[Any, Any]]) -> tuple[float, float]:
    hits = n = 0
    gc.collect()  # a collection owed by earlier work is not charged to this run
    t0 = time.process_time()
    for x, y in data:
        p = model.predict_proba_one(x)
        hits += bool(p) and max(p, key=p.get) == y
        model.learn_one(x, y)
        n += 1
    return hits / n, (time.process_time() - t0) / n * 1e6


def sparse_rows(n: int, reps: int) -> list[list[object]]:
    """The sparse rows: each learner timed from its first example (the growth included), the
    median of ``reps`` fresh learners, after one throwaway learner has loaded the compiled code
    into the process (a one-time cost per process, not per example), each fresh learner's
    rebuilds made anew as on a stream the process has not met (the layouts built lately
    forgotten before each run); then the last of them over the same examples again, when every
    input is known (the cost of a round alone)."""
    from river import feature_extraction, linear_model, preprocessing

    from streammkl.core.layout import forget_built_layouts
    from streammkl.river import MKLClassifier

    rows: list[list[object]] = []
    docs = _bag_of_words(n)  # (prefixes of the same streams whatever n)
    hot = _one_hot_agrawal(n)
    cases = [
        ("bag of words (5,000-word Zipf)", docs,
         lambda: feature_extraction.BagOfWords() | linear_model.LogisticRegression(),
         lambda: feature_extraction.BagOfWords() | MKLClassifier()),
        ("one-hot Agrawal", hot,
         lambda: preprocessing.StandardScaler() | linear_model.LogisticRegression(),
         lambda: MKLClassifier(standardize=True)),
    ]  # fmt: skip
    for label, data, ref_make, mkl_make in cases:
        timed = []
        for make in (ref_make, mkl_make):
            _accuracy_and_time(make(), data[:50])  # the process warmed: compiled code loaded
            runs = []
            for _ in range(reps):
                forget_built_layouts()  # (rebuilds made, as on a new stream: not the copies
                model = make()  # the throwaway learner's or an earlier run's would hand out)
                runs.append(_accuracy_and_time(model, data))
            again = _accuracy_and_time(model, data)[1]  # every input known now
            timed.append((runs[0][0], statistics.median(t for _, t in runs), again))
        (ref_acc, ref_us, ref_again), (acc, us, again) = timed
        ratio = ref_us / us
        ok = ratio >= 0.5 and acc >= ref_acc
        rows.append([label, n, f"{ref_us:.1f}", f"{us:.1f}", f"{ratio:.3f}x",
                     f"{100 * ref_acc:.1f} %", f"{100 * acc:.1f} %",
                     "met" if ok else "MISSED", f"{ref_again:.1f}", f"{again:.1f}",
                     f"{ref_again / again:.2f}x"])  # fmt: skip
        print(rows[-1], flush=True)
    return rows


def cold_start() -> str:
    """A fresh process's import and first ``learn_one`` / ``predict_proba_one`` with an empty
    numba cache (wall time)."""
    code = (
        "import time; t0 = time.perf_counter()\n"
        "from river import datasets\n"
        "from streammkl.river import MKLClassifier\n"
        "x, y = next(iter(datasets.Bananas())); m = MKLClassifier(standardize=True)\n"
        "t1 = time.perf_counter(); m.learn_one(x, y); t2 = time.perf_counter()\n"
        "m.predict_proba_one(x); t3 = time.perf_counter()\n"
        "print(f'{t1 - t0:.1f} {t2 - t1:.1f} {t3 - t2:.1f}')\n"
    )
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True)  # fmt: skip
    imp, learn, pred = out.stdout.split()
    return (f"A fresh process with an empty numba cache: import {imp} s, first `learn_one` "
            f"{learn} s, first `predict_proba_one` {pred} s (wall time).")  # fmt: skip


#: The sections of rows ``--only`` selects (every one by default).
SECTIONS = ("dense", "kernelized", "sparse")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3, help="repeated runs per timing")
    parser.add_argument(
        "--sparse-n", default="300,3000", help="prefix lengths of the sparse rows (a row each)"
    )
    parser.add_argument("--no-cold", action="store_true", help="skip the cold-start measure")
    parser.add_argument(
        "--only",
        choices=("all", *SECTIONS),
        default="all",
        help="run one section's rows (a partial run: printed, not written to results/)",
    )
    add_out(parser)
    args = parser.parse_args()
    start = machine()
    run = SECTIONS if args.only == "all" else (args.only,)
    dense = dense_rows(args.reps) if "dense" in run else []
    kern = kernelized_rows(args.reps) if "kernelized" in run else []
    ns = map(int, args.sparse_n.split(",")) if "sparse" in run else ()
    sparse = [row for n in ns for row in sparse_rows(n, args.reps)]
    cold = "" if args.no_cold or args.only != "all" else cold_start()
    body = (
        f"Measured on {start} (load average {os.getloadavg()[0]:.2f} at the end); CPU time "
        f"per example, median of {args.reps} runs, each after a full garbage collection; each "
        f"learner warmed on the first {WARM:,} examples of a stream and timed on the rest.\n\n"
        + markdown(
            [
                "stream",
                "river reference",
                "reference µs",
                "learn_predict_one µs",
                "ratio",
                "target >= 1x",
                "predict + learn_one µs",
                "ratio",
                "target >= 0.6x",
            ],
            dense,
        )
        + "\n\nA kernelized Gaussian block at the default budget through the river API "
        "(`StandardScaler() | MKLClassifier(kernels=(RBF(1/d),))`, `predict_one` + `learn_one`, "
        "5,000 timed examples):\n\n"
        + markdown(["stream", "examples/s", "target", ""], kern)
        + "\n\nSparse and wide inputs (timed from each learner's first example, the process "
        "warmed: the cost includes the growth, its rebuilds made as on a new stream, not copied "
        "from the throwaway learner's; median of the runs; prequential accuracy over the "
        "same examples; then the same learners over the same examples again, every input "
        "known: a round alone):\n\n"
        + markdown(
            [
                "stream",
                "examples",
                "river LogisticRegression µs",
                "MKLClassifier µs",
                "ratio (target >= 0.5x)",
                "LR accuracy",
                "MKL accuracy",
                "",
                "again: LR µs",
                "again: MKL µs",
                "ratio",
            ],
            sparse,
        )
        + (f"\n\n{cold}" if cold else "")
    )
    full = documented_run(parser, args)
    publish("river_speed", "River learners per call", body, full=full, out=args.out)


if __name__ == "__main__":
    main()
