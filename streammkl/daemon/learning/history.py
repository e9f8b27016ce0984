"""The run history the daemon writes beside its checkpoints, for ``streammkl report``.

``history.jsonl``: one JSON object per line, compact and bounded:

- a *row* every ``every × stride`` examples (or at the end of the first chunk of a compiled run
  past that multiple): ``{"t", "beta": {kernel: weight}, "objective",
  "loss", "window_regret", "window_regret_bound", "window_end", "window_regret_lag",
  "window_regret_stale", "regret_bound", "shadow_regret", "drifts", "accuracy",
  "accuracy_recent", "loss_recent"}`` (``t`` = examples the monitor observed; a value not known
  (NaN) is written as ``null``, an infinite one as the string ``"+inf"`` / ``"-inf"``: a bound
  of ``"+inf"`` means that no finite bound applies, never that it is unknown;
  ``window_regret_stale`` is 1 while the windowed regret is older than its refresh schedule);
- an *event* per drift detection: ``{"t", "event": "drift"}``;
- an *event* when the bandwidths fitted to the data change (a ``MedianRBF``'s at the warm-up
  and as the inputs grow; noticed at the next row): ``{"t", "event": "bandwidth",
  "bandwidths": {kernel: gamma}}``. Kernel names never change: a bandwidth is not in them.

Rows are buffered and appended when a checkpoint is written, so the file never runs ahead of the
checkpoint by more than one interval; on restart the rows beyond the restored checkpoint are
dropped (:meth:`History.trim`). When the file would exceed ``max_rows`` rows, every other row is
dropped (events are kept) and the stride doubles: the whole run stays covered, at a coarser spacing.
"""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path
from typing import Any

from streammkl.files import append_private, atomic_write

FILENAME = "history.jsonl"

log = logging.getLogger(__name__)


def _lines(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows).encode()


def clean(value: object) -> Any:  # the value made JSON-safe: of any JSON type
    """JSON-safe, recursively through dicts: NaN (not known) -> None, ±inf -> ``"+inf"`` /
    ``"-inf"`` (a bound that does not exist is not a missing value)."""
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return None if math.isnan(value) else ("+inf" if value > 0 else "-inf")
    if isinstance(value, dict):  # a finite float kept without a call: most of a row's values
        isfinite = math.isfinite
        return {k: v if type(v) is float and isfinite(v) else clean(v) for k, v in value.items()}
    return value


def _key(row: dict[str, Any]) -> tuple[int, str]:
    return int(row["t"]), str(row.get("event", ""))


def read(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Rows and events of a history file (or of ``DIR/history.jsonl``), ordered by ``t``, the
    last written row winning for a repeated ``t``; unreadable lines are skipped."""
    path = Path(path)
    if path.is_dir():
        path = path / FILENAME
    if not path.exists():
        return []
    rows: dict[tuple[int, str], dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
            key = (int(row["t"]), str(row.get("event", "")))
        except (ValueError, KeyError, TypeError):
            continue  # a line cut by a crash
        rows[key] = row
    return [rows[k] for k in sorted(rows)]


class History:
    """Buffered, bounded writer of ``history.jsonl``.

    Parameters
    ----------
    directory
        The checkpoint directory.
    every
        Examples between rows (before any thinning).
    max_rows
        Bound on the rows kept in the file.
    """

    def __init__(self, directory: str | os.PathLike[str], every: int, max_rows: int) -> None:
        self.path = Path(directory) / FILENAME
        self.every = int(every)
        self.max_rows = int(max_rows)
        self.stride = 1
        self.pending: list[dict[str, Any]] = []
        self._rows_in_file: int | None = None
        self._trim_to: int | None = None  # a trim that failed (a disk fault), retried
        self._cut = False  # an append failed (a disk fault): the next flush rewrites the file

    @property
    def spacing(self) -> int:
        """Examples between rows now."""
        return self.every * self.stride

    def due(self, t: int, since: int | None = None) -> bool:
        """Whether example count ``t`` gets a row: whether a multiple of :attr:`spacing` is in
        ``(since, t]`` (``since``: the count at the previous check; default ``t - 1``, so
        whether ``t`` is a multiple). Checked after each chunk of a run, a row lands on the
        chunk's end."""
        spacing = self.every * self.stride
        if since is None:
            return t % spacing == 0
        return since // spacing < t // spacing

    def add(self, row: dict[str, Any]) -> None:
        """Buffer a row or an event (written by :meth:`flush`)."""
        self.pending.append(clean(row))

    def trim(self, t_max: int) -> None:
        """Drop what is beyond example count ``t_max`` (rows from after the restored checkpoint)
        and pending rows; called on start."""
        self.pending.clear()
        self._trim_to = t_max
        try:
            self._trim()
        except OSError as exc:  # a full or read-only disk: retried by the next flush
            log.warning("history: could not drop the rows beyond the checkpoint now: %s", exc)

    def _trim(self) -> None:
        if self._trim_to is not None:
            rows = [r for r in read(self.path) if int(r["t"]) <= self._trim_to]
            self._rewrite(rows)
            self._trim_to = None

    def flush(self) -> None:
        """Append the buffered rows; thin the file out first if it would exceed ``max_rows``."""
        if not self.pending:
            return
        self._trim()
        if self._rows_in_file is None:
            self._rows_in_file = sum(1 for r in read(self.path) if "event" not in r)
        new = [r for r in self.pending if "event" not in r]
        if self._cut or self._rows_in_file + len(new) > self.max_rows:
            merged = {_key(r): r for r in [*read(self.path), *self.pending]}
            rows = [merged[k] for k in sorted(merged)]
            while sum(1 for r in rows if "event" not in r) > self.max_rows:
                self.stride *= 2
                rows = self._thinned(rows)
            self._rewrite(rows)
            self._cut = False
        else:
            try:
                append_private(self.path, _lines(self.pending))
            except OSError:  # a full disk may have cut the append: the next flush rewrites
                self._cut = True
                raise
            self._rows_in_file += len(new)
        self.pending.clear()

    def _thinned(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The events, and the first row at or after each multiple of :attr:`spacing` (the
        multiple itself when rows fall on multiples)."""
        out, since = [], 0
        for r in rows:
            if "event" not in r:
                t = int(r["t"])
                if not self.due(t, since):
                    continue
                since = t
            out.append(r)
        return out

    def _rewrite(self, rows: list[dict[str, Any]]) -> None:
        atomic_write(self.path, _lines(rows))
        self._rows_in_file = sum(1 for r in rows if "event" not in r)
