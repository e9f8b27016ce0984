"""Pickle-free persistence of a :class:`~streammkl.structured.SequenceLabeler`.

``to_state`` gives ``(meta, arrays)``: ``meta`` is JSON (format, version, configuration as specs,
labels with type tags, feature keys, counters) and ``arrays`` are the core block-state arrays plus
the bigram block ``transition``. ``save`` writes both into the learners' one state file
(:mod:`streammkl.statefile`: versioned, checksummed, written atomically and privately). Loading
checks the format, refuses a newer version, and validates every array's dtype and shape against
the configuration, so a corrupt or foreign file gives a clear error rather than a wrong model.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import fields
from typing import TYPE_CHECKING, Any

import numpy as np

from streammkl import statefile
from streammkl.core.state import BlockState
from streammkl.statefile import StateError, check_header
from streammkl.structured.inputs import decode_label, encode_label

if TYPE_CHECKING:
    from streammkl.structured.labeler import SequenceLabeler

FORMAT = "streammkl.SequenceLabeler"
VERSION = 2  # 2: the array "gram" (projection budget policy); version 1 files still load
_INT_ARRAYS = ("age", "counters")


def optimizer_config(model: Any) -> dict[str, Any]:
    """The regularizers, schedule and radius of a structured learner as JSON-able specs."""
    return {
        "regularizer": [r.to_spec() for r in model._regularizers],
        "schedule": model._schedule.to_spec(),
        "radius": None if model.radius is None else float(model.radius),
    }


def state_meta(
    model: Any, fmt: str, version: int, config: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    """The JSON part of a structured learner's state: format, version, configuration, the
    learner's own ``extra`` entries, then its round and schedule counters."""
    return {
        "format": fmt,
        "version": version,
        "config": config,
        **extra,
        "t": model.t,
        "schedule_t": model._schedule.t,
    }


def config(model: SequenceLabeler) -> dict[str, Any]:
    """Constructor arguments as JSON-able specs (``SequenceLabeler(**config)`` rebuilds it)."""
    return {
        "kernels": [k.to_spec() for k in model.kernels],
        "loss": model.loss,
        **optimizer_config(model),
        "budget": model.budget,
        "budget_policy": model.budget_policy,
        "seed": model.seed,
        "learn_transition_weight": model.learn_transition_weight,
        "transition_weight": model.transition_weight,
    }


def to_state(model: SequenceLabeler) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    meta = state_meta(
        model,
        FORMAT,
        VERSION,
        config(model),
        labels=[encode_label(y) for y in model.labels],
        feature_keys=list(model.feature_keys),
        input_mode=model.input_mode,
    )
    arrays: dict[str, np.ndarray] = {}
    if model._state is not None:
        arrays = model._state.to_arrays()
        arrays["transition"] = model.transition.copy()
    return meta, arrays


def _fail(msg: str) -> StateError:
    return StateError(f"SequenceLabeler state: {msg}")


def from_state(cls: type, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> SequenceLabeler:
    check_header(meta, FORMAT, VERSION, "SequenceLabeler")
    version = int(meta["version"])
    try:
        model = cls(**meta["config"])
        labels = [decode_label(item) for item in meta["labels"]]
        keys = [str(k) for k in meta["feature_keys"]]
        mode = meta["input_mode"]
        t, schedule_t = int(meta["t"]), int(meta["schedule_t"])
    except (KeyError, TypeError, ValueError) as exc:
        raise _fail(f"bad meta ({type(exc).__name__}: {exc})") from None
    if mode not in (None, "dict", "array"):
        raise _fail(f"bad input_mode {mode!r}")
    if len(set(labels)) != len(labels):
        raise _fail("repeated labels")
    model.labels = labels
    model._label_index = {y: i for i, y in enumerate(labels)}
    model.feature_keys, model.input_mode = keys, mode
    model.t, model._schedule.t = t, schedule_t
    if not arrays:
        if labels:
            raise _fail("labels are known but the arrays are missing")
        return model
    if not labels:
        raise _fail("arrays present but no labels")
    joint = model._joint
    model._rebuild(keys, len(labels))
    template = joint.state
    n = _support_size(arrays)
    checked = {}
    for f in fields(BlockState):
        if f.name == "gram" and version < 2:
            continue  # saved before the projection policy existed: built by sync_gram
        checked[f.name] = _checked(arrays, f.name, _expected_shape(template, f.name, n))
    joint.state = BlockState.from_arrays(checked, template.capacity)
    assert joint.layout is not None  # set by _rebuild
    joint.state.sync_gram(joint.layout, joint.keeps_gram)
    K = len(labels)
    joint.transition = _checked(arrays, "transition", (K, K))
    return model


def _support_size(arrays: dict[str, np.ndarray]) -> int:
    counters = arrays.get("counters")
    if counters is None or np.shape(counters) != (2,):
        raise _fail("array 'counters' missing or not of shape (2,)")
    n = int(counters[0])
    if n < 0 or counters[1] < n:
        raise _fail(f"array 'counters' is inconsistent: {counters.tolist()}")
    return n


def _expected_shape(template: BlockState, name: str, n: int) -> tuple[int, ...]:
    shape = list(getattr(template, name).shape)
    if name in ("sx", "ssq", "sv", "kself", "age"):
        shape[0] = n
    elif name == "coef":
        shape[1] = n
    elif name == "gram" and shape[2]:
        shape[2] = shape[3] = n
    return tuple(shape)


def _checked(arrays: dict[str, np.ndarray], name: str, shape: tuple[int, ...]) -> np.ndarray:
    if name not in arrays:
        raise _fail(f"array {name!r} is missing")
    arr = np.asarray(arrays[name])
    kind = "i" if name in _INT_ARRAYS else "f"
    if arr.dtype.kind != kind or arr.shape != shape:
        raise _fail(f"array {name!r} has {arr.dtype}{arr.shape}; expected {kind}-type {shape}")
    if kind == "f" and not np.all(np.isfinite(arr)):
        raise _fail(f"array {name!r} holds NaN or Inf")
    return np.array(arr, dtype=np.int64 if kind == "i" else np.float64)


def save(model: SequenceLabeler, path: str | os.PathLike) -> None:
    statefile.write(path, *to_state(model))


def load(cls: type, path: str | os.PathLike) -> SequenceLabeler:
    return load_with(from_state, cls, path, "SequenceLabeler")


def load_with(
    from_state_fn: Callable[[type, dict[str, Any], dict[str, np.ndarray]], Any],
    cls: type,
    path: str | os.PathLike,
    kind: str,
) -> Any:
    """Read ``path`` (:func:`streammkl.statefile.read`) and rebuild with ``from_state_fn``; a
    rebuild error names the file. Shared by the structured learners."""
    meta, arrays = statefile.read(path, kind)
    try:
        return from_state_fn(cls, meta, arrays)
    except StateError as exc:
        raise StateError(f"{os.fspath(path)}: {exc}") from None
