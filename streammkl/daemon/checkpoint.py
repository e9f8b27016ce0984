"""Atomic, checksummed, pickle-free checkpoints of the model, offsets, counters and outbox.

A checkpoint is a directory ``ckpt-<seq>/`` holding

- ``meta.json``: format/version, sequence number, creation time, the next offset of every
  partition, the daemon counters, the learner's JSON state, a summary (digest, kernel weights) and
  the outbox (outputs not yet acknowledged by the broker, re-sent on restart);
- ``arrays.npz``: the learner's numpy arrays (``allow_pickle=False`` on load; object arrays are
  refused on save);
- ``SHA256SUMS``: the sha256 of both files.

It is written into ``.tmp-<seq>-<pid>/`` with every file fsynced, then renamed into place (atomic
on POSIX) and the parent directory fsynced; the newest ``keep`` are kept. Loading verifies the
checksums and falls back to the previous checkpoint, with a warning, when the newest is corrupt.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from streammkl.files import atomic_directory, private_dir, write_new

log = logging.getLogger(__name__)

FORMAT = "streammkl-checkpoint"
VERSION = 1
_NAME = re.compile(r"^ckpt-(\d{12})$")
_FILES = ("meta.json", "arrays.npz")


class CheckpointError(RuntimeError):
    """A checkpoint is missing, corrupt or from an unsupported format."""


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint read back from disk.

    Parameters
    ----------
    seq
        Sequence number (monotonic per directory).
    path
        Its directory.
    meta
        The whole ``meta.json``.
    arrays
        The learner's arrays.
    size_bytes
        Total size of its files.
    """

    seq: int
    path: Path
    meta: dict[str, Any]
    arrays: dict[str, np.ndarray] = field(repr=False)
    size_bytes: int = 0

    @property
    def offsets(self) -> dict[tuple[str, int], int]:
        """Next offset to process, per (topic, partition)."""
        return decode_offsets(self.meta.get("offsets", {}))

    @property
    def counters(self) -> dict[str, Any]:
        """Daemon counters at the time of the checkpoint."""
        return dict(self.meta.get("counters", {}))


