"""Kernel drift: a detector on the prequential loss that restarts the schedule, and β movement.

The papers' guarantees are against a fixed comparator and say nothing about drift (NOTES.md §0,
§5.3). streammkl's answer is operational: when the prequential loss *rises* significantly, restart
the learning-rate schedule (``eta_t`` back to its first-round value, so the iterate can move again)
and count the event; ``schedules.Constant`` is the other, always-on, way to keep tracking.

:class:`LossDriftDetector` wraps a drift detector: ADWIN by default (river's, compiled:
:mod:`streammkl.monitor.adwin`, which runs a whole run of losses in one loop),
``drift.PageHinkley(mode="up")`` with ``"page-hinkley"``, or any river detector. ADWIN flags
changes in either direction; a *decrease* of the loss (the learner improving, e.g. right after a
restart) is counted separately and does not restart anything (``restart_on="increase"``).

:class:`BetaMovement` measures how much the kernel weights moved: the total-variation distance
``1/2 sum_m |beta_m(now) - beta_m(N examples ago)|`` in [0, 1].
"""

from __future__ import annotations

import math
import sys
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from streammkl.monitor import adwin
from streammkl.monitor.adwin import ADWIN

__all__ = ["BetaMovement", "LossDriftDetector", "make_detector", "total_variation"]


def make_detector(spec: Any = "adwin", **params: Any) -> Any:
    """``"adwin"`` (river's, compiled: :class:`streammkl.monitor.adwin.ADWIN`),
    ``"page-hinkley"`` (``mode="up"``) or a detector instance."""
    if isinstance(spec, str):
        key = spec.lower().replace("_", "-")
        if key == "adwin":
            return ADWIN(**params)
        if key in ("page-hinkley", "pagehinkley", "ph"):
            from river import drift  # here: importing it costs 2 s of CPU (river.datasets)

            return drift.PageHinkley(**{"mode": "up", **params})
        raise ValueError(
            f"detector must be 'adwin', 'page-hinkley' or a river detector, got {spec!r}"
        )
    if params:
        raise ValueError("detector parameters apply only to a detector given by name")
    if not (callable(getattr(spec, "update", None)) and hasattr(spec, "drift_detected")):
        raise ValueError(f"detector {spec!r} has no update()/drift_detected (a river detector?)")
    return spec


