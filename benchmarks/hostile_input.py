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
from _table import add_out, documented_run, machine, markdown, publish  # noqa: E402

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


def run(
    name: str, bootstrap: str, stream: list[tuple[bytes, str, str | None]], rate: float,
    extra: dict[str, Any], workdir: Path, exact: bool,
) -> dict[str, Any]:  # fmt: skip
    topic = f"hostile-{name.replace(' ', '-').replace(',', '')}-{uuid.uuid4().hex[:6]}"
    ensure_topics(bootstrap, {topic: 1, f"{topic}.predictions": 1, f"{topic}.dead-letters": 1})
    ck, port = workdir / topic, free_port()
    log = open(workdir / f"{topic}.log", "wb")
    proc = subprocess.Popen(daemon_argv(bootstrap, topic, ck, port, extra), stdout=log,
                            stderr=subprocess.STDOUT)  # fmt: skip
    log.close()
    deadline = time.monotonic() + 120
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
    print(f"[{name}] producing {len(stream):,} records at {rate:,.0f}/s", flush=True)
    peak = PeakRSS(proc.pid)
    values = [v for v, _, _ in stream]
    sent_for = produce_paced(bootstrap, topic, values, rate)
    _, status, usage = os.wait4(proc.pid, 0)
    peak.stop()
    code = os.waitstatus_to_exitcode(status)
    proc.returncode = code
    if code != 0:  # say why in the run's output (the work directory is temporary)
        print("DAEMON LOG TAIL:\n" + (workdir / f"{topic}.log").read_text()[-6000:], flush=True)
    info = inspect_checkpoint(ck)
    good_offsets = [i for i, (_, _, r) in enumerate(stream) if r is None]
    n_bad = len(stream) - len(good_offsets)
    inputs = read_all(bootstrap, topic, len(stream))
    preds = read_all(bootstrap, f"{topic}.predictions", len(good_offsets))
    dead = read_all(bootstrap, f"{topic}.dead-letters", n_bad if exact else 0, timeout=30)
    in_ts = {m.offset(): m.timestamp()[1] for m in inputs}
    per_offset = collections.Counter()
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
        "cpu_s": usage.ru_utime + usage.ru_stime,
    }


def verdict(ok: bool) -> str:
    return "MET" if ok else "**MISSED**"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bad", type=int, default=100_000)
    ap.add_argument("--good", type=int, default=20_000)
    ap.add_argument("--rate", type=float, default=5_000.0, help="records per second produced")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rss-bound", type=float, default=1024.0, help="MiB (the stated bound)")
    ap.add_argument("--default-limits", action="store_true", help="add the default-limits run")
    ap.add_argument("--quick", action="store_true", help="5,000 attacks, 2,000 good records")
    add_out(ap)
    args = ap.parse_args()
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
