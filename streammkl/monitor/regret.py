"""Windowed regret against the best fixed hypothesis in hindsight, estimated off the hot path.

For the last W examples (a *window*, cut every K examples)::

    regret_W = sum_{t in window} [lambda Omega(theta_t) + L(theta_t; x_t, y_t)]
             - min_{theta in Theta} sum_{t in window} [lambda Omega(theta) + L(theta; x_t, y_t)]

the first sum from the prequential terms the learner produced, the second from a comparator fitted
on the window (:mod:`streammkl.monitor.hindsight`). ``observe`` is O(1) (the window is kept in
frozen chunks, :mod:`streammkl.monitor.window`); every K examples it hands references to the frozen
chunks to a background thread, which fits the comparator and publishes an immutable
:class:`RegretEstimate` by a single reference assignment. A fit never blocks ``observe``: while one
runs, a newer window replaces the pending one (the older is counted as skipped). numba rounds
release the GIL, so the fit runs in parallel with learning.

The worker never reads the learner: each job is made on the learning thread at the cut and is
immutable from then on (references to frozen chunks, a fresh configuration dict, the input
names as a tuple); the worker's own models are the comparator's. What the worker writes is the
published estimate, the history tuple and its error counters (single assignments), and the
waiting time of the refresh schedule (under the lock that hands the jobs over).
"""

from __future__ import annotations

import copy
import math
import threading
import time
from collections import deque
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from streammkl.core import OnlineMKL
from streammkl.monitor import theory
from streammkl.monitor.hindsight import EpochComparator, ExactComparator
from streammkl.monitor.window import ETA, LOSS, PHI_SQ, REG, Chunk, ExampleWindow

__all__ = ["RegretEstimate", "WindowedRegret", "make_comparator"]


@dataclass(frozen=True)
class RegretEstimate:
    """One window's regret estimate (immutable; published atomically)."""

    end: int  # examples observed at the cut: the window is examples [end - window, end)
    window: int
    online_objective: float  # sum over the window of the prequential lambda Omega + L
    comparator_objective: float  # the comparator's sum over the same examples
    method: str  # "epochs" | "exact" | a custom comparator's name
    exact: bool  # False: the comparator objective upper-bounds the minimum (regret lower bound)
    iterations: int
    bound: float  # the lemma summed over the window (inf when no bound applies)
    fit: int  # index of this fit (0, 1, ...)

    @property
    def regret(self) -> float:
        return self.online_objective - self.comparator_objective

    @property
    def regret_per_example(self) -> float:
        return self.regret / self.window if self.window else math.nan


def make_comparator(spec: Any, model: OnlineMKL, epochs: int | None = None) -> Any:
    """``"epochs"``, ``"exact"``, ``"auto"`` (exact when available and applicable) or an object
    with ``fit(config, feature_keys, X, Y) -> ComparatorResult``. ``epochs``: an epoch
    comparator's ``max_epochs`` (None: its default), which bounds the work of one fit to that
    many passes over the window."""

    def by_epochs() -> EpochComparator:
        return EpochComparator() if epochs is None else EpochComparator(max_epochs=int(epochs))

    if spec == "epochs":
        return by_epochs()
    if spec == "exact":
        comparator = ExactComparator()
        comparator.check(model)
        return comparator
    if spec == "auto":
        try:
            ExactComparator.check(model)
            return ExactComparator()
        except ValueError:
            return by_epochs()
    if isinstance(spec, str) or not callable(getattr(spec, "fit", None)):
        raise ValueError(
            f"comparator must be 'epochs', 'exact', 'auto' or an object with fit(); got {spec!r}"
        )
    return spec


@dataclass(frozen=True)
class _Job:
    chunks: tuple[Chunk, ...]
    end: int
    config: dict[str, Any]
    feature_keys: tuple[str, ...]
    diameter: float
    lipschitz: float


