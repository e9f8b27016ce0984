"""The documentation is tested: every fenced block of README.md and docs/*.md runs here.

Python blocks run per file, in order, in a fresh interpreter in a temporary directory; shell blocks
run under bash with the venv's ``streammkl``/``python`` first on PATH, against the test broker where
they need one; TOML blocks must load as daemon settings. A block that cannot run here says why in a
``<!-- docs-test: skip: ... -->`` comment, and a long one runs in its documented small form
(``<!-- docs-test: small: OLD => NEW -->``), see tests/docs_blocks.py. So a doc that drifts from
the code fails the suite. Also: every CLI option is documented, and no doc links outside the
repository.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs_blocks import DOCS, ROOT, SHELL, Block, all_blocks, blocks

BLOCKS = all_blocks()
RUN_LANGS = ("python", *SHELL, "toml")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMMKL_")}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["PYTHONWARNINGS"] = "ignore::DeprecationWarning"
    env["MPLBACKEND"] = "Agg"
    return env


def _run(argv: list[str], cwd: Path, timeout: float, name: str) -> None:
    out = subprocess.run(
        argv, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout, check=False
    )
    assert out.returncode == 0, f"{name} failed:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}"


def test_every_block_is_run_or_says_why_not() -> None:
    langs = {b.lang for b in BLOCKS}
    assert langs <= {*RUN_LANGS, "text"}, f"blocks in a language no test runs: {langs}"
    for b in BLOCKS:
        if b.skip_reason is not None:
            assert len(b.skip_reason) > 10, f"{b.name}: a skipped block needs a reason"
        if b.lang == "text":
            assert not b.mark, f"{b.name}: a plain-text block takes no docs-test comment"
    assert sum(b.lang in RUN_LANGS and b.skip_reason is None for b in BLOCKS) >= 25


PYTHON_FILES = [p for p in DOCS if any(b.lang == "python" for b in blocks(p))]


@pytest.mark.parametrize("path", PYTHON_FILES, ids=lambda p: p.name)
def test_python_blocks_run(path: Path, tmp_path: Path) -> None:
    code = "\n".join(
        f"# --- {b.name}\n{b.runnable_code(root=str(ROOT))}"
        for b in blocks(path)
        if b.lang == "python" and b.skip_reason is None
    )
    _run([sys.executable, "-c", code], tmp_path, 300, path.name)


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang == "toml"], ids=lambda b: b.name)
def test_toml_blocks_are_valid_settings(block: Block, tmp_path: Path) -> None:
    from streammkl.daemon.config import load_settings

    path = tmp_path / "settings.toml"
    path.write_text(block.runnable_code())
    load_settings(path, env={})


SHELL_BLOCKS = [b for b in BLOCKS if b.lang in SHELL and b.skip_reason is None]


@pytest.mark.kafka
@pytest.mark.xdist_group("kafka")
@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=lambda b: b.name)
def test_shell_blocks_run(block: Block, tmp_path: Path, kafka_bootstrap: str) -> None:
    topic = "docs-" + re.sub(r"\W", "-", block.name)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    code = block.runnable_code(
        bootstrap=kafka_bootstrap, tmp=str(tmp_path), topic=topic, port=port, root=str(ROOT)
    )
    _run(["bash", "-euo", "pipefail", "-c", code], tmp_path, 300, block.name)


def _cli_options() -> list[tuple[str, str]]:
    from streammkl.daemon.commands.cli import build_parser

    out = []
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command, parser in action.choices.items():
                scenario_params = command == "simulate"
                for opt in parser._actions:
                    if not opt.option_strings or "--help" in opt.option_strings:
                        continue
                    if scenario_params and opt.dest not in _SIMULATE_OWN:
                        continue  # a scenario's parameter: `streammkl simulate --list` shows them
                    out.append((command, max(opt.option_strings, key=len)))
    return out


_SIMULATE_OWN = {
    "list", "count", "rate", "seed", "out", "bootstrap_servers", "topic", "kafka_config", "key",
    "truth", "no_progress", "wall_clock_ts",
}  # fmt: skip


def test_every_cli_option_is_documented() -> None:
    text = (ROOT / "docs" / "daemon.md").read_text()
    start = text.index("### Command line")
    table = text[start : text.index("\n### ", start + 1)]
    rows: dict[str, str] = {}
    command = ""
    for line in table.splitlines():
        cells = [c.strip() for c in line.split("|")[1:-1]]
        if len(cells) == 3 and cells[0] not in ("command", "---"):
            command = cells[0].strip("`") or command
            rows[command] = rows.get(command, "") + " " + cells[1]
    missing = [
        f"{command} {opt}"
        for command, opt in _cli_options()
        if not re.search(rf"`{re.escape(opt)}\b", rows.get(command, ""))
    ]
    assert not missing, f"not in docs/daemon.md's command-line table: {missing}"


def test_docs_link_only_inside_the_repository() -> None:
    link = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
    bad = []
    for path in DOCS:
        text = path.read_text()
        for target in link.findall(text):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            file = target.split("#")[0]
            resolved = (path.parent / file).resolve() if file else path
            if not resolved.exists() or ROOT not in resolved.parents:
                bad.append(f"{path.name}: {target}")
        for word in ("KAFKA.md", "NOTES.md", "../shared", "/work/shared"):
            if word in text:
                bad.append(f"{path.name}: mentions {word}")
    assert not bad, bad
