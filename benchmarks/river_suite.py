"""river benchmark suite: prequential accuracy and learn+predict throughput of streammkl's
``MKLClassifier`` / ``MKLRegressor`` against river's learners, MOA's learners (Java, through
CapyMOA: ARF, StreamingRandomPatches, HoeffdingAdaptiveTree, kNN, OnlineBagging,
LeveragingBagging, NaiveBayes; SOKNL, ARF and kNN regressors) and Vowpal Wabbit's online kernel
SVM, all measured in one run on river's bundled datasets and ``river.datasets.synth`` streams.

Honest protocol: the defaults in ``streammkl.river.defaults`` were chosen on the streams marked
*development* (Bananas, Phishing, SEA with drift, Hyperplane); every other stream is
*validation*, reported as measured. No setting depends on the stream being run.

Protocol: each stream is materialised into a list first (loading is not timed); every model then
runs test-then-train (``predict_one`` then ``learn_one`` per example) and the wall clock covers
exactly that loop; metrics are computed afterwards from the recorded predictions. Every model
first runs a 50-example warm-up on a throw-away instance (numba compilation, imports, the JVM).
The streammkl rows (the default learner, each of its kernels alone, the average kernel) run once
per seed (``seed=0..4``; ``--seeds N``) and report mean ± standard deviation; every other row
runs once (with ``SEED`` where it takes a seed). The MOA rows feed each river dict to CapyMOA as
a MOA instance (``benchmarks/_moa.py``) and report their throughput end to end and without that
conversion.

Install: MOA's rows need the ``moa`` extra (CapyMOA, in ``dev`` too) and a Java runtime:
``bash benchmarks/install-java.sh`` (Debian's ``default-jre-headless``; ``make java-runtime``).
Without them the suite still runs and the MOA rows say "not run" and why.

Run: ``.venv/bin/python benchmarks/river_suite.py [--quick] [--datasets bananas,phishing]
[--models mkl,moa] [--seeds N] [--out PATH]``. Only the full, documented run (no options;
``make bench-river``) writes ``benchmarks/results/river_suite.md``, from which the README's
tables are generated; a partial run (``--quick``, ``--datasets``, ``--models``, ``--seeds``)
prints its report, or writes it where ``--out`` says (never over the committed results).
"""

from __future__ import annotations

import argparse
import itertools
import re
import statistics
import sys
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _moa
from _table import machine, markdown, publish
from river import base, datasets, forest, linear_model, metrics, neighbors, preprocessing, tree
from river.datasets import synth

from streammkl.core import regularizers
from streammkl.river import (
    MemoryClassifier,
    MemoryRegressor,
    MKLClassifier,
    MKLRegressor,
    defaults,
)

FULL, QUICK = 20_000, 2_000
PREFIX = 10_000  # VW ksvm runs on at most this many examples; every model also reports this prefix
WARMUP = 50
SEED = 42
VW_GRID = (0.01, 0.1, 1.0, 10.0)  # VW's rbf "bandwidth" b: k(x, x') = exp(-b ||x - x'||^2)
VW_DEFAULT = 1.0
SEEDS = 5  # the streammkl rows run with seed=0..SEEDS-1 (--seeds) and report mean ± sd
SEEDED = ("mkl", "memory", "single", "average")  # the row groups that run once per seed


@dataclass(frozen=True)
class Dataset:
    key: str
    title: str
    task: str  # "binary", "multiclass" or "regression"
    load: Callable[[], Any]
    note: str = ""
    role: str = "validation"  # "development": the defaults were chosen on it


def _sea_drift() -> Any:
    sea = synth.SEA
    return synth.ConceptDriftStream(
        sea(variant=0, noise=0.1, seed=SEED), sea(variant=3, noise=0.1, seed=SEED + 1),
        position=5_000, width=1_000, seed=SEED,
    )  # fmt: skip


def _rbf_drift() -> Any:
    return synth.RandomRBFDrift(
        seed_model=SEED, seed_sample=SEED, n_classes=2, n_features=10, n_centroids=50,
        change_speed=1e-4, n_drift_centroids=25,
    )  # fmt: skip


def _hyperplane() -> Any:
    return synth.Hyperplane(
        seed=SEED, n_features=10, n_drift_features=2, mag_change=0.001, noise_percentage=0.05,
        sigma=0.1,
    )  # fmt: skip


def _led() -> Any:
    return synth.LEDDrift(
        seed=SEED, noise_percentage=0.1, irrelevant_features=True, n_drift_features=4
    )


