"""The mixing protocol in one process: what the merge's choices cost in accuracy, without a
broker's timing noise.

Two members take turns (member a: partitions 0-2, b: 3-5 of the benchmark's kernel-drift
stream, as ``benchmarks/scale_out.py`` splits them); in every round each learns its next K
records from the group's base (a warm-up round of 50 while a bandwidth waits for the group's
warm-up inputs, as ``daemon.group.MixingMember`` does, unless ``no warm-up round``), publishes
its delta into a :class:`~streammkl.daemon.mixing.log.MixLog`, and the log merges. It prints
the prequential accuracy of the merged group and of one learner over the whole stream, for:

- the default bank (MedianRBF bandwidths) on standardised inputs, with and without the
  warm-up round;
- the same on inputs ten times larger and not standardised (the provisional bandwidths are
  then far off: the RBF blocks restart when the group fixes them);
- the fixed-bandwidth bank of ``scale_out.py --bank fixed``, with and without standardisation.

    python benchmarks/mixing_protocol.py --records 60000     # the documented run
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _table  # noqa: E402

K = 500
CASES = [  # (bank, standardize, warm-up round, input scale)
    ("default", True, True, 1.0),
    ("default", True, False, 1.0),
    ("default", False, True, 10.0),
    ("default", False, False, 10.0),
    ("fixed", True, True, 1.0),
    ("fixed", False, True, 1.0),
]


def records(n: int, scale: float) -> tuple[list[Any], list[Any]]:
    from simulators.kernel_drift import KernelDrift

    sim = KernelDrift(seed=0, d=4, phase_length=max(n // 6, 1000), n_samples=n)
    recs = list(sim.take(n))
    if scale != 1.0:
        recs = [replace(r, x={k: scale * v for k, v in r.x.items()}) for r in recs]
    return recs, list(sim.classes or ())


def learner(bank: str, standardize: bool, classes: list) -> Any:
    from scale_out import KERNELS

    from streammkl.daemon.learning.building import build_component
    from streammkl.river import MKLClassifier

    params: dict[str, Any] = {"standardize": standardize, "seed": 0}
    if bank == "fixed":
        params["kernels"] = tuple(build_component("kernels", k, "kernels") for k in KERNELS)
    out = MKLClassifier(**params)
    out.rounds().declare_classes(classes)
    return out


def correct(model: Any, rec: Any) -> bool:
    proba = model.learn_predict_one(rec.x, rec.y)
    return max(proba, key=proba.__getitem__) == rec.y


def case(recs: list, classes: list, bank: str, std: bool, warm: bool) -> tuple[float, float]:
    from streammkl.daemon.mixing.log import MixLog, learner_digest
    from streammkl.daemon.mixing.topic import MixRecord

    one = learner(bank, std, classes)
    single = sum(correct(one, r) for r in recs) / len(recs)
    base = learner(bank, std, classes)
    base.rounds().declare_features([])
    log = MixLog()
    log.apply(MixRecord("base", 0, "a", state=base.to_state()))
    for m in "ab":  # a round waits for both
        log.apply(MixRecord("hello", 0, m))
    parts = {m: [r for i, r in enumerate(recs) if (i % 6 < 3) == (m == "a")] for m in "ab"}
    pos, hits = {"a": 0, "b": 0}, 0
    while any(pos[m] < len(parts[m]) for m in "ab"):
        state, r0 = log.base, log.round
        assert state is not None
        for m in "ab":
            model = learner(bank, std, classes)
            model.rounds().load_state(*state)
            model.rounds().model.hold_bandwidths = True
            left = model.rounds().model.warmup_left
            k = min(K, left) if left and warm else K
            start = model.rounds().n_learned
            hits += sum(correct(model, r) for r in parts[m][pos[m] : pos[m] + k])
            pos[m] += k
            n = model.rounds().n_learned - start
            digest = learner_digest(state)
            log.apply(MixRecord("delta", r0, m, n, state=model.to_state(), base_digest=digest))
        log.apply(MixRecord("close", r0, "a"))  # (a partition ran out: b did not publish)
    assert log.examples == len(recs) and not any(res.stale for res in log.results)
    return hits / len(recs), single


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=60_000)
    _table.add_out(ap)
    args = ap.parse_args(argv)
    machine = _table.machine()
    rows = []
    for bank, std, warm, scale in CASES:
        print(f"[protocol] bank {bank}, standardize {std}, warm-up round {warm}, inputs x{scale:g}",
              file=sys.stderr, flush=True)  # fmt: skip
        recs, classes = records(args.records, scale)
        merged, single = case(recs, classes, bank, std, warm)
        rows.append([bank, "yes" if std else "no", "yes" if warm else "no", f"x{scale:g}",
                     f"{100 * merged:.2f}", f"{100 * single:.2f}"])  # fmt: skip
    body = (
        f"{machine}. kernel-drift, {args.records:,} records, 2 members taking turns, K = {K} "
        "(the protocol in one process: no broker).\n\n"
        + _table.markdown(["bank", "standardize", "warm-up round", "inputs",
                           "merged acc. %", "one learner acc. %"], rows)
    )  # fmt: skip
    _table.publish("mixing_protocol", "The mixing protocol in one process", body,
                   args.records >= 60_000, args.out)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
