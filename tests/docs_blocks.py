"""Fenced code blocks of README.md and docs/*.md, for tests/test_docs.py.

A block may be preceded (blank lines apart) by one HTML comment that tells the suite how to run it;
the comment is invisible in the rendered page but stays beside the command in the source:

- ``<!-- docs-test: skip: REASON -->``: not run (the reason is required and shown by the test);
- ``<!-- docs-test: small: OLD => NEW ;; OLD2 => NEW2 -->``: the block's documented small form, run
  with these text substitutions (a long count made small, a port made free, a daemon told to exit
  when idle). In NEW, ``{bootstrap}`` is the test broker's ``host:port``, ``{port}`` a free port,
  ``{tmp}`` the test's directory, ``{topic}`` a topic of its own and ``{root}`` the repository.

Python blocks of one file run in order in one interpreter (a later block may use an earlier one's
names); every shell block runs by itself under ``bash -euo pipefail``; TOML blocks are validated as
daemon settings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
SHELL = ("sh", "bash", "shell", "console")

_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)
_MARK = re.compile(r"<!--\s*docs-test:\s*(.*?)\s*-->\s*\Z", re.S)


@dataclass
class Block:
    path: Path
    line: int
    lang: str
    code: str
    mark: str = ""
    subs: list[tuple[str, str]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def skip_reason(self) -> str | None:
        if self.mark.startswith("skip"):
            return self.mark.partition(":")[2].strip()
        return None

    def runnable_code(self, **fields: str) -> str:
        code = self.code
        for old, new in self.subs:
            if old not in code:
                raise AssertionError(f"{self.name}: the small form's {old!r} is not in the block")
            code = code.replace(old, new.format(**fields))
        return code


def blocks(path: Path) -> list[Block]:
    text = path.read_text()
    out = []
    for m in _FENCE.finditer(text):
        before = text[: m.start()].rstrip()
        mark = _MARK.search(before[-600:])
        directive = mark.group(1).strip() if mark else ""
        block = Block(path, text.count("\n", 0, m.start()) + 1, m.group(1), m.group(2), directive)
        if directive.startswith("small:"):
            for pair in directive.partition(":")[2].split(" ;; "):
                old, sep, new = pair.partition("=>")
                if not sep:
                    raise AssertionError(f"{block.name}: small form without '=>': {pair!r}")
                block.subs.append((old.strip(), new.strip()))
        out.append(block)
    return out


def all_blocks() -> list[Block]:
    return [b for path in DOCS for b in blocks(path)]
