"""MemoryClassifier: an MKLClassifier beside a local memory of its last inputs, the two mixed by
their past log-losses (issue 27's hedged neighbour vote)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from river import base, compose

from streammkl import statefile
from streammkl.core.hedge import FixedShareHedge, log_loss
from streammkl.core.parzen_memory import ParzenMemory
from streammkl.river._memory import memory_usage
from streammkl.river._params import check_int, check_number, check_share
from streammkl.river.classifier import MKLClassifier

FILE_FORMAT = "streammkl.river.memory"
FILE_VERSION = 1
_LEARNER, _MEMORY = "learner.", "memory."  # the prefixes of the saved arrays


class MemoryClassifier(base.Classifier):
    """An ``MKLClassifier`` and the Parzen vote of its last ``window`` examples, mixed by a
    fixed-share Hedge on their past log-losses.

    A kernel machine of a few fixed bandwidths is too smooth where classes move or have many
    modes; a vote of the recent neighbours is not, but it is noise where the learner is right.
    This keeps both and lets the stream decide: the prediction is ``(1 - w) p_learner + w
    p_vote``, ``w`` (:attr:`memory_weight`) the weight a fixed-share Hedge (rate ``eta``,
    share ``share``) gives the vote from the two experts' log-losses so far.

    - **The vote** (``streammkl.core.parzen_memory.ParzenMemory``): the class fractions of the
      last ``window`` examples weighted by ``exp(-gamma d2)``, on the inputs as the learner's
      kernels see them (its core input vector: standardise them, with a ``StandardScaler``
      before this or ``MKLClassifier(standardize=True)``); ``gamma = bandwidth / median d2``,
      the distances weighted per input by its binned mutual information with the class,
      refreshed every ``relevance_every`` examples; its probabilities floored at
      ``vote_floor / C``.
    - **Skipping it**: while ``w < skip_below`` the vote is computed only every
      ``check_every``-th round (so its losses keep coming and it can win its weight back); a
      round without it predicts with the learner alone and does not move the Hedge.
    - **Wide inputs**: once the learner has more than ``max_inputs`` inputs (bag of words,
      wide one-hot records) the memory is dropped for good and the learner alone predicts: a
      vote costs ``window x inputs`` operations, and over thousands of sparse columns its
      distances say little.

    The vote for ``x`` sees only the examples learned before it. ``learn_one`` scores both
    experts on the input it learns (before learning it); ``learn_predict_one``, the prequential
    round in one call, scores them on the prediction it returns. Measured against the default
    learner (5 seeds; ``benchmarks/results/memory_classifier.md``): see ``docs``.

    Parameters
    ----------
    classifier
        The learner (an ``MKLClassifier``, cloned); None = ``MKLClassifier()``.
    window
        How many of the last examples vote (W).
    bandwidth
        ``gamma = bandwidth / median squared distance`` (of the first 100 inputs, then of the
        last 100 at each relevance refresh).
    relevance_every
        Refresh the per-input distance weights every this many examples (0: unweighted).
    eta
        The Hedge's rate on the log-loss.
    share
        The Hedge's fixed share, in [0, 1): about 1 / share rounds to switch experts.
    vote_floor
        The vote's probabilities are ``(1 - vote_floor) x fractions + vote_floor / C``.
    skip_below
        While the Hedge's weight on the vote is below this, the vote is computed only every
        ``check_every``-th round (0: every round).
    check_every
        See ``skip_below``.
    max_inputs
        Above this many inputs the memory is dropped and the learner alone predicts.

    Examples
    --------
    >>> from river import datasets, evaluate, metrics, preprocessing
    >>> from streammkl.river import MemoryClassifier
    >>> model = preprocessing.StandardScaler() | MemoryClassifier()
    >>> evaluate.progressive_val_score(datasets.Phishing(), model, metrics.Accuracy())
    Accuracy: 91.27%
    >>> round(model["MemoryClassifier"].memory_weight, 2)
    0.86
    """

    def __init__(
        self,
        classifier: MKLClassifier | None = None,
        window: int = 1000,
        bandwidth: float = 16.0,
        relevance_every: int = 250,
        eta: float = 0.25,
        share: float = 0.002,
        vote_floor: float = 0.02,
        skip_below: float = 0.2,
        check_every: int = 10,
        max_inputs: int = 100,
    ):
        # (a river Pipeline passes isinstance as its last step, and has no fused round)
        if classifier is not None and (
            not isinstance(classifier, MKLClassifier) or isinstance(classifier, compose.Pipeline)
        ):
            raise TypeError(
                f"classifier must be an MKLClassifier, got {type(classifier).__name__}; "
                "a scaler goes before the wrapper: StandardScaler() | MemoryClassifier()"
            )
        check_int("window", window, 1)
        check_number("bandwidth", bandwidth, 0.0, math.inf)
        check_int("relevance_every", relevance_every, 0)
        check_number("eta", eta, 0.0, math.inf)
        check_share(share)
        check_number("vote_floor", vote_floor, 0.0, 1.0, closed=True)
        check_number("skip_below", skip_below, 0.0, 1.0, closed=True)
        check_int("check_every", check_every, 1)
        check_int("max_inputs", max_inputs, 0)
        self.classifier = classifier
        self.window = window
        self.bandwidth = bandwidth
        self.relevance_every = relevance_every
        self.eta = eta
        self.share = share
        self.vote_floor = vote_floor
        self.skip_below = skip_below
        self.check_every = check_every
        self.max_inputs = max_inputs
        self._learner = MKLClassifier() if classifier is None else classifier.clone()
        self._memory: ParzenMemory | None = ParzenMemory(window, bandwidth, relevance_every)
        self._hedge = FixedShareHedge(eta, share)
        self._labels: dict[Any, int] = {}  # every class seen: its index, in order of arrival
        self._label_list: list = []  # the same classes in that order
        self._rounds = 0  # examples learned
        self._fractions: np.ndarray | None = None  # the last vote computed while storing
        self._drop_lanes()

    def _drop_lanes(self) -> None:
        #: :meth:`learn_predict_one`'s and :meth:`learn_one`'s lanes (:meth:`_make_lanes`),
        #: each made on the learner's lane of the same call (kept beside it: a lane whose
        #: learner's lane is no longer the learner's answers None, the full path decides).
        self._known_lane: Callable[[Mapping, Any], Any] | None = None
        self._learn_lane: Callable[[Mapping, Any], bool] | None = None
        self._lanes_of: tuple[Any, Any] = (None, None)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for name in ("_known_lane", "_learn_lane", "_lanes_of"):
            del state[name]  # (closures over this object's parts: made again when needed)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._drop_lanes()

    # --- what it holds --------------------------------------------------------------------------
    @property
    def learner(self) -> MKLClassifier:
        """The wrapped learner (the one that learns, not the ``classifier`` parameter)."""
        return self._learner

    @property
    def memory(self) -> ParzenMemory | None:
        """The memory, or None once dropped (more than ``max_inputs`` inputs)."""
        return self._memory

    @property
    def memory_weight(self) -> float:
        """The Hedge's weight on the vote now (0 once the memory is dropped)."""
        return self._hedge.weight if self._memory is not None else 0.0

    @property
    def kernel_weights(self) -> dict[str, float]:
        """The learner's beta per kernel (``MKLClassifier.kernel_weights``)."""
        return self._learner.kernel_weights

    @property
    def _multiclass(self) -> bool:
        return True

    @property
    def _raw_memory_usage(self) -> int:
        """River's measure of everything the wrapper holds (the memory's arrays, the learner,
        a pipeline given as the classifier), without walking into compiled code
        (``streammkl.river._memory.memory_usage``)."""
        return memory_usage(self)

    # --- river API --------------------------------------------------------------------------
    def _votes_now(self) -> bool:
        """Whether this round computes the vote (the memory is kept, and the Hedge trusts it
        enough or the round is a check)."""
        return self._memory is not None and (
            self._hedge.weight >= self.skip_below or self._rounds % self.check_every == 0
        )

    def _mixed(self, proba: Mapping, fractions: np.ndarray | None, labels: list) -> dict:
        """``(1 - w) p_learner + w p_vote`` over ``labels`` (the vote's ``fractions``, one per
        class index, floored at ``vote_floor / C``; uniform when there is no vote yet)."""
        n = len(labels)
        if not n:
            return dict(proba)
        w = self._hedge.weight
        if fractions is None:
            votes = [w / n] * n
        else:
            fr = fractions.tolist()
            fr += [0.0] * (n - len(fr))
            floor, keep = w * self.vote_floor / n, w * (1.0 - self.vote_floor)
            votes = [floor + keep * f for f in fr[:n]]
        get, u = proba.get, 1.0 - w
        return {c: u * get(c, 0.0) + v for c, v in zip(labels, votes, strict=True)}

    def _labels_with(self, proba: Mapping) -> list:
        """The classes seen, then any class of the learner's ``proba`` not yet among them."""
        known = self._labels
        if proba.keys() <= known.keys():
            return self._label_list
        return self._label_list + [c for c in proba if c not in known]

    def predict_proba_one(self, x: Mapping, **kwargs: Any) -> dict:
        learner = self._learner
        memory = self._memory
        # (``_votes_now`` inline: most rounds skip the vote, and their cost is this wrapper's
        # Python, benchmarks/results/memory_classifier_speed.md)
        if memory is None or (
            self._hedge.weight < self.skip_below and self._rounds % self.check_every
        ):
            return learner.predict_proba_one(x)
        proba = learner.predict_proba_one(x)
        z = learner.rounds().vector(x, learn=False)
        fractions = None if z is None else memory.vote(z)
        return self._mixed(proba, fractions, self._labels_with(proba))

    def predict_one(self, x: Mapping, **kwargs: Any) -> Any:
        proba = self.predict_proba_one(x)
        return max(proba, key=proba.__getitem__) if proba else None

    def learn_one(self, x: Mapping, y: Any) -> None:
        lane = self._learn_lane
        if lane is not None and lane(x, y):
            return
        if y is None:
            raise ValueError("learn_one needs a label; got None")
        learner = self._learner
        if not self._votes_now():
            learner.learn_one(x, y)
            self._store(y)
            self._make_lanes()
            return
        proba = learner.predict_proba_one(x)
        memory = self._memory
        assert memory is not None
        z = learner.rounds().vector(x, learn=False)
        fractions = None if z is None else memory.vote(z)
        before = None if fractions is None else fractions.copy()
        learner.learn_one(x, y)
        self._register(proba)
        k = self._store(y)
        if self._memory is not None:
            self._score(proba, before, y, k)
        self._make_lanes()

    def learn_predict_one(self, x: Mapping, y: Any) -> dict:
        """``predict_proba_one(x)`` *then* ``learn_one(x, y)``: the prequential round, the
        learner's own in one call (``MKLClassifier.learn_predict_one``), the vote on the input
        it learned (its core vector, ``rounds().last_input``) in the call that stores it.
        Returns the probabilities before learning; a label of ``None`` predicts only."""
        if y is None:
            return self.predict_proba_one(x)
        lane = self._known_lane
        if lane is not None:
            proba = lane(x, y)
            if proba is not None:
                return proba
        mixed = self._finish_round(self._learner.learn_predict_one(x, y), y)
        self._make_lanes()
        return mixed

    def _finish_round(self, proba: dict, y: Any) -> dict:
        """:meth:`learn_predict_one` after the learner's round gave ``proba``: the memory's
        store of the input, and on a round that votes the mixture and the Hedge's update."""
        # (``_votes_now`` inline: most rounds skip the vote, and their cost is this wrapper's
        # Python, benchmarks/results/memory_classifier_speed.md)
        memory = self._memory
        if memory is None or (
            self._hedge.weight < self.skip_below and self._rounds % self.check_every
        ):
            self._store(y)
            return proba
        labels = list(self._labels_with(proba))  # (before y joins them)
        self._register(proba)
        k = self._store(y, vote=True)
        if self._memory is None:  # (dropped now: more than max_inputs inputs)
            return proba
        fractions = self._fractions
        mixed = self._mixed(proba, fractions, labels)  # (at the Hedge's weight before y)
        self._score(proba, fractions, y, k)
        return mixed

    def _make_lanes(self) -> None:
        """After a round, the lanes of :meth:`learn_predict_one` and :meth:`learn_one` on the
        learner's own (``Rounds.known_lane``, ``Rounds.learn_lane``) when it has them and they
        are new: on a round that does not vote (most rounds, ``skip_below``), the learner's
        lane, the class index and the memory's store of the input the lane wrote
        (``Rounds.lane_input``, queued by ``ParzenMemory.stager``): the numbers of the full
        path in one Python frame and no compiled call of the memory's (the full path's store
        costs ~1 µs a round, benchmarks/results/memory_classifier_speed.md). A round that
        votes, a class not seen yet or a lane of the learner no longer its own takes the full
        path (:meth:`learn_one`'s lane answers False having changed nothing, the other None)."""
        rounds = self._learner.rounds()
        known_of, learn_of = rounds.known_lane, rounds.learn_lane
        if (known_of, learn_of) == self._lanes_of or (known_of is None and learn_of is None):
            return
        memory, z = self._memory, rounds.lane_input()
        if memory is None or z is None or rounds.n_features > self.max_inputs:
            return
        stage = memory.stager(z)
        if stage is None:
            return
        self._lanes_of = (known_of, learn_of)
        self._known_lane = None if known_of is None else self._lane(known_of, stage, rounds)
        self._learn_lane = None if learn_of is None else self._lane(learn_of, stage, rounds, True)

    def _lane(
        self, learner_lane: Any, stage: Callable[..., Any], rounds: Any, learn: bool = False
    ) -> Any:
        """One of :meth:`_make_lanes`' lanes on ``learner_lane`` (``learn``: ``learn_one``'s,
        which decides before the learner learns, as its full path does)."""
        labels_get, hedge, skip, every = (
            self._labels.get,
            self._hedge,
            self.skip_below,
            self.check_every,
        )
        finish, store, wrapper = self._finish_round, self._store, self
        mix, score = self._mixed, self._score
        known, label_list = self._labels.keys(), self._label_list

        def known_lane(x: Mapping, y: Any) -> dict | None:
            if rounds.known_lane is not learner_lane:
                return None
            proba = learner_lane(x, y)
            if proba is None:
                return None
            k = labels_get(y)
            if k is None:
                return finish(proba, y)
            r = wrapper._rounds
            if hedge.weight < skip and r % every:
                wrapper._rounds = r + 1
                stage(k)
                return proba
            if not proba.keys() <= known:
                return finish(proba, y)
            # (a round that votes, one in ``check_every`` while the vote is skipped:
            # :meth:`_finish_round`'s steps on what the lane holds; ``y`` is a known class, so
            # the classes before it joins are ``label_list``)
            wrapper._rounds = r + 1
            fractions = stage(k, True)  # (None: no pair stored before)
            mixed = mix(proba, fractions, label_list)  # (at the Hedge's weight before y)
            score(proba, fractions, y, k)
            return mixed

        def learn_lane(x: Mapping, y: Any) -> bool:
            r = wrapper._rounds
            if rounds.learn_lane is not learner_lane or not (hedge.weight < skip and r % every):
                return False
            if not learner_lane(x, y):
                return False
            k = labels_get(y)
            if k is None:
                store(y)
            else:
                wrapper._rounds = r + 1
                stage(k)
            return True

        return learn_lane if learn else known_lane

    def _register(self, proba: Mapping) -> None:
        """Give every class of the learner's ``proba`` an index."""
        if not proba.keys() <= self._labels.keys():
            for c in proba:
                self._label(c)

    def _store(self, y: Any, vote: bool = False) -> int:
        """After the learner learned ``(x, y)``: the memory stores its core input and the class
        (with ``vote``, in the call that computes the vote of that input before it joins:
        ``self._fractions``, None with no pair stored before), or is dropped for good when
        the learner has more than ``max_inputs`` inputs. Returns the class index of ``y``."""
        k = self._labels.get(y)
        if k is None:
            k = self._label(y)
        self._rounds += 1
        self._fractions = None
        memory = self._memory
        if memory is None:
            return k
        rounds = self._learner.rounds()
        if rounds.n_features > self.max_inputs:
            self._memory = None  # the learner alone predicts from now on
            self._drop_lanes()
            return k
        z = rounds.last_input_view()
        if z is not None:
            if vote:
                self._fractions = memory.vote_and_add(z, k)
            else:
                memory.add(z, k)
        return k

    def _score(self, proba: Mapping, fractions: np.ndarray | None, y: Any, k: int) -> None:
        """The Hedge's update on the two experts' log-losses of ``y`` (class index ``k``): the
        learner's probabilities ``proba`` and the vote's ``fractions`` (floored; uniform
        without a vote), both from before learning ``y``."""
        n = len(self._label_list)
        if fractions is None:
            p_vote = 1.0 / n
        else:
            share = float(fractions[k]) if k < len(fractions) else 0.0
            p_vote = self.vote_floor / n + (1.0 - self.vote_floor) * share
        self._hedge.update(log_loss(proba.get(y, 0.0)), log_loss(p_vote))

    def _label(self, c: Any) -> int:
        """The class index of ``c`` (a new class gets the next)."""
        k = self._labels.get(c)
        if k is None:
            k = self._labels[c] = len(self._label_list)
            self._label_list.append(c)
        return k

    # --- persistence ------------------------------------------------------------------------
    def _params(self) -> dict[str, Any]:
        return {
            name: getattr(self, name)
            for name in (
                "window", "bandwidth", "relevance_every", "eta", "share", "vote_floor",
                "skip_below", "check_every", "max_inputs",
            )
        }  # fmt: skip

    def to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """(JSON-able meta, named arrays): the learner's state (``MKLClassifier.to_state``),
        the memory's, the Hedge's weight, the classes and the round count, without pickle."""
        learner_meta, learner_arrays = self._learner.to_state()
        arrays = {f"{_LEARNER}{k}": v for k, v in learner_arrays.items()}
        memory_meta = None
        if self._memory is not None:
            memory_meta, memory_arrays = self._memory.to_state(_MEMORY)
            arrays.update(memory_arrays)
        meta = {
            "format": FILE_FORMAT,
            "version": FILE_VERSION,
            "class": type(self).__name__,
            "params": self._params(),
            "default_classifier": self.classifier is None,
            "learner": learner_meta,
            "memory": memory_meta,
            "weight": self._hedge.weight,
            "classes": list(self._label_list),
            "rounds": self._rounds,
        }
        json.dumps(meta)  # fail here, clearly, if a label is not JSON-serialisable
        return meta, arrays

    @classmethod
    def from_state(cls, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> Any:
        """The learner :meth:`to_state` gave ``(meta, arrays)`` for."""
        statefile.check_header(meta, FILE_FORMAT, FILE_VERSION, "streammkl memory classifier")
        if meta.get("class") != cls.__name__:
            raise statefile.StateError(f"state holds a {meta.get('class')}, not a {cls.__name__}")
        n = len(_LEARNER)
        learner = MKLClassifier.from_state(
            meta["learner"], {k[n:]: v for k, v in arrays.items() if k.startswith(_LEARNER)}
        )
        template = None if meta["default_classifier"] else learner.clone()
        model = cls(template, **meta["params"])
        model._learner = learner
        memory_meta = meta["memory"]
        model._memory = (
            None if memory_meta is None else ParzenMemory.from_state(memory_meta, arrays, _MEMORY)
        )
        model._hedge.weight = float(meta["weight"])
        model._label_list = list(meta["classes"])
        model._labels = {c: i for i, c in enumerate(model._label_list)}
        model._rounds = int(meta["rounds"])
        return model

    def save(self, path: str | os.PathLike) -> Path:
        """Write the learner to ``path`` (one :mod:`streammkl.statefile` file, atomically);
        returns the path."""
        return statefile.write(path, *self.to_state())

    @classmethod
    def load(cls, path: str | os.PathLike) -> Any:
        """The learner saved at ``path``; :class:`streammkl.statefile.StateError` (a
        ``ValueError``) for a truncated, corrupt, foreign or newer file."""
        return cls.from_state(*statefile.read(path, cls.__name__))

    @classmethod
    def _unit_test_params(cls):
        from streammkl.core import kernels

        yield {}
        yield {
            "classifier": MKLClassifier(
                kernels=(kernels.Linear(), kernels.RBF(0.5, n_components=16)), budget=None
            ),
            "window": 50,
            "relevance_every": 20,
            "skip_below": 0.0,
        }
        yield {"classifier": MKLClassifier(standardize=True), "max_inputs": 3, "check_every": 3}
