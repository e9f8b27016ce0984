"""How often the daemon publishes a windowed-regret estimate: at a steady rate and in a backlog.

The embedded broker and a real daemon process (``streammkl run``) per row, fed the kernel-drift
simulator; ``/metrics`` is scraped every 0.2 s. A new estimate is a new ``streammkl_window_end``.

- **steady**: records produced at ``--rate`` records/s for ``--seconds`` s while the daemon runs:
  the seconds between estimates (median, max), the largest lag in examples, the scrapes that
  read ``streammkl_window_regret_stale`` = 1.
- **backlog**: ``--backlog`` records produced before the daemon starts, learned as fast as it
  can: records/s, estimates published while it caught up, the largest lag, stale scrapes; with
  the settings' own catch-up share (``monitor.catch_up_share``: 0.1 by default, 1 in the deploy
  settings), with all the time the schedule needs (1) and without waiting (``catch_up_seconds``
  0), so the price the learning pays for fresh estimates is in the table.

Rows for the deploy settings (``deploy/config/streammkl.toml``: budgeted exact kernels, the
expensive comparator) and the daemon's default learner. Speeds depend on the machine's load,
printed with the table; CPU is shared with whatever else runs.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _table

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy" / "config" / "streammkl.toml"

LEARNED = ("streammkl_model_examples_learned_total", ())
STALE = ("streammkl_window_regret_stale", ())
END = ("streammkl_window_end", ())
LAG = ("streammkl_window_regret_lag", ())


def run_daemon(
    bootstrap: str,
    tmp: Path,
    config: Path | None,
    settings: dict[str, Any],
    backlog: int,
    rate: float,
    seconds: float,
) -> dict[str, Any]:
    """One daemon: ``backlog`` records before it starts, then ``rate`` records/s for
    ``seconds``; the scrapes while records flowed."""
    from simulators import get
    from simulators.kafka_producer import produce
    from streammkl.daemon.commands.broker import free_port
    from tests import daemon_kafka as dk

    topic = dk.unique("cadence")
    dk.create_topic(bootstrap, topic, 1)
    total = backlog + int(rate * seconds)
    records = list(get("kernel-drift", seed=0, n_samples=total))
    if backlog:
        produce(records[:backlog], topic=topic, bootstrap_servers=bootstrap, key="kd",
                progress=False)  # fmt: skip
    port = free_port()
    argv = dk.daemon_argv(
        bootstrap, topic, dk.unique("g"), tmp / dk.unique("ck"), port=port,
        settings={"metrics.host": "127.0.0.1", "checkpoint.every_seconds": 3600, **settings},
    )  # fmt: skip
    if config is not None:
        argv += ["--config", str(config)]
    proc = dk.start_daemon(argv, tmp / "daemon.log")
    feeder = None
    scrapes: list[tuple[float, dict[Any, float]]] = []
    try:
        dk.wait_until(lambda: _scrape(port) is not None, 600, "the daemon's /metrics", 0.2)
        if not backlog:
            feeder = threading.Thread(
                target=produce, args=(records,),
                kwargs={"topic": topic, "bootstrap_servers": bootstrap, "key": "kd",
                        "rate": rate, "progress": False, "wall_clock_ts": True},
                daemon=True,
            )  # fmt: skip
            feeder.start()
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            values = _scrape(port)
            if values and values.get(STALE) is not None and values.get(LEARNED, 0) > 0:
                scrapes.append((time.monotonic(), values))
                if values[LEARNED] >= total:
                    break
            time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        if feeder is not None:
            feeder.join(timeout=30)
    return summarise(scrapes, total)


def _scrape(port: int) -> dict[Any, float] | None:
    from tests import daemon_kafka as dk

    try:
        return dk.metrics(port)
    except OSError:
        return None


def summarise(scrapes: list[tuple[float, dict[Any, float]]], total: int) -> dict[str, Any]:
    flowing = [(t, v) for t, v in scrapes if v[LEARNED] < total]
    arrivals: list[float] = []
    last_end = 0.0
    for t, v in scrapes:
        if v[END] != last_end and v[END] > 0:
            arrivals.append(t)
            last_end = v[END]
    gaps = np.diff(arrivals) if len(arrivals) > 1 else np.array([math.nan])
    lags = [v[LAG] for _, v in flowing if not math.isnan(v[LAG])]
    span = scrapes[-1][0] - scrapes[0][0] if len(scrapes) > 1 else math.nan
    done = scrapes[-1][1][LEARNED] - scrapes[0][1][LEARNED] if scrapes else 0
    return {
        "learned": int(scrapes[-1][1][LEARNED]) if scrapes else 0,
        "rate": done / span if span and span > 0 else math.nan,
        "estimates": len(arrivals),
        "gap_median": float(np.median(gaps)),
        "gap_max": float(np.max(gaps)),
        "max_lag": max(lags) if lags else math.nan,
        "stale": sum(1 for _, v in flowing if v[STALE] != 0.0),
        "scrapes": len(flowing),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=1000.0, help="steady records/s")
    parser.add_argument("--seconds", type=float, default=40.0, help="steady run length")
    parser.add_argument("--backlog", type=int, default=60_000)
    _table.add_out(parser)
    args = parser.parse_args(argv)

    from streammkl.daemon.commands.broker import EmbeddedBroker

    tmp = Path(tempfile.mkdtemp(prefix="regret-cadence-"))
    broker = EmbeddedBroker(log_path=tmp / "tansu.log")
    broker.start()
    rows: list[list[object]] = []
    try:
        for label, config in (("deploy settings", DEPLOY), ("default learner", None)):
            cases = [
                (f"steady {args.rate:.0f}/s", {}, 0, args.rate, args.seconds),
                (f"backlog {args.backlog:,}", {}, args.backlog, 0.0, 0.0),
                (f"backlog {args.backlog:,}, catch_up_share = 1",
                 {"monitor.catch_up_share": 1.0}, args.backlog, 0.0, 0.0),
                (f"backlog {args.backlog:,}, catch_up_seconds = 0",
                 {"monitor.catch_up_seconds": 0}, args.backlog, 0.0, 0.0),
            ]  # fmt: skip
            for case, settings, backlog, rate, seconds in cases:
                s = run_daemon(broker.bootstrap_servers, tmp, config, settings, backlog, rate,
                               seconds)  # fmt: skip
                row = [
                    label, case, f"{s['rate']:,.0f}", s["estimates"],
                    f"{s['gap_median']:.1f}", f"{s['gap_max']:.1f}", f"{s['max_lag']:,.0f}",
                    f"{s['stale']} / {s['scrapes']}",
                ]  # fmt: skip
                print(" | ".join(str(c) for c in row), flush=True)
                rows.append(row)
    finally:
        broker.stop(kill=True)
    body = (
        f"{_table.machine()}\n\n"
        "One daemon process per row on the embedded broker, kernel-drift records, /metrics "
        "scraped every 0.2 s while records flowed; monitor defaults (W = 2000, K = 500, "
        "comparator_epochs 10, duty 0.05, nice 19, refresh 30,000 examples / 15 s, catch-up "
        "share 0.1; the deploy settings: share 1).\n\n"
        + _table.markdown(
            [
                "learner",
                "stream",
                "records/s learned",
                "estimates",
                "s between (median)",
                "s between (max)",
                "max lag (examples)",
                "stale scrapes",
            ],
            rows,
        )
    )
    full = _table.documented_run(parser, args)
    _table.publish("regret_cadence", "Windowed-regret cadence", body, full, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