class WindowedRegret:
    """Regret on the last ``window`` examples, re-estimated every ``every`` examples.

    Parameters
    ----------
    model
        The learner; read (``config()``, ``feature_keys``, radius) only on the calling thread,
        every ``every`` examples. The worker never touches it.
    window
        W. Until W examples are seen, cuts hold all examples so far.
    every
        K: a cut is taken (and a fit requested) each time K more examples have been observed.
    comparator
        See :func:`make_comparator`; ``"epochs"`` by default.
    background
        Fit on a daemon worker thread (default). ``False`` fits inline, inside ``observe``
        (blocking; for tests and offline analysis).
    history
        How many past estimates the ``history`` tuple keeps (oldest first).
    refresh_examples, refresh_seconds
        The refresh schedule: the estimate is *overdue* (:meth:`overdue`, the stale flag) when
        its window ended ``refresh_examples`` or more examples ago, or when a requested window
        has waited ``refresh_seconds`` or more. A comparator with a ``hurry()`` method (a
        throttled one) is told to skip its pauses until it publishes from **half** the schedule
        on (:meth:`due`): a fit that starts then has the other half to end in before the
        estimate is stale, so a stream that outruns the comparator's duty (a backlog) has its
        fits back to back instead of one estimate per duty period. None: no schedule.
    """

    def __init__(
        self,
        model: OnlineMKL,
        window: int = 2000,
        every: int = 500,
        comparator: Any = "epochs",
        background: bool = True,
        history: int = 256,
        refresh_examples: int | None = None,
        refresh_seconds: float | None = None,
    ) -> None:
        self.model = model
        self.refresh_examples = refresh_examples
        self.refresh_seconds = refresh_seconds
        self._waiting_since: float | None = None  # when the oldest unanswered window was cut
        # (end, time) of the windows cut since the latest estimate's (under the lock)
        self._unanswered: deque[tuple[int, float]] = deque()
        self.store = ExampleWindow(window, every)
        self.comparator = make_comparator(comparator, model)
        self.background = bool(background)
        self.latest: RegretEstimate | None = None
        self.history: tuple[RegretEstimate, ...] = ()  # oldest first; replaced, never mutated
        self._history_len = int(history)
        self.n_requested = 0
        self.n_skipped = 0
        self.n_errors = 0
        self.last_error = ""
        self._cond = threading.Condition()
        self.waited = 0.0  # seconds the learning loop waited in catch_up
        self.n_catch_ups = 0
        self._tokens = 0.0  # catch_up's waiting budget (seconds) and when it was last updated
        self._bucket_at: float | None = None
        self._pending: _Job | None = None
        self._running = False
        self._stop = False
        self._thread: threading.Thread | None = None

    @property
    def window(self) -> int:
        return self.store.window

    @property
    def every(self) -> int:
        return self.store.chunk

    # --- hot path -----------------------------------------------------------------------------
    def observe(
        self, x: np.ndarray, y: float, loss: float, reg: float, eta: float, phi_sq: float
    ) -> None:
        """Record one example and its prequential terms; O(1) (a fit is only *requested*)."""
        if self.store.append(x, y, (loss, reg, eta, phi_sq)):
            self._request(self.store.frozen(), self.store.n_seen)

    def observe_many(
        self,
        X: np.ndarray,
        Y: np.ndarray,
        losses: np.ndarray,
        regs: np.ndarray,
        etas: np.ndarray,
        phi_sq: np.ndarray,
    ) -> None:
        """:meth:`observe` of each row, in order: the same chunks, the same fit requests (one
        per chunk frozen, with the window as it was then)."""
        terms = np.empty((X.shape[0], 4))
        terms[:, LOSS], terms[:, REG], terms[:, ETA], terms[:, PHI_SQ] = losses, regs, etas, phi_sq
        for chunks, end in self.store.append_many(X, Y, terms):
            self._request(chunks, end)

    def _request(self, chunks: tuple[Chunk, ...], end: int) -> None:
        model = self.model
        job = _Job(
            chunks=chunks,
            end=end,
            # the bank as objects: the comparator learns with the learner's fitted bandwidths
            # (copies: the worker shares no kernel, nor its caches, with the learner)
            config={**model.config(), "kernels": [copy.copy(k) for k in model.kernels]},
            feature_keys=tuple(model.feature_keys),
            diameter=2.0 * theory.radius(model),
            lipschitz=theory.lipschitz(model),
        )
        self.n_requested += 1
        if not self.background:
            self._run(job, self.n_requested - 1)
            return
        with self._cond:  # one step for the worker, which clears _waiting_since under it
            now = time.monotonic()
            if len(self._unanswered) < 4096:  # (bounded; the oldest matter: kept)
                self._unanswered.append((end, now))
            if self._waiting_since is None:
                self._waiting_since = now
            self.check(end)
            if self._pending is not None:
                self.n_skipped += 1
            self._pending = job
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._work, name="streammkl-regret", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()

    # --- worker -------------------------------------------------------------------------------
    def _work(self) -> None:
        fit = 0
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._pending is not None or self._stop)
                if self._stop:
                    return
                job, self._pending, self._running = self._pending, None, True
            try:
                assert job is not None
                self._run(job, fit)
                fit += 1
            finally:
                with self._cond:
                    self._running = False
                    self._cond.notify_all()

    def _run(self, job: _Job, fit: int) -> None:
        try:
            self._publish(self._estimate(job, fit))
        except Exception as exc:  # a failed fit must not kill the worker; it is counted
            self.n_errors += 1
            self.last_error = f"{type(exc).__name__}: {exc}"

    def _estimate(self, job: _Job, fit: int) -> RegretEstimate:
        data = self.store.cut(job.chunks, job.end)
        terms = data.terms
        if not np.all(np.isfinite(terms[:, (LOSS, REG)])):
            raise ValueError("non-finite loss or regularization value in the window")
        result = self.comparator.fit(job.config, job.feature_keys, data.X, data.Y)
        G = job.lipschitz * math.sqrt(float(np.max(terms[:, PHI_SQ])))
        bound = theory.window_bound(terms[:, ETA], job.diameter, G, float(terms[0, REG]))
        return RegretEstimate(
            end=data.end,
            window=data.n,
            online_objective=float(np.sum(terms[:, LOSS]) + np.sum(terms[:, REG])),
            comparator_objective=float(result.objective),
            method=str(getattr(self.comparator, "method", type(self.comparator).__name__)),
            exact=bool(getattr(self.comparator, "exact", False)),
            iterations=int(result.epochs),
            bound=bound,
            fit=fit,
        )

    def _publish(self, estimate: RegretEstimate) -> None:
        # one reference assignment each: a reader on another thread sees the old or the new
        self.history = (*self.history, estimate)[-self._history_len :]
        self.latest = estimate
        with self._cond:  # the oldest window cut after this one's waits from its cut on
            waiting = self._unanswered
            while waiting and waiting[0][0] <= estimate.end:
                waiting.popleft()
            self._waiting_since = waiting[0][1] if waiting else None
            self._cond.notify_all()  # a learning loop catching up waits for this estimate

    # --- the refresh schedule -----------------------------------------------------------------
    def lag(self, n: int) -> float:
        """Examples observed since the latest estimate's window ended (NaN: no estimate yet)."""
        latest = self.latest
        return math.nan if latest is None else float(n - latest.end)

    def overdue(self, n: int) -> bool:
        """Whether the estimate is older than the schedule allows, ``n`` examples observed: a
        window ended ``refresh_examples`` or more examples after the latest estimate's (or
        after the start, before any estimate), or one requested window has waited
        ``refresh_seconds`` or more."""
        return self._late(n, 1.0)

    def due(self, n: int) -> bool:
        """Whether the estimate is half as old as :meth:`overdue` allows (the comparator is
        hurried from then on)."""
        return self._late(n, 0.5)

    def _late(self, n: int, share: float) -> bool:
        if self.n_requested == 0:
            return False
        latest = self.latest
        since = latest.end if latest is not None else 0
        if self.refresh_examples is not None and n - since >= share * self.refresh_examples:
            return True
        waiting = self._waiting_since
        return (
            self.refresh_seconds is not None
            and waiting is not None
            and time.monotonic() - waiting >= share * self.refresh_seconds
        )

    def check(self, n: int) -> bool:
        """:meth:`overdue` (returned), the comparator told to hurry once :meth:`due`."""
        hurry = getattr(self.comparator, "hurry", None)
        if hurry is not None and self.due(n):
            hurry()
        return self.overdue(n)

    def catch_up(self, n: int, timeout: float, share: float = 1.0) -> float:
        """Called by the learning loop, ``n`` examples observed: when the estimate lags 60 % of
        ``refresh_examples`` (past the point where the comparator is hurried: the stream is
        faster than the comparator, a backlog) and a fit is running or waiting, wait for the
        fits (each hurried) until an estimate that lags less is published, so a backlog does
        not outrun the schedule.

        Bounded twice: at most ``timeout`` seconds per call, and at most ``share`` of the
        loop's wall time over any stretch (a token bucket, empty at the first lagging call:
        ``share`` seconds of waiting earned per second, at most ``timeout`` saved up; ``share``
        1: no such bound). Each fit's work
        is bounded too (an epoch comparator's ``max_epochs`` passes over the window). With a
        small share the learning keeps (1 - share) of its speed and the estimate may still go
        stale in a backlog (``overdue`` says so). Returns the seconds waited; when nothing lags
        it is a few attribute reads.
        """
        if self.refresh_examples is None or not self.background or timeout <= 0 or share <= 0:
            return 0.0
        limit = 0.6 * self.refresh_examples

        def lagging() -> bool:
            latest = self.latest
            return n - (latest.end if latest is not None else 0) >= limit

        if not lagging() or not self.busy:
            return 0.0
        now = time.monotonic()
        if share < 1.0:
            if self._bucket_at is None:  # (it starts empty: a short backlog waits nothing)
                self._tokens, self._bucket_at = 0.0, now
            self._tokens = min(timeout, self._tokens + share * (now - self._bucket_at))
            self._bucket_at = now
            if self._tokens <= 0:
                return 0.0
            timeout = self._tokens
        hurry = getattr(self.comparator, "hurry", None)
        deadline = now + timeout
        with self._cond:
            while lagging() and self.busy and not self._stop:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                if hurry is not None:
                    hurry()  # (a hurry lasts one fit: again for the next window)
                seen = self.latest
                self._cond.wait_for(partial(self._published_since, seen), left)
        waited = time.monotonic() - now
        self.waited += waited
        self.n_catch_ups += 1
        if share < 1.0:
            self._tokens -= waited
            self._bucket_at = time.monotonic()
        return waited

    def _published_since(self, seen: RegretEstimate | None) -> bool:
        return self.latest is not seen or self._stop

    # --- control ------------------------------------------------------------------------------
    @property
    def busy(self) -> bool:
        """A fit is running or waiting."""
        return self._running or self._pending is not None

    def wait(self, timeout: float | None = None) -> bool:
        """Block until no fit is running or pending; False if ``timeout`` expired first."""
        with self._cond:
            return self._cond.wait_for(lambda: self._pending is None and not self._running, timeout)

    def close(self, timeout: float | None = None) -> None:
        """Stop the worker after its current fit (pending windows are dropped)."""
        with self._cond:
            self._stop = True
            self._pending = None
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
