"""The windowed regret keeps coming while the daemon works through a backlog (issue 30, item 3).

A burst of the kernel-drift simulator is produced into the real broker before the daemon starts
(the deploy settings, deploy/config/streammkl.toml, with the monitor's defaults): the daemon then
learns as fast as it can, far faster than the comparator's duty allows fits. ``/metrics`` is
scraped all along: the stale flag must stay 0 while records flow, and fresh estimates must keep
arriving (the window's end moves on), so the windowed regret is never a number from minutes ago.
At the end the deploy bank's unneeded kernel has weight exactly 0 on ``/metrics``. Before the
fix one fit of the deploy bank took ~6.7 s of CPU (100 epochs) and, at 1,000 records/s,
one estimate came in 40 s; a 103,000-record backlog skipped 204 windows and published none.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from streammkl.daemon.commands.broker import free_port
from streammkl.daemon.config import load_settings
from streammkl.daemon.learning import history
from tests import daemon_kafka as dk

pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group("kafka")]

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "deploy" / "config" / "streammkl.toml"
BACKLOG = 60_000  # the compose simulator's three phases
#: The kernel of the deploy bank that the simulator's stream does not need.
UNNEEDED = "rff(gamma=0.2,D=128)"

LEARNED = ("streammkl_model_examples_learned_total", ())
STALE = ("streammkl_window_regret_stale", ())
END = ("streammkl_window_end", ())
LAG = ("streammkl_window_regret_lag", ())
SKIPPED = ("streammkl_comparator_fits_skipped_total", ())


def test_estimates_keep_arriving_through_a_backlog(kafka_bootstrap: str, tmp_path: Path) -> None:
    from simulators import get
    from simulators.kafka_producer import produce

    monitor = load_settings(CONFIG, env={}).monitor
    topic = dk.unique("backlog")
    dk.create_topic(kafka_bootstrap, topic, 1)
    # the compose simulator's stream (deploy/compose.yaml: phases of 20,000 examples)
    records = list(get("kernel-drift", seed=0, phase_length=20_000, n_samples=BACKLOG))
    produce(records, topic=topic, bootstrap_servers=kafka_bootstrap, key="kd", progress=False)
    port = free_port()
    argv = [
        *dk.daemon_argv(
            kafka_bootstrap, topic, dk.unique("g"), tmp_path / "ck", port=port,
            settings={"metrics.host": "127.0.0.1", "checkpoint.every_seconds": 3600},
        ),
        "--config", str(CONFIG),
    ]  # fmt: skip
    daemon = dk.start_daemon(argv, tmp_path / "daemon.log")
    scrapes: list[dict[tuple[str, tuple[tuple[str, str], ...]], float]] = []
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and daemon.poll() is None:
            try:
                values = dk.metrics(port)
            except OSError:  # not listening yet
                time.sleep(0.2)
                continue
            if values.get(STALE) is not None:  # the monitor has published
                values["t", ()] = time.monotonic()
                scrapes.append(values)
                if values[LEARNED] >= BACKLOG:
                    break
            time.sleep(0.2)
        log = (tmp_path / "daemon.log").read_text()
        assert daemon.poll() is None, log
        assert scrapes and scrapes[-1][LEARNED] == BACKLOG, log
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)
    # the history (a row every 100 examples, written by the final checkpoint) says at each
    # row whether the estimate was stale then, and β: stale never, the unneeded kernel at 0
    rows = [r for r in history.read(tmp_path / "ck") if "event" not in r]
    assert rows and rows[-1]["t"] == BACKLOG, rows[-1:]
    stale_rows = [r["t"] for r in rows if r["window_regret_stale"] != 0.0]
    assert not stale_rows, f"stale at examples {stale_rows}"
    kept = [r["t"] for r in rows if r["t"] >= 6_000 and r["beta"][UNNEEDED] != 0.0]
    assert not kept, f"{UNNEEDED} not at 0 at examples {kept}"
    flowing = [s for s in scrapes if s[LEARNED] < BACKLOG]
    assert len(flowing) >= 3, "the scrapes saw too little of the backlog to judge"
    stale = [(s[LEARNED], s[END], s[LAG]) for s in flowing if s[STALE] != 0.0]
    assert not stale, f"stale while records flowed (learned, window end, lag): {stale}"
    # estimates kept coming (as the history rows saw them): at least one per refresh schedule
    ends = sorted({r["window_end"] for r in rows if r["window_end"]})
    assert len(ends) >= BACKLOG // monitor.refresh_examples, ends
    lags = [r["window_regret_lag"] for r in rows if r["window_regret_lag"] is not None]
    assert lags and max(lags) < monitor.refresh_examples, max(lags)
    scraped = [s[LAG] for s in flowing if not math.isnan(s[LAG])]
    assert all(lag < monitor.refresh_examples for lag in scraped), scraped
    span = scrapes[-1]["t", ()] - scrapes[0]["t", ()]
    rate = (scrapes[-1][LEARNED] - scrapes[0][LEARNED]) / max(span, 1e-9)
    # the deploy bank's unneeded kernel is dropped: weight exactly 0 on the real /metrics
    weights = {
        dict(labels)["kernel"]: v
        for (name, labels), v in scrapes[-1].items()
        if name == "streammkl_kernel_weight"
    }
    assert weights[UNNEEDED] == 0.0 and abs(sum(weights.values()) - 1.0) < 1e-9, weights
    print(
        f"kernel weights after {BACKLOG}: {weights}\n"
        f"backlog {BACKLOG}: {len(flowing)} scrapes while learning (~{rate:.0f} records/s), "
        f"{len(ends)} estimates, window ends {ends}, max lag {max(lags):.0f}, "
        f"windows skipped {scrapes[-1][SKIPPED]:.0f}"
    )
