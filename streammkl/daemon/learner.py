"""What the daemon needs from a learner, and how one is built from the configuration.

The daemon codes against :class:`Learner` (a structural Protocol), so any river-style learner
with the persistence methods below can be plugged in with ``learner.factory = "module:callable"``
(code execution by configuration: allowed only with ``--allow-learner-factory``).
The default is :class:`streammkl.river.MKLClassifier` / :class:`~streammkl.river.MKLRegressor`,
whose kernels, loss, regularizer, schedule, radius, budget (and its policy) and seed come from the
``[learner]`` section (names resolved in :mod:`streammkl.core`).
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np


class LearnerConfigError(ValueError):
    """A learner specification that cannot be built; the message names the field."""


@runtime_checkable
class Learner(Protocol):
    """The learner surface the daemon uses (river's, plus persistence and introspection)."""

    def learn_one(self, x: dict[Any, float], y: Any) -> None: ...

    def predict_one(self, x: dict[Any, float]) -> Any: ...

    def to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]: ...

    def digest(self) -> str: ...

    @property
    def kernel_weights(self) -> Mapping[str, float]: ...


def is_classifier(learner: Any) -> bool:
    """Whether the learner predicts classes (a river classifier, or has ``predict_proba_one``)."""
    from river import base

    if isinstance(learner, base.Classifier):
        return True
    if isinstance(learner, base.Regressor):
        return False
    return callable(getattr(learner, "predict_proba_one", None))


