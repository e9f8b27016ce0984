"""What an ``OnlineMKL`` does to itself besides learning (a mixin of
:class:`streammkl.core.model.OnlineMKL`): schedule restarts, save points, kernels added or
removed at run time, and its state as JSON + named arrays (no pickle)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from streammkl import statefile
from streammkl.core import bandwidth
from streammkl.core import budget as budgets
from streammkl.core import kernels as kernels_mod
from streammkl.core import schedules as schedules_mod
from streammkl.core.kernels import Kernel
from streammkl.core.losses import Loss
from streammkl.core.model_checks import check_compatible
from streammkl.core.regularizers import Regularizer
from streammkl.core.schedules import Schedule
from streammkl.core.state import BlockState, Layout, build_layout, state_digest
from streammkl.core.update import RoundArgs

FORMAT = "streammkl.OnlineMKL"
STATE_VERSION = 4  # 2: the adaptive schedules' arrays; 3: BlockState.gram (projection budget
# policy); 4: a MedianRBF keeps its configured name and spec, its fitted bandwidth is saved
# apart ("bandwidths"). Older states still load (the missing arrays: zeros, or built by
# sync_gram; a version-3 fitted MedianRBF, saved as an RBF with "median_from": its template
# and its bandwidth, with the features it was learned over).


class ModelState:
    """Restarts, save points, bank changes and persistence (attributes: OnlineMKL's)."""

    kernels: tuple[Kernel, ...]
    loss: Loss
    regularizers: tuple[Regularizer, ...]
    schedule: Schedule
    radius: float
    budget: int | None
    budget_policy: str
    seed: int
    fit_intercept: bool
    intercept_lr: float
    average: bool
    averages: tuple[float, ...]
    average_discount: float
    average_every: int
    feature_keys: list[str]
    n_outputs: int
    t: int
    _layout: Layout | None
    _state: BlockState | None
    _args: RoundArgs | None
    _warmup: bandwidth.Reservoir | None

    if TYPE_CHECKING:  # provided by OnlineMKL or another of its mixins

        @property
        def names(self) -> list[str]:
            raise NotImplementedError

        def _rebuild(self, kernels: Sequence[Kernel], keys: list[str], n_outputs: int) -> None:
            raise NotImplementedError

        def _refresh_args(self) -> None:
            raise NotImplementedError

    # --- schedule restarts ------------------------------------------------------------------
    def restart_schedule(self) -> None:
        """Start the schedule again (a detected drift): the next round is t = 1. AdaGrad's
        accumulators are cleared too (large steps again); FTRL keeps its steps, re-centres its
        accumulated gradients on the current theta (theta does not move) and restarts the
        regularizer's weight t."""
        self.schedule.restart()
        if self._state is None:
            return
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
        warmup = None if self._warmup is None else bandwidth.Reservoir(self._warmup.rows)
        return (
            self.kernels, list(self.feature_keys), self.n_outputs, self._layout, state,
            self.schedule.t, self.t, warmup,
        )  # fmt: skip

    def restore_point(self, point: tuple[Any, ...]) -> None:
        """Back to :meth:`save_point`'s model, in place (the same object, bit for bit)."""
        kernels, keys, n_outputs, layout, state, schedule_t, t, warmup = point
        self.kernels, self.feature_keys, self.n_outputs = kernels, list(keys), n_outputs
        self._warmup = None if warmup is None else bandwidth.Reservoir(warmup.rows)
        self._layout = layout
        self._state = None if state is None else state.copy()
        self.schedule.t, self.t = schedule_t, t
        if self._state is not None:
            self._refresh_args()
        else:
            self._args = None

    # --- runtime kernel changes -------------------------------------------------------------
    def add_kernel(self, kernel: Kernel) -> None:
        """Add a block (starting at theta_m = 0); every other block keeps its state."""
        kernel = kernels_mod.from_spec(kernel)
        if kernel.name in self.names:
            raise ValueError(f"a kernel named {kernel.name!r} is already in the bank")
        self._swap_kernels((*self.kernels, kernel))

    def remove_kernel(self, name: str) -> None:
        """Drop a block; every other block keeps its state."""
        if name not in self.names:
            raise KeyError(f"no kernel named {name!r}; have {self.names}")
        if len(self.kernels) == 1:
            raise ValueError("cannot remove the last kernel")
        self._swap_kernels(tuple(k for k in self.kernels if k.name != name))

    def _swap_kernels(self, kernels: tuple[Kernel, ...]) -> None:
        check_compatible(
            kernels, self.regularizers, self.schedule, self.average or bool(self.averages)
        )
        if self._warmup is None and bandwidth.has_pending(kernels):
            self._warmup = bandwidth.Reservoir()  # an added MedianRBF: its own warm-up inputs
        if self._state is None:
            self.kernels = kernels
        else:
            self._rebuild(kernels, self.feature_keys, self.n_outputs)

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
            "n_outputs": self.n_outputs,
            "t": self.t,
            "schedule_t": self.schedule.t,
        }
        arrays = self._state.to_arrays() if self._state is not None else {}
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
        arrays = dict(arrays)
        warm = arrays.pop("warmup_inputs", None)
        pending = bandwidth.has_pending(model.kernels)
        model._warmup = bandwidth.Reservoir(warm) if pending else None
        if arrays:
            index = {k: i for i, k in enumerate(model.feature_keys)}
            keys = model.feature_keys
            model._layout = build_layout(model.kernels, len(keys), model.seed, index, keys)
            cap = budgets.initial_capacity(model.budget)
            model._state = BlockState.from_arrays(arrays, cap)
            gram = budgets.keeps_gram(model.budget, model.budget_policy)
            model._state.sync_gram(model._layout, gram)
            model._refresh_args()
        return model

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
        state["_args"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self._state is not None:
            self._refresh_args()

    def digest(self) -> str:
        """sha256 of the canonical state (config, counters and every array's bytes)."""
        return state_digest(*self.to_state())


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
