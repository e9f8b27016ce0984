"""The kernel-drift simulator through the library: after each abrupt switch the kernel generating
the labels becomes the one with the largest β, with and without the drift detector.

Setting (also ``benchmarks/kernel_drift.py``): phases linear -> rbf(gamma=2) -> poly2 of 2000
examples, d = 2; bank = the three generating kernels (``ground_truth()["kernel_specs"]``); hinge,
SquaredGroupLasso(0.05), InvSqrt(1.0), budget 512 with the FIFO policy ``"oldest"``. Delay =
examples after the switch until the generating kernel has the largest β *for the rest of the
phase*.

The FIFO budget forgets the old phase's support vectors, which is part of what moves β here. The
default policy, ``"merge"``, keeps them (compressed), so without a detector the rbf block keeps
its norm longer: measured rbf -> poly delays 631, 725, 1711 (none), 294, 178, 904 (ADWIN),
168, 170, 537 (Constant(0.1)); linear -> rbf unchanged. Tracking a drift is then the schedule's
and the detector's job, not the budget's.

Measured (seeds 0, 1, 2; none / ADWIN restart / Constant(0.1)):
linear -> rbf: 537, 263, 179 / 49, 62, 19 / 123, 52, 65;
rbf -> poly:   242, 246, 225 / 175, 170, 262 / 167, 170, 275.
The detector's restart makes the switch *to* the narrow rbf kernel 4-11x faster. The rbf -> poly
switch is not reliably faster: the rbf block (universal, and larger after learning its phase well)
keeps a large norm that the squared group lasso shrinks at the same pace either way; over 12 seeds
the detector is faster on 6 (``benchmarks/results/kernel_drift.md``). The assertions say so.
"""

from __future__ import annotations

import numpy as np
import pytest

from simulators import scenarios
from streammkl.core import OnlineMKL, kernels, losses, regularizers, schedules
from streammkl.monitor import Monitor, MonitoredLoop

SEEDS = (0, 1, 2)
PHASE = 2000
VARIANTS = ("none", "adwin", "constant")


def kernel_drift_run(seed, variant, phase=PHASE):
    sim = scenarios.get("kernel-drift", seed=seed, switch="abrupt", phase_length=phase)
    truth = sim.ground_truth()
    X = np.array([[r.x[f"x{j}"] for j in range(sim.d)] for r in sim])
    Y = np.array([1.0 if r.y else -1.0 for r in sim])
    bank = tuple(kernels.from_spec(s) for s in truth["kernel_specs"].values())
    schedule = schedules.Constant(0.1) if variant == "constant" else schedules.InvSqrt(1.0)
    model = OnlineMKL(
        kernels=bank,
        loss=losses.Hinge(),
        regularizer=regularizers.SquaredGroupLasso(0.05),
        schedule=schedule,
        budget=512,
        budget_policy="oldest",
    )
    monitor = Monitor(model, window=None, detector="adwin" if variant == "adwin" else None)
    loop = MonitoredLoop(model, monitor)  # applies the restarts the monitor asks for
    beta = np.empty((len(X), len(bank)))
    loss = np.empty(len(X))
    restarts = []
    for t, (x, y) in enumerate(zip(X, Y, strict=True)):
        reg = model.regularization_value()
        loss[t] = model.learn(x, y)
        if loop.observe(x, y, loss[t], reg):
            restarts.append(t)
        beta[t] = model.kernel_weights
    delays = []
    for seg in truth["segments"][1:]:
        k = model.names.index(seg["kernel"])
        wrong = np.flatnonzero(beta[seg["start"] : seg["stop"]].argmax(1) != k)
        delays.append(0 if wrong.size == 0 else int(wrong[-1]) + 1)
    switches = [s["at"] for s in truth["switches"]]
    return {"delays": delays, "restarts": restarts, "switches": switches, "loss": loss}


@pytest.fixture(scope="module")
def runs():
    return {(s, v): kernel_drift_run(s, v) for s in SEEDS for v in VARIANTS}


def test_generating_kernel_takes_the_lead_within_a_bounded_delay(runs):
    table = {v: [runs[s, v]["delays"] for s in SEEDS] for v in VARIANTS}
    print("\ndelays [linear->rbf, rbf->poly] per seed:", table)
    for v in VARIANTS:
        for delays in table[v]:
            assert max(delays) <= PHASE // 2, (v, delays)  # within half a phase, every switch


def test_detector_restarts_right_after_switches_only(runs):
    for s in SEEDS:
        r = runs[s, "adwin"]
        first = r["switches"][0]
        assert any(first <= t < first + 64 for t in r["restarts"])  # clock 32: <= 2 checks late
        for t in r["restarts"]:  # no false alarm inside a phase
            assert any(at <= t < at + 200 for at in r["switches"]), (s, r["restarts"])
        for v in ("none", "constant"):
            assert runs[s, v]["restarts"] == []


def test_detector_recovers_faster(runs):
    none = np.array([runs[s, "none"]["delays"] for s in SEEDS])
    adwin = np.array([runs[s, "adwin"]["delays"] for s in SEEDS])
    # the switch to the rbf phase: at least twice as fast on every seed
    assert np.all(2 * adwin[:, 0] <= none[:, 0]), (adwin, none)
    # both switches together, all seeds: well under the detector-free total
    assert adwin.sum() <= 0.6 * none.sum(), (adwin.sum(), none.sum())
    # rbf -> poly is NOT asserted faster (measured: 2 of 3 seeds here, 6 of 12 in the benchmark)
    # the mean prequential loss after the first switch is lower with the restart on every seed,
    # by 10% or more on average (measured: 0.85, 0.84, 0.91 of the detector-free loss)
    after = slice(PHASE, 3 * PHASE)
    ratio = [
        runs[s, "adwin"]["loss"][after].mean() / runs[s, "none"]["loss"][after].mean()
        for s in SEEDS
    ]
    assert max(ratio) < 1.0 and np.mean(ratio) < 0.9, ratio
