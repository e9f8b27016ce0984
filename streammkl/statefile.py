"""The one file format of a saved learner (river, structured and core alike).

A learner gives its state as ``(meta, arrays)``: ``meta`` is JSON (it names the learner's own
``format`` and ``version``), ``arrays`` are numeric numpy arrays. :func:`write` puts both in one
zip archive, privately and atomically (:func:`streammkl.files.atomic_write`)::

    __format__        b"streammkl-state 2"   (the container's version, read first)
    __meta__.json     the meta, JSON with sorted keys
    a/<name>.npy      one array per member (numpy's .npy, never pickled)
    __sha256__        hex sha256 of meta + arrays (:func:`state_digest`)

:func:`read` checks all of it and raises :class:`StateError` (a ``ValueError``) naming the file
for a truncated or corrupt file (bad zip, bad CRC, checksum mismatch), a foreign one, or one
written by a newer streammkl. Files written before this format keep loading: container
version 1 (the river learners' ``.npz`` with ``__meta__.npy`` and ``__sha256__.npy``) with its
checksum checked, and the structured learners' earlier zip (``meta.json`` + ``<name>.npy``,
which carried no checksum).

This module imports only :mod:`streammkl.files` from streammkl, so every package may use it.

Examples
--------
>>> import tempfile, numpy as np
>>> path = tempfile.mkdtemp() + "/m.npz"
>>> _ = write(path, {"format": "demo", "version": 1}, {"w": np.arange(3.0)})
>>> meta, arrays = read(path)
>>> meta["format"], arrays["w"].tolist()
('demo', [0.0, 1.0, 2.0])
>>> _ = open(path, "r+b").write(b"junk")
>>> read(path)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
streammkl.statefile.StateError: ...m.npz: corrupt or not a streammkl learner file (...)
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from streammkl.files import atomic_write

__all__ = [
    "CONTAINER_VERSION", "StateError", "check_header", "digest_of", "read", "same_meta",
    "state_digest", "write",
]  # fmt: skip

#: Version of the container written by :func:`write` (1 = the river learners' earlier .npz).
CONTAINER_VERSION = 2
_MAGIC = "streammkl-state"


class StateError(ValueError):
    """A saved state that is truncated, corrupt, foreign or from a newer streammkl."""


def state_digest(meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> str:
    """sha256 of a serialised state: the JSON meta (sorted keys), then per array (sorted by name)
    its name, dtype, shape and bytes. Equal digests <=> identical learners."""
    h = hashlib.sha256(json.dumps(meta, sort_keys=True).encode())
    for name in sorted(arrays):
        arr = np.ascontiguousarray(arrays[name])
        dtype = _DTYPE_NAMES.get(arr.dtype)
        if dtype is None:
            dtype = _DTYPE_NAMES[arr.dtype] = str(arr.dtype)
        h.update(f"{name}|{dtype}|{arr.shape}".encode())
        h.update(arr.tobytes())
    return h.hexdigest()


#: ``str(dtype)`` by dtype: numpy builds the name anew at every call (10 µs, a fifth of a
#: 20-array state's digest, which a mixing group computes every round).
_DTYPE_NAMES: dict[np.dtype, str] = {}


def same_meta(a: Any, b: Any) -> bool:
    """Whether two JSON-able meta values are equal as their JSON forms (a meta read back from a
    file or a topic has lists where a live learner's has tuples)."""
    return bool(a == b) or json.loads(json.dumps(a)) == json.loads(json.dumps(b))


def digest_of(learner: Any) -> str:
    """The digest of any learner's state (``learner.to_state()``: a core model, a river learner,
    a structured learner): equal digests <=> identical learners."""
    meta, arrays = learner.to_state()
    return state_digest(meta, arrays)


def check_header(meta: Any, fmt: str, version: int, kind: str) -> int:
    """The version of ``meta`` if it is a state of format ``fmt`` at a version <= ``version``;
    otherwise :class:`StateError` naming ``kind``."""
    if not isinstance(meta, Mapping) or meta.get("format") != fmt:
        found = meta.get("format") if isinstance(meta, Mapping) else type(meta).__name__
        raise StateError(f"{kind} state: not a {kind} state (format={found!r})")
    got = meta.get("version")
    if not isinstance(got, int):
        raise StateError(f"{kind} state: bad version field {got!r}")
    if got > version:
        raise StateError(
            f"{kind} state: version {got} is newer than this streammkl understands ({version}); "
            "upgrade streammkl"
        )
    return got


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.ascontiguousarray(arr), allow_pickle=False)
    return buf.getvalue()


