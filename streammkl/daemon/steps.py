"""How the daemon asks a learner for a prequential prediction and an update, one record at a time.

:class:`LearnerStep` works with any river-style learner: ``predict_proba_one`` (or
``predict_one``) first, then ``learn_one``. For the streammkl river learners
(:class:`~streammkl.river.MKLClassifier`, :class:`~streammkl.river.MKLRegressor`)
:class:`MKLStep` fuses the two: one learning round computes the scores of the model *before* its
update (the prequential scores) on the way, so the daemon reads the prediction from that round
instead of computing the same scores a second time (measured: predict + learn 60-80 µs -> one
round 25-45 µs per Bananas record with the default bank). The learner's state evolves exactly as
with ``learn_one`` (it *is* ``learn_one``); only the records where the round's scores would not be
the prediction (a new class, a new feature, an empty model) take the generic path.

A fused round also hands out what :class:`streammkl.monitor.Monitor` needs per example (the
core's input vector, target, loss and ``lambda Omega(theta_t)``). With the monitor on, a
classifier's batches still go through compiled runs: :meth:`MKLStep.run_rounds` hands the run to
the monitor (:meth:`streammkl.monitor.Monitor.learn_runs`), which learns it in one compiled loop
(recording the block norms before each round, for ``lambda Omega(theta_t)`` and β), feeds its
losses to the drift detector, and learns the rounds up to a restart again in the rare run where
a detected drift restarts the schedule inside it (at a multiple of the stride).

This leans on two internals of the river learners (``_class_index``/``_features`` and the core's
last-round scores); ``tests/test_daemon_steps.py`` pins the equivalence with the generic path.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from streammkl.daemon.learner import is_classifier


@dataclass(slots=True)
class Round:
    """What one fused learning round saw, in the core's conventions (for the monitor).

    Parameters
    ----------
    x
        The core's input vector.
    y
        The core's target (±1, a class index, or the standardised regression target).
    loss
        The prequential loss of the round (at theta_t, before the update).
    reg
        ``lambda Omega(theta_t)`` (before the update).
    scores
        The prequential scores.
    """

    x: np.ndarray
    y: float
    loss: float
    reg: float
    scores: np.ndarray


class LearnerStep:
    """Prequential predict-then-learn for any river-style learner.

    Parameters
    ----------
    learner
        The learner (``predict_proba_one`` for classifiers, ``predict_one``, ``learn_one``).
    """

    fused = False
    sequence = False
    #: What ``wire.decode`` reads a record as (``"vector"``, ``"sequence"``, ``"sentence"``).
    record_kind = "vector"
    #: The monitor fed by the compiled runs (:class:`streammkl.daemon.monitoring.StreamMonitor`),
    #: set by the runner with ``track``; the per-record path feeds it through the runner.
    observer: Any = None

    @property
    def batched(self) -> bool:
        """Whether batches go through :meth:`learn_predict_many` (one call per batch)."""
        return False

    def learn_predict_many(
        self, xs: list[Any], ys: list[Any], on_error: Any
    ) -> list[dict[Any, float] | None]:
        """Prequential probabilities of a batch, learning each labelled example after its
        prediction (see :meth:`streammkl.river.MKLClassifier.learn_predict_many`)."""
        raise NotImplementedError

    def __init__(self, learner: Any) -> None:
        self.learner = learner
        self.classifier = is_classifier(learner)
        self.last_round: Round | None = None  # set by each round when ``track`` is on
        self.track = False

    def predict(self, x: dict[str, float]) -> tuple[Any, dict[Any, float] | None]:
        """The prediction and, for a classifier, the probability of every known class."""
        if not self.classifier:
            value = float(self.learner.predict_one(x))
            return (value if math.isfinite(value) else None), None
        proba = self.learner.predict_proba_one(x)
        if not proba:
            return None, {}
        return max(proba, key=proba.__getitem__), proba  # first maximum in class order

    def learn(self, x: dict[str, float], y: Any) -> None:
        """Learn one labelled example."""
        self.learner.learn_one(x, y)

    def predict_learn(
        self, x: dict[str, float], y: Any
    ) -> tuple[Any, dict[Any, float] | None] | None:
        """Fused prediction + update; ``None`` when this record needs :meth:`predict` then
        :meth:`learn` (always, for a generic learner)."""
        return None

    def warm_up(self) -> None:
        """Run the learner's compiled code once on a throwaway copy (numba loads its cache on the
        first call, ~0.3-1 s), so the first batch does not pay for it. Best effort."""


class MKLStep(LearnerStep):
    """Fused prequential rounds for :class:`~streammkl.river.MKLClassifier` /
    :class:`~streammkl.river.MKLRegressor`."""

    fused = True

    def __init__(self, learner: Any) -> None:
        super().__init__(learner)
        if self.classifier:
            from streammkl.core import losses

            loss = None if learner.loss is None else losses.from_spec(learner.loss)
            self._binary = loss is not None and loss.task == "binary"
        # lambda Omega(theta_t) of a compiled run's rounds comes from the block norms alone
        self._norm_only = learner._make_model().norm_only

    @property
    def batched(self) -> bool:
        # The monitor needs every round's regulariser value: from the block norms the compiled
        # loop records, unless a regularizer also needs ||theta||_1 (L1, SparseGroupLasso): then
        # one record at a time.
        # (A stride of 1 leaves no room for a run: one round per record is faster.)
        if not self.classifier:
            return False
        if not self.track:
            return True
        return self.observer is not None and self._norm_only and self.observer.stride > 1

    def learn_predict_many(
        self, xs: list[Any], ys: list[Any], on_error: Any
    ) -> list[dict[Any, float] | None]:
        """``MKLClassifier.learn_predict_many`` (inputs validated); with the monitor, the same
        rounds, the runs through :meth:`run_rounds` and the other records through the fused
        step's ``learn``, each observed."""
        learner = self.learner
        if self.observer is None:
            return learner.learn_predict_many(xs, ys, validated=True, on_error=on_error)
        out: list[dict[Any, float] | None] = []
        i, n = 0, len(xs)
        while i < n:
            if self._norm_only:  # (else batched is False and only single records come here)
                j, X, Y = learner.plan_run(xs, ys, i, validated=True)
                if j > i:
                    out.extend(self.run_rounds(X, Y)[0])
                    i = j
                    continue
            x, y = xs[i], ys[i]
            i += 1
            try:
                proba = learner.predict_proba_one(x)
            except Exception as exc:  # as learn_predict_many's single calls
                out.append(None)
                on_error(i - 1, exc)
                continue
            out.append(proba)
            if y is None:
                continue
            try:
                self.learn(x, y)
            except Exception as exc:
                on_error(i - 1, exc)
                continue
            prediction = max(proba, key=proba.__getitem__) if proba else None
            self.observer.observe(learner.core, self.last_round, prediction == y)
        return out

    def plan_run(self, xs: list[Any], ys: list[Any]) -> tuple[int, np.ndarray, np.ndarray]:
        """The batch's leading compiled run (``MKLClassifier.plan_run``, inputs validated)."""
        return self.learner.plan_run(xs, ys, 0, validated=True)

    def run_rounds(self, X: np.ndarray, Y: np.ndarray) -> tuple[list[dict[Any, float]], float]:
        """The planned run's compiled loop (GIL released): the probabilities of its records and
        its duration in seconds.

        With the monitor (:attr:`observer`), the monitor learns the run
        (:meth:`streammkl.daemon.monitoring.StreamMonitor.learn_run`): a restart the detector
        asks for falls between the same two rounds however the batches were cut.
        """
        t0 = time.perf_counter()
        learner = self.learner
        if self.observer is None:
            probas = learner.probas_from_scores(learner.run_rounds(X, Y))
            return probas, time.perf_counter() - t0
        classes, binary = learner.classes_, self._binary

        def judge(scores: np.ndarray, Yc: np.ndarray) -> tuple[list[Any], list[bool]]:
            pair = learner.two_class_probas(scores)
            if pair is not None:  # arrays: the argmax (ties: the first class) without dicts
                p0, p1 = pair
                second = Yc > 0 if binary else Yc == 1.0
                return learner.probas_from_pair(p0, p1), ((p1 > p0) == second).tolist()
            chunk = learner.probas_from_scores(scores)
            hits = [
                max(p, key=p.__getitem__) == classes[int(t > 0) if binary else int(t)]
                for p, t in zip(chunk, Yc.tolist(), strict=True)
            ]
            return chunk, hits

        core = learner.core
        probas = self.observer.learn_run(core, X, Y, core.learn_many_prepared, judge)
        return probas, time.perf_counter() - t0

    def learn(self, x: dict[str, float], y: Any) -> None:
        learner = self.learner
        if not self.track:
            learner.learn_one(x, y)
            return
        self.last_round = None
        core = learner.core
        reg = core.regularization_value() if core is not None and core._state is not None else 0.0
        learner.learn_one(x, y)
        self._remember(x, y, reg, learner.core.last_scores)

    def _remember(self, x: dict[str, float], y: Any, reg: float, fx: np.ndarray) -> None:
        """Keep the round just learned (for the monitor), in the core's conventions."""
        learner = self.learner
        core = learner.core
        scores = fx.copy()  # the round's prequential scores
        if self.classifier:
            k = learner._class_index[y]
            target = (1.0 if k == 1 else -1.0) if self._binary else float(k)
        else:
            center = learner._mean if learner.standardize_target else 0.0
            target = (float(y) - center) / learner._std()
        vec = learner._features.vector(x, validated=True)
        self.last_round = Round(vec, target, float(core.loss.value(scores, target)), reg, scores)

    def warm_up(self) -> None:
        learner = self.learner
        clone = type(learner).from_state(*learner.to_state())
        x = dict.fromkeys(clone._features.names or ["warm-up"], 0.0)
        if self.classifier:
            y: Any = clone.classes_[0] if clone.classes_ else True
            clone.predict_proba_one(x)
        else:
            y = 0.0
        clone.learn_one(x, y)
        clone.predict_one(x)

    def _ready(self, x: dict[str, float]) -> Any:
        """The core model if a round on ``x`` yields the prediction ``x`` would get (the model
        exists and knows every feature of ``x``), else ``None``."""
        core = self.learner.core
        if core is None or core._state is None:
            return None
        index = self.learner._features.index
        for key in x:
            if key not in index:  # a new feature widens the model first
                return None
        return core

    def predict_learn(
        self, x: dict[str, float], y: Any
    ) -> tuple[Any, dict[Any, float] | None] | None:
        core = self._ready(x)
        if core is None:
            return None
        learner = self.learner
        if self.classifier:
            k = learner._class_index.get(y)
            if k is None or (not self._binary and k >= core.n_outputs):
                return None  # a class the model has not seen: the prediction's shape changes
            # MKLClassifier.learn_one for a known class and known features (the input is
            # validated by wire.decode): the same round, with its loss and scores at hand.
            vec = learner._features.vector(x, validated=True)
            target = (1.0 if k == 1 else -1.0) if self._binary else float(k)
            reg = core.regularization_value() if self.track else 0.0
            loss = core.learn_prepared(vec, target)
            fx = core.last_scores  # the round's prequential scores
            if self.track:
                self.last_round = Round(vec, target, loss, reg, fx.copy())
            return self._proba(fx)
        center = learner._mean if learner.standardize_target else 0.0
        scale = learner._std()
        reg = core.regularization_value() if self.track else 0.0
        learner.learn_one(x, y)
        fx = core.last_scores
        value = center + scale * float(fx[0])
        if self.track:
            self._remember(x, y, reg, fx)
        return (value if math.isfinite(value) else None), None

    def _proba(self, fx: np.ndarray) -> tuple[Any, dict[Any, float]]:
        # MKLClassifier.predict_proba_one from the round's scores (the classifier's own formula,
        # so the numbers are those of predict_proba_one and of its compiled runs).
        proba = self.learner._proba(fx.tolist())
        return max(proba, key=proba.__getitem__), proba


