"""What MKLClassifier and MKLRegressor share: lazy core model, dict inputs, introspection,
persistence without pickle (the one state file of :mod:`streammkl.statefile`: versioned,
checksummed)."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from streammkl import statefile
from streammkl.core import OnlineMKL
from streammkl.core import kernels as kernels_mod
from streammkl.core import regularizers as regs_mod
from streammkl.core import schedules as schedules_mod
from streammkl.river import defaults
from streammkl.river._features import FeatureIndex, check_numeric
from streammkl.river._scaling import InputScaler
from streammkl.river.pooling import SCALER_PREFIX

FILE_FORMAT = "streammkl.river"
FILE_VERSION = 1
_SCALER = SCALER_PREFIX  # state arrays of the input standardisation


class MKLMixin:
    """Shared machinery; subclasses define ``_core_loss``, ``_extra_meta``, ``_restore_extra``."""

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

    def _init_state(self) -> None:
        self._model: OnlineMKL | None = None
        self._features = FeatureIndex()
        self._scaler = InputScaler()
        #: The core's input vector of the last round learned (standardised when
        #: ``standardize``); None before the first.
        self.last_input: np.ndarray | None = None
        #: The prequential loss of the last round learned (at theta_t, before its update, in
        #: the core's conventions); NaN before the first.
        self.last_loss = float("nan")

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
        if any(k.implicit for k in self._bank()):
            return ()  # averaged iterates are kept for explicit blocks only
        return defaults.AVERAGES

    def _core_loss(self) -> Any:
        raise NotImplementedError

    def _default_schedule(self, regs: Sequence[Any] = ()) -> Any:
        return defaults.schedule(self._bank(), regs)

    def _default_regularizer(self) -> Any:
        return defaults.regularizer()

    def _vector(self, x: Mapping, learn: bool, validated: bool = False) -> np.ndarray | None:
        """x as a dense vector; on ``learn`` new features get columns. None before any learning."""
        if not validated:
            check_numeric(x)
        if learn:
            new = self._features.new_names(x)
            if self._model is None:
                self._model = self._make_model()
            if new or not self._features.names:
                self._model.declare_features(new)  # first: if it refuses, nothing changed
                self._features.add(new)
        if self._model is None or not self._model.feature_keys:
            return None
        return self._scale(self._features.vector(x, validated=True), learn)

    def _scale(self, vec: np.ndarray, learn: bool) -> np.ndarray:
        """The core's vector for a raw one: standardised when ``standardize`` (and counted when
        ``learn``); kept as :attr:`last_input` when learned."""
        if self.standardize:
            scaler = self._scaler
            vec = scaler.learn_transform(vec) if learn else scaler.transform(vec)
        if learn:
            self.last_input = vec
        return vec

    def prepare_rows(self, X: np.ndarray) -> np.ndarray:
        """Raw dense rows (over :attr:`feature_names`) as the core learns them, in order:
        standardised and counted when ``standardize`` (call once per run, just before learning
        it), else ``X`` itself."""
        return self._scaler.rows(X, learn=True) if self.standardize else X

    def scale_rows(self, X: np.ndarray) -> np.ndarray:
        """Raw dense rows as the core predicts them (each standardised as ``predict_one`` does
        when ``standardize``; nothing counted)."""
        return self._scaler.rows(X, learn=False) if self.standardize else X

    # --- introspection ----------------------------------------------------------------------
    @property
    def kernel_names(self) -> list[str]:
        return self._model.names if self._model is not None else [k.name for k in self._bank()]

    @property
    def kernel_weights(self) -> dict[str, float]:
        """beta per kernel (sums to 1 once anything is learned; all zeros before)."""
        if self._model is None:
            return {name: 0.0 for name in self.kernel_names}
        return dict(zip(self.kernel_names, self._model.kernel_weights.tolist(), strict=True))

    @property
    def block_norms(self) -> dict[str, float]:
        if self._model is None:
            return {name: 0.0 for name in self.kernel_names}
        return dict(zip(self.kernel_names, self._model.block_norms.tolist(), strict=True))

    @property
    def kernel_bandwidths(self) -> dict[str, float]:
        """The bandwidths fitted to the data, by kernel name: gamma of every ``MedianRBF``
        (once it has met an input). State: it changes at the warm-up and when the inputs grow,
        while the kernel's name (its configuration) stays."""
        return {} if self._model is None else self._model.kernel_bandwidths

    @property
    def active_kernels(self) -> list[str]:
        return [name for name, b in self.block_norms.items() if b > 0]

    @property
    def n_features(self) -> int:
        """Inputs admitted so far (every feature name ``learn_one`` has seen)."""
        return len(self._features)

    @property
    def feature_names(self) -> list[str]:
        """Every admitted input name, in column order (a copy)."""
        return list(self._features.names)

    def knows_features(self, x: Mapping) -> bool:
        """Whether every name of ``x`` is admitted (``learn_one(x, y)`` would add no input)."""
        index = self._features.index
        for key in x:
            if (key if type(key) is str else str(key)) not in index:
                return False
        return True

    def input_vector(self, x: Mapping) -> np.ndarray:
        """``x`` as a raw dense float64 vector over :attr:`feature_names` (missing and unknown
        names count as 0; the values must be finite numbers), before any standardisation."""
        return self._features.vector(x, validated=True)

    @property
    def norm_only(self) -> bool:
        """Whether every configured regularizer is a function of the block norms alone (then
        ``lambda Omega(theta_t)`` of a compiled run's rounds follows from their block norms)."""
        model = self._model if self._model is not None else self._make_model()
        return model.norm_only

    @property
    def ready(self) -> bool:
        """Whether the core model exists (after the first ``learn_one``)."""
        return self._model is not None and bool(self._model.feature_keys)

    def unknown_features(self, x: Mapping) -> list[str]:
        """The names of ``x`` not admitted yet, sorted: what ``learn_one(x, y)`` would add
        (``predict_one`` ignores them). Changes nothing."""
        return self._features.new_names(x)

    @property
    def n_support(self) -> int:
        return 0 if self._model is None else self._model.n_support

    @property
    def n_learned(self) -> int:
        return 0 if self._model is None else self._model.t

    @property
    def core(self) -> OnlineMKL | None:
        """The array-level learner underneath (None before the first ``learn_one``)."""
        return self._model

    # --- runtime kernel changes -------------------------------------------------------------
    def add_kernel(self, kernel: Any) -> None:
        kernel = kernels_mod.from_spec(kernel)
        if self._model is None:
            self._model = self._make_model()
        self._model.add_kernel(kernel)

    def remove_kernel(self, name: str) -> None:
        if self._model is None:
            self._model = self._make_model()
        self._model.remove_kernel(name)

    def restart_schedule(self) -> None:
        if self._model is not None:
            self._model.restart_schedule()

    # --- persistence ------------------------------------------------------------------------
    def _params_spec(self) -> dict[str, Any]:
        def spec(v: Any) -> Any:
            if v is None or isinstance(v, str | int | float | bool):
                return v
            if isinstance(v, list | tuple):
                return [spec(i) for i in v]
            return v.to_spec()

        return {name: spec(value) for name, value in self._get_params().items()}  # type: ignore[attr-defined]

    def to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """(JSON-able meta, named arrays): the whole learner, without pickle."""
        meta: dict[str, Any] = {
            "format": FILE_FORMAT,
            "version": FILE_VERSION,
            "class": type(self).__name__,
            "params": self._params_spec(),
            "features": list(self._features.names),
            "extra": self._extra_meta(),
            "core": None,
        }
        arrays: dict[str, np.ndarray] = {}
        if self._model is not None:
            meta["core"], arrays = self._model.to_state()
        if self.standardize:
            arrays = {**arrays, **self._scaler.to_arrays(_SCALER)}
        json.dumps(meta)  # fail here, clearly, if a label is not JSON-serialisable
        return meta, arrays

    @classmethod
    def from_state(cls, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> Any:
        statefile.check_header(meta, FILE_FORMAT, FILE_VERSION, "streammkl learner")
        if meta.get("class") != cls.__name__:
            raise statefile.StateError(f"state holds a {meta.get('class')}, not a {cls.__name__}")
        learner = cls(**_params_from_spec(meta["params"]))
        learner._features = FeatureIndex(list(meta["features"]))
        arrays = dict(arrays)
        if f"{_SCALER}count" in arrays:
            learner._scaler = InputScaler.from_arrays(arrays, _SCALER)
            arrays = {k: v for k, v in arrays.items() if not k.startswith(_SCALER)}
        if meta["core"] is not None:
            learner._model = OnlineMKL.from_state(meta["core"], arrays)
        learner._restore_extra(meta["extra"])
        return learner

    def declare_features(self, names: Sequence[str]) -> None:
        """Give inputs their columns before they are met (creating the core model if there is
        none yet), so that learners that must agree on them (a group's base) do."""
        new = self._features.new_names(dict.fromkeys(names, 0.0))
        if self._model is None:
            self._model = self._make_model()
        self._model.declare_features(new)
        self._features.add(new)

    def load_state(self, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
        """Replace this learner's model by a saved state, in place (code holding the learner
        sees the new model). The state must be of this class and hold the same parameters
        (a learner of a group adopting the group's merged model)."""
        other = type(self).from_state(meta, arrays)
        if other._params_spec() != self._params_spec():
            raise ValueError("the state was saved by a learner with other parameters")
        self._model = other._model
        self._features = other._features
        self._scaler = other._scaler
        self._restore_extra(meta["extra"])

    def _extra_meta(self) -> dict[str, Any]:
        return {}

    def _restore_extra(self, extra: Mapping[str, Any]) -> None:
        pass

    def digest(self) -> str:
        """sha256 of the canonical state: equal digests <=> identical learners."""
        meta, arrays = self.to_state()
        return statefile.state_digest(meta, arrays)

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
