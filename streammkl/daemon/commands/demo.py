"""``streammkl demo``: embedded broker + simulator + daemon + metrics + a live terminal view.

Everything runs in this process (the broker as a child process): Tansu on a free loopback port,
the topics, a simulator thread producing a scenario at a fixed rate, the daemon loop in a thread
(with ``/metrics`` served), and a live view of examples/s, prequential accuracy, the kernel
weights β as bars and the checkpoint age. It stops after ``--duration`` seconds, when the stream
is exhausted and learned, or on Ctrl-C, then prints a summary.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from streammkl.daemon.checkpoints.inspection import inspect_checkpoint
from streammkl.daemon.commands.broker import EmbeddedBroker
from streammkl.daemon.commands.warmup import run_warm_up
from streammkl.daemon.config import Settings, load_settings
from streammkl.daemon.kafka.topics import ensure_topics
from streammkl.daemon.learning.learner import Inputs, Target
from streammkl.daemon.learning.scores import headline, prequential_scores
from streammkl.daemon.loop.runner import Runner
from streammkl.wire import Record

INPUT, PREDICTIONS, DEAD = "streammkl.examples", "streammkl.predictions", "streammkl.dead-letters"


def metrics_port(requested: int) -> tuple[int, str | None]:
    """The port to serve metrics on: ``requested`` if free (0: any), else any free one, with a
    note saying so (the demo never moves off a busy port silently)."""
    if requested == 0 or _port_free(requested):
        return requested, None
    return 0, f"metrics port {requested} is busy: serving on a free port instead (--metrics-port)"


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class _Simulator(threading.Thread):
    """Produces the scenario to the input topic until exhausted or stopped."""

    #: The simulator waits while it is this many records ahead of the daemon, so the live view
    #: shows learning, not a growing backlog, whatever the machine's speed.
    MAX_AHEAD = 3000

    def __init__(
        self, args: argparse.Namespace, bootstrap: str, count: int, runner: Runner
    ) -> None:
        super().__init__(name="streammkl-demo-simulator", daemon=True)
        self.args, self.bootstrap, self.count, self.runner = args, bootstrap, count, runner
        self.stop_flag = threading.Event()
        self.sent = 0
        self.error: str | None = None
        self.done = False

    def run(self) -> None:
        from simulators import get
        from simulators.kafka_producer import produce

        try:
            from simulators import params_of

            params: dict[str, Any] = {"n_samples": self.count}
            if self.args.scenario == "kernel-drift":  # three phases over the demo's duration
                params["phase_length"] = max(50, self.count // 3)
            if "loop" in params_of(self.args.scenario):  # a data set replayed: start over
                params["loop"] = True
            scenario = get(self.args.scenario, seed=self.args.seed, **params)

            def records() -> Iterator[Record]:
                for record in itertools.islice(scenario, self.count):
                    while self.sent - self.runner.counters["records_consumed"] > self.MAX_AHEAD:
                        if self.stop_flag.wait(0.02):
                            return
                    if self.stop_flag.is_set():
                        return
                    self.sent += 1
                    yield record

            produce(
                records(), topic=INPUT, bootstrap_servers=self.bootstrap, rate=self.args.rate,
                progress=False, wall_clock_ts=True, batch_size=200, max_batch_seconds=0.2,
            )  # fmt: skip
        except Exception as exc:  # shown in the view and the summary
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.done = True


class _View:
    """Builds the live table from the runner's counters and published snapshot."""

    def __init__(self, runner: Runner, sim: _Simulator, args: argparse.Namespace, url: str) -> None:
        self.runner, self.sim, self.args, self.url = runner, sim, args, url
        self.start = time.monotonic()
        self.history: deque[tuple[float, int, int, int]] = deque(maxlen=64)
        self.task = runner.settings.learner.task

    def score(self) -> str:
        """The task's headline score (``accuracy 0.954``, ``RMSE 0.41``; ``-`` before any)."""
        c = self.runner.counters
        return headline(
            self.task, c["labelled_predictions"], c["correct_predictions"], c["online_loss"]
        )

    def sample(self) -> tuple[float, float | None]:
        c = self.runner.counters
        now = time.monotonic()
        self.history.append(
            (now, c["examples_learned"], c["correct_predictions"], c["labelled_predictions"])
        )
        old = next((h for h in self.history if now - h[0] <= 5.0), self.history[0])
        new = self.history[-1]
        dt = new[0] - old[0]
        rate = (new[1] - old[1]) / dt if dt > 0 else 0.0
        recent = (new[2] - old[2]) / (new[3] - old[3]) if new[3] > old[3] else None
        return rate, recent

    def render(self) -> Group:
        rate, recent = self.sample()
        c = self.runner.counters
        snap = self.runner.metrics.snapshots.snapshot
        acc = snap.accuracy
        age = "-" if snap.checkpoint_time is None else f"{time.time() - snap.checkpoint_time:.1f} s"
        table = Table(show_header=False, box=None, pad_edge=False)
        table.add_column(style="bold cyan", justify="right")
        table.add_column()
        elapsed = time.monotonic() - self.start
        table.add_row("elapsed", f"{elapsed:5.1f} / {self.args.duration:.0f} s")
        table.add_row(
            "produced", f"{self.sim.sent}  ({self.args.scenario}, at most {self.args.rate:.0f}/s)"
        )
        table.add_row("learned", f"{c['examples_learned']}   [bold]{rate:,.0f} examples/s[/]")
        if self.task == "classification":
            table.add_row(
                "prequential accuracy",
                "-"
                if acc is None
                else f"{acc:.3f}  (last 5 s: " + ("-" if recent is None else f"{recent:.3f}") + ")",
            )
        else:  # the task's own score (an RMSE for a regression, label accuracy for sequences)
            table.add_row("prequential", self.score())
        table.add_row("rejected", str(c["records_rejected"]))
        table.add_row("lag", str(sum(snap.lag.values())))
        table.add_row("checkpoint age", age)
        table.add_row("ready", "[green]yes[/]" if snap.ready else "[yellow]no[/]")
        bars = Table(show_header=True, box=None, pad_edge=False, title_justify="left")
        bars.add_column("kernel", style="magenta")
        bars.add_column("β", justify="right")
        bars.add_column("")
        for name, beta in sorted(snap.kernel_weights.items()):
            bars.add_row(name, f"{beta:.3f}", Text("█" * round(40 * beta), style="green"))
        header = Text(f"streammkl demo — metrics at {self.url} — Ctrl-C to stop", style="bold")
        parts: list[Any] = [header, table, bars]
        if self.sim.error:
            parts.append(Text(f"simulator: {self.sim.error}", style="red"))
        return Group(*parts)

    def line(self) -> str:
        rate, _ = self.sample()
        snap = self.runner.metrics.snapshots.snapshot
        acc = self.score().replace(" ", "=")
        betas = " ".join(f"{k}={v:.2f}" for k, v in sorted(snap.kernel_weights.items()))
        return (
            f"[{time.monotonic() - self.start:5.1f}s] produced={self.sim.sent} "
            f"learned={self.runner.counters['examples_learned']} ({rate:.0f}/s) {acc} {betas}"
        )


