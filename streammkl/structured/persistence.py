"""Pickle-free persistence shared by the structured learners (their state's JSON header, loading).

Each learner writes and reads its own state (:meth:`SequenceLabeler.to_state
<streammkl.structured.SequenceLabeler.to_state>`, :meth:`DependencyParser.to_state
<streammkl.structured.DependencyParser.to_state>`); what they share is here: the optimiser's
configuration as JSON-able specs, the JSON header of a state (format, version, configuration,
round counters), and loading a state file (:mod:`streammkl.statefile`: versioned, checksummed,
written atomically and privately) with errors that name the file.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from streammkl import statefile
from streammkl.core.regularizers import Regularizer
from streammkl.core.schedules import Schedule
from streammkl.statefile import StateError

__all__ = ["StateError", "load_with", "optimizer_config", "state_meta"]


def optimizer_config(
    regularizers: Sequence[Regularizer], schedule: Schedule, radius: float | None
) -> dict[str, Any]:
    """The regularizers, schedule and radius of a structured learner as JSON-able specs."""
    return {
        "regularizer": [r.to_spec() for r in regularizers],
        "schedule": schedule.to_spec(),
        "radius": None if radius is None else float(radius),
    }


def state_meta(
    fmt: str, version: int, config: dict[str, Any], t: int, schedule_t: int, **extra: Any
) -> dict[str, Any]:
    """The JSON part of a structured learner's state: format, version, configuration, the
    learner's own ``extra`` entries, then its round and schedule counters."""
    return {"format": fmt, "version": version, "config": config, **extra, "t": t,
            "schedule_t": schedule_t}  # fmt: skip


def load_with(
    from_state: Callable[[dict[str, Any], dict[str, np.ndarray]], Any],
    path: str | os.PathLike,
    kind: str,
) -> Any:
    """Read ``path`` (:func:`streammkl.statefile.read`) and rebuild with ``from_state``; a
    rebuild error names the file."""
    meta, arrays = statefile.read(path, kind)
    try:
        return from_state(meta, arrays)
    except StateError as exc:
        raise StateError(f"{os.fspath(path)}: {exc}") from None
