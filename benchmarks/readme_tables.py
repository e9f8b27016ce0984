"""Copy generated benchmark tables into README.md (between ``<!-- NAME:start/end -->`` markers).

The README's result tables are never hand-typed: run the benchmarks, then this script.
Usage: ``python benchmarks/readme_tables.py [--check]`` (``--check``: exit 1 if README.md is
stale, change nothing).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


def section(path: Path, heading: str) -> str:
    """The first markdown table under ``heading`` (a '## ...' line) in ``path``."""
    text = path.read_text()
    start = text.index(heading)
    lines = text[start:].splitlines()[1:]
    table: list[str] = []
    for line in lines:
        if line.startswith("|"):
            table.append(line)
        elif table:
            break
    for line in lines[len(table) :]:  # footnotes right under the table
        if line.startswith("†"):
            table += ["", line]
            break
    return "\n".join(table)


def river_tables(path: Path) -> str:
    """The river suite's best-peer tables (when the run has them) and its accuracy matrix."""
    matrix = section(path, "## Prequential accuracy, classification")
    text, heading = path.read_text(), "## Best peer per stream"
    if heading not in text:  # a results file written before MOA joined the suite
        return matrix
    start = text.index(heading)
    part = text[start : text.index("\n## ", start + 1)].splitlines()
    return "\n\n".join([*_split_tables(part), matrix])


def _split_tables(lines: list[str]) -> list[str]:
    """The markdown tables among ``lines``, in order."""
    out: list[list[str]] = []
    inside = False
    for line in lines:
        if line.startswith("|"):
            if not inside:
                out.append([])
            out[-1].append(line)
        inside = line.startswith("|")
    return ["\n".join(t) for t in out]


def tables(path: Path) -> list[str]:
    """Every markdown table in ``path``, in order."""
    return _split_tables(path.read_text().splitlines())


def first_table(path: Path) -> str:
    return tables(path)[0]


def replace(readme: str, name: str, body: str, source: str) -> str:
    pattern = re.compile(rf"(<!-- {name}:start -->\n)(?:.*?\n)?(<!-- {name}:end -->)", re.S)
    if not pattern.search(readme):
        raise SystemExit(f"README.md has no <!-- {name}:start/end --> markers")
    note = f"<sub>generated from `{source}` by `benchmarks/readme_tables.py`</sub>\n\n"
    return pattern.sub(lambda m: m.group(1) + note + body + "\n" + m.group(2), readme)


def render(readme: str) -> str:
    river = RESULTS / "river_suite.md"
    readme = replace(
        readme, "river_suite", river_tables(river), "benchmarks/results/river_suite.md"
    )
    readme = replace(
        readme, "core_update", "\n\n".join(tables(RESULTS / "core_update.md")[:2]),
        "benchmarks/results/core_update.md",
    )  # fmt: skip
    readme = replace(
        readme, "sequence_table1", first_table(RESULTS / "sequence_table1.md"),
        "benchmarks/results/sequence_table1.md",
    )  # fmt: skip
    scale = RESULTS / "scale_out.md"
    if scale.exists():  # written by benchmarks/scale_out.py --full
        lines = scale.read_text().splitlines()
        after = [ln for ln in lines[lines.index(first_table(scale).splitlines()[-1]) + 1 :] if ln]
        table = first_table(scale) + "\n\n" + "\n".join(after)
        readme = replace(readme, "scale_out", table, "benchmarks/results/scale_out.md")
    parsing = RESULTS / "parsing.md"
    if parsing.exists():  # written by benchmarks/parsing.py (needs the parsing extra)
        table = first_table(parsing) + "\n\n" + targets(parsing)
        readme = replace(readme, "parsing", table, "benchmarks/results/parsing.md")
    return readme


def targets(path: Path) -> str:
    """The ``- MET: ...`` / ``- MISSED: ...`` lines under ``## Targets``."""
    text = path.read_text()
    lines = text[text.index("## Targets") :].splitlines()[1:]
    return "\n".join(line for line in lines if line.startswith("- "))


def main(argv: list[str]) -> int:
    readme_path = ROOT / "README.md"
    current = readme_path.read_text()
    fresh = render(current)
    if "--check" in argv:
        if fresh != current:
            print("README.md tables are stale: run python benchmarks/readme_tables.py")
            return 1
        return 0
    readme_path.write_text(fresh)
    print(f"updated {readme_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
