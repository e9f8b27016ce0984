"""What MKLClassifier and MKLRegressor share (:class:`MKLLearner`): the core model made from
the constructor's parameters, the kernel weights, run-time kernel changes, and persistence
without pickle (the one state file of :mod:`streammkl.statefile`: versioned, checksummed)."""

from __future__ import annotations

import copy
import inspect
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from river.base import Base as RiverBase

from streammkl import statefile
from streammkl.core import OnlineMKL
from streammkl.core import kernels as kernels_mod
from streammkl.core import regularizers as regs_mod
from streammkl.core import schedules as schedules_mod
from streammkl.river import defaults
from streammkl.river._features import FeatureIndex
from streammkl.river._labels import Classes
from streammkl.river._memory import memory_usage
from streammkl.river._scaling import InputScaler, TargetScale
from streammkl.river.pooling import SCALER_PREFIX
from streammkl.river.rounds import Rounds


def _init_names(cls: type) -> tuple[str, ...] | None:
    """The keyword parameters of ``cls.__init__`` (what river's ``_get_params`` reads back as
    attributes), or None if it takes ``*args``/``**kwargs``. Read once per class: the signature
    cost a mixing member 0.08 ms per saved state, two or three states a round (issue 28)."""
    if cls not in _INIT_NAMES:
        params = inspect.signature(cls).parameters.values()
        var = any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params)
        _INIT_NAMES[cls] = None if var else tuple(p.name for p in params)
    return _INIT_NAMES[cls]


_INIT_NAMES: dict[type, tuple[str, ...] | None] = {}

FILE_FORMAT = "streammkl.river"
FILE_VERSION = 1
_SCALER = SCALER_PREFIX  # state arrays of the input standardisation


