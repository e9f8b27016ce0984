"""Atomic, checksummed, pickle-free checkpoints of the model, offsets, counters and outbox.

A checkpoint is a directory ``ckpt-<seq>/`` holding

- ``meta.json``: format/version, sequence number, creation time, the next offset of every
  partition (and the input topics' ids they belong to), the daemon counters, the learner's JSON
  state, a summary (digest, kernel weights) and the outbox (outputs not yet acknowledged by the
  broker, re-sent on restart);
- ``arrays.npz``: the learner's numpy arrays (``allow_pickle=False`` on load; object arrays are
  refused on save);
- ``SHA256SUMS``: the sha256 of both files;
- ``HMAC-SHA256`` (with ``checkpoint.hmac_key_file``): the signature of ``SHA256SUMS`` with a
  secret key. With a key, only signed checkpoints are loaded: whoever can write the directory
  but not read the key cannot plant a model.

It is written into a private temporary directory with every file fsynced, then renamed into
place (atomic on POSIX) and the parent directory fsynced (:func:`streammkl.files.atomic_directory`;
files 0600, directories 0700); the newest ``keep`` are kept. Loading verifies the checksums (and
the signature), then the content (every field the daemon reads, with its type), and falls back to
the previous checkpoint, with a warning and a count, when the newest is corrupt, malformed,
unsigned or its model does not load.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import logging
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from streammkl.files import atomic_directory, private_dir, write_new

log = logging.getLogger(__name__)

FORMAT = "streammkl-checkpoint"
VERSION = 1
T = TypeVar("T")
_SIGNATURE = "HMAC-SHA256"
_NAME = re.compile(r"^ckpt-(\d{12})$")
_FILES = ("meta.json", "arrays.npz")


class CheckpointError(RuntimeError):
    """A checkpoint is missing, corrupt, malformed, unsigned or from an unsupported format."""


class CheckpointMismatch(CheckpointError):
    """A valid checkpoint of another learner than the configured one (never skipped: every
    older checkpoint would be the same; the operator must decide)."""


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
    def topic_ids(self) -> dict[str, str]:
        """The input topics' ids the offsets belong to (empty in older checkpoints)."""
        return dict(self.meta.get("topic_ids", {}))

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

    def __init__(
        self, directory: str | os.PathLike[str], keep: int = 3, hmac_key: bytes | None = None
    ) -> None:
        self.directory = Path(directory)
        self.keep = keep
        self.hmac_key = hmac_key
        self.fallbacks = 0  # checkpoints skipped by the last load
        self.skipped: dict[str, int] = {}  # ... by why: corrupt, malformed, unsigned, unloadable

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
        # allow_nan: a state may legitimately hold +-Infinity (a bound, an overflowed maximum);
        # a checkpoint must never fail on it (Python's json reads the tokens back)
        meta_bytes = json.dumps(full, sort_keys=True).encode()
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
            if self.hmac_key is not None:
                write_new(tmp / _SIGNATURE, sign(self.hmac_key, sums.encode()).encode())
        for old in self.list()[self.keep :]:
            shutil.rmtree(old, ignore_errors=True)
        size = len(meta_bytes) + len(arrays_bytes) + len(sums)
        return Checkpoint(seq, final, full, dict(arrays), size)

    @staticmethod
    def read(path: str | os.PathLike[str], hmac_key: bytes | None = None) -> Checkpoint:
        """Read and verify one checkpoint directory.

        Parameters
        ----------
        path
            The checkpoint directory.
        hmac_key
            If given, the checkpoint must carry a valid signature made with this key.

        Raises
        ------
        CheckpointError
            If a file is missing, a checksum differs, the signature is missing or wrong, the
            content is malformed (e.g. an offset that is not an integer), or the format is
            unknown or newer.
        """
        path = Path(path)
        try:
            sums_text = (path / "SHA256SUMS").read_text()
            if hmac_key is not None:
                signature = (path / _SIGNATURE).read_text().strip()
                if not hmac.compare_digest(signature, sign(hmac_key, sums_text.encode())):
                    raise CheckpointError(f"{path}: signature mismatch (not written with the key)")
            expected: dict[str, str] = {}
            for line in sums_text.splitlines():
                digest, name = line.split("  ", 1)
                expected[name] = digest
            blobs = {name: (path / name).read_bytes() for name in _FILES}
        except FileNotFoundError as exc:
            if exc.filename and str(exc.filename).endswith(_SIGNATURE):
                raise CheckpointError(
                    f"{path}: unsigned (checkpoint.hmac_key_file is set)"
                ) from exc
            raise CheckpointError(f"{path}: unreadable ({exc})") from exc
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
        problem = malformed(meta)
        if problem:
            raise CheckpointError(f"{path}: malformed: {problem}")
        size = sum(len(b) for b in blobs.values()) + len(sums_text)
        return Checkpoint(int(meta["seq"]), path, meta, arrays, size)

    def load_latest(self, accept: Callable[[Checkpoint], T] | None = None) -> Checkpoint | None:
        """The newest valid checkpoint (``None`` if there is none); with ``accept``, the newest
        that ``accept`` takes too (it raises :class:`CheckpointError` to refuse one, e.g. a model
        that does not load). See :meth:`load_accepted` for ``accept``'s result.

        Corrupt, malformed, unsigned (with a key) or refused newer ones are skipped with a
        warning, counted in :attr:`fallbacks` and :attr:`skipped`.

        Raises
        ------
        CheckpointError
            If checkpoints exist but none is valid: starting from scratch silently could skip
            data, so the operator must move them away. :class:`CheckpointMismatch` (another
            learner) is never skipped.
        """
        found = self.load_accepted(accept or (lambda ckpt: None))
        return None if found is None else found[0]

    def load_accepted(self, accept: Callable[[Checkpoint], T]) -> tuple[Checkpoint, T] | None:
        """:meth:`load_latest`, returning the checkpoint with what ``accept`` returned."""
        self.fallbacks = 0
        self.skipped = {}
        candidates = self.list()
        for path in candidates:
            try:
                ckpt = self.read(path, self.hmac_key)
                return ckpt, accept(ckpt)
            except CheckpointMismatch:
                raise
            except CheckpointError as exc:
                why = _why(str(exc))
                self.fallbacks += 1
                self.skipped[why] = self.skipped.get(why, 0) + 1
                log.warning("%s checkpoint skipped, falling back to an older one: %s", why, exc)
        if candidates:
            raise CheckpointError(
                f"none of the {len(candidates)} checkpoint(s) in {self.directory} is usable "
                f"({', '.join(f'{n} {w}' for w, n in sorted(self.skipped.items()))}); move them "
                "away to start from scratch"
            )
        return None


