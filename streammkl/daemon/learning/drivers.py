"""How the daemon asks a learner for prequential predictions and updates: one driver per kind.

A driver is composed around a learner and uses its public API only. :class:`LearnerDriver`
works with any river-style learner: its ``learn_predict_one(x, y)`` (the prediction made before
learning, then the update) when it has one, else ``predict_proba_one`` (or ``predict_one``)
then ``learn_one``. The streammkl learners have ``learn_predict_one``: one round, whose scores
before the update are the prediction (measured: predict + learn 60-80 µs -> one round 25-45 µs
per Bananas record with the default bank).

:class:`MKLDriver` adds what the regret/drift monitor needs for the streammkl river learners
(:class:`~streammkl.river.MKLClassifier`, :class:`~streammkl.river.MKLRegressor`), through the
learners' one seam (``learner.rounds()``, :class:`~streammkl.river.rounds.Rounds`): each round
as a :class:`Round` (the core's input vector and target, the prequential loss and scores, and
``lambda Omega(theta_t)``), and the classifier's compiled runs (planned, learned and judged by
the seam), fed to the monitor by chunks. :class:`SequenceDriver` and :class:`ParserDriver` drive
the structured learners. ``tests/test_daemon_steps.py`` pins the equivalence with the generic
path.

Vocabulary: a *round* is one example's update (the paper's round t); a compiled *run* learns
many rounds in one compiled loop; the core's *step* is the gradient step inside a round.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from streammkl.daemon.learning.learner import (
    Inputs,
    Learner,
    Outcome,
    Prediction,
    Probas,
    Target,
    is_classifier,
)
from streammkl.daemon.learning.stream_monitor import StreamMonitor
from streammkl.river import MKLClassifier, MKLRegressor
from streammkl.structured import DependencyParser, SequenceLabeler

#: Told of a record the learner refused: its index in the batch and the exception.
OnError = Callable[[int, Exception], None]
#: A planned compiled run: ``(end, X, Y)`` -- the records ``[0, end)`` as the seam's dense rows
#: and targets; ``end == 0``: no run.
Run = tuple[int, np.ndarray | None, np.ndarray | None]


def _outcomes(probas: Sequence[Probas | None]) -> list[Outcome]:
    """A classifier's probabilities as outcomes (the prediction: the first most probable; two
    classes compared directly, half the time of ``max`` with a key: 0.37 -> 0.17 us)."""
    out: list[Outcome] = []
    append = out.append
    for p in probas:
        if p is None:
            append(None)
        elif len(p) == 2:
            a, b = p
            append((b if p[b] > p[a] else a, p))
        else:
            append(((max(p, key=p.__getitem__) if p else None), p))
    return out


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


class LearnerDriver:
    """Prequential predict-then-learn around any river-style learner.

    Parameters
    ----------
    learner
        The learner: ``learn_predict_one`` if it has one, else ``predict_proba_one`` (for
        classifiers) or ``predict_one``, and ``learn_one``.
    """

    fused = False
    sequence = False
    #: What ``wire.decode`` reads a record as (``"vector"``, ``"sequence"``, ``"sentence"``).
    record_kind = "vector"
    #: The monitor fed by the rounds (a fused driver's only), set by the runner with ``track``.
    observer: StreamMonitor | None = None

    def __init__(self, learner: Learner) -> None:
        self.learner = learner
        self.classifier = is_classifier(learner)
        self.last_round: Round | None = None  # set by each round when ``track`` is on
        self.track = False
        self._learn_predict = getattr(learner, "learn_predict_one", None)

    @property
    def batched(self) -> bool:
        """Whether the driver has compiled runs (:meth:`plan_run` may return a non-empty one)."""
        return False

    def plan_run(self, xs: list[Inputs], ys: list[Target], start: int = 0) -> Run:
        """The batch's compiled run from ``start`` ``(end, X, Y)`` (``end == start``: none):
        none for a generic learner."""
        return start, None, None

    def run_rounds(self, X: np.ndarray, Y: np.ndarray) -> tuple[list[Outcome], float]:
        """Learn a run :meth:`plan_run` planned: its outcomes and its duration in seconds."""
        raise NotImplementedError  # plan_run planned no run

    def learn_predict_many(
        self, xs: list[Inputs], ys: list[Target], on_error: OnError | None
    ) -> list[Outcome]:
        """The outcome of each record, in order: predicted, then learned when labelled (the
        monitor, if any, observing each round). A record the learner refuses is reported as
        ``on_error(i, exc)`` (without ``on_error``: raised) and the loop goes on: a refused
        update leaves the record predicted, not learned; a refused prediction gives ``None``."""
        out: list[Outcome] = []
        observer, hits = self.observer, self.classifier and not self.sequence
        for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
            failure: Exception | None = None
            done: Outcome = None
            try:
                done = self.predict(x) if y is None else self.predict_learn(x, y)
            except Exception as exc:  # the loop never dies on input
                failure = exc
            if failure is not None:
                if on_error is None:
                    raise failure
                if y is not None:  # learning refused: the prediction stands
                    try:
                        done = self.predict(x)
                    except Exception as exc:
                        failure = exc
                out.append(done)
                on_error(i, failure)
                continue
            out.append(done)
            if observer is not None and y is not None:
                assert done is not None
                self.observe_round(done[0] == y if hits else None)
        return out

    def observe_round(self, hit: bool | None) -> None:
        """After a learned record: the monitored loop takes its round (:attr:`last_round`; the
        shadow learners learn it, the monitor observes it, the schedule restarts if the monitor
        asks), then the observer counts it (``hit``: predicted correctly; None: regression)."""
        raise NotImplementedError("only a fused driver tracks rounds")

    # the learner's own return value (probabilities, a number, a label sequence): any learner's
    def _result(self, out: Any) -> tuple[Prediction, Probas | None]:
        """(prediction, probabilities) from ``predict_proba_one``'s or ``predict_one``'s value."""
        if not self.classifier:
            value = float(out)
            return (value if math.isfinite(value) else None), None
        if not out:
            return None, {}
        return max(out, key=out.__getitem__), out  # first maximum in class order

    def predict(self, x: Inputs) -> tuple[Prediction, Probas | None]:
        """The prediction and, for a classifier, the probability of every known class."""
        if not self.classifier:
            return self._result(self.learner.predict_one(x))
        return self._result(self.learner.predict_proba_one(x))  # type: ignore[attr-defined]

    def learn(self, x: Inputs, y: Target) -> None:
        """Learn one labelled example."""
        self.learner.learn_one(x, y)

    def predict_learn(self, x: Inputs, y: Target) -> tuple[Prediction, Probas | None]:
        """The prediction made before learning, then the update: the learner's
        ``learn_predict_one`` (or :meth:`predict` then :meth:`learn`). Raises when the learner
        refuses the example (a learner that follows the river contract then changed nothing;
        the caller predicts and reports the refusal)."""
        if self._learn_predict is None:
            done = self.predict(x)
            self.learn(x, y)
            return done
        return self._result(self._learn_predict(x, y))

    def warm_up(self) -> None:
        """Run the learner's compiled code once on a throwaway copy (numba loads its cache on the
        first call, ~0.3-1 s), so the first batch does not pay for it. Best effort."""


class MKLDriver(LearnerDriver):
    """Prequential rounds of :class:`~streammkl.river.MKLClassifier` /
    :class:`~streammkl.river.MKLRegressor` through their one seam,
    :class:`~streammkl.river.rounds.Rounds` (``learner.rounds()``): compiled runs planned,
    learned and judged there, and each round reported to the monitor as a :class:`Round`."""

    fused = True
    learner: MKLClassifier | MKLRegressor

    def __init__(self, learner: MKLClassifier | MKLRegressor) -> None:
        super().__init__(learner)
        self.rounds = learner.rounds()
        # lambda Omega(theta_t) of a compiled run's rounds comes from the block norms alone
        self._norm_only = self.rounds.norm_only

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
        self, xs: list[Inputs], ys: list[Target], on_error: OnError | None
    ) -> list[Outcome]:
        """A classifier's batch through :meth:`Rounds.learn_predict_many` (its compiled runs;
        inputs validated); with the monitor, the runs through :meth:`run_rounds` and the other
        records one by one, each observed. A regressor's: one round per record."""
        if not self.batched:
            return super().learn_predict_many(xs, ys, on_error)
        rounds = self.rounds
        if self.observer is None:
            # vector records (record_kind): every x is a feature dict
            probas = rounds.learn_predict_many(xs, ys, validated=True, on_error=on_error)  # type: ignore[arg-type]
            return _outcomes(probas)
        out: list[Outcome] = []
        i, n = 0, len(xs)
        while i < n:
            j, X, Y = rounds.plan(xs, ys, i, validated=True)  # type: ignore[arg-type]
            if j > i:
                assert X is not None and Y is not None
                out.extend(self.run_rounds(X, Y)[0])
                i = j
                continue

            def note(k: int, exc: Exception, base: int = i) -> None:
                assert on_error is not None
                on_error(base + k, exc)

            out.extend(super().learn_predict_many(xs[i : i + 1], ys[i : i + 1],
                                                  None if on_error is None else note))  # fmt: skip
            i += 1
        return out

    def plan_run(self, xs: list[Inputs], ys: list[Target], start: int = 0) -> Run:
        """The batch's compiled run from ``start`` (:meth:`Rounds.plan`, inputs validated)."""
        if not self.batched:
            return start, None, None
        return self.rounds.plan(xs, ys, start, validated=True)  # type: ignore[arg-type]

    def run_rounds(self, X: np.ndarray, Y: np.ndarray) -> tuple[list[Outcome], float]:
        """The planned run's compiled loop (GIL released): the outcomes of its records and
        its duration in seconds.

        With the monitor (:attr:`observer`), the run is learned by the monitored loop
        (:meth:`streammkl.monitor.MonitoredLoop.runs`): a restart the detector asks for falls
        between the same two rounds however the batches were cut.
        """
        t0 = time.perf_counter()
        rounds, observer = self.rounds, self.observer
        if observer is None:
            done: list[Outcome] = [*rounds.predictions(rounds.learn_run(X, Y))]
            return done, time.perf_counter() - t0
        core = rounds.model
        assert core is not None
        X = rounds.prepare_rows(X)  # (standardised and counted once, before the loop's runs)
        done = []
        loop = observer.loop_for(core)
        judged: np.ndarray | None = None  # the run whose outcomes and hits are in run, run_hits
        run: Sequence[Outcome] = []
        run_hits: list[bool] = []
        for seg in loop.runs(X, Y, core.learn_many_prepared, cut=observer.history_every):
            if seg.run_scores is not judged:  # a run's rows judged at once (hits: by segment)
                judged, first = seg.run_scores, seg.run_start
                run, run_hits = rounds.judge(judged, Y[first : first + judged.shape[0]])
            a, b = seg.start - seg.run_start, seg.stop - seg.run_start
            done += run[a:b]
            observer.observed_segment(seg, run_hits[a:b])
        observer.observed_run()
        return done, time.perf_counter() - t0

    def observe_round(self, hit: bool | None) -> None:
        r, observer = self.last_round, self.observer
        assert r is not None and observer is not None, "observe_round needs a tracked round"
        assert self.rounds.model is not None
        observer.loop_for(self.rounds.model).observe(r.x, r.y, r.loss, r.reg, r.scores)
        observer.observed(hit)

    def learn(self, x: Inputs, y: Target) -> None:
        self.predict_learn(x, y)

    def predict_learn(self, x: Inputs, y: Target) -> tuple[Prediction, Probas | None]:
        learner, rounds = self.learner, self.rounds
        if not self.track:
            return self._result(learner.learn_predict_one(x, y))  # type: ignore[arg-type]
        self.last_round = None
        model = rounds.model
        reg = model.regularization_value() if model is not None and rounds.ready else 0.0
        done = self._result(learner.learn_predict_one(x, y))  # type: ignore[arg-type]
        self._remember(y, reg)
        return done

    def _remember(self, y: Target, reg: float) -> None:
        """Keep the round just learned (for the monitor), in the core's conventions."""
        rounds = self.rounds
        assert rounds.model is not None and rounds.last_input is not None
        scores = rounds.model.last_scores.copy()  # the round's prequential scores
        if self.classifier:
            target = rounds.target(y)
        else:  # the standardised target the round learned (statistics already advanced)
            center, scale = rounds.target_scale()
            target = (float(y) - center) / scale  # type: ignore[arg-type]
        self.last_round = Round(rounds.last_input, target, rounds.last_loss, reg, scores)

    def warm_up(self) -> None:
        learner = self.learner
        clone = type(learner).from_state(*learner.to_state())
        x = dict.fromkeys(clone.rounds().feature_names or ["warm-up"], 0.0)
        if isinstance(clone, MKLClassifier):
            y: Target = clone.classes_[0] if clone.classes_ else True
            clone.predict_proba_one(x)
            clone.learn_predict_one(x, y)
        else:
            clone.learn_predict_one(x, 0.0)
        clone.predict_one(x)


