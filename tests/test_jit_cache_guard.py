"""The compiled package's cache guard: a change to any source drops every cached function."""

from __future__ import annotations

from streammkl.core._jit import cache_guard


def _package(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "__pycache__").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "helpers.py").write_text("def f():\n    return 1\n")
    return pkg


def _cached(pkg, name):
    for suffix in (".nbi", ".nbc"):
        (pkg / "__pycache__" / f"{name}{suffix}").write_bytes(b"machine code")


def test_unchanged_sources_keep_the_cache_and_a_changed_helper_drops_all(tmp_path):
    pkg = _package(tmp_path)
    cache_guard(str(pkg / "__init__.py"))  # first sight: nothing vouches for what is there
    _cached(pkg, "rounds.learn_round-1.py311")
    cache_guard(str(pkg / "__init__.py"))
    assert len(list((pkg / "__pycache__").glob("*.nb?"))) == 2  # same sources: kept

    (pkg / "helpers.py").write_text("def f():\n    return 2\n")  # a helper another file inlines
    cache_guard(str(pkg / "__init__.py"))
    assert list((pkg / "__pycache__").glob("*.nb?")) == []
    stamp = (pkg / "__pycache__" / "numba-sources.sha256").read_text()
    assert len(stamp) == 64


def test_a_new_module_also_counts_as_a_change(tmp_path):
    pkg = _package(tmp_path)
    cache_guard(str(pkg / "__init__.py"))
    _cached(pkg, "scores.block_scores-2.py311")
    (pkg / "budget.py").write_text("X = 1\n")
    cache_guard(str(pkg / "__init__.py"))
    assert list((pkg / "__pycache__").glob("*.nb?")) == []
