"""Pickle-free persistence of a :class:`~streammkl.structured.SequenceLabeler`.

``to_state`` gives ``(meta, arrays)``: ``meta`` is JSON (format, version, configuration as specs,
labels with type tags, feature keys, counters) and ``arrays`` are the core block-state arrays plus
the bigram block ``transition``. ``save`` writes both into ONE zip file (``meta.json`` and one
``.npy`` member per array, i.e. an ``.npz`` readable by ``np.load(allow_pickle=False)`` with an
extra JSON member), atomically and privately (:func:`streammkl.files.atomic_write`: temp file,
fsync, rename, fsync of the directory; mode 0600). Loading checks the format, refuses a newer
version, and validates every array's dtype and shape against the configuration, so a
corrupt or foreign file gives a clear error rather than a wrong model.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from dataclasses import fields
from typing import TYPE_CHECKING, Any

import numpy as np

from streammkl.core.state import BlockState
from streammkl.files import atomic_write
from streammkl.structured.inputs import decode_label, encode_label

if TYPE_CHECKING:
    from streammkl.structured.labeler import SequenceLabeler

FORMAT = "streammkl.SequenceLabeler"
VERSION = 2  # 2: the array "gram" (projection budget policy); version 1 files still load
_INT_ARRAYS = ("age", "counters")


class StateError(ValueError):
    """A saved labeler state that is corrupt, foreign or from a newer streammkl."""


def config(model: SequenceLabeler) -> dict[str, Any]:
    """Constructor arguments as JSON-able specs (``SequenceLabeler(**config)`` rebuilds it)."""
    return {
        "kernels": [k.to_spec() for k in model.kernels],
        "loss": model.loss,
        "regularizer": [r.to_spec() for r in model._regularizers],
        "schedule": model._schedule.to_spec(),
        "radius": None if model.radius is None else float(model.radius),
        "budget": model.budget,
        "budget_policy": model.budget_policy,
        "seed": model.seed,
        "learn_transition_weight": model.learn_transition_weight,
        "transition_weight": model.transition_weight,
    }


def to_state(model: SequenceLabeler) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "config": config(model),
        "labels": [encode_label(y) for y in model.labels],
        "feature_keys": list(model.feature_keys),
        "input_mode": model.input_mode,
        "t": model.t,
        "schedule_t": model._schedule.t,
    }
    arrays: dict[str, np.ndarray] = {}
    if model._state is not None:
        arrays = model._state.to_arrays()
        arrays["transition"] = model.transition.copy()
    return meta, arrays


def _fail(msg: str) -> StateError:
    return StateError(f"SequenceLabeler state: {msg}")


def check_header(meta: Any, fmt: str, version: int, kind: str) -> None:
    """StateError unless ``meta`` is a state of format ``fmt`` at a version <= ``version``."""
    if not isinstance(meta, dict) or meta.get("format") != fmt:
        found = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise StateError(f"{kind} state: not a {kind} state (format={found!r})")
    got = meta.get("version")
    if not isinstance(got, int):
        raise StateError(f"{kind} state: bad version field {got!r}")
    if got > version:
        raise StateError(
            f"{kind} state: version {got} is newer than this streammkl understands ({version}); "
            "upgrade streammkl"
        )


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
    write_state(path, *to_state(model))


def load(cls: type, path: str | os.PathLike) -> SequenceLabeler:
    path = os.fspath(path)
    meta, arrays = read_state(path, "SequenceLabeler")
    try:
        return from_state(cls, meta, arrays)
    except StateError as exc:
        raise StateError(f"{path}: {exc}") from None


def write_state(
    path: str | os.PathLike, meta: dict[str, Any], arrays: dict[str, np.ndarray]
) -> None:
    """One zip file holding ``meta.json`` and one ``.npy`` per array, written privately (0600),
    atomically and durably (:func:`streammkl.files.atomic_write`); shared by the structured
    learners."""

    def write(fh: Any) -> None:
        with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("meta.json", json.dumps(meta, sort_keys=True, indent=1))
            for name, arr in arrays.items():
                buf = io.BytesIO()
                np.lib.format.write_array(buf, np.ascontiguousarray(arr), allow_pickle=False)
                zf.writestr(f"{name}.npy", buf.getvalue())

    atomic_write(path, write)


def read_state(path: str | os.PathLike, kind: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """``(meta, arrays)`` of a file written by :func:`write_state` (no pickle); StateError
    naming ``kind`` for a corrupt or foreign file."""
    path = os.fspath(path)
    try:
        with zipfile.ZipFile(path) as zf:
            meta = json.loads(zf.read("meta.json").decode("utf-8"))
            arrays = {}
            for name in zf.namelist():
                if name.endswith(".npy"):
                    with zf.open(name) as fh:
                        arrays[name[:-4]] = np.lib.format.read_array(fh, allow_pickle=False)
    except FileNotFoundError:
        raise
    except (zipfile.BadZipFile, KeyError, ValueError, OSError, EOFError) as exc:
        raise StateError(
            f"{path}: corrupt or not a {kind} file ({type(exc).__name__}: {exc})"
        ) from None
    return meta, arrays
