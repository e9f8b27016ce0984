"""``OnlineMKL``: the array-level online proximal MKL learner (Alg. 1 / Alg. 3 of Martins et al.).

Each ``learn(x, y)`` is one round: score every block, take a subgradient of the loss, a gradient
step with ``eta_t``, the J prox steps of the regularizer(s), the optional projection onto the
ball of radius gamma, with kernel weights ``beta_m ∝ ||theta_m||`` (``∝ ||theta_m||^(2-q)``
for GroupLq). ``learn_predict(x, y)`` is the same round returning the prediction it made before
its update: one compiled call, the way to run a prequential (test-then-train) evaluation.

The class reads in this order: construction and the model's arrays (built lazily from the first
input, grown with the inputs and classes); single rounds; compiled runs of rounds
(``learn_many``); predictions and read-only views; restarts, save points and bank changes;
persistence (JSON + named arrays, no pickle). What the constructor refuses is in
:mod:`streammkl.core.model_checks`.
"""

from __future__ import annotations

import copy
import math
import os
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, cast

import numpy as np

from streammkl import statefile
from streammkl.core import _numba as nb
from streammkl.core import bandwidth
from streammkl.core import budget as budgets
from streammkl.core import kernels as kernels_mod
from streammkl.core import losses as losses_mod
from streammkl.core import regularizers as regs_mod
from streammkl.core import schedules as schedules_mod
from streammkl.core.kernel_base import DRAWS, NUMPY_DRAWS
from streammkl.core.kernels import Kernel, LandmarkRBF, MedianRBF
from streammkl.core.layout import grown
from streammkl.core.losses import Loss
from streammkl.core.model_checks import check_compatible, resolve_radius
from streammkl.core.regularizers import Regularizer
from streammkl.core.schedules import Schedule
from streammkl.core.state import BlockState, Layout, build_layout, state_digest, transplant
from streammkl.core.update import RoundArgs, step_arrays, wide_columns

__all__ = ["MAX_ABS_INPUT", "STATE_VERSION", "OnlineMKL"]

#: The largest magnitude of an input value or regression target a model learns from or scores:
#: beyond it (or NaN/Inf) an example is refused with ``ValueError`` before anything changes.
#: A value of 1e300 overflowed a round's squares and left the model predicting NaN.
MAX_ABS_INPUT = nb.MAX_ABS_INPUT

FORMAT = "streammkl.OnlineMKL"
STATE_VERSION = 6  # 2: the adaptive schedules' arrays; 3: BlockState.gram (projection budget
# policy); 4: a MedianRBF keeps its configured name and spec, its fitted bandwidth is saved
# apart ("bandwidths"); 5: the additive Gaussian map is anchored at 0 (phi(x) - phi(0)); 6:
# "draws", how the inputs' random features were drawn (kernel_base.DRAWS: the counter-based
# generator), and a LandmarkRBF's landmarks saved as float64 bytes ("points_f64", were lists).
# Older states still load (the missing arrays: zeros, or built by sync_gram; a version-3 fitted
# MedianRBF, saved as an RBF with "median_from": its template and its bandwidth, with the
# features it was learned over; a version-4 additive block's constant moved into the bias; a
# state without "draws" is drawn again with numpy's generator per input,
# kernel_base.NUMPY_DRAWS, the frequencies it learned over).

_F64 = np.dtype(np.float64)
#: Target types the compiled round takes as they are (it checks their values itself).
_NUMBERS = frozenset({float, int, np.float64, np.int64})
#: ``learn_bound``'s answer when the model's rounds do not take the one-call route.
_NOT_TAKEN = -4.0
_NO_STATS = (np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0))
#: No record pack made (``OnlineMKL._bound``; made at the next one-call round). A tuple of 14
#: Nones, as pickles hold it.
_UNBOUND: tuple[Any, ...] = (None,) * 14


