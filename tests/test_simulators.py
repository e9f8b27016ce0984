"""Simulators: registry, determinism, ground truth, label noise, replays, JSON Lines, CLI."""

from __future__ import annotations

import argparse
import doctest
import importlib
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import simulators
from simulators import cli, get, names
from simulators.jsonl import read_jsonl, truth_path, write_jsonl
from simulators.synthetic import LabelNoise
from streammkl.wire import DecodeError, decode, encode

ROOT = Path(__file__).resolve().parents[1]
SMALL = {  # cheap parameters per scenario
    "kernel-drift": {"phase_length": 40},
    "stationary-mixture": {"n_samples": 120},
    "label-noise": {"n_samples": 120},
    "digit-strings": {"n_samples": 30},
    "conllu": {"path": str(ROOT / "tests" / "data" / "sample.conllu"), "n_samples": 10},
}


def small(name, seed=0, **kw):
    return get(name, seed=seed, **{**SMALL.get(name, {"n_samples": 120}), **kw})


def test_registry_lists_every_scenario():
    assert names()[:4] == ["kernel-drift", "stationary-mixture", "label-noise", "digit-strings"]
    assert {"digits", "bananas", "phishing", "image-segments", "shuttle", "trump-approval"} <= set(
        names()
    )
    with pytest.raises(ValueError, match="unknown scenario 'nope'"):
        get("nope")
    with pytest.raises(ValueError, match="has no parameter 'flip_rate'"):
        get("kernel-drift", flip_rate=0.1)


@pytest.mark.parametrize("name", names())
def test_reiterable_deterministic_and_seeded(name):
    sim = small(name, seed=4)
    first, second = list(sim), list(sim)
    assert first == second and len(first) == len(sim)
    assert first == list(small(name, seed=4))  # a new object with the same seed: same stream
    assert [r.id for r in first] == [f"{name}:4:{i}" for i in range(len(first))]
    assert [r.ts for r in first] == [1_700_000_000.0 + i for i in range(len(first))]
    if name in ("kernel-drift", "stationary-mixture", "label-noise", "digit-strings"):
        other = list(small(name, seed=5))
        assert [r.x for r in other] != [r.x for r in first]


@pytest.mark.parametrize("name", ["kernel-drift", "stationary-mixture", "digit-strings"])
def test_shorter_stream_is_a_prefix(name):
    long = get(name, seed=1, n_samples=2500 if name != "digit-strings" else 250)
    short = get(name, seed=1, n_samples=1100 if name != "digit-strings" else 110)
    if name == "kernel-drift":  # same switch schedule: no switch falls inside either stream
        long = get(name, seed=1, phase_length=3000, n_samples=2500)
        short = get(name, seed=1, phase_length=3000, n_samples=1100)
    assert list(short) == long.take(len(short))


@pytest.mark.parametrize("name", names())
def test_jsonl_round_trip_through_wire_decode(name, tmp_path):
    sim = small(name)
    path = tmp_path / f"{name}.jsonl"
    count = min(25, len(sim))
    assert write_jsonl(sim, path, count=25) == count
    lines = path.read_bytes().splitlines()
    assert len(lines) == count
    kind = "sentence" if sim.task == "parsing" else None
    decoded = [decode(line, kind=kind) for line in lines]
    assert not [d for d in decoded if isinstance(d, DecodeError)]
    assert decoded == sim.take(count)  # Record equality: x, y, id, ts (types included below)
    for got, want in zip(decoded, sim.take(count), strict=True):
        assert type(got.y) is type(want.y)
        assert encode(got) == encode(want)
    assert list(read_jsonl(path, kind=kind)) == decoded
    json.dumps(sim.ground_truth(), allow_nan=False)  # the ground truth is plain JSON


def test_read_jsonl_names_the_bad_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"x": [1.0], "y": true}\n{"x": []}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: bad_x"):
        list(read_jsonl(path))


@pytest.mark.parametrize("flip_rate", [0.0, 0.2])
def test_label_noise_flips_at_the_rate_and_records_them(flip_rate):
    n = 20_000
    noisy = LabelNoise(seed=7, flip_rate=flip_rate, n_samples=n)
    clean = get("stationary-mixture", seed=7, n_samples=n)
    flipped = []
    for (rec, info), base in zip(noisy.annotated(), clean, strict=True):
        assert rec.x == base.x and info["clean_y"] == base.y
        assert (rec.y != base.y) == info["flipped"]
        flipped.append(info["flipped"])
    rate = np.mean(flipped)
    assert abs(rate - flip_rate) <= 4 * np.sqrt(max(flip_rate, 1e-9) * (1 - flip_rate) / n)
    truth = noisy.ground_truth()
    assert truth["flipped_indices"] == list(np.flatnonzero(flipped))
    assert truth["n_flipped"] == sum(flipped) and truth["base"]["scenario"] == "stationary-mixture"