SHUTTLE = (
    "river bundles Statlog Shuttle as the ODDS binary anomaly task (the majority class vs the "
    "rare classes, the second-largest class dropped), not the 7-class UCI version; used as bundled."
)
SEA = (
    "`synth.ConceptDriftStream(SEA(variant=0, noise=0.1, seed=42), SEA(variant=3, noise=0.1, "
    "seed=43), position=5_000, width=1_000, seed=42)`: the threshold on x0 + x1 moves from 8 to "
    "9.5 around example 5,000 (inside the VW window); 10% label noise."
)
RBF = (
    "`synth.RandomRBFDrift(seed_model=42, seed_sample=42, n_classes=2, n_features=10, "
    "n_centroids=50, change_speed=1e-4, n_drift_centroids=25)`: moving Gaussian blobs."
)
HYPERPLANE = (
    "`synth.Hyperplane(seed=42, n_features=10, n_drift_features=2, mag_change=0.001, "
    "noise_percentage=0.05, sigma=0.1)`: a rotating hyperplane, 5% label noise."
)
SINE = "`synth.Sine(seed=42, classification_function=0, has_noise=True)`: two noise inputs."
LED = (
    "`synth.LEDDrift(seed=42, noise_percentage=0.1, irrelevant_features=True, "
    "n_drift_features=4)`: the 7-segment digit from 24 binary inputs, 10% noise."
)
AGRAWAL = "`synth.Agrawal(seed=42, classification_function=0)`: a loan rule on 9 attributes."
FRIEDMAN = (
    "`synth.Friedman(seed=42)`: y = 10 sin(pi x0 x1) + 20 (x2 - 1/2)^2 + 10 x3 + 5 x4 + noise."
)
DATASETS = {
    d.key: d
    for d in (
        Dataset("bananas", "Bananas", "binary", datasets.Bananas, role="development"),
        Dataset("phishing", "Phishing", "binary", datasets.Phishing, role="development"),
        Dataset("image-segments", "ImageSegments", "multiclass", datasets.ImageSegments),
        Dataset("shuttle", "Shuttle", "binary", datasets.Shuttle, SHUTTLE),
        Dataset("sea-drift", "SEA with concept drift (synthetic)", "binary", _sea_drift, SEA,
                "development"),
        Dataset("hyperplane", "Hyperplane (synthetic)", "binary", _hyperplane, HYPERPLANE,
                "development"),
        Dataset("rbf-drift", "RandomRBFDrift (synthetic)", "binary", _rbf_drift, RBF),
        Dataset("sine", "Sine (synthetic)", "binary", lambda: synth.Sine(seed=SEED,
                classification_function=0, has_noise=True), SINE),
        Dataset("led", "LEDDrift (synthetic)", "multiclass", _led, LED),
        Dataset("agrawal", "Agrawal (synthetic)", "binary",
                lambda: synth.Agrawal(seed=SEED, classification_function=0), AGRAWAL),
        Dataset("trump-approval", "TrumpApproval", "regression", datasets.TrumpApproval),
        Dataset("chick-weights", "ChickWeights", "regression", datasets.ChickWeights),
        Dataset("friedman", "Friedman (synthetic)", "regression",
                lambda: synth.Friedman(seed=SEED), FRIEDMAN),
        Dataset("sp500", "SP500Stocks", "regression", datasets.SP500Stocks),
    )
}  # fmt: skip
DEFAULT = list(DATASETS)


# --- models -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Spec:
    """A row: ``make(seed)`` builds a fresh learner (None = cannot run here; ``note`` says why).

    A ``seeded`` row runs once per seed of the run (``--seeds``) and reports mean ± standard
    deviation; every other row runs once, with ``SEED`` where its learner takes a seed.
    ``missing``, asked only when the row is selected, says why it cannot run on this machine.
    """

    key: str
    label: str
    make: Callable[[int], Any] | None
    group: str = ""
    max_n: int | None = None
    note: str = ""
    seeded: bool = False
    missing: Callable[[], str] | None = None


def _scaled(est: Any) -> Any:
    return preprocessing.StandardScaler() | est


def _single(i: int) -> Callable[[int], Any]:
    return lambda seed: _scaled(MKLClassifier(kernels=(defaults.kernel_bank()[i],), seed=seed))


def _average(seed: int) -> Any:
    return _scaled(MKLClassifier(regularizer=regularizers.L2(defaults.LAMBDA), seed=seed))


def moa_specs(features: Sequence, classes: Sequence | None) -> list[Spec]:
    """MOA's learners through CapyMOA, CapyMOA's defaults, raw features (``classes`` None:
    the regressors)."""
    rows = _moa.CLASSIFIERS if classes is not None else _moa.REGRESSORS
    specs = []
    for key, (_, label) in rows.items():
        if classes is None:
            make = lambda seed, k=key: _moa.CapyMOARegressor(k, features, seed)  # noqa: E731
        else:
            make = lambda seed, k=key: _moa.CapyMOAClassifier(k, features, classes, seed)  # noqa: E731
        specs.append(Spec(f"moa:{key}", label, make, "moa", note="no scaler",
                          missing=_moa.unavailable))  # fmt: skip
    return specs


def classifier_specs(
    binary: bool, n_classes: int, vw_oaa: bool, vw_max: int, features: Sequence, classes: Sequence
) -> list[Spec]:
    names = [k.name for k in defaults.kernel_bank()]
    lin = linear_model.LogisticRegression if binary else linear_model.SoftmaxRegression
    hat, arf = tree.HoeffdingAdaptiveTreeClassifier, forest.ARFClassifier
    rows = [
        ("mkl", "MKL (default bank)", lambda seed: _scaled(MKLClassifier(seed=seed)), "mkl", ""),
        ("memory", "MKL + memory (MemoryClassifier)",
         lambda seed: _scaled(MemoryClassifier(MKLClassifier(seed=seed))), "memory",
         "the default learner and a Parzen vote of its last 1,000 inputs, hedged"),
        *((f"single:{nm}", f"single kernel: {nm}", _single(i), "single", "")
          for i, nm in enumerate(names)),
        ("average", "average (L2, sum of kernels)", _average, "average",
         f"all {len(names)} kernels, regularizer L2({defaults.LAMBDA:g})"),
        ("linear", f"river {lin.__name__}", lambda seed: _scaled(lin()), "river", ""),
        ("hat", "river HoeffdingAdaptiveTree", lambda seed: hat(seed=seed), "river", "no scaler"),
        ("arf", "river ARF (10 models)", lambda seed: arf(seed=seed), "river", "no scaler"),
        ("knn", "river KNN", lambda seed: _scaled(neighbors.KNNClassifier()), "river", ""),
    ]  # fmt: skip
    specs = [
        Spec(key, label, make, group, note=note, seeded=group in SEEDED)
        for key, label, make, group, note in rows
    ]
    specs += moa_specs(features, classes)
    vw = f"vw:{VW_DEFAULT:g}"
    if binary:
        specs += [Spec(f"vw:{b:g}", f"VW ksvm rbf, bandwidth {b:g}",
                       lambda seed, b=b: _scaled(VWKernelSVM(b)), "vw", vw_max)
                  for b in VW_GRID]  # fmt: skip
    elif vw_oaa:
        make = lambda seed: _scaled(VWKernelSVM(VW_DEFAULT, n_classes))  # noqa: E731
        label = f"VW ksvm rbf --oaa {n_classes}, bandwidth {VW_DEFAULT:g}"
        specs.append(Spec(vw, label, make, "vw", vw_max, "default bandwidth only (slow)"))
    else:
        note = "not run: ksvm is binary; under `--oaa` it is too slow here (see notes)"
        specs.append(Spec("vw", "VW ksvm rbf", None, "vw", note=note))
    return specs


