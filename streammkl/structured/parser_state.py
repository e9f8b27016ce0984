"""Pickle-free persistence of a :class:`~streammkl.structured.DependencyParser`.

``to_state`` gives ``(meta, arrays)``: ``meta`` is JSON (format, version, the configuration with
every template's hash size written out, counters) and ``arrays`` are the non-zeros of the hashed
blocks with their scales (``core.hashed.HashedBlocks.to_arrays``), so a model's file grows with
what it learned, not with its tens of millions of coordinates. Loading checks the format, refuses
a newer version, validates every array and recounts the block norms from the weights.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

from streammkl import statefile
from streammkl.statefile import StateError, check_header
from streammkl.structured.persistence import load_with, optimizer_config, state_meta

if TYPE_CHECKING:
    from streammkl.structured.parser import DependencyParser

FORMAT = "streammkl.DependencyParser"
VERSION = 1


def config(model: DependencyParser) -> dict[str, Any]:
    """Constructor arguments as JSON-able specs (``DependencyParser(**config)`` rebuilds it);
    templates carry their ``@bits``, so the hash sizes survive a change of defaults."""
    return {
        "templates": model._templates.specs,
        **optimizer_config(model),
        "average": model.average,
        "single_root": model.single_root,
        "max_hash_bits": model.max_hash_bits,
        "seed": model.seed,
    }


def to_state(model: DependencyParser) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    return state_meta(model, FORMAT, VERSION, config(model)), model._blocks.to_arrays()


def _fail(msg: str) -> StateError:
    return StateError(f"DependencyParser state: {msg}")


def from_state(cls: type, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> DependencyParser:
    check_header(meta, FORMAT, VERSION, "DependencyParser")
    try:
        model = cls(**meta["config"])
        t, schedule_t = int(meta["t"]), int(meta["schedule_t"])
    except (KeyError, TypeError, ValueError) as exc:
        raise _fail(f"bad meta ({type(exc).__name__}: {exc})") from None
    try:
        model._blocks.load_arrays(arrays)
    except ValueError as exc:
        raise _fail(str(exc)) from None
    model.t, model._schedule.t = t, schedule_t
    return model


def save(model: DependencyParser, path: str | os.PathLike) -> None:
    statefile.write(path, *to_state(model))


def load(cls: type, path: str | os.PathLike) -> DependencyParser:
    return load_with(from_state, cls, path, "DependencyParser")
