"""The river benchmark harness (``benchmarks/river_suite.py``) cannot rot.

It runs on 300 Phishing examples for two models and renders its tables; its loop is
test-then-train; the target summary compares VW with MKL on the same prefix.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest
from river import base

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "river_suite.py"


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
    weights = results[0].note.removeprefix("β ").split(", ")
    assert sum(float(w.rsplit(" ", 1)[1]) for w in weights) == pytest.approx(1.0, abs=0.02)

    ds = suite.DATASETS["phishing"]
    body = suite.render([(ds, data, results)], suite.context("test box", 1.0, 300, "--test"))
    rows = [line for line in body.splitlines() if line.startswith("| ")]
    assert sum(row.startswith("| MKL (default bank) | ") for row in rows) == 2  # matrix + table
    assert sum(row.startswith("| river LogisticRegression") for row in rows) == 2
    best = [row for row in rows if row.startswith("| MKL ≥ best river learner | Phishing | ")]
    assert len(best) == 1
    assert best[0].split(" | ")[2] == "development"  # the defaults were chosen on Phishing
    status = best[0].split(" | ")[3]
    assert status == ("met" if results[0].accuracy >= results[1].accuracy else "MISSED")


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


def test_regression_targets_compare_mae_with_the_best_river_regressor(suite):
    mkl = suite.Result("friedman", "mkl", "MKLRegressor", 100, 1.0, {"MAE": 2.0, "RMSE": 3.0})
    knn = suite.Result("friedman", "knn", "river KNNRegressor", 100, 1.0, {"MAE": 1.5})
    lin = suite.Result("friedman", "linear", "river LinearRegression", 100, 1.0, {"MAE": 2.5})
    rows = suite.summary([(suite.DATASETS["friedman"], [None] * 100, [mkl, knn, lin])])
    assert rows == [[
        "MKLRegressor MAE ≤ best river regressor", "Friedman (synthetic)", "validation",
        "MISSED", "MKL 2 vs river KNNRegressor 1.5",
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
