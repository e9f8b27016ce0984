"""The river benchmark harness (``benchmarks/river_suite.py``) cannot rot.

It runs on 300 Phishing examples for two models (the default learner over its seeds) and renders
its tables; its loop is test-then-train; the target summary compares VW with MKL on the same
prefix and names the best peer. MOA's learners (CapyMOA, a JVM) run in a child process, on
Phishing and TrumpApproval, and without Java their rows say so.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from river import base

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "river_suite.py"
MOA_ROWS = 7 + 3  # classifiers on Phishing, regressors on TrumpApproval
NO_JAVA = shutil.which("java") is None and "JAVA_HOME" not in os.environ


@pytest.fixture(scope="module")
def suite():
    spec = importlib.util.spec_from_file_location("river_suite", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["river_suite"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def test_phishing_two_models_give_accuracies_and_tables(suite):
    data = suite.stream("phishing", 300)
    results = suite.run_dataset(
        "phishing", 300, models=("mkl", "linear"), data=data, progress=lambda _: None
    )
    assert [r.key for r in results] == ["mkl", "linear"]
    for r in results:
        assert r.n == 300
        assert isinstance(r.accuracy, float) and 0.5 < r.accuracy <= 1.0, r
        assert math.isfinite(r.throughput) and r.throughput > 0
    mkl, linear = results
    assert mkl.seeds == tuple(range(suite.SEEDS)) and len(mkl.runs) == suite.SEEDS
    assert mkl.accuracy == pytest.approx(sum(r["accuracy"] for r in mkl.runs) / suite.SEEDS)
    assert len({r["accuracy"] for r in mkl.runs}) > 1  # the seed draws the random features
    assert mkl.sd("accuracy") > 0 and mkl.spread("accuracy") > 0
    assert linear.seeds == (suite.SEED,) and linear.runs == []  # peers run once
    seeded, _, weights = mkl.note.partition("; β ")
    assert seeded == f"mean ± sd over seeds 0–{suite.SEEDS - 1}"
    weights = weights.removesuffix(" (seed 0)").split(", ")
    assert sum(float(w.rsplit(" ", 1)[1]) for w in weights) == pytest.approx(1.0, abs=0.02)

    ds = suite.DATASETS["phishing"]
    body = suite.render([(ds, data, results)], suite.context("test box", 1.0, 300, "--test"))
    rows = [line for line in body.splitlines() if line.startswith("| ")]
    cell = f"{mkl.accuracy:.4f} ± {mkl.sd('accuracy'):.4f}"
    assert sum(row.startswith(f"| MKL (default bank) | {cell} |") for row in rows) == 2
    assert sum(row.startswith("| river LogisticRegression") for row in rows) == 2
    best = [row for row in rows if row.startswith("| MKL ≥ best river learner | Phishing | ")]
    assert len(best) == 1
    assert best[0].split(" | ")[2] == "development"  # the defaults were chosen on Phishing
    status = best[0].split(" | ")[3]
    assert status == ("met" if mkl.accuracy >= linear.accuracy else "MISSED")
    peer = [row for row in rows if row.startswith("| Phishing | development | ")]
    assert peer == [
        f"| Phishing | development | {cell} | {mkl.spread('accuracy') * 100:.2f} "
        f"| river LogisticRegression | {linear.accuracy:.4f} "
        f"| {(mkl.accuracy - linear.accuracy) * 100:+.2f} |"
    ]
    assert "streammkl rows: mean ± sd over seeds 0–4; every other row: one run." in body


class _LastLabel(base.Classifier):
    """Predicts the label it learned last: scores 0 on alternating labels only if the harness
    predicts before it learns (learn-then-predict would score 1)."""

    def __init__(self):
        self.last = None

    def learn_one(self, x, y):
        self.last = y

    def predict_one(self, x):
        return self.last


def test_harness_predicts_before_learning(suite):
    data = [({"a": float(i)}, i % 2 == 0) for i in range(100)]
    scores, prefix, seconds = suite.prequential(_LastLabel(), data, "binary")
    assert scores == {"accuracy": 0.0}
    assert prefix == {}  # stream shorter than the prefix window
    assert seconds > 0


def test_vw_is_compared_with_mkl_on_the_same_prefix(suite):
    n, p = 20_000, suite.PREFIX
    mkl = suite.Result("bananas", "mkl", "MKL", n, 2.0, {"accuracy": 0.90}, {"accuracy": 0.85})
    vw = suite.Result("bananas", "vw:1", "VW ksvm rbf, bandwidth 1", p, 1.0, {"accuracy": 0.86})
    runs = [(suite.DATASETS["bananas"], [None] * n, suite._vw_rows([mkl, vw]))]
    rows = {row[0]: row for row in suite.summary(runs)}
    target = rows["MKL ≥ untuned VW ksvm"]
    assert target[3] == "MISSED"  # 0.85 on the prefix, although 0.90 on the whole stream
    assert f"MKL 0.8500 vs VW 0.8600 (both on the first {p:,})" == target[4]
    assert rows["throughput ≥ 20,000 examples/s"][3:] == ["MISSED", "MKL 10,000 examples/s"]


def test_regression_targets_compare_mae_with_the_best_river_and_moa_regressors(suite):
    mkl = suite.Result("friedman", "mkl", "MKLRegressor", 100, 1.0, {"MAE": 2.0, "RMSE": 3.0})
    knn = suite.Result("friedman", "knn", "river KNNRegressor", 100, 1.0, {"MAE": 1.5})
    lin = suite.Result("friedman", "linear", "river LinearRegression", 100, 1.0, {"MAE": 2.5})
    soknl = suite.Result("friedman", "moa:soknl", "MOA SOKNL", 100, 1.0, {"MAE": 1.2})
    rows = suite.summary([(suite.DATASETS["friedman"], [None] * 100, [mkl, knn, lin, soknl])])
    assert rows == [[
        "MKLRegressor MAE ≤ best river regressor", "Friedman (synthetic)", "validation",
        "MISSED", "MKL 2 vs river KNNRegressor 1.5",
    ], [
        "MKLRegressor MAE ≤ best peer regressor (river, MOA)", "Friedman (synthetic)",
        "validation", "MISSED", "MKL 2 vs MOA SOKNL 1.2",
    ]]  # fmt: skip


def test_only_the_full_run_writes_the_committed_results(suite, tmp_path, monkeypatch, capsys):
    written = []
    monkeypatch.setattr(suite, "run_dataset", lambda *a, **k: [])
    monkeypatch.setattr(suite, "stream", lambda key, n: [])
    monkeypatch.setattr(suite, "render", lambda runs, ctx: "report")
    monkeypatch.setattr(suite, "publish", lambda *a: written.append(a))
    suite.main(["--datasets", "phishing"])
    suite.main(["--quick"])
    suite.main([])
    assert [full for _, _, _, full, _ in written] == [False, False, True]


def test_vw_wrapper_is_binary_and_predicts_before_learning(suite):
    pytest.importorskip("vowpalwabbit")
    data = suite.stream("phishing", 300)
    model = suite._scaled(suite.VWKernelSVM(suite.VW_DEFAULT))
    scores, _, _ = suite.prequential(model, data, "binary")
    assert 0.5 < scores["accuracy"] <= 1.0
    with pytest.raises(ValueError, match="one more than the 2"):
        model.learn_one({"a": 1.0}, "third class")
    suite.close(model)


def _acc(key, accuracy, n=20_000, runs=()):
    """A classification Result's fields (``runs``: one accuracy per seed)."""
    score = {"accuracy": accuracy}
    return {"dataset": "sine", "key": key, "label": key, "n": n, "seconds": 1.0,
            "scores": score, "prefix": score, "runs": [{"accuracy": a} for a in runs],
            "seeds": tuple(range(len(runs))) or (42,)}  # fmt: skip