class SequenceDriver(LearnerDriver):
    """A sequence labeler (``learn_one(xs, ys)``, ``predict_one(xs)`` -> label sequence), e.g.
    :class:`streammkl.structured.SequenceLabeler`: records are token sequences, predictions
    label sequences (no probabilities)."""

    sequence = True
    record_kind = "sequence"

    def __init__(self, learner: Learner) -> None:
        super().__init__(learner)
        self.classifier = True  # labels are classes (not numbers to regress)

    # a label sequence, as the labeler returns it (reason for Any: any learner's)
    def _result(self, out: Any) -> tuple[Prediction, None]:
        return out, None

    def predict(self, x: Inputs) -> tuple[Prediction, None]:
        return self.learner.predict_one(x), None

    def warm_up(self) -> None:
        learner = self.learner
        if not isinstance(learner, SequenceLabeler):
            return  # another labeler's compiled code is its own business
        clone = type(learner).from_state(*learner.to_state())
        keys = clone.feature_keys
        xs: list[dict[str, float]] | list[list[float]]
        if clone.input_mode == "dict":
            xs = [dict.fromkeys(keys, 0.0)] * 2
        else:
            xs = [[0.0] * max(len(keys), 1)] * 2
        clone.learn_one(xs, [clone.labels[0]] * 2 if clone.labels else [0, 0])
        clone.predict_one(xs)


