"""``streammkl simulate SCENARIO ...`` (and ``python -m simulators ...``).

Writes a scenario's records as JSON Lines (a file, or standard output) or produces them to Kafka,
and writes its ground truth as JSON (beside the file: ``run.jsonl`` -> ``run.truth.json``, or
where ``--truth`` says). Every scenario parameter is an option (``--phase-length 500``); an option
that does not apply to the chosen scenario is an error naming both. ``--list`` shows them all.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tqdm import tqdm

from .base import Param
from .jsonl import truth_path, write_jsonl, write_truth
from .scenarios import get, names, params_of, scenario_class

__all__ = ["add_arguments", "main", "run"]

_PREFIX = "param_"


def _all_params() -> dict[str, list[tuple[str, Param]]]:
    out: dict[str, list[tuple[str, Param]]] = {}
    for name in names():
        for key, spec in scenario_class(name).params.items():
            out.setdefault(key, []).append((name, spec))
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``simulate`` arguments to ``parser``."""
    parser.add_argument(
        "scenario", nargs="?", choices=names(), metavar="SCENARIO", help=", ".join(names())
    )
    parser.add_argument("--list", action="store_true", help="list scenarios and their parameters")
    parser.add_argument(
        "--count", type=int, default=None, help="number of records (default: the scenario's)"
    )
    parser.add_argument("--rate", type=float, default=None, help="maximum records per second")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    dest = parser.add_mutually_exclusive_group()
    dest.add_argument("--out", default=None, help="JSON Lines file ('-' = standard output)")
    dest.add_argument("--bootstrap-servers", default=None, help="Kafka brokers, host:port[,...]")
    parser.add_argument("--topic", default=None, help="Kafka topic (with --bootstrap-servers)")
    parser.add_argument(
        "--kafka-config",
        default=None,
        metavar="FILE",
        help="a JSON object of kafka-python producer options, e.g. TLS / SASL: "
        '{"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", ...} (a file, so that '
        "no password is on the command line)",
    )
    parser.add_argument(
        "--key",
        default="{scenario}",
        help="Kafka key template with fields {scenario} {id} {index}, '' for none (default: "
        "one constant key, so one partition and the stream's order)",
    )
    parser.add_argument("--truth", default=None, help="where to write the ground truth JSON")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument(
        "--wall-clock-ts", action="store_true", help="stamp records with the time of sending"
    )
    group = parser.add_argument_group("scenario parameters")
    for key, users in sorted(_all_params().items()):
        if key == "n_samples":
            continue  # that is --count
        spec = users[0][1]
        used_by = ", ".join(name for name, _ in users)
        group.add_argument(
            f"--{key.replace('_', '-')}",
            dest=_PREFIX + key,
            default=argparse.SUPPRESS,
            metavar=spec.kind.upper(),
            help=f"{spec.help} [{used_by}]".replace("%", "%%"),  # argparse formats help
        )


def _convert(key: str, spec: Param, text: str) -> Any:
    option = f"--{key.replace('_', '-')}"
    try:
        if spec.kind == "int":
            return int(text)
        if spec.kind == "float":
            return float(text)
        if spec.kind == "bool":
            lowered = text.lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
        if spec.kind == "names":
            return tuple(part.strip() for part in text.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"{option}: expected {spec.kind}, got {text!r}") from None
    return text


def build(args: argparse.Namespace) -> Any:
    """The scenario the parsed arguments describe."""
    given = {k[len(_PREFIX) :]: v for k, v in vars(args).items() if k.startswith(_PREFIX)}
    accepted = params_of(args.scenario, given.get("base"))
    params: dict[str, Any] = {}
    for key, text in given.items():
        if key not in accepted:
            raise ValueError(
                f"--{key.replace('_', '-')} does not apply to scenario {args.scenario!r}; "
                f"it takes: {', '.join(_options(args.scenario, given.get('base')))}"
            )
        params[key] = _convert(key, accepted[key], text)
    if args.count is not None:
        if args.count < 1:
            raise ValueError(f"--count must be >= 1, got {args.count}")
        params["n_samples"] = args.count
    return get(args.scenario, seed=args.seed, **params)