#: Why a checkpoint was skipped (label values of ``streammkl_checkpoint_fallbacks_total``).
SKIP_REASONS = ("corrupt", "malformed", "unsigned", "unloadable")


def _why(message: str) -> str:
    for reason, needle in (("malformed", "malformed"), ("unsigned", "unsigned"),
                           ("unsigned", "signature"), ("unloadable", "does not load")):  # fmt: skip
        if needle in message:
            return reason
    return "corrupt"


def sign(key: bytes, data: bytes) -> str:
    """HMAC-SHA256 of ``data`` (a checkpoint's ``SHA256SUMS``) with ``key``, in hex."""
    return hmac.new(key, data, hashlib.sha256).hexdigest()


def read_key(path: str | os.PathLike[str]) -> bytes:
    """The HMAC key in ``path`` (surrounding whitespace removed; at least 16 bytes).

    Raises
    ------
    CheckpointError
        If the file cannot be read or holds too short a key.
    """
    try:
        key = Path(path).read_bytes().strip()
        mode = os.stat(path).st_mode & 0o077
    except OSError as exc:
        raise CheckpointError(f"checkpoint.hmac_key_file {path}: {exc.strerror or exc}") from None
    if len(key) < 16:
        raise CheckpointError(
            f"checkpoint.hmac_key_file {path}: the key has {len(key)} bytes; use at least 16 "
            "(e.g. head -c 32 /dev/urandom | base64)"
        )
    if mode:
        log.warning("checkpoint.hmac_key_file %s is readable by others (chmod 600 it)", path)
    return key


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def malformed(meta: object) -> str | None:
    """What is wrong with a checkpoint's ``meta.json`` content (``None``: nothing): the fields
    the store and the daemon read, with the types they read them as (the model's own state is
    checked by loading it)."""
    if not isinstance(meta, dict):
        return "meta.json is not an object"
    if not _is_int(meta.get("seq")) or not isinstance(meta.get("created"), int | float):
        return "seq / created"
    offsets = meta.get("offsets", {})
    if not isinstance(offsets, dict):
        return "offsets is not an object"
    for topic, parts in offsets.items():
        if not isinstance(parts, dict):
            return f"offsets[{topic!r}] is not an object"
        for part, off in parts.items():
            if not (isinstance(part, str) and part.isdigit()) or not _is_int(off) or off < 0:
                return f"offsets[{topic!r}][{part!r}] = {off!r} is not a partition's offset"
    ids = meta.get("topic_ids", {})
    if not isinstance(ids, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in ids.items()
    ):
        return "topic_ids is not an object of strings"
    counters = meta.get("counters", {})
    if not isinstance(counters, dict):
        return "counters is not an object"
    for name, value in counters.items():
        if not isinstance(value, int | float | dict) or isinstance(value, bool):
            return f"counters[{name!r}] = {value!r} is not a number"
    for section in ("model", "summary", "monitor"):  # the runner's (it checks their content)
        if meta.get(section) is not None and not isinstance(meta[section], dict):
            return f"{section} is not an object"
    outbox = meta.get("outbox", [])
    if not isinstance(outbox, list) or not all(
        isinstance(o, dict) and {"topic", "key", "value", "headers"} <= set(o) for o in outbox
    ):
        return "outbox is not a list of outputs"
    return None
