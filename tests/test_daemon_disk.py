"""A checkpoint disk that fills up or turns read-only: a pause, never a crash loop.

A real daemon process against the real broker, its checkpoint directory on a real fault:

- a small tmpfs (``mount -t tmpfs -o size=...``, root only) filled by a file until writes fail
  with ``ENOSPC``, then freed;
- a directory made read-only (``chmod 555``) under a daemon that cannot override file permissions
  (``setpriv`` drops ``CAP_DAC_OVERRIDE``: root would write anyway), then made writable again.

Each time: ``/readyz`` answers 503 naming the checkpoint directory, the failures are counted by
reason, the process stays up (the same pid: no restart), and when the directory is writable
again it resumes by itself -- every record predicted, the final checkpoint covering them all
(before: a traceback and exit 1 within 3-7 s, 8 restarts in a 60 s fault under a supervisor).
The fake learner keeps the process light (no compilation): the learner is not what is tested.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from streammkl.daemon.commands.broker import free_port
from tests import daemon_kafka as dk
from tests.daemon_fakes import bananas_like

pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group("kafka")]

FAKE = {"learner.factory": "tests.daemon_fakes:make_learner"}


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MB tmpfs, unmounted afterwards."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(mnt)],
        capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (root only): {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(directory: Path) -> Path:
    """A file taking every free byte of ``directory``'s filesystem."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as out:  # unbuffered: nothing left for the close
        for size in (65_536, 512):
            try:
                while True:
                    out.write(b"\0" * size)
            except OSError:
                pass
    return filler


def produce(bootstrap: str, topic: str, start: int, n: int) -> None:
    rows = bananas_like(start + n)[start:]
    dk.produce(bootstrap, topic, [json.dumps(r).encode() for r in rows])


def readyz(port: int) -> tuple[int, dict[str, Any]]:
    code, body = dk.http_get(port, "/readyz")
    return code, (json.loads(body) if body.startswith("{") else {})


def failures(port: int, reason: str) -> float:
    key = ("streammkl_checkpoint_failures_total", (("reason", reason),))
    return dk.metrics(port).get(key, 0.0)


def ride_out_a_fault(
    bootstrap: str,
    tmp: Path,
    ckpt: Path,
    reason: str,
    fault: Callable[[], object],
    mend: Callable[[], object],
    prefix: Sequence[str] = (),
) -> str:
    """Run a daemon on ``ckpt``; inject ``fault()`` mid-stream, ``mend()`` it; check the pause,
    the resume and the final checkpoint; returns the log."""
    topic = dk.unique("disk")
    dk.create_topic(bootstrap, topic, 1)
    port = free_port()
    argv = dk.daemon_argv(
        bootstrap, topic, dk.unique("g"), ckpt, port=port,
        settings={**FAKE, "checkpoint.every_records": 50, "checkpoint.every_seconds": 0.5,
                  "metrics.progress_seconds": 3.0},
    )  # fmt: skip
    log = tmp / "daemon.log"
    proc = dk.start_daemon([*prefix, *argv], log)
    try:
        produce(bootstrap, topic, 0, 200)
        dk.wait_until(lambda: readyz(port)[0] == 200, 60, "ready")
        dk.wait_until(
            lambda: dk.metrics(port).get(("streammkl_model_examples_learned_total", ()), 0) >= 200,
            60, "the first 200 learned",
        )  # fmt: skip
        fault()
        produce(bootstrap, topic, 200, 300)
        dk.wait_until(lambda: failures(port, reason) >= 1, 30, f"a {reason} failure counted")
        _, state = dk.wait_until(lambda: (r := readyz(port))[0] == 503 and r, 10, "503")
        assert any("checkpoint directory" in r for r in state["reasons"]), state
        assert proc.poll() is None  # no crash
        dk.wait_until(lambda: failures(port, reason) >= 2, 30, "a retry, failing too")
        assert proc.poll() is None
        mend()
        dk.wait_until(lambda: readyz(port)[0] == 200, 30, "ready again once writable")
        dk.wait_until(
            lambda: dk.metrics(port).get(("streammkl_model_examples_learned_total", ()), 0) >= 500,
            30, "all 500 learned",
        )  # fmt: skip
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text()
    assert "Traceback" not in text, text
    assert "pausing the loop" in text and "writable again" in text, text
    # the final checkpoint covers every record; every record was predicted once at least
    assert dk.inspect(ckpt)["offsets"] == {topic: {"0": 500}}
    assert len(dk.read_topic(bootstrap, f"{topic}.predictions", 500)) >= 500
    return text


