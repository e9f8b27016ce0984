"""Markdown tables for benchmark scripts: print and write to benchmarks/results/NAME.md."""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.util
import os
import platform
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def foreign_checkout() -> str | None:
    """Where ``streammkl`` is imported from when that is not this checkout (the benchmarks'
    parent directory), else None. A script run with another checkout's venv, PYTHONPATH or
    current directory measures that checkout's code, silently: an A/B of two worktrees then
    compares one with itself, or a script of one runs against the other (as a branch's
    script reading ``OnlineMKL._bound`` once did against main: ``AttributeError``)."""
    spec = importlib.util.find_spec("streammkl")
    if spec is None or spec.origin is None:
        return None
    package = Path(spec.origin).resolve().parent
    return None if package.parent == RESULTS.parent.parent else str(package)


_FOREIGN = foreign_checkout()
if _FOREIGN is not None:
    print(
        f"WARNING: benchmarks of {RESULTS.parent.parent} measure streammkl from {_FOREIGN}",
        file=sys.stderr,
    )


def markdown(headers: list[str], rows: list[list[object]]) -> str:
    def fmt(v: object) -> str:
        if isinstance(v, float):
            return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.4g}"
        return str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def cpu() -> str:
    """The processor's model name and whether it has AVX-512 (Linux: ``/proc/cpuinfo``), e.g.
    ``AMD EPYC, no AVX-512``: compiled code that vectorises in 512-bit registers ran ~2x faster
    on a machine with them than on one without, river's Python ~1.5x (the same code, two of
    our CI machines), so a result file names the CPU it was measured on."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    model, flags = platform.machine(), set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and model == platform.machine():
            model = value.strip()
        elif key.strip() == "flags" and not flags:
            flags = set(value.split())
    return f"{model}, {'AVX-512' if 'avx512f' in flags else 'no AVX-512'}"


def machine() -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{platform.python_implementation()} {platform.python_version()}, "
        f"{cpu()}, {os.cpu_count()} cores, load average {load:.2f} at start, "
        f"{_dt.datetime.now(_dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}"
        + ("" if _FOREIGN is None else f", streammkl from {_FOREIGN}")
    )


def write(name: str, title: str, body: str, path: Path | None = None) -> Path:
    """Print the report and write it to ``benchmarks/results/NAME.md`` (or to ``path``)."""
    path = RESULTS / f"{name}.md" if path is None else Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# {title}\n\n{body}\n")
    print(body)
    print(f"\nwritten to {path}")
    return path


def documented_run(parser: argparse.ArgumentParser, args: argparse.Namespace, **wanted) -> bool:
    """Whether ``args`` is the full, documented run: every option at its default except those in
    ``wanted``, which must have the given values (e.g. ``full=True``); ``out`` never counts."""
    for action in parser._actions:
        dest = action.dest
        if dest in ("help", "out") or not hasattr(args, dest):
            continue
        expected = wanted[dest] if dest in wanted else action.default
        if getattr(args, dest) != expected:
            return False
    return True


def add_out(parser: argparse.ArgumentParser) -> None:
    """The ``--out PATH`` option of a script that publishes through :func:`publish`."""
    parser.add_argument(
        "--out", default=None, help="write the report here (a partial run never into results/)"
    )


def publish(name: str, title: str, body: str, full: bool, out: str | None) -> Path | None:
    """Only the full, documented run of a benchmark updates ``benchmarks/results/`` (the
    README's tables come from there); a quick or partial run prints its report, or writes it
    where ``--out`` says, never over the committed results."""
    if out is not None:
        target = Path(out).resolve()
        if not full and target.parent == RESULTS.resolve():
            raise SystemExit(
                f"refusing to write a partial run into {RESULTS}: choose another --out"
            )
        return write(name, title, body, target)
    if full:
        return write(name, title, body)
    print(body)
    print(f"\n(a quick or partial run: not written to {RESULTS}; only the full documented run is)")
    return None
