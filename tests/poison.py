"""A learner that kills its own process on a chosen record (for the crash-loop tests).

``make_learner`` (a ``learner.factory``) builds a real :class:`~streammkl.river.MKLClassifier`
whose Gaussian kernel sends SIGKILL to its own process when the model lays out a feature named
``poison`` (the random Fourier columns of a new input are drawn when it is admitted): the death
happens where a real poison record kills a daemon, while the model grows, and nothing can catch
it. It behaves as ``RBF`` otherwise, and its spec *is* ``RBF``'s, so a model restored from a
checkpoint has a plain Gaussian kernel and the digests equal a run without the poison kernel.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from typing import Any

import numpy as np

from streammkl.core import kernels
from streammkl.core.kernel_base import DRAWS
from streammkl.river import MKLClassifier

POISON = "poison"


class PoisonRBF(kernels.RBF):
    """``RBF`` that kills the process when it draws the columns of a feature named ``poison``."""

    def fourier_columns(self, keys: Sequence[str], seed: int, draws: int = DRAWS) -> np.ndarray:
        if POISON in keys:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().fourier_columns(keys, seed, draws)

    def to_spec(self) -> dict[str, Any]:
        return {"type": "RBF", **self.params()}


def make_learner(spec: Any) -> MKLClassifier:
    """``learner.factory`` entry point (``tests.poison:make_learner``)."""
    return MKLClassifier(
        kernels=(kernels.Linear(), PoisonRBF(gamma=1.0, n_components=32)), seed=spec.seed
    )
