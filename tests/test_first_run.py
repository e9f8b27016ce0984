"""A newcomer's first command on a fresh clone: ``make demo`` with an empty numba cache.

The demo compiles the learner's numerical code first, saying so and how long it takes, then
learns from the simulator's first seconds (before: ``learned=0`` for the whole run, the compile
happening inside the daemon's loop while the simulator waited).

The cache is empty in ``empty`` (slow: ``make test-slow``; the cold compile of everything, 486 s
in the last CI). In CI, ``rounds-cached`` starts from a cache holding only the machine code of the
compiled rounds and runs (``rounds.py``, ``wide.py``; copied from the tree's,
:func:`tests.numba_cache.seed_cache`; most of a cold compile's time): the demo compiles every
other function it runs (39 compiles: the record round, the monitor's ADWIN, the losses, the
admission) first, the same way, then learns at once.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from streammkl.daemon.learning.warmup import COLD_COMPILE_NOTE
from tests.daemon_kafka import subprocess_env
from tests.numba_cache import COMPILED_ROUNDS, seed_cache

pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group("first-run")]

LINE = re.compile(r"^\[\s*([\d.]+)s\] produced=(\d+) learned=(\d+)", re.M)


# the cold compile takes ~2 minutes on 2 quiet cores, 7+ on a loaded machine (measured)
@pytest.mark.parametrize(
    "cached",
    [
        pytest.param(COMPILED_ROUNDS, id="rounds-cached"),
        pytest.param((), id="empty", marks=pytest.mark.slow),
    ],
)
@pytest.mark.timeout(2400)
def test_fresh_clone_demo_compiles_first_then_learns_at_once(
    tmp_path: Path, cached: tuple[str, ...]
) -> None:
    env = subprocess_env()
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "numba-cache")  # a fresh clone's cache: empty
    seed_cache(tmp_path / "numba-cache", cached)
    argv = [sys.executable, "-m", "streammkl.daemon", "demo", "--duration", "8", "--no-live"]
    argv += ["--metrics-port", "0", "--workdir", str(tmp_path / "demo")]
    out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=2300)
    assert out.returncode == 0, out.stderr[-3000:]
    text = " ".join(out.stdout.split())  # (rich wraps long lines without a terminal)
    # said before it starts, then done before the broker and the simulator start
    assert " ".join(COLD_COMPILE_NOTE.split()) in text
    compiled = re.search(r"compiled (\d+) functions in (\d+) s", text)
    assert compiled is not None and int(compiled.group(1)) > 10, out.stdout[-3000:]
    assert text.index("compiled") < text.index("starting the embedded Tansu broker")
    lines = [(float(t), int(p), int(n)) for t, p, n in LINE.findall(out.stdout)]
    assert lines, out.stdout[-3000:]
    # learning started within the first seconds of the simulator's stream
    early = [n for t, _, n in lines if t <= 4.5]
    assert early and early[-1] > 0, lines
    assert lines[-1][2] > 0.5 * lines[-1][1], lines
