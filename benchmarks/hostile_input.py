"""Hostile input through the real daemon: 100,000 attacks among good records, nothing breaks.

One embedded broker (Tansu) and the real daemon (``streammkl run``, a child process, default
learner, librdkafka clients). The stream is ``simulators.hostile``: good two-class records with
``--bad`` attacks spread among them (feature floods, label floods, long names / labels / ids,
oversized records and vectors, deep nesting, huge numbers, NaN / Infinity, wrong types,
truncated and binary payloads). Records are produced at ``--rate`` per second while the daemon
runs, so that the latency of each good record is its own, not a backlog's.

Runs, each a fresh daemon on a fresh topic:

- ``clean``: the good records alone (at the good records' rate in the attacked run);
- ``attack``: the hostile stream, with the settings under which every attack has a known reason
  (``simulators.hostile.HOSTILE_SETTINGS``: the model may hold the good stream's 2 classes and
  16 inputs);
- ``attack, default limits`` (``--default-limits``): the same stream with the daemon's default
  limits, where the label floods and feature overflows are admitted until the model's limits
  (1,000 classes, 10,000 inputs, 4 M cells) stop them: memory and time stay bounded, the model
  is not the clean one, and the cost of the grown model shows in the latency.

Growth runs (``--growth``, instead of the three above): benign streams whose models widen
legitimately (``simulators.growth``), preloaded on a fresh topic and then read by a fresh daemon
with the default limits, so that the rates are the daemon's own:

- ``growing vocabulary``: 10,000 records (``--quick``: 2,500) whose vocabulary grows evenly to
  5,000 words; dead letters by reason (target: none ``over_work_budget``), records/s;
- ``growth bursts``: 10,000 normal records, then 9,500 (``--quick``: 5,000 and 5,000) of which
  1 % bring 100 new names each; the normal records' rate before the bursts start (from the
  fifth of the first part on: the start is warm-up) vs after (target: >= 50 %), dead letters;
  twice more as diagnostics (the monitor's window off, the monitor off), and where the time
  goes: the same stream through the daemon's learner in this process, a round's time by kind
  of record and a profile of the normal rounds at the final width.

Rates come from the predictions' CreateTime (the daemon produces one per record as it is
learned). The documented growth run (``--growth``, every other option at its default) writes
its section into ``benchmarks/results/hostile_input.md`` below the attack runs' report.

Checks (each printed as MET / MISSED): the daemon never dies (exit 0, one process per run); every
good record learned exactly once (examples learned = good records, one prediction each, and the
model digest equal to the clean run's); every attack in the dead-letter topic with its reason;
peak RSS (the daemon's ``VmHWM``, sampled while it runs) below ``--rss-bound``. Latency: a good
record's prediction CreateTime minus its input CreateTime (ms; the daemon's producer lingers up
to 20 ms).
Writes ``benchmarks/results/hostile_input.md`` on the documented run (the defaults plus
``--default-limits``); any other run prints its report (or writes it where ``--out`` says).

    python benchmarks/hostile_input.py [--bad 100000] [--good 20000] [--rate 5000]
        [--default-limits] [--quick]
    python benchmarks/hostile_input.py --growth [--quick]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
import warnings
from pathlib import Path
from typing import Any

import numpy as np

warnings.filterwarnings("ignore", category=DeprecationWarning)

import confluent_kafka  # noqa: E402
from _table import RESULTS, add_out, documented_run, machine, markdown, publish  # noqa: E402

from simulators.growth import BASE_WORDS, growing_vocabulary, growth_bursts  # noqa: E402
from simulators.hostile import ATTACKS, HOSTILE_SETTINGS, hostile_stream  # noqa: E402
from streammkl.daemon.checkpoints.inspection import inspect_checkpoint  # noqa: E402
from streammkl.daemon.commands.broker import EmbeddedBroker, free_port  # noqa: E402
from streammkl.daemon.config import Settings  # noqa: E402
from streammkl.daemon.kafka.topics import ensure_topics  # noqa: E402

FAST = {"kafka.session_timeout_ms": 2000, "kafka.heartbeat_interval_ms": 500}


def daemon_argv(
    bootstrap: str, topic: str, ck: Path, port: int, extra: dict[str, Any]
) -> list[str]:
    argv = [
        sys.executable, "-m", "streammkl.daemon", "run", "--bootstrap-servers", bootstrap,
        "--topic", topic, "--group-id", f"g-{uuid.uuid4().hex[:6]}", "--checkpoint-dir", str(ck),
        "--metrics-port", str(port), "--exit-when-idle", "4",
    ]  # fmt: skip
    settings = {
        **FAST,
        "kafka.predictions_topic": f"{topic}.predictions",
        "kafka.dead_letter_topic": f"{topic}.dead-letters",
        **extra,
    }
    for key, value in settings.items():
        argv += ["--set", f"{key}={json.dumps(value)}"]
    return argv


class PeakRSS:
    """The peak resident memory of a running process: its ``VmHWM`` (``/proc``), read every
    0.1 s until it exits. (Not ``wait4``'s ``ru_maxrss``: on Linux that keeps the RSS of the
    image before ``exec``, i.e. this benchmark's own memory at the fork.)"""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.mib = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.is_set():
            try:
                with open(f"/proc/{self.pid}/status") as fh:
                    for line in fh:
                        if line.startswith("VmHWM:"):
                            self.mib = max(self.mib, int(line.split()[1]) / 1024)
            except OSError:
                return
            self._done.wait(0.1)

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def produce_paced(bootstrap: str, topic: str, values: list[bytes], rate: float) -> float:
    """Send ``values`` in order at ``rate`` per second (idempotent: the order is the offsets');
    returns the seconds it took."""
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 2,
         "message.max.bytes": 4 << 20, "queue.buffering.max.messages": 1_000_000}
    )  # fmt: skip
    start = time.perf_counter()
    for i, value in enumerate(values):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 50 == 49:
            producer.poll(0)
            ahead = start + (i + 1) / rate - time.perf_counter()
            if ahead > 0:
                time.sleep(ahead)
    left = producer.flush(120)
    if left:
        raise RuntimeError(f"{left} records not acknowledged")
    return time.perf_counter() - start