def restore(template: Any, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> Any:
    """Rebuild a learner of ``template``'s class from a saved state."""
    return type(template).from_state(meta, arrays)


def _numbers(value: Any, names: list[str]) -> dict[str, float]:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return {str(k): float(v) for k, v in value.items()}
    arr = np.asarray(value, dtype=float).ravel()
    return {names[i] if i < len(names) else str(i): float(v) for i, v in enumerate(arr)}


def _inspected(learner: Any) -> Any:
    """What describes the learner's kernels: the seam of a streammkl river learner
    (``learner.rounds()``, whose ``block_norms``, ``n_support`` and ``kernel_names`` these are),
    else the learner itself (the structured learners, a custom learner)."""
    rounds = getattr(learner, "rounds", None)
    return rounds() if callable(rounds) else learner


def introspect(learner: Any) -> dict[str, Any]:
    """Read kernel weights, block norms, fitted bandwidths, active kernels and support size,
    tolerant of types.

    Returns plain Python values (a snapshot safe to hand to another thread).
    """
    weights = _numbers(getattr(learner, "kernel_weights", None), [])
    names = list(weights)
    seen = _inspected(learner)
    norms = _numbers(getattr(seen, "block_norms", None), names)
    active = getattr(seen, "active_kernels", None)
    if active is None:
        n_active = sum(1 for w in weights.values() if w > 0)
    elif isinstance(active, int | np.integer):
        n_active = int(active)
    else:
        n_active = len(list(active))
    support = getattr(seen, "n_support", None)
    if isinstance(support, Mapping):
        support_total = int(sum(int(v) for v in support.values()))
    elif support is None:
        support_total = 0
    else:
        support_total = int(np.sum(np.asarray(support)))
    return {
        "kernel_weights": {k: (v if math.isfinite(v) else 0.0) for k, v in weights.items()},
        "block_norms": norms,
        "kernel_bandwidths": _numbers(getattr(seen, "kernel_bandwidths", None), []),
        "active_kernels": n_active,
        "support_vectors": support_total,
    }


# -- building from the configuration ----------------------------------------------------------

_CORE_MODULES = {
    "kernels": "streammkl.core.kernels",
    "loss": "streammkl.core.losses",
    "regularizer": "streammkl.core.regularizers",
    "schedule": "streammkl.core.schedules",
}


def _norm(name: str) -> str:
    return name.lower().replace("_", "").replace("-", "")


def build_component(kind: str, spec: Any, where: str) -> Any:
    """Build one core object from ``"name"`` or ``{"type": "name", **params}``.

    Parameters
    ----------
    kind
        ``"kernels"``, ``"loss"``, ``"regularizer"`` or ``"schedule"``.
    spec
        The configured value.
    where
        The field path used in error messages (e.g. ``learner.kernels[1]``).
    """
    if isinstance(spec, str):
        name, params = spec, {}
    elif isinstance(spec, Mapping) and isinstance(spec.get("type"), str):
        params = {k: v for k, v in spec.items() if k != "type"}
        name = spec["type"]
    else:
        raise LearnerConfigError(f"{where}: expected a name or a table with a 'type', got {spec!r}")
    module = importlib.import_module(_CORE_MODULES[kind])
    classes = {
        _norm(n): obj
        for n, obj in vars(module).items()
        if isinstance(obj, type) and not n.startswith("_") and obj.__module__ == module.__name__
    }
    cls = classes.get(_norm(name))
    if cls is None:
        known = ", ".join(sorted(c.__name__ for c in classes.values()))
        raise LearnerConfigError(f"{where}.type: unknown {kind} {name!r}; known: {known}")
    try:
        return cls(**params)
    except (TypeError, ValueError) as exc:
        raise LearnerConfigError(f"{where}: {cls.__name__}({params}) failed: {exc}") from exc


def load_factory(path: str) -> Any:
    """Import ``"package.module:callable"``."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise LearnerConfigError(f"learner.factory: expected 'module:callable', got {path!r}")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise LearnerConfigError(f"learner.factory: cannot import {path!r}: {exc}") from exc


def build_learner(spec: Any, allow_factory: bool = False) -> Any:
    """Build the configured learner from a :class:`~streammkl.daemon.config.LearnerSpec`.

    ``learner.factory`` imports and runs code named by the settings: whoever can write the
    settings (a file, an environment variable) could run anything in the daemon. It is refused
    unless ``allow_factory`` (the command line's ``--allow-learner-factory``, which the settings
    cannot set)."""
    if spec.factory:
        if not allow_factory:
            raise LearnerConfigError(
                "learner.factory imports and runs code named in the settings; start the "
                "daemon with --allow-learner-factory to allow it"
            )
        return load_factory(spec.factory)(spec)
    if spec.task == "sequence":
        return _sequence_labeler(spec)
    if spec.task == "parsing":
        return _dependency_parser(spec)
    from streammkl import river as mkl_river

    cls_name = "MKLClassifier" if spec.task == "classification" else "MKLRegressor"
    cls = getattr(mkl_river, cls_name, None)
    if cls is None:
        raise LearnerConfigError(
            f"learner.task: streammkl.river.{cls_name} is not available in this build"
        )
    # standardize None: on (in a mixing group too: the merge pools the statistics)
    kwargs: dict[str, Any] = {"seed": spec.seed, "standardize": spec.standardize is not False}
    if spec.kernels is not None:
        kwargs["kernels"] = tuple(
            build_component("kernels", k, f"learner.kernels[{i}]")
            for i, k in enumerate(spec.kernels)
        )
    for kind in ("loss", "regularizer", "schedule"):
        value = getattr(spec, kind)
        if value is not None:
            kwargs[kind] = build_component(kind, value, f"learner.{kind}")
    if spec.radius is not None:
        kwargs["radius"] = spec.radius
    for name in ("budget", "budget_policy"):
        if getattr(spec, name) is not None:
            kwargs[name] = getattr(spec, name)
    if spec.fit_intercept is not None:
        kwargs["fit_intercept"] = spec.fit_intercept
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise LearnerConfigError(f"learner: {cls_name}(...) rejected the settings: {exc}") from exc


def _sequence_labeler(spec: Any) -> Any:
    """:class:`streammkl.structured.SequenceLabeler` from the spec: ``loss`` is ``"hinge"`` or
    ``"crf"``; ``params`` passes its other arguments (``learn_transition_weight``, ...)."""
    from streammkl.structured import SequenceLabeler

    kwargs: dict[str, Any] = {"seed": spec.seed, **spec.params}
    if spec.kernels is not None:
        kwargs["kernels"] = tuple(
            build_component("kernels", k, f"learner.kernels[{i}]")
            for i, k in enumerate(spec.kernels)
        )
    if spec.loss is not None:
        if not isinstance(spec.loss, str) or spec.loss.lower() not in ("hinge", "crf"):
            raise LearnerConfigError(
                f"learner.loss: a sequence labeler's loss is 'hinge' or 'crf', got {spec.loss!r}"
            )
        kwargs["loss"] = spec.loss.lower()
    for name in ("radius", "budget", "budget_policy"):
        if getattr(spec, name) is not None:
            kwargs[name] = getattr(spec, name)
    if spec.fit_intercept is not None:
        raise LearnerConfigError("learner.fit_intercept: a sequence labeler has no intercept")
    return _structured(SequenceLabeler, spec, kwargs)


def _structured(cls: type, spec: Any, kwargs: dict[str, Any]) -> Any:
    """A structured learner from ``kwargs`` plus the spec's regularizer and schedule; a refusal
    is a :class:`LearnerConfigError` naming the task and ``learner.params``."""
    for kind in ("regularizer", "schedule"):
        value = getattr(spec, kind)
        if value is not None:
            kwargs[kind] = build_component(kind, value, f"learner.{kind}")
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise LearnerConfigError(
            f"learner (task {spec.task}): {cls.__name__}(...) rejected the settings "
            f"(learner.params = {spec.params}): {exc}"
        ) from exc


def _dependency_parser(spec: Any) -> Any:
    """:class:`streammkl.structured.DependencyParser` from the spec: ``regularizer``,
    ``schedule``, ``radius``, ``seed``; ``params`` passes its other arguments (``templates``,
    ``average``, ``single_root``, ``max_hash_bits``). Its groups are feature templates, not
    kernels: ``kernels``, ``loss``, ``budget`` and ``fit_intercept`` are refused."""
    from streammkl.structured import DependencyParser

    for name in ("kernels", "loss", "budget", "fit_intercept"):
        if getattr(spec, name) is not None:
            raise LearnerConfigError(
                f"learner.{name}: the dependency parser has no {name} (its groups are the feature "
                "templates, learner.params.templates; its loss the structured hinge)"
            )
    kwargs: dict[str, Any] = {"seed": spec.seed, **spec.params}
    if spec.radius is not None:
        kwargs["radius"] = spec.radius
    return _structured(DependencyParser, spec, kwargs)


# -- runtime kernel changes (SIGHUP) -----------------------------------------------------------


def configured_kernels(spec: Any) -> tuple[Any, ...] | None:
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


def kernel_names(learner: Any) -> list[str]:
    """Names of the learner's kernels, in bank order: their identity (fixed by their
    configuration, never by what they learned, such as a fitted bandwidth)."""
    names = getattr(_inspected(learner), "kernel_names", None)
    return list(names) if names is not None else list(getattr(learner, "kernel_weights", {}))


def kernel_change_risks(learner: Any, wanted: tuple[Any, ...], max_dropped: float) -> list[str]:
    """Why changing the learner's bank to ``wanted`` looks like a mistake (empty: it does not):
    it would drop more than ``max_dropped`` of the learned blocks (non-zero norm), or a kernel
    selects features the learner has never seen (a typo selects nothing, and its block would
    learn nothing).

    The dropped blocks are those the change really loses: it is made on a copy of the learner
    (when the learner can be copied and changed; else the names are compared), and every learned
    block that is gone from the copy, or no longer has its norm there, counts."""
    risks = []
    norms = dict(getattr(_inspected(learner), "block_norms", {}) or {})
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


def _norms_after(learner: Any, wanted: tuple[Any, ...]) -> dict[str, float] | None:
    """The block norms a copy of ``learner`` has once its bank is ``wanted`` (None when the
    learner cannot be copied through its state or cannot change its kernels)."""
    if not callable(getattr(learner, "from_state", None)):
        return None
    copy = type(learner).from_state(*learner.to_state())
    change_kernels(copy, wanted)
    norms = getattr(_inspected(copy), "block_norms", {}) or {}
    return {str(k): float(v) for k, v in dict(norms).items()}


def unseen_features(learner: Any, features: Any) -> list[Any]:
    """The ``features`` (names or column indices) the learner has not seen; nothing for a
    learner that has seen no input yet or cannot tell."""
    if not features:
        return []
    keys = getattr(learner, "feature_keys", None)  # SequenceLabeler
    seen = _inspected(learner)
    if keys is not None:
        known, n = set(keys), len(keys)
        names = [f for f in features if isinstance(f, str) and f not in known]
    elif callable(getattr(seen, "unknown_features", None)):  # streammkl river learners
        n = int(seen.n_features)
        names = seen.unknown_features(dict.fromkeys(f for f in features if isinstance(f, str)))
    else:
        return []
    if n == 0:
        return []
    return names + [f for f in features if not isinstance(f, str) and not 0 <= f < n]


def change_kernels(learner: Any, wanted: tuple[Any, ...]) -> tuple[list[str], list[str]]:
    """Make the learner's bank ``wanted`` (by kernel name) with ``add_kernel`` / ``remove_kernel``,
    every other block keeping its state. Returns (added, removed) names.

    Raises
    ------
    LearnerConfigError
        If the learner cannot change its kernels, or a change is refused (e.g. removing the last
        kernel); kernels are added before any is removed, so a refusal leaves the old ones.
    """
    if not (
        callable(getattr(learner, "add_kernel", None))
        and callable(getattr(learner, "remove_kernel", None))
    ):
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
            learner.add_kernel(kernel)
        for name in removed:
            learner.remove_kernel(name)
    except (ValueError, KeyError, TypeError) as exc:
        raise LearnerConfigError(f"learner.kernels: the change was refused: {exc}") from exc
    return [k.name for k in added], removed
