"""When the daemon may end for want of records (``run.exit_when_idle``) and the GC settings of
its loop.

:class:`IdleClock`: idle means ``exit_when_idle`` seconds without a record **and** several
fetches in a row without one (a loop that was merely slow to poll, on a loaded machine, has not
seen the end of the stream); before the first assignment a consumer-group join gets a grace of
three session timeouts. While records are known to wait on the owned partitions (a stalled
broker or group), the loop waits ``IDLE_PATIENCE`` times longer before it ends.

:class:`GcTuning`: what start-up allocated is frozen (the collector never scans it again) and the
first generation's threshold raised (``run.gc_threshold``); undone at shutdown.
"""

from __future__ import annotations

import gc
import time

#: Consecutive fetches without a record before ``run.exit_when_idle`` may end the loop.
IDLE_FETCHES = 10
#: While records are known to wait on the owned partitions (lag > 0: the broker or the group
#: stalled the fetches), idle must last this many times ``exit_when_idle`` before the loop ends.
IDLE_PATIENCE = 10.0


class IdleClock:
    """Time since the last record (or assignment, or end of work) and empty fetches in a row."""

    def __init__(self, limit: float | None, join_grace: float) -> None:
        self.limit = limit
        self.started = self.last = time.monotonic()
        self.join_grace = join_grace
        self.empty_fetches = 0

    def fetched(self, now: float, got: bool) -> None:
        """A fetch returned records (``got``) or none."""
        if got:
            self.last = now
            self.empty_fetches = 0
        else:
            self.empty_fetches += 1

    def touch(self, now: float | None = None) -> None:
        """Idle counts from now (new partitions; the end of a piece of work)."""
        self.last = time.monotonic() if now is None else now

    def expired(self, now: float, assigned_ever: bool, patience: float = 1.0) -> bool:
        """Whether the daemon has been idle for ``patience`` times ``limit`` (never, without a
        limit)."""
        if self.limit is None:
            return False
        base = self.last
        if not assigned_ever:  # never assigned yet: allow the group join
            base = max(base, self.started + self.join_grace)
        return now - base >= patience * self.limit and self.empty_fetches >= IDLE_FETCHES


class GcTuning:
    """Freeze start-up's objects and raise generation 0's threshold (0: leave the GC alone)."""

    def __init__(self, threshold: int) -> None:
        self.threshold = threshold
        self._defaults: tuple[int, ...] | None = None

    def apply(self) -> None:
        if not self.threshold or self._defaults is not None:
            return
        self._defaults = gc.get_threshold()
        gc.collect()
        gc.freeze()
        gc.set_threshold(self.threshold, *self._defaults[1:])

    def undo(self) -> None:
        if self._defaults is not None:
            gc.set_threshold(*self._defaults)
            gc.unfreeze()
            self._defaults = None