class ParserDriver(SequenceDriver):
    """A dependency parser (``learn_predict_one(sentence, heads)``, ``predict_one(sentence)``),
    e.g. :class:`streammkl.structured.DependencyParser`: records are sentences (words as CoNLL-U
    columns), labels and predictions their heads; the per-label counters are then the UAS. The
    prediction and the update share one scoring of the sentence's arcs (``learn_predict_one``).
    A gold tree the parser refuses (a cycle, several root arcs) raises: a ``learner_error``."""

    record_kind = "sentence"
    learner: DependencyParser

    def predict_learn(self, x: Inputs, y: Target) -> tuple[Prediction, None]:
        return self.learner.learn_predict_one(x, y), None  # type: ignore[arg-type,return-value]

    def warm_up(self) -> None:
        # a small parser of the same kind loads every compiled loop (a copy of a large one would
        # allocate its hashed blocks for nothing)
        tiny = type(self.learner)(templates=("h.upos+b.upos+m.upos", "dir+dist"),
                                  average=self.learner.average)  # fmt: skip
        words = [{"form": "a", "upos": "NOUN"}, {"form": "b", "upos": "VERB"}, {}]
        tiny.learn_predict_one(words, [2, 0, 2])
        tiny.predict_one(words)


def driver_for(learner: Learner, sequence: bool = False) -> LearnerDriver:
    """:class:`MKLDriver` for the streammkl river learners, :class:`SequenceDriver` for sequence
    labelling (``sequence``, or a :class:`~streammkl.structured.SequenceLabeler`),
    :class:`ParserDriver` for a :class:`~streammkl.structured.DependencyParser`,
    :class:`LearnerDriver` otherwise."""
    if isinstance(learner, DependencyParser):
        return ParserDriver(learner)
    if sequence or isinstance(learner, SequenceLabeler):
        return SequenceDriver(learner)
    if type(learner) in (MKLClassifier, MKLRegressor):
        assert isinstance(learner, MKLClassifier | MKLRegressor)
        return MKLDriver(learner)
    return LearnerDriver(learner)