#: The learner task each kind of scenario needs (``Scenario.task`` -> ``learner.task``).
TASKS = {
    "binary": "classification",
    "multiclass": "classification",
    "regression": "regression",
    "sequence": "sequence",
    "parsing": "parsing",
}


def demo_settings(
    args: argparse.Namespace, bootstrap: str, checkpoints: Path, port: int
) -> tuple[Settings, str | None]:
    """The daemon's settings for the demo, with the learner task the scenario needs.

    ``learner.task`` follows the scenario (``digit-strings`` -> ``sequence``, ``conllu`` ->
    ``parsing``, ``trump-approval`` -> ``regression``) unless the config file or the environment
    sets it; then a differing task is kept and the returned note says which setting to change
    (every record would otherwise be dead-lettered as ``wrong_kind`` or ``bad_label``).
    """
    from simulators import scenario_class

    overrides: dict[str, Any] = {
        "kafka.bootstrap_servers": bootstrap,
        "kafka.topics": INPUT,
        "kafka.predictions_topic": PREDICTIONS,
        "kafka.dead_letter_topic": DEAD,
        "kafka.group_id": "streammkl-demo",
        "kafka.assignment": "all",  # one daemon, no group join to wait for
        "checkpoint.dir": str(checkpoints),
        "checkpoint.every_seconds": 2.0,
        "metrics.port": port,
    }
    settings = load_settings(args.config, env=os.environ, overrides=overrides)
    needed = TASKS.get(scenario_class(args.scenario).task)
    if needed is None or settings.learner.task == needed:
        return settings, None
    if "task" in settings.learner.model_fields_set:
        return settings, (
            f'scenario {args.scenario} needs learner.task = "{needed}" but the settings say '
            f'"{settings.learner.task}": its records will be rejected (set [learner] task = '
            f'"{needed}" in the config file, or STREAMMKL_LEARNER__TASK={needed})'
        )
    overrides["learner.task"] = needed
    settings = load_settings(args.config, env=os.environ, overrides=overrides)
    return settings, f'scenario {args.scenario}: learner.task = "{needed}"'


def scenario_examples(name: str, seed: int = 0, n: int = 800) -> list[tuple[Inputs, Target]] | None:
    """The first ``n`` labelled examples of scenario ``name`` as the daemon decodes them (a
    dense vector's features named ``"0"``, ``"1"``, ...), for the warm-up; ``None`` when the
    scenario cannot be built without more parameters (e.g. a file to replay)."""
    from simulators import get

    try:
        scenario = get(name, seed=seed, n_samples=n)
        records = list(itertools.islice(scenario, n))
    except (ValueError, TypeError, OSError):
        return None
    out: list[tuple[Inputs, Target]] = []
    for rec in records:
        if rec.y is None:
            continue
        x: Inputs = rec.x
        if isinstance(x, list) and all(isinstance(v, int | float) for v in x):
            x = {str(i): float(v) for i, v in enumerate(x)}  # type: ignore[arg-type]
        out.append((x, rec.y))
    return out