def test_best_peer_counts_a_tie_within_a_twentieth_of_a_point(suite):
    ds, n = suite.DATASETS["sine"], 20_000
    mkl = suite.Result(**_acc("mkl", 0.9900, runs=(0.9880, 0.9920)))
    for peer_accuracy, status in ((0.9905, "met"), (0.9906, "MISSED"), (0.9890, "met")):
        peers = [
            suite.Result(**_acc("moa:arf", peer_accuracy)),
            suite.Result(**_acc("hat", 0.97)),
            suite.Result(**_acc("vw", 0.999, n=suite.PREFIX)),  # prefix only: not a peer here
            suite.Result(**_acc("single:linear", 0.999)),  # our own kernel: not a peer
        ]
        rows = {row[0]: row for row in suite.summary([(ds, [None] * n, [mkl, *peers])])}
        target = rows["MKL ≥ best peer (river, MOA, VW; a tie within 0.05 point counts)"]
        assert target[3:] == [status, f"MKL 0.9900 ± 0.0028 vs moa:arf {peer_accuracy:.4f}"]
        spread = rows["seed spread ≤ 0.5 point (max − min over seeds)"]
        assert spread[3:] == ["met", "0.40 points over seeds 0–1"]


def test_a_row_that_fails_is_reported_in_its_place(suite, monkeypatch):
    def broken(seed):
        raise RuntimeError("the learner broke")

    spec = suite.Spec("boom", "a broken learner", broken, "river")
    monkeypatch.setattr(suite, "classifier_specs", lambda *a: [spec])
    [res] = suite.run_dataset("phishing", 100, progress=lambda _: None)
    assert (res.key, res.n, res.note) == ("boom", 0, "FAILED: RuntimeError: the learner broke")


