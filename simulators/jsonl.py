"""JSON Lines files of wire records, and the ground-truth file written beside them.

Each line is exactly ``streammkl.wire.encode(record)``, so a file can be replayed into Kafka or
decoded record by record with ``streammkl.wire.decode``.

Examples
--------
>>> import io, tempfile, pathlib
>>> from simulators.scenarios import get
>>> path = pathlib.Path(tempfile.mkdtemp()) / "s.jsonl"
>>> write_jsonl(get("kernel-drift", phase_length=10), path)
30
>>> [r.y for r in read_jsonl(path)][:3] == [r.y for r in get("kernel-drift", phase_length=10)][:3]
True
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from streammkl.wire import DecodeError, Record, decode, encode

__all__ = ["read_jsonl", "truth_path", "write_jsonl", "write_truth"]


def write_jsonl(
    records: Iterable[Record], path: str | os.PathLike[str] | IO[bytes], count: int | None = None
) -> int:
    """Write (at most ``count``) records, one encoded record per line; return how many.

    ``path`` may be ``"-"`` (standard output) or an open binary file.
    """
    if isinstance(path, str | os.PathLike) and str(path) != "-":
        with open(path, "wb") as fh:
            return _write(records, fh, count)
    out: IO[bytes] = sys.stdout.buffer if isinstance(path, str | os.PathLike) else path
    n = _write(records, out, count)
    out.flush()
    return n


def _write(records: Iterable[Record], fh: IO[bytes], count: int | None) -> int:
    n = 0
    for record in records:
        if count is not None and n >= count:
            break
        fh.write(encode(record) + b"\n")
        n += 1
    return n


def read_jsonl(path: str | os.PathLike[str], **decode_options: Any) -> Iterator[Record]:
    """Decode every line with ``streammkl.wire.decode``.

    Raises
    ------
    ValueError
        On the first line that does not decode, naming the line number and the reason.
    """
    with open(path, "rb") as fh:
        for lineno, line in enumerate(fh, start=1):
            out = decode(line.rstrip(b"\n"), **decode_options)
            if isinstance(out, DecodeError):
                raise ValueError(f"{path}:{lineno}: {out.reason}: {out.message}")
            yield out


def truth_path(path: str | os.PathLike[str]) -> Path:
    """Where the ground truth of ``path`` goes: ``run.jsonl`` -> ``run.truth.json``."""
    p = Path(path)
    stem = p.name[: -len(".jsonl")] if p.name.endswith(".jsonl") else p.name
    return p.with_name(stem + ".truth.json")


def write_truth(truth: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write a scenario's ground truth as JSON; return the path."""
    p = Path(path)
    p.write_text(json.dumps(truth, indent=1, allow_nan=False) + "\n")
    return p