def run_demo(args: argparse.Namespace) -> int:
    """Run the demo; returns the exit code."""
    console = Console()
    workdir = Path(args.workdir)
    checkpoints = workdir / "checkpoints"
    shutil.rmtree(checkpoints, ignore_errors=True)  # the broker is fresh, so is the model
    workdir.mkdir(parents=True, exist_ok=True)
    count = args.count if args.count is not None else max(1, int(args.rate * args.duration))
    port, note = metrics_port(args.metrics_port)
    if note:
        console.print(f"[yellow]{note}[/yellow]")
    # The one-time compile before anything starts: the demo's clock then measures learning.
    warm_settings, _ = demo_settings(args, "127.0.0.1:9092", checkpoints, port)
    run_warm_up(console, warm_settings, scenario_examples(args.scenario, args.seed))
    console.print(f"starting the embedded Tansu broker (log: {workdir / 'tansu.log'})")
    broker = EmbeddedBroker(log_path=workdir / "tansu.log").start()
    runner: Runner | None = None
    try:
        ensure_topics(broker.bootstrap_servers, {INPUT: 1, PREDICTIONS: 1, DEAD: 1})
        settings, note = demo_settings(args, broker.bootstrap_servers, checkpoints, port)
        if note:
            console.print(f"[yellow]{note}[/yellow]")
        runner = Runner(settings)
        daemon = threading.Thread(target=runner.run, name="streammkl-demo-daemon", daemon=True)
        daemon.start()
        while runner.http is None and daemon.is_alive():
            time.sleep(0.05)
        url = f"http://127.0.0.1:{runner.http.port if runner.http else '-'}/metrics"
        console.print(f"metrics at {url}")  # also without a terminal (no live view then)
        sim = _Simulator(args, broker.bootstrap_servers, count, runner)
        sim.start()
        view = _View(runner, sim, args, url)
        deadline = time.monotonic() + args.duration

        def finished() -> bool:
            caught_up = sim.done and runner.counters["records_consumed"] >= sim.sent
            return time.monotonic() >= deadline or not daemon.is_alive() or caught_up

        try:
            if args.no_live or not console.is_terminal:
                last = 0.0
                while not finished():
                    if time.monotonic() - last >= 2.0:
                        console.print(view.line())
                        last = time.monotonic()
                    time.sleep(0.1)
            else:
                with Live(view.render(), console=console, refresh_per_second=4) as live:
                    while not finished():
                        time.sleep(0.25)
                        live.update(view.render())
        except KeyboardInterrupt:
            console.print("interrupted: stopping cleanly")
        sim.stop_flag.set()
        runner.stop()
        daemon.join(timeout=60)
        _summary(console, runner, sim, view, checkpoints, args)
        return 0 if sim.error is None else 1
    finally:
        if runner is not None:
            runner.stop()
        broker.stop(kill=True)


def _summary(
    console: Console, runner: Runner, sim: _Simulator, view: _View, checkpoints: Path,
    args: argparse.Namespace,
) -> None:  # fmt: skip
    elapsed = time.monotonic() - view.start
    c = runner.counters
    table = Table(title="streammkl demo — summary", show_header=False)
    table.add_column(style="bold cyan", justify="right")
    table.add_column()
    table.add_row("scenario", f"{args.scenario} (seed {args.seed})")
    table.add_row("records produced / consumed", f"{sim.sent} / {c['records_consumed']}")
    table.add_row("examples learned", f"{c['examples_learned']} in {elapsed:.1f} s")
    task = runner.settings.learner.task
    scores = prequential_scores(
        task, c["labelled_predictions"], c["correct_predictions"], c["online_loss"]
    )
    for name, value in scores.items():  # the task's own (an RMSE for a regression)
        table.add_row(f"prequential {name}", f"{value:.4f}")
    reasons = ", ".join(f"{k} {v}" for k, v in sorted(c["rejected_by_reason"].items()))
    rejected = f"{c['records_rejected']}" + (f" ({reasons})" if reasons else "")
    table.add_row("rejected records", rejected)
    try:
        info = inspect_checkpoint(checkpoints)
        betas = ", ".join(f"{k}={v:.3f}" for k, v in sorted(info["kernel_weights"].items()))
        table.add_row("kernel weights β", betas or "-")
        table.add_row("model digest", info["model_digest"][:16] + "…")
        table.add_row("checkpoint", f"{info['checkpoint']}  (streammkl inspect {checkpoints})")
    except (FileNotFoundError, OSError) as exc:
        table.add_row("checkpoint", f"none ({exc})")
    if sim.error:
        table.add_row("simulator error", sim.error)
    console.print(table)
