"""A learner that kills its own process on a chosen record (for the crash-loop tests).

``make_learner`` (a ``learner.factory``) builds a real :class:`~streammkl.river.MKLClassifier`
whose linear kernel sends SIGKILL to its own process when the model admits a feature named
``poison``: the death happens where a real poison record kills a daemon, while the model grows
(its layout is rebuilt), and nothing can catch it. It behaves as ``Linear`` otherwise, and its
spec *is* ``Linear``'s, so a model restored from a checkpoint has a plain linear kernel and the
digests equal a run without the poison kernel.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from typing import Any

import numpy as np

from streammkl.core import kernels
from streammkl.river import MKLClassifier

POISON = "poison"


class PoisonLinear(kernels.Linear):
    """``Linear`` that kills the process when it is laid out over a feature named ``poison``."""

    def feature_indices(self, d: int, index: Mapping[str, int] | None = None) -> np.ndarray:
        if index is not None and POISON in index:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().feature_indices(d, index)

    def to_spec(self) -> dict[str, Any]:
        return {"type": "Linear", **self.params()}


def make_learner(spec: Any) -> MKLClassifier:
    """``learner.factory`` entry point (``tests.poison:make_learner``)."""
    return MKLClassifier(
        kernels=(PoisonLinear(), kernels.RBF(gamma=1.0, n_components=32)), seed=spec.seed
    )