def encode_offsets(offsets: dict[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    """``{(topic, p): off}`` -> ``{topic: {"p": off}}`` (JSON-able, sorted)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, part), off in sorted(offsets.items()):
        out.setdefault(topic, {})[str(part)] = int(off)
    return out


def decode_offsets(data: dict[str, dict[str, int]]) -> dict[tuple[str, int], int]:
    """Inverse of :func:`encode_offsets`."""
    return {(t, int(p)): int(o) for t, parts in data.items() for p, o in parts.items()}


class CheckpointStore:
    """Checkpoints in one directory.

    Parameters
    ----------
    directory
        Where checkpoints live (created if missing).
    keep
        How many of the newest checkpoints to keep.
    """

    def __init__(self, directory: str | os.PathLike[str], keep: int = 3) -> None:
        self.directory = Path(directory)
        self.keep = keep
        self.fallbacks = 0  # corrupt checkpoints skipped by the last load

    def list(self) -> list[Path]:
        """Checkpoint directories, newest first."""
        if not self.directory.is_dir():
            return []
        found = [p for p in self.directory.iterdir() if _NAME.match(p.name) and p.is_dir()]
        return sorted(found, key=lambda p: p.name, reverse=True)

    def _next_seq(self) -> int:
        names = self.list()
        return int(_NAME.match(names[0].name).group(1)) + 1 if names else 1  # type: ignore[union-attr]

    def clean_temporaries(self) -> None:
        """Remove half-written ``.tmp-*`` directories left by a crash."""
        if self.directory.is_dir():
            for p in self.directory.glob(".tmp-*"):
                shutil.rmtree(p, ignore_errors=True)

    def save(
        self,
        meta: dict[str, Any],
        arrays: dict[str, np.ndarray],
    ) -> Checkpoint:
        """Write a checkpoint atomically and prune old ones.

        Parameters
        ----------
        meta
            JSON-able content (offsets, counters, learner meta, ...); ``format``, ``version``,
            ``seq`` and ``created`` are added.
        arrays
            Numeric numpy arrays (no object dtype).
        """
        private_dir(self.directory)
        for name, arr in arrays.items():
            if np.asarray(arr).dtype.hasobject:
                raise CheckpointError(f"array {name!r} has an object dtype; it would need pickle")
        seq = self._next_seq()
        full = {"format": FORMAT, "version": VERSION, "seq": seq, "created": time.time(), **meta}
        meta_bytes = json.dumps(full, sort_keys=True, allow_nan=False).encode()
        buf = io.BytesIO()
        np.savez(buf, **{k: np.asarray(v) for k, v in arrays.items()})  # type: ignore[arg-type]
        arrays_bytes = buf.getvalue()
        sums = "".join(
            f"{hashlib.sha256(data).hexdigest()}  {name}\n"
            for name, data in zip(_FILES, (meta_bytes, arrays_bytes), strict=True)
        )
        final = self.directory / f"ckpt-{seq:012d}"
        with atomic_directory(final) as tmp:
            write_new(tmp / "meta.json", meta_bytes)
            write_new(tmp / "arrays.npz", arrays_bytes)
            write_new(tmp / "SHA256SUMS", sums.encode())
        for old in self.list()[self.keep :]:
            shutil.rmtree(old, ignore_errors=True)
        size = len(meta_bytes) + len(arrays_bytes) + len(sums)
        return Checkpoint(seq, final, full, dict(arrays), size)

    @staticmethod
    def read(path: str | os.PathLike[str]) -> Checkpoint:
        """Read and verify one checkpoint directory.

        Raises
        ------
        CheckpointError
            If a file is missing, a checksum differs, or the format is unknown or newer.
        """
        path = Path(path)
        try:
            sums_text = (path / "SHA256SUMS").read_text()
            expected: dict[str, str] = {}
            for line in sums_text.splitlines():
                digest, name = line.split("  ", 1)
                expected[name] = digest
            blobs = {name: (path / name).read_bytes() for name in _FILES}
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            raise CheckpointError(f"{path}: unreadable ({exc})") from exc
        for name, data in blobs.items():
            if expected.get(name) != hashlib.sha256(data).hexdigest():
                raise CheckpointError(f"{path}: checksum mismatch for {name}")
        try:
            meta = json.loads(blobs["meta.json"])
            with np.load(io.BytesIO(blobs["arrays.npz"]), allow_pickle=False) as npz:
                arrays = {k: npz[k] for k in npz.files}
        except ValueError as exc:
            raise CheckpointError(f"{path}: cannot decode ({exc})") from exc
        if meta.get("format") != FORMAT:
            raise CheckpointError(f"{path}: not a streammkl checkpoint")
        if not isinstance(meta.get("version"), int) or meta["version"] > VERSION:
            raise CheckpointError(
                f"{path}: format version {meta.get('version')!r} is newer than this streammkl "
                f"(reads up to {VERSION}); upgrade streammkl"
            )
        size = sum(len(b) for b in blobs.values()) + len(sums_text)
        return Checkpoint(int(meta["seq"]), path, meta, arrays, size)

    def load_latest(self) -> Checkpoint | None:
        """The newest valid checkpoint (``None`` if there is none).

        Corrupt newer ones are skipped with a warning (counted in :attr:`fallbacks`).

        Raises
        ------
        CheckpointError
            If checkpoints exist but none is valid: starting from scratch silently could skip
            data, so the operator must move them away.
        """
        self.fallbacks = 0
        candidates = self.list()
        for path in candidates:
            try:
                return self.read(path)
            except CheckpointError as exc:
                self.fallbacks += 1
                log.warning("corrupt checkpoint skipped, falling back to an older one: %s", exc)
        if candidates:
            raise CheckpointError(
                f"all {len(candidates)} checkpoint(s) in {self.directory} are corrupt; "
                "move them away to start from scratch"
            )
        return None
