"""Where a mixing group's CPU per learned record goes (issue 28, item 1).

Runs the quick form's daemons (:mod:`scale_out`: the embedded broker, the kernel-drift stream in
6 partitions, the default bank, K = 250) once as **one member alone** and once as a **merged
group** of ``--members``, and splits every daemon's CPU inside the learning window (the span
of its predictions' timestamps, as ``scale_out.py`` counts it):

- by OS thread, from ``/proc/<pid>/task/<tid>/stat`` (user + system; every thread, native ones
  included: librdkafka's, the learner's compiled rounds), sampled every 0.1 s;
- the loop thread's CPU by what it was doing, from ``py-spy record --threads --gil`` samples
  of every daemon (only samples of the thread that holds the GIL: without ``--gil`` py-spy
  counted a thread waiting in ``Future.result``, in librdkafka's ``consume`` with a timeout or
  for the GIL as on-CPU, and those waits took most of the "rest" and "poll" parts), each
  sample put in the first part of :data:`PARTS` (in their order) whose marker one of its
  frames holds, so that the reader's poll inside a round's wait counts as the poll and a
  wait's own loop as the wait; samples outside the loop's iterations (imports, start-up,
  numba's warm-up, the join, the leave) are left out, and the parts share the loop thread's
  measured CPU in proportion to their samples.

Threads are named by py-spy (Python threads: ``MainThread`` is the loop,
``streammkl-learn_0`` the learner, ``kafka-io...`` and ``kafka-python-producer...`` the mix
topic's kafka-python clients) or by the OS (librdkafka's ``rdk:`` threads).
Writes ``benchmarks/results/group_cpu.md`` (a partial run, ``--records`` below 60,000 or
``--out``: not into results/).

    python benchmarks/group_cpu.py [--members 2] [--records 60000] [--rate 250] [--vs ../main]

Needs py-spy (in the dev extra; ``pip install py-spy``) and the right to trace the daemons (root, or
``ptrace_scope`` 0).
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _table  # noqa: E402
import scale_out  # noqa: E402

#: (part, markers): a sample of a daemon's main thread (its loop) belongs to the first part
#: (in this order) one of whose markers one of its frames holds. py-spy's raw frames read
#: ``function (path/file.py:line)``.
PARTS: list[tuple[str, tuple[str, ...]]] = [
    ("mix: decode a record", ("decode (streammkl/daemon/mixing/topic.py",)),
    ("mix: encode a record", ("encode (streammkl/daemon/mixing/topic.py",)),
    ("mix: merge at a close", ("_close (streammkl/daemon/mixing/log.py",)),
    ("mix: fold, the rest (digests, claims)", ("apply (streammkl/daemon/mixing/log.py",)),
    (
        "mix: sampled check, hindsight",
        (
            "_check_later (streammkl/daemon/mixing/member.py",
            "hindsight (streammkl/daemon/mixing/member.py",
        ),
    ),
    ("mix: the reader's poll", ("read (streammkl/daemon/mixing/topic.py",)),
    (
        "mix: send, confirm",
        (
            "send (streammkl/daemon/mixing/topic.py",
            "confirm (streammkl/daemon/mixing/topic.py",
            "publish (streammkl/daemon/mixing/topic.py",
        ),
    ),
    (
        "mix: publish a delta (snapshot, stats)",
        ("_publish_delta (streammkl/daemon/mixing/member.py",),
    ),
    ("mix: rebase", ("_rebase (streammkl/daemon/mixing/member.py",)),
    ("mix: the wait's own loop", ("_wait_close (streammkl/daemon/mixing/member.py",)),
    ("mix: the hooks' rest", ("(streammkl/daemon/mixing/",)),
    (
        "loop: learning on the loop thread",
        ("(streammkl/river/", "(streammkl/core/", "(streammkl/daemon/learning/"),
    ),
    ("loop: prequential (decode, emit, hand-off)", ("(streammkl/daemon/loop/prequential.py",)),
    ("loop: input source", ("(streammkl/daemon/kafka/source.py",)),
    ("loop: sink", ("(streammkl/daemon/kafka/sink.py",)),
    ("loop: checkpoint", ("(streammkl/daemon/checkpoints/",)),
    (
        "loop: metrics, health",
        ("(streammkl/daemon/loop/publishing.py", "(streammkl/daemon/http/", "(prometheus_client/"),
    ),
    ("loop: the rest", ("(streammkl/daemon/loop/",)),
]
OTHER = "loop: other"
#: A sample of the loop thread inside the learning window is inside one of its iterations.
TICK = "Runner.tick (streammkl/daemon/loop/runner.py"
#: ... but not in a group member's leave at shutdown.
OUTSIDE = "leave (streammkl/daemon/mixing/"


def part_of(frames: list[str]) -> str | None:
    """The part (:data:`PARTS`) of one sample of the loop thread (its frames, outermost
    first); None: outside the learning window (not in the loop's iteration: imports, start-up,
    numba's warm-up, the join; or in the leave at shutdown)."""
    if not any(TICK in f for f in frames) or any(OUTSIDE in f for f in frames):
        return None
    for part, markers in PARTS:
        if any(m in f for f in frames for m in markers):
            return part
    return OTHER


def thread_kind(name: str) -> str:
    """A daemon thread's kind by its Python name (py-spy's) or OS name."""
    if name == "MainThread":
        return "loop thread"
    if name.startswith("streammkl-learn"):
        return "learner thread (compiled rounds)"
    if name.startswith("kafka-io"):
        return "kafka-python IO threads (the mix topic's clients)"
    if name.startswith("kafka-python-producer"):
        return "kafka-python producer thread (the mix topic)"
    if name.startswith("rdk:"):
        return "librdkafka threads (input, sink; the mix topic's by default)"
    if name.startswith("streammkl-http"):
        return "HTTP server threads"
    return "other threads"


class ThreadSampler:
    """Every thread's CPU seconds (``/proc/<pid>/task/*/stat``) of some processes, sampled
    every 0.1 s with the wall clock: ``{(pid, tid): [(time, cpu, name)]}``."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.samples: dict[tuple[int, int], list[tuple[float, float]]] = {}
        self.names: dict[tuple[int, int], str] = {}
        self._tick = os.sysconf("SC_CLK_TCK")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.time()
            for pid in self.pids:
                try:
                    tids = os.listdir(f"/proc/{pid}/task")
                except OSError:
                    continue
                for tid in tids:
                    try:
                        stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
                    except OSError:
                        continue
                    name = stat[stat.index("(") + 1 : stat.rindex(")")]
                    fields = stat.rsplit(")", 1)[1].split()
                    key = (pid, int(tid))
                    self.names[key] = name
                    cpu = (int(fields[11]) + int(fields[12])) / self._tick
                    self.samples.setdefault(key, []).append((now, cpu))
            self._stop.wait(0.1)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def within(self, lo: float, hi: float) -> dict[tuple[int, int], float]:
        """CPU seconds of every thread between wall-clock times ``lo`` and ``hi`` (a thread
        that started or ended inside counts from its first / to its last sample)."""
        import numpy as np

        out = {}
        for key, samples in self.samples.items():
            ts, cpus = zip(*samples, strict=True)
            out[key] = float(np.interp(hi, ts, cpus) - np.interp(lo, ts, cpus))
        return out


def spy(pid: int, path: Path, rate: int) -> subprocess.Popen:
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    return subprocess.Popen(
        [exe, "record", "--pid", str(pid), "--threads", "--gil", "--format", "raw", "--rate",
         str(rate), "--nonblocking", "--output", str(path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def read_samples(path: Path) -> tuple[dict[int, str], collections.Counter[str]]:
    """One py-spy raw file (``thread (tid): name;frame;... count``): the Python threads'
    names by OS thread id, and the loop thread's samples by part (:func:`part_of`)."""
    names: dict[int, str] = {}
    parts: collections.Counter[str] = collections.Counter()
    if not path.exists():
        return names, parts
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        head = frames[0]
        if not head.startswith("thread (") or ": " not in head:
            continue
        tid, name = head[len("thread (") :].split("): ", 1)
        names[int(tid)] = name.split(" ")[0]
        if names[int(tid)] == "MainThread":
            part = part_of(frames)
            if part is not None:
                parts[part] += int(count)
    return names, parts


def profile(bootstrap: str, topic: str, n: int, members: int, mixing: bool, classes: list,
            work: Path, rate: int, root: Path = ROOT) -> dict[str, Any]:  # fmt: skip
    """One run of ``members`` daemons (merged if ``mixing``) under the samplers: CPU seconds
    per thread kind and per part of the loop thread, in the learning window."""
    tag = uuid.uuid4().hex[:6]
    settings = scale_out.settings_for(tag, classes, mixing, scale_out.EVERY)
    names = [f"{'mix' if mixing else 'own'}{members}-{tag}-{i}" for i in range(members)]
    member = (lambda nm: {"mixing.member": nm}) if mixing else (lambda nm: {})
    procs = [scale_out.daemon(bootstrap, topic, f"g-{tag}", work, nm, {**settings, **member(nm)},
                              root) for nm in names]  # fmt: skip
    pids = [p.pid for p in procs]
    threads = ThreadSampler(pids)
    files = [work / f"{nm}.spy" for nm in names]
    time.sleep(1.0)  # past the interpreter's start (py-spy needs it up)
    spies = [spy(pid, f, rate) for pid, f in zip(pids, files, strict=True)]
    codes = [p.wait(timeout=3600) for p in procs]
    threads.stop()
    for s in spies:
        s.wait(timeout=60)
    if any(codes):
        raise SystemExit(f"a daemon failed ({codes}); logs in {work}")
    lo, hi, _ = scale_out.predictions_window(bootstrap, settings["kafka.predictions_topic"], n)
    cpu = threads.within(lo, hi)
    kinds: collections.Counter[str] = collections.Counter()
    loop: collections.Counter[str] = collections.Counter()
    for pid, f in zip(pids, files, strict=True):
        py_names, parts = read_samples(f)
        total = sum(parts.values()) or 1
        for (p, tid), seconds in cpu.items():
            if p != pid:
                continue
            kind = thread_kind(py_names.get(tid) or threads.names[(p, tid)])
            kinds[kind] += seconds
            if kind == "loop thread":
                for part, count in parts.items():
                    loop[part] += seconds * count / total
    return {"cpu": sum(cpu.values()), "kinds": kinds, "loop": loop, "span": hi - lo, "n": n}


def table(runs: dict[str, dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """Rows of µs per learned record: by thread kind, the loop thread by part."""
    labels = list(runs)

    def us(label: str, seconds: float) -> str:
        return f"{1e6 * seconds / runs[label]['n']:.2f}"

    rows: list[list[Any]] = [["**all threads, all members**",
                              *(f"**{us(lb, runs[lb]['cpu'])}**" for lb in labels)]]  # fmt: skip
    kinds = sorted({k for r in runs.values() for k in r["kinds"]},
                   key=lambda k: -max(r["kinds"].get(k, 0.0) for r in runs.values()))  # fmt: skip
    for kind in kinds:
        rows.append([kind, *(us(lb, runs[lb]["kinds"].get(kind, 0.0)) for lb in labels)])
        if kind == "loop thread":
            for part in [p for p, _ in PARTS] + [OTHER]:
                if any(1e6 * r["loop"].get(part, 0.0) / r["n"] >= 0.05 for r in runs.values()):
                    rows.append(
                        [f"— {part}", *(us(lb, runs[lb]["loop"].get(part, 0.0)) for lb in labels)]
                    )
    return ["µs CPU per learned record", *labels], rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--members", type=int, default=2)
    ap.add_argument("--records", type=int, default=60_000)
    ap.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vs", metavar="CHECKOUT",
                    help="also profile the merged group of another checkout (e.g. main's), "
                    "in the same window")  # fmt: skip
    ap.add_argument("--out", help="write the table here (a partial run: not into results/)")
    args = ap.parse_args(argv)
    from streammkl.daemon.commands.broker import EmbeddedBroker

    scale_out.BANK = "default"
    broker = EmbeddedBroker()
    broker.start()
    work = Path(tempfile.mkdtemp(prefix="group-cpu-"))
    machine = _table.machine()  # (its load average: at the start)
    try:
        values, classes = scale_out.stream("kernel-drift", args.records, args.seed)
        topic = f"kernel-drift-{uuid.uuid4().hex[:6]}"
        scale_out.produce(broker.bootstrap_servers, topic, values)
        runs = {}
        scale_out.say("[group-cpu] one member alone")
        runs["one member alone"] = profile(broker.bootstrap_servers, topic, args.records, 1,
                                           False, classes, work, args.rate)  # fmt: skip
        if args.vs:
            other = Path(args.vs).resolve()
            scale_out.say(f"[group-cpu] {args.members} members, merged, {other}")
            runs[f"{args.members} members, merged ({other.name})"] = profile(
                broker.bootstrap_servers, topic, args.records, args.members, True, classes, work,
                args.rate, other,
            )  # fmt: skip
        scale_out.say(f"[group-cpu] {args.members} members, merged")
        runs[f"{args.members} members, merged"] = profile(
            broker.bootstrap_servers, topic, args.records, args.members, True, classes, work,
            args.rate,
        )  # fmt: skip
    finally:
        broker.stop(kill=True)
    header, rows = table(runs)
    spans = ", ".join(f"{label} {r['span']:.1f} s" for label, r in runs.items())
    body = (
        f"{machine}; load average {os.getloadavg()[0]:.2f} at the end. "
        f"kernel-drift, {args.records:,} records in {scale_out.PARTITIONS} partitions, the "
        f"default bank, K = {scale_out.EVERY}; learning windows: {spans}. Every daemon's CPU "
        "in its learning window per learned record, split by part: the Python threads' CPU "
        "by thread (`/proc/<pid>/task`, named by py-spy), the loop thread's CPU shared out "
        "by py-spy's samples of it holding the GIL (`--gil`; the first part of `PARTS` a "
        "sample's frames hold; its start-up and shutdown left out). A wall-clock cost (a "
        "poll, a fetch loop, a periodic checkpoint) weighs more per record in a slower run.\n\n"
        + _table.markdown(header, rows)
    )
    _table.publish("group_cpu", "Where a mixing group's CPU per record goes", body,
                   args.records >= 60_000, args.out)  # fmt: skip
    print(body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