def test_a_full_disk_pauses_and_resumes(
    kafka_bootstrap: str, tmp_path: Path, small_tmpfs: Path
) -> None:
    ckpt = small_tmpfs / "ck"
    filler: list[Path] = []
    ride_out_a_fault(
        kafka_bootstrap, tmp_path, ckpt, "no_space",
        fault=lambda: filler.append(fill(small_tmpfs)),
        mend=lambda: filler[0].unlink(),
    )  # fmt: skip


def test_a_read_only_directory_pauses_and_resumes(kafka_bootstrap: str, tmp_path: Path) -> None:
    setpriv = shutil.which("setpriv")
    if setpriv is None or os.geteuid() != 0:
        pytest.skip("needs root and setpriv (util-linux) to drop CAP_DAC_OVERRIDE")
    ckpt = tmp_path / "ck"
    drop = "-dac_override,-dac_read_search"
    ride_out_a_fault(
        kafka_bootstrap, tmp_path, ckpt, "read_only",
        fault=lambda: ckpt.chmod(0o500),
        mend=lambda: ckpt.chmod(0o700),
        prefix=[setpriv, f"--bounding-set={drop}", f"--inh-caps={drop}"],
    )  # fmt: skip


def test_the_backoff_doubles_to_its_bound_and_resets_when_written() -> None:
    """The pause's schedule, on an injected clock: retries after 1, 2, 4, 8, 8 s; reasons by
    errno; a written checkpoint ends the pause and the next fault starts at 1 s again."""
    import errno

    from streammkl.daemon.loop.disk import MAX_RETRY, DiskFault, fault_reason

    now = [100.0]
    disk = DiskFault(clock=lambda: now[0])
    assert not disk.failing
    waits = []
    for _ in range(5):
        assert disk.failed(OSError(errno.ENOSPC, "No space left on device")) == "no_space"
        waits.append(disk.retry_at - now[0])
        now[0] = disk.retry_at
    assert waits == [1.0, 2.0, 4.0, MAX_RETRY, MAX_RETRY] and disk.failing
    assert disk.cleared() == "23.0 s" and not disk.failing
    disk.failed(OSError(errno.EROFS, "Read-only file system"))
    assert disk.retry_at - now[0] == 1.0
    assert fault_reason(OSError(errno.EACCES, "denied")) == "read_only"
    assert fault_reason(OSError(errno.EIO, "I/O error")) == "io"


def test_a_history_append_cut_by_a_full_disk_is_rewritten(small_tmpfs: Path) -> None:
    """The history's append fails on the full tmpfs (possibly cut mid-line); once space is back
    the next flush rewrites the file: every row there once, none lost."""
    from streammkl.daemon.learning.history import History, read

    history = History(small_tmpfs, every=1, max_rows=10_000)
    history.add({"t": 1, "loss": 0.5})
    history.flush()
    filler = fill(small_tmpfs)
    for t in range(2, 200):
        history.add({"t": t, "loss": 0.5, "pad": "x" * 200})
    with pytest.raises(OSError):
        history.flush()
    filler.unlink()
    history.add({"t": 200, "loss": 0.5})
    history.flush()
    assert [int(r["t"]) for r in read(small_tmpfs)] == list(range(1, 201))
