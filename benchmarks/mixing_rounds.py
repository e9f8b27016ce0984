"""A mixing group's rounds in one process: what K costs in CPU and in accuracy, without a broker.

Two :class:`~streammkl.daemon.mixing.member.MixingMember` objects run the daemon's own hooks
(``join``, ``before_batch``, ``room``, ``took``, ``after_batch``: publish, fold, merge, rebase,
sampled checks, pipelined rounds at the daemon's staleness bound) around a learner each, on an
in-memory mix topic that keeps the records' bytes (every reader decodes every record, as over
Kafka). Member a learns the stream's even records, b its odd ones (``scale_out.py``'s
kernel-drift stream: 4 inputs, six phases), in batches of up to ``--batch`` records cut at the
round's end as the daemon cuts them, taking turns; after the bandwidth warm-up b runs two
batches ahead of a, so that in every round one member rebases progress of its own onto the
merged model and the other takes it (what a daemon group does at s = 1). Nothing waits on a
clock, so the accuracy is the same on a quiet and on a loaded machine.

For every K (``--every``, and adaptive K from ``--every``'s first value up to ``--max-every``)
and every seed it reports:

- **hooks µs / record**: the CPU time (``time.process_time``) of the members' hooks per learned
  record: the protocol's own work, replicated on every member (the learning is not counted);
- the merged model's prequential accuracy (every record predicted before it is learned), one
  learner's on the whole stream and two independent learners' on the halves, and the
  differences (issue 28's targets: within 0.5 point of one learner and above independent
  members).

``--delay D`` plays a daemon's timing in process: the log's news reach a member that learns
only after D of its records since its publish (D = K: a loaded machine, where the merged round
comes after the member's whole next K; a member that waits sees them at once); ``--ahead A``
sets ``mixing.ahead_records`` (the members then take turns level: with the bound, a member
ahead would wait for a delta that cannot come in one process). The per-seed table reports the
examples a member had learned and not published at its rebases (mean): the lag, in records,
with which the others' examples reached its model.

Run: ``python benchmarks/mixing_rounds.py [--records 60000 --seeds 5]``. The daemon's figures
(broker, threads, waits) come from ``scale_out.py`` and ``group_cpu.py``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _table  # noqa: E402
from prometheus_client import CollectorRegistry  # noqa: E402

from simulators.kernel_drift import KernelDrift  # noqa: E402
from streammkl.daemon.config import load_settings  # noqa: E402
from streammkl.daemon.learning.building import build_learner  # noqa: E402
from streammkl.daemon.mixing.member import MixingMember  # noqa: E402
from streammkl.daemon.mixing.metrics import MixMetrics  # noqa: E402
from streammkl.daemon.mixing.topic import decode, encode  # noqa: E402

#: The turns a lags behind b once the warm-up is over (b learns them alone).
LEAD_TURNS = (3, 4)


class BytesTopic:
    """An in-memory mix topic: one shared list of encoded records, a read position per reader;
    a read decodes what arrived since the last (as :class:`MixTopic` does)."""

    def __init__(self, log: list[bytes]) -> None:
        self.log, self.position = log, 0

    def publish(self, rec: Any, timeout: float = 30.0, attempts: int = 0) -> None:

        self.log.append(encode(rec)[1])

    def send(self, rec: Any) -> None:
        self.publish(rec)

    def confirm(self, rec: Any, sent: Any, timeout: float = 30.0, attempts: int = 0) -> None:
        pass

    #: The member that reads (set after it is built) and the records it learns between a
    #: publish of its own and the log's news reaching it (:meth:`read`; 0: at its next read).
    member: Any = None
    delay = 0

    def read(self, timeout_ms: int = 0) -> list[Any]:
        """What arrived since the last read. With :attr:`delay`, a member that learns sees the
        log's news only once it has taken ``delay`` records since its last publish (the news
        of a round come a broker trip and a fold after the members' publishes, which a daemon
        member spends learning: ``delay`` = K is a member that always learns its next K records
        before the merged round arrives, as on a loaded machine); a member that waits for a
        round (a read with a timeout), or has no delta out, sees them at once."""
        if (
            self.delay
            and not timeout_ms
            and self.member.outstanding
            and self.member.taken < self.delay
        ):
            return []
        out = [decode(value) for value in self.log[self.position :]]
        self.position = len(self.log)
        return out

    def read_to_end(self, max_seconds: float = 10.0) -> list[Any]:
        return self.read()

    def close(self) -> None:
        pass


def stream(n: int, seed: int) -> tuple[list[Any], list[Any]]:

    sim = KernelDrift(seed=seed, d=4, phase_length=max(n // 6, 1000), n_samples=n)
    return list(sim.take(n)), list(sim.classes or ())


def settings(classes: list[Any], overrides: dict[str, Any] | None = None) -> Any:
    return load_settings(env={}, overrides={"records.classes": classes, "monitor.enabled": False,
                                            "kafka.create_topics": False,
                                            **(overrides or {})})  # fmt: skip


def predict_learn(learner: Any, rec: Any) -> tuple[bool, tuple[Any, Any]]:
    """Predict ``rec`` (prequential), then learn it: (correct, (prediction, probabilities))."""
    proba = learner.predict_proba_one(rec.x)
    prediction = max(proba, key=proba.__getitem__) if proba else None
    learner.learn_one(rec.x, rec.y)
    return prediction == rec.y, (prediction, proba)


def alone(recs: list[Any], classes: list[Any]) -> int:
    """Correct predictions of one learner on ``recs``."""

    learner = build_learner(settings(classes).learner)
    return sum(predict_learn(learner, r)[0] for r in recs)


def group(recs: list[Any], classes: list[Any], every: int, max_every: int | None,
          batch: int, delay: int = 0, ahead: int | None = None) -> dict[str, Any]:  # fmt: skip
    """Two members in turns (see the module docstring): their hooks' CPU, the merged accuracy."""

    log: list[bytes] = []
    members = []
    for name in ("a", "b"):
        mixing = {"mixing.enabled": True, "mixing.member": name, "mixing.every_records": every}
        if max_every is not None:  # (else the daemon's default: K fixed)
            mixing["mixing.max_every_records"] = max_every
        if ahead is not None:  # (else the daemon's default)
            mixing["mixing.ahead_records"] = ahead
        s = settings(classes, mixing)
        topic = BytesTopic(log)
        member = MixingMember(s, MixMetrics(CollectorRegistry()),
                              topic_factory=lambda k, t, topic=topic: topic)  # fmt: skip
        topic.member, topic.delay = member, delay
        members.append((member, build_learner(s.learner)))
        bound = s.mixing.ahead_records
        level = bound is not None and bound < every  # (b must not wait for a: one process)
    hooks = 0.0

    def hook(fn: Any, *args: Any) -> None:
        nonlocal hooks
        t0 = time.process_time()
        fn(*args)
        hooks += time.process_time() - t0

    for member, learner in members:
        hook(member.join, learner, {})
    halves, at, correct, turn = [recs[0::2], recs[1::2]], [0, 0], 0, 0
    while any(at[i] < len(halves[i]) for i in range(2)):
        for i, (member, learner) in enumerate(members):
            # (with ahead_records the members stay level: b, ahead, would wait for a's delta,
            # which cannot come in one process)
            if at[i] >= len(halves[i]) or (i == 0 and turn in LEAD_TURNS and not level):
                continue
            hook(member.before_batch, learner, {})
            take = halves[i][at[i] : at[i] + member.room(batch)]
            at[i] += len(take)
            member.took(len(take))
            for rec in take:
                ok, outcome = predict_learn(learner, rec)
                correct += ok
                member.kept.append((rec.x, rec.y, outcome))
            hook(member.after_batch, learner, {})
        turn += 1
    mix = members[0][0].log
    ks = [r.every for r in mix.results if r.every is not None]
    return {
        "hooks_us": 1e6 * hooks / mix.examples, "correct": correct, "rounds": len(mix.results),
        "k_mean": statistics.fmean(ks) if ks else float(every),
        "equal": not mix.mismatches and mix.digest == members[1][0].log.digest,
        "unpublished": sum(m.rebase_unpublished for m, _ in members)
        / max(sum(m.rebases for m, _ in members), 1),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=60_000)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--every", type=int, nargs="+", default=[250, 500], help="fixed Ks")
    ap.add_argument(
        "--max-every", type=int, default=4000,
        help="adaptive K from the first --every up to this (0: no adaptive arm)",
    )  # fmt: skip
    ap.add_argument("--batch", type=int, default=60, help="records per batch at most")
    ap.add_argument(
        "--ahead",
        type=int,
        nargs="+",
        default=[],
        help="mixing.ahead_records of the fixed K arms (an arm per value)",
    )
    ap.add_argument("--delay", type=int, nargs="+", default=[0],
                    help="records a member learns after its publish before the log's news "
                    "reach it (0: at its next batch; K: a daemon member on a loaded "
                    "machine)")  # fmt: skip
    _table.add_out(ap)
    args = ap.parse_args(argv)
    header = _table.machine()
    arms: list[tuple[str, int, int | None, int, int | None]] = []
    for delay in args.delay:
        tag = f", news after {delay}" if delay else ""
        arms += [(f"K = {k}{f', ahead {a}' if a is not None else ''}{tag}", k, None, delay, a)
                 for k in args.every for a in args.ahead or [None]]  # fmt: skip
        if args.max_every:
            k0 = args.every[0]
            arms.append((f"adaptive K, {k0}-{args.max_every}{tag}", k0, args.max_every, delay,
                         None))  # fmt: skip
    per_seed: list[list[object]] = []
    summary: dict[str, list[dict[str, float]]] = {label: [] for label, *_ in arms}
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        recs, classes = stream(args.records, seed)
        n = len(recs)
        single = alone(recs, classes) / n
        independent = (alone(recs[0::2], classes) + alone(recs[1::2], classes)) / n
        for label, every, max_every, delay, ahead in arms:
            r = group(recs, classes, every, max_every, args.batch, delay, ahead)
            merged = r["correct"] / n
            row = {"hooks": r["hooks_us"], "merged": merged, "single": single,
                   "indep": independent, "k": r["k_mean"]}  # fmt: skip
            summary[label].append(row)
            per_seed.append([
                seed, label, f"{r['hooks_us']:.2f}", r["rounds"], f"{r['k_mean']:.0f}",
                f"{100 * merged:.2f}", f"{100 * single:.2f}", f"{100 * independent:.2f}",
                f"{100 * (merged - single):+.2f}", f"{100 * (merged - independent):+.2f}",
                f"{r['unpublished']:.0f}", "yes" if r["equal"] else "NO",
            ])  # fmt: skip
            print(*per_seed[-1], file=sys.stderr, flush=True)
    rows = []
    for label, *_ in arms:
        runs = summary[label]
        d_single = [100 * (x["merged"] - x["single"]) for x in runs]
        d_indep = [100 * (x["merged"] - x["indep"]) for x in runs]
        rows.append([
            label, f"{statistics.median(x['hooks'] for x in runs):.2f}",
            f"{statistics.fmean(x['k'] for x in runs):.0f}",
            f"{statistics.fmean(d_single):+.2f} ({min(d_single):+.2f} to {max(d_single):+.2f})",
            f"{statistics.fmean(d_indep):+.2f} ({min(d_indep):+.2f} to {max(d_indep):+.2f})",
            f"{sum(d > -0.5 for d in d_single)} / {len(runs)}",
            f"{sum(d > 0 for d in d_indep)} / {len(runs)}",
        ])  # fmt: skip
    summary_head = [
        "arm",
        "hooks µs / record",
        "K mean",
        "merged − single",
        "merged − independent",
        "within 0.5 of single",
        "above independent",
    ]
    seed_head = [
        "seed",
        "arm",
        "hooks µs / record",
        "rounds",
        "K mean",
        "merged %",
        "single %",
        "independent %",
        "merged − single",
        "merged − independent",
        "unpublished at rebase",
        "digests equal",
    ]
    body = (
        f"{header}. kernel-drift (4 inputs, six phases), {args.records:,} records, 2 members in "
        f"one process (the daemon's hooks, an in-memory mix topic of encoded records), batches "
        f"of up to {args.batch} records, seeds {args.first_seed}-"
        f"{args.first_seed + args.seeds - 1}, the default bank and "
        f"staleness. Hooks: the members' hooks' CPU (process time) per learned record, median "
        f"over seeds; accuracy differences in points, mean (range) over seeds.\n\n"
        + _table.markdown(summary_head, rows)
        + "\n\n"
        + _table.markdown(seed_head, per_seed)
    )
    _table.publish("mixing_rounds", "A mixing group's rounds in one process: K against CPU and "
                   "accuracy", body, _table.documented_run(ap, args), args.out)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