def test_label_noise_multiclass_replaces_with_another_class_uniformly():
    noisy = get("label-noise", seed=2, n_classes=3, n_components=6, flip_rate=0.5, n_samples=9000)
    moves = Counter()
    for rec, info in noisy.annotated():
        if info["flipped"]:
            assert rec.y != info["clean_y"] and rec.y in (0, 1, 2)
            moves[(info["clean_y"], rec.y)] += 1
    assert len(moves) == 6  # every (clean, noisy) pair with clean != noisy occurs ...
    counts = np.array(list(moves.values()))
    assert counts.min() > 0.8 * counts.mean()  # ... about equally often


def test_label_noise_wraps_kernel_drift_and_rejects_regression_bases():
    noisy = get("label-noise", seed=1, base="kernel-drift", phase_length=30, flip_rate=0.3)
    assert len(noisy) == 90 and noisy.classes == (False, True)
    assert noisy.ground_truth()["base"]["segments"][1]["kernel"] == "rbf(gamma=2)"
    with pytest.raises(ValueError, match="needs a classification scenario"):
        get("label-noise", base="trump-approval")
    with pytest.raises(ValueError, match="cannot wrap itself"):
        get("label-noise", base="label-noise")


def test_stationary_mixture_matches_its_ground_truth():
    sim = get("stationary-mixture", seed=3, n_classes=2, n_components=4, n_samples=8000)
    truth = sim.ground_truth()
    X, y, comp, bayes = [], [], [], []
    for rec, info in sim.annotated():
        X.append([rec.x["x0"], rec.x["x1"]])
        y.append(rec.y)
        comp.append(info["component"])
        bayes.append(info["bayes_y"])
    X, comp = np.array(X), np.array(comp)
    means = np.array(truth["means"])
    for k in range(4):
        assert np.allclose(X[comp == k].mean(0), means[k], atol=0.1)
        assert np.allclose(np.cov(X[comp == k].T), truth["covariances"][k], rtol=0.15, atol=0.05)
    assert all(yi == truth["component_class"][k] for yi, k in zip(y, comp, strict=True))
    assert abs(np.mean(y) - 0.5) < 0.03
    # The recorded Bayes accuracy is what the Bayes labels achieve on the stream.
    assert abs(np.mean(np.array(bayes) == np.array(y)) - truth["bayes_accuracy"]) < 0.02


def test_river_replays_follow_the_dataset():
    from river import datasets

    rows = list(datasets.Phishing())
    replay = list(get("phishing"))
    assert len(replay) == len(rows) == 1250
    assert all(
        r.x == {k: float(v) for k, v in x.items()} and r.y == y
        for r, (x, y) in zip(replay, rows, strict=True)
    )
    shuffled = get("phishing", seed=3, shuffle=True)
    order = [info["row"] for _, info in shuffled.annotated()]
    assert sorted(order) == list(range(1250)) and order != list(range(1250))
    assert order == [info["row"] for _, info in get("phishing", seed=3, shuffle=True).annotated()]
    assert get("image-segments").classes == (
        "brickface",
        "cement",
        "foliage",
        "grass",
        "path",
        "sky",
        "window",
    )
    assert get("trump-approval").classes is None
    with pytest.raises(ValueError, match="n_samples: bananas has 5300 rows"):
        get("bananas", n_samples=6000)


def test_digits_replay_is_sklearn_load_digits_scaled():
    from sklearn.datasets import load_digits

    bunch = load_digits()
    sim = get("digits")
    for i, rec in enumerate(sim.take(50)):
        assert rec.y == bunch.target[i]
        assert [rec.x[f"p{j}"] for j in range(64)] == list(bunch.data[i] / 16.0)


def test_doctests_of_every_module():
    failed = 0
    for path in sorted((ROOT / "simulators").glob("*.py")):
        if path.stem == "__main__":
            continue
        module = importlib.import_module(f"simulators.{path.stem}".replace(".__init__", ""))
        failed += doctest.testmod(module).failed
    assert failed == 0


# --- command line ---------------------------------------------------------------------------


