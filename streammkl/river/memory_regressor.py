"""MemoryRegressor: a regressor corrected by the Nadaraya-Watson mean of its own past residuals
near the input, the correction hedged by its past errors (issue 27's regression vote)."""

from __future__ import annotations

import json
import math
import os
from collections import Counter, defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from river import base, compose

from streammkl import statefile
from streammkl.core.hedge import FixedShareHedge
from streammkl.core.residual_memory import ResidualMemory
from streammkl.river._memory import memory_usage
from streammkl.river._params import check_int, check_number, check_share
from streammkl.river.regressor import MKLRegressor

if TYPE_CHECKING:
    from river import preprocessing

# ``river.preprocessing`` is imported where it is used: importing it pulls in river.tree and
# river.feature_extraction (2.6 s of CPU on a 2-core EPYC, measured), which every start of the
# daemon paid through ``streammkl.river`` without ever building this class.

FILE_FORMAT = "streammkl.river.memory_regressor"
FILE_VERSION = 1
_LEARNER, _MEMORY = "learner.", "memory."  # the prefixes of the saved arrays


def default_regressor() -> Any:
    """``StandardScaler() | MKLRegressor()``: the library's default regressor as the suite and
    the study run it (the memory needs the raw inputs, so the scaler goes inside)."""
    from river import preprocessing

    return preprocessing.StandardScaler() | MKLRegressor()


