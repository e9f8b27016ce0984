"""The README's result tables are generated from benchmarks/results, never hand-typed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_readme_tables_match_the_results_files():
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "readme_tables.py"), "--check"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr


def test_readme_starts_with_the_two_newcomer_commands():
    head = (ROOT / "README.md").read_text().splitlines()[:8]
    assert any(line.startswith("make demo") for line in head)
    assert any(line.startswith("make test") for line in head)
    assert "make test" in (ROOT / ".ci" / "run").read_text()