class LossDriftDetector:
    """Feeds the prequential loss to a river detector and decides whether to restart.

    Parameters
    ----------
    detector
        See :func:`make_detector`.
    restart_on
        ``"increase"`` (default): restart only when the loss went up; ``"any"``: on every detection.
    reference
        For detectors without ``estimation`` (the window mean ADWIN keeps), the direction of a
        change is judged by the mean of the last ``reference`` losses against the mean since the
        previous detection.
    memory
        Keep ``inputs``, the values fed since the last detection (every detection starts river's
        detectors afresh): replaying them into a fresh detector gives this one's state (river's
        ADWIN cannot be serialised). After ``memory`` values without a detection, the detector
        starts afresh (a clone), which bounds the log. None: no log, never started afresh.

    Examples
    --------
    >>> det = LossDriftDetector("adwin")
    >>> stream = [0.1] * 1000 + [0.9] * 300
    >>> [t for t, v in enumerate(stream) if det.update(v, t)]
    [1023]
    >>> det.n_restarts, det.last_restart
    (1, 1023)
    """

    def __init__(
        self,
        detector: Any = "adwin",
        restart_on: str = "increase",
        reference: int = 32,
        memory: int | None = None,
    ):
        if restart_on not in ("increase", "any"):
            raise ValueError(f"restart_on must be 'increase' or 'any', got {restart_on!r}")
        if memory is not None and (int(memory) != memory or memory < 1):
            raise ValueError(f"detector memory must be a positive integer or None, got {memory!r}")
        self.detector = make_detector(detector)
        self.memory = None if memory is None else int(memory)
        self.inputs: list[float] = []  # fed since the last detection (with a memory)
        self.restart_on = restart_on
        self.n_restarts = 0  # detections that restarted the schedule
        self.n_ignored = 0  # detections of a decrease (restart_on="increase")
        self.last_restart = -1  # example index of the last restart
        self._recent: deque[float] = deque(maxlen=int(reference))
        self._recent_sum = 0.0
        self._since_sum = 0.0
        self._since_n = 0

    def _track(self, value: float) -> None:
        if len(self._recent) == self._recent.maxlen:
            self._recent_sum -= self._recent[0]
        self._recent.append(value)
        self._recent_sum += value
        self._since_sum += value
        self._since_n += 1

    def _increased(self, before: float | None) -> bool:
        after = getattr(self.detector, "estimation", None)
        if before is not None and after is not None:
            return float(after) > float(before)
        if getattr(self.detector, "mode", None) == "up":
            return True
        recent = self._recent_sum / max(len(self._recent), 1)
        return recent > self._since_sum / max(self._since_n, 1)

    def update(self, value: float, index: int) -> bool:
        """Feed one loss (example ``index``); True on a detected rise (with
        ``restart_on="any"``: on any detection), for which the caller restarts the schedule."""
        return bool(self.update_many((value,), index))

    def update_many(self, values: Iterable[float], first: int) -> list[int]:
        """:meth:`update` of each value in order, for examples ``first``, ``first + 1``, ...;
        the indices where it returned True (non-finite values are skipped, as there)."""
        return self.update_until(list(values), first)[1]

    def update_until(
        self, values: Sequence[float] | np.ndarray, first: int, stride: int | None = None
    ) -> tuple[int, list[int]]:
        """:meth:`update_many`, stopping after the first rise's boundary: with ``stride`` B, a
        rise at example i ends the feed after example kB - 1, the first multiple of B at or
        after i + 1 (where the caller restarts the schedule; the values after it were computed
        without that restart). Returns (how many values were fed, the rises among them)."""
        if type(self.detector) is ADWIN:
            return self._feed_compiled(values, first, stride)
        if isinstance(values, np.ndarray):
            values = values.tolist()  # Python floats: faster to index one by one
        rises: list[int] = []
        isfinite = math.isfinite
        memory, inputs = self.memory, self.inputs
        plain = self._plain
        limit = len(values)
        fed = 0
        while fed < limit:
            index, value = first + fed, float(values[fed])
            fed += 1
            if not isfinite(value):
                continue
            det = self.detector
            before = getattr(det, "estimation", None)
            det.update(value)
            if not plain:
                self._track(value)
            if not det.drift_detected:
                if memory is not None:
                    inputs.append(value)
                    if len(inputs) >= memory:
                        self.detector = det.clone()  # afresh, at this example
                        inputs.clear()
                continue
            inputs.clear()
            if self._detected(before, index):
                rises.append(index)
                if stride is not None and len(rises) == 1:
                    limit = min(limit, -(-(index + 1) // stride) * stride - first)
        return fed, rises

    def _feed_compiled(
        self, values: Sequence[float] | np.ndarray, first: int, stride: int | None
    ) -> tuple[int, list[int]]:
        """:meth:`update_until` for the compiled ADWIN: the whole feed in one loop."""
        arr = np.asarray(values, dtype=np.float64)
        index = np.empty(arr.shape[0], dtype=np.int64)
        rise = np.empty(arr.shape[0], dtype=np.bool_)
        memory, inputs = self.memory, self.inputs
        fed, n_events, afresh, _ = adwin.feed(
            *self.detector.arrays, arr, int(first), int(stride or 0), int(memory or 0),
            len(inputs), self.restart_on == "any", index, rise,
        )  # fmt: skip
        if memory is not None:  # the log: the finite values since the last fresh start
            if afresh >= 0:
                inputs.clear()
            kept = arr[afresh + 1 : fed]
            inputs.extend(kept[np.isfinite(kept)].tolist())
        rises = []
        for k in range(n_events):  # (ADWIN is plain: no running means to reset)
            if rise[k]:
                self.n_restarts += 1
                self.last_restart = int(index[k])
                rises.append(int(index[k]))
            else:
                self.n_ignored += 1
        return int(fed), rises

    def _detected(self, before: float | None, index: int) -> bool:
        up = self._increased(before)
        self._since_sum, self._since_n = 0.0, 0
        if up or self.restart_on == "any":
            self.n_restarts += 1
            self.last_restart = int(index)
            return True
        self.n_ignored += 1
        return False

    @property
    def _plain(self) -> bool:
        """The direction of a change never needs the running means (ADWIN's estimation, or a
        detector of rises only)."""
        det = self.detector
        river_drift = sys.modules.get("river.drift")  # (a river detector was imported with it)
        river_adwin = () if river_drift is None else (river_drift.ADWIN,)
        return isinstance(det, (ADWIN, *river_adwin)) or getattr(det, "mode", None) == "up"


def total_variation(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    """``1/2 sum_m |a_m - b_m|`` over the union of names (a missing kernel weighs 0)."""
    return 0.5 * sum(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in set(a) | set(b))


class BetaMovement:
    """Total-variation distance between β now and β ``lag`` examples ago.

    β is sampled every ``stride`` examples (O(M) then, O(1) otherwise); ``value`` compares the
    latest sample with the one ``lag`` examples (rounded to strides) before it, or with the oldest
    sample while fewer than ``lag`` examples have been seen (``span`` says how far back it looked).
    """

    def __init__(self, lag: int = 1000, stride: int | None = None) -> None:
        if int(lag) != lag or lag < 1:
            raise ValueError(f"beta lag must be a positive integer, got {lag!r}")
        stride = max(1, int(lag) // 50) if stride is None else int(stride)
        if not 1 <= stride <= lag:
            raise ValueError(f"beta stride must be in [1, lag={lag}], got {stride!r}")
        self.lag, self.stride = int(lag), stride
        self._samples: deque[tuple[int, dict[str, float]]] = deque(maxlen=lag // stride + 1)
        self.value = 0.0
        self.span = 0

    def due(self, index: int) -> bool:
        """Whether ``index`` is a sampling point (a multiple of the stride; the monitor passes
        its example count)."""
        return index % self.stride == 0

    def to_state(self) -> dict[str, Any]:
        """The samples (JSON-able), so a restart continues the same distance."""
        return {"samples": [[i, w] for i, w in self._samples], "value": self.value}

    def restore(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`to_state` (samples beyond this lag and stride are dropped)."""
        self._samples.clear()
        for index, weights in state["samples"]:
            if int(index) % self.stride == 0:
                self._samples.append((int(index), {k: float(v) for k, v in weights.items()}))
        self.value = float(state["value"])
        self.span = self._samples[-1][0] - self._samples[0][0] if self._samples else 0

    def update(self, index: int, weights: Mapping[str, float]) -> float:
        """Record β at example ``index`` (call when ``due``); returns the current distance."""
        self._samples.append((int(index), dict(weights)))
        then_index, then = self._samples[0]
        self.value = total_variation(weights, then)
        self.span = int(index) - then_index
        return self.value