def regressor_specs(features: Sequence) -> list[Spec]:
    rows = [
        ("mkl", "MKLRegressor (default bank)", lambda seed: MKLRegressor(seed=seed)),
        ("linear", "river LinearRegression", lambda seed: linear_model.LinearRegression()),
        ("hat", "river HoeffdingAdaptiveTreeRegressor",
         lambda seed: tree.HoeffdingAdaptiveTreeRegressor(seed=seed)),
        ("knn", "river KNNRegressor", lambda seed: neighbors.KNNRegressor()),
    ]  # fmt: skip
    specs = [
        Spec(k, label, lambda seed, m=m: _scaled(m(seed)), "mkl" if k == "mkl" else "river",
             seeded=k == "mkl")
        for k, label, m in rows
    ]  # fmt: skip
    specs.append(Spec(  # the scaler inside: the memory reads the raw inputs (trending ones)
        "memory", "MKL + residual memory (MemoryRegressor)",
        lambda seed: MemoryRegressor(preprocessing.StandardScaler() | MKLRegressor(seed=seed)),
        "memory", note="the default and its residuals' Parzen mean over the last 1,000, hedged",
        seeded=True,
    ))  # fmt: skip
    return specs + moa_specs(features, None)


class VWKernelSVM(base.Classifier):
    """Vowpal Wabbit's online kernel SVM (``--ksvm --kernel rbf``) as a river classifier.

    Binary (labels in order of arrival become -1, +1); with ``n_classes`` VW's ``--oaa`` is
    stacked on ``--ksvm``. Each call formats the dict as a VW text line and parses it.
    """

    def __init__(self, bandwidth: float = VW_DEFAULT, n_classes: int | None = None):
        self.bandwidth = bandwidth
        self.n_classes = n_classes
        self._vw: Any = None
        self._classes: list = []
        self._names: dict = {}

    def _workspace(self) -> Any:
        if self._vw is None:
            from vowpalwabbit import Workspace

            oaa = f"--oaa {self.n_classes} " if self.n_classes else ""
            self._vw = Workspace(f"{oaa}--ksvm --kernel rbf --bandwidth {self.bandwidth} --quiet")
        return self._vw

    def _line(self, x: dict, label: str = "") -> str:
        names, parts = self._names, []
        for k, v in x.items():
            name = names.get(k)
            if name is None:
                name = names[k] = re.sub(r"[\s:|]", "_", str(k))
            parts.append(f"{name}:{float(v):.9g}")
        return f"{label} |f {' '.join(parts)}"

    def learn_one(self, x: dict, y: Any) -> None:
        if y not in self._classes:
            limit = self.n_classes or 2
            if len(self._classes) == limit:
                raise ValueError(
                    f"VWKernelSVM: class {y!r} is one more than the {limit} it handles"
                )
            self._classes.append(y)
        k = self._classes.index(y)
        label = str(k + 1) if self.n_classes else ("1" if k == 1 else "-1")
        self._workspace().learn(self._line(x, label))

    def predict_one(self, x: dict) -> Any:
        if not self._classes:
            return None
        p = self._workspace().predict(self._line(x))
        if self.n_classes:
            i = int(p) - 1
            return self._classes[i] if 0 <= i < len(self._classes) else self._classes[0]
        return self._classes[1] if p > 0 and len(self._classes) == 2 else self._classes[0]

    def close(self) -> None:
        if self._vw is not None:
            self._vw.finish()
            self._vw = None


def close(model: Any) -> None:
    """Release native resources (VW workspaces) of a learner or of a pipeline's steps."""
    for step in getattr(model, "steps", {}).values() or [model]:
        if hasattr(step, "close"):
            step.close()


def final(model: Any) -> Any:
    steps = getattr(model, "steps", None)
    return list(steps.values())[-1] if steps else model


@dataclass
class Result:
    """One (dataset, model) row: metrics over the stream and over its first ``PREFIX`` examples.

    A seeded row holds one run per seed in ``runs`` / ``prefix_runs``; ``scores`` and ``prefix``
    are their means and ``seconds`` their median. ``conversion`` is the part of ``seconds`` spent
    converting river dicts for MOA (NaN for other rows).
    """

    dataset: str
    key: str
    label: str
    n: int = 0
    seconds: float = float("nan")
    scores: dict[str, float] = field(default_factory=dict)
    prefix: dict[str, float] = field(default_factory=dict)
    note: str = ""
    runs: list[dict[str, float]] = field(default_factory=list)
    prefix_runs: list[dict[str, float]] = field(default_factory=list)
    seeds: tuple[int, ...] = ()
    conversion: float = float("nan")

    @property
    def throughput(self) -> float:
        return self.n / self.seconds if self.seconds > 0 else float("nan")

    @property
    def accuracy(self) -> float:
        return self.scores.get("accuracy", float("nan"))

    def sd(self, metric: str, prefix: bool = False) -> float:
        """Standard deviation over the seeds (sample, n - 1); NaN for a single run."""
        values = [r[metric] for r in (self.prefix_runs if prefix else self.runs) if metric in r]
        return statistics.stdev(values) if len(values) > 1 else float("nan")

    def spread(self, metric: str) -> float:
        """max - min over the seeds; NaN for a single run."""
        values = [r[metric] for r in self.runs if metric in r]
        return max(values) - min(values) if len(values) > 1 else float("nan")

    @property
    def moa_throughput(self) -> float:
        """Examples/s of the MOA calls alone: the loop's time less our dict conversion."""
        left = self.seconds - self.conversion
        return self.n / left if left > 0 else float("nan")


