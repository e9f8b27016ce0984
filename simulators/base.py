"""What every scenario shares: seeding, chunked generation, records, ground truth.

A scenario is a finite, seeded, re-iterable stream of :class:`streammkl.wire.Record`. Examples are
generated in fixed-size chunks, each from its own random generator keyed by ``(seed, stream tag,
chunk index)``, so iterating twice gives the same stream, and a shorter stream (smaller
``n_samples``) is always a prefix of a longer one with the same seed and parameters.

Each record's ``id`` is ``"{scenario}:{seed}:{index}"`` and its ``ts`` is logical event time:
:data:`START_TS` plus one second per example (reproducible; the Kafka producer can stamp wall-clock
time instead).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, ClassVar, NamedTuple

import numpy as np

from streammkl.wire import Record

__all__ = ["START_TS", "Param", "Scenario", "check_float", "check_int", "child_rng"]

#: Event time of example 0 (2023-11-14T22:13:20Z); example i is stamped ``START_TS + i``.
START_TS = 1_700_000_000.0


class Param(NamedTuple):
    """A scenario parameter as the command line sees it.

    ``kind`` is one of ``"int"``, ``"float"``, ``"str"``, ``"bool"``, ``"names"`` (a
    comma-separated list of strings on the command line, a tuple in Python).
    """

    kind: str
    default: Any
    help: str


def child_rng(seed: int, *key: int) -> np.random.Generator:
    """An independent generator for ``(seed, *key)`` (numpy ``SeedSequence`` spawn keys)."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=tuple(key)))


def check_int(name: str, value: Any, low: int, high: int | None = None) -> int:
    """Validate an integer parameter, naming it in the error."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be {bound}, got {value!r}")
    return int(value)


def check_float(name: str, value: Any, low: float, high: float, *, open_low: bool = False) -> float:
    """Validate a float in ``[low, high]`` (or ``(low, high]``), naming it in the error."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
        raise TypeError(f"{name} must be a number, got {value!r}")
    value = float(value)
    ok = math.isfinite(value) and (value > low if open_low else value >= low) and value <= high
    if not ok:
        bracket = "(" if open_low else "["
        raise ValueError(f"{name} must be in {bracket}{low:g}, {high:g}], got {value!r}")
    return value


class Scenario:
    """Base class of all scenarios.

    Subclasses set the class attributes, call ``super().__init__(seed, n_samples)`` and implement
    :meth:`_chunk` (and usually :meth:`_truth`).

    Parameters
    ----------
    seed
        Non-negative integer; the whole stream is a function of it and of the parameters.
    n_samples
        Number of examples in one pass.
    """

    #: Registry name (e.g. ``"kernel-drift"``).
    name: ClassVar[str] = ""
    #: ``"binary"``, ``"multiclass"``, ``"regression"``, ``"sequence"`` or ``"parsing"``.
    task: ClassVar[str] = ""
    #: Parameters the command line exposes (beyond ``seed``), with defaults and help.
    params: ClassVar[dict[str, Param]] = {}
    #: Examples per generator chunk (fixed per class: changing it changes the stream).
    chunk_size: ClassVar[int] = 1000

    def __init__(self, seed: int, n_samples: int) -> None:
        self.seed = check_int("seed", seed, 0)
        self.n_samples = check_int("n_samples", n_samples, 1)

    # --- the stream -----------------------------------------------------------------------
    @property
    def classes(self) -> tuple[Any, ...] | None:
        """The label set for classification scenarios, None for regression."""
        return None

    def __len__(self) -> int:
        return self.n_samples

    def __iter__(self) -> Iterator[Record]:
        for record, _ in self.annotated():
            yield record

    def annotated(self) -> Iterator[tuple[Record, dict[str, Any]]]:
        """Yield ``(record, info)``: ``info`` is the example's own ground truth (JSON-able)."""
        n_chunks = -(-self.n_samples // self.chunk_size)
        for c in range(n_chunks):
            start = c * self.chunk_size
            stop = min(self.n_samples, start + self.chunk_size)
            for i, (record, info) in enumerate(self._chunk(c), start=start):
                if i >= stop:
                    break
                yield record, info

    def take(self, n: int) -> list[Record]:
        """The first ``n`` records."""
        out: list[Record] = []
        for record in self:
            if len(out) == n:
                break
            out.append(record)
        return out

    def make_record(self, index: int, x: Any, y: Any) -> Record:
        """Wrap one example with this scenario's id and logical timestamp."""
        return Record(x=x, y=y, id=f"{self.name}:{self.seed}:{index}", ts=START_TS + index)

    def _chunk(self, c: int) -> Iterator[tuple[Record, dict[str, Any]]]:
        """All ``chunk_size`` examples of chunk ``c`` (indices ``c * chunk_size ...``)."""
        raise NotImplementedError

    # --- ground truth ---------------------------------------------------------------------
    def get_params(self) -> dict[str, Any]:
        """The parameters this scenario was built with (JSON-able)."""
        out: dict[str, Any] = {}
        for key in self.params:
            value = getattr(self, key)
            out[key] = list(value) if isinstance(value, tuple) else value
        return out

    def ground_truth(self) -> dict[str, Any]:
        """Everything needed to check a learner against this stream (JSON-able)."""
        classes = self.classes
        return {
            "scenario": self.name,
            "seed": self.seed,
            "n_samples": self.n_samples,
            "task": self.task,
            "classes": None if classes is None else list(classes),
            "params": self.get_params(),
            **self._truth(),
        }

    def _truth(self) -> dict[str, Any]:
        return {}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}(seed={self.seed}, {args})"
