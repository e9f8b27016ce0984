"""Seeded, re-iterable event streams with recorded ground truth, for streammkl.

Every scenario is a finite iterable of :class:`streammkl.wire.Record` (iterate it twice, get the
same stream), has a JSON-able :meth:`~simulators.base.Scenario.ground_truth`, and can be written
to a JSON Lines file (:mod:`simulators.jsonl`) or produced to Kafka
(:mod:`simulators.kafka_producer`); ``streammkl simulate`` / ``python -m simulators`` do both.

>>> from simulators import get, names
>>> sim = get("kernel-drift", seed=0, phase_length=500)
>>> [s["kernel"] for s in sim.ground_truth()["segments"]]
['linear', 'rbf(gamma=2)', 'poly2']

From streammkl this package imports only ``streammkl.wire`` (DESIGN.md).
"""

from __future__ import annotations

from .base import Scenario
from .scenarios import get, names, params_of, scenario_class

__all__ = ["Scenario", "get", "names", "params_of", "scenario_class"]