def stream(key: str, n: int | None) -> list[tuple[dict, Any]]:
    """The first n examples of a dataset, materialised (n=None: the whole bundled file)."""
    return list(itertools.islice(DATASETS[key].load(), n))


def _scores(task: str, ys: Sequence, preds: Sequence) -> dict[str, float]:
    ms = {"accuracy": metrics.Accuracy()}
    if task == "regression":
        ms = {"MAE": metrics.MAE(), "RMSE": metrics.RMSE()}
    for y, p in zip(ys, preds, strict=True):
        for m in ms.values():
            m.update(y, p)
    return {name: m.get() for name, m in ms.items()}


def prequential(
    model: Any, data: Sequence[tuple[dict, Any]], task: str
) -> tuple[dict, dict, float]:
    """Test-then-train over ``data``: (scores, scores on the first PREFIX, seconds of the loop)."""
    preds = []
    predict, learn = model.predict_one, model.learn_one
    start = time.perf_counter()
    for x, y in data:
        preds.append(predict(x))
        learn(x, y)
    seconds = time.perf_counter() - start
    ys = [y for _, y in data]
    prefix = _scores(task, ys[:PREFIX], preds[:PREFIX]) if len(data) > PREFIX else {}
    return _scores(task, ys, preds), prefix, seconds


def run_dataset(
    key: str,
    n: int | None,
    models: Sequence[str] | None = None,
    data: list | None = None,
    vw_oaa: bool = False,
    progress: Callable[[str], None] = print,
    seeds: int = SEEDS,
) -> list[Result]:
    """Run every model (or the named model keys or groups) prequentially on one dataset."""
    ds = DATASETS[key]
    data = stream(key, n) if data is None else data
    features = list(dict.fromkeys(k for x, _ in data for k in x))
    if ds.task == "regression":
        specs = regressor_specs(features)
    else:
        classes = _moa.sorted_labels([y for _, y in data])
        specs = classifier_specs(
            ds.task == "binary", len(classes), vw_oaa, PREFIX, features, classes
        )
    results = []
    for spec in specs:
        if models is not None and spec.key not in models and spec.group not in models:
            continue
        reason = spec.missing() if spec.missing is not None else ""
        if spec.make is None or reason:  # a row that cannot run here; the reason is its note
            results.append(Result(key, spec.key, spec.label, note=reason or spec.note))
            continue
        part = data if spec.max_n is None else data[: spec.max_n]
        try:
            res = _run(ds, spec, part, range(seeds) if spec.seeded else (SEED,), progress)
        except Exception as exc:  # one broken row is reported in its place, not the whole run lost
            note = f"FAILED: {type(exc).__name__}: {exc}".strip().rstrip(":")
            progress(f"[{key}] {spec.label}: {note}")
            res = Result(key, spec.key, spec.label, note=note)
        results.append(res)
    return results


