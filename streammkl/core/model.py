"""``OnlineMKL``: the array-level online proximal MKL learner (Alg. 1 / Alg. 3 of Martins et al.).

Each ``learn(x, y)`` is one round: score every block, take a subgradient of the loss, a gradient
step with ``eta_t``, the J prox steps of the regularizer(s), the optional projection onto the
ball of radius gamma, with kernel weights ``beta_m ∝ ||theta_m||`` (``∝ ||theta_m||^(2-q)``
for GroupLq). ``learn_predict(x, y)`` is the same round returning the prediction it made before
its update: one compiled call, the way to run a prequential (test-then-train) evaluation.

Compiled runs of rounds (``learn_many``) live in :mod:`streammkl.core.model_runs`; predictions
and read-only views in :mod:`streammkl.core.model_views`; restarts, save points, bank changes
and persistence in :mod:`streammkl.core.model_state`; what the constructor refuses in
:mod:`streammkl.core.model_checks`.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from streammkl.core import _numba as nb
from streammkl.core import bandwidth
from streammkl.core import budget as budgets
from streammkl.core import kernels as kernels_mod
from streammkl.core import losses as losses_mod
from streammkl.core import regularizers as regs_mod
from streammkl.core import schedules as schedules_mod
from streammkl.core.kernels import Kernel
from streammkl.core.losses import Loss
from streammkl.core.model_checks import check_compatible, resolve_radius
from streammkl.core.model_runs import ModelRuns
from streammkl.core.model_state import STATE_VERSION, ModelState
from streammkl.core.model_views import ModelViews
from streammkl.core.regularizers import Regularizer
from streammkl.core.schedules import Schedule
from streammkl.core.state import BlockState, Layout, build_layout, transplant
from streammkl.core.update import RoundArgs, step_arrays

__all__ = ["STATE_VERSION", "OnlineMKL"]

_F64 = np.dtype(np.float64)
#: Target types the compiled round takes as they are (it checks their values itself).
_NUMBERS = frozenset({float, int, np.float64, np.int64})


class OnlineMKL(ModelRuns, ModelViews, ModelState):
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
        Horizons of exponential averages of the iterates (explicit blocks), e.g.
        ``(100, 1000, 10000)``: predictions (``decision``, the scores ``learn_many`` returns)
        then come from whichever of the last iterate and these averages has the smallest
        discounted prequential loss so far (``average_discount`` per round); learning is
        unchanged (one update per example, the gradient at the last iterate). Averages damp
        the noise of the iterates on noisy streams; the last iterate wins after a change.
    average_discount
        The discount of those losses (0.995: about the last two hundred examples count).
    average_every
        Update the averages and those losses every this many rounds (1: every round; 4 cuts
        their cost to a quarter, measured 0.2-0.3 points of accuracy lower on the development
        streams; the leader predicts every round).
    """

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
        averaged = self.average or bool(self.averages)
        check_compatible(self.kernels, self.regularizers, self.schedule, averaged)
        self.feature_keys: list[str] = []
        self.n_outputs = 2 if self.loss.multiclass else 1
        self.t = 0  # rounds learned
        self._names: tuple[tuple[Kernel, ...], list[str]] | None = None  # (bank, its names)
        self._layout: Layout | None = None
        self._state: BlockState | None = None
        self._args: RoundArgs | None = None
        self._kernelized = False
        # MedianRBF kernels: the first inputs, until their bandwidths are measured
        self._warmup: bandwidth.Reservoir | None = (
            bandwidth.Reservoir() if bandwidth.has_pending(self.kernels) else None
        )
        #: Bandwidths decided elsewhere (a mixing group's merge, ``core.mixing_bandwidth``):
        #: the model keeps its warm-up inputs but never changes a bandwidth by itself. Not
        #: saved with the state (a member sets it on every model it adopts).
        self.hold_bandwidths = False

    # --- lazy state -------------------------------------------------------------------------
    def declare_features(self, keys: Iterable[str]) -> None:
        """Name new inputs (appended as new columns); kernels may select them by name."""
        new = [str(k) for k in keys if str(k) not in self._key_set()]
        if new:
            self._rebuild(self.kernels, self.feature_keys + new, self.n_outputs)

    def _key_set(self) -> set[str]:
        return set(self.feature_keys)

    def _rebuild(self, kernels: Sequence[Kernel], keys: list[str], n_outputs: int) -> None:
        kernels = bandwidth.for_inputs(kernels, len(keys), rescale=not self.hold_bandwidths)
        index = {k: i for i, k in enumerate(keys)}
        layout = build_layout(kernels, len(keys), self.seed, index, keys)
        names = [k.name for k in kernels]
        if self._state is None or self._layout is None:
            cap = budgets.initial_capacity(self.budget)
            state = BlockState.empty(layout, n_outputs, cap, self.average, len(self.averages))
        else:
            self._state.grow_outputs(n_outputs)
            state = transplant(self._layout, self._state, self.names, layout, names, kernels)
        state.sync_gram(layout, budgets.keeps_gram(self.budget, self.budget_policy))
        self.kernels = tuple(kernels)
        self.feature_keys = list(keys)
        self.n_outputs = n_outputs
        self._layout, self._state = layout, state
        self._refresh_args()

    def _refresh_args(self) -> None:
        assert self._layout is not None and self._state is not None
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
        if not np.all(np.isfinite(x)):
            bad = int(np.flatnonzero(~np.isfinite(x))[0])
            raise ValueError(f"x[{bad}] = {x[bad]} is not finite")
        d = len(self.feature_keys)
        if x.shape[0] > d or self._state is None:
            keys = self.feature_keys + [str(j) for j in range(d, x.shape[0])]
            self._rebuild(self.kernels, keys, self.n_outputs)
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
        if not math.isfinite(y):
            raise ValueError(f"regression target must be finite, got {y!r}")
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
                ok = bool(np.all(np.isfinite(y)))
            if ok:
                return y
        return np.array([self._target(v) for v in Y], dtype=np.float64)

    def _widen_for(self, targets: np.ndarray) -> None:
        """Give the model outputs for every class index among checked ``targets``."""
        if self.loss.task == "multiclass" and targets.size:
            top = int(targets.max()) + 1
            if top > self.n_outputs:
                self._rebuild(self.kernels, self.feature_keys, top)

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
        if self._warmup is not None:
            self._warm(x[None, :])
        return loss

    def _refused(self, x: np.ndarray, y: Any, code: float) -> float:
        """The compiled round refused (x, y) (nothing changed): raise what the checks in
        Python raise, or widen the model for a new class index and learn again."""
        if code == nb.BAD_X:
            bad = int(np.flatnonzero(~np.isfinite(x))[0])
            raise ValueError(f"x[{bad}] = {x[bad]} is not finite")
        self._prepare_y(y)  # raises for a bad target; widens the model for a new class
        if code == nb.NEW_CLASS:
            return self._learn_checked(x, y)
        raise AssertionError(f"the compiled round refused y = {y!r} but the check accepts it")

    @property
    def warmup_left(self) -> int:
        """Inputs the bandwidth warm-up still needs (0 when no bandwidth waits for one, or the
        warm-up inputs are all kept for a group that decides the bandwidths)."""
        return 0 if self._warmup is None else max(bandwidth.WARMUP - len(self._warmup), 0)

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
