"""``streammkl run | inspect | report | export | broker | simulate | demo | warmup``.

The CLI owns signals: SIGTERM/SIGINT only call :meth:`Runner.stop`, the loop finishes its batch,
checkpoints, flushes and exits 0. A second signal exits at once (safe: the checkpoint makes a
restart resume exactly where the last one left off).

Exit codes of ``run``: 0 success, 1 an unexpected error, 2 settings refused, 3 no usable
checkpoint, and with ``--exit-when-idle`` 4 broker never reached, 5 credentials refused, 6 input
topic missing, 7 records left unread (:mod:`streammkl.daemon.loop.idle`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

warnings.filterwarnings("ignore", message=".*read_text.*", category=DeprecationWarning)

log = logging.getLogger("streammkl")


def setup_logging(
    level: str = "INFO", secrets: list[str] | None = None, repeat_window: float = 10.0
) -> None:
    """Log to stderr, ``secrets`` masked in every line; kafka-python's per-connection errors
    only at DEBUG; a line repeated from the same call site at most once per ``repeat_window``
    seconds, with the count of those held back (:mod:`streammkl.daemon.commands.logfilter`)."""
    from streammkl.daemon.commands.logfilter import install_repeat_limit
    from streammkl.daemon.kafka.security import install_redaction

    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    install_redaction(secrets or [])
    install_repeat_limit(repeat_window)
    if level.upper() != "DEBUG":
        logging.getLogger("kafka").setLevel(logging.CRITICAL)


def _parse_value(text: str) -> Any:  # a JSON value, of any type
    try:
        return json.loads(text)
    except ValueError:
        return text


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {
        "kafka.bootstrap_servers": args.bootstrap_servers,
        "kafka.topics": args.topic,
        "kafka.group_id": args.group_id,
        "checkpoint.dir": args.checkpoint_dir,
        "metrics.port": args.metrics_port,
        "run.exit_when_idle": args.exit_when_idle,
        "run.log_level": args.log_level,
    }
    for item in args.set or ():
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(
                f"--set expects KEY=VALUE (e.g. kafka.max_poll_records=500), got {item!r}"
            )
        out[key.strip()] = _parse_value(value)
    return out


def _install_signals(stop: Callable[[], None]) -> None:
    hits = {"n": 0}

    def handler(signum: int, frame: FrameType | None) -> None:
        hits["n"] += 1
        if hits["n"] > 1:
            os._exit(128 + signum)
        log.info("signal %d: finishing the batch, checkpointing, exiting", signum)
        stop()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def cmd_run(args: argparse.Namespace) -> int:
    from streammkl.daemon.config import ConfigError, load_settings
    from streammkl.daemon.learning.building import LearnerConfigError

    try:
        settings = load_settings(args.config, overrides=_overrides(args))
    except ConfigError as exc:
        print(f"streammkl run: {exc}", file=sys.stderr)
        return 2
    setup_logging(
        settings.run.log_level, settings.kafka.secret_values(), settings.run.log_repeat_seconds
    )
    from streammkl.daemon.checkpoints.store import CheckpointError
    from streammkl.daemon.http.webconfig import WebConfigError
    from streammkl.daemon.loop.runner import Runner

    try:
        runner = Runner(
            settings,
            reload_settings=lambda: load_settings(args.config, overrides=_overrides(args)),
            allow_factory=args.allow_learner_factory,
        )
    except (ConfigError, LearnerConfigError, WebConfigError) as exc:
        print(f"streammkl run: invalid settings: {exc}", file=sys.stderr)
        return 2
    _install_signals(runner.stop)
    signal.signal(signal.SIGHUP, lambda signum, frame: runner.request_reload())
    try:
        code = runner.run()
    except CheckpointError as exc:
        log.error("%s", exc)
        return 3
    except (ConfigError, LearnerConfigError) as exc:  # e.g. a kernel change refused at start
        log.error("%s", exc)
        return 2
    _leave_when_threads_end(code)
    return code


#: Seconds ``streammkl run`` waits at exit for its background threads still at work.
STRAGGLER_SECONDS = 5.0


def _leave_when_threads_end(code: int) -> None:
    """After the shutdown (checkpoint, outputs, consumer: all done), wait a little for the
    daemon's background threads still at work — the regret monitor's comparator stops after
    its current fit — and, if one still is, leave at once with ``code`` (``os._exit``, logs
    flushed) instead of through the interpreter's teardown: a teardown while that thread was
    inside numba's compiler (a fresh install, a loaded machine) aborted the process after a
    clean run (SIGABRT, LLVM's "Uses remain when a value is destroyed"), seen in CI."""
    deadline = time.monotonic() + STRAGGLER_SECONDS
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and thread.name.startswith("streammkl-"):
            thread.join(max(0.0, deadline - time.monotonic()))
    busy = [
        t.name for t in threading.enumerate() if t.name.startswith("streammkl-") and t.is_alive()
    ]
    if busy:
        log.info("leaving without waiting for %s (work that is not kept)", busy)
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def cmd_inspect(args: argparse.Namespace) -> int:
    from streammkl.daemon.checkpoints.inspection import inspect_checkpoint, render_text
    from streammkl.daemon.checkpoints.store import CheckpointError

    try:
        info = inspect_checkpoint(args.checkpoint_dir, args.hmac_key_file)
    except (FileNotFoundError, CheckpointError) as exc:
        print(f"streammkl inspect: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(info, indent=2, sort_keys=True))
        return 0
    print(render_text(info))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from streammkl.daemon.commands.report import summary, write_report

    try:
        paths = write_report(args.checkpoint_dir, args.out)
    except FileNotFoundError as exc:
        print(f"streammkl report: {exc}", file=sys.stderr)
        return 1
    except ImportError as exc:  # matplotlib is an optional dependency
        print(f"streammkl report needs matplotlib: pip install 'streammkl[report]' ({exc})",
              file=sys.stderr)  # fmt: skip
        return 1
    for path in paths:
        print(path)
    lines = summary(args.checkpoint_dir)
    (Path(args.out) / "summary.txt").write_text("\n".join(lines) + "\n")
    print(Path(args.out) / "summary.txt")
    print("\n".join(lines))
    return 0


def cmd_broker(args: argparse.Namespace) -> int:
    from streammkl.daemon.commands.broker import EmbeddedBroker
    from streammkl.daemon.kafka.topics import ensure_topics

    setup_logging(args.log_level)
    broker = EmbeddedBroker(port=args.port, host=args.host).start()
    print(f"Tansu broker on {broker.bootstrap_servers} (memory only; Ctrl-C stops)", flush=True)
    if args.create_topic:
        topics = {}
        for spec in args.create_topic:
            name, _, parts = spec.partition(":")
            topics[name] = int(parts or 1)
        ensure_topics(broker.bootstrap_servers, topics)
        print(f"created {topics}", flush=True)
    stopping = {"flag": False}

    def handler(signum: int, frame: FrameType | None) -> None:
        stopping["flag"] = True

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    while not stopping["flag"] and broker.running:
        time.sleep(0.2)
    broker.stop()
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    from simulators import cli as sim_cli

    return int(sim_cli.run(args))


def cmd_demo(args: argparse.Namespace) -> int:
    from streammkl.daemon.commands.demo import run_demo

    known = _demo_scenarios()
    if args.scenario not in known:  # before the broker starts, not a traceback after it
        print(
            f"streammkl demo: unknown scenario {args.scenario!r}; choose one of: "
            f"{', '.join(known)} (streammkl simulate --list describes them; a replay of your "
            "own file: streammkl simulate ... then streammkl run)",
            file=sys.stderr,
        )
        return 2

    setup_logging("WARNING" if not args.verbose else "INFO")
    return run_demo(args)


def cmd_export(args: argparse.Namespace) -> int:
    from streammkl.daemon.checkpoints.export import export_model
    from streammkl.daemon.checkpoints.store import CheckpointError

    try:
        done = export_model(args.checkpoint_dir, args.out, args.hmac_key_file)
    except (FileNotFoundError, CheckpointError, ValueError) as exc:
        print(f"streammkl export: {exc}", file=sys.stderr)
        return 1
    name = done.model_class.rpartition(":")[2]
    print(
        f"{done.path}: {name} after {done.examples_learned} examples (digest "
        f"{done.model_digest[:16]}…, from {done.checkpoint}); load it with "
        f"{name}.load({str(done.path)!r})"
    )
    return 0


def cmd_warmup(args: argparse.Namespace) -> int:
    from rich.console import Console

    from streammkl.daemon.commands.demo import scenario_examples
    from streammkl.daemon.commands.warmup import run_warm_up
    from streammkl.daemon.config import ConfigError, load_settings

    try:
        settings = load_settings(args.config)
    except ConfigError as exc:
        print(f"streammkl warmup: {exc}", file=sys.stderr)
        return 2
    examples = scenario_examples(args.scenario) if args.scenario else None
    run_warm_up(Console(stderr=False), settings, examples)
    return 0


def _demo_scenarios() -> list[str]:
    """The scenarios the demo can run without more input (a replay of a user's file needs
    ``streammkl simulate`` and its parameters)."""
    try:
        from simulators import names, params_of
    except ImportError:  # pragma: no cover - the simulators package ships with streammkl
        return []
    out = []
    for name in names():
        try:
            required = [p for p, spec in params_of(name).items() if "(required)" in spec.help]
        except (ValueError, TypeError):
            continue
        if not required:
            out.append(name)
    return out


def build_parser() -> argparse.ArgumentParser:
    """The ``streammkl`` argument parser."""
    from streammkl import __version__

    parser = argparse.ArgumentParser(
        prog="streammkl", description="Online multiple kernel learning on event streams."
    )
    parser.add_argument("--version", action="version", version=f"streammkl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser(
        "run",
        help="run the daemon (consume, predict, learn, checkpoint)",
        description="Run the daemon. Every option overrides the settings file and the "
        "environment (STREAMMKL_SECTION__KEY); unset options keep the settings' values "
        "(defaults: docs/daemon.md, Settings).",
        epilog="defaults: --bootstrap-servers 127.0.0.1:9092, --topic streammkl.examples, "
        "--group-id streammkl, --checkpoint-dir ./checkpoints, --metrics-port 9108, "
        "--log-level INFO, run forever (no --exit-when-idle)",
    )
    run.add_argument("--config", help="TOML settings file (default: $STREAMMKL_CONFIG)")
    run.add_argument("--bootstrap-servers", help="Kafka brokers host:port[,host:port]")
    run.add_argument("--topic", help="input topic(s), comma-separated")
    run.add_argument("--group-id", help="consumer group id")
    run.add_argument("--checkpoint-dir", help="checkpoint directory")
    run.add_argument("--metrics-port", type=int, help="port of /metrics /healthz /readyz")
    run.add_argument(
        "--exit-when-idle",
        type=float,
        metavar="SECONDS",
        help="checkpoint and exit once no record arrived for SECONDS: 0 when nothing is left "
        "to read, else 4-7 (docs/daemon.md, Exit codes)",
    )
    run.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    run.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="any setting by dotted path, e.g. --set kafka.session_timeout_ms=2000 (repeatable)",
    )
    run.add_argument(
        "--allow-learner-factory",
        action="store_true",
        help="allow learner.factory (it imports and runs the code the settings name)",
    )
    run.set_defaults(func=cmd_run)

    ins = sub.add_parser("inspect", help="summarise the newest checkpoint")
    ins.add_argument("checkpoint_dir")
    ins.add_argument("--json", action="store_true", help="machine-readable output")
    ins.add_argument("--hmac-key-file", help="only checkpoints signed with this key count")
    ins.set_defaults(func=cmd_inspect)

    rep = sub.add_parser("report", help="draw the run history (β, regret, accuracy) as PNGs")
    rep.add_argument("checkpoint_dir", help="the daemon's checkpoint directory")
    rep.add_argument("--out", default="report", help="output directory (default ./report)")
    rep.set_defaults(func=cmd_report)

    exp = sub.add_parser(
        "export", help="write the newest checkpoint's model as a file the learner's load() reads"
    )
    exp.add_argument("checkpoint_dir", help="the daemon's checkpoint directory")
    exp.add_argument("out", help="the model file to write (e.g. model.smkl)")
    exp.add_argument("--hmac-key-file", help="only checkpoints signed with this key count")
    exp.set_defaults(func=cmd_export)

    brk = sub.add_parser("broker", help="run the embedded Tansu broker in the foreground")
    brk.add_argument("--port", type=int, default=9092, help="port to listen on (default 9092)")
    brk.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    brk.add_argument(
        "--create-topic", action="append", metavar="NAME[:PARTITIONS]", help="create a topic"
    )
    brk.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="the broker wrapper's log level (default INFO)",
    )
    brk.set_defaults(func=cmd_broker)

    sim = sub.add_parser("simulate", help="produce a simulated stream to Kafka or JSON Lines")
    try:
        from simulators import cli as sim_cli
    except ImportError:  # pragma: no cover - the simulators package ships with streammkl
        sim.set_defaults(func=lambda a: print("simulators package missing", file=sys.stderr) or 1)
    else:
        sim_cli.add_arguments(sim)
        sim.set_defaults(func=cmd_simulate)

    demo = sub.add_parser("demo", help="broker + simulator + daemon + metrics + live view")
    demo.add_argument("--config", help="TOML settings file (e.g. to choose the learner)")
    demo.add_argument("--duration", type=float, default=60.0, help="seconds (default 60)")
    demo.add_argument(
        "--scenario",
        default="kernel-drift",
        metavar="NAME",
        help="simulator scenario (default kernel-drift; one of: "
        + ", ".join(_demo_scenarios())
        + ")",
    )
    demo.add_argument(
        "--rate", type=float, default=1000.0, help="records per second at most (default 1000)"
    )
    demo.add_argument("--count", type=int, default=None, help="records (default: rate x duration)")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--metrics-port", type=int, default=9108, help="0 = any free port")
    demo.add_argument("--workdir", default="demo-run", help="checkpoints and broker log")
    demo.add_argument("--no-live", action="store_true", help="plain progress lines, no live view")
    demo.add_argument("--verbose", action="store_true")
    demo.set_defaults(func=cmd_demo)

    warm = sub.add_parser(
        "warmup",
        help="compile the learner's numerical code once (numba), with a progress bar; "
        "make install runs it",
    )
    warm.add_argument("--config", help="TOML settings file (default: $STREAMMKL_CONFIG)")
    warm.add_argument(
        "--scenario", help="learn a few records of this simulator scenario (default: synthetic)"
    )
    warm.set_defaults(func=cmd_warmup)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``streammkl`` command."""
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["build_parser", "main"]