def _run(
    ds: Dataset, spec: Spec, part: list, seeds: Sequence[int], progress: Callable[[str], None]
) -> Result:
    """One row: a warm-up on a throw-away instance, then one timed run per seed."""
    assert spec.make is not None
    many = f" × {len(seeds)} seeds" if len(seeds) > 1 else ""
    progress(f"[{ds.key}] {spec.label} on {len(part):,} examples{many} ...")
    warm = spec.make(seeds[0])
    prequential(warm, part[:WARMUP], ds.task)
    close(warm)
    runs, prefixes, times, conversions, weights = [], [], [], [], ""
    for seed in seeds:
        model = spec.make(seed)
        scores, prefix, seconds = prequential(model, part, ds.task)
        close(model)
        runs.append(scores)
        prefixes.append(prefix)
        times.append(seconds)
        conversions.append(getattr(final(model), "conversion_seconds", NAN))
        weights = weights or _weights(model)
    seeded = f"mean ± sd over seeds {seeds[0]}–{seeds[-1]}" if len(seeds) > 1 else ""
    if weights and seeded:
        weights = f"{weights} (seed {seeds[0]})"
    middle = sorted(range(len(times)), key=times.__getitem__)[len(times) // 2]  # the median run
    res = Result(
        ds.key, spec.key, spec.label, len(part), times[middle], _mean(runs), _mean(prefixes),
        "; ".join(filter(None, [seeded, spec.note, weights])), runs if seeded else [],
        prefixes if seeded else [], tuple(seeds), conversions[middle],
    )  # fmt: skip
    shown = ", ".join(f"{k} {v:.4f}" for k, v in res.scores.items())
    spread = ", ".join(f"sd {res.sd(k):.4f}" for k in res.scores) if seeded else ""
    progress(f"[{ds.key}] {spec.label}: {shown}{' (' + spread + ')' if spread else ''}, "
             f"{res.throughput:,.0f} examples/s ({res.seconds:.1f} s)")  # fmt: skip
    return res


def _mean(runs: Sequence[dict[str, float]]) -> dict[str, float]:
    if not runs or not runs[0]:
        return {}
    return {k: statistics.fmean(r[k] for r in runs) for k in runs[0]}


# --- report -------------------------------------------------------------------------------------
NAN = float("nan")
MATRIX_LABELS = {
    "linear": "river LogisticRegression (binary) / SoftmaxRegression",
    "vw": f"VW ksvm rbf, default bandwidth {VW_DEFAULT:g}",
    "vw-tuned": "VW ksvm rbf, tuned (bandwidth per stream: see below)",
}


def _num(v: float | None, spec: str = "") -> object:
    if v is None or v != v:
        return "—"
    return format(v, spec) if spec else v


def _weights(model: Any) -> str:
    """streammkl's kernel weights at the end of the stream, largest first ("" for others)."""
    w = getattr(final(model), "kernel_weights", None)
    top = sorted(((b, k) for k, b in (w or {}).items() if b > 0), reverse=True)
    return ("β " + ", ".join(f"{k} {b:.2f}" for b, k in top)) if top else ""


def _vw_rows(results: list[Result]) -> list[Result]:
    """Bandwidth-grid runs -> a default-bandwidth row and a tuned (best of the grid) row."""
    grid = [r for r in results if r.key.startswith("vw:") and r.n]
    out = [r for r in results if r not in grid]
    for r in grid:
        if r.key == f"vw:{VW_DEFAULT:g}":
            label = f"{r.label.split(',')[0]}, default bandwidth {VW_DEFAULT:g}"
            out.append(replace(r, key="vw", label=label))
    if len(grid) > 1:
        best = max(grid, key=lambda r: r.accuracy)
        by_b = ", ".join(f"{r.key[3:]}: {r.accuracy:.4f}" for r in grid)
        note = f"best of the grid, tuned on this same stream; by bandwidth {by_b}"
        label = f"VW ksvm rbf, tuned (bandwidth {best.key[3:]})"
        out.append(replace(best, key="vw-tuned", label=label, note=note))
    return out


def _acc(r: Result | None, n: int) -> tuple[float, float]:
    """(accuracy over the stream, accuracy over its first PREFIX); NaN where not run."""
    if r is None or not r.n:
        return NAN, NAN
    if r.n < n:  # ran on the prefix only
        return NAN, r.accuracy
    return r.accuracy, r.prefix.get("accuracy", NAN)


def _fmt(value: float, sd: float = NAN, spec: str = ".4f", sd_spec: str = "") -> str:
    """``value`` (``± sd`` for a seeded row); "—" where not measured."""
    if value != value:
        return "—"
    return f"{value:{spec}}" + (f" ± {sd:{sd_spec or spec}}" if sd == sd else "")


def _score(r: Result, metric: str, prefix: bool = False) -> str:
    """Accuracy to 4 decimals; MAE / RMSE to 4 significant digits, their sd to 2."""
    specs = (".4f", ".4f") if metric == "accuracy" else (".4g", ".2g")
    value = (r.prefix if prefix else r.scores).get(metric, NAN)
    return _fmt(value, r.sd(metric, prefix), *specs)


def _cell(r: Result | None, n: int) -> str:
    """A matrix cell: accuracy over the stream, or over the prefix (†) for a prefix-only row."""
    if r is None or not r.n:
        return "—"
    return f"{r.accuracy:.4f}†" if r.n < n else _score(r, "accuracy")


def _moa_note(r: Result) -> str:
    if r.conversion != r.conversion:
        return ""
    per = r.conversion / r.n * 1e6
    return (f"without our conversion {r.moa_throughput:,.0f} examples/s "
            f"(conversion {per:.1f} µs/example)")  # fmt: skip


def _section(ds: Dataset, data: list, results: list[Result], cap: int) -> str:
    n, d = len(data), len({k for x, _ in data for k in x})
    facts = f"{n:,} examples{' (the first ' + f'{n:,})' if n == cap else ''}, {d} features"
    wide = ds.task != "regression" and n > PREFIX
    if ds.task == "regression":
        head = ["model", "MAE", "RMSE"]
    else:
        ys = [y for _, y in data]
        facts += f", {len(set(ys))} classes, majority class {max(map(ys.count, set(ys))) / n:.4f}"
        head = ["model", "accuracy"] + ([f"accuracy, first {PREFIX:,}"] if wide else [])
    rows = []
    for r in results:
        if ds.task == "regression":
            row = [r.label, _score(r, "MAE"), _score(r, "RMSE")]
        elif 0 < r.n < n:
            row = [r.label, "—"] + ([_fmt(r.accuracy)] if wide else [])
        else:
            row = [r.label, _score(r, "accuracy")] + ([_score(r, "accuracy", True)] if wide else [])
        note = "; ".join(filter(None, [r.note, _moa_note(r)]))
        if 0 < r.n < n:
            note = "; ".join(filter(None, [f"first {r.n:,} examples only", note]))
        rows.append([*row, _num(r.throughput), _num(r.seconds, ".2f"), note])
    table = markdown([*head, "examples/s", "seconds", "notes"], rows)
    return f"### {ds.title}\n\n{facts}.{' ' + ds.note if ds.note else ''}\n\n{table}\n"


REGRESSION_TARGETS = ("trump-approval", "chick-weights", "friedman")
RIVER = ("linear", "hat", "arf", "knn")
TIE = 0.0005  # issue 27: against the best peer, a tie within 0.05 point counts as met
SPREAD = 0.005  # issue 27: the default learner's seed spread (max - min) at most 0.5 point


def peers(results: list[Result], n: int) -> list[Result]:
    """The rows that ran on the whole stream and are peers: river, MOA, untuned VW."""
    return [
        r for r in results
        if r.n == n and (r.key in RIVER or r.key.startswith("moa:") or r.key == "vw")
    ]  # fmt: skip


def best_peer(ds: Dataset, results: list[Result], n: int) -> Result | None:
    """The best peer on the whole stream (accuracy, or MAE for regression), None if none ran."""
    rows = peers(results, n)
    if not rows:
        return None
    if ds.task == "regression":
        return min(rows, key=lambda r: r.scores["MAE"])
    return max(rows, key=lambda r: r.accuracy)


def summary(runs: list[tuple[Dataset, list, list[Result]]]) -> list[list[object]]:
    """The targets, one row per (target, dataset): met / MISSED / not measured."""
    rows: list[list[object]] = []
    for ds, data, results in runs:
        by = {r.key: r for r in results if r.n}
        mkl = by.get("mkl")
        if mkl is None:
            continue

        def add(
            target: str, ok: bool | None, numbers: str, title: str = ds.title, role: str = ds.role
        ) -> None:
            status = "not measured" if ok is None else "met" if ok else "MISSED"
            rows.append([target, title, role, status, numbers])

        peer = best_peer(ds, results, len(data))
        if ds.task == "regression":
            river = [by[k] for k in RIVER if k in by]
            if ds.key in REGRESSION_TARGETS and river:
                b = min(river, key=lambda r: r.scores["MAE"])
                mae = mkl.scores["MAE"]
                add("MKLRegressor MAE ≤ best river regressor", mae <= b.scores["MAE"],
                    f"MKL {mae:.4g} vs {b.label} {b.scores['MAE']:.4g}")  # fmt: skip
            if ds.key in REGRESSION_TARGETS and peer is not None:
                mae, theirs = mkl.scores["MAE"], peer.scores["MAE"]
                add("MKLRegressor MAE ≤ best peer regressor (river, MOA)", mae <= theirs,
                    f"MKL {_score(mkl, 'MAE')} vs {peer.label} {theirs:.4g}")  # fmt: skip
            continue
        a = mkl.accuracy

        river = [by[k] for k in RIVER if k in by]
        if river:
            b = max(river, key=lambda r: r.accuracy)
            add("MKL ≥ best river learner", a >= b.accuracy,
                f"MKL {a:.4f} vs {b.label} {b.accuracy:.4f}")  # fmt: skip
        if peer is not None:
            add("MKL ≥ best peer (river, MOA, VW; a tie within 0.05 point counts)",
                a >= peer.accuracy - TIE - 1e-12,
                f"MKL {_score(mkl, 'accuracy')} vs {peer.label} {peer.accuracy:.4f}")  # fmt: skip
        if "vw" in by:
            vw = by["vw"]
            whole = vw.n == len(data)
            mine = a if whole else mkl.prefix["accuracy"]
            span = "" if whole else f" (both on the first {vw.n:,})"
            add("MKL ≥ untuned VW ksvm", mine >= vw.accuracy,
                f"MKL {mine:.4f} vs VW {vw.accuracy:.4f}{span}")  # fmt: skip
        elif any(r.key.startswith("vw") for r in results):
            add("MKL ≥ untuned VW ksvm", None, "VW ksvm not run on this multiclass stream")
        singles = [r for r in by.values() if r.key.startswith("single:")]
        if singles:
            b = max(singles, key=lambda r: r.accuracy)
            add("MKL ≥ every single kernel", a >= b.accuracy,
                f"MKL {a:.4f} vs best single kernel ({b.key[7:]}) {b.accuracy:.4f}")  # fmt: skip
        if "average" in by:
            avg = by["average"].accuracy
            add("MKL ≥ average kernel", a >= avg, f"MKL {a:.4f} vs average {avg:.4f}")
        spread = mkl.spread("accuracy")
        if spread == spread:
            add(f"seed spread ≤ {SPREAD * 100:g} point (max − min over seeds)",
                spread <= SPREAD + 1e-12,
                f"{spread * 100:.2f} points over seeds {_seeds(mkl)}")  # fmt: skip
        if ds.key == "bananas":
            t = mkl.throughput
            add("throughput ≥ 20,000 examples/s", t >= 20_000, f"MKL {t:,.0f} examples/s")
            if "arf" in by:
                arf = by["arf"].throughput
                add("throughput ≥ 25× river ARF", t >= 25 * arf,
                    f"{t / arf:.1f}× (MKL {t:,.0f} vs ARF {arf:,.0f} examples/s)")  # fmt: skip
    return rows


def _seeds(r: Result) -> str:
    return f"{r.seeds[0]}–{r.seeds[-1]}" if len(r.seeds) > 1 else str(r.seeds[0])


def best_peers(runs: list[tuple[Dataset, list, list[Result]]]) -> str:
    """Per stream: the default learner (mean ± sd over its seeds) against the best peer."""
    out = []
    for task, metric in (("classification", "accuracy"), ("regression", "MAE")):
        rows = []
        for ds, data, results in runs:
            mkl = next((r for r in results if r.key == "mkl" and r.n), None)
            if (ds.task == "regression") != (task == "regression") or mkl is None:
                continue
            peer = best_peer(ds, results, len(data))
            mine = mkl.scores[metric]
            theirs = peer.scores[metric] if peer is not None else NAN
            if task == "regression":
                rows.append([ds.title, ds.role, _score(mkl, metric),
                             peer.label if peer else "—", _fmt(theirs, spec=".4g"),
                             _fmt(mine - theirs, spec="+.4g")])  # fmt: skip
            else:
                rows.append([ds.title, ds.role, _score(mkl, metric),
                             _fmt(mkl.spread(metric) * 100, spec=".2f"),
                             peer.label if peer else "—", _fmt(theirs),
                             _fmt((mine - theirs) * 100, spec="+.2f")])  # fmt: skip
        if not rows:
            continue
        if task == "regression":
            head = ["stream", "role", "MKLRegressor MAE", "best peer", "its MAE", "MKL − peer"]
        else:
            head = ["stream", "role", "MKL accuracy", "seed spread (points)", "best peer",
                    "its accuracy", "gap (points)"]  # fmt: skip
        out.append(markdown(head, rows))
    return "\n\n".join(out)


def moa_speed(runs: list[tuple[Dataset, list, list[Result]]]) -> str:
    """MOA's examples/s per stream: end to end (without our dict conversion)."""
    rows = list(dict.fromkeys((r.key, r.label) for _, _, res in runs for r in res
                              if r.key.startswith("moa:")))  # fmt: skip
    if not rows:
        return ""
    matrix = []
    for key, label in rows:
        row: list[object] = [label]
        for _, _, res in runs:
            r = next((r for r in res if (r.key, r.label) == (key, label) and r.n), None)
            row.append("—" if r is None else f"{r.throughput:,.0f} ({r.moa_throughput:,.0f})")
        matrix.append(row)
    per = []
    for _, _, res in runs:
        costs = [r.conversion / r.n * 1e6 for r in res if r.n and r.conversion == r.conversion]
        per.append(f"{statistics.median(costs):.1f}" if costs else "—")
    matrix.append(["our conversion, µs/example (median over the MOA rows)", *per])
    return markdown(["model"] + [ds.title for ds, _, _ in runs], matrix)


def render(runs: list[tuple[Dataset, list, list[Result]]], ctx: dict[str, Any]) -> str:
    runs = [(ds, data, _vw_rows(results)) for ds, data, results in runs]
    clf = [run for run in runs if run[0].task != "regression"]
    reg = [run for run in runs if run[0].task == "regression"]
    out = [
        f"Measured on {ctx['machine']}; `benchmarks/river_suite.py` {ctx['argv']}, total "
        f"{ctx['seconds']:.0f} s. Streams capped at {ctx['cap']:,} examples. {ctx['seeding']}",
        "\n## Targets\n",
        markdown(["target", "dataset", "role", "status", "numbers"], summary(runs)),
    ]
    table = best_peers(runs)
    if table:
        about = (
            "The default learner (mean ± sd over its seeds) against the best of river's, MOA's "
            "and untuned VW ksvm's rows that ran on the whole stream.\n"
        )
        out += ["\n## Best peer per stream\n", about, table]
    if clf:
        labels: dict[str, str] = {}
        for r in (r for _, _, res in clf for r in res):
            labels.setdefault(r.key, MATRIX_LABELS.get(r.key, r.label))
        matrix = []
        for key, label in labels.items():
            row: list[object] = [label]
            for _, data, res in clf:
                row.append(_cell(next((r for r in res if r.key == key), None), len(data)))
            matrix.append(row)
        out += ["\n## Prequential accuracy, classification\n",
                markdown(["model"] + [ds.title for ds, _, _ in clf], matrix)]  # fmt: skip
        if any("†" in str(cell) for row in matrix for cell in row):
            out.append(f"\n† on the first {PREFIX:,} examples only (VW ksvm; see the notes).")
    tables = [t for t in (moa_speed(clf), moa_speed(reg)) if t]
    if tables:
        head = "\n## MOA through CapyMOA: examples/s end to end (without our conversion)\n"
        out += [head, "\n\n".join(tables)]
    if clf:
        out += ["\n## Classification, per stream\n"]
        out += [_section(ds, data, res, ctx["cap"]) for ds, data, res in clf]
    if reg:
        out += ["## Regression (MAE, RMSE: lower is better)\n"]
        out += [_section(ds, data, res, ctx["cap"]) for ds, data, res in reg]
    out += ["## Notes\n", NOTES.format(**ctx)]
    return "\n".join(out)


NOTES = """\
- Protocol: each stream is materialised into a list first; each model then runs test-then-train
  (`predict_one`, then `learn_one`) and examples/s is the wall clock of that loop alone (metrics
  are computed afterwards from the recorded predictions). A {warmup}-example warm-up on a
  throw-away instance precedes every timed run (numba compilation, JVM start). Models behind
  `preprocessing.StandardScaler()` are timed with it: streammkl, VW, river's linear models, KNN
  and the HoeffdingAdaptiveTreeRegressor (as river's docs show it); the classification trees and
  ARF run on raw features, as river's docs show them, and so do MOA's learners.
{seeding_notes}
- streammkl rows take the defaults from `streammkl.river.defaults` at run time: the default bank,
  each of its kernels alone (`MKLClassifier(kernels=(k,))`) and the uniform average (all kernels,
  regularizer `L2(defaults.LAMBDA)`: every active kernel weighs the same, i.e. the plain sum of
  kernels). ARF keeps river's default `n_models=10` at full stream length.
- Binary streams use river's `LogisticRegression`; the multiclass ImageSegments uses river's
  `SoftmaxRegression` (multinomial; no one-vs-rest wrapper needed).
- MOA: {moa_version}, through `benchmarks/_moa.py`, every option at CapyMOA's default (below),
  `random_seed={seed}`, one thread per learner, CapyMOA's JVM options (`CAPYMOA_JVM_ARGS`,
  default `-Xmx8g -Xss10M`). Schema: the stream's features as numeric attributes (the values
  every other learner of the suite gets; none is declared nominal), the class labels of the
  materialised stream in sorted order (so MOA's ties fall as with an ARFF header; the suite
  knows every class before the first example). A label outside the schema is refused, never
  mapped; MOA votes only for the classes it has been trained on so far. Where MOA has no vote
  (before the first label; ARF while its trees have no accuracy estimate yet) the prediction is
  the first class, as MOA's and CapyMOA's own evaluators score it (`Utils.maxIndex` of an empty
  or all-zero vote array; CapyMOA's `predict` returns None there). Each river dict
  becomes one MOA `DenseInstance` per example (in `predict_one`; `learn_one` sets its class and
  trains): examples/s is end to end, as for every row; "without our conversion" subtracts the
  conversion time, measured around the conversion inside the same timed loop, so it is CapyMOA's
  `predict`/`train` calls with the JPype crossing, plus the wrapper's few Python calls and the
  release of the previous example's Java proxies. Checked against a run on instances converted
  beforehand (median of 5, load average ~7): kNN on Bananas 10,200 vs 11,700 examples/s,
  NaiveBayes 42,000 vs 65,000 (for the fastest learners that remainder is a third of the time).
  CapyMOA's defaults:
{moa_defaults}
- Vowpal Wabbit {vw_version}: `vowpalwabbit.Workspace("--ksvm --kernel rbf --bandwidth B --quiet")`
  behind the same `StandardScaler`, predict before learn on every example (each dict is written
  as a VW text line and parsed, inside the timed loop). VW's rbf "bandwidth" multiplies the
  squared distance, k(x, x') = exp(-B ||x - x'||²); default B = {vw_default:g}. "tuned" is the best
  B of {vw_grid}, chosen on the same stream it is scored on (optimistic). ksvm keeps every
  margin violator as a support vector (no budget), so its cost grows with the stream: VW runs on
  the first {prefix:,} examples of every stream, and the targets compare it with MKL's accuracy
  on the same prefix. ksvm is a binary learner; stacked under `--oaa K` it runs (one support set
  shared by the K one-vs-all problems at class-specific hash offsets) but far too slowly for this
  budget, so the multiclass cells stay empty unless `--vw-oaa` is given.
"""


def context(
    machine: str, seconds: float, cap: int, options: str, seeds: int = SEEDS, moa: bool = False
) -> dict[str, Any]:
    """What ``render`` needs besides the results: the run's circumstances and constants
    (``moa``: whether MOA rows were selected; only then is CapyMOA asked for its versions)."""
    span = f"0–{seeds - 1}" if seeds > 1 else "0"
    return {
        "machine": machine, "seconds": seconds, "cap": cap, "argv": options, "prefix": PREFIX,
        "vw_grid": VW_GRID, "vw_default": VW_DEFAULT, "vw_version": _vw_version(),
        "warmup": WARMUP, "seed": SEED,
        "seeding": f"streammkl rows: mean ± sd over seeds {span}; every other row: one run.",
        "seeding_notes": _wrapped(
            f"Seeds: the streammkl rows (the default learner, each kernel alone, the average) "
            f"run once per seed {span} (`seed=` of `MKLClassifier` / `MKLRegressor`: it draws "
            f"the random features) and show mean ± sample standard deviation; the targets use "
            f"the mean, the seed spread is max − min, examples/s and seconds are the median "
            f"run's, the kernel weights the first seed's. Every other row runs once: river's "
            f"trees and ARF with `seed={SEED}`, MOA's learners with `random_seed={SEED}` (kNN "
            f"and NaiveBayes draw nothing); VW, river's linear models and KNN take no seed."
        ),
        **_moa_context(moa),
    }  # fmt: skip


def _wrapped(text: str) -> str:
    """A notes item: "- " then ``text`` wrapped at 100 columns, continued two spaces in."""
    return textwrap.fill(text, 100, initial_indent="- ", subsequent_indent="  ")


def _moa_context(wanted: bool) -> dict[str, str]:
    reason = _moa.unavailable() if wanted else "no MOA row in this run"
    if reason:
        return {"moa_version": f"CapyMOA ({reason})", "moa_defaults": ""}
    lines = []
    for task, rows in (("classification", _moa.CLASSIFIERS), ("regression", _moa.REGRESSORS)):
        module = "regressor" if task == "regression" else "classifier"
        for key, (name, label) in rows.items():
            shown = _moa.defaults(_moa.learner_class(task, key))
            lines.append(f"  - {label} (`capymoa.{module}.{name}`): {shown}")
    return {"moa_version": _moa.version(), "moa_defaults": "\n".join(lines)}


def _vw_version() -> str:
    try:
        import vowpalwabbit
    except ImportError:
        return "(not installed: `.venv/bin/pip install vowpalwabbit`)"
    return vowpalwabbit.__version__


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"first {QUICK:,} of each stream")
    parser.add_argument(
        "--datasets", default=",".join(DEFAULT), help=f"comma-separated, from {', '.join(DATASETS)}"
    )
    parser.add_argument(
        "--models", default=None, help="comma-separated model keys or groups (e.g. mkl,moa)"
    )
    parser.add_argument(
        "--seeds", type=int, default=SEEDS,
        help=f"the streammkl rows run with seed=0..N-1 (default {SEEDS}); other rows run once",
    )  # fmt: skip
    parser.add_argument(
        "--vw-oaa",
        action="store_true",
        help="also run VW ksvm under --oaa on multiclass streams (default bandwidth only; slow)",
    )
    parser.add_argument("--out", default=None, help="write the report here (a partial run too)")
    args = parser.parse_args(argv)
    keys = [k.strip() for k in args.datasets.split(",") if k.strip()]
    unknown = [k for k in keys if k not in DATASETS]
    if unknown:
        parser.error(f"unknown dataset(s) {unknown}; choose from {list(DATASETS)}")
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    models = None if args.models is None else [m.strip() for m in args.models.split(",")]
    n = QUICK if args.quick else FULL
    header = machine()
    start = time.perf_counter()
    runs = []
    for key in keys:
        data = stream(key, n)
        results = run_dataset(key, n, models, data, args.vw_oaa, seeds=args.seeds)
        runs.append((DATASETS[key], data, results))
    total = time.perf_counter() - start
    options = " ".join(sys.argv[1:] if argv is None else argv) or "(no options)"
    moa = any(r.key.startswith("moa:") for _, _, res in runs for r in res)
    body = render(runs, context(header, total, n, options, args.seeds, moa))
    full = not args.quick and keys == DEFAULT and models is None and args.seeds == SEEDS
    title = "river suite: streammkl vs river, MOA (CapyMOA) and Vowpal Wabbit"
    publish("river_suite", title, body, full, args.out)


if __name__ == "__main__":
    main()
