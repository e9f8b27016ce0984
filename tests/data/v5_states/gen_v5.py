"""Writes this folder, run with streammkl 0ec92e6 (state version 5, numpy's draws per input):
a model saved after 120 rounds on 4 inputs, its decisions on a probe, and its block norms and
one decision after 40 more rounds that bring a fifth input (drawn after the save).

Run: ``python tests/data/v5_states/gen_v5.py tests/data/v5_states`` (on that commit).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from streammkl.core import OnlineMKL, kernels, losses, regularizers, schedules


def main() -> None:
    out = Path(sys.argv[1])
    bank = (
        kernels.Linear(),
        kernels.AdditiveRBF(1.0, 16, draws="quadrature"),
        kernels.AdditiveRBF(0.5, 5),
        kernels.MedianRBF(1.0, 16),
        kernels.RBF(0.5, n_components=16),
    )
    model = OnlineMKL(
        kernels=bank, loss=losses.Hinge(), regularizer=regularizers.GroupLasso(1e-3),
        schedule=schedules.FTRL(1.0), seed=11,
    )  # fmt: skip
    rng = np.random.default_rng(5)
    X = rng.normal(size=(200, 5))
    Y = np.where(X[:, 0] * X[:, 1] + X[:, 4] > 0, 1.0, -1.0)
    model.declare_features(["a", "b", "c", "d"])
    model.learn_many(X[:120, :4], Y[:120])
    model.save(out / "model.smkl")
    probe = rng.normal(size=(6, 4))
    np.save(out / "probe.npy", probe)
    decisions = [float(np.ravel(model.decision(p))[0]) for p in probe]
    model.declare_features(["e"])
    model.learn_many(X[120:160], Y[120:160])
    truth = {
        "version": model.to_state()[0]["version"],
        "decisions": decisions,
        "norms_after_40": model.block_norms.tolist(),
        "decision_after_40": float(np.ravel(model.decision(X[199]))[0]),
    }
    (out / "truth.json").write_text(json.dumps(truth, indent=1))


if __name__ == "__main__":
    main()
