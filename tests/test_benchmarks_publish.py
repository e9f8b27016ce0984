"""Benchmark scripts never overwrite the committed results (the README's source) unless they run
their full, documented form (issue 17 item 6)."""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(BENCH))

import _table  # noqa: E402


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=100)
    p.add_argument("--full", action="store_true")
    _table.add_out(p)
    return p


def test_documented_run_is_every_option_at_its_default_or_as_wanted() -> None:
    p = _parser()
    assert _table.documented_run(p, p.parse_args([]))
    assert not _table.documented_run(p, p.parse_args(["--n", "5"]))
    assert _table.documented_run(p, p.parse_args(["--out", "x.md"]))  # where, not what
    assert not _table.documented_run(p, p.parse_args([]), full=True)
    assert _table.documented_run(p, p.parse_args(["--full"]), full=True)


def test_publish_writes_results_only_for_the_full_run(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(_table, "RESULTS", tmp_path / "results")
    assert _table.publish("b", "T", "body", full=False, out=None) is None
    assert not (tmp_path / "results").exists()
    assert "not written" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="refusing"):
        _table.publish("b", "T", "body", full=False, out=str(tmp_path / "results" / "b.md"))
    elsewhere = _table.publish("b", "T", "body", full=False, out=str(tmp_path / "b.md"))
    assert elsewhere is not None and elsewhere.read_text() == "# T\n\nbody\n"
    written = _table.publish("b", "T", "body", full=True, out=None)
    assert written == tmp_path / "results" / "b.md"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    ("script", "args"),
    [
        ("core_update.py", ["--n", "100"]),
        ("sequence_table1.py", ["--splits", "1", "--n-train", "3", "--n-test", "5", "--rows", "0",
                                "--epochs", "1", "--select-epochs", "1", "--cv-epochs", "1",
                                "--folds", "2"]),
    ],
    ids=["core_update", "sequence_table1"],
)  # fmt: skip
def test_a_partial_run_leaves_the_committed_results_alone(script: str, args: list[str]) -> None:
    results = sorted((BENCH / "results").iterdir())
    before = {p.name: _digest(p) for p in results}
    out = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert "not written" in out.stdout
    after = {p.name: _digest(p) for p in sorted((BENCH / "results").iterdir())}
    assert after == before


def test_a_benchmark_run_against_another_checkouts_streammkl_says_so(tmp_path) -> None:
    """A benchmark imports ``streammkl`` from its own checkout here (no warning, the machine
    line as ever); run with another checkout first on the path, it warns and its results'
    machine line names the checkout it measured."""
    assert _table.foreign_checkout() is None
    assert "streammkl from" not in _table.machine()
    other = tmp_path / "other" / "streammkl"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("")
    code = f"import sys; sys.path.insert(0, {str(BENCH)!r}); import _table; print(_table.machine())"
    env = {"PYTHONPATH": str(other.parent), "PATH": "/usr/bin:/bin"}
    run = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert f"measure streammkl from {other}" in run.stderr
    assert run.stdout.strip().endswith(f"streammkl from {other}")
