"""When the daemon may end for want of records (``run.exit_when_idle``), with which exit code,
and the GC settings of its loop.

:class:`IdleClock`: idle means ``exit_when_idle`` seconds without a record **and** several
fetches in a row without one (a loop that was merely slow to poll, on a loaded machine, has not
seen the end of the stream); before the first assignment a consumer-group join gets a grace of
three session timeouts.

:func:`idle_end`: whether an idle loop ends, and how. It ends with success (exit 0) only when
nothing is left to read: every owned partition's backlog known and zero, every input topic
there. A backlog not known (a partition without a fetch response, a group rebalancing) is never
taken for zero: the loop waits for it, and while records are known to wait or the backlog stays
unknown (a stalled broker or group), it waits ``IDLE_PATIENCE`` times longer, then ends with
:data:`EXIT_UNREAD`. A daemon that never reached the broker ends with :data:`EXIT_UNREACHABLE`
(:data:`EXIT_REFUSED` at once when the broker refused its credentials), one that found no input
topic with :data:`EXIT_NO_TOPIC`; each says why in one line.

:class:`GcTuning`: what start-up allocated is frozen (the collector never scans it again) and the
first generation's threshold raised (``run.gc_threshold``); undone at shutdown.
"""

from __future__ import annotations

import gc
import time
from typing import NamedTuple

from streammkl.daemon.kafka.source import Source

#: Consecutive fetches without a record before ``run.exit_when_idle`` may end the loop.
IDLE_FETCHES = 10
#: While records are known to wait on the owned partitions (lag > 0: the broker or the group
#: stalled the fetches), idle must last this many times ``exit_when_idle`` before the loop ends.
IDLE_PATIENCE = 10.0

#: Exit codes of an idle end (``run.exit_when_idle``); the CLI adds 1 (an unexpected error, with
#: a traceback), 2 (settings refused) and 3 (no usable checkpoint).
EXIT_OK = 0
#: The broker was never reached (nothing listens there, a TLS failure, ...): nothing was read.
EXIT_UNREACHABLE = 4
#: The broker refused the credentials (SASL authentication failed): nothing was read.
EXIT_REFUSED = 5
#: An input topic does not exist on the broker.
EXIT_NO_TOPIC = 6
#: Records were left unread: known to wait, or not known not to, after the patient wait.
EXIT_UNREAD = 7


class IdleEnd(NamedTuple):
    """How an idle loop ends: the process's exit code and the one line that says why."""

    code: int
    message: str


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


def idle_end(clock: IdleClock, now: float, source: Source) -> IdleEnd | None:
    """How the loop ends now for want of records, or ``None`` while it goes on (see the module
    docstring). Cheap until the clock has expired (called once per loop tick)."""
    where = source.settings.bootstrap_servers
    if not source.reached and source.refusal is not None:  # no point in waiting
        return IdleEnd(
            EXIT_REFUSED,
            f"the broker at {where} refused the credentials ({source.refusal}): nothing read",
        )
    owned = bool(source.buffers)
    if source.buffered or not clock.expired(now, owned):
        return None
    idle = now - clock.last
    if not source.reached:
        why = source.last_error or "no answer"
        since = now - clock.started
        return IdleEnd(
            EXIT_UNREACHABLE, f"never reached the broker at {where} in {since:.0f} s ({why})"
        )
    missing = source.missing_topics()
    if missing:
        return IdleEnd(
            EXIT_NO_TOPIC, f"input topic(s) {', '.join(missing)} not found on the broker at {where}"
        )
    backlog = source.backlog()
    if not backlog.records and not backlog.unknown:
        return IdleEnd(EXIT_OK, f"no record for {idle:.1f} s: exiting (0 records behind)")
    if not clock.expired(now, owned, patience=IDLE_PATIENCE):
        return None
    if backlog.unknown:
        known = f" ({backlog.records} more known to wait)" if backlog.records else ""
        return IdleEnd(
            EXIT_UNREAD,
            f"no record for {idle:.1f} s, and what is left to read on "
            f"{', '.join(backlog.unknown)} is still unknown (no fetch response: a stalled broker "
            f"or group): records may be unread{known}",
        )
    return IdleEnd(
        EXIT_UNREAD,
        f"no record for {idle:.1f} s, yet {backlog.records} records wait on the owned partitions "
        "(a stalled broker or group)",
    )


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
