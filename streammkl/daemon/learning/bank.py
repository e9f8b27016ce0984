"""The learner's kernel bank, changed at run time (SIGHUP, or settings edited while stopped).

Only the kernel list is applied live: :func:`apply_kernels` makes the learner's bank the one the
settings configure with ``add_kernel`` / ``remove_kernel`` (the other blocks keep their state),
refusing a change that looks like a mistake (:func:`kernel_change_risks`) unless forced. A
kernel's name is its identity: its weight, its metrics label, what a change matches.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from streammkl.core.kernels import Kernel
from streammkl.daemon.config import LearnerSpec, ReloadSettings
from streammkl.daemon.learning.building import LearnerConfigError, build_component
from streammkl.daemon.learning.learner import Learner, inspected
from streammkl.river.rounds import Rounds

log = logging.getLogger(__name__)


def configured_kernels(spec: LearnerSpec) -> tuple[Kernel, ...] | None:
    """The kernel bank ``spec`` asks for; ``None`` when it names none (``kernels`` unset: the
    learner keeps the bank it has) or for a custom factory (its bank is its own business).

    Raises
    ------
    LearnerConfigError
        If a kernel cannot be built, or two kernels share a name (a kernel's name is its
        identity: its weight, its metrics label, what a reload matches)."""
    if spec.factory or spec.kernels is None:
        return None
    wanted = tuple(
        build_component("kernels", k, f"learner.kernels[{i}]") for i, k in enumerate(spec.kernels)
    )
    first: dict[str, int] = {}
    for i, kernel in enumerate(wanted):
        if kernel.name in first:
            raise LearnerConfigError(
                f"learner.kernels[{i}]: a second kernel named {kernel.name!r} (the name of "
                f"learner.kernels[{first[kernel.name]}]); names are the kernels' identity: "
                'remove the duplicate or give one a name = "..."'
            )
        first[kernel.name] = i
    return wanted


def kernel_names(learner: Learner) -> list[str]:
    """Names of the learner's kernels, in bank order: their identity (fixed by their
    configuration, never by what they learned, such as a fitted bandwidth)."""
    names = getattr(inspected(learner), "kernel_names", None)
    return list(names) if names is not None else list(getattr(learner, "kernel_weights", {}))


def kernel_change_risks(
    learner: Learner, wanted: tuple[Kernel, ...], max_dropped: float
) -> list[str]:
    """Why changing the learner's bank to ``wanted`` looks like a mistake (empty: it does not):
    it would drop more than ``max_dropped`` of the learned blocks (non-zero norm), or a kernel
    selects features the learner has never seen (a typo selects nothing, and its block would
    learn nothing).

    The dropped blocks are those the change really loses: it is made on a copy of the learner
    (when the learner can be copied and changed; else the names are compared), and every learned
    block that is gone from the copy, or no longer has its norm there, counts."""
    risks = []
    norms: dict[str, float] = dict(getattr(inspected(learner), "block_norms", {}) or {})
    learned = [n for n, b in norms.items() if b > 0]
    after = _norms_after(learner, wanted)
    if after is None:
        names = {k.name for k in wanted}
        dropped = [n for n in learned if n not in names]
    else:
        dropped = [n for n in learned if after.get(n) != norms[n]]
    if learned and len(dropped) / len(learned) > max_dropped:
        risks.append(
            f"it drops {len(dropped)} of the {len(learned)} learned blocks ({', '.join(dropped)}), "
            f"more than reload.max_dropped_fraction = {max_dropped:g}"
        )
    for kernel in wanted:
        missing = unseen_features(learner, kernel.features or ())
        if missing:
            risks.append(f"kernel {kernel.name} selects features never seen: {missing[:5]}")
    return risks


def _norms_after(learner: Learner, wanted: tuple[Kernel, ...]) -> dict[str, float] | None:
    """The block norms a copy of ``learner`` has once its bank is ``wanted`` (None when the
    learner cannot be copied through its state or cannot change its kernels)."""
    if not callable(getattr(learner, "from_state", None)):
        return None
    copy = type(learner).from_state(*learner.to_state())
    change_kernels(copy, wanted)
    norms = getattr(inspected(copy), "block_norms", {}) or {}
    return {str(k): float(v) for k, v in dict(norms).items()}


def unseen_features(learner: Learner, features: Sequence[str | int]) -> list[str | int]:
    """The ``features`` (names or column indices) the learner has not seen; nothing for a
    learner that has seen no input yet or cannot tell."""
    if not features:
        return []
    keys = getattr(learner, "feature_keys", None)  # SequenceLabeler
    seen = inspected(learner)
    if keys is not None:
        known, n = set(keys), len(keys)
        names: list[str | int] = [f for f in features if isinstance(f, str) and f not in known]
    elif isinstance(seen, Rounds):  # streammkl river learners
        n = int(seen.n_features)
        names = list(
            seen.unknown_features(dict.fromkeys(f for f in features if isinstance(f, str)))
        )
    else:
        return []
    if n == 0:
        return []
    return names + [f for f in features if not isinstance(f, str) and not 0 <= f < n]


def change_kernels(learner: Learner, wanted: tuple[Kernel, ...]) -> tuple[list[str], list[str]]:
    """Make the learner's bank ``wanted`` (by kernel name) with ``add_kernel`` / ``remove_kernel``,
    every other block keeping its state. Returns (added, removed) names.

    Raises
    ------
    LearnerConfigError
        If the learner cannot change its kernels, or a change is refused (e.g. removing the last
        kernel); kernels are added before any is removed, so a refusal leaves the old ones.
    """
    add, remove = getattr(learner, "add_kernel", None), getattr(learner, "remove_kernel", None)
    if not (callable(add) and callable(remove)):
        raise LearnerConfigError(
            f"learner.kernels: {type(learner).__name__} cannot change its kernels at run time"
        )
    have = kernel_names(learner)
    names = [k.name for k in wanted]
    if len(set(names)) != len(names):
        dupes = sorted({n for n in names if names.count(n) > 1})
        raise LearnerConfigError(f"learner.kernels: two kernels share the name(s) {dupes}")
    added = [k for k in wanted if k.name not in have]
    removed = [n for n in have if n not in names]
    try:
        for kernel in added:
            add(kernel)
        for name in removed:
            remove(name)
    except (ValueError, KeyError, TypeError) as exc:
        raise LearnerConfigError(f"learner.kernels: the change was refused: {exc}") from exc
    return [k.name for k in added], removed


def check_change(learner: Learner, wanted: tuple[Kernel, ...], guard: ReloadSettings) -> None:
    """Refuse a change of the bank to ``wanted`` that looks like a mistake
    (:func:`kernel_change_risks`) with a :class:`LearnerConfigError`, unless ``guard.force`` (the
    ``[reload]`` settings): then it is only logged."""
    risks = kernel_change_risks(learner, wanted, guard.max_dropped_fraction)
    if risks and not guard.force:
        raise LearnerConfigError(
            "learner.kernels: the change is refused: " + "; ".join(risks)
            + " (set reload.force = true to apply it anyway)"
        )  # fmt: skip
    if risks:
        log.warning("learner.kernels: forced change: %s", "; ".join(risks))


def apply_kernels(learner: Learner, spec: LearnerSpec, guard: ReloadSettings) -> bool:
    """Make ``learner``'s bank the one ``spec`` (the ``[learner]`` settings) configures; whether
    anything changed. A change that looks like a mistake is refused (:func:`check_change`); a
    change the learner refuses leaves it untouched (tried on a copy first)."""
    wanted = configured_kernels(spec)
    if wanted is None or [k.name for k in wanted] == kernel_names(learner):
        return False
    check_change(learner, wanted, guard)
    try:  # on a copy first: refused -> nothing changes on the live learner
        change_kernels(type(learner).from_state(*learner.to_state()), wanted)
    except LearnerConfigError:
        raise
    except Exception as exc:  # whatever the learner raises, a refusal (never a crash)
        raise LearnerConfigError(f"learner.kernels: the change was refused: {exc!r}") from exc
    added, removed = change_kernels(learner, wanted)
    log.info("kernels added %s, removed %s", added, removed)
    return bool(added or removed)
