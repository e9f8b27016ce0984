"""Repeated log lines, rate-limited with a count: ``broker unreachable (×412 in the last 10 s)``.

A broker that cannot be reached made the daemon log ~40 lines a second (each client retry, each
librdkafka error); a mixing group logged one line per mixing round. :class:`RepeatLimit` lets
the first line of each call site through, then at most one line per ``window`` seconds for it,
which says how many were held back meanwhile. A line's identity is its logger, its level and its
text with every number replaced (``cannot reach 127.0.0.1:9092 (after 12 ms)``: ports, counts
and durations vary; two different topics or members are two different lines). DEBUG lines are
never held back (whoever asks for them wants them all), nor lines logged as periodic on purpose
(``extra={"periodic": True}``: the progress line).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable

_NUMBER = re.compile(r"\b[0-9a-f]{8,}\b|\d+")  # numbers, and hex digests


def _shape(record: logging.LogRecord) -> str:
    """What makes two lines "the same": the message with every number and hex digest as ``#``
    (an attempt count, a port, a duration, a mixing round's digest differ; a topic or member
    name does not)."""
    try:
        text = record.getMessage()
    except Exception:  # a malformed record: its template
        text = str(record.msg)
    return _NUMBER.sub("#", text)[:300]


class RepeatLimit(logging.Filter):
    """A :class:`logging.Filter` holding back repeats of a call site within ``window`` seconds.

    Parameters
    ----------
    window
        Seconds; 0 lets every line through.
    clock
        Monotonic seconds (tests pass a fake one).
    """

    def __init__(self, window: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.window, self.clock = window, clock
        self._seen: dict[tuple[str, int, str], tuple[float, int]] = {}  # site -> (shown at, held)
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if (
            self.window <= 0
            or record.levelno <= logging.DEBUG
            or getattr(record, "periodic", False)
        ):
            return True
        site = (record.name, record.levelno, _shape(record))
        now = self.clock()
        with self._lock:
            shown, held = self._seen.get(site, (None, 0))
            if shown is not None and now - shown < self.window:
                self._seen[site] = (shown, held + 1)
                return False
            self._seen[site] = (now, 0)
            if len(self._seen) > 10_000:  # many distinct templates: forget the old ones
                self._seen = {site: (now, 0)}
        if held:
            span = now - shown if shown is not None else self.window
            record.msg = f"{record.msg} (×{held + 1} in the last {span:.0f} s)"  # (+ this one)
        return True


def install_repeat_limit(window: float = 10.0) -> RepeatLimit:
    """Put a :class:`RepeatLimit` on every handler of the root logger (after ``basicConfig``)."""
    limit = RepeatLimit(window)
    for handler in logging.getLogger().handlers:
        handler.addFilter(limit)
    return limit


__all__ = ["RepeatLimit", "install_repeat_limit"]