def write(
    path: str | os.PathLike[str], meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]
) -> Path:
    """Write ``(meta, arrays)`` to ``path`` (private, atomic, durable); returns the path.

    Raises ``TypeError`` if ``meta`` is not JSON-able and ``ValueError`` for an object array.
    """
    meta_text = json.dumps(meta, sort_keys=True)
    for name, arr in arrays.items():
        if np.asarray(arr).dtype.hasobject:
            raise ValueError(f"array {name!r} has an object dtype; it would need pickle")
    digest = state_digest(meta, arrays)

    def put(fh: Any) -> None:
        with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED) as zf:
            zf.writestr("__format__", f"{_MAGIC} {CONTAINER_VERSION}")
            zf.writestr("__meta__.json", meta_text)
            for name, arr in arrays.items():
                zf.writestr(f"a/{name}.npy", _npy(arr))
            zf.writestr("__sha256__", digest)

    return atomic_write(path, put)


def _container_version(zf: zipfile.ZipFile, names: set[str]) -> int:
    if "__format__" in names:
        head = zf.read("__format__").decode("ascii", "replace").split()
        if len(head) != 2 or head[0] != _MAGIC or not head[1].isdigit():
            raise ValueError(f"unknown header {' '.join(head)[:40]!r}")
        return int(head[1])
    if "__meta__.npy" in names:
        return 1
    if "meta.json" in names:
        return 0
    raise ValueError("no streammkl meta in the archive")


def _array(zf: zipfile.ZipFile, member: str) -> np.ndarray:
    with zf.open(member) as fh:
        return np.lib.format.read_array(fh, allow_pickle=False)


def _decode(zf: zipfile.ZipFile) -> tuple[int, dict[str, Any], dict[str, np.ndarray], str | None]:
    names = set(zf.namelist())
    version = _container_version(zf, names)
    if version > CONTAINER_VERSION:
        return version, {}, {}, None
    if version == 2:
        meta = json.loads(zf.read("__meta__.json"))
        arrays = {
            n[2:-4]: _array(zf, n) for n in names if n.startswith("a/") and n.endswith(".npy")
        }
        return version, meta, arrays, zf.read("__sha256__").decode("ascii")
    if version == 1:
        meta = json.loads(_array(zf, "__meta__.npy").tobytes())
        expected = _array(zf, "__sha256__.npy").tobytes().decode("ascii")
        arrays = {
            n[2:-4]: _array(zf, n) for n in names if n.startswith("a/") and n.endswith(".npy")
        }
        return version, meta, arrays, expected
    meta = json.loads(zf.read("meta.json"))
    arrays = {n[:-4]: _array(zf, n) for n in names if n.endswith(".npy")}
    return version, meta, arrays, None


def read(
    path: str | os.PathLike[str], kind: str = "streammkl learner"
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """``(meta, arrays)`` of a file written by :func:`write` (or an earlier format).

    Raises
    ------
    FileNotFoundError
        If there is no file at ``path``.
    StateError
        If the file is truncated, corrupt, foreign or from a newer streammkl; the message names
        the file and ``kind``.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no saved {kind} at {path}")
    try:
        with zipfile.ZipFile(path) as zf:
            version, meta, arrays, expected = _decode(zf)
    except FileNotFoundError:
        raise
    except Exception as e:  # zip, CRC, zlib, npy, JSON: all mean "not a readable state" here
        reason = str(e).split("\n")[0] or type(e).__name__
        if "allow_pickle" in reason:  # numpy's advice would be wrong here: we never unpickle
            reason = "an array member needs pickle, which streammkl never loads"
        raise StateError(f"{path}: corrupt or not a {kind} file ({reason})") from None
    if version > CONTAINER_VERSION:
        raise StateError(
            f"{path}: written by a newer streammkl (file format {version}; this one reads up to "
            f"{CONTAINER_VERSION}); upgrade streammkl to load it"
        )
    if not isinstance(meta, dict):
        raise StateError(f"{path}: corrupt or not a {kind} file (meta is not an object)")
    if expected is not None and state_digest(meta, arrays) != expected:
        raise StateError(f"{path}: corrupted: its checksum does not match its contents")
    return meta, arrays