# MOA runs in a child process: CapyMOA starts a JVM in the process that imports it, which should
# not share a pytest worker with the tests that fork. One child runs every MOA row (and the
# wrapper's own checks) for the tests below.
_MOA_RUN = """
import json, sys
sys.path.insert(0, sys.argv[1])
import _moa, river_suite as rs
runs = []
for key in ("phishing", "trump-approval"):
    data = rs.stream(key, 150)
    runs.append((rs.DATASETS[key], data, rs.run_dataset(key, 150, ("moa", "linear"), data,
                                                        progress=lambda _: None)))
rows = [[r.key, r.n, r.scores, r.seconds, r.conversion, r.note] for _, _, res in runs for r in res]
checks = {}
if not _moa.unavailable():
    data = runs[0][1]
    m = _moa.CapyMOAClassifier("knn", list(data[0][0]), [False, True], 42)
    checks["first"] = m.predict_one(data[0][0])  # no votes yet: the first class, as MOA scores
    m.learn_one(data[0][0], data[0][1])
    rs.prequential(m, data[1:], "binary")
    checks["conversions"] = m.conversions  # predict_one's instance is the one learn_one trains
    try:
        m.learn_one(data[0][0], "maybe")
    except ValueError as exc:
        checks["refused"] = str(exc)
print(json.dumps({"rows": rows, "checks": checks}))
print(rs.render(runs, rs.context("test box", 1.0, 150, "--test", moa=True)))
"""


def _moa_child(env=None):
    out = subprocess.run(
        [sys.executable, "-c", _MOA_RUN, str(BENCH.parent)],
        capture_output=True, text=True, timeout=600, env=env, cwd=BENCH.parent,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    first, _, report = out.stdout.partition("\n")
    return json.loads(first), report


@pytest.fixture(scope="module")
def moa_run():
    pytest.importorskip("capymoa")
    if NO_JAVA:
        pytest.skip("no Java runtime: `make java-runtime` (make test installs it)")
    return _moa_child()


@pytest.mark.xdist_group("moa")  # one worker runs the child for both tests
def test_moa_learners_run_prequentially_through_capymoa(moa_run):
    out, report = moa_run
    moa = [r for r in out["rows"] if r[0].startswith("moa:")]
    assert len(moa) == MOA_ROWS
    for key, n, scores, seconds, conversion, _ in moa:
        assert n == 150, key
        if "accuracy" in scores:
            assert 0.5 < scores["accuracy"] <= 1.0, (key, scores)
        else:
            assert math.isfinite(scores["MAE"]) and scores["MAE"] > 0, (key, scores)
        assert 0 < conversion < seconds, key  # our dict -> MOA instance time, inside the loop
    assert "## MOA through CapyMOA: examples/s end to end (without our conversion)" in report
    assert "- MOA: CapyMOA 0.15" in report and "MOA 24." in report
    assert "AdaptiveRandomForestClassifier`): ensemble_size=100" in report
    knn = [line for line in report.splitlines() if line.startswith("| MOA kNN | ")][-1]
    assert "without our conversion" in knn and "µs/example" in knn


@pytest.mark.xdist_group("moa")
def test_moa_wrapper_converts_once_per_example_and_refuses_unknown_classes(moa_run):
    checks = moa_run[0]["checks"]
    assert checks["first"] is False  # the schema's first class: MOA's maxIndex of no votes
    assert checks["conversions"] == 150
    assert (
        checks["refused"] == "CapyMOAClassifier: class 'maybe' is not in the schema [False, True]"
    )


def test_without_java_the_moa_rows_say_so(tmp_path):
    pytest.importorskip("capymoa")
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)  # no java on it
    out, report = _moa_child(env)
    moa = [r for r in out["rows"] if r[0].startswith("moa:")]
    assert len(moa) == MOA_ROWS
    for key, n, _, _, _, note in moa:
        assert n == 0 and note.startswith("not run: no Java runtime on this machine"), key
    assert [r[0] for r in out["rows"] if r[1]] == ["linear", "linear"]  # the others still run
    nb = [line for line in report.splitlines() if line.startswith("| MOA NaiveBayes | ")][-1]
    assert nb.startswith("| MOA NaiveBayes | — | — | — | not run: no Java runtime")
    assert "- MOA: CapyMOA (not run: no Java runtime on this machine" in report