def _options(name: str, base: str | None = None) -> list[str]:
    return [f"--{k.replace('_', '-')}" for k in params_of(name, base) if k != "n_samples"]


def _list() -> str:
    lines = []
    for name in names():
        cls = scenario_class(name)
        doc = (cls.__doc__ or "").strip().splitlines()[0]
        lines.append(f"{name}: {doc}")
        for key, spec in cls.params.items():
            if key != "n_samples":
                option = f"--{key.replace('_', '-')}"
                lines.append(f"    {option} (default {spec.default!r}): {spec.help}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Run ``simulate``; return the exit code (2 for bad arguments, with a message on stderr)."""
    if args.list:
        print(_list())
        return 0
    if args.scenario is None:
        print("simulate: a SCENARIO is required (see --list)", file=sys.stderr)
        return 2
    try:
        if args.bootstrap_servers and not args.topic:
            raise ValueError("--topic is required with --bootstrap-servers")
        if args.topic and not args.bootstrap_servers:
            raise ValueError("--topic needs --bootstrap-servers")
        if args.rate is not None and args.rate <= 0:
            raise ValueError(f"--rate must be > 0, got {args.rate}")
        kafka_config = _kafka_config(args.kafka_config)
        scenario = build(args)
    except (ValueError, TypeError) as exc:
        print(f"simulate: {exc}", file=sys.stderr)
        return 2
    truth = args.truth
    if truth is None and args.out not in (None, "-"):
        truth = truth_path(args.out)
    if truth is not None:
        write_truth(scenario.ground_truth(), truth)
    if args.bootstrap_servers:
        from .kafka_producer import produce

        stats = produce(
            scenario,
            topic=args.topic,
            bootstrap_servers=args.bootstrap_servers,
            key=args.key,
            key_context={"scenario": scenario.name},
            rate=args.rate,
            progress=not args.no_progress,
            wall_clock_ts=args.wall_clock_ts,
            producer_config=kafka_config,
        )
        print(
            f"sent {stats.sent} records of {scenario.name} to {args.topic!r} in "
            f"{stats.elapsed:.2f} s ({stats.rate:.0f}/s, {stats.recreated} producers recreated)",
            file=sys.stderr,
        )
        return 0
    records: Any = scenario
    if args.wall_clock_ts or args.rate:
        records = _paced(scenario, args.rate, args.wall_clock_ts)
    to_file = args.out not in (None, "-")
    quiet = args.no_progress or not to_file
    with tqdm(records, total=len(scenario), unit="rec", disable=quiet, desc=args.out) as bar:
        n = write_jsonl(bar, args.out or "-")
    if to_file:
        print(f"wrote {n} records of {scenario.name} to {args.out}", file=sys.stderr)
    return 0


def _kafka_config(path: str | None) -> dict[str, Any]:
    """The producer options in ``--kafka-config`` (a JSON object); errors name the file, never
    a value (it may hold a password)."""
    if path is None:
        return {}
    import json

    try:
        with open(path) as fh:
            data = json.load(fh)
    except OSError as exc:
        raise ValueError(f"--kafka-config {path}: {exc.strerror or exc}") from None
    except ValueError:
        raise ValueError(f"--kafka-config {path}: not valid JSON") from None
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        raise ValueError(f"--kafka-config {path}: must be a JSON object of options")
    return data


def _paced(records: Any, rate: float | None, wall_clock_ts: bool) -> Any:
    import dataclasses
    import time

    start = time.monotonic()
    for i, record in enumerate(records):
        if rate:
            delay = start + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        yield dataclasses.replace(record, ts=time.time()) if wall_clock_ts else record


def main(argv: list[str] | None = None) -> int:
    """``python -m simulators``."""
    parser = argparse.ArgumentParser(prog="python -m simulators", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))
