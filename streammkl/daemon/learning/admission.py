"""What a learner may admit from one record: caps on features, classes and work.

:func:`streammkl.wire.decode` bounds a record by itself (bytes, names per record, lengths). What
a record costs the *model* depends on what the model already holds: ten new feature names are
nothing for a fresh model and a rebuild of every array for one that holds 10,000. This module
decides, before a record reaches the learner, whether the growth it brings is admitted:

- ``too_many_features``: the model would hold more than ``limits.max_model_features`` inputs;
- ``too_many_classes``: more than ``limits.max_classes`` classes (labels of a sequence);
- ``over_work_budget``: the model's state would exceed ``limits.max_record_work`` cells. Every
  array of the model is rebuilt when it grows, and every later round reads its explicit part,
  so the cells of the grown model are the work this record causes (one cell = one float64).
  The model counts once: the regret monitor's windowed regret (its window of inputs and the
  comparator's copies of the model) is the monitor's to bound, not the record's: it keeps
  itself within the same budget and gives the windowed regret up on a model too wide for it
  (:class:`~streammkl.daemon.learning.stream_monitor.StreamMonitor`), so a record is never
  refused for what a metric would cost (counting them here made the documented
  ``max_model_features`` unreachable: the default bank's model met the budget at ~840 inputs).

A refused record is a dead letter with that reason; the model is untouched. Records that bring
nothing new (the steady state) are not checked at all: their round costs what the admitted model
costs. The decisions are a function of the model's state and the record only, so a replay after
a crash decides the same way and the exactly-once effect holds.

Learners are read through their public API: the streammkl river learners (``n_features``,
``unknown_features``, ``known_class``, ``core.kernels``; a memory preset's inner learner,
:data:`~streammkl.daemon.learning.learner.Memory`), :class:`~streammkl.structured.
SequenceLabeler` (``feature_keys``, ``labels``, ``kernels``); any other learner is admitted
unchecked (only the wire limits apply) and each of its records counts as growing (so each is
marked in flight, :mod:`streammkl.daemon.checkpoints.inflight`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from streammkl.core.kernels import AdditiveRBF, AdditiveStumps, Kernel, Polynomial, from_spec
from streammkl.daemon.config import LimitSettings
from streammkl.daemon.learning.learner import Inputs, Learner, Target, wrapped
from streammkl.river import MKLClassifier, MKLRegressor, defaults
from streammkl.structured import SequenceLabeler

#: Why the admission refuses a record (dead-letter reasons, bounded: safe as metric labels).
REASONS = {
    "too_many_features": "the model would hold more inputs than limits.max_model_features",
    "too_many_classes": "the model would hold more classes than limits.max_classes",
    "over_work_budget": "the grown model would exceed limits.max_record_work cells",
}


@dataclass(frozen=True, slots=True)
class Refusal:
    """A record the learner must not admit: ``reason`` (one of :data:`REASONS`, or a wire
    reason) and a message naming the numbers."""

    reason: str
    message: str


def model_cells(
    kernels: Iterable[Kernel], n_features: int, n_outputs: int, support: int, iterates: int = 1
) -> int:
    """Cells (float64 values) of an online MKL model's state for ``n_features`` inputs (pass
    the arrays' capacity: :func:`grown_capacity`): explicit weights (outputs x the width of
    every feature map, ``iterates`` times: the weights and each averaged iterate the model
    keeps -- the default learner keeps three, so four), random Fourier frequencies (inputs x
    components), an additive map's four rows per component, feature masks, and a support set
    of ``support`` pairs for the kernelized blocks.

    Two outputs over a linear map (10 weights) and the exact quadratic map (1 + 10 + 55); an
    additive map has its components per input (16 x 10 weights per output, and 4 x 160 cells
    describing them):

    >>> from streammkl.core import kernels as k
    >>> model_cells([k.Linear(), k.Polynomial(explicit=True)], 10, 2, 0)
    152
    >>> model_cells([k.AdditiveRBF(n_components=16)], 10, 2, 0)
    960
    >>> model_cells([k.Linear(), k.Polynomial(explicit=True)], 10, 2, 0, iterates=4)
    608
    """
    width = rff = 0
    views: set[tuple[str | int, ...] | None] = set()
    blocks = 0
    sparse = 0
    for kernel in kernels:
        blocks += 1
        selected = n_features if kernel.features is None else min(len(kernel.features), n_features)
        if kernel.implicit:
            views.add(kernel.features)
        elif isinstance(kernel, AdditiveRBF | AdditiveStumps):  # R per input, stored sparsely
            width += (kernel.n_components or 0) * selected
            sparse += 4 * (kernel.n_components or 0) * selected  # phi_src: 4 rows a component
        elif kernel.n_components:
            width += kernel.n_components
            rff += kernel.n_components
        elif isinstance(kernel, Polynomial):
            q = selected if kernel.max_inputs is None else min(selected, kernel.max_inputs)
            width += 1 + q + q * (q + 1) // 2
        else:
            width += selected
    cells = n_outputs * width * iterates + n_features * (rff + len(views)) + sparse
    if views:
        cells += support * (n_features + n_outputs + len(views) + 2 * blocks)
    return cells


def grown_capacity(capacity: int, n_features: int) -> int:
    """The inputs a model's arrays have room for once it holds ``n_features``: its capacity,
    or, beyond it, twice the capacity (at least ``n_features``), as the core lays inputs out
    (``streammkl.core.layout.grown``: doubling, so that an input costs amortised O(1)).

    >>> grown_capacity(8192, 9000), grown_capacity(8192, 8000), grown_capacity(64, 1000)
    (16384, 8192, 1000)
    """
    return capacity if n_features <= capacity else max(2 * capacity, n_features)


class Admission:
    """A learner of unknown shape: nothing is refused, every labelled record counts as growing.

    Parameters
    ----------
    learner
        The learner.
    limits
        The ``[limits]`` settings (``max_model_features``, ``max_classes``,
        ``max_record_work``).
    """

    def __init__(self, learner: Learner, limits: LimitSettings) -> None:
        self.learner = learner
        self.limits = limits

    def grows(self, x: Inputs, y: Target) -> bool:
        """Whether learning (or predicting) this record may make the model grow."""
        return True

    def admit(self, x: Inputs, y: Target) -> Refusal | None:
        """``None`` if the learner may take the record, else why not."""
        return None

    def _refuse(self, n_features: int, n_classes: int, cells: int) -> Refusal | None:
        lim = self.limits
        if n_features > lim.max_model_features:
            return Refusal(
                "too_many_features",
                f"the record would take the model to {n_features} inputs, the limit is "
                f"{lim.max_model_features} (limits.max_model_features)",
            )
        if n_classes > lim.max_classes:
            return Refusal(
                "too_many_classes",
                f"the record would take the model to {n_classes} classes, the limit is "
                f"{lim.max_classes} (limits.max_classes)",
            )
        if cells > lim.max_record_work:
            return Refusal(
                "over_work_budget",
                f"the grown model would hold {cells} cells ({n_features} inputs, {n_classes} "
                f"classes), the budget is {lim.max_record_work} (limits.max_record_work)",
            )
        return None


class MKLAdmission(Admission):
    """:class:`~streammkl.river.MKLClassifier` / :class:`~streammkl.river.MKLRegressor`:
    ``learn_one`` admits new feature names (and, for the classifier, new classes); predicting
    ignores unknown names."""

    learner: MKLClassifier | MKLRegressor

    def __init__(
        self,
        learner: MKLClassifier | MKLRegressor,
        limits: LimitSettings,
        classifier: bool,
    ) -> None:
        super().__init__(learner, limits)
        self.classifier = classifier
        self.rounds = learner.rounds()

    def grows(self, x: Inputs, y: Target) -> bool:
        if y is None:
            return False
        rounds = self.rounds
        if self.classifier and not rounds.known_class(y):
            return True
        return bool(rounds.unknown_features(x))  # type: ignore[arg-type]  # vectors: dicts

    def admit(self, x: Inputs, y: Target) -> Refusal | None:
        if y is None:
            return None
        learner, rounds = self.learner, self.rounds
        new_class = self.classifier and not rounds.known_class(y)
        new = rounds.unknown_features(x)  # type: ignore[arg-type]  # vectors: dicts
        if not new and not new_class:
            return None
        n_features = rounds.n_features + len(new)
        n_classes = (
            len(learner.classes_) + int(new_class) if isinstance(learner, MKLClassifier) else 0
        )
        core = rounds.model
        room = n_features
        if core is not None:
            kernels: Iterable[Kernel] = core.kernels
            iterates = 1 + len(core.averages) + int(core.average)
            layout = core.layout
            if layout is not None:  # the arrays have room for a capacity of inputs
                room = grown_capacity(layout.capacity, n_features)
        else:  # not built yet: the configured bank (or the default one)
            bank = learner.kernels if learner.kernels is not None else defaults.kernel_bank()
            kernels = [from_spec(k) for k in bank]
            iterates = 1 + len(learner.averages if learner.averages is not None else ())
        support = learner.budget if learner.budget is not None else rounds.n_support + 1
        cells = model_cells(kernels, room, max(n_classes, 1), support, iterates)
        return self._refuse(n_features, n_classes, cells)


class SequenceAdmission(Admission):
    """:class:`~streammkl.structured.SequenceLabeler`: token feature names (or vector widths)
    and labels; once trained it widens on unseen features even when only predicting."""

    learner: SequenceLabeler

    def _new(self, x: Inputs, y: Target) -> tuple[int, int]:
        learner = self.learner
        known = learner.feature_keys
        assert isinstance(x, list) and (y is None or isinstance(y, list))  # decoded sequences
        if x and isinstance(x[0], dict):
            have = set(known)
            names = {k for tok in x if isinstance(tok, dict) for k in tok}
            new_features = len(names - have)
        else:
            new_features = max(0, max(len(tok) for tok in x if isinstance(tok, list)) - len(known))
        if not learner.labels and y is None:
            return 0, 0  # an untrained labeler predicts without changing anything
        new_labels = len(set(y or ()) - set(learner.labels))
        return new_features, new_labels

    def grows(self, x: Inputs, y: Target) -> bool:
        return any(self._new(x, y))

    def admit(self, x: Inputs, y: Target) -> Refusal | None:
        new_features, new_labels = self._new(x, y)
        if not (new_features or new_labels):
            return None
        learner = self.learner
        n_features = len(learner.feature_keys) + new_features
        n_labels = len(learner.labels) + new_labels
        support = learner.budget if learner.budget is not None else learner.n_support + 1
        cells = model_cells(learner.kernels, n_features, n_labels, support) + n_labels**2
        return self._refuse(n_features, n_labels, cells)


def admission_for(learner: Learner, limits: LimitSettings, sequence: bool = False) -> Admission:
    """The admission policy of a learner (see the module docstring)."""
    if isinstance(learner, SequenceLabeler):
        return SequenceAdmission(learner, limits)
    # a memory preset's inner learner is what grows: its inputs and classes (the memory itself
    # is bounded: a MemoryClassifier's holds at most window x max_inputs = 100,000 cells by
    # default, dropped above max_inputs; a MemoryRegressor's rows have the first record's inputs)
    inner = wrapped(learner)
    if type(inner) in (MKLClassifier, MKLRegressor) and not sequence:
        assert isinstance(inner, MKLClassifier | MKLRegressor)
        return MKLAdmission(inner, limits, isinstance(inner, MKLClassifier))
    return Admission(learner, limits)
