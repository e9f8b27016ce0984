"""Private, crash-safe files: one helper (``streammkl.files``) behind every writer."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from streammkl import files


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o077, 0o277])
def test_atomic_write_is_private_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        path = files.atomic_write(tmp_path / "new" / "deeper" / "f.bin", b"one")
        files.atomic_write(path, b"two")  # replacing keeps it private
    finally:
        os.umask(old)
    assert path.read_bytes() == b"two"
    assert mode(path) == 0o600
    assert mode(path.parent) == mode(path.parent.parent) == 0o700
    assert sorted(p.name for p in path.parent.iterdir()) == ["f.bin"]  # no temporary left


def test_atomic_write_fsyncs_the_file_then_renames_then_fsyncs_the_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append("fsync dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync file")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", lambda a, b: (events.append("rename"), real_replace(a, b)))
    files.atomic_write(tmp_path / "f", b"data")
    assert events == ["fsync file", "rename", "fsync dir"]


def test_a_failed_write_leaves_the_old_content_and_no_temporary(tmp_path: Path) -> None:
    path = files.atomic_write(tmp_path / "f", b"old")

    def broken(fh: object) -> None:
        fh.write(b"half")  # type: ignore[attr-defined]
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        files.atomic_write(path, broken)
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["f"]


def test_atomic_directory_appears_whole_or_not_at_all(tmp_path: Path) -> None:
    with files.atomic_directory(tmp_path / "d") as tmp:
        files.write_new(tmp / "a", b"1")
        assert not (tmp_path / "d").exists()
    assert (tmp_path / "d" / "a").read_bytes() == b"1" and mode(tmp_path / "d") == 0o700
    with pytest.raises(RuntimeError), files.atomic_directory(tmp_path / "e") as tmp:
        files.write_new(tmp / "a", b"1")
        raise RuntimeError("crash")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]


def test_append_private_tightens_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text("old\n")
    path.chmod(0o644)  # written by an older version under umask 022
    files.append_private(path, b"new\n")
    assert path.read_text() == "old\nnew\n" and mode(path) == 0o600


def test_every_writer_of_state_uses_it(tmp_path: Path) -> None:
    """A saved learner, a saved sequence labeler and the run history are private too."""
    from streammkl.daemon.learning.history import History
    from streammkl.river import MKLClassifier
    from streammkl.structured import SequenceLabeler

    old = os.umask(0)
    try:
        clf = MKLClassifier()
        clf.learn_one({"a": 1.0}, True)
        river_path = clf.save(tmp_path / "r" / "model.npz")
        labeler = SequenceLabeler()
        labeler.learn_one([{"a": 1.0}, {"b": 1.0}], ["N", "V"])
        labeler.save(str(tmp_path / "s.npz"))
        history = History(tmp_path / "ck", every=1, max_rows=10)
        history.add({"t": 1})
        history.flush()
        history.trim(5)  # the rewrite path
    finally:
        os.umask(old)
    for path in (river_path, tmp_path / "s.npz", tmp_path / "ck" / "history.jsonl"):
        assert mode(path) == 0o600, path
    assert mode(tmp_path / "r") == mode(tmp_path / "ck") == 0o700
    assert MKLClassifier.load(river_path).rounds().digest() == clf.rounds().digest()
    assert SequenceLabeler.load(str(tmp_path / "s.npz")).digest() == labeler.digest()
