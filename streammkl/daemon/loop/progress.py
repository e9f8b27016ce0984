"""One INFO line every few seconds saying what the daemon does (``run.progress_seconds``).

``progress: 1,012 records/s (10,120 in 10 s), learned 52,310, lag 120, accuracy 0.954 (last
10 s 0.961), dead letters 3 (+0), checkpoint 4 s ago``: a person following the log sees the
rate, whether it keeps up (lag), how well it learns (the task's score,
:mod:`streammkl.daemon.learning.scores`), what it refused and whether its state is saved. Silent
when nothing happened since the last line but the lag (an idle daemon logs once, then when
records arrive).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from streammkl.daemon.http.metrics import Snapshot
from streammkl.daemon.learning.scores import headline

log = logging.getLogger("streammkl.progress")


class ProgressLine:
    """Builds and logs the progress line every ``every`` seconds (0: never).

    Parameters
    ----------
    every
        Seconds between lines.
    task
        ``learner.task`` (which score to show).
    clock, wall
        Monotonic and wall-clock seconds (tests pass fake ones).
    """

    def __init__(
        self,
        every: float,
        task: str,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.every, self.task, self.clock, self.wall = every, task, clock, wall
        self._last_t = clock()
        self._last: dict[str, float] = {}
        self._idle_logged = False

    def tick(
        self, counters: Mapping[str, Any], snapshot: Snapshot, final: bool = False
    ) -> str | None:
        """Log the line if it is due (``final``: at shutdown, due whenever records were
        handled since the last one); returns it (``None``: not due, or nothing to say)."""
        if self.every <= 0:
            return None
        now = self.clock()
        if final:
            if float(counters.get("records_consumed", 0)) == self._last.get("records_consumed"):
                return None
        elif now - self._last_t < self.every:
            return None
        line = self.line(counters, snapshot, now - self._last_t)
        self._last_t = now
        if line is not None:
            log.info("%s", line, extra={"periodic": True})  # (not a repeat to hold back)
        return line

    def line(self, counters: Mapping[str, Any], snapshot: Snapshot, span: float) -> str | None:
        """The line for the ``span`` seconds since the previous one."""
        keys = ("records_consumed", "examples_learned", "labelled_predictions",
                "correct_predictions", "online_loss", "dead_letters")  # fmt: skip
        now = {k: float(counters.get(k, 0)) for k in keys}
        last = self._last or dict.fromkeys(keys, 0.0)
        self._last = now
        d = {k: now[k] - last[k] for k in keys}
        lag = sum(snapshot.lag.values())
        if d["records_consumed"] == 0:
            if self._idle_logged:
                return None
            self._idle_logged = True
        else:
            self._idle_logged = False
        total = headline(self.task, int(now["labelled_predictions"]),
                         int(now["correct_predictions"]), now["online_loss"])  # fmt: skip
        recent = headline(self.task, int(d["labelled_predictions"]),
                          int(d["correct_predictions"]), d["online_loss"])  # fmt: skip
        score = total if recent == "-" else f"{total} (last {span:.0f} s: {recent.split()[-1]})"
        age = (
            "no checkpoint yet"
            if snapshot.checkpoint_time is None
            else f"checkpoint {max(0.0, self.wall() - snapshot.checkpoint_time):.0f} s ago"
        )
        rate = d["records_consumed"] / span if span > 0 else 0.0
        return (
            f"progress: {rate:,.0f} records/s ({d['records_consumed']:,.0f} in {span:.0f} s), "
            f"learned {now['examples_learned']:,.0f}, lag {lag:,}, {score}, "
            f"dead letters {now['dead_letters']:,.0f} (+{d['dead_letters']:,.0f}), {age}"
        )


class TopicWatch:
    """A WARNING when an input topic does not exist on the broker (a mistyped ``kafka.topics``
    otherwise showed as one INFO line and silence), again each time it goes missing, and an
    INFO line when it appears. Asked at most every ``every`` seconds (the runner asks only while
    no partition is assigned: the question is a metadata request on the loop's thread)."""

    def __init__(self, every: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.every, self.clock = every, clock
        self._last = clock()  # a first check after ``every`` s: a group join takes a few
        self._warned: set[str] = set()

    def check(self, missing_topics: Callable[[], list[str]], where: str = "") -> list[str]:
        """Ask ``missing_topics`` if due; log the changes; returns the topics warned about now."""
        now = self.clock()
        if now - self._last < self.every:
            return []
        self._last = now
        missing = set(missing_topics())
        new = sorted(missing - self._warned)
        for topic in new:
            log.warning(
                "input topic %r does not exist on the broker%s: nothing to read from it. Check "
                "kafka.topics (--topic) for a typo, or create the topic",
                topic, f" at {where}" if where else "",
            )  # fmt: skip
        for topic in sorted(self._warned - missing):
            log.info("input topic %r exists now", topic)
        self._warned = missing
        return new


__all__ = ["ProgressLine", "TopicWatch"]