def read_all(bootstrap: str, topic: str, expect: int, timeout: float = 120) -> list[Any]:
    """Every message of a one-partition topic (waits for at least ``expect``)."""
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex[:6]}",
         "enable.auto.commit": False, "fetch.message.max.bytes": 8 << 20}
    )  # fmt: skip
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    quiet = 0
    while time.monotonic() < deadline and (len(out) < expect or quiet < 3):
        batch = consumer.consume(5000, 0.5)
        good = [m for m in batch if m.error() is None]
        out += good
        quiet = 0 if good else quiet + 1
    consumer.close()
    return out


def start_daemon(
    bootstrap: str, topic: str, workdir: Path, extra: dict[str, Any]
) -> tuple[subprocess.Popen[bytes], Path]:
    """A fresh daemon on ``topic`` (its log in ``workdir``), once it is ready; returns the
    process and its checkpoint directory."""
    ck, port = workdir / topic, free_port()
    log = open(workdir / f"{topic}.log", "wb")
    proc = subprocess.Popen(daemon_argv(bootstrap, topic, ck, port, extra), stdout=log,
                            stderr=subprocess.STDOUT)  # fmt: skip
    log.close()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:  # ready: partitions assigned, broker connected
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
                if resp.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"daemon exited early: {(workdir / f'{topic}.log').read_text()}")
        time.sleep(0.2)
    return proc, ck


def wait_daemon(proc: subprocess.Popen[bytes], log: Path) -> tuple[int, float]:
    """Wait for the daemon's (idle) exit; its exit code and CPU seconds. A failed run prints
    the tail of its log (the work directory is temporary)."""
    _, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    proc.returncode = code
    if code != 0:
        print("DAEMON LOG TAIL:\n" + log.read_text()[-6000:], flush=True)
    return code, usage.ru_utime + usage.ru_stime


