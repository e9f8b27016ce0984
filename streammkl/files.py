"""Private, crash-safe files: the one place where streammkl writes state to disk.

Every file streammkl writes for itself (a saved learner, a saved sequence labeler, a daemon
checkpoint, the run history, the in-flight marker) is created with mode ``0600`` and every
directory it creates with ``0700``, *whatever the process umask* (the mode is set with
``fchmod``/``chmod`` after creation, so neither a permissive nor an odd umask changes it). Models
and checkpoints hold what was learned from the stream: they are not for other local users.

An atomic write puts the bytes in a temporary file of the same directory, fsyncs it, renames it
over the target (atomic on POSIX) and fsyncs the directory, so that after a crash -- of the
process or of the machine -- the target holds either the old content or the new one, never a
mix, and a completed write is not lost. :func:`atomic_directory` does the same for a directory
of files (a checkpoint).

This module imports nothing from streammkl (it sits below every package, like
:mod:`streammkl.wire`).

Examples
--------
>>> import os, stat, tempfile
>>> folder = tempfile.mkdtemp()
>>> old = os.umask(0)  # even with the most permissive umask
>>> path = atomic_write(os.path.join(folder, "sub", "model.bin"), b"weights")
>>> _ = os.umask(old)
>>> oct(stat.S_IMODE(os.stat(path).st_mode)), oct(stat.S_IMODE(os.stat(path.parent).st_mode))
('0o600', '0o700')
>>> path.read_bytes()
b'weights'
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "append_private",
    "atomic_directory",
    "atomic_write",
    "fsync_dir",
    "open_private",
    "private_dir",
    "write_new",
]

#: Mode of every file streammkl creates.
FILE_MODE = 0o600
#: Mode of every directory streammkl creates.
DIR_MODE = 0o700

Writer = Callable[[BinaryIO], object]


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync a directory, so that the names created, renamed or removed in it are durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def private_dir(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` (and missing parents) with mode ``0700``; an existing directory is left
    as it is (it may be a mounted volume whose mode belongs to the operator). Returns the path."""
    path = Path(path)
    if path.is_dir():
        return path
    missing = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):  # a concurrent creator
            os.mkdir(folder, DIR_MODE)
            os.chmod(folder, DIR_MODE)  # the umask may have removed bits from 0700
    if missing:
        fsync_dir(missing[-1].parent)
    return path


def open_private(path: str | os.PathLike[str], flags: int) -> int:
    """``os.open`` a file with mode ``0600`` (enforced with ``fchmod`` when created)."""
    fd = os.open(path, flags | os.O_CLOEXEC, FILE_MODE)
    try:
        if os.fstat(fd).st_mode & 0o777 != FILE_MODE and flags & os.O_CREAT:
            os.fchmod(fd, FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_all(fd: int, content: bytes | Writer) -> None:
    with os.fdopen(fd, "wb", closefd=False) as fh:
        if callable(content):
            content(fh)
        else:
            fh.write(content)
        fh.flush()
        os.fsync(fd)


def write_new(path: str | os.PathLike[str], content: bytes | Writer) -> Path:
    """Create a new private file (it must not exist) with ``content`` and fsync it; for files
    inside a directory that :func:`atomic_directory` renames into place afterwards."""
    path = Path(path)
    fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        _write_all(fd, content)
    finally:
        os.close(fd)
    return path


def atomic_write(path: str | os.PathLike[str], content: bytes | Writer) -> Path:
    """Replace ``path`` with ``content`` atomically and durably; the file is private (0600).

    Parameters
    ----------
    path
        The target; its missing parent directories are created private (0700).
    content
        The bytes, or a function writing them to a binary file object.

    Returns
    -------
    The target path.
    """
    path = Path(path)
    folder = private_dir(path.parent if str(path.parent) else Path("."))
    tmp = folder / f".{path.name}.{uuid.uuid4().hex[:12]}.tmp"
    fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        try:
            _write_all(fd, content)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(folder)
    return path


def append_private(path: str | os.PathLike[str], data: bytes) -> None:
    """Append ``data`` to a private file (created 0600 if missing) and fsync it."""
    path = Path(path)
    private_dir(path.parent)
    existed = path.exists()
    fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)
    if not existed:
        fsync_dir(path.parent)


@contextlib.contextmanager
def atomic_directory(final: str | os.PathLike[str]) -> Iterator[Path]:
    """A private temporary directory beside ``final``, renamed to ``final`` on success.

    Write the files inside with :func:`write_new`; on leaving the block the directory is
    fsynced, renamed into place (``final`` must not exist) and its parent fsynced. On an error
    the temporary directory is removed and ``final`` never appears.
    """
    final = Path(final)
    parent = private_dir(final.parent)
    tmp = parent / f".tmp-{final.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    os.mkdir(tmp, DIR_MODE)
    os.chmod(tmp, DIR_MODE)
    try:
        yield tmp
        fsync_dir(tmp)
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    fsync_dir(parent)
