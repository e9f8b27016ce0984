"""The rounds of an MKL river learner as a streaming service drives them: :class:`Rounds`.

A learner's ``rounds()`` is the one object a service (the daemon, a mixing group, the monitor)
asks for what river's API does not say: compiled runs of prequential rounds (:meth:`Rounds.plan`,
:meth:`Rounds.learn_run`, :meth:`Rounds.judge`), the view of the last round a monitor observes
(the core's input vector, target, loss and scores), the inputs and classes a group must agree on,
and the learner's state. It owns what the learner learns with: the core model
(:class:`~streammkl.core.OnlineMKL`, made at the first round), the input columns
(:class:`~streammkl.river._features.FeatureIndex`), the input standardisation and the targets'
codec (a classifier's :class:`~streammkl.river._labels.Classes`, a regressor's
:class:`~streammkl.river._scaling.TargetScale`). The learner's river methods are thin calls into
it, so both see one model.

A compiled run is a stretch of labelled examples whose classes and inputs are all known: the
core learns it in one compiled loop (GIL released) whose scores before each update are the
predictions, bit for bit those of a loop of ``learn_predict_one``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter
from struct import error as struct_error
from typing import Any, cast

import numpy as np

from streammkl import statefile
from streammkl.core import OnlineMKL
from streammkl.core.mixing import rebase_onto
from streammkl.core.model import MAX_ABS_INPUT
from streammkl.river._features import FeatureIndex, check_numeric
from streammkl.river._known import KnownRecord
from streammkl.river._labels import Classes
from streammkl.river._scaling import InputScaler, TargetScale
from streammkl.river.pooling import SCALER_PREFIX, pool_scalers, split_scaler

__all__ = ["Rounds"]

_PLAIN = frozenset({str, bool, int, float})  # label types that hash as themselves
#: Cells (rows x known features) of one compiled run: 1 M = 8 MB as an array. With 10,000
#: features, planning a 2,000-record run took 305 MiB (16 MiB with the cap; measured with
#: tracemalloc), twice over while the daemon pipelines two batches.
_RUN_CELLS = 1 << 20
_EMPTY = (np.zeros((0, 0)), np.zeros(0))
_NO_RECORD = OnlineMKL.NO_RECORD
#: What :meth:`Rounds.drop_lanes` drops (never pickled).
_LANES = ("record_round", "known_lane", "learn_lane", "predict_lane", "label_lane", "_lane_keys")


class Rounds:
    """What a learner learns with, and the service-side view of its rounds.

    Parameters
    ----------
    learner
        The river learner (its public ``standardize`` parameter and ``learn_predict_one`` /
        ``predict_proba_one`` are used; it is the one that calls :meth:`model_for_learning`).
    make_model
        Makes the core model (called once, at the first round).
    params_spec
        The learner's parameters as JSON-able specs (what its saved state records).
    targets
        The targets' codec: :class:`Classes` (a classifier) or :class:`TargetScale`.
    """

    def __init__(
        self,
        learner: Any,
        make_model: Callable[[], OnlineMKL],
        params_spec: Callable[[], dict[str, Any]],
        targets: Classes | TargetScale,
    ) -> None:
        self.learner = learner
        self.model: OnlineMKL | None = None
        self.features = FeatureIndex()
        self.scaler = InputScaler()
        self.targets = targets
        self._last_input: np.ndarray | None = None
        self._last_shared = False  # _last_input is a buffer of the one-call round
        #: The last round's record as its non-zeros ``(cols, vals, width)`` when the sparse
        #: call learned it (:attr:`last_input` makes it dense when asked for), else None.
        self._last_sparse: tuple[np.ndarray, np.ndarray, int] | None = None
        self._known = KnownRecord()
        #: :meth:`learn_known`'s round through the bound buffers as one callable,
        #: ``record_round(x, value)`` (``value``: the core's target, counted), once a round made
        #: it (:meth:`_make_record_round`): the scores before the update (a view), or None
        #: having changed nothing (the full path decides). A learner's lane on top of it
        #: (:attr:`known_lane`). Both dropped together (:meth:`drop_lanes`) by every
        #: replacement of what they hold; never pickled.
        self.record_round: Callable[[Mapping, float], np.ndarray | None] | None = None
        self.known_lane: Callable[..., Any] | None = None
        #: The two calls' lanes on the same buffers (river's ``predict_proba_one`` then
        #: ``learn_one``): :meth:`make_learn_lane`'s ``learn_lane(x, label) -> bool`` and
        #: :meth:`make_predict_lane`'s ``predict_lane(x)`` (``label_lane(x)``: ``predict_one``'s);
        #: dropped with the others.
        self.learn_lane: Callable[[Mapping, Any], bool] | None = None
        self.predict_lane: Callable[[Mapping], Any] | None = None
        self.label_lane: Callable[[Mapping], Any] | None = None
        #: The prequential loss of the last round learned (at theta_t, before its update, in
        #: the core's conventions); NaN before the first.
        self.last_loss = float("nan")
        self._make_model = make_model
        self._params_spec = params_spec
        self.buffers_replaced()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for lane in _LANES:
            del state[lane]  # (closures and what makes them: made again when needed)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        # (the names interned, as pickle's default does: a pickle of the copy is the same bytes)
        self.__dict__.update({sys.intern(k): v for k, v in state.items()})
        self.buffers_replaced()  # (the record's owners report to this copy)

    def buffers_replaced(self) -> None:
        """A buffer of the one-call round was replaced (a record's, :class:`KnownRecord`, or
        the standardisation's, :class:`InputScaler`), or the scaler or the model: the model
        forgets the buffers it was given, and the next one-call round binds them again
        (:meth:`_bind_record`). The record and the scaler report here themselves; whatever
        replaces the scaler or the model calls it."""
        self._known.on_replace = self.scaler.on_replace = self.buffers_replaced
        if isinstance(self.targets, Classes):  # (a lane holds the labels' targets)
            self.targets.on_register = self.drop_lanes
        self.drop_lanes()
        if self.model is not None:
            self.model.unbind_record()

    def drop_lanes(self) -> None:
        """Drop :meth:`learn_known`'s record round and the learner's :attr:`known_lane` (a
        buffer, the model's record pack, the model, the features or the classes were
        replaced): the next round takes the full path and makes them again."""
        self.record_round = self.known_lane = self.learn_lane = None
        self.predict_lane = self.label_lane = None
        #: The record keys a lane of the two calls was last asked for, by lane: a lane is made
        #: for keys asked twice in a row (:meth:`_steady`), so a stream whose keys change from
        #: one record to the next (which drops the lanes each time) makes none.
        self._lane_keys: dict[str, tuple | None] = {}

    def _steady(self, lane: str, keys: tuple | None) -> bool:
        """Whether ``lane`` was last asked for ``keys`` (the record's keys as bound: one
        object while they stay); remembers them."""
        steady = self._lane_keys.get(lane) is keys
        self._lane_keys[lane] = keys
        return steady

    def _make_record_round(self, model: OnlineMKL) -> Callable[[Mapping, float], np.ndarray | None]:
        """The record round of the buffers :meth:`KnownRecord.values` just wrote (their keys
        all known): the record's values checked and written, the model's round on them
        (:meth:`OnlineMKL.bound_round`, or :meth:`OnlineMKL.learn_bound` while something follows
        a round), the last round's view kept (a model whose rounds do not take the route
        refuses every record: the full path)."""
        if not model.record_bound:
            self._bind_record(model)
        learn = model.bound_round() or model.learn_bound
        known = self._known
        keys, fill, pred = known.keys, known.fill, model.last_scores
        last = known.xs if self.learner.standardize else known.raw
        rounds = self

        def record_round(x: Mapping, value: float) -> np.ndarray | None:
            if tuple(x) != keys or fill(x.values()) is None:
                return None
            loss = learn(value)
            if loss < 0.0:
                return None
            rounds._last_input, rounds._last_shared, rounds._last_sparse = last, True, None
            rounds.last_loss = loss
            return pred

        model.on_unbind = self.drop_lanes
        self.record_round = record_round
        return record_round

    def make_lane(
        self,
        targets: Mapping[Any, float],
        answer: Callable[[list[float]], Any],
        pair: tuple[Any, Any] | None = None,
    ) -> None:
        """After a round through :attr:`record_round`, :attr:`known_lane`: ``lane(x, label)``
        is ``answer`` of the scores (a list) :attr:`record_round` gives on ``(x,
        targets[label])``, or None (nothing changed: the full path decides) when it would give
        None or the label is not of a plain type or has no target. ``pair``: the two labels
        when ``answer`` is the softmax of the first two scores, which the model's compiled
        round then computes (:meth:`OnlineMKL.bound_round_softmax2`, the same numbers): that
        lane does the record round's steps in its own frame (one Python call per record: the
        default learner's two-class round, ~0.1 µs of calls saved) and only puts them in a
        dict. ``targets`` and ``answer`` are the caller's, held while the lane lives (dropped
        with the record round)."""
        model = self.model
        if self.record_round is None or model is None:
            return
        softmax2 = None if pair is None else model.bound_round_softmax2()
        known = self._known
        keys, numbers, pack, vals = known.keys, known.NUMBERS, known.pack, known.vals
        last = known.xs if self.learner.standardize else known.raw
        rounds, target_of, plain = self, targets.get, _PLAIN

        if softmax2 is None or pair is None:
            record_round = self.record_round

            def lane(x: Mapping, y: Any) -> Any:
                target = target_of(y) if type(y) in plain else None
                if target is None:
                    return None
                fx = record_round(x, target)
                return None if fx is None else answer(fx.tolist())

            self.known_lane = lane
            return
        c0, c1 = pair

        def softmax_lane(x: Mapping, y: Any) -> Any:  # (the record round's steps, inline)
            target = target_of(y) if type(y) in plain else None
            if target is None or tuple(x) != keys:
                return None
            values = x.values()
            if not numbers.issuperset(map(type, values)):
                return None
            try:
                pack(vals, 0, *values)
            except (OverflowError, struct_error):
                return None
            loss, p0, p1 = softmax2(target)  # (the two classes' softmax, compiled)
            if loss < 0.0:
                return None
            rounds._last_input, rounds._last_shared, rounds._last_sparse = last, True, None
            rounds.last_loss = loss
            return {c0: p0, c1: p1}

        self.known_lane = softmax_lane

    def make_learn_lane(self, targets: Mapping[Any, float]) -> None:
        """After a round through :attr:`record_round`, :attr:`learn_lane`: ``lane(x, label)``
        learns ``x`` as :attr:`record_round` does on ``(x, targets[label])`` and answers True,
        or answers False having changed nothing (the full path decides) when it would give
        None or the label is not of a plain type or has no target: ``learn_one``'s round in
        one Python frame (the label's target, the record's values checked and written, the
        model's compiled round), the steps of :meth:`make_lane`'s lane without the
        probabilities. A prediction just before on the same record left its feature maps in
        the model (``core._numba.features.explicit_phi_of``): the round takes them, the same
        numbers. ``targets`` is the caller's, held while the lane lives."""
        model = self.model
        record_round = self.record_round
        if record_round is None or model is None or not self._steady("learn", self._known.keys):
            return
        learn = model.bound_round()
        target_of, plain = targets.get, _PLAIN
        if learn is None:  # (something follows a round: the record round's own route)

            def lane_of_round(x: Mapping, y: Any) -> bool:
                target = target_of(y) if type(y) in plain else None
                return target is not None and record_round(x, target) is not None

            self.learn_lane = lane_of_round
            return
        known = self._known
        keys, numbers, pack, vals = known.keys, known.NUMBERS, known.pack, known.vals
        last = known.xs if self.learner.standardize else known.raw
        rounds = self

        def lane(x: Mapping, y: Any) -> bool:  # (the record round's steps, inline)
            target = target_of(y) if type(y) in plain else None
            if target is None or tuple(x) != keys:
                return False
            values = x.values()
            if not numbers.issuperset(map(type, values)):
                return False
            try:
                pack(vals, 0, *values)
            except (OverflowError, struct_error):
                return False
            loss = learn(target)
            if loss < 0.0:
                return False
            rounds._last_input, rounds._last_shared, rounds._last_sparse = last, True, None
            rounds.last_loss = loss
            return True

        self.learn_lane = lane

    def make_counted_lane(self, scale: TargetScale, predict: bool = False) -> None:
        """A regressor's lanes after a round through :attr:`record_round` (the targets'
        statistics ``scale`` count each target, as :meth:`learn_known` with ``counted``):
        :attr:`learn_lane`, ``lane(x, y) -> bool``, ``learn_one``'s round in one Python frame;
        with ``predict``, :attr:`known_lane`, ``lane(x, y)`` -> the prediction before the
        update, ``center + scale * score`` with the statistics before ``y`` is counted
        (``learn_predict_one``'s). Either answers False or None having changed nothing (the
        target counted is taken back: the full path decides, and raises what it raises) when
        ``y`` is not a float or an int within ``+-MAX_ABS_INPUT``, the record's keys are not
        the bound ones, a value is not a plain number or the compiled round refuses it. The
        steps of :meth:`make_learn_lane`'s lane with the target counted instead of looked up;
        the same numbers as the regressor's general path."""
        model = self.model
        record_round = self.record_round
        known = self._known
        lane_name = "known" if predict else "learn"
        if record_round is None or model is None or not self._steady(lane_name, known.keys):
            return
        learn = model.bound_round()
        mark, back_to, advance = scale.mark, scale.back_to, scale.advance
        center_scale, top = scale.center_scale, MAX_ABS_INPUT
        if learn is None:  # (something follows a round: the record round's own route)

            def counted_round(x: Mapping, y: Any) -> Any:
                if type(y) is not float:
                    if type(y) is not int:
                        return None
                    y = float(y)
                if not -top <= y <= top:
                    return None
                center, sd = center_scale()
                state = mark()
                fx = record_round(x, advance(y))
                if fx is None:
                    back_to(state)
                    return None
                return center + sd * fx.item(0) if predict else True

            if predict:
                self.known_lane = counted_round
            else:
                self.learn_lane = counted_round
            return
        keys, numbers, pack, vals = known.keys, known.NUMBERS, known.pack, known.vals
        last = known.xs if self.learner.standardize else known.raw
        pred = model.last_scores
        rounds = self

        def learn_lane(x: Mapping, y: Any) -> bool:  # (the record round's steps, inline)
            if type(y) is not float:
                if type(y) is not int:
                    return False
                y = float(y)
            if not -top <= y <= top or tuple(x) != keys:
                return False
            values = x.values()
            if not numbers.issuperset(map(type, values)):
                return False
            try:
                pack(vals, 0, *values)
            except (OverflowError, struct_error):
                return False
            state = mark()
            loss = learn(advance(y))
            if loss < 0.0:
                back_to(state)
                return False
            rounds._last_input, rounds._last_shared, rounds._last_sparse = last, True, None
            rounds.last_loss = loss
            return True

        def known_lane(x: Mapping, y: Any) -> float | None:  # (the same, and the prediction)
            if type(y) is not float:
                if type(y) is not int:
                    return None
                y = float(y)
            if not -top <= y <= top or tuple(x) != keys:
                return None
            values = x.values()
            if not numbers.issuperset(map(type, values)):
                return None
            try:
                pack(vals, 0, *values)
            except (OverflowError, struct_error):
                return None
            center, sd = center_scale()
            state = mark()
            loss = learn(advance(y))
            if loss < 0.0:
                back_to(state)
                return None
            rounds._last_input, rounds._last_shared, rounds._last_sparse = last, True, None
            rounds.last_loss = loss
            return center + sd * pred.item(0)

        if predict:
            self.known_lane = known_lane
        else:
            self.learn_lane = learn_lane

    def make_predict_lane(self, answer: Callable[[Any], Any], label: bool = False) -> None:
        """After :meth:`predict_known` took a record through the bound buffers,
        :attr:`predict_lane`: ``lane(x)`` is ``answer`` of the scores (a list)
        :meth:`predict_known` gives for ``x`` there, or None (nothing changed: the full path
        decides) when the record's keys are not the bound ones, a value is not a plain
        number or the compiled call refuses it: ``predict_proba_one`` in one Python frame.
        With ``label``, :attr:`label_lane`, ``answer`` of the scores as they are (a view):
        ``predict_one``'s. Nothing when the model's predictions do not take the bound buffers
        now. ``answer`` is the caller's, held while the lane lives (dropped with the record's
        buffers, the model's record pack or a new class: :meth:`drop_lanes`)."""
        model = self.model
        known = self._known
        keys = known.keys
        if model is None or keys is None or not model.takes_values or not model.record_bound:
            return
        if not self._steady("label" if label else "predict", keys):
            return
        bound = model.bound_decision()
        if bound is None:
            return
        decide, scores = bound
        numbers, pack, vals = known.NUMBERS, known.pack, known.vals
        model.on_unbind = self.drop_lanes  # (the lane calls the record pack the model holds)

        def lane(x: Mapping) -> Any:
            if tuple(x) != keys:
                return None
            values = x.values()
            if not numbers.issuperset(map(type, values)):
                return None
            try:
                pack(vals, 0, *values)
            except (OverflowError, struct_error):
                return None
            if not decide():
                return None
            return answer(scores) if label else answer(scores.tolist())

        if label:
            self.label_lane = lane
        else:
            self.predict_lane = lane

    def _bind_record(self, model: OnlineMKL) -> None:
        """Give ``model`` the buffers of the one-call round (:meth:`OnlineMKL.bind_record`):
        the record's and, when the learner standardises, the statistics over every known
        input."""
        known = self._known
        stats = self._stats() if self.learner.standardize else None
        model.bind_record(known.vals, known.cols, known.raw, stats, known.xs)

    @property
    def last_input(self) -> np.ndarray | None:
        """The core's input vector of the last round learned (standardised when the learner
        standardises); None before the first."""
        sparse = self._last_sparse
        if sparse is not None:  # the sparse round's record, made dense once asked for
            cols, vals, width = sparse
            dense = np.zeros(width)
            for col, value in zip(cols.tolist(), vals.tolist(), strict=True):
                dense[col] = value  # (in order: a later value of a column wins)
            self.last_input = dense
            return dense
        vec = self._last_input
        return vec.copy() if self._last_shared and vec is not None else vec

    @last_input.setter
    def last_input(self, vec: np.ndarray | None) -> None:
        self._last_input, self._last_shared, self._last_sparse = vec, False, None

    def last_input_view(self) -> np.ndarray | None:
        """:attr:`last_input` without its copy: the round's own buffer when the one-call round
        learned it, valid until the next round (read it now, e.g. to store it elsewhere, as
        ``MemoryClassifier`` does every round)."""
        if self._last_sparse is not None:
            return self.last_input
        return self._last_input

    def lane_input(self) -> np.ndarray | None:
        """The buffer every round through :attr:`record_round` and the lanes on it leaves as
        :meth:`last_input_view` (the record standardised when the learner standardises, else
        scattered over the inputs): the same array, rewritten each round, while
        :attr:`record_round` and its lanes live (a replaced buffer drops them: compare a
        lane's identity to know it is still this one). None without a record round."""
        if self.record_round is None:
            return None
        known = self._known
        return known.xs if self.learner.standardize else known.raw

    # --- the model and its inputs -------------------------------------------------------------
    def model_for_learning(self) -> OnlineMKL:
        """The core model, made now if this is the first round."""
        if self.model is None:
            self.model = self._make_model()
            if isinstance(self.targets, Classes):  # (classes declared before the model)
                self.model.reserve_outputs(len(self.targets))
        return self.model

    @property
    def ready(self) -> bool:
        """Whether the core model exists and has inputs (after the first round)."""
        return self.model is not None and bool(self.model.feature_keys)

    def vector(self, x: Mapping, learn: bool, validated: bool = False) -> np.ndarray | None:
        """x as the core's vector; on ``learn`` new inputs get columns (and the model is made).
        None before any learning."""
        if not validated:
            check_numeric(x)
        if learn:
            self._admit(x)
        if self.model is None or not self.model.feature_keys:
            return None
        return self.scale(self.features.vector(x, validated=True), learn)

    def learn_record(self, x: Mapping, target: float) -> float:
        """:meth:`vector` (learning: new inputs get their columns) then :meth:`learn` on ``x``,
        whose values passed ``check_numeric``; a sparse record the core takes as its entries
        (:meth:`_sparse`) is learned as them, at a cost linear in ``x`` besides laying out its
        new inputs: the same numbers. Returns the loss."""
        self._admit(x)
        model = self.model
        assert model is not None
        if model.feature_keys and self._sparse(model, x):
            record = self.features.known_sparse(x, learn=True)
            if record is not None:
                loss = model.learn_sparse(*record, target)
                if loss >= 0.0:
                    self._last_input, self._last_shared = None, False
                    self._last_sparse = (*record, len(self.features.names))
                    self.last_loss = loss
                    return loss
        assert model.feature_keys  # (as after vector(x, learn=True))
        return self.learn(self.scale(self.features.vector(x, validated=True), True), target)

    def _learn_admitting(self, x: Mapping, target: float, new: list[str]) -> np.ndarray:
        """:meth:`learn_record` on ``x`` (a known class's core ``target``) whose new names
        ``new`` the prediction just before found on an equal record, having checked its values
        (:meth:`FeatureIndex.take_pending`: what ``check_numeric`` and :meth:`_admit` would
        find again): the same steps, the same numbers; the scores before the update."""
        features = self.features
        model = self.model
        assert model is not None
        values = list(x.values())  # (this record's order: its entries' order)
        self._declare(model, x, new)
        if model.feature_keys and self._sparse(model, x):
            cols = list(map(features.index.get, x)) if None not in values else [None]
            if None in cols:  # a value None, an int name: mapped as learn_record maps it
                record = features.known_sparse(x, learn=True)
            else:
                record = np.array(cols, dtype=np.int64), np.array(values, dtype=np.float64)
            if record is not None:
                loss = model.learn_sparse(*record, target)
                if loss >= 0.0:
                    self._last_input, self._last_shared = None, False
                    self._last_sparse = (*record, len(features.names))
                    self.last_loss = loss
                    return model.last_scores
        assert model.feature_keys
        self.learn(self.scale(features.vector(x, validated=True), True), target)
        return model.last_scores

    def _admit(self, x: Mapping) -> None:
        """Columns for the new inputs of ``x`` (the model made if there is none yet)."""
        features = self.features
        new = features.new_names(x)
        model = self.model_for_learning()
        if new or not features.names:
            self._declare(model, x, new)

    def _declare(self, model: OnlineMKL, x: Mapping, new: list[str]) -> None:
        """Columns for ``new``, the new inputs of ``x``: the model's first (if it refuses,
        nothing changed), then the index's."""
        features = self.features
        # a sparse record (bag of words, one-hot; standardised, its 0/1 inputs stay 0/1) does
        # not widen the distances
        wide = 4 * self._nonzeros(x) >= len(features) + len(new)
        model.declare_features(new, rescale=wide)
        features.add(new)

    def _nonzeros(self, x: Mapping) -> int:
        """The non-zeros of ``x`` as the core sees it: its non-zero values, raw; standardised,
        about (:meth:`InputScaler.nonzeros`: its 0/1 inputs stay 0/1, the others are centred)."""
        if self.learner.standardize:
            return self.scaler.nonzeros(x, self.features.index)
        # (the values passed check_numeric: numbers, bools or None, each false iff it equals 0
        # or is None; two counts at C speed instead of a generator over them)
        values = list(x.values())
        return len(values) - values.count(0) - values.count(None)

    def scale(self, vec: np.ndarray, learn: bool) -> np.ndarray:
        """The core's vector for a raw one: standardised when the learner standardises (and
        counted when ``learn``); kept as :attr:`last_input` when learned."""
        if self.learner.standardize:
            scaler = self.scaler
            vec = scaler.learn_transform(vec) if learn else scaler.transform(vec)
        if learn:
            self.last_input = vec
        return vec

    def learn(self, vec: np.ndarray, target: float) -> float:
        """One round of the core on a prepared vector and target; returns its loss (kept as
        :attr:`last_loss`)."""
        assert self.model is not None
        self.last_loss = self.model.learn(vec, target)
        return self.last_loss

    def learn_known(self, x: Mapping, target: float, counted: bool = False) -> np.ndarray | None:
        """One round on ``x`` when nothing about it needs the full path (the model is made,
        every name of ``x`` is known, every value a plain finite number): featurised in one
        pass, standardised when the learner standardises, learned in one compiled call;
        returns the scores predicted before the update (a view: copy to keep). None when ``x``
        needs the full path (nothing changed). The same numbers as :meth:`vector` and
        :meth:`learn`. ``target``: the core's target; with ``counted``, a regressor's raw
        target, which its statistics (:attr:`targets`, a :class:`TargetScale`) count and make
        the core's target once ``x`` is known to take this route (taken back when the
        one-call round then refuses ``x``, before the checked path counts it).

        A record whose keys and values the one-call round takes (:class:`KnownRecord`, a bank
        whose rounds take it: ``OnlineMKL.learn_bound``) is scattered, checked, standardised
        and learned in one compiled call on buffers the model was given once
        (:meth:`buffers_replaced`)."""
        record_round = self.record_round
        if record_round is None:
            model = self.model
            if model is None or not model.takes_values:  # (built, explicit, dense)
                if model is None or not model.built:
                    return None
                return self._learn_vector(x, target, counted, None)
            if self._known.values(x, self.features, True) is None:  # (positional: no keyword)
                return self._learn_vector(x, target, counted, None)
            record_round = self._make_record_round(model)
        scale = mark = None
        if counted:  # a regressor's target statistics count it: undone on a refusal
            scale = cast(TargetScale, self.targets)
            mark = scale.mark()
            value = scale.advance(target)
        else:
            value = target
        fx = record_round(x, value)
        if fx is not None:
            return fx
        if scale is not None and mark is not None:
            scale.back_to(mark)
        if tuple(x) != self._known.keys:  # another kind of record: its columns looked up
            self.drop_lanes()
            return self.learn_known(x, target, counted)
        return self._learn_vector(x, target, counted, None if counted else value)

    def _learn_vector(
        self, x: Mapping, target: float, counted: bool, value: float | None
    ) -> np.ndarray | None:
        """:meth:`learn_known` through a vector of ``x`` (``value``: the core's target already
        computed, else ``target``'s, as there)."""
        model = self.model
        assert model is not None
        if self._sparse(model, x):
            record = self.features.known_sparse(x, learn=True)
            if record is None:
                pending = self.features.take_pending()
                if pending is None or counted:
                    return None
                return self._learn_admitting(x, target if value is None else value, pending)
            cols, vals = record
            if value is None:
                value = self._core_target(target, counted)
            loss = model.learn_sparse(cols, vals, value)
            if loss >= 0.0:
                self._last_input, self._last_shared = None, False
                self._last_sparse = (cols, vals, len(self.features.names))
                self.last_loss = loss
                return model.last_scores
        vec = self.features.known_vector(x, learn=True)
        if vec is None or not vec.shape[0]:
            return None
        if self.learner.standardize:
            vec = self.scaler.learn_transform(vec)
        self.last_input = vec
        if value is None:
            value = self._core_target(target, counted)
        self.last_loss = model.learn(vec, value)
        return model.last_scores

    def _core_target(self, target: float, counted: bool) -> float:
        """The core's target of :meth:`learn_known`'s ``target`` (counted when ``counted``)."""
        return cast(TargetScale, self.targets).advance(target) if counted else target

    def _sparse(self, model: OnlineMKL, x: Mapping) -> bool:
        """Whether ``x`` takes the core's calls on a record's non-zeros
        (:meth:`OnlineMKL.learn_sparse`): a bank whose rounds take them, raw inputs (the
        standardisation counts every known input), and a record whose entries are fewer than
        a quarter of the known inputs (the data decides, not the stream: a dense record keeps
        its dense vector)."""
        return (
            4 * len(x) < len(self.features.names)
            and model.takes_sparse
            and not self.learner.standardize
        )

    def _stats(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The input standardisation's statistics ``(count, mean, m2, binary)`` over every
        known input (an input the statistics have not met yet starts at zero, binary)."""
        scaler = self.scaler
        stats = scaler.stats
        if stats[0].shape[0] != len(self.features.names):
            scaler.fit_width(len(self.features.names))
            stats = scaler.stats
        return stats

    def predict_known(self, x: Mapping) -> np.ndarray | None:
        """The scores of ``x`` (a view: copy to keep) when its values are all plain finite numbers
        and the model has inputs (unknown names are ignored, as :meth:`vector` does); None when
        ``x`` needs the full path. Changes nothing."""
        model = self.model
        if model is None or not model.feature_keys:
            return None
        if model.takes_values:  # the one-call route (takes_values: the model is built)
            if self._known.values(x, self.features, learn=False) is not None:
                fx = model.predict_bound()
                if fx is None and not model.record_bound:
                    self._bind_record(model)
                    fx = model.predict_bound()
                if fx is not None:
                    return fx
        elif not model.built:
            return None
        if self._sparse(model, x):
            record = self.features.known_sparse(x, learn=False)
            if record is None:
                return None
            fx = model.predict_sparse(*record)
            if fx is not None:
                return fx
        vec = self.features.known_vector(x, learn=False)
        if vec is None:
            return None
        if self.learner.standardize:
            vec = self.scaler.transform(vec)
        return model.decision_prepared(vec)

    def prepare_rows(self, X: np.ndarray) -> np.ndarray:
        """Raw dense rows (over :attr:`feature_names`) as the core learns them, in order:
        standardised and counted when the learner standardises (call once per run, just before
        learning it), else ``X`` itself."""
        return self.scaler.rows(X, learn=True) if self.learner.standardize else X

    def scale_rows(self, X: np.ndarray) -> np.ndarray:
        """Raw dense rows as the core predicts them (each standardised as ``predict_one`` does;
        nothing counted)."""
        return self.scaler.rows(X, learn=False) if self.learner.standardize else X

    def knows_features(self, x: Mapping) -> bool:
        """Whether every name of ``x`` is admitted (learning ``x`` would add no input)."""
        index = self.features.index
        for key in x:
            if (key if type(key) is str else str(key)) not in index:
                return False
        return True

    def unknown_features(self, x: Mapping) -> list[str]:
        """The names of ``x`` not admitted yet, sorted: what learning ``x`` would add
        (predictions ignore them). Changes nothing."""
        return self.features.new_names(x)

    def input_vector(self, x: Mapping) -> np.ndarray:
        """``x`` as a raw dense float64 vector over :attr:`feature_names` (missing and unknown
        names count as 0; the values must be finite numbers), before any standardisation."""
        return self.features.vector(x, validated=True)

    def input_rows(self, xs: Sequence[Mapping]) -> np.ndarray:
        """:meth:`input_vector` of every record, stacked (one row each)."""
        return self.features.rows(xs)

    def declare_features(self, names: Sequence[str]) -> None:
        """Give inputs their columns before they are met (making the core model if there is
        none yet), so that learners that must agree on them (a group's base) do."""
        new = self.features.new_names(dict.fromkeys(names, 0.0))
        self.model_for_learning().declare_features(new)
        self.features.add(new)

    @property
    def feature_names(self) -> list[str]:
        """Every admitted input name, in column order (a copy)."""
        return list(self.features.names)

    @property
    def n_features(self) -> int:
        """Inputs admitted so far."""
        return len(self.features)

    @property
    def n_learned(self) -> int:
        """Rounds learned."""
        return 0 if self.model is None else self.model.t

    @property
    def n_outputs(self) -> int:
        """The core's score rows (0 before the model is made)."""
        return 0 if self.model is None else self.model.n_outputs

    @property
    def n_support(self) -> int:
        """Support vectors stored by the kernelized blocks."""
        return 0 if self.model is None else self.model.n_support

    def cost(self, x: Mapping | None = None) -> tuple[int, int]:
        """A cheap estimate of the work, in array entries touched: (one round now, laying out
        the inputs of ``x`` the learner has not met yet). A round's entries are those of a
        round on ``x`` (:meth:`OnlineMKL.cost`: a sparse record that takes the sparse round
        costs its own columns, standardised or not: a standardised record's non-zeros are its
        0/1 inputs' non-zeros and every other input; a dense record, or no ``x``, every column); the
        growth is 0 for a record of known inputs. Before the first round: (0, 0). For an
        admission budget in seconds: scale by a measured round (its time over its entries);
        the two share a unit, so the growth's share of a record's cost needs no calibration."""
        if self.model is None:
            return 0, 0
        new = 0 if x is None else len(self.unknown_features(x))
        # standardised, only the 0/1 inputs' zeros stay zeros (the others are centred)
        nnz = None if x is None else self._nonzeros(x)
        return self.model.cost(new, nnz)

    @property
    def kernel_names(self) -> list[str]:
        """The kernels of the bank, in block order."""
        if self.model is not None:
            return self.model.names
        return [k.name for k in self._make_model().kernels]

    @property
    def block_norms(self) -> dict[str, float]:
        """``||theta_m||`` per kernel (zeros before the first round)."""
        if self.model is None:
            return dict.fromkeys(self.kernel_names, 0.0)
        return dict(zip(self.kernel_names, self.model.block_norms.tolist(), strict=True))

    @property
    def kernel_bandwidths(self) -> dict[str, float]:
        """The bandwidths fitted to the data, by kernel name: gamma of every ``MedianRBF``
        (once it has met an input). State: it changes at the warm-up and when the inputs grow,
        while the kernel's name (its configuration) stays."""
        return {} if self.model is None else self.model.kernel_bandwidths

    @property
    def norm_only(self) -> bool:
        """Whether every configured regularizer is a function of the block norms alone (then
        ``lambda Omega(theta_t)`` of a compiled run's rounds follows from their block norms)."""
        model = self.model if self.model is not None else self._make_model()
        return model.norm_only

    def restart_schedule(self) -> None:
        """Start the step-size schedule again (a detected drift)."""
        if self.model is not None:
            self.model.restart_schedule()

    # --- classes (a classifier's) -------------------------------------------------------------
    @property
    def classes(self) -> Classes:
        """The classifier's class registry (a regressor has none: ``TypeError``)."""
        if not isinstance(self.targets, Classes):
            raise TypeError("a regressor has no classes")
        return self.targets

    def known_class(self, y: Any) -> bool:
        """Whether ``y`` is a class the learner has seen (learning it would add none)."""
        return self.classes.known(y)

    def declare_classes(self, labels: Sequence[Any]) -> None:
        """Register classes (in this order) before they are met (a group's members agree); the
        model gets an output for each at once (:meth:`OnlineMKL.reserve_outputs`), so a
        declared class is predicted (with a score of 0) before it is learned."""
        self.classes.declare(labels)
        if self.model is not None:
            self.model.reserve_outputs(len(self.classes))

    def target(self, y: Any) -> float:
        """The core's target for a known class (+-1 for a binary loss, else its index)."""
        return self.classes.target(y)

    def target_scale(self) -> tuple[float, float]:
        """A regressor's (center, scale): a core score s predicts ``center + scale * s``."""
        if not isinstance(self.targets, TargetScale):
            raise TypeError("a classifier's scores are not scaled targets")
        return self.targets.center_scale()

    # --- compiled runs ------------------------------------------------------------------------
    def plan(
        self, xs: Sequence[Mapping], ys: Sequence[Any], start: int = 0, validated: bool = False
    ) -> tuple[int, np.ndarray, np.ndarray]:
        """The longest run from ``start`` of labelled examples whose class and inputs are all
        known (a missing input counts as 0), ready for :meth:`learn_run`: ``(end, X, Y)``, X raw
        rows over the known inputs, Y the core's targets (``end == start``: none). A
        classifier's only; reads the learner, valid until it changes."""
        if validated:  # the common stretch -- every record plain and known -- a column at a time
            whole = self._whole_run(xs, ys, start)
            if whole is not None:
                return whole
        j, rows, targets = self._known_run(xs, ys, start, validated)
        if j == start:
            return start, *_EMPTY
        return j, np.array(rows, dtype=np.float64), np.array(targets)

    def _whole_run(
        self, xs: Sequence[Mapping], ys: Sequence[Any], i: int
    ) -> tuple[int, np.ndarray, np.ndarray] | None:
        """:meth:`plan` of validated records when every one up to the run's size limit joins
        the run (a plain label of a known class, exactly the known inputs), built a column at
        a time (~0.3 us per record less than :meth:`_known_run`'s loop of checks and
        ``np.array`` of its row tuples: the same numbers); ``None`` when one does not (the
        loop then finds where the run ends)."""
        model = self.model
        d = len(self.features.names)
        classes = self.targets
        if (model is None or not model.built or d == 0 or not isinstance(classes, Classes)
                or not len(classes)):  # fmt: skip
            return None
        n = min(len(xs), i + max(1, _RUN_CELLS // d))
        if n <= i:
            return None
        part, labels = xs[i:n], ys[i:n]
        if not all(map(d.__eq__, map(len, part))):
            return None
        if not all(map(_PLAIN.__contains__, map(type, labels))):
            return None
        ks = list(map(classes.index.get, labels))
        if None in ks or max(cast(list[int], ks)) >= (2 if classes.binary else model.n_outputs):
            return None
        rows = n - i
        names = self.features.names_keyed_like(part[0])  # (int keys: river's synthetic streams)
        X = np.empty((rows, d))
        try:
            for c, name in enumerate(names):  # a missing input: KeyError (a new one in its place)
                X[:, c] = np.fromiter(map(itemgetter(name), part), np.float64, rows)
        except KeyError:
            return None
        K = np.array(ks, dtype=np.float64)
        return n, X, (np.where(K == 1.0, 1.0, -1.0) if classes.binary else K)

    def _known_run(
        self, xs: Sequence[Mapping], ys: Sequence[Any], i: int, validated: bool
    ) -> tuple[int, list[Any], list[float]]:
        model, names = self.model, self.features.names
        d = len(names)
        if model is None or not model.built or d == 0 or not isinstance(self.targets, Classes):
            return i, [], []
        classes = self.targets
        if not len(classes):
            return i, [], []
        # the names as the run's first record keys them (int keys: river's synthetic streams)
        keys = self.features.names_keyed_like(xs[i]) if i < len(xs) else names
        get = itemgetter(*keys) if d > 1 else (lambda x, k=keys[0]: (x[k],))
        columns = self.features.index if keys is names else dict.fromkeys(keys)
        index = classes.index
        binary = classes.binary
        limit = 2 if binary else model.n_outputs
        rows: list[Any] = []
        targets: list[float] = []
        # a run holds at most _RUN_CELLS inputs (its rows are dense over every known input):
        # a wide model's runs are shorter, never a batch-sized block of memory
        n = min(len(xs), i + max(1, _RUN_CELLS // d))
        j = i
        while j < n:
            x, y = xs[j], ys[j]
            k = index.get(y) if type(y) in _PLAIN else None
            if k is None or k >= limit:
                break
            if len(x) == d:
                try:
                    row = get(x)
                except KeyError:  # a new input: the single rounds widen the model
                    break
            elif len(x) < d and x.keys() <= columns.keys():  # missing inputs count as 0
                row = tuple([x.get(key, 0.0) for key in keys])
            else:
                break
            if not validated:
                try:
                    check_numeric(x)
                except (TypeError, ValueError):
                    break  # learn_one raises the error, naming the input
            rows.append(row)
            targets.append((1.0 if k == 1 else -1.0) if binary else float(k))
            j += 1
        return j, rows, targets

    def learn_run(self, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        """Learn a planned run (:meth:`plan`) in one compiled loop; returns the scores of each
        example before its own update. The loop releases the GIL: other threads may run
        meanwhile, but none may touch this learner."""
        assert self.model is not None
        return self.model.learn_many_prepared(self.prepare_rows(X), Y)[1]

    def probas(self, scores: np.ndarray) -> list[dict[Any, float]]:
        """``predict_proba_one``'s probabilities from rows of the core's scores."""
        return self.classes.probas_of_scores(scores)

    def predictions(self, scores: np.ndarray) -> list[tuple[Any, dict[Any, float]]]:
        """``(predict_one, predict_proba_one)`` of each row of scores: the first most probable
        class (``None`` when no class is known) and the probabilities (:meth:`probas`)."""
        classes = self.classes
        pair = classes.two_class(scores)
        if pair is not None:
            return classes.predictions_of_pair(*pair)
        return [((max(p, key=p.__getitem__) if p else None), p) for p in self.probas(scores)]

    def judge(
        self, scores: np.ndarray, Y: np.ndarray
    ) -> tuple[list[tuple[Any, dict[Any, float]]], list[bool]]:
        """:meth:`predictions` of a run's rows of scores and whether each predicted its target
        (the first most probable class, as ``predict_one``; ``Y`` in the core's conventions)."""
        classes = self.classes
        binary = classes.binary
        pair = classes.two_class(scores)
        if pair is not None:  # arrays: the argmax (ties: the first class) without dicts
            p0, p1 = pair
            second = Y > 0 if binary else Y == 1.0
            return classes.predictions_of_pair(p0, p1), ((p1 > p0) == second).tolist()
        labels = classes.labels
        done = [(max(p, key=p.__getitem__), p) for p in classes.probas(scores.tolist())]
        hits = [
            label == labels[int(t > 0) if binary else int(t)]
            for (label, _), t in zip(done, Y.tolist(), strict=True)
        ]
        return done, hits

    def learn_predict_many(
        self,
        xs: Sequence[Mapping],
        ys: Sequence[Any],
        validated: bool = False,
        on_error: Callable[[int, Exception], None] | None = None,
    ) -> list[dict[Any, float] | None]:
        """Prequential rounds in order: the learner's ``learn_predict_one`` of each example (a
        label of ``None``: predict only); returns the probabilities.

        The learner ends bit for bit where the loop of single calls ends, and the probabilities
        are the same numbers. Runs of labelled examples whose class and inputs are already
        known go through one compiled loop (:meth:`plan`, :meth:`learn_run`); the other
        examples take the single calls.

        Parameters
        ----------
        xs, ys
            Examples and labels, in stream order.
        validated
            Every value of every ``x`` is already a finite number (e.g. decoded by
            :func:`streammkl.wire.decode`): skip the per-value checks.
        on_error
            Without it, an example the single calls refuse raises (as the loop of single calls
            would, with the earlier examples learned). With it, ``on_error(i, exc)`` is called
            and the loop goes on: a refused ``learn_one`` leaves example ``i`` predicted but not
            learned; a refused ``predict_proba_one`` gives ``None`` and skips the learning.
        """
        if len(xs) != len(ys):
            raise ValueError(f"{len(xs)} examples but {len(ys)} labels")
        learner = self.learner
        out: list[dict[Any, float] | None] = []
        i, n = 0, len(xs)
        while i < n:
            j, X, Y = self.plan(xs, ys, i, validated)
            if j > i:
                out.extend(self.probas(self.learn_run(X, Y)))
                i = j
                continue
            x, y = xs[i], ys[i]
            try:
                out.append(learner.learn_predict_one(x, y))
            except Exception as exc:  # learn_one changes nothing when it raises
                if on_error is None:
                    raise
                try:  # the prediction stands; only the learning was refused
                    out.append(learner.predict_proba_one(x))
                except Exception:
                    out.append(None)
                on_error(i, exc)
            i += 1
        return out

    # --- state --------------------------------------------------------------------------------
    def digest(self) -> str:
        """sha256 of the learner's canonical state: equal digests <=> identical learners."""
        return statefile.digest_of(self.learner)

    def targets_meta(self) -> dict[str, Any]:
        """The targets' codec as JSON-able meta (a classifier's classes, a regressor's target
        statistics)."""
        targets = self.targets
        if isinstance(targets, Classes):
            return {"classes": list(targets.labels)}
        return targets.to_meta()

    def restore_targets(self, meta: Mapping[str, Any]) -> None:
        """The targets' codec as :meth:`targets_meta` described it."""
        targets = self.targets
        if isinstance(targets, Classes):
            targets.labels[:] = list(meta.get("classes", []))
            targets.index = {c: i for i, c in enumerate(targets.labels)}
            self.drop_lanes()  # (a lane reads the index it was made with)
        else:
            targets.restore(dict(meta))

    def adopt(self, other: Rounds) -> None:
        """Take ``other``'s model, inputs, standardisation and targets (a learner of the same
        class and parameters, e.g. restored from a group's merged state), in place: code
        holding this learner sees the new model."""
        self.model = other.model
        self.features = other.features
        self.scaler = other.scaler
        self.restore_targets(other.targets_meta())
        self.buffers_replaced()

    def load_state(
        self, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray], with_bank: bool = False
    ) -> None:
        """Replace the learner's model by a saved state, in place. The state must be of the
        learner's class and hold the same parameters (a learner of a group adopting the
        group's merged model); with ``with_bank``, the kernel bank may differ and is adopted
        too (a group changes its bank by agreement, as a reload changes one learner's with
        ``add_kernel`` / ``remove_kernel``)."""
        saved = type(self.learner).from_state(meta, arrays)
        other = saved.rounds()
        mine, theirs = self.params_spec(), other.params_spec()
        bank = {"kernels"} if with_bank else set()
        names = (mine.keys() | theirs.keys()) - bank
        differ = sorted(k for k in names if mine.get(k) != theirs.get(k))
        if differ:
            raise ValueError(
                f"the state was saved by a learner with other parameters: {', '.join(differ)}"
            )
        self.learner.kernels = saved.kernels
        self.adopt(other)

    def take_state(self, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> bool:
        """:meth:`load_state` in place on the learner's own core model (the same bits, without
        building a learner, a model or a layout: :meth:`OnlineMKL.take_state`), when the state
        has the learner's parameters (its bank), classes, inputs in the same order and the
        core's layout; otherwise nothing changes and False is returned (use
        :meth:`load_state`)."""
        model = self.model
        if model is None or not self._is_mine(meta, list(self.features.names)):
            return False
        core, scaler = split_scaler(arrays)
        if not model.take_state(dict(meta["core"]), core):
            return False
        # in place: the model's arrays refilled (or new round arguments, which drop the bound
        # record's pack), the scaler's copied (or replaced: it reports so itself)
        self.scaler.assign(
            InputScaler.from_arrays(scaler, SCALER_PREFIX)
            if f"{SCALER_PREFIX}count" in scaler
            else InputScaler()
        )
        return True

    def rebase_onto(
        self,
        merged: tuple[Mapping[str, Any], Mapping[str, np.ndarray]],
        since: tuple[Mapping[str, Any], Mapping[str, np.ndarray]],
        examples: int,
    ) -> bool:
        """Move what the learner learned since the state ``since`` (its ``to_state()``, which
        a group member published; ``examples`` learned after it) onto the group's ``merged``
        learner state, in place: the core model by :func:`streammkl.core.mixing.rebase_onto`,
        the input standardisation by pooling (:func:`streammkl.river.pooling.pool_scalers`).
        The learner then holds, bit for bit, the state a group's rebase builds from the
        merged state and this learner's saved one and :meth:`load_state` loads, at a fraction
        of its cost. Only when the three states share the learner's parameters (its bank),
        classes, inputs in the same order and the core's layout (see the core function);
        otherwise nothing changes and False is returned (the caller takes the general path)."""
        model = self.model
        meta, arrays = merged
        names = list(self.features.names)
        if (
            model is None
            or model.feature_keys != names
            or since[0].get("core") is None
            or list(since[0].get("features") or []) != names
            or not self._is_mine(meta, names)
        ):
            return False
        core, scaler = split_scaler(arrays)
        standardize = bool(self.learner.standardize)
        if standardize != bool(scaler):
            return False
        pooled = None
        if standardize:  # the group's statistics, with this learner's own part on top
            mine = self.scaler.to_arrays(SCALER_PREFIX)
            pooled = pool_scalers((names, arrays), [((names, mine), (names, since[1]))], names)
        if not rebase_onto(model, (meta["core"], core), (since[0]["core"], since[1]), examples):
            return False
        if pooled is not None:
            self.scaler.assign(InputScaler.from_arrays(pooled, SCALER_PREFIX))
        return True

    def _is_mine(self, meta: Mapping[str, Any], names: list[str]) -> bool:
        """Whether a saved learner state (its meta) has this learner's class, parameters (its
        bank), classes or targets and inputs in the same order, with a core model: what
        :meth:`take_state` and :meth:`rebase_onto` need before they work in place."""
        return (
            meta.get("core") is not None
            and meta.get("class") == type(self.learner).__name__
            and list(meta.get("features") or []) == names
            and statefile.same_meta(meta.get("params"), self.params_spec())
            and statefile.same_meta(meta.get("extra"), self.targets_meta())
        )

    def params_spec(self) -> dict[str, Any]:
        """The learner's parameters as JSON-able specs (what its saved state records)."""
        return self._params_spec()
