"""Regret, bounds and kernel drift of an online learner — pure computation, no I/O.

- :class:`Monitor` (``facade``): everything below behind ``observe`` / ``snapshot`` for the daemon;
  it observes rounds and never changes the learner; its snapshot and the counters it
  checkpoints are its own methods. ``metrics.METRICS`` gives each snapshot value's Prometheus
  name and exact help text.
- :class:`MonitoredLoop` (``loop``): the learning loop under a monitor: it learns (one round or
  compiled runs), runs the shadow learners beside the model and applies the schedule restarts
  the monitor asks for.
- ``objective``: the cumulative prequential objective ``sum_t [lambda Omega(theta_t) + L_t]``.
- ``regret``: windowed regret against the best fixed hypothesis on the last W examples, fitted off
  the hot path (``hindsight``: warm-started epochs of the learner's algorithm, or SpicyMKL).
- ``shadows``: regret against the best single kernel (one shadow learner per kernel).
- ``theory`` / ``bounds``: Prop. 3 for the configured schedule, and its windowed form.
- ``drift``: loss drift detection (a rise asks for a schedule restart); β movement.

Meanings and derivations: ``docs/monitor.md``.
"""

from __future__ import annotations

from streammkl.monitor.facade import Monitor, Observed
from streammkl.monitor.loop import MonitoredLoop, Segment
from streammkl.monitor.metrics import METRICS

__all__ = ["METRICS", "Monitor", "MonitoredLoop", "Observed", "Segment"]
