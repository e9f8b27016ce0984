"""What a reload (SIGHUP, or settings edited while the daemon was stopped) changes.

Only the kernel list is applied live: :func:`apply_kernels` makes the learner's bank the one the
settings configure with ``add_kernel`` / ``remove_kernel`` (the other blocks keep their state),
refusing a change that looks like a mistake unless forced. Every other changed setting takes
effect after a restart; :func:`reloaded_settings` lists them.
"""

from __future__ import annotations

import logging
from typing import Any

from streammkl.daemon.config import Settings
from streammkl.daemon.learner import (
    LearnerConfigError,
    change_kernels,
    configured_kernels,
    kernel_change_risks,
    kernel_names,
)

log = logging.getLogger(__name__)


def apply_kernels(learner: Any, spec: Any, guard: Any) -> bool:
    """Make ``learner``'s bank the one ``spec`` (the ``[learner]`` settings) configures; whether
    anything changed. A change that looks like a mistake (:func:`kernel_change_risks`) is refused
    with a :class:`LearnerConfigError` unless ``guard.force`` (the ``[reload]`` settings); a
    change the learner refuses leaves it untouched (tried on a copy first)."""
    wanted = configured_kernels(spec)
    if wanted is None or [k.name for k in wanted] == kernel_names(learner):
        return False
    risks = kernel_change_risks(learner, wanted, guard.max_dropped_fraction)
    if risks and not guard.force:
        raise LearnerConfigError(
            "learner.kernels: the change is refused: " + "; ".join(risks)
            + " (set reload.force = true to apply it anyway)"
        )  # fmt: skip
    if risks:
        log.warning("learner.kernels: forced change: %s", "; ".join(risks))
    try:  # on a copy first: refused -> nothing changes on the live learner
        change_kernels(type(learner).from_state(*learner.to_state()), wanted)
    except LearnerConfigError:
        raise
    except Exception as exc:  # whatever the learner raises, a refusal (never a crash)
        raise LearnerConfigError(f"learner.kernels: the change was refused: {exc!r}") from exc
    added, removed = change_kernels(learner, wanted)
    log.info("kernels added %s, removed %s", added, removed)
    return bool(added or removed)


def reloaded_settings(old: Settings, new: Settings) -> tuple[Settings, list[str]]:
    """The settings in force after a reload (``old`` with ``new``'s kernel list) and the changed
    settings that wait for a restart (dotted names)."""
    ignored = [n for n in type(new).model_fields if getattr(new, n) != getattr(old, n)]
    ignored = [n for n in ignored if n not in ("learner", "reload")] + [
        f"learner.{n}"
        for n in type(new.learner).model_fields
        if n != "kernels" and getattr(new.learner, n) != getattr(old.learner, n)
    ]
    kept = old.model_copy(
        update={"learner": old.learner.model_copy(update={"kernels": new.learner.kernels})}
    )
    return kept, ignored