def run(
    name: str, bootstrap: str, stream: list[tuple[bytes, str, str | None]], rate: float,
    extra: dict[str, Any], workdir: Path, exact: bool,
) -> dict[str, Any]:  # fmt: skip
    topic = f"hostile-{name.replace(' ', '-').replace(',', '')}-{uuid.uuid4().hex[:6]}"
    ensure_topics(bootstrap, {topic: 1, f"{topic}.predictions": 1, f"{topic}.dead-letters": 1})
    proc, ck = start_daemon(bootstrap, topic, workdir, extra)
    print(f"[{name}] producing {len(stream):,} records at {rate:,.0f}/s", flush=True)
    peak = PeakRSS(proc.pid)
    values = [v for v, _, _ in stream]
    sent_for = produce_paced(bootstrap, topic, values, rate)
    code, cpu_s = wait_daemon(proc, workdir / f"{topic}.log")
    peak.stop()
    info = inspect_checkpoint(ck)
    good_offsets = [i for i, (_, _, r) in enumerate(stream) if r is None]
    n_bad = len(stream) - len(good_offsets)
    inputs = read_all(bootstrap, topic, len(stream))
    preds = read_all(bootstrap, f"{topic}.predictions", len(good_offsets))
    dead = read_all(bootstrap, f"{topic}.dead-letters", n_bad if exact else 0, timeout=30)
    in_ts = {m.offset(): m.timestamp()[1] for m in inputs}
    per_offset: collections.Counter[int] = collections.Counter()
    latency = []
    for m in preds:
        p = json.loads(m.value())
        per_offset[p["offset"]] += 1
        if stream[p["offset"]][2] is None and per_offset[p["offset"]] == 1:
            latency.append(m.timestamp()[1] - in_ts[p["offset"]])
    letters = {}
    for m in dead:
        h = dict(m.headers() or [])
        letters[int(h["source_offset"])] = h["reason"].decode()
    wrong = missing = 0
    for i, (_, _, reason) in enumerate(stream):
        if reason is not None and exact:
            got = letters.get(i)
            missing += got is None
            wrong += got is not None and got != reason
    lat = np.asarray(latency, dtype=float)
    return {
        "name": name,
        "records": len(stream),
        "good": len(good_offsets),
        "bad": n_bad,
        "exit": code,
        "rss_mib": peak.mib,
        "seconds": sent_for,
        "p50": float(np.percentile(lat, 50)) if lat.size else float("nan"),
        "p99": float(np.percentile(lat, 99)) if lat.size else float("nan"),
        "max": float(lat.max()) if lat.size else float("nan"),
        "learned": info["examples_learned"],
        "digest": info["model_digest"],
        "rejected": info["rejected_by_reason"],
        "predicted_good": sum(1 for o in good_offsets if per_offset[o] >= 1),
        "duplicates": sum(c - 1 for c in per_offset.values()),
        "predicted_bad": sum(1 for o in per_offset if stream[o][2] is not None),
        "dead_letters": len(letters),
        "wrong_reason": wrong,
        "missing": missing,
        "cpu_s": cpu_s,
    }


def verdict(ok: bool) -> str:
    return "MET" if ok else "**MISSED**"


def run_preloaded(
    name: str, bootstrap: str, values: list[bytes], workdir: Path, extra: dict[str, Any]
) -> dict[str, Any]:  # fmt: skip
    """``values`` produced first, then read by a fresh daemon (default limits, settings
    ``extra``) until it is idle: each record's prediction CreateTime (ms, by offset), the dead
    letters by reason, the checkpoint's counters, peak RSS and CPU."""
    topic = f"growth-{name.replace(' ', '-').replace(',', '')}-{uuid.uuid4().hex[:6]}"
    ensure_topics(bootstrap, {topic: 1, f"{topic}.predictions": 1, f"{topic}.dead-letters": 1})
    produce_paced(bootstrap, topic, values, rate=1e12)  # as fast as the producer goes
    print(f"[{name}] {len(values):,} records produced; the daemon reads them", flush=True)
    proc, ck = start_daemon(bootstrap, topic, workdir, extra)
    peak = PeakRSS(proc.pid)
    code, cpu_s = wait_daemon(proc, workdir / f"{topic}.log")
    peak.stop()
    info = inspect_checkpoint(ck)
    preds = read_all(bootstrap, f"{topic}.predictions", info["examples_learned"])
    dead = read_all(bootstrap, f"{topic}.dead-letters", info["dead_letters"], timeout=30)
    ts: dict[int, int] = {}
    for m in preds:
        ts.setdefault(json.loads(m.value())["offset"], m.timestamp()[1])
    reasons = collections.Counter(dict(m.headers() or [])["reason"].decode() for m in dead)
    return {
        "name": name, "records": len(values), "exit": code, "rss_mib": peak.mib,
        "cpu_s": cpu_s, "learned": info["examples_learned"], "ts": ts,
        "dead_letters": dict(reasons), "rejected": info["rejected_by_reason"],
    }  # fmt: skip


