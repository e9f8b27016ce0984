"""``SequenceLabeler``: SPOM (Alg. 3 of Martins et al. 2011) for first-order sequence labeling.

The joint feature map of [001] §2.3 has one *unigram* block per base kernel,
``phi_m(x, y) = sum_i psi_m(x_i) (x) e_{y_i}``, and one *bigram* (transition) block,
``phi_0(x, y) = sum_i e_{y_i} (x) e_{y_{i+1}}``. A unigram block is explicit (weights K x D over the
kernel's feature map) or kernelized (support pairs: positions ``x_i`` carrying label-indexed
coefficient vectors, ``e_{y_i} - e_{yhat_i}`` for the structured hinge, ``e_{y_i} - mu_i`` for the
CRF, ``mu_i`` the marginal at position i). Each round: block scores at every position, decoding
(loss-augmented Viterbi with Hamming cost, or forward-backward), a gradient step on every block,
the prox steps of the regularizer on the vector of block norms, the optional projection.

With ``learn_transition_weight=False`` (the paper's "beta_0 = 1 fixed") the bigram block is not
regularized (the documents leave this open; NOTES.md §1.3); it is one more regularized block
otherwise. The projection onto ``||theta|| <= radius`` covers every block, bigram included.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from streammkl import statefile
from streammkl.core import compiled as cnb
from streammkl.core import kernels as kernels_mod
from streammkl.core import schedules as schedules_mod
from streammkl.core.kernels import Kernel
from streammkl.core.regularizers import Regularizer
from streammkl.core.schedules import Schedule
from streammkl.core.state import BlockState, state_digest
from streammkl.statefile import StateError, check_header
from streammkl.structured.inputs import check_labels, decode_label, encode_label, sequence_matrix
from streammkl.structured.joint import TRANSITION, JointBlocks
from streammkl.structured.labeler_options import check_options
from streammkl.structured.persistence import load_with, optimizer_config, state_meta
from streammkl.structured.sequence_loss import LOSSES as LOSSES  # re-exported
from streammkl.structured.sequence_loss import loss_direction

__all__ = ["TRANSITION", "SequenceLabeler"]

FORMAT = "streammkl.SequenceLabeler"
VERSION = 2  # 2: the array "gram" (projection budget policy); version 1 files still load
_INT_ARRAYS = ("age", "counters")


class SequenceLabeler:
    """Online multiple-kernel sequence labeler (structured hinge or CRF), one sequence per round.

    Parameters
    ----------
    kernels
        Base kernels of the unigram blocks (``streammkl.core.kernels``), explicit or kernelized;
        names must be distinct and differ from ``"transition"``.
    loss
        ``"hinge"`` (structured SVM, Hamming cost, loss-augmented Viterbi) or ``"crf"``.
    regularizer
        A core regularizer acting on block norms, or a tuple of them (sequential prox steps);
        ``SquaredGroupLasso(1e-3)`` (sparse MKL) by default.
    schedule
        A core schedule, ``InvSqrt(1.0)`` by default (copied; t counts sequences).
    radius
        Project theta onto ``||theta|| <= radius`` after the prox steps (None: no projection).
    budget
        Maximum number of support pairs (positions) of the kernelized blocks; None = unbounded.
    budget_policy
        ``"merge"`` (default), ``"project"``, ``"smallest"`` or ``"oldest"``: what a full support
        set does to make room for a position (``streammkl.core.budget``); every policy keeps the
        block norms exact.
    seed
        Seeds the random Fourier maps of explicit RBF kernels.
    learn_transition_weight
        False: beta_0 = 1, an unregularized bigram block. True: the bigram block is one more
        regularized block and ``kernel_weights`` includes ``"transition"``.
    transition_weight
        The fixed beta_0 of the bigram kernel ``beta_0 * [y_i = y'_i', y_j = y'_j']`` (default
        1): the bigram features are scaled by ``sqrt(beta_0)``. With M unigram kernels,
        ``transition_weight=M``, ``InvSqrt(eta0 / M)`` and ``L2(M * lam)`` is exactly the
        average kernel ``(1/M) sum_m K_m`` with ``L2(lam)`` and ``InvSqrt(eta0)``.

    Examples
    --------
    Two labels that switch with probability 0.1 between positions; feature 0 is the label's
    sign plus unit noise, so a character alone is right about 84% of the time and the bigram
    block has to supply the rest.

    >>> import numpy as np
    >>> from streammkl.core import kernels, schedules
    >>> from streammkl.structured import SequenceLabeler
    >>> rng = np.random.default_rng(0)
    >>> def sample():
    ...     y = np.cumsum(rng.random(8) < 0.1) % 2
    ...     return np.c_[(2 * y - 1) + rng.normal(0, 1.0, 8), rng.normal(size=8)], list(y)
    >>> model = SequenceLabeler(kernels=(kernels.Linear(), kernels.RBF(gamma=0.5)),
    ...                         schedule=schedules.InvSqrt(0.1))
    >>> for _ in range(300):
    ...     model.learn_one(*sample())
    >>> tests = [sample() for _ in range(200)]
    >>> acc = np.mean([np.mean(np.equal(model.predict_one(x), y)) for x, y in tests])
    >>> print(f"accuracy per character {acc:.3f}")
    accuracy per character 0.912
    >>> {name: round(beta, 2) for name, beta in model.kernel_weights.items()}
    {'linear': 0.71, 'rbf(gamma=0.5)': 0.29}
    """

    def __init__(
        self,
        kernels: Sequence[Kernel] = (kernels_mod.Linear(),),
        loss: str = "hinge",
        regularizer: Regularizer | Sequence[Regularizer] | None = None,
        schedule: Schedule | None = None,
        radius: float | None = None,
        budget: int | None = None,
        budget_policy: str = "merge",
        seed: int = 0,
        learn_transition_weight: bool = False,
        transition_weight: float = 1.0,
    ):
        self.kernels = tuple(kernels_mod.from_spec(k) for k in kernels)
        self.loss = loss
        self.regularizer = regularizer
        self.schedule = schedule
        self.radius = radius
        self.budget = budget
        self.budget_policy = budget_policy
        self.seed = int(seed)
        self.learn_transition_weight = bool(learn_transition_weight)
        self.transition_weight = float(transition_weight)
        self._check_config()
        self._schedule = copy.deepcopy(
            schedules_mod.from_spec(schedule) if schedule is not None else schedules_mod.InvSqrt()
        )
        self.labels: list[Hashable] = []
        self._label_index: dict[Hashable, int] = {}
        self.feature_keys: list[str] = []
        self.input_mode: str | None = None
        self.t = 0
        self.last_loss: float | None = None  # loss of the last learned sequence, before its update
        self._joint = JointBlocks(
            self.kernels, self._regularizers, radius, budget, self._policy, self.seed,
            self.learn_transition_weight, self.transition_weight,
        )  # fmt: skip

    # --- configuration ----------------------------------------------------------------------
    def _check_config(self) -> None:
        self._regularizers, self._policy = check_options(
            self.kernels, self.loss, self.regularizer, self.transition_weight, self.radius,
            self.budget, self.budget_policy,
        )  # fmt: skip

    @property
    def names(self) -> list[str]:
        return [k.name for k in self.kernels]

    def _params(self) -> dict[str, Any]:
        return {
            "kernels": self.kernels,
            "loss": self.loss,
            "regularizer": self.regularizer,
            "schedule": self.schedule,
            "radius": self.radius,
            "budget": self.budget,
            "budget_policy": self.budget_policy,
            "seed": self.seed,
            "learn_transition_weight": self.learn_transition_weight,
            "transition_weight": self.transition_weight,
        }

    def clone(self, new_params: dict[str, Any] | None = None, include_state: bool = False):
        """A new labeler with the same parameters (overridden by ``new_params``).

        ``include_state=True`` also copies the learned state (via ``to_state``, so the copy
        shares no arrays with the original); it cannot be combined with ``new_params``.
        """
        if include_state:
            if new_params:
                raise ValueError("clone: include_state=True cannot change parameters")
            return type(self).from_state(*self.to_state())
        params = {**self._params(), **(new_params or {})}
        return type(self)(**copy.deepcopy(params))

    # --- lazy state -------------------------------------------------------------------------
    @property
    def _state(self) -> BlockState | None:
        """The core block state of the unigram blocks (None before the first label)."""
        return self._joint.state

    @property
    def transition(self) -> np.ndarray:
        """The bigram block A (K x K); transition scores are ``sqrt(beta_0) A``."""
        return self._joint.transition

    def _rebuild(self, keys: list[str], n_labels: int) -> None:
        self._joint.rebuild(keys, n_labels)
        self.feature_keys = list(keys)

    def _prepare(
        self, xs: Any, ys: Any = None, learning: bool = True
    ) -> tuple[np.ndarray, list[Hashable] | None]:
        """The sequence as a (T x d) array (and the checked labels, if given).

        Everything is validated before anything changes. New features then widen the model (as
        the core does); predicting with an untrained model (no label yet) changes nothing, not
        even the input mode; once trained, unseen features at prediction time also widen the
        model, because they change kernel values (an RBF distance), not because of learning.
        """
        X, mode, new = sequence_matrix(xs, self.feature_keys, self.input_mode)
        labels = None if ys is None else check_labels(ys, X.shape[0])
        if not learning and not self.labels:
            return X, labels
        if self.input_mode is None:
            self.input_mode = mode
        if mode == "array" and X.shape[1] > len(self.feature_keys):
            new = [str(j) for j in range(len(self.feature_keys), X.shape[1])]
        if new and self.labels:
            self._rebuild(self.feature_keys + new, len(self.labels))
        elif new:
            self.feature_keys = self.feature_keys + new
        return X, labels

    def _label_indices(self, ys: list[Hashable], grow: bool) -> np.ndarray:
        """Indices of the labels; unseen ones are added (grow) or get indices K, K+1, ..."""
        extra: dict[Hashable, int] = {}
        out = np.empty(len(ys), dtype=np.int64)
        for i, y in enumerate(ys):
            j = self._label_index.get(y)
            if j is None:
                if grow:
                    j = self._label_index[y] = len(self.labels)
                    self.labels.append(y)
                else:
                    j = extra.setdefault(y, len(self.labels) + len(extra))
            out[i] = j
        if grow and (self._state is None or len(self.labels) > self.transition.shape[0]):
            self._rebuild(self.feature_keys, len(self.labels))
        return out

    # --- scoring ----------------------------------------------------------------------------
    def _potentials(self, X: np.ndarray, n_labels: int) -> tuple[np.ndarray, np.ndarray, tuple]:
        """Unary (T, n) and transition (n, n) scores; labels beyond the known K score 0."""
        return self._joint.potentials(X, n_labels)

    def _loss_direction(
        self, unary: np.ndarray, trans: np.ndarray, y: np.ndarray
    ) -> tuple[float, np.ndarray, np.ndarray]:
        """Loss at theta, unigram directions V (T, K) and bigram direction G0 (K, K) (= -grad)."""
        return loss_direction(self.loss, unary, trans, y)

    # --- learning ---------------------------------------------------------------------------
    def learn_one(self, xs: Any, ys: Any) -> None:
        """One round of SPOM on the sequence ``(xs, ys)``."""
        X, labels = self._prepare(xs, ys)
        if labels is None:  # ys=None: the same TypeError len(None) raised in _label_indices
            raise TypeError("ys must be a sequence of labels, got NoneType")
        y = self._label_indices(labels, grow=True)
        self._joint.ensure_room(X.shape[0])
        unary, trans, cache = self._potentials(X, len(self.labels))
        self.last_loss, V, G0 = self._loss_direction(unary, trans, y)
        self._joint.step(X, V, G0, self._schedule.step(), cache)
        self.t += 1

    def learn_predict_one(self, xs: Any, ys: Any) -> list[Hashable] | None:
        """``predict_one(xs)`` *then* ``learn_one(xs, ys)``: the recommended prequential round.
        Returns the label sequence predicted *before* learning (``None`` before any label is
        known); ``ys`` of ``None`` predicts only.

        When every label of ``ys`` is known, the prediction's potentials are the learning
        round's own (one scoring of the sequence); otherwise it is the two calls. Either way
        the learner ends bit for bit where the two calls leave it.
        """
        if ys is None:
            return self.predict_one(xs)
        if not self.labels:
            prediction = self.predict_one(xs)
            self.learn_one(xs, ys)
            return prediction
        X, labels = self._prepare(xs, ys, learning=False)  # validates; widens as predict_one
        assert labels is not None
        if any(label not in self._label_index for label in labels):
            prediction = self.predict_one(xs)
            self.learn_one(xs, ys)
            return prediction
        y = self._label_indices(labels, grow=False)
        unary, trans, cache = self._potentials(X, len(self.labels))
        path, _ = cnb.viterbi(unary, trans)
        prediction = [self.labels[k] for k in path]
        if self._joint.ensure_room(X.shape[0]):  # room made: score again, as learn_one does
            unary, trans, cache = self._potentials(X, len(self.labels))
        self.last_loss, V, G0 = self._loss_direction(unary, trans, y)
        self._joint.step(X, V, G0, self._schedule.step(), cache)
        self.t += 1
        return prediction

    # --- prediction -------------------------------------------------------------------------
    def predict_one(self, xs: Any) -> list[Hashable] | None:
        """The highest-scoring label sequence (Viterbi); None before any label is known."""
        X, _ = self._prepare(xs, learning=False)
        if not self.labels:
            return None
        unary, trans, _ = self._potentials(X, len(self.labels))
        path, _ = cnb.viterbi(unary, trans)
        return [self.labels[k] for k in path]

    def predict_marginals_one(self, xs: Any) -> list[dict[Hashable, float]]:
        """Per-position marginals ``p(y_i = label)`` of the CRF (forward-backward)."""
        if self.loss != "crf":
            raise ValueError(
                "predict_marginals_one needs loss='crf'; a structured-hinge model's scores are "
                "not calibrated log-probabilities"
            )
        X, _ = self._prepare(xs, learning=False)
        if not self.labels:
            return [{} for _ in range(X.shape[0])]
        unary, trans, _ = self._potentials(X, len(self.labels))
        _, node, _ = cnb.forward_backward(unary, trans)
        return [dict(zip(self.labels, row.tolist(), strict=True)) for row in node]

    # --- objective --------------------------------------------------------------------------
    def loss_one(self, xs: Any, ys: Any) -> float:
        """The loss at the current theta (unseen labels score 0); learns nothing."""
        X, labels = self._prepare(xs, ys, learning=False)
        if labels is None:  # ys=None: the same TypeError len(None) raised in _label_indices
            raise TypeError("ys must be a sequence of labels, got NoneType")
        y = self._label_indices(labels, grow=False)
        n = max(len(self.labels), int(y.max()) + 1)
        unary, trans, _ = self._potentials(X, n)
        return self._loss_direction(unary, trans, y)[0]

    def regularization_value(self) -> float:
        """``lambda * Omega(theta)`` over the regularized blocks."""
        return self._joint.regularization_value()

    def objective_terms(self, xs: Any, ys: Any) -> tuple[float, float]:
        """``(loss, lambda * Omega)`` at the current theta."""
        return self.loss_one(xs, ys), self.regularization_value()

    # --- introspection ----------------------------------------------------------------------
    @property
    def block_norms(self) -> dict[str, float]:
        """Exact ``||theta_m||`` of every block, the bigram block as ``"transition"``."""
        return self._joint.block_norms()

    @property
    def kernel_weights(self) -> dict[str, float]:
        """beta_m ∝ ||theta_m|| (∝ ||theta_m||^(2-q) for GroupLq) over the regularized blocks;
        ``"transition"`` is included only when beta_0 is learned."""
        return self._joint.kernel_weights()

    @property
    def active_kernels(self) -> list[str]:
        return [n for n, w in self.kernel_weights.items() if w > 0]

    @property
    def n_support(self) -> int:
        """Number of stored support pairs (positions) of the kernelized blocks."""
        return 0 if self._state is None else self._state.n_support

    # --- persistence ------------------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        """Constructor arguments as JSON-able specs (``SequenceLabeler(**config)`` rebuilds it)."""
        return {
            "kernels": [k.to_spec() for k in self.kernels],
            "loss": self.loss,
            **optimizer_config(self._regularizers, self._schedule, self.radius),
            "budget": self.budget,
            "budget_policy": self.budget_policy,
            "seed": self.seed,
            "learn_transition_weight": self.learn_transition_weight,
            "transition_weight": self.transition_weight,
        }

    def to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """(JSON-able meta, named arrays), enough to resume bit for bit (no pickle): ``meta``
        holds the format, version, configuration as specs, labels with type tags, feature keys
        and counters; ``arrays`` the core block-state arrays plus the bigram block
        ``transition``."""
        meta = state_meta(
            FORMAT, VERSION, self.config(), self.t, self._schedule.t,
            labels=[encode_label(y) for y in self.labels],
            feature_keys=list(self.feature_keys), input_mode=self.input_mode,
        )  # fmt: skip
        arrays: dict[str, np.ndarray] = {}
        if self._state is not None:
            arrays = self._state.to_arrays()
            arrays["transition"] = self.transition.copy()
        return meta, arrays

    @classmethod
    def from_state(cls, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> SequenceLabeler:
        """The labeler :meth:`to_state` gave ``(meta, arrays)`` for. The format is checked (a
        newer version refused) and every array's dtype and shape validated against the
        configuration, so a corrupt or foreign state gives a clear error, not a wrong model."""
        check_header(meta, FORMAT, VERSION, "SequenceLabeler")
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
        # the class's own restore, on the instance just built
        cls._restore(model, labels, keys, mode, (t, schedule_t), arrays, int(meta["version"]))
        return model

    def _restore(
        self,
        labels: list[Hashable],
        keys: list[str],
        mode: str | None,
        counters: tuple[int, int],
        arrays: dict[str, np.ndarray],
        version: int,
    ) -> None:
        """Load a checked state's labels, inputs, counters and arrays into this fresh labeler."""
        self.labels = labels
        self._label_index = {y: i for i, y in enumerate(labels)}
        self.feature_keys, self.input_mode = keys, mode
        self.t, self._schedule.t = counters
        if not arrays:
            if labels:
                raise _fail("labels are known but the arrays are missing")
            return
        if not labels:
            raise _fail("arrays present but no labels")
        joint = self._joint
        self._rebuild(keys, len(labels))
        template = joint.state
        assert template is not None  # built by _rebuild
        n = _support_size(arrays)
        checked = {}
        for name in BlockState.saved_names():
            if name == "gram" and version < 2:
                continue  # saved before the projection policy existed: built by sync_gram
            checked[name] = _checked(arrays, name, _expected_shape(template, name, n))
        joint.state = BlockState.from_arrays(checked, template.capacity)
        assert joint.layout is not None  # set by _rebuild
        joint.state.sync_gram(joint.layout, joint.keeps_gram)
        K = len(labels)
        joint.transition = _checked(arrays, "transition", (K, K))

    def save(self, path: str | os.PathLike) -> None:
        """Write the state to one file (:mod:`streammkl.statefile`: a zip holding ``meta.json``
        and one ``.npy`` per array; versioned, checksummed, written atomically and privately)."""
        statefile.write(path, *self.to_state())

    @classmethod
    def load(cls, path: str | os.PathLike) -> SequenceLabeler:
        """The labeler saved at ``path``."""
        return load_with(cls.from_state, path, "SequenceLabeler")

    def digest(self) -> str:
        """sha256 of the canonical state."""
        return state_digest(*self.to_state())

    def __repr__(self) -> str:
        return (
            f"SequenceLabeler(kernels={self.names}, loss={self.loss!r}, "
            f"regularizer={self._regularizers!r}, learn_transition_weight="
            f"{self.learn_transition_weight}, t={self.t})"
        )


def _fail(msg: str) -> StateError:
    return StateError(f"SequenceLabeler state: {msg}")


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