class SequenceStep(LearnerStep):
    """A sequence labeler (``learn_one(xs, ys)``, ``predict_one(xs)`` -> label sequence), e.g.
    :class:`streammkl.structured.SequenceLabeler`: records are token sequences, predictions
    label sequences (no probabilities)."""

    sequence = True
    record_kind = "sequence"

    def __init__(self, learner: Any) -> None:
        super().__init__(learner)
        self.classifier = True  # labels are classes (not numbers to regress)

    def predict(self, x: Any) -> tuple[Any, None]:
        return self.learner.predict_one(x), None

    def warm_up(self) -> None:
        learner = self.learner
        clone = type(learner).from_state(*learner.to_state())
        keys = clone.feature_keys
        if clone.input_mode == "dict":
            xs: Any = [dict.fromkeys(keys, 0.0)] * 2
        else:
            xs = [[0.0] * max(len(keys), 1)] * 2
        clone.learn_one(xs, [clone.labels[0]] * 2 if clone.labels else [0, 0])
        clone.predict_one(xs)


class ParserStep(SequenceStep):
    """A dependency parser (``learn_predict_one(sentence, heads)``, ``predict_one(sentence)``),
    e.g. :class:`streammkl.structured.DependencyParser`: records are sentences (words as CoNLL-U
    columns), labels and predictions their heads; the per-label counters are then the UAS. The
    prediction and the update share one scoring of the sentence's arcs (``learn_predict_one``).
    A gold tree the parser refuses (a cycle, several root arcs) raises: a ``learner_error``."""

    record_kind = "sentence"

    def predict_learn(self, x: Any, y: Any) -> tuple[Any, None]:
        return self.learner.learn_predict_one(x, y), None

    def warm_up(self) -> None:
        # a small parser of the same kind loads every compiled loop (a copy of a large one would
        # allocate its hashed blocks for nothing)
        tiny = type(self.learner)(templates=("h.upos+b.upos+m.upos", "dir+dist"),
                                  average=self.learner.average)  # fmt: skip
        words = [{"form": "a", "upos": "NOUN"}, {"form": "b", "upos": "VERB"}, {}]
        tiny.learn_predict_one(words, [2, 0, 2])
        tiny.predict_one(words)


def make_step(learner: Any, sequence: bool = False) -> LearnerStep:
    """:class:`MKLStep` for the streammkl river learners, :class:`SequenceStep` for sequence
    labelling (``sequence``, or a :class:`~streammkl.structured.SequenceLabeler`),
    :class:`ParserStep` for a :class:`~streammkl.structured.DependencyParser`,
    :class:`LearnerStep` otherwise."""
    from streammkl.river import MKLClassifier, MKLRegressor
    from streammkl.structured import DependencyParser, SequenceLabeler

    if isinstance(learner, DependencyParser):
        return ParserStep(learner)
    if sequence or isinstance(learner, SequenceLabeler):
        return SequenceStep(learner)
    if type(learner) in (MKLClassifier, MKLRegressor):
        return MKLStep(learner)
    return LearnerStep(learner)