class MemoryRegressor(base.Regressor):
    """A regressor plus the Nadaraya-Watson mean of its past residuals near the input, the two
    predictions mixed by a fixed-share Hedge on their past absolute errors.

    A kernel machine of a few fixed bandwidths leaves local structure in its residuals (Friedman's
    ``10 sin(pi x1 x2)``); the residuals of the recent neighbours see it. The vote is
    ``yhat_v = yhat + mean_i w_i r_i`` (``r_i = y_i - yhat_i``, the regressor's prequential
    residuals, ``w_i = exp(-gamma d2)``; ``streammkl.core.residual_memory.ResidualMemory``: raw
    rows, distances scaled by each input's current sd and weighted by its correlation ratio eta^2
    with the target). The prediction is ``(1 - w) yhat + w yhat_v``, ``w``
    (:attr:`memory_weight`) the weight a fixed-share Hedge (rate ``eta``, share ``share``) gives
    the vote from the two experts' past |errors|, standardised by the running sd of the target
    and clipped at ``error_clip``. Exactly the study's head "hedge abs eta 4 share 0.002
    residual parzen 16/median W=1000 eta2" (``benchmarks/regression_votes.py``).

    The memory reads the inputs **as given** (the first example's keys, in their order; a key
    missing later counts 0, a new key is ignored), so put the scaling inside ``regressor``, not
    before this. The vote for ``x`` sees only the examples learned before it.

    Parameters
    ----------
    regressor
        The learner (cloned): an ``MKLRegressor`` or ``StandardScaler() | MKLRegressor(...)``
        (those save with :meth:`save`; any river regressor otherwise, pickled). None:
        :func:`default_regressor`.
    window
        How many of the last examples the memory keeps (W).
    bandwidth
        ``gamma = bandwidth / median scaled squared distance`` (of the last 100 inputs).
    relevance_every
        Refresh the eta^2 weights and the bandwidth every this many examples.
    eta
        The Hedge's rate on the standardised absolute errors.
    share
        The Hedge's fixed share, in [0, 1).
    error_clip
        Standardised errors beyond +-error_clip count as error_clip.

    Examples
    --------
    >>> from river import datasets, evaluate, metrics
    >>> from streammkl.river import MemoryRegressor
    >>> model = MemoryRegressor()
    >>> evaluate.progressive_val_score(datasets.TrumpApproval(), model, metrics.MAE())
    MAE: 0.353365
    >>> round(model.memory_weight, 2)
    0.98
    """

    def __init__(
        self,
        regressor: base.Regressor | None = None,
        window: int = 1000,
        bandwidth: float = 16.0,
        relevance_every: int = 250,
        eta: float = 4.0,
        share: float = 0.002,
        error_clip: float = 4.0,
    ):
        if regressor is not None and not isinstance(regressor, base.Regressor):
            raise TypeError(f"regressor must be a river regressor, got {type(regressor)!r}")
        check_int("window", window, 2)
        check_number("bandwidth", bandwidth, 0.0, math.inf)
        check_int("relevance_every", relevance_every, 1)
        check_number("eta", eta, 0.0, math.inf)
        check_share(share)
        check_number("error_clip", error_clip, 0.0, math.inf)
        self.regressor = regressor
        self.window = window
        self.bandwidth = bandwidth
        self.relevance_every = relevance_every
        self.eta = eta
        self.share = share
        self.error_clip = error_clip
        self._learner: Any = default_regressor() if regressor is None else regressor.clone()
        self._memory = ResidualMemory(window, bandwidth, relevance_every)
        self._hedge = FixedShareHedge(eta, share)
        self._names: list = []  # the inputs the memory reads, in order
        self._y_count, self._y_mean, self._y_sq_dev = 0, 0.0, 0.0  # Welford on the target

    # --- what it holds --------------------------------------------------------------------------
    @property
    def learner(self) -> base.Regressor:
        """The wrapped learner (the one that learns, not the ``regressor`` parameter)."""
        return self._learner

    @property
    def memory(self) -> ResidualMemory:
        return self._memory

    @property
    def memory_weight(self) -> float:
        """The Hedge's weight on the residual vote now."""
        return self._hedge.weight

    @property
    def kernel_weights(self) -> dict[str, float]:
        """The learner's beta per kernel (``MKLRegressor.kernel_weights``, a pipeline's last
        step's); empty for a regressor without kernels."""
        learner = self._learner
        if isinstance(learner, compose.Pipeline):
            learner = list(learner.steps.values())[-1]
        return dict(getattr(learner, "kernel_weights", {}))

    @property
    def _raw_memory_usage(self) -> int:
        """River's measure of everything the wrapper holds (the memory's arrays, the learner or
        the ``StandardScaler() | MKLRegressor()`` pipeline), without walking into compiled
        code (``streammkl.river._memory.memory_usage``; river's own walk, started from the
        pipeline, would reach numba's compiler state)."""
        return memory_usage(self)

    # --- river API --------------------------------------------------------------------------
    def _row(self, x: Mapping) -> np.ndarray:
        if not self._names:
            self._names = list(x)
        get = x.get
        return np.array([float(get(k, 0.0)) for k in self._names])

    def _vote(self, x: Mapping) -> tuple[float, float, np.ndarray]:
        """(the learner's prediction, the vote's, the memory's row of ``x``)."""
        yhat = float(self._learner.predict_one(x))
        row = self._row(x)
        mean = self._memory.residual_mean(row)
        return yhat, yhat + (0.0 if math.isnan(mean) else mean), row

    def _mix(self, yhat: float, vote: float) -> float:
        w = self._hedge.weight
        return (1.0 - w) * yhat + w * vote

    def predict_one(self, x: Mapping, **kwargs: Any) -> float:
        return self._mix(*self._vote(x)[:2])

    def learn_one(self, x: Mapping, y: float) -> None:
        self.learn_predict_one(x, y)

    def learn_predict_one(self, x: Mapping, y: float | None) -> float:
        """``predict_one(x)`` *then* ``learn_one(x, y)`` with one neighbour mean (the vote that
        scores the experts is the one returned). A target of ``None`` predicts only."""
        yhat, vote, row = self._vote(x)
        mixed = self._mix(yhat, vote)
        if y is None:
            return mixed
        y = float(y)
        if not math.isfinite(y):
            raise ValueError(f"regression target must be finite, got {y!r}")
        n = self._y_count
        sd = math.sqrt(self._y_sq_dev / n) if n > 1 else 1.0
        sd = sd if sd > 0 else 1.0
        clip = self.error_clip
        self._hedge.update(
            min(abs((y - yhat) / sd), clip), min(abs((y - vote) / sd), clip)
        )  # (|clip(e)| = min(|e|, clip))
        self._y_count = n + 1
        delta = y - self._y_mean
        self._y_mean += delta / (n + 1)
        self._y_sq_dev += delta * (y - self._y_mean)
        self._learner.learn_one(x, y)
        self._memory.add(row, y, y - yhat)
        return mixed

    # --- persistence ------------------------------------------------------------------------
    def _params(self) -> dict[str, Any]:
        names = ("window", "bandwidth", "relevance_every", "eta", "share", "error_clip")
        return {name: getattr(self, name) for name in names}

    def _learner_parts(self) -> tuple[preprocessing.StandardScaler | None, MKLRegressor]:
        from river import preprocessing

        learner = self._learner
        if type(learner) is MKLRegressor:  # (a river Pipeline passes isinstance as its last step)
            return None, learner
        if type(learner) is compose.Pipeline:
            steps = list(learner.steps.values())
            if (
                len(steps) == 2
                and type(steps[0]) is preprocessing.StandardScaler
                and steps[0].with_std
                and type(steps[1]) is MKLRegressor
            ):
                return steps[0], steps[1]
        raise TypeError(
            "to_state/save need an MKLRegressor or StandardScaler() | MKLRegressor() learner, "
            f"got {learner!r}; pickle the model instead"
        )

    def to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """(JSON-able meta, named arrays): the learner's state (``MKLRegressor.to_state``, and
        the scaler's moments if it has one), the memory's, the Hedge's weight and the target's
        running moments, without pickle."""
        scaler, mkl = self._learner_parts()
        learner_meta, learner_arrays = mkl.to_state()
        arrays = {f"{_LEARNER}{k}": v for k, v in learner_arrays.items()}
        memory_meta, memory_arrays = self._memory.to_state(_MEMORY)
        arrays.update(memory_arrays)
        scaler_meta = None
        if scaler is not None:
            keys = list(scaler.counts)
            scaler_meta = {
                "names": keys,
                "counts": [scaler.counts[k] for k in keys],
                "means": [scaler.means[k] for k in keys],
                "vars": [scaler.vars[k] for k in keys],
            }
        meta = {
            "format": FILE_FORMAT,
            "version": FILE_VERSION,
            "class": type(self).__name__,
            "params": self._params(),
            "default_regressor": self.regressor is None,
            "learner": learner_meta,
            "scaler": scaler_meta,
            "memory": memory_meta,
            "weight": self._hedge.weight,
            "names": list(self._names),
            "target": [self._y_count, self._y_mean, self._y_sq_dev],
        }
        json.dumps(meta)  # fail here, clearly, if a feature name is not JSON-serialisable
        return meta, arrays

    @classmethod
    def from_state(cls, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> Any:
        """The learner :meth:`to_state` gave ``(meta, arrays)`` for."""
        statefile.check_header(meta, FILE_FORMAT, FILE_VERSION, "streammkl memory regressor")
        if meta.get("class") != cls.__name__:
            raise statefile.StateError(f"state holds a {meta.get('class')}, not a {cls.__name__}")
        n = len(_LEARNER)
        mkl = MKLRegressor.from_state(
            meta["learner"], {k[n:]: v for k, v in arrays.items() if k.startswith(_LEARNER)}
        )
        learner: base.Regressor = mkl
        s = meta["scaler"]
        if s is not None:
            from river import preprocessing

            scaler = preprocessing.StandardScaler()
            scaler.counts = Counter(dict(zip(s["names"], s["counts"], strict=True)))
            scaler.means = defaultdict(float, zip(s["names"], s["means"], strict=True))
            scaler.vars = defaultdict(float, zip(s["names"], s["vars"], strict=True))
            learner = scaler | mkl
        template = None if meta["default_regressor"] else learner.clone()
        model = cls(template, **meta["params"])
        model._learner = learner
        model._memory = ResidualMemory.from_state(meta["memory"], dict(arrays), _MEMORY)
        model._hedge.weight = float(meta["weight"])
        model._names = list(meta["names"])
        count, mean, sq_dev = meta["target"]
        model._y_count, model._y_mean, model._y_sq_dev = int(count), float(mean), float(sq_dev)
        return model

    def save(self, path: str | os.PathLike) -> Path:
        """Write the learner to ``path`` (one :mod:`streammkl.statefile` file, atomically)."""
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
            "regressor": MKLRegressor(
                kernels=(kernels.Linear(), kernels.RBF(0.5, n_components=16)), budget=None
            ),
            "window": 50,
            "relevance_every": 20,
        }
