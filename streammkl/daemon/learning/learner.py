"""What the daemon reads of a learner: the surface it codes against and a view of its kernels.

The daemon codes against :class:`Learner` (a structural Protocol), so any river-style learner
with the persistence methods below can be plugged in with ``learner.factory = "module:callable"``
(:mod:`streammkl.daemon.learning.building`). :func:`introspect` reads the kernel weights, block
norms, fitted bandwidths and support size of any of them, tolerant of types.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

from streammkl.river import MemoryClassifier, MemoryRegressor
from streammkl.wire.schema import Features, Label

#: A record's input as the loop hands it to a learner (:class:`streammkl.wire.Record`'s ``x``):
#: named features (a dense vector's named ``"0"``, ``"1"``, ... by the loop), a sequence of
#: tokens, or a sentence (words as CoNLL-U columns).
Inputs = Features | list[Features]
#: A record's label (``Record.y``): a class or a number, a sequence's labels, a sentence's heads
#: (``None``: predict only).
Target = Label | list[Label] | None
#: What a learner predicts: a class, a number, a label sequence, a sentence's heads (``None``:
#: nothing to predict yet, or a non-finite regression).
Prediction = Label | list[Label] | None
#: The probability of every known class (classifiers only).
Probas = dict[Any, float]
#: A prediction with its probabilities (``None`` but for classifiers), or ``None`` when none
#: could be made (the error is reported beside it): what a driver returns per record.
Outcome = tuple[Prediction, Probas | None] | None
#: An example learned, as a mixing member keeps it: ``(x, y, (prediction, probabilities))``.
Learned = tuple[Inputs, Target, tuple[Prediction, Probas | None]]
#: A learner's state: JSON-able meta and named numeric arrays (``to_state`` / ``from_state``).
State = tuple[dict[str, Any], dict[str, np.ndarray]]
#: Issue 27's "accurate" presets (``learner.memory_window``): a learner with a memory of its last
#: inputs beside it, the two mixed by a Hedge. Its ``learner`` is the one that learns (an
#: MKLClassifier or MKLRegressor in the daemon), its ``window`` the memory's length.
Memory = MemoryClassifier | MemoryRegressor


@runtime_checkable
class Learner(Protocol):
    """The learner surface the daemon uses (river's, plus persistence and introspection); a
    checkpoint restores it with its class's ``from_state(meta, arrays)``, and the model's digest
    is that of its state (:func:`streammkl.statefile.state_digest`)."""

    # x, y and the prediction: each learner takes its own kind of input and label (Inputs,
    # Target); a Protocol over the union would admit none of them (arguments are contravariant)
    def learn_one(self, x: Any, y: Any) -> None: ...

    def predict_one(self, x: Any) -> Any: ...

    def to_state(self) -> State: ...

    @classmethod
    def from_state(cls, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> Learner: ...

    @property
    def kernel_weights(self) -> Mapping[str, float]: ...


def is_classifier(learner: object) -> bool:
    """Whether the learner predicts classes (a river classifier, or has ``predict_proba_one``)."""
    from river import base

    if isinstance(learner, base.Classifier):
        return True
    if isinstance(learner, base.Regressor):
        return False
    return callable(getattr(learner, "predict_proba_one", None))


def _numbers(value: object, names: list[str]) -> dict[str, float]:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return {str(k): float(v) for k, v in value.items()}
    arr = np.asarray(value, dtype=float).ravel()
    return {names[i] if i < len(names) else str(i): float(v) for i, v in enumerate(arr)}


def wrapped(learner: object) -> object:
    """The learner a :data:`Memory` preset wraps (the one whose kernels, inputs and classes
    grow), else ``learner`` itself."""
    return learner.learner if isinstance(learner, Memory) else learner


def inspected(learner: object) -> object:
    """What describes the learner's kernels: the seam of a streammkl river learner
    (``learner.rounds()``, whose ``block_norms``, ``n_support`` and ``kernel_names`` these are;
    a :data:`Memory` preset's are its inner learner's), else the learner itself (the
    structured learners, a custom learner)."""
    learner = wrapped(learner)
    rounds = getattr(learner, "rounds", None)
    return rounds() if callable(rounds) else learner


def introspect(learner: object) -> dict[str, Any]:
    """Read kernel weights, block norms, fitted bandwidths, active kernels and support size,
    tolerant of types.

    Returns plain Python values (a snapshot safe to hand to another thread).
    """
    weights = _numbers(getattr(learner, "kernel_weights", None), [])
    names = list(weights)
    seen = inspected(learner)
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
    view: dict[str, Any] = {
        "kernel_weights": {k: (v if math.isfinite(v) else 0.0) for k, v in weights.items()},
        "block_norms": norms,
        "kernel_bandwidths": _numbers(getattr(seen, "kernel_bandwidths", None), []),
        "active_kernels": n_active,
        "support_vectors": support_total,
    }
    memory_weight = getattr(learner, "memory_weight", None)  # a Memory preset's Hedge
    if isinstance(memory_weight, int | float):
        view["memory_weight"] = float(memory_weight)
    return view