def test_cli_writes_records_and_ground_truth(tmp_path):
    out = tmp_path / "drift.jsonl"
    argv = ["kernel-drift", "--count", "60", "--seed", "3", "--phase-length", "20"]
    assert cli.main([*argv, "--switch", "abrupt", "--out", str(out), "--no-progress"]) == 0
    records = list(read_jsonl(out))
    assert records == get("kernel-drift", seed=3, phase_length=20, switch="abrupt").take(60)
    truth = json.loads(truth_path(out).read_text())
    assert truth_path(out).name == "drift.truth.json"
    assert [s["kernel"] for s in truth["segments"]] == ["linear", "rbf(gamma=2)", "poly2"]
    assert truth["params"]["phase_length"] == 20 and truth["seed"] == 3


def test_cli_parameter_conversion_and_errors(tmp_path, capsys):
    out = tmp_path / "noise.jsonl"
    rc = cli.main(
        [
            "label-noise",
            "--base",
            "kernel-drift",
            "--phases",
            "poly,rbf",
            "--phase-length",
            "10",
            "--flip-rate",
            "0.5",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    truth = json.loads(truth_path(out).read_text())
    assert truth["flip_rate"] == 0.5 and truth["base"]["params"]["phases"] == ["poly", "rbf"]
    assert len(list(read_jsonl(out))) == 20
    assert cli.main(["kernel-drift", "--flip-rate", "0.1"]) == 2
    assert "--flip-rate does not apply to scenario 'kernel-drift'" in capsys.readouterr().err
    assert cli.main(["kernel-drift", "--d", "two"]) == 2
    assert "--d: expected int, got 'two'" in capsys.readouterr().err
    assert cli.main(["kernel-drift", "--bootstrap-servers", "localhost:1"]) == 2
    assert "--topic is required" in capsys.readouterr().err
    assert cli.main(["phishing", "--shuffle", "yes", "--count", "3"]) == 0  # stdout
    lines = capsys.readouterr().out.splitlines()
    assert [decode(line.encode()) for line in lines] == get("phishing", shuffle=True).take(3)


def test_cli_list_help_and_subparser_embedding(capsys):
    assert cli.main(["--list"]) == 0
    listing = capsys.readouterr().out
    assert all(name in listing for name in names()) and "--flip-rate" in listing
    with pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0 and "k % n_classes" in capsys.readouterr().out
    parser = argparse.ArgumentParser(prog="streammkl")
    sub = parser.add_subparsers(dest="command")
    cli.add_arguments(sub.add_parser("simulate"))
    args = parser.parse_args(["simulate", "digit-strings", "--count", "2", "--max-length", "4"])
    assert cli.run(args) == 0
    lines = capsys.readouterr().out.splitlines()
    recs = [decode(line.encode()) for line in lines]
    assert len(recs) == 2 and all(rec.is_sequence and len(rec.x) <= 4 for rec in recs)


def test_python_dash_m_simulators(tmp_path):
    out = tmp_path / "m.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "simulators", "stationary-mixture", "--count", "5", "--out", out],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert list(read_jsonl(out)) == get("stationary-mixture", n_samples=5).take(5)
    assert "wrote 5 records" in proc.stderr


def test_package_imports_only_wire_from_streammkl():
    for path in (ROOT / "simulators").glob("*.py"):
        text = path.read_text()
        for line in text.splitlines():
            stripped = line.strip()
            if stripped.startswith(("import streammkl", "from streammkl")):
                assert stripped.startswith("from streammkl.wire import"), (path.name, line)
    assert simulators.__all__ == ["Scenario", "get", "names", "params_of", "scenario_class"]


def test_a_replay_loops_when_asked_and_says_how_otherwise():
    from simulators import get

    with pytest.raises(ValueError, match="loop=true"):
        get("phishing", n_samples=2000)
    records = get("phishing", n_samples=3000, loop=True).take(3000)
    assert len(records) == 3000 and len({r.id for r in records}) == 3000
    assert [r.x for r in records[1250:2500]] == [r.x for r in records[:1250]]  # original order
    shuffled = list(get("phishing", n_samples=2500, loop=True, shuffle=True).annotated())
    first, second = shuffled[:1250], shuffled[1250:]
    assert sorted(i["row"] for _, i in first) == sorted(i["row"] for _, i in second)
    assert [i["row"] for _, i in first] != [i["row"] for _, i in second]  # a new permutation
    assert [r.x for r in get("phishing", shuffle=True).take(10)] == [
        r.x for r, _ in shuffled[:10]
    ]  # the first pass is the unlooped replay's order
