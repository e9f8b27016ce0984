"""A checkpoint directory that cannot be written: the loop pauses, retries, and resumes.

A full disk (``ENOSPC``, ``EDQUOT``) or a read-only one (``EROFS``, ``EACCES``, ``EPERM``) made
every checkpoint raise out of the loop: a traceback and exit 1 within seconds, a crash loop under
a supervisor, each restart replaying (and re-sending) what followed the last checkpoint. Now the
loop (:class:`~streammkl.daemon.loop.runner.Runner`) treats a failed checkpoint write as a
*fault*: it stops taking records (nothing more is learned that could not be committed), keeps
settling outputs and answering the probes -- ``/readyz`` 503 with the reason, counted in
``streammkl_checkpoint_failures_total{reason}`` -- and tries the checkpoint again after a backoff
(:data:`FIRST_RETRY` seconds, doubling up to :data:`MAX_RETRY`). The first checkpoint written
ends the pause: nothing was lost, nothing restarted. A stop during the pause still tries a final
checkpoint; when it fails too the process exits with :data:`EXIT_NO_CHECKPOINT` (the next start
resumes from the last checkpoint written).

While paused the consumer is not polled: a pause longer than the clients' poll interval
(``max.poll.interval.ms``, 5 minutes by default) costs the group membership, regained at the
resume like after any rebalance.
"""

from __future__ import annotations

import errno
import logging
import time
from collections.abc import Callable

__all__ = ["EXIT_NO_CHECKPOINT", "FIRST_RETRY", "MAX_RETRY", "DiskFault", "fault_reason"]

log = logging.getLogger(__name__)

#: Seconds before the first retry of a failed checkpoint ...
FIRST_RETRY = 1.0
#: ... doubling up to this (a disk freed is noticed within this long).
MAX_RETRY = 8.0
#: The exit code when a stop found the checkpoint directory unwritable (the final checkpoint was
#: not written); the idle exits use 4-7 (:mod:`streammkl.daemon.loop.idle`).
EXIT_NO_CHECKPOINT = 8

_NO_SPACE = {errno.ENOSPC, errno.EDQUOT}
_READ_ONLY = {errno.EROFS, errno.EACCES, errno.EPERM}


def fault_reason(exc: OSError) -> str:
    """``no_space``, ``read_only`` or ``io``: the label of a failed write's counter."""
    if exc.errno in _NO_SPACE:
        return "no_space"
    if exc.errno in _READ_ONLY:
        return "read_only"
    return "io"


class DiskFault:
    """Whether the loop is paused by a failed checkpoint write, and when to retry.

    Parameters
    ----------
    clock
        Monotonic seconds (tests inject their own).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        #: When the pause began (``None``: not paused).
        self.since: float | None = None
        #: When the next checkpoint may be tried.
        self.retry_at = 0.0
        self.failures = 0  # in a row
        self._backoff = FIRST_RETRY

    @property
    def failing(self) -> bool:
        """Whether the loop is paused."""
        return self.since is not None

    def failed(self, exc: OSError) -> str:
        """A write failed: pause (or go on pausing) until the backoff's next retry; returns the
        reason (:func:`fault_reason`). Logged at the first failure, then at each retry's."""
        now = self.clock()
        why = fault_reason(exc)
        if self.since is None:
            self.since = now
            self._backoff = FIRST_RETRY
            log.error(
                "checkpoint failed (%s: %s): pausing the loop, not ready, retrying every %g-%g s",
                why, exc, FIRST_RETRY, MAX_RETRY,
            )  # fmt: skip
        else:
            log.warning(
                "checkpoint still failing after %.0f s (%s: %s)", now - self.since, why, exc
            )
        self.failures += 1
        self.retry_at = now + self._backoff
        self._backoff = min(2.0 * self._backoff, MAX_RETRY)
        return why

    def cleared(self) -> str:
        """A checkpoint was written: the pause ends; returns how long it lasted (for the log)."""
        lasted = 0.0 if self.since is None else self.clock() - self.since
        self.since = None
        self.failures = 0
        self._backoff = FIRST_RETRY
        return f"{lasted:.1f} s"