def rate(ts: dict[int, int], first: int, last: int, count: int) -> float:
    """``count`` records per second between the predictions of offsets ``first`` and ``last``."""
    if first not in ts or last not in ts:
        return float("nan")
    seconds = (ts[last] - ts[first]) / 1000
    return count / seconds if seconds > 0 else float("inf")


def burst_figures(
    ts: dict[int, int], n_before: int, n_after: int, growth_at: list[int]
) -> dict[str, float]:
    """The growth-bursts run's rates from its prediction timestamps: ``before``, normal records/s
    from record ``n_before // 5`` (the start is warm-up) to the end of the first part; ``after``,
    the second part's normal records over the whole second part (growth records' time
    included: that is what the normal records' rate keeps)."""
    warm, end = n_before // 5, n_before + n_after - 1
    before = rate(ts, warm, n_before - 1, n_before - 1 - warm)
    after = rate(ts, n_before - 1, end, n_after - len(growth_at))
    return {"before": before, "after": after,
            "kept": after / before if before > 0 else float("nan")}  # fmt: skip


def where_the_time_goes(
    values: list[bytes], growth_at: list[int], n_before: int, top: int = 5
) -> tuple[list[list[object]], list[list[object]]]:
    """The growth-bursts stream through the daemon's learner in this process (the default
    learner, one ``learn_predict_many`` call per record, no Kafka, no monitor): the time of a
    round by kind of record (before the bursts, normal ones after, growth ones; the first and
    last 200 normal ones after) and a profile of the last 500 normal rounds (the ``top``
    functions by own time). The daemon's timestamps cannot split the time: it learns runs of
    records and produces their predictions after each run."""
    import cProfile
    import pstats

    from streammkl import wire
    from streammkl.daemon.config import load_settings
    from streammkl.daemon.learning.building import build_learner
    from streammkl.river import MKLClassifier

    xs: list[Any] = []
    ys: list[Any] = []
    for value in values:
        record = wire.decode(value)
        if isinstance(record, wire.DecodeError):
            raise ValueError(f"a growth record does not decode: {record}")
        xs.append(record.x)
        ys.append(record.y)
    learner = build_learner(load_settings(env={}).learner)
    if not isinstance(learner, MKLClassifier):
        raise TypeError(f"the default learner is {type(learner).__name__}, not MKLClassifier")
    rounds_of = learner.rounds
    rounds_of().learn_predict_many(xs[:10], ys[:10], validated=True)  # classes known, compiled
    grows = set(growth_at)
    seconds = np.empty(len(xs))
    for i in range(10, len(xs)):
        start = time.perf_counter()
        rounds_of().learn_predict_many(xs[i : i + 1], ys[i : i + 1], validated=True)
        seconds[i] = time.perf_counter() - start
    first = np.arange(len(xs)) >= max(10, n_before // 5)
    before = seconds[first & (np.arange(len(xs)) < n_before)]
    normal = np.array([seconds[i] for i in range(n_before, len(xs)) if i not in grows])
    growth = seconds[sorted(grows)]

    def row(what: str, s: np.ndarray) -> list[object]:
        return [what, len(s), f"{np.median(s) * 1e6:,.0f}", f"{s.mean() * 1e6:,.0f}",
                f"{s.sum():.2f}"]  # fmt: skip

    kinds = [
        row("normal, before the bursts", before),
        row("normal, after", normal),
        row("normal, after: the first 200", normal[:200]),
        row("normal, after: the last 200", normal[-200:]),
        row("growth (100 new names)", growth),
    ]
    tail = [i for i in range(n_before, len(xs)) if i not in grows][-500:]
    profiler = cProfile.Profile()
    profiler.enable()
    for i in tail:  # the same records once more, at the model's final width
        rounds_of().learn_predict_many(xs[i : i + 1], ys[i : i + 1], validated=True)
    profiler.disable()
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in stats.values())
    root = str(Path(__file__).resolve().parent.parent) + os.sep
    ranked = sorted(stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    functions: list[list[object]] = [
        [f"`{file.replace(root, '')}:{line} {func}`", f"{v[2] / len(tail) * 1e6:,.0f}",
         f"{v[2] / total:.0%}"]
        for (file, line, func), v in ranked
    ]  # fmt: skip
    return kinds, functions


#: The growth-bursts stream again with the regret monitor's comparator window off, and with the
#: monitor off: where the normal records' time goes after the bursts (diagnostic runs, no target).
BURST_DIAGNOSTICS: dict[str, dict[str, Any]] = {
    "growth bursts, monitor.window = 0": {"monitor.window": 0},
    "growth bursts, monitor off": {"monitor.enabled": False},
}


def growth_main(args: argparse.Namespace, host: str) -> int:
    """The two growth scenarios (``--growth``): a vocabulary growing to 5,000 words, and 1 % of
    records bringing 100 new names each; both with the daemon's default limits."""
    n_vocab = 2_500 if args.quick else 10_000
    n_before, n_after = (5_000, 5_000) if args.quick else (10_000, 9_500)
    vocab = list(growing_vocabulary(n_vocab, 5_000, seed=args.seed))
    bursts = list(growth_bursts(n_before, n_after, seed=args.seed))
    burst_values = [v for v, _ in bursts]
    growth_at = [i for i, (_, grows) in enumerate(bursts) if grows]
    broker = None
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP")
    with tempfile.TemporaryDirectory(prefix="streammkl-growth-") as tmp:
        workdir = Path(tmp)
        if not bootstrap:
            broker = EmbeddedBroker(log_path=workdir / "tansu.log").start()
            bootstrap = broker.bootstrap_servers
        try:
            a = run_preloaded("growing vocabulary", bootstrap, vocab, workdir, {})
            b = run_preloaded("growth bursts", bootstrap, burst_values, workdir, {})
            diagnostics = [
                run_preloaded(name, bootstrap, burst_values, workdir, extra)
                for name, extra in BURST_DIAGNOSTICS.items()
            ]
        finally:
            if broker is not None:
                broker.stop(kill=True)

    a_ts = a["ts"]
    a_rate = rate(a_ts, min(a_ts), max(a_ts), len(a_ts) - 1) if len(a_ts) > 1 else float("nan")
    figures = {r["name"]: burst_figures(r["ts"], n_before, n_after, growth_at)
               for r in [b, *diagnostics]}  # fmt: skip
    kept = figures[b["name"]]["kept"]
    checks = [
        ("growing vocabulary: no record dead-lettered `over_work_budget`",
         a["dead_letters"].get("over_work_budget", 0) == 0),
        ("growth bursts: normal records keep >= 50 % of their rate after the bursts start",
         bool(kept >= 0.5)),
    ]  # fmt: skip
    other = [
        ("every run exits 0", all(r["exit"] == 0 for r in [a, b, *diagnostics])),
        ("growing vocabulary: every record learned", a["learned"] == a["records"]),
        ("growth bursts: every record learned", b["learned"] == b["records"]),
    ]

    def letters(r: dict[str, Any]) -> str:
        return ", ".join(f"{k}: {v:,}" for k, v in sorted(r["dead_letters"].items())) or "none"

    rows = [
        [r["name"], r["records"], r["learned"], letters(r), r["exit"], f"{r['rss_mib']:.0f}",
         f"{r['cpu_s']:.0f}"]
        for r in [a, b, *diagnostics]
    ]  # fmt: skip
    burst_rows = [
        [name, f"{f['before']:,.0f}", f"{f['after']:,.0f}", f"{f['kept']:.1%}"]
        for name, f in figures.items()
    ]
    print("[growth bursts] the learner alone, in this process: where the time goes", flush=True)
    kinds, functions = where_the_time_goes(burst_values, growth_at, n_before)
    body = "\n\n".join(
        [
            f"Machine: {host}. Default limits (`limits.max_model_features` 10,000, "
            f"`limits.max_record_work` {Settings().limits.max_record_work:,} cells), default "
            "learner and clients; each stream preloaded on a fresh topic, then read by a fresh "
            "daemon until idle. Rates from the predictions' CreateTime (one per record, ms). "
            f"Streams (`simulators.growth`, seed {args.seed}): growing vocabulary: {n_vocab:,} "
            "records, vocabulary growing evenly to 5,000 words (+ `x1`, `x2`); growth bursts: "
            f"{n_before:,} normal records (3 of 20 base words), then {n_after:,} of which "
            f"{len(growth_at)} (1 %) bring 100 new names each. The last two runs are diagnostics "
            "of the growth bursts (no target): the same stream with the regret monitor's "
            "comparator window off, and with the monitor off.",
            markdown(
                [
                    "run",
                    "records",
                    "learned",
                    "dead letters by reason",
                    "exit",
                    "peak RSS MiB",
                    "daemon CPU s",
                ],
                rows,
            ),
            f"Growing vocabulary: {a_rate:,.0f} records/s (first to last prediction).",
            "Growth bursts: normal records/s before (records "
            f"{n_before // 5:,} to {n_before - 1:,}) and after (the second part's "
            f"{n_after - len(growth_at):,} normal records over the whole second part, the growth "
            "records' time included):",
            markdown(["run", "before /s", "after /s", "after / before"], burst_rows),
            "Where the time goes: the same stream through the daemon's learner in this process "
            "(default learner, one round per call, no Kafka, no monitor); microseconds a round "
            "by kind of record (the daemon's timestamps cannot split it: it learns runs of "
            "records and produces their predictions after each run):",
            markdown(["records", "rounds", "median us", "mean us", "total s"], kinds),
            "The last 500 normal rounds once more, at the model's final width "
            f"({BASE_WORDS + 2 + 100 * len(growth_at):,} inputs), profiled (own time):",
            markdown(["function", "us a round", "share"], functions),
            "| check | result |\n|---|---|\n"
            + "\n".join(f"| {what} | {verdict(ok)} |" for what, ok in checks + other),
        ]
    )
    title = "Growth the limits promise (`--growth`)"
    print(f"\n## {title}\n")
    if args.documented and args.out is None:
        write_section(title, body)
    else:
        publish("hostile_input_growth", title, body, False, args.out)
    return 0 if all(ok for _, ok in checks + other) else 1


def write_section(title: str, body: str) -> None:
    """Put the growth runs' report into ``benchmarks/results/hostile_input.md`` as its last
    section (replacing an earlier one), leaving the attack runs' report above it as it is."""
    path = RESULTS / "hostile_input.md"
    text = (
        path.read_text() if path.exists() else "# Hostile input: attacks through the real daemon\n"
    )
    head = text.split(f"\n## {title}\n")[0].rstrip("\n")
    path.write_text(f"{head}\n\n## {title}\n\n{body}\n")
    print(body)
    print(f"\nwritten to {path} (section {title!r})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bad", type=int, default=100_000)
    ap.add_argument("--good", type=int, default=20_000)
    ap.add_argument("--rate", type=float, default=5_000.0, help="records per second produced")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rss-bound", type=float, default=1024.0, help="MiB (the stated bound)")
    ap.add_argument("--default-limits", action="store_true", help="add the default-limits run")
    ap.add_argument(
        "--quick",
        action="store_true",
        help="5,000 attacks, 2,000 good records "
        "(with --growth: 2,500 records to 5,000 words; 5,000 + 5,000 with bursts)",
    )
    ap.add_argument(
        "--growth",
        action="store_true",
        help="run the two growth scenarios (default limits) instead of the attacks",
    )
    add_out(ap)
    args = ap.parse_args()
    if args.growth:
        args.documented = documented_run(ap, args, growth=True)
        return growth_main(args, machine())
    args.documented = documented_run(ap, args, default_limits=True)
    if args.quick:
        args.bad, args.good = 5_000, 2_000
    host = machine()
    print(f"generating {args.bad:,} attacks among {args.good:,} good records", flush=True)
    stream = list(hostile_stream(args.good, args.bad, seed=args.seed))
    good = [s for s in stream if s[2] is None]
    good_rate = args.rate * len(good) / len(stream)
    broker = None
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP")
    results = []
    with tempfile.TemporaryDirectory(prefix="streammkl-hostile-") as tmp:
        workdir = Path(tmp)
        if not bootstrap:
            broker = EmbeddedBroker(log_path=workdir / "tansu.log").start()
            bootstrap = broker.bootstrap_servers
        try:
            results.append(run("clean", bootstrap, good, good_rate, HOSTILE_SETTINGS, workdir,
                               exact=True))  # fmt: skip
            results.append(run("attack", bootstrap, stream, args.rate, HOSTILE_SETTINGS, workdir,
                               exact=True))  # fmt: skip
            if args.default_limits:
                results.append(run("attack, default limits", bootstrap, stream, args.rate, {},
                                   workdir, exact=False))  # fmt: skip
        finally:
            if broker is not None:
                broker.stop(kill=True)
    clean, attack = results[0], results[1]
    kinds = collections.Counter(kind for _, kind, _ in stream)
    sizes: dict[str, list[int]] = collections.defaultdict(list)
    for value, kind, _ in stream:
        sizes[kind].append(len(value))

    rows = [[
        r["name"], r["records"], r["good"], r["bad"], r["exit"], f"{r['rss_mib']:.0f}",
        f"{r['p50']:.0f}", f"{r['p99']:.0f}", f"{r['max']:.0f}", r["learned"],
        r["predicted_good"], r["duplicates"], r["predicted_bad"], r["dead_letters"],
        f"{r['cpu_s']:.0f}",
    ] for r in results]  # fmt: skip
    table = markdown(
        ["run", "records", "good", "attacks", "exit", "peak RSS MiB", "good p50 ms",
         "good p99 ms", "good max ms", "learned", "good predicted", "duplicates",
         "attacks predicted", "dead letters", "daemon CPU s"],
        rows,
    )  # fmt: skip
    limits = Settings().records
    expected_by_reason = collections.Counter(r for _, _, r in stream if r is not None)
    checks = [
        ("no crash: the daemon exits 0, in one process per run",
         all(r["exit"] == 0 for r in results)),
        ("every good record learned once: learned = good, each predicted once",
         attack["learned"] == attack["good"] == attack["predicted_good"]
         and attack["duplicates"] == 0),
        ("no attack reached the model: digest = the clean run's",
         attack["digest"] == clean["digest"]),
        ("no attack predicted", attack["predicted_bad"] == 0),
        ("every attack in the dead-letter topic with its reason",
         attack["missing"] == 0 and attack["wrong_reason"] == 0
         and attack["dead_letters"] == attack["bad"]),
        ("counts by reason in the checkpoint = the expected ones",
         attack["rejected"] == dict(expected_by_reason)),
        (f"peak RSS of every run < {args.rss_bound:.0f} MiB",
         all(r["rss_mib"] < args.rss_bound for r in results)),
    ]  # fmt: skip
    attack_rows = [
        [kind, kinds[kind], reason, f"{np.mean(sizes[kind]):,.0f}", f"{max(sizes[kind]):,}"]
        for kind, (_, reason, _) in ATTACKS.items()
        if kinds[kind]
    ]
    body = "\n\n".join(
        [
            f"Machine: {host}. {len(stream):,} records ({args.bad:,} attacks, {args.good:,} good, "
            f"seed {args.seed}) produced at {args.rate:,.0f}/s (the clean run: the good records at "
            f"{good_rate:,.0f}/s); daemon: `streammkl run`, default learner and clients, "
            f"settings {HOSTILE_SETTINGS} (and the defaults in the last run, if any). "
            "Latency: prediction CreateTime - input CreateTime of each good record (ms).",
            table,
            "| check | result |\n|---|---|\n"
            + "\n".join(f"| {what} | {verdict(ok)} |" for what, ok in checks),
            "Attacks (expected reason under the settings above; sizes in bytes):\n\n"
            + markdown(["attack", "count", "reason", "mean size", "max size"], attack_rows),
            f"Record limits in force (defaults): {limits.max_bytes:,} bytes, "
            f"{limits.max_features:,} features, {limits.max_tokens:,} tokens, "
            f"{limits.max_vector_length:,} vector values, names / labels / ids of "
            f"{limits.max_name_length} characters, |value| <= {limits.max_abs_value:g}.",
            "p99 latency of good records, attack vs clean: "
            f"{attack['p99']:.0f} ms vs {clean['p99']:.0f} ms "
            f"(p50 {attack['p50']:.0f} vs {clean['p50']:.0f} ms).",
        ]
    )
    publish("hostile_input", "Hostile input: attacks through the real daemon", body,
            args.documented, args.out)  # fmt: skip
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