class OnlineMKL:
    """Online proximal multiple kernel learning over arrays.

    Parameters
    ----------
    kernels
        The kernel bank, one block per kernel; names must be distinct.
    loss
        ``losses.Hinge()`` by default. Multiclass losses take integer class labels 0..K-1.
    regularizer
        A regularizer or a tuple of them (applied as sequential prox steps);
        ``SquaredGroupLasso(1e-3)`` (sparse MKL) by default.
    schedule
        ``InvSqrt(1.0)`` by default; copied, so the caller's object is never advanced.
    radius
        Projection onto ``||theta|| <= radius`` after the prox steps; ``"auto"`` uses the paper's
        ``gamma = sqrt(2 Lambda / lambda)`` (Prop. 9); None for no projection.
    budget
        Maximum number of support pairs of the kernelized blocks (None = unbounded).
    budget_policy
        What a full support set does to make room (see ``streammkl.core.budget``): ``"merge"``
        (two pairs merged into one), ``"project"`` (a pair projected onto the others),
        ``"smallest"`` or ``"oldest"`` (a pair removed).
    seed
        Seeds the random Fourier maps (per kernel name and feature key).
    fit_intercept
        Learn an unregularized bias per output with step ``intercept_lr * eta_t``.
    average
        Keep the running average of the explicit weights (Prop. 4); ``decision(x, averaged=True)``.
    averages
        Horizons of exponential averages of the iterates (explicit blocks; beside kernelized
        blocks, under FTRL's per-block schedules only, each average predicts with the
        kernelized blocks' current scores), e.g. ``(100, 1000, 10000)``: predictions
        (``decision``, the scores ``learn_many`` returns) then come from whichever of the
        last iterate and these averages has the smallest discounted prequential loss so far
        (``average_discount`` per round; a lead within rounding, below a relative 1e-9, does
        not count: such ties keep the last iterate, then the earlier average, so sums that
        agree to rounding pick the same predictor); learning is unchanged (one update per
        example, the gradient at the last iterate). Averages damp the noise of the iterates on
        noisy streams; the last iterate wins after a change.
    average_discount
        The discount of those losses (0.995: about the last two hundred examples count).
    average_every
        Update the averages and those losses every this many rounds (1: every round; 4 cuts
        their cost to a quarter, measured 0.2-0.3 points of accuracy lower on the development
        streams; the leader predicts every round).
    """

    #: :meth:`learn_bound`'s answer when no record's buffers are bound (:meth:`bind_record`).
    NO_RECORD = -5.0

    def __init__(
        self,
        kernels: Sequence[Kernel] = (kernels_mod.Linear(),),
        loss: Loss | None = None,
        regularizer: Regularizer | Sequence[Regularizer] | None = None,
        schedule: Schedule | None = None,
        radius: float | str | None = None,
        budget: int | None = None,
        budget_policy: str = "merge",
        seed: int = 0,
        fit_intercept: bool = False,
        intercept_lr: float = 1.0,
        average: bool = False,
        averages: Sequence[float] = (),
        average_discount: float = 0.995,
        average_every: int = 1,
    ):
        self.kernels = tuple(kernels_mod.from_spec(k) for k in kernels)
        if not self.kernels:
            raise ValueError("OnlineMKL needs at least one kernel")
        names = [k.name for k in self.kernels]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"kernel names must be distinct; repeated: {dupes} (pass name=...)")
        self.loss = losses_mod.from_spec(loss) if loss is not None else losses_mod.Hinge()
        if regularizer is None:
            regularizer = regs_mod.SquaredGroupLasso(1e-3)
        if isinstance(regularizer, Regularizer | dict):
            regularizer = (regularizer,)
        self.regularizers = tuple(regs_mod.from_spec(r) for r in regularizer)
        if not self.regularizers:
            raise ValueError("regularizer: give at least one (e.g. SquaredGroupLasso(1e-3))")
        self.schedule = copy.deepcopy(
            schedules_mod.from_spec(schedule) if schedule is not None else schedules_mod.InvSqrt()
        )
        budgets.check_budget(budget)
        self.budget = None if budget is None else int(budget)
        self.budget_policy = budget_policy
        self._policy = budgets.policy_code(budget_policy)
        self.seed = int(seed)
        self.draws = DRAWS  # how the inputs' random features are drawn (a saved model's: kept)
        self.fit_intercept = bool(fit_intercept)
        self.intercept_lr = float(intercept_lr)
        self.average = bool(average)
        self.averages = tuple(float(h) for h in averages)
        if any(not (h >= 1) for h in self.averages):
            raise ValueError(f"averages: horizons must be numbers >= 1, got {averages!r}")
        if not 0.0 < average_discount <= 1.0:
            raise ValueError(f"average_discount must be in (0, 1], got {average_discount!r}")
        self.average_discount = float(average_discount)
        if int(average_every) != average_every or average_every < 1:
            raise ValueError(f"average_every must be an integer >= 1, got {average_every!r}")
        self.average_every = int(average_every)
        self.radius = resolve_radius(radius, self.regularizers, self.loss)
        check_compatible(
            self.kernels, self.regularizers, self.schedule, self.average, bool(self.averages),
            self.radius,
        )  # fmt: skip
        self.feature_keys = []
        self.n_outputs = 2 if self.loss.multiclass else 1
        self.t = 0  # rounds learned
        self._names: tuple[tuple[Kernel, ...], list[str]] | None = None  # (bank, its names)
        self._layout: Layout | None = None
        #: The layout this model made and no one else holds (None: a save point, a restored
        #: or adopted state may hold the layout now): a landmark refresh writes it in place.
        self._own_layout: Layout | None = None
        self._state: BlockState | None = None
        self._args: RoundArgs | None = None
        #: The round arguments the one-call route is bound to, and its compiled calls.
        self._values_args: RoundArgs | None = None
        self._values: tuple[Any, Any] = (None, None)
        #: The buffers of the one-call route (:meth:`bind_record`): ``(vals, cols, raw, xs,
        #: count, mean, m2, binary)``, or None. Their owner reports when it replaces one
        #: (:meth:`bind_record` again, or :meth:`unbind_record`); never pickled.
        self._record: tuple[np.ndarray, ...] | None = None
        #: The record pack of these buffers and the round arguments now, and its calls
        #: (``RoundArgs.record_calls``): ``(a, learn, predict, record, args)``, or
        #: :data:`_UNBOUND` until the next one-call round makes it (:meth:`_bind_record`, the
        #: one place that does): whatever replaces the round arguments or changes the width
        #: drops it (:meth:`_unbind`).
        self._bound: tuple[Any, ...] = _UNBOUND
        #: Called whenever the record pack is dropped (:meth:`_unbind`): whoever holds a
        #: :meth:`bound_round` drops it then. Not pickled nor copied with the model.
        self.on_unbind: Callable[[], None] | None = None
        self._kernelized = False
        # MedianRBF kernels: the first inputs, until their bandwidths are measured
        self._warmup: bandwidth.Reservoir | None = (
            bandwidth.Reservoir(size=bandwidth.warmup(self.kernels))
            if bandwidth.has_pending(self.kernels)
            else None
        )
        #: Bandwidths decided elsewhere (a mixing group's merge, ``core.mixing_bandwidth``):
        #: the model keeps its warm-up inputs but never changes a bandwidth by itself. Not
        #: saved with the state (a member sets it on every model it adopts).
        self.hold_bandwidths = False
        #: The bank's landmark refresh period (:meth:`_refresh_period`), set with the rounds'
        #: arguments: one read per round.
        self._refresh_every = 0

    # --- the model's arrays (made at the first input, grown with the inputs and classes) ----
    @property
    def feature_keys(self) -> list[str]:
        """The inputs' names, in column order (the model's own list: copy it to keep it)."""
        return self._keys

    @feature_keys.setter
    def feature_keys(self, keys: Iterable[str]) -> None:
        self._keys = [str(k) for k in keys]
        self._key_index = {k: i for i, k in enumerate(self._keys)}
        if "_bound" in self.__dict__:  # (another width; not in __init__, before it is made)
            self._unbind()

    def declare_features(self, keys: Iterable[str], rescale: bool = True) -> None:
        """Name new inputs (appended as new columns); kernels may select them by name. Costs
        O(the new inputs' columns) (amortised): only their own columns are laid out.

        ``rescale``: whether a bandwidth set at fewer inputs is rescaled for the wider input
        (``core.bandwidth.for_inputs``, which rebuilds the block): right for inputs that come
        with dense records (squared distances grow with the inputs); pass False for inputs
        that come with a sparse record (a bag of words, one-hot categories: its distances grow
        with its non-zeros, not with the vocabulary), whose bandwidths then stay as they are
        until the warm-up measures them."""
        index = self._key_index
        new = [k for k in dict.fromkeys(map(str, keys)) if k not in index]
        if not new:
            return
        d = len(self._keys)
        self._keys.extend(new)
        index.update(zip(new, range(d, d + len(new)), strict=True))
        self._unbind()  # (another width; grown in place, the round arguments stay)
        try:
            self._grow_inputs(rescale and not self.hold_bandwidths)
        except BaseException:  # nothing changed: the names are taken back
            del self._keys[d:]
            for k in new:
                del index[k]
            raise

    def _grow_inputs(self, rescale: bool) -> None:
        """Lay out the inputs named since the arrays were last laid out: in place within the
        layout's capacity, else at twice the capacity (O(width), amortised); a bandwidth the
        number of inputs rescales (``core.bandwidth``, when ``rescale``) rebuilds the bank
        instead."""
        layout, state = self._layout, self._state
        if layout is None or state is None:
            self._rebuild(self.kernels, self.n_outputs)
            return
        kernels = bandwidth.for_inputs(self.kernels, len(self._keys), rescale)
        if kernels is not self.kernels and any(  # (the same tuple: no bandwidth changed)
            a is not b for a, b in zip(kernels, self.kernels, strict=True)
        ):
            self._rebuild(kernels, self.n_outputs)  # a new bandwidth: its block restarts
            return
        owned = layout is self._own_layout  # (no save point holds it: its frequencies move on)
        new = grown(layout, self.kernels, self._keys, self.seed, self._key_index, owned)
        if new is not layout:  # reallocated: the state moves to the new columns
            names = self.names
            self._state = transplant(layout, state, names, new, names, self.kernels)
            self._state.sync_gram(new, budgets.keeps_gram(self.budget, self.budget_policy))
            self._layout = self._own_layout = new
            self._refresh_args()

    def _rebuild(self, kernels: Sequence[Kernel], n_outputs: int) -> None:
        """The arrays for the bank ``kernels`` on every named input and ``n_outputs`` outputs:
        every block whose kernel stays keeps its state (``state.transplant``)."""
        keys = self._keys
        kernels = bandwidth.for_inputs(kernels, len(keys), rescale=not self.hold_bandwidths)
        old = self._layout
        # the blocks whose kernel stays keep their columns (``like``: the same arrays as a
        # build, drawing only the changed blocks; the bandwidth warm-up's bank change)
        layout = build_layout(
            kernels, len(keys), self.seed, self._key_index, keys,
            0 if old is None else old.capacity, self.draws,
            None if old is None else (old, self.kernels),
            old is not None and old is self._own_layout,  # (no save point holds it)
        )  # fmt: skip
        names = [k.name for k in kernels]
        if self._state is None or self._layout is None:
            cap = budgets.initial_capacity(self.budget)
            state = BlockState.empty(layout, n_outputs, cap, self.average, len(self.averages))
        else:
            self._state.grow_outputs(n_outputs)
            state = transplant(self._layout, self._state, self.names, layout, names, kernels)
        state.sync_gram(layout, budgets.keeps_gram(self.budget, self.budget_policy))
        self.kernels = tuple(kernels)
        self.n_outputs = n_outputs
        self._layout, self._state = layout, state
        self._own_layout = layout
        self._refresh_args()

    def _refresh_args(self) -> None:
        assert self._layout is not None and self._state is not None
        self._unbind()
        self._refresh_every = self._refresh_period()
        steps = step_arrays(self.regularizers, len(self.kernels), self.names)
        self._args = RoundArgs(
            self._layout,
            self._state,
            self.loss,
            self.schedule,
            steps,
            self.radius,
            self._policy,
            budgets.capacity_limit(self.budget),
            self.intercept_lr if self.fit_intercept else 0.0,
            np.array(self.averages, dtype=np.float64),
            self.average_discount,
            self.average_every,
            self.average,
        )
        self._kernelized = bool(self._layout.im_blocks.size)  # rounds may need support room

    def _prepare(self, x: Any) -> np.ndarray:
        x = np.ascontiguousarray(x, dtype=np.float64)
        if x.ndim != 1:
            raise ValueError(f"x must be a 1-D array of features, got shape {x.shape}")
        _check_values(x)
        d = len(self._keys)
        if x.shape[0] > d:  # a sparse record does not widen the distances (declare_features)
            dense = 4 * np.count_nonzero(x) >= x.shape[0]
            self.declare_features((str(j) for j in range(d, x.shape[0])), rescale=dense)
        if self._state is None:
            self._rebuild(self.kernels, self.n_outputs)
        elif x.shape[0] < d:
            raise ValueError(f"x has {x.shape[0]} features; the model has {d}")
        return x

    def _target(self, y: Any) -> float:
        """``y`` as the core's target, checked against the loss (``ValueError`` otherwise);
        changes nothing (a class index beyond the model's outputs is a valid target: the model
        scores it 0 until it learns it)."""
        task = self.loss.task
        if task == "binary":
            if y not in (-1, 1) or isinstance(y, bool):
                raise ValueError(f"{self.loss!r} needs y in {{-1, +1}}, got {y!r}")
            return float(y)
        if task == "multiclass":
            if isinstance(y, bool) or not float(y).is_integer() or y < 0:
                raise ValueError(f"{self.loss!r} needs an integer class index >= 0, got {y!r}")
            return float(y)
        y = float(y)
        if not abs(y) <= MAX_ABS_INPUT:
            raise ValueError(
                f"regression target must be finite within +-{MAX_ABS_INPUT:g}, got {y!r}"
            )
        return y

    def _targets(self, Y: Any) -> np.ndarray:
        """:meth:`_target` of every target (checked at once for a numeric array); changes
        nothing."""
        arr = np.asarray(Y)
        if arr.ndim == 1 and arr.dtype.kind in "iuf":
            y = arr.astype(np.float64)
            task = self.loss.task
            if task == "binary":
                ok = bool(np.all((y == 1.0) | (y == -1.0)))
            elif task == "multiclass":
                ok = bool(np.all((y >= 0) & (y == np.floor(y))))
            else:
                ok = bool(np.all(np.abs(y) <= MAX_ABS_INPUT))
            if ok:
                return y
        return np.array([self._target(v) for v in Y], dtype=np.float64)

    def _widen_for(self, targets: np.ndarray) -> None:
        """Give the model outputs for every class index among checked ``targets``."""
        if self.loss.task == "multiclass" and targets.size:
            top = int(targets.max()) + 1
            if top > self.n_outputs:
                self._rebuild(self.kernels, top)

    def reserve_outputs(self, n_outputs: int) -> None:
        """Outputs for ``n_outputs`` classes of a multiclass loss before they are met (classes
        declared in advance): widened now when the model is built (the new outputs start at
        zero: a declared class scores 0 until it is learned), else at the build. Nothing for a
        binary or regression loss, or when the model has them already."""
        if not self.loss.multiclass or n_outputs <= self.n_outputs:
            return
        if self._state is None:
            self.n_outputs = n_outputs
        else:
            self._rebuild(self.kernels, n_outputs)

    def _prepare_y(self, y: Any) -> float:
        """:meth:`_target`, the model widened for a new class index (to learn it)."""
        target = self._target(y)
        self._widen_for(np.array([target]))
        return target

    def _prepare_targets(self, Y: Any) -> np.ndarray:
        """:meth:`_targets`, every one checked before the model is widened (once) for the new
        class indices among them (to learn them)."""
        targets = self._targets(Y)
        self._widen_for(targets)
        return targets

    def _ensure_room(self, incoming: int = 1) -> None:
        assert self._state is not None
        if not self._layout or not self._layout.im_blocks.size:
            return
        cap = budgets.needs_growth(
            self._state.n_support, self._state.capacity, self.budget, incoming
        )
        if cap:
            self._state.resize_support(cap)
            self._refresh_args()

    # --- learning ---------------------------------------------------------------------------
    def learn(self, x: Any, y: Any) -> float:
        """One round on (x, y); returns the loss of the model *before* the update (prequential)."""
        return self._learn_checked(x, y)

    def learn_predict(self, x: Any, y: Any) -> np.ndarray:
        """One round on (x, y); returns the scores predicted for x *before* the update (what
        :meth:`decision` gave just before; the averaged predictor's with ``averages``): a
        prequential round in one compiled call."""
        self._learn_checked(x, y)
        assert self._args is not None
        return self._args.pred.copy()

    def _learn_checked(self, x: Any, y: Any) -> float:
        """One round; x and y are checked by the compiled call itself when x is a float64
        C-contiguous vector of the model's width (else :meth:`_prepare` first)."""
        args = self._args
        if (
            args is None
            or type(x) is not np.ndarray
            or x.dtype is not _F64
            or x.ndim != 1
            or x.shape[0] != len(self.feature_keys)
            or not x.flags.carray
        ):
            x = self._prepare(x)
            args = self._args
            assert args is not None
        if type(y) not in _NUMBERS:
            y = self._prepare_y(y)  # the loss's own error for a target it does not take
        if self._kernelized:
            self._ensure_room()
            args = self._args
            assert args is not None
        s = self.schedule
        t = self.t + 1
        loss = args.learn_predict(x, y, s.t + 1, t)
        if loss < 0.0:
            return self._refused(x, y, loss)
        s.t += 1
        self.t = t
        self._after_round(x, loss, t)
        return loss

    def _after_round(self, x: np.ndarray, loss: float, t: int) -> None:
        """What follows round ``t`` on the input ``x`` (the vector the round saw) with the loss
        ``loss``, whichever route took it: the bandwidth warm-up keeps ``x``, or a landmark
        refresh may take it."""
        if self._warmup is not None:
            self._warm(x[None, :])
        elif loss > 0.0 and self._refresh_every and t % self._refresh_every == 0:
            self._refresh_landmarks(x.copy(), t)  # (a round the model scored with a loss)

    @property
    def takes_values(self) -> bool:
        """Whether records go through :meth:`learn_bound` / :meth:`predict_bound` (the rounds
        and predictions of dense records: an explicit bank's, and a bank with kernelized
        blocks once its support arrays hold the whole budget, ``RoundArgs.known``; not the
        sparse rounds of a wide bank, nor a support set that grows without a budget)."""
        args = self._args
        return args is not None and args.known

    def bind_record(
        self, vals: np.ndarray, cols: np.ndarray, raw: np.ndarray,
        stats: tuple[np.ndarray, ...] | None, xs: np.ndarray,
    ) -> None:  # fmt: skip
        """The buffers of the records :meth:`learn_bound` and :meth:`predict_bound` take from
        now on: a record's values ``vals`` and their columns ``cols`` (a column of -1: a name
        the model ignores; a round takes only records whose columns are all >= 0), ``raw``
        the record scattered over the model's inputs (0 elsewhere), ``stats`` the running
        ``(count, mean, m2, binary)`` of every input (None: no standardisation) and ``xs``
        the record standardised. Every array float64 (``cols`` int64), C-contiguous, ``raw``,
        ``xs`` and the statistics of the model's width. The model keeps them (references, not
        copies) until :meth:`unbind_record` or the next ``bind_record``: their owner calls one
        of them whenever it replaces a buffer (writing into a buffer is what the calls are
        for). Never pickled nor copied with the model."""
        count, mean, m2, binary = _NO_STATS if stats is None else stats
        self._record = (vals, cols, raw, xs, count, mean, m2, binary)
        self._unbind()

    def unbind_record(self) -> None:
        """Forget the buffers of :meth:`bind_record` (their owner replaced one):
        :meth:`learn_bound` answers :attr:`NO_RECORD` and :meth:`predict_bound` None until
        buffers are bound again."""
        self._record = None
        self._unbind()

    @property
    def record_bound(self) -> bool:
        """Whether buffers are bound (:meth:`bind_record`)."""
        return self._record is not None

    def _unbind(self) -> None:
        """Drop the record pack (the round arguments or the width changed, or the buffers):
        the next one-call round makes it again (:meth:`_bind_record`); :attr:`on_unbind`
        reports it."""
        self._bound = _UNBOUND
        on_unbind = self.__dict__.get("on_unbind")  # (not yet set while __init__ runs)
        if on_unbind is not None:
            on_unbind()

    def learn_bound(self, y: float) -> float:
        """One round on the record in the buffers of :meth:`bind_record` (its values written
        into ``vals``), in one compiled call: scattered into ``raw``, with the statistics
        standardised into ``xs`` and counted (``streammkl.core.compiled.standardize_rows``'s
        numbers), then :meth:`learn` on it; ``y`` a float. Returns the loss, or a negative
        number, having changed nothing: :attr:`NO_RECORD` when no buffers are bound, another
        when the record needs :meth:`learn` (a value out of range, a new class, buffers not of
        the model's width, a bank whose rounds take another route, ...)."""
        b = self._bound
        if b is _UNBOUND:
            bound = self._bind_record()
            if bound is None:
                return self.NO_RECORD if self._record is None else _NOT_TAKEN
            b = bound
        loss = b[5](y)
        if loss >= 0.0 and (self._warmup is not None or self._refresh_every):
            record = self._record  # (else nothing follows a round)
            assert record is not None
            self._after_round(record[2] if record[4] is _NO_STATS[0] else record[3], loss, self.t)
        return loss

    def bound_round(self) -> Callable[[float], float] | None:
        """:meth:`learn_bound` as one callable, ``round(y) -> loss``, when nothing follows a
        round (no bandwidth warm-up keeps its inputs, no landmark block refreshes): for a
        caller that learns many records through the bound buffers with one Python call each.
        Valid until the record pack is dropped, which :attr:`on_unbind` reports (its holder
        drops it then); None when :meth:`learn_bound` would not take the record now."""
        if self._warmup is not None or self._refresh_every:
            return None
        b = self._bound
        if b is _UNBOUND:
            b = self._bind_record()  # type: ignore[assignment]
            if b is None:
                return None
        return cast(Callable[[float], float], b[5])

    def bound_round_softmax2(self) -> Callable[[float], tuple[float, float, float]] | None:
        """:meth:`bound_round` that also gives the softmax of the first two scores before the
        update, ``round(y) -> (loss, p0, p1)`` (the loss as there; the probabilities 0.0 when
        it is negative): for a caller that turns two scores into two classes' probabilities
        (the same operations in compiled code, no fastmath). Valid as :meth:`bound_round`;
        None when it is None or the model has fewer than two outputs."""
        if self.bound_round() is None or self.n_outputs < 2:
            return None
        a, args = self._bound[0], self._bound[4]
        return self._softmax2_round_of(args.softmax2_call(a), a)

    def _softmax2_round_of(
        self, learn: Any, a: Any
    ) -> Callable[[float], tuple[float, float, float]]:
        """:meth:`_round_of` for the call of :meth:`bound_round_softmax2` (which answers
        ``(loss, p0, p1)``)."""
        model, s = self, self.schedule

        def round_(y: float) -> tuple[float, float, float]:
            t, st = model.t + 1, s.t + 1
            out: tuple[float, float, float] = learn(a, y, st, t)
            if out[0] >= 0.0:
                s.t, model.t = st, t
            return out

        return round_

    @property
    def takes_sparse(self) -> bool:
        """Whether records may go through :meth:`learn_sparse` / :meth:`predict_sparse` (the
        rounds of a wide bank, ``RoundArgs.wide``, once no bandwidth warm-up keeps its inputs
        and no landmark block refreshes: nothing after the round needs the dense record)."""
        args = self._args
        return args is not None and args.wide and self._warmup is None and not self._refresh_every

    def _zeros(self) -> np.ndarray:
        """A buffer of zeros of the model's width (the sparse calls write a record into it
        and leave it zero); its room doubles, so a new input costs O(1) amortised here."""
        d = len(self._keys)
        buf = self.__dict__.get("_sparse_x")
        if buf is None or buf.shape[0] < d:
            buf = self._sparse_x = np.zeros(max(2 * d, 64))
        return buf[:d]

    def learn_sparse(self, cols: np.ndarray, vals: np.ndarray, y: float) -> float:
        """:meth:`learn` on the record whose entries are ``vals`` (float64) at the columns
        ``cols`` (int64, each below the model's width; any order, a later value of a column
        wins, zeros allowed), at a cost linear in them on the sparse route (no vector of the
        model's width is built or scanned): the same numbers as :meth:`learn` on the dense
        record. Only when
        :attr:`takes_sparse` and ``y`` is a float; returns the loss, or a negative number when
        the record needs :meth:`learn` (nothing changed)."""
        if not self.takes_sparse or type(y) is not float:
            return _NOT_TAKEN
        args = self._args
        assert args is not None
        s = self.schedule
        t = self.t + 1
        loss = args.learn_sparse(self._zeros(), cols, vals, y, s.t + 1, t)
        if loss < 0.0:
            return loss
        s.t += 1
        self.t = t
        return loss

    def predict_sparse(self, cols: np.ndarray, vals: np.ndarray) -> np.ndarray | None:
        """:meth:`decision_prepared` of a record given as in :meth:`learn_sparse`: the scores
        (a view: copy to keep), or None when the record needs the general path."""
        if not self.takes_sparse:
            return None
        args = self._args
        assert args is not None
        if not args.decision_sparse(self._zeros(), cols, vals):
            return None
        return args.fx

    def _values_call(self, which: int) -> Any:
        """The compiled call of :meth:`learn_bound` (``which`` 0) or :meth:`predict_bound`
        (1) for the round arguments now, ``(entry point, address)``, bound once per arguments
        (the callers read ``_values`` directly while the arguments stay); None when the rounds
        do not take it."""
        args = self._args
        if args is not self._values_args:
            self._values_args = args
            calls = args.values_calls() if args is not None and args.known else None
            self._values = (None, None) if calls is None else calls
        return self._values[which]

    def _bind_record(self) -> tuple[Any, ...] | None:
        """Make the record pack of the bound buffers and the round arguments now, and its
        calls (:attr:`_bound`); None, making nothing, when no buffers are bound, the rounds do
        not take the route or a buffer is not of the model's width."""
        record = self._record
        if record is None:
            return None
        vals, cols, raw, xs, count, mean, m2, binary = record
        args = self._args
        learn = self._values_call(0)
        if learn is None or not raw.shape[0] == xs.shape[0] == len(self._keys):
            return None
        assert args is not None
        a, f, g, pack = args.record_calls(
            learn[1], self._values[1][1], vals, cols, raw, count, mean, m2, binary, xs,
            count is not _NO_STATS[0],
        )  # fmt: skip
        self._bound = (a, f, g, pack, args, self._round_of(f, a))
        return self._bound

    def _round_of(self, learn: Any, a: Any) -> Callable[[float], float]:
        """The round of the record pack ``a`` through its compiled call ``learn``: the call,
        then the round counted (the schedule's and the model's); the loss, or a negative
        number (nothing changed). What follows a round is :meth:`learn_bound`'s."""
        model, s = self, self.schedule

        def round_(y: float) -> float:
            t, st = model.t + 1, s.t + 1
            loss: float = learn(a, y, st, t)
            if loss >= 0.0:
                s.t, model.t = st, t
            return loss

        return round_

    def predict_bound(self) -> np.ndarray | None:
        """:meth:`decision_prepared` of the record in the buffers of :meth:`bind_record`,
        standardised without counting when statistics are bound, in one compiled call: the
        scores (a view: copy to keep), or None when no buffers are bound or the record needs
        the general path (a value out of range, a bank whose predictions take another
        route)."""
        b = self._bound
        if b is _UNBOUND:
            bound = self._bind_record()
            if bound is None:
                return None
            b = bound
        if not b[2](b[0]):
            return None
        return b[4].fx

    def bound_decision(self) -> tuple[Callable[[], bool], np.ndarray] | None:
        """:meth:`predict_bound` as ``(decide, scores)``: ``decide()`` writes the scores of the
        record in the bound buffers into ``scores`` (a view of the model's) and answers True,
        or answers False having changed nothing (the record needs the general path), with no
        Python frame of its own: for a caller that predicts many records through the bound
        buffers. Valid until the record pack is dropped, which :attr:`on_unbind` reports (its
        holder drops both then); None when :meth:`predict_bound` would not take a record now
        (no buffers bound, a bank whose predictions take another route)."""
        b = self._bound
        if b is _UNBOUND:
            bound = self._bind_record()
            if bound is None:
                return None
            b = bound
        return self._decision_of(b[2], b[0]), b[4].fx

    def _decision_of(self, decide: Any, a: Any) -> Callable[[], bool]:
        """The prediction of the record pack ``a`` through its compiled call ``decide``, as
        one callable (a ``partial``: no Python frame)."""
        return cast(Callable[[], bool], partial(decide, a))

    def _refused(self, x: np.ndarray, y: Any, code: float) -> float:
        """The compiled round refused (x, y) (nothing changed): raise what the checks in
        Python raise, or widen the model for a new class index and learn again."""
        if code == nb.BAD_X:
            _check_values(x)
        self._prepare_y(y)  # raises for a bad target; widens the model for a new class
        if code == nb.NEW_CLASS:
            return self._learn_checked(x, y)
        raise AssertionError(f"the compiled round refused y = {y!r} but the check accepts it")

    @property
    def warmup_left(self) -> int:
        """Inputs the bandwidth warm-up still needs (0 when no bandwidth waits for one, or the
        warm-up inputs are all kept for a group that decides the bandwidths)."""
        return 0 if self._warmup is None else max(self._warmup.size - len(self._warmup), 0)

    @property
    def last_scores(self) -> np.ndarray:
        """The prediction of the last round (before its update); a view: copy to keep it."""
        if self._args is None:
            raise RuntimeError("no round learned yet")
        return self._args.pred

    def __repr__(self) -> str:
        return (
            f"OnlineMKL(kernels={list(self.names)}, loss={self.loss!r}, "
            f"regularizer={self.regularizers!r}, schedule={self.schedule!r}, t={self.t})"
        )

    # --- compiled runs of rounds ------------------------------------------------------------
    def learn_many(
        self, X: Any, Y: Any, block_norms: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Rounds over the rows of X in order, in one compiled loop.

        Returns the prequential losses (n,) and scores (n, K), each before its own update.
        ``block_norms``, if given, is a C-contiguous float64 (n, M) array that receives the
        block norms before each round (``regularization_values`` turns them into
        ``lambda Omega(theta_t)``, the monitor's objective terms).
        """
        X = np.ascontiguousarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D, got shape {X.shape}")
        self._check_norms_out(block_norms, X.shape[0])
        if X.shape[0] == 0:
            return np.zeros(0), np.zeros((0, self.n_outputs))
        self._prepare(X[0])
        if not np.all(np.abs(X) <= MAX_ABS_INPUT):
            raise ValueError(f"X contains NaN, Inf or a value beyond +-{MAX_ABS_INPUT:g}")
        if X.shape[1] != len(self.feature_keys):
            raise ValueError(f"X has {X.shape[1]} columns; the model has {len(self.feature_keys)}")
        return self._rounds(X, self._prepare_targets(Y), block_norms)

    def _check_norms_out(self, block_norms: np.ndarray | None, n: int) -> None:
        if block_norms is None:
            return
        shape = (n, len(self.kernels))
        if (
            block_norms.shape != shape
            or block_norms.dtype != np.float64
            or not block_norms.flags.c_contiguous
            or not block_norms.flags.writeable
        ):
            raise ValueError(f"block_norms must be a writeable C-contiguous float64 {shape} array")

    def learn_many_prepared(
        self, X: np.ndarray, Y: np.ndarray, block_norms: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``learn_many`` for callers that hold finite float64 rows of the model's width and
        targets the loss accepts (the river adapters): skips the per-row checks.

        Falls back to :meth:`learn_many` when the model is not built yet or the width differs,
        so a wrong call is still caught there.
        """
        if (
            self._state is None
            or X.ndim != 2
            or X.shape[1] != len(self.feature_keys)
            or Y.shape != (X.shape[0],)
        ):
            return self.learn_many(X, Y, block_norms)
        task = self.loss.task
        if task == "multiclass" and Y.size and Y.max() >= self.n_outputs:
            return self.learn_many(X, Y, block_norms)  # widens the model for the new class
        self._check_norms_out(block_norms, X.shape[0])
        X = np.ascontiguousarray(X, dtype=np.float64)
        return self._rounds(X, np.ascontiguousarray(Y, dtype=np.float64), block_norms)

    def _warm(self, X: np.ndarray) -> None:
        """Keep warm-up inputs; once there are enough, measure the Gaussian bandwidths."""
        assert self._warmup is not None
        self._warmup.add(X)
        if self._warmup.full and not self.hold_bandwidths:
            kernels = bandwidth.after_warmup(
                self.kernels, self._warmup.rows, self.feature_keys[: self._warmup.rows.shape[1]]
            )
            self._warmup = None
            last = None if self._args is None else self._args.pred.copy()
            self.replace_kernels(kernels)
            if last is not None and self._args is not None:
                self._args.pred[:] = last  # the last round's prediction survives the new bank

    def _rounds(
        self, X: np.ndarray, Y: np.ndarray, block_norms: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The compiled loop over validated rows (see :meth:`learn_many`); a run that crosses
        the end of the bandwidth warm-up is cut there (the bank changes)."""
        if self._warmup is not None:
            cut = self._warmup.size - len(self._warmup)
            if 0 < cut < X.shape[0]:  # (0: full, kept for a group that decides)
                head = None if block_norms is None else block_norms[:cut]
                tail = None if block_norms is None else block_norms[cut:]
                losses, preds = self._rounds(X[:cut], Y[:cut], head)
                more, more_preds = self._rounds(X[cut:], Y[cut:], tail)
                return np.concatenate([losses, more]), np.concatenate([preds, more_preds])
            out = self._compiled_rounds(X, Y, block_norms)
            self._warm(X)
            return out
        period = self._refresh_period()
        if period:
            return self._refreshing_rounds(X, Y, period, block_norms)
        return self._compiled_rounds(X, Y, block_norms)

    def _refreshing_rounds(
        self, X: np.ndarray, Y: np.ndarray, period: int, block_norms: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The compiled loop cut after every round ``t`` that is a multiple of ``period``,
        where the landmarks may be refreshed (what one round at a time does)."""
        n = X.shape[0]
        ends = [*range(period - self.t % period, n, period), n]
        losses, preds = [], []
        start = 0
        for end in ends:
            if end <= start:
                continue
            part = None if block_norms is None else block_norms[start:end]
            loss, pred = self._compiled_rounds(X[start:end], Y[start:end], part)
            losses.append(loss)
            preds.append(pred)
            self._after_round(X[end - 1], float(loss[-1]), self.t)
            start = end
        if len(losses) == 1:
            return losses[0], preds[0]
        return np.concatenate(losses), np.concatenate(preds)

    def _refresh_period(self) -> int:
        """The gcd of the bank's landmark refresh periods (0: none; see
        :meth:`_refresh_landmarks`)."""
        periods = [k.refresh for k in self.kernels if isinstance(k, LandmarkRBF)]
        return math.gcd(*periods) if periods else 0

    def _refresh_landmarks(self, x: np.ndarray, t: int) -> None:
        """After round ``t`` on the input ``x`` (scored with a loss): in every landmark block
        whose ``refresh`` divides ``t`` and whose landmarks a check at ``x`` does not keep
        (``LandmarkRBF.keeps``: ``x`` out of their reach, or any ``x`` under
        ``replace="oldest"``), the landmark ``LandmarkRBF.to_replace`` picks (the smallest
        weight columns, crowded landmarks first; or the oldest) becomes ``x``, its columns
        (weights and their averages) restart at zero, the block's norm is recomputed exactly.
        In place: the layout's projection column and offsets of the block are rewritten in the
        arrays the round arguments are bound to (``Layout.set_landmarks``: no copy, no new
        arguments), unless a save point or another model may hold the layout
        (:attr:`_own_layout`), which then keeps it and this model takes a copy. Not while a
        mixing group holds the bandwidths (its landmarks are the group's)."""
        if self.hold_bandwidths or self._layout is None or self._state is None:
            return
        kernels = None
        for m, kernel in enumerate(self.kernels):
            if not isinstance(kernel, LandmarkRBF) or not kernel.refresh or t % kernel.refresh:
                continue
            if not kernel.landmarks:
                continue
            if kernel.keeps(x, self._keys, self._key_index):
                continue  # near a landmark already: nothing new to keep
            layout, state = self._layout, self._state
            state.settle(layout)
            a, e = int(layout.ex_off[m]), int(layout.ex_off[m + 1])
            w = state.w[:, a:e]
            j = kernel.to_replace(np.einsum("ka,ka->a", w, w), t)
            new = kernel.with_landmark(j, x, self._keys, self._key_index)
            if kernels is None:
                kernels = list(self.kernels)
            kernels[m] = new
            if layout is not self._own_layout:  # (shared: copy on write, the copy is ours)
                layout = self._own_layout = self._layout = layout.with_landmarks_of(
                    m, new, self._keys, self.seed
                )
                self._refresh_args_keeping_prediction()
            else:
                layout.set_landmarks(m, new, self._keys, self.seed, changed=j)
            ftrl = isinstance(self.schedule, schedules_mod.FTRL)
            state.restart_columns(layout, m, np.array([a + j]), stored=ftrl)
        if kernels is not None:
            self.kernels = tuple(kernels)

    def _refresh_args_keeping_prediction(self) -> None:
        """New round arguments for a new layout, the last round's prediction kept."""
        last = None if self._args is None else self._args.pred.copy()
        self._refresh_args()
        assert self._args is not None
        if last is not None:
            self._args.pred[:] = last  # the round's prediction survives the new landmarks

    def _compiled_rounds(
        self, X: np.ndarray, Y: np.ndarray, block_norms: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        self._ensure_room(X.shape[0])
        assert self._args is not None
        losses, preds = self._args.learn_many(X, Y, self.schedule.t, self.t, block_norms)
        self.schedule.t += X.shape[0]
        self.t += X.shape[0]
        return losses, preds

    # --- prediction -------------------------------------------------------------------------
    def decision(self, x: Any, averaged: bool = False) -> float | np.ndarray:
        """Scores at x: a float (binary/regression) or one score per class (multiclass)."""
        x = self._prepare(x)
        assert self._args is not None and self._state is not None
        if averaged and not self.average:
            raise ValueError("averaged=True needs OnlineMKL(average=True)")
        fx = self._args.decision(x, self._state.w_avg if averaged else None)
        return fx.copy() if self.loss.multiclass else float(fx[0])

    def decision_many(self, X: Any) -> np.ndarray:
        """Scores for every row of X, shape (n, K), in one compiled loop."""
        X = np.ascontiguousarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D, got shape {X.shape}")
        if X.shape[0] == 0:
            return np.zeros((0, self.n_outputs))
        self._prepare(X[0])
        if X.shape[1] != len(self.feature_keys) or not np.all(np.abs(X) <= MAX_ABS_INPUT):
            raise ValueError(
                f"X must be finite within +-{MAX_ABS_INPUT:g}, with {len(self.feature_keys)} "
                "columns"
            )
        assert self._args is not None
        return self._args.decision_many(X)

    def losses_many(self, X: Any, Y: Any) -> np.ndarray:
        """Loss of the current model on every (x, y), without learning (one compiled loop).
        A class index the model has not met yet scores 0 (as after learning widens the model
        for it); the model's outputs are not widened."""
        targets = self._targets(Y)
        scores = self.decision_many(X)
        if len(targets) != scores.shape[0]:
            raise ValueError(f"{scores.shape[0]} rows but {len(Y)} targets")
        scores = _with_unseen_classes(scores, targets, self.loss.task)
        out = np.empty(scores.shape[0])
        scratch = np.empty(scores.shape[1])
        nb.loss_values(self.loss.code, self.loss.param, scores, targets, scratch, out)
        return out

    def block_decisions(self, x: Any) -> np.ndarray:
        """Per-block scores f_m(x), shape (M, K)."""
        self.decision(x)
        assert self._args is not None
        return self._args.block_scores().copy()

    def decision_prepared(self, x: np.ndarray) -> np.ndarray:
        """Scores (K,) for a finite float64 vector of the model's width; a view, copy to keep."""
        if self._state is None or x.shape[0] != len(self.feature_keys):
            return np.atleast_1d(self.decision(x))
        assert self._args is not None
        return self._args.decision(x)

    # --- the model ---------------------------------------------------------------------------

    @property
    def names(self) -> list[str]:
        cached = getattr(self, "_names", None)  # (absent from states pickled before it)
        if cached is None or cached[0] is not self.kernels:  # built once per bank
            cached = self._names = (self.kernels, [k.name for k in self.kernels])
        return list(cached[1])

    @property
    def kernel_bandwidths(self) -> dict[str, float]:
        """The bandwidths fitted to the data, by kernel name: gamma of every ``MedianRBF`` that
        has one (from its first input on). Model state: it changes at the warm-up and when the
        inputs grow, while the kernel's name (its configuration) stays."""
        return {k.name: k.fit.gamma for k in self.kernels if isinstance(k, MedianRBF) and k.fit}

    @property
    def layout(self) -> Layout | None:
        """The bank's layout on the model's inputs (None before the first input)."""
        return self._layout

    @property
    def state(self) -> BlockState | None:
        """The learned arrays (None before the first input). Read them between rounds, never
        keep them across one: a round writes them in place, growth reallocates them. Settled:
        the sparse round's lazy factors are folded in first (``BlockState.settle``)."""
        self._settle()
        return self._state

    def _settle(self) -> None:
        """Fold the sparse round's lazy factors into the arrays (O(1) when already settled)."""
        if self._state is not None and self._layout is not None:
            self._state.settle(self._layout)

    def adopt(self, layout: Layout, state: BlockState) -> None:
        """Learn on from these arrays (a group's merged model, a restored state): they must be
        made for the model's kernels, inputs (:attr:`feature_keys`) and outputs. On the model's
        own layout, with arrays of the same shapes, their values are copied into the model's
        arrays, which the round arguments stay bound to (:meth:`RoundArgs.refill`: the same
        numbers as new arguments, without building them and their compiled calls again)."""
        args = self._args
        if (
            args is not None
            and layout is self._layout
            and state is not self._state
            and args.refill(layout, state, self.loss, self.schedule)
        ):
            return
        self._layout, self._state = layout, state
        self._refresh_args()

    def cost(self, new_inputs: int = 0, nnz: int | None = None) -> tuple[int, int]:
        """A cheap, honest estimate of the work, in array entries touched: (one round now on a
        record of ``nnz`` non-zero inputs (None: a dense record), laying out ``new_inputs``
        more inputs). A round sweeps the columns of the explicit blocks it touches once per
        pass (features, the scores of the iterate and of each average, the step, each
        average's update) over the score rows, and each kernelized block's support
        (``n_support`` x inputs); the growth is :meth:`Layout.growth_entries` over the rows
        the state keeps per column (the iterate, each average). Before the first input: (0,
        0). The dense round touches every column: its cost scales with the model's inputs; a
        sparse record that takes the sparse round (a bank with wide blocks, a record that
        touches under a quarter of their columns: ``update.wide_columns``) touches its own
        columns and every projection block's, so its cost scales with its non-zeros."""
        layout, state = self._layout, self._state
        if layout is None or state is None:
            return 0, 0
        E = int(state.avg_w.shape[0])
        rows = self.n_outputs * (1 + E)
        columns = layout.width
        if nnz is not None and self._args is not None and self._args.wide:
            touched = wide_columns(layout, int(nnz))
            columns = columns if touched is None else touched
        # the features once; per row, the scores and the update of the iterate and each average
        explicit = columns * (1 + 2 * rows)
        kernelized = int(state.n_support) * layout.n_inputs * int(layout.im_blocks.size)
        return explicit + kernelized, layout.growth_entries(self.kernels, new_inputs, rows)

    @property
    def warmup_rows(self) -> np.ndarray:
        """The bandwidth warm-up's inputs kept so far (rows over the inputs they were kept
        with; none once every bandwidth is measured)."""
        if self._warmup is None:
            return np.zeros((0, len(self.feature_keys)))
        return self._warmup.rows

    def keep_warmup(self, rows: np.ndarray | None) -> None:
        """Keep ``rows`` as the bandwidth warm-up's inputs (None: no warm-up pending)."""
        self._warmup = (
            None if rows is None else bandwidth.Reservoir(rows, bandwidth.warmup(self.kernels))
        )
        self._unbind()  # (whether a round is followed by the warm-up changed: bound_round's)

    @property
    def built(self) -> bool:
        """Whether the model's arrays exist (after the first input or ``declare_features``)."""
        return self._state is not None

    @property
    def weight_power(self) -> float:
        for reg in self.regularizers:
            if not isinstance(reg, regs_mod.Ball):
                return float(reg.weight_power)
        return 1.0

    @property
    def block_norms(self) -> np.ndarray:
        if self._state is None:
            return np.zeros(len(self.kernels))
        return self._state.norms.copy()

    @property
    def kernel_weights(self) -> np.ndarray:
        return self.kernel_weights_of(self.block_norms)

    def kernel_weights_of(self, block_norms: np.ndarray) -> np.ndarray:
        """β for the block norms ``block_norms`` (M,) (e.g. a row ``learn_many`` recorded):
        what :attr:`kernel_weights` was when the model had those norms; of each row of a
        (k, M) array."""
        return regs_mod.kernel_weights(self.regularizers, block_norms)

    @property
    def n_support(self) -> int:
        return 0 if self._state is None else self._state.n_support

    @property
    def active_kernels(self) -> list[str]:
        return [n for n, b in zip(self.names, self.block_norms, strict=True) if b > 0]

    def l1_norm(self) -> float:
        """||theta||_1 over the explicit blocks."""
        if self._state is None or self._layout is None:
            return 0.0
        self._settle()
        total = 0.0
        for m in self._layout.ex_blocks:
            a, e = self._layout.ex_off[m], self._layout.ex_off[m + 1]
            total += self._state.scale[m] * float(np.abs(self._state.w[:, a:e]).sum())
        return total

    @property
    def norm_only(self) -> bool:
        """Whether every regularizer is a function of the block norms alone (then
        :meth:`regularization_values` applies)."""
        return all(r.norm_only for r in self.regularizers)

    def regularization_value(self) -> float:
        """lambda * Omega(theta) at the current theta."""
        b = self.block_norms
        if self.norm_only:  # the same numbers as regularization_values on a run's rows
            return float(self.regularization_values(b[None, :])[0])
        l1 = self.l1_norm()
        return float(sum(r.value(b, l1) for r in self.regularizers))

    def regularization_values(self, block_norms: np.ndarray) -> np.ndarray:
        """``lambda * Omega`` for each row of block norms (n, M), e.g. those ``learn_many``
        recorded before each round. Row i's value does not depend on the other rows. Only for
        regularizers of the block norms alone (:attr:`norm_only`)."""
        if not self.norm_only:
            raise TypeError(
                "regularization_values needs regularizers of the block norms alone; "
                f"{[r for r in self.regularizers if not r.norm_only]} also need ||theta||_1"
            )
        B = np.asarray(block_norms, dtype=np.float64)
        if B.ndim != 2 or B.shape[1] != len(self.kernels):
            raise ValueError(f"block_norms must be (n, {len(self.kernels)}), got {B.shape}")
        regs = self.regularizers
        total = regs[0].values_norms(B, self.names)
        for r in regs[1:]:
            total = total + r.values_norms(B, self.names)
        return total

    def objective_terms(self, x: Any, y: Any) -> tuple[float, float]:
        """(loss, lambda * Omega) at the current theta, for regret accounting."""
        target = self._target(y)
        scores = np.atleast_1d(self.decision(x))
        scores = _with_unseen_classes(scores[None, :], np.array([target]), self.loss.task)[0]
        return self.loss.value(scores, target), self.regularization_value()

    @property
    def gradient_sq_sums(self) -> np.ndarray:
        """AdaGrad's and FTRL's accumulators: per block the sum of squared gradient norms
        ``sum_t ||g_m,t||^2`` since the last restart, then the bias's (zeros otherwise)."""
        if self._state is None:
            return np.zeros(len(self.kernels) + 1)
        return self._state.step_acc.copy()

    @property
    def block_steps(self) -> np.ndarray:
        """The step each block took in the last round (then the bias step): ``eta_t`` for every
        block with a global schedule, AdaGrad's per-block steps otherwise (zeros before)."""
        if self._args is None:
            return np.zeros(len(self.kernels) + 1)
        return self._args.etas.copy()

    # --- schedule restarts ------------------------------------------------------------------
    def restart_schedule(self) -> None:
        """Start the schedule again (a detected drift): the next round is t = 1. AdaGrad's
        accumulators are cleared too (large steps again); FTRL keeps its steps, re-centres its
        accumulated gradients on the current theta (theta does not move) and restarts the
        regularizer's weight t (its kernelized blocks, under AdaGrad's step, keep their support
        sets)."""
        self.schedule.restart()
        if self._state is None:
            return
        self._settle()
        S = self._state
        S.avg_count[:] = 0.0  # the averages restart from the next iterate ...
        S.avg_loss[:] = 0.0  # ... and the last iterate predicts until one does better
        if not self.schedule.adaptive:
            return
        if isinstance(self.schedule, schedules_mod.FTRL):
            assert self._layout is not None
            consts = self.schedule.constants
            etas = consts[0] / np.sqrt(consts[1] + S.step_acc[:-1])
            for m in self._layout.ex_blocks:
                a, e = self._layout.ex_off[m], self._layout.ex_off[m + 1]
                S.w[:, a:e] *= S.scale[m] / etas[m]  # u_m = theta_m / eta_m
                S.scale[m] = etas[m] if S.scale[m] != 0.0 else 0.0
                S.stored_norms[m] = S.norms[m] / etas[m]
        else:
            S.step_acc[:] = 0.0

    # --- save points ------------------------------------------------------------------------
    def save_point(self) -> tuple[Any, ...]:
        """Everything learning changes, copied (a few µs for a bank of explicit blocks): a run
        learned after it can be taken back by :meth:`restore_point`."""
        state = None if self._state is None else self._state.copy()
        self._own_layout = None  # (the point holds the layout: a refresh copies it first)
        warmup = (
            None
            if self._warmup is None
            else bandwidth.Reservoir(self._warmup.rows, self._warmup.size)
        )
        return (
            self.kernels, list(self.feature_keys), self.n_outputs, self._layout, state,
            self.schedule.t, self.t, warmup,
        )  # fmt: skip

    def restore_point(self, point: tuple[Any, ...]) -> None:
        """Back to :meth:`save_point`'s model, in place (the same object, bit for bit)."""
        kernels, keys, n_outputs, layout, state, schedule_t, t, warmup = point
        self.kernels, self.feature_keys, self.n_outputs = kernels, list(keys), n_outputs
        self._warmup = None if warmup is None else bandwidth.Reservoir(warmup.rows, warmup.size)
        self._layout = layout
        self._state = None if state is None else state.copy()
        self.schedule.t, self.t = schedule_t, t
        if self._state is not None:
            self._refresh_args()
        else:
            self._args = None
            self._unbind()

    # --- runtime kernel changes -------------------------------------------------------------
    def add_kernel(self, kernel: Kernel) -> None:
        """Add a block (starting at theta_m = 0); every other block keeps its state."""
        kernel = kernels_mod.from_spec(kernel)
        if kernel.name in self.names:
            raise ValueError(f"a kernel named {kernel.name!r} is already in the bank")
        self.replace_kernels((*self.kernels, kernel))

    def remove_kernel(self, name: str) -> None:
        """Drop a block; every other block keeps its state."""
        if name not in self.names:
            raise KeyError(f"no kernel named {name!r}; have {self.names}")
        if len(self.kernels) == 1:
            raise ValueError("cannot remove the last kernel")
        self.replace_kernels(tuple(k for k in self.kernels if k.name != name))

    def replace_kernels(self, kernels: tuple[Kernel, ...]) -> None:
        """Learn on with the bank ``kernels``: blocks whose kernel (name and parameters) stays
        keep their state, the others start at zero (an added kernel, a refitted bandwidth)."""
        check_compatible(
            kernels, self.regularizers, self.schedule, self.average, bool(self.averages),
            self.radius,
        )  # fmt: skip
        if self._warmup is None and bandwidth.has_pending(kernels):
            # an added MedianRBF: its own warm-up inputs
            self._warmup = bandwidth.Reservoir(size=bandwidth.warmup(kernels))
        if self._state is None:
            self.kernels = kernels
        else:
            self._rebuild(kernels, self.n_outputs)

    # --- persistence (no pickle) ------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        return {
            "kernels": [k.to_spec() for k in self.kernels],
            "loss": self.loss.to_spec(),
            "regularizer": [r.to_spec() for r in self.regularizers],
            "schedule": self.schedule.to_spec(),
            "radius": self.radius or None,
            "budget": self.budget,
            "budget_policy": self.budget_policy,
            "seed": self.seed,
            "fit_intercept": self.fit_intercept,
            "intercept_lr": self.intercept_lr,
            "average": self.average,
            "averages": list(self.averages),
            "average_discount": self.average_discount,
            "average_every": self.average_every,
        }

    def to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """(JSON-able meta, named arrays): everything needed to resume bit-for-bit."""
        meta = {
            "format": FORMAT,
            "version": STATE_VERSION,
            "config": self.config(),
            "bandwidths": bandwidth.saved(self.kernels),
            "feature_keys": list(self.feature_keys),
            "capacity": len(self.feature_keys) if self._layout is None else self._layout.capacity,
            "n_outputs": self.n_outputs,
            "t": self.t,
            "schedule_t": self.schedule.t,
            "draws": self.draws,
        }
        arrays = self._state.to_arrays(self._layout) if self._state is not None else {}
        if self._warmup is not None and len(self._warmup):
            arrays["warmup_inputs"] = self._warmup.rows.copy()
        return meta, arrays

    @classmethod
    def from_state(cls, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> Any:
        version = statefile.check_header(meta, FORMAT, STATE_VERSION, "OnlineMKL")
        config, fitted = dict(meta["config"]), dict(meta.get("bandwidths", {}))
        if version < 4:
            config["kernels"], fitted = _templates_of(config["kernels"])
        model = cls(**config)
        model.kernels = bandwidth.restored(model.kernels, fitted)
        model.schedule.t = int(meta["schedule_t"])
        model.t = int(meta["t"])
        model.n_outputs = int(meta["n_outputs"])
        model.feature_keys = list(meta["feature_keys"])
        model.draws = meta.get("draws", NUMPY_DRAWS)  # (written since version 6)
        if model.draws not in (NUMPY_DRAWS, DRAWS) or isinstance(model.draws, bool):
            raise statefile.StateError(f"OnlineMKL state: unknown draws {meta.get('draws')!r}")
        arrays = dict(arrays)
        warm = arrays.pop("warmup_inputs", None)
        if bandwidth.has_pending(model.kernels):
            model.keep_warmup(np.zeros((0, 0)) if warm is None else warm)
        else:
            model.keep_warmup(None)
        if arrays:
            keys = model.feature_keys
            index = {k: i for i, k in enumerate(keys)}
            room = int(meta.get("capacity", len(keys)))  # the room it had: the same sums
            layout = build_layout(
                model.kernels, len(keys), model.seed, index, keys, room, model.draws
            )
            state = BlockState.from_arrays(arrays, budgets.initial_capacity(model.budget))
            state.spread(layout)
            state.sync_gram(layout, budgets.keeps_gram(model.budget, model.budget_policy))
            if version < 5:
                _rebase_additive(layout, state)
            model.adopt(layout, state)
        return model

    def take_state(self, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> bool:
        """Take a saved state (:meth:`to_state`) in place, on the model's own layout: the model
        then holds what :meth:`from_state` would build, bit for bit, without building a model
        or a layout (a group member taking its group's merged model every round). Only when
        the state has the model's configuration, fitted bandwidths (none pending, no warm-up
        inputs), inputs in the same order, outputs, draws and room (its ``capacity``), at the
        current state version; otherwise the model is left untouched and False is returned
        (use :meth:`from_state`)."""
        layout = self._layout
        if (
            layout is None
            or meta.get("format") != FORMAT
            or meta.get("version") != STATE_VERSION
            or "warmup_inputs" in arrays
            or not arrays
            or bandwidth.has_pending(self.kernels)
            or self.warmup_rows.shape[0]
            or meta.get("capacity") != layout.capacity
            or list(meta.get("feature_keys") or []) != self.feature_keys
            or meta.get("n_outputs") != self.n_outputs
            or meta.get("draws") != self.draws
            or not statefile.same_meta(meta.get("bandwidths"), bandwidth.saved(self.kernels))
            or not statefile.same_meta(meta.get("config"), self.config())
        ):
            return False
        capacity = budgets.initial_capacity(self.budget)
        gram = budgets.keeps_gram(self.budget, self.budget_policy)
        self.schedule.t = int(meta["schedule_t"])
        self.t = int(meta["t"])
        args = self._args
        if args is not None and self._state is not None:
            # the saved arrays read where they are (no copy of each first): their values are
            # copied into the arrays the round arguments are bound to, or the view is dropped
            view = BlockState.from_arrays(arrays, capacity, copy=False)
            view.spread(layout)
            view.sync_gram(layout, gram)
            if args.refill(layout, view, self.loss, self.schedule):
                self.keep_warmup(None)
                return True
        state = BlockState.from_arrays(dict(arrays), capacity)
        state.spread(layout)
        state.sync_gram(layout, gram)
        self.adopt(layout, state)
        self.keep_warmup(None)
        return True

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the model to ``path`` (:mod:`streammkl.statefile`), atomically; the path."""
        return statefile.write(path, *self.to_state())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Any:
        """The model saved at ``path``; ``StateError`` for a corrupt, foreign or newer file."""
        return cls.from_state(*statefile.read(path, "OnlineMKL"))

    def __getstate__(self) -> dict[str, Any]:
        # the argument pack holds compiled entry points and a numba pack (not picklable):
        # rebuilt on load
        state = self.__dict__.copy()
        state["_args"] = state["_values_args"] = None
        state.pop("_sparse_x", None)  # (zeros: made again when needed)
        state["_values"] = (None, None)
        state["_bound"] = _UNBOUND
        state.pop("_record", None)  # (another owner's buffers: bound again by their owner)
        state.pop("on_unbind", None)  # (its holder's: set again by it)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        if "draws" not in state:  # pickled before state version 6: numpy's draws, as they were
            state["draws"] = NUMPY_DRAWS
            if state.get("_layout") is not None:
                state["_layout"].draws = NUMPY_DRAWS
        state.setdefault("_refresh_every", 0)  # (pickled before landmark refreshes)
        state.setdefault("_own_layout", None)  # (before refreshes in place: copied at the first)
        state.setdefault("_values_args", None)  # pickled before the one-call route
        state.setdefault("_values", (None, None))
        state["_bound"] = _UNBOUND
        state["_record"] = None
        state["on_unbind"] = None
        self.__dict__.update(state)
        if self._state is not None:
            self._refresh_args()

    def digest(self) -> str:
        """sha256 of the canonical state (config, counters and every array's bytes)."""
        return state_digest(*self.to_state())


def _with_unseen_classes(scores: np.ndarray, targets: np.ndarray, task: str) -> np.ndarray:
    """Rows of scores (n, K) with a zero column for every class index among ``targets`` beyond
    K: what the model scores a class it has not met (its outputs start at zero). The compiled
    loss indexes the scores by the target, so a class beyond them must have its column."""
    if task != "multiclass" or not targets.size:
        return scores
    top = int(targets.max()) + 1
    if top <= scores.shape[1]:
        return scores
    return np.hstack([scores, np.zeros((scores.shape[0], top - scores.shape[1]))])


def _templates_of(
    specs: Sequence[dict[str, Any]],
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """A version-3 bank's specs as templates and fitted bandwidths: an ``RBF`` with
    ``median_from`` was a ``MedianRBF`` that had fitted its bandwidth (and was named after it;
    its random features were drawn under that name, which the bandwidth keeps)."""
    out: list[dict[str, Any]] = []
    fitted: dict[str, dict[str, Any]] = {}
    for spec in specs:
        origin = spec.get("median_from")
        if spec.get("type") != "RBF" or origin is None:
            out.append(spec)
            continue
        template = kernels_mod.MedianRBF(
            float(origin["scale"]), spec.get("n_components"), spec.get("features")
        )
        old = kernels_mod.RBF(float(spec["gamma"]), spec.get("n_components"), spec.get("features"))
        out.append(template.to_spec())
        fitted[template.name] = {
            "gamma": float(spec["gamma"]), "inputs": int(origin["inputs"]),
            "final": bool(origin["final"]),
        }  # fmt: skip
        if not template.implicit:
            fitted[template.name]["drawn_as"] = old.name
    return out, fitted


def _rebase_additive(layout: Layout, state: BlockState) -> None:
    """A state saved before the additive Gaussian map was anchored at 0 (version < 5), made to
    predict what it did: its features were ``phi = c cos(w x + b)``, now ``phi - c cos(b)``, so
    each score row loses ``sum_j theta_j c cos(b_j)`` over the additive blocks, which moves
    into the row's bias (and each average's into its own bias). The block's weights, norms and
    adaptive state stay: the same weights over features shifted by a constant."""
    src = layout.phi_src
    for m in layout.ex_blocks:
        if layout.ex_kind[m] != nb.MAP_ADDITIVE:
            continue
        a, used = int(layout.ex_off[m]), int(layout.ex_used[m])
        if not used:
            continue
        phi0 = np.sqrt(2.0 / used) * src[3, a : a + used]
        state.bias += state.scale[m] * (state.w[:, a : a + used] @ phi0)
        if state.avg_w.shape[0]:
            state.avg_bias += state.avg_w[:, :, a : a + used] @ phi0


def _check_values(x: np.ndarray) -> None:
    """Raise ``ValueError`` naming the first value of ``x`` that is not finite or is beyond
    ``+-MAX_ABS_INPUT``."""
    ok = np.abs(x) <= MAX_ABS_INPUT  # False for NaN too
    if not ok.all():
        bad = int(np.flatnonzero(~ok)[0])
        what = "is not finite" if not math.isfinite(x[bad]) else f"is beyond +-{MAX_ABS_INPUT:g}"
        raise ValueError(f"x[{bad}] = {x[bad]} {what}")
