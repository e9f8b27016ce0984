"""Tracking delay after a kernel switch, with and without the drift detector, and constant steps.

Stream: ``simulators`` kernel-drift, abrupt switches, phases linear -> rbf(gamma=2) -> poly2 of
``--phase`` examples (d = 2). Learner: ``OnlineMKL`` over the three generating kernels
(``ground_truth()["kernel_specs"]``), hinge, SquaredGroupLasso(0.05), budget 512, driven through
``streammkl.monitor.Monitor``. Variants: InvSqrt(1.0) alone; InvSqrt(1.0) restarted by ADWIN
(river defaults) or Page-Hinkley (``mode="up"``) on the prequential loss; Constant(0.1).

Delay = examples after the switch until the generating kernel has the largest β for the rest of
the phase (``phase`` = never within the phase). Detection delay = first restart after the switch
minus the switch; a false alarm is a restart more than 200 examples after every switch.

Recovery (the second table): after the abrupt switch from the linear to the curved (rbf) rule,
does β move to the new kernel within 3,000 examples, and is the prequential accuracy over the
last 1,000 examples of the new phase within 3 points of the same learner trained on the new phase
alone (a fresh model started at the switch)? Phases of ``--recovery-phase`` examples; learners
over the same three kernels with budget 512 and budget maintenance ``merge`` (or removal, for
comparison), restarted by ADWIN on the prequential loss.

Run: ``.venv/bin/python benchmarks/kernel_drift.py [--seeds 12] [--phase 2000]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _table import machine, markdown, publish

from simulators import scenarios
from streammkl.core import OnlineMKL, kernels, losses, regularizers, schedules
from streammkl.monitor import Monitor, MonitoredLoop

VARIANTS = {
    "InvSqrt(1), no detector": (lambda: schedules.InvSqrt(1.0), None),
    "InvSqrt(1) + ADWIN restart": (lambda: schedules.InvSqrt(1.0), "adwin"),
    "InvSqrt(1) + Page-Hinkley restart": (lambda: schedules.InvSqrt(1.0), "page-hinkley"),
    "Constant(0.1)": (lambda: schedules.Constant(0.1), None),
}


def stream(seed: int, phase: int):
    sim = scenarios.get("kernel-drift", seed=seed, switch="abrupt", phase_length=phase)
    X = np.array([[r.x[f"x{j}"] for j in range(sim.d)] for r in sim])
    Y = np.array([1.0 if r.y else -1.0 for r in sim])
    return X, Y, sim.ground_truth()


def _model(truth, schedule, policy="oldest"):
    bank = tuple(kernels.from_spec(s) for s in truth["kernel_specs"].values())
    return OnlineMKL(
        kernels=bank,
        loss=losses.Hinge(),
        regularizer=regularizers.SquaredGroupLasso(0.05),
        schedule=schedule,
        budget=512,
        budget_policy=policy,
    )


def run(X, Y, truth, schedule, detector, phase):
    model = _model(truth, schedule)
    bank = model.kernels
    mon = MonitoredLoop(model, Monitor(model, window=None, detector=detector))
    beta = np.empty((len(X), len(bank)))
    loss = np.empty(len(X))
    restarts = []
    for t, (x, y) in enumerate(zip(X, Y, strict=True)):
        reg = model.regularization_value()
        loss[t] = model.learn(x, y)
        if mon.observe(x, y, loss[t], reg):
            restarts.append(t)
        beta[t] = model.kernel_weights
    switches = [s["at"] for s in truth["switches"]]
    out = {"delay": [], "detect": [], "loss": [], "false": 0}
    for seg, at in zip(truth["segments"][1:], switches, strict=True):
        k = model.names.index(seg["kernel"])
        wrong = np.flatnonzero(beta[seg["start"] : seg["stop"]].argmax(1) != k)
        out["delay"].append(0 if wrong.size == 0 else int(wrong[-1]) + 1)
        after = [t - at for t in restarts if at <= t < at + phase]
        out["detect"].append(after[0] if after else None)
        out["loss"].append(float(loss[at : at + phase].mean()))
    out["false"] = sum(1 for t in restarts if not any(0 <= t - at < 200 for at in switches))
    return out


RECOVERY = {
    "InvSqrt(1) + ADWIN, budget 512 removing the oldest": (
        lambda: schedules.InvSqrt(1.0), "oldest"),
    "InvSqrt(1) + ADWIN, budget 512 merging": (lambda: schedules.InvSqrt(1.0), "merge"),
    "AdaGrad(1) + ADWIN, budget 512 merging": (lambda: schedules.AdaGrad(1.0), "merge"),
}  # fmt: skip
BETA_WITHIN, ACC_WITHIN, FINAL = 3000, 0.03, 1000


def recovery(X, Y, truth, schedule, policy):
    """(β delay, final accuracy, final accuracy of the new phase learned alone) at the switch
    from the linear phase to the rbf phase."""
    seg = truth["segments"][1]
    start, stop = seg["start"], seg["stop"]
    model = _model(truth, schedule(), policy)
    mon = MonitoredLoop(model, Monitor(model, window=None, detector="adwin"))
    k = model.names.index(seg["kernel"])
    hits = np.zeros(stop, dtype=bool)
    top = np.zeros(stop, dtype=np.int64)
    for t in range(stop):
        reg = model.regularization_value()
        score = float(model.decision(X[t]))
        hits[t] = (score > 0) == (Y[t] > 0)
        loss = model.learn(X[t], Y[t])
        mon.observe(X[t], Y[t], loss, reg)
        top[t] = int(np.argmax(model.kernel_weights))
    wrong = np.flatnonzero(top[start:stop] != k)
    delay = 0 if wrong.size == 0 else int(wrong[-1]) + 1
    alone = _model(truth, schedule(), policy)
    mon = MonitoredLoop(alone, Monitor(alone, window=None, detector="adwin"))
    fresh = np.zeros(stop - start, dtype=bool)
    for i, t in enumerate(range(start, stop)):
        reg = alone.regularization_value()
        fresh[i] = (float(alone.decision(X[t])) > 0) == (Y[t] > 0)
        loss = alone.learn(X[t], Y[t])
        mon.observe(X[t], Y[t], loss, reg)
    return delay, float(hits[stop - FINAL : stop].mean()), float(fresh[-FINAL:].mean())


def recovery_table(seeds: int, phase: int) -> tuple[str, bool]:
    rows, met_all = [], {}
    for name, (schedule, policy) in RECOVERY.items():
        res = [recovery(*stream(s, phase), schedule, policy) for s in range(seeds)]
        delays = np.array([r[0] for r in res])
        gaps = np.array([r[2] - r[1] for r in res])
        ok = (delays <= BETA_WITHIN) & (gaps <= ACC_WITHIN)
        met_all[name] = bool(ok.all())
        rows.append([
            name,
            f"{np.median(delays):.0f} / {delays.max():.0f} "
            f"({np.sum(delays <= BETA_WITHIN)}/{seeds})",
            f"{np.mean([r[1] for r in res]):.4f}", f"{np.mean([r[2] for r in res]):.4f}",
            f"{np.median(gaps) * 100:+.2f} / {gaps.max() * 100:+.2f} "
            f"({np.sum(gaps <= ACC_WITHIN)}/{seeds})",
            "met" if ok.all() else f"MISSED ({ok.sum()}/{seeds} seeds)",
        ])  # fmt: skip
    headers = [
        "learner", f"β delay: median / max (<= {BETA_WITHIN:,})",
        f"accuracy, last {FINAL:,} of the rbf phase", "same, new phase learned alone",
        "gap (points): median / max (<= 3)", "target (every seed)",
    ]  # fmt: skip
    table = (
        f"Recovery after the switch linear -> rbf, {seeds} seeds, phases of {phase:,} examples: "
        f"β on the rbf kernel within {BETA_WITHIN:,} examples and accuracy over the last "
        f"{FINAL:,} within {ACC_WITHIN * 100:.0f} points of the phase learned alone.\n\n"
        + markdown(headers, rows)
    )
    return table, met_all[list(RECOVERY)[-1]]


def summary(values, phase):
    v = np.array(values)
    return (
        f"{np.median(v):.0f} / {v.mean():.0f} / {v.max():.0f} ({np.sum(v < phase // 2)}/{v.size})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=12, help="seeds 0..N-1")
    parser.add_argument("--phase", type=int, default=2000, help="examples per phase")
    parser.add_argument(
        "--recovery-phase", type=int, default=6000, help="examples per phase (recovery table)"
    )
    parser.add_argument("--out", default=None, help="write the report here (a partial run too)")
    args = parser.parse_args()
    streams = [stream(s, args.phase) for s in range(args.seeds)]
    results = {}
    t0 = time.perf_counter()
    for name, (schedule, detector) in VARIANTS.items():
        results[name] = [run(*st, schedule(), detector, args.phase) for st in streams]
    elapsed = time.perf_counter() - t0
    switches = ["linear -> rbf", "rbf -> poly"]
    rows = []
    for name, res in results.items():
        row: list[object] = [name]
        for j in range(len(switches)):
            row.append(summary([r["delay"][j] for r in res], args.phase))
        for j in range(len(switches)):
            det = [r["detect"][j] for r in res if r["detect"][j] is not None]
            row.append(f"{np.median(det):.0f} ({len(det)}/{len(res)})" if det else "-")
        row.append(sum(r["false"] for r in res))
        row.append(float(np.mean([np.mean(r["loss"]) for r in res])))
        rows.append(row)
    headers = ["variant"]
    headers += [f"β delay {s}: median / mean / max (< phase/2)" for s in switches]
    headers += [f"detection delay {s}: median (detected)" for s in switches]
    headers += ["false alarms", "mean loss after switches"]
    per_seed_rows = []
    base = results["InvSqrt(1), no detector"]
    adwin = results["InvSqrt(1) + ADWIN restart"]
    for s in range(args.seeds):
        per_seed_rows.append(
            [s]
            + [f"{base[s]['delay'][j]} / {adwin[s]['delay'][j]}" for j in range(2)]
            + [f"{results['Constant(0.1)'][s]['delay'][j]}" for j in range(2)]
            + [f"{base[s]['loss'][0]:.3f} / {adwin[s]['loss'][0]:.3f}"]
        )
    faster = [
        sum(adwin[s]["delay"][j] < base[s]["delay"][j] for s in range(args.seeds)) for j in range(2)
    ]
    body = (
        f"{machine()}; {args.seeds} seeds, phase {args.phase}, {elapsed:.0f} s in all.\n\n"
        + __doc__.split("\n\n", 1)[1].split("Run:")[0].strip()
        + "\n\n"
        + markdown(headers, rows)
        + "\n\nPer seed: β delay without / with ADWIN, constant step, and mean loss in the rbf "
        "phase without / with ADWIN.\n\n"
        + markdown(
            [
                "seed",
                "linear -> rbf",
                "rbf -> poly",
                "const: ->rbf",
                "const: ->poly",
                "rbf-phase loss",
            ],
            per_seed_rows,
        )
        + f"\n\nADWIN faster than no detector: linear -> rbf on {faster[0]}/{args.seeds} seeds, "
        f"rbf -> poly on {faster[1]}/{args.seeds} seeds.\n"
    )
    table, met = recovery_table(args.seeds, args.recovery_phase)
    body += "\n## Recovery of a curved boundary after the switch\n\n" + table + "\n"
    print(f"recovery target (last learner): {'met' if met else 'MISSED'}")
    full = args.seeds == 12 and args.phase == 2000 and args.recovery_phase == 6000
    publish("kernel_drift", "Kernel drift: tracking delay after a switch", body, full, args.out)


if __name__ == "__main__":
    main()