class MKLLearner:
    """What both river learners share: the core model made from the constructor's parameters,
    the kernels' introspection and run-time changes, and persistence. Subclasses define
    ``_core_loss`` and make their :class:`~streammkl.river.rounds.Rounds` (with their targets'
    codec) in ``__init__``."""

    kernels: Sequence | None
    regularizer: Any
    schedule: Any
    radius: float | str | None
    budget: int | None
    budget_policy: str
    seed: int
    fit_intercept: bool
    averages: tuple | None
    standardize: bool
    _rounds: Rounds

    def _init_rounds(self, targets: Classes | TargetScale) -> None:
        self._rounds = Rounds(self, self._make_model, self._params_spec, targets)

    def rounds(self) -> Rounds:
        """The learner's rounds as a streaming service drives them (compiled runs, the last
        round's view, inputs and classes to declare, state): :class:`Rounds`."""
        return self._rounds

    # --- core model -------------------------------------------------------------------------
    def _bank(self) -> tuple:
        bank = defaults.kernel_bank() if self.kernels is None else self.kernels
        return tuple(kernels_mod.from_spec(k) for k in bank)

    def _make_model(self) -> OnlineMKL:
        reg = self.regularizer
        if reg is None:
            reg = self._default_regularizer()
        elif isinstance(reg, list | tuple):
            reg = tuple(regs_mod.from_spec(r) for r in reg)
        else:
            reg = regs_mod.from_spec(reg)
        regs = reg if isinstance(reg, tuple) else (reg,)
        schedule = self.schedule if self.schedule is not None else self._default_schedule(regs)
        return OnlineMKL(
            kernels=self._bank(),
            loss=self._core_loss(),
            regularizer=reg,
            schedule=schedules_mod.from_spec(copy.deepcopy(schedule)),
            radius=self.radius,
            budget=self.budget,
            budget_policy=self.budget_policy,
            seed=self.seed,
            fit_intercept=self.fit_intercept,
            averages=self._averages(),
        )

    def _averages(self) -> tuple:
        if self.averages is not None:
            return tuple(self.averages)
        per_block = self.schedule is not None and isinstance(
            schedules_mod.from_spec(copy.deepcopy(self.schedule)), schedules_mod.FTRL
        )
        if any(k.implicit for k in self._bank()) and not per_block:
            return ()  # averaged iterates: explicit banks, and per-block schedules (FTRL)
        return defaults.AVERAGES

    def _core_loss(self) -> Any:
        raise NotImplementedError

    def _default_schedule(self, regs: Sequence[Any] = ()) -> Any:
        return defaults.schedule(self._bank(), regs)

    def _default_regularizer(self) -> Any:
        return defaults.regularizer()

    # --- introspection ----------------------------------------------------------------------
    @property
    def _raw_memory_usage(self) -> int:
        """The learner's memory in bytes, as river measures it (every object reachable from the
        learner, numpy buffers included; ``river.checks`` bounds its growth), except that
        compiled code is not walked into (``streammkl.river._memory.memory_usage``)."""
        return memory_usage(self)

    @property
    def kernel_weights(self) -> dict[str, float]:
        """beta per kernel (sums to 1 once anything is learned; all zeros before); a kernel
        with weight 0 was dropped by the regularizer."""
        names = self._rounds.kernel_names
        model = self._rounds.model
        if model is None:
            return dict.fromkeys(names, 0.0)
        return dict(zip(names, model.kernel_weights.tolist(), strict=True))

    # --- runtime kernel changes -------------------------------------------------------------
    def add_kernel(self, kernel: Any) -> None:
        """Add a kernel to the bank (a new block at zero; the others keep their state)."""
        self._rounds.model_for_learning().add_kernel(kernels_mod.from_spec(kernel))

    def remove_kernel(self, name: str) -> None:
        """Remove a kernel (by name) and its block from the bank."""
        self._rounds.model_for_learning().remove_kernel(name)

    # --- persistence ------------------------------------------------------------------------
    def _params_spec(self) -> dict[str, Any]:
        def spec(v: Any) -> Any:
            if v is None or isinstance(v, str | int | float | bool):
                return v
            if isinstance(v, list | tuple):
                return [spec(i) for i in v]
            return v.to_spec()

        names = _init_names(type(self))
        params = {name: getattr(self, name) for name in names or ()}
        if names is None or any(isinstance(v, RiverBase) for v in params.values()):
            params = self._get_params()  # type: ignore[attr-defined]
        return {name: spec(value) for name, value in params.items()}

    def to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """(JSON-able meta, named arrays): the whole learner, without pickle. The arrays are
        copies: the learner learns on without changing them."""
        rounds = self._rounds
        meta: dict[str, Any] = {
            "format": FILE_FORMAT,
            "version": FILE_VERSION,
            "class": type(self).__name__,
            "params": self._params_spec(),
            "features": list(rounds.features.names),
            "extra": rounds.targets_meta(),
            "core": None,
        }
        arrays: dict[str, np.ndarray] = {}
        if rounds.model is not None:
            meta["core"], arrays = rounds.model.to_state()
        if self.standardize:  # (copies, as the core's: the learner learns on in place)
            scaler = rounds.scaler.to_arrays(_SCALER)
            arrays = {**arrays, **{k: v.copy() for k, v in scaler.items()}}
        # fail here, clearly, if a label or an input name is not JSON-serialisable (the core
        # model's meta is JSON by construction: not written out again for every state)
        json.dumps([meta["params"], meta["features"], meta["extra"]])
        return meta, arrays

    @classmethod
    def from_state(cls, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> Any:
        """The learner :meth:`to_state` gave ``(meta, arrays)`` for."""
        statefile.check_header(meta, FILE_FORMAT, FILE_VERSION, "streammkl learner")
        if meta.get("class") != cls.__name__:
            raise statefile.StateError(f"state holds a {meta.get('class')}, not a {cls.__name__}")
        learner = cls(**_params_from_spec(meta["params"]))
        rounds = learner.rounds()
        rounds.features = FeatureIndex(list(meta["features"]))
        arrays = dict(arrays)
        if f"{_SCALER}count" in arrays:
            rounds.scaler = InputScaler.from_arrays(arrays, _SCALER)
            arrays = {k: v for k, v in arrays.items() if not k.startswith(_SCALER)}
        if meta["core"] is not None:
            rounds.model = OnlineMKL.from_state(meta["core"], arrays)
        rounds.buffers_replaced()  # (a scaler and a model of their own)
        rounds.restore_targets(meta["extra"])
        return learner

    def save(self, path: str | os.PathLike) -> Path:
        """Write the learner to ``path`` (:mod:`streammkl.statefile`: arrays + JSON meta +
        sha256 in one zip), atomically; returns the path."""
        return statefile.write(path, *self.to_state())

    @classmethod
    def load(cls, path: str | os.PathLike) -> Any:
        """The learner saved at ``path``; :class:`streammkl.statefile.StateError` (a
        ``ValueError``) for a truncated, corrupt, foreign or newer file."""
        return cls.from_state(*statefile.read(path, cls.__name__))


def _params_from_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Constructor arguments from ``_params_spec`` output: specs back into objects."""
    from streammkl.core import losses as losses_mod

    params = dict(spec)
    if params.get("kernels") is not None:
        params["kernels"] = tuple(kernels_mod.from_spec(k) for k in params["kernels"])
    reg = params.get("regularizer")
    if isinstance(reg, list):
        params["regularizer"] = tuple(regs_mod.from_spec(r) for r in reg)
    elif isinstance(reg, dict):
        params["regularizer"] = regs_mod.from_spec(reg)
    if isinstance(params.get("loss"), dict):
        params["loss"] = losses_mod.from_spec(params["loss"])
    if isinstance(params.get("schedule"), dict):
        params["schedule"] = schedules_mod.from_spec(params["schedule"])
    return params
