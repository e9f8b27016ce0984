"""How the daemon builds its learner from the ``[learner]`` settings.

The default is :class:`streammkl.river.MKLClassifier` / :class:`~streammkl.river.MKLRegressor`,
whose kernels, loss, regularizer, schedule, radius, budget (and its policy) and seed come from the
``[learner]`` section (names resolved in :mod:`streammkl.core`); ``task = "sequence"`` builds a
:class:`~streammkl.structured.SequenceLabeler`, ``task = "parsing"`` a
:class:`~streammkl.structured.DependencyParser`. ``learner.factory = "module:callable"`` runs code
named by the settings instead (allowed only with ``--allow-learner-factory``).
``memory_window = W`` wraps the classifier in a :class:`~streammkl.river.MemoryClassifier`, the
regressor in a :class:`~streammkl.river.MemoryRegressor` (``window = W``): issue 27's "accurate"
presets.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar, overload

from streammkl.core._spec import Spec
from streammkl.core.kernels import Kernel
from streammkl.daemon.config import LearnerSpec
from streammkl.daemon.learning.learner import Learner, Memory
from streammkl.river import MemoryClassifier, MemoryRegressor, MKLClassifier, MKLRegressor
from streammkl.structured import DependencyParser, SequenceLabeler

Structured = TypeVar("Structured", SequenceLabeler, DependencyParser)


class LearnerConfigError(ValueError):
    """A learner specification that cannot be built; the message names the field."""


_CORE_MODULES = {
    "kernels": "streammkl.core.kernels",
    "loss": "streammkl.core.losses",
    "regularizer": "streammkl.core.regularizers",
    "schedule": "streammkl.core.schedules",
}


def _norm(name: str) -> str:
    return name.lower().replace("_", "").replace("-", "")


@overload
def build_component(kind: Literal["kernels"], spec: object, where: str) -> Kernel: ...


@overload
def build_component(
    kind: Literal["loss", "regularizer", "schedule"], spec: object, where: str
) -> Spec: ...


def build_component(kind: str, spec: object, where: str) -> Spec:
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
        built: Spec = cls(**params)
    except (TypeError, ValueError) as exc:
        raise LearnerConfigError(f"{where}: {cls.__name__}({params}) failed: {exc}") from exc
    return built


def load_factory(path: str) -> Callable[[LearnerSpec], Learner]:
    """Import ``"package.module:callable"``."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise LearnerConfigError(f"learner.factory: expected 'module:callable', got {path!r}")
    try:
        factory: Callable[[LearnerSpec], Learner] = getattr(
            importlib.import_module(module_name), attr
        )
    except (ImportError, AttributeError) as exc:
        raise LearnerConfigError(f"learner.factory: cannot import {path!r}: {exc}") from exc
    return factory


def build_learner(spec: LearnerSpec, allow_factory: bool = False) -> Learner:
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
    cls: type[MKLClassifier | MKLRegressor] = (
        MKLClassifier if spec.task == "classification" else MKLRegressor
    )
    cls_name = cls.__name__
    # standardize None: on (in a mixing group too: the merge pools the statistics)
    kwargs: dict[str, Any] = {"seed": spec.seed, "standardize": spec.standardize is not False}
    if spec.kernels is not None:
        kwargs["kernels"] = tuple(
            build_component("kernels", k, f"learner.kernels[{i}]")
            for i, k in enumerate(spec.kernels)
        )
    kinds: tuple[Literal["loss", "regularizer", "schedule"], ...] = (
        "loss",
        "regularizer",
        "schedule",
    )
    for kind in kinds:
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
        learner = cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise LearnerConfigError(f"learner: {cls_name}(...) rejected the settings: {exc}") from exc
    if spec.memory_window is None:
        return learner
    return _with_memory(learner, spec.memory_window)


def _with_memory(learner: MKLClassifier | MKLRegressor, window: int) -> Memory:
    """``learner`` (what the other settings build) inside its memory preset of ``window``
    examples: a :class:`~streammkl.river.MemoryClassifier` around a classifier, a
    :class:`~streammkl.river.MemoryRegressor` around a regressor (each class's other defaults:
    they are the ones its accuracy was measured with).

    The regressor standardises its own inputs (``learner.standardize``, on by default) and the
    memory reads them raw, as :class:`~streammkl.river.MemoryRegressor` asks (the scaling
    inside the wrapper); so the daemon runs ``MemoryRegressor(MKLRegressor(standardize=True,
    ...), window=W)``, which a user builds the same way (the library's default puts a river
    ``StandardScaler()`` in the pipeline instead: a different model, docs/daemon.md)."""
    try:
        if isinstance(learner, MKLClassifier):
            return MemoryClassifier(learner, window=window)
        return MemoryRegressor(learner, window=window)
    except (TypeError, ValueError) as exc:
        raise LearnerConfigError(f"learner.memory_window: {exc}") from exc


def _sequence_labeler(spec: LearnerSpec) -> SequenceLabeler:
    """:class:`streammkl.structured.SequenceLabeler` from the spec: ``loss`` is ``"hinge"`` or
    ``"crf"``; ``params`` passes its other arguments (``learn_transition_weight``, ...)."""
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


def _structured(cls: type[Structured], spec: LearnerSpec, kwargs: dict[str, Any]) -> Structured:
    """A structured learner from ``kwargs`` plus the spec's regularizer and schedule; a refusal
    is a :class:`LearnerConfigError` naming the task and ``learner.params``."""
    parts: tuple[Literal["regularizer", "schedule"], ...] = ("regularizer", "schedule")
    for kind in parts:
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


def _dependency_parser(spec: LearnerSpec) -> DependencyParser:
    """:class:`streammkl.structured.DependencyParser` from the spec: ``regularizer``,
    ``schedule``, ``radius``, ``seed``; ``params`` passes its other arguments (``templates``,
    ``average``, ``single_root``, ``max_hash_bits``). Its groups are feature templates, not
    kernels: ``kernels``, ``loss``, ``budget`` and ``fit_intercept`` are refused."""
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
