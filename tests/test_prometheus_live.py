"""A real Prometheus (Debian's ``prometheus``) scraping a real daemon fed by the kernel-drift
simulator through the test broker, queried over its HTTP API.

The stream has two phases (labels from a linear function, then from narrow RBF bumps, an abrupt
switch). Phase one is produced, learned and scraped before phase two is produced, so whatever
Prometheus holds at that moment is "before the switch". The daemon runs with the deploy settings
(deploy/config/streammkl.toml) and Prometheus with the deploy alert rules (deploy/prometheus/).
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from streammkl.daemon.commands.broker import free_port
from tests import daemon_kafka as dk

pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group("kafka")]

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "deploy" / "config" / "streammkl.toml"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"
PHASE = 600  # examples per phase
KERNELS = 4  # in deploy/config/streammkl.toml


@dataclass
class Run:
    """A running Prometheus and what the stream did, for the tests to query."""

    url: str
    switch_time: float  # Prometheus time at which all of phase one was learned and scraped
    end_time: float  # ... all of phase two
    daemon_log: Path

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"query": expr, **({"time": f"{at:.3f}"} if at is not None else {})}
        return api(self.url, "/api/v1/query?" + urllib.parse.urlencode(params))["result"]

    def value(self, expr: str, at: float | None = None) -> float | None:
        """The single value of ``expr`` (``None`` if Prometheus has no such series)."""
        result = self.query(expr, at)
        if not result:
            return None
        assert len(result) == 1, f"{expr}: expected one series, got {result}"
        return float(result[0]["value"][1])


def api(url: str, path: str) -> Any:
    with urllib.request.urlopen(url + path, timeout=5) as resp:
        body = json.loads(resp.read())
    assert body["status"] == "success", body
    return body["data"]


def wait_for_value(run: Run, expr: str, expected: float, timeout: float) -> float:
    """Poll until ``expr`` == ``expected`` in Prometheus; return the query time it held at."""
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        now = time.time()
        seen = run.value(expr, now)
        if seen == expected:
            return now
        time.sleep(0.25)
    log = run.daemon_log.read_text()[-3000:]
    raise AssertionError(
        f"{expr}: {seen} after {timeout}s, expected {expected}; daemon log:\n{log}"
    )


def start_prometheus(
    tmp: Path, target: str, config: dict[str, Any] | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """A Prometheus on a free loopback port (ready), scraping ``target`` every second with the
    deploy alert rules, or running ``config``."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail(
            "prometheus not found: run `bash deploy/install-prometheus.sh` (make test does)"
        )
    if config is None:
        config = {
            "global": {
                "scrape_interval": "1s", "scrape_timeout": "900ms", "evaluation_interval": "1s"
            },
            "rule_files": [str(ALERTS)],
            "scrape_configs": [
                {"job_name": "streammkl", "static_configs": [{"targets": [target]}]}
            ],
        }  # fmt: skip
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = open(tmp / "prometheus.log", "wb")
    proc = subprocess.Popen(
        [
            binary, f"--config.file={tmp / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    log.close()
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"prometheus exited: {(tmp / 'prometheus.log').read_text()}")
        try:
            with urllib.request.urlopen(url + "/-/ready", timeout=1) as resp:
                return resp.status == 200
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    dk.wait_until(ready, 90, "prometheus /-/ready", every=0.2)  # slow to start on a busy box
    return proc, url


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def monitor_overrides() -> dict[str, Any]:
    """Regret windows small enough to be fitted within the run, and fits not paced to a share
    of a core nor run at a low priority (the run lasts seconds, on a machine that may be busy),
    if the daemon has a ``monitor`` settings section with the :class:`streammkl.monitor.Monitor`
    parameter names."""
    from streammkl.daemon.config import Settings

    field = Settings.model_fields.get("monitor")
    section = getattr(field, "annotation", None)
    names = set(getattr(section, "model_fields", ()))
    # comparator_nice 0: at the default 19 the comparator thread gets almost no CPU beside
    # busy processes, and on a loaded machine no window was fitted within minutes (measured)
    wanted = {
        "window": PHASE // 2, "every": PHASE // 2, "comparator_duty": 1.0, "comparator_nice": 0
    }  # fmt: skip
    return {f"monitor.{k}": v for k, v in wanted.items() if k in names}


@pytest.fixture(scope="module")
def run(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    from simulators import get
    from simulators.kafka_producer import produce

    tmp = tmp_path_factory.mktemp("prometheus-live")
    topic = dk.unique("prom")
    dk.create_topic(kafka_bootstrap, topic, 1)
    scenario = get(
        "kernel-drift", seed=0, phases=("linear", "rbf"), phase_length=PHASE, switch="abrupt"
    )
    assert scenario.ground_truth()["switches"][0]["at"] == PHASE
    records = list(scenario)
    port = free_port()
    argv = [
        *dk.daemon_argv(
            kafka_bootstrap, topic, dk.unique("g"), tmp / "ck", port=port,
            settings={
                "metrics.host": "127.0.0.1", "checkpoint.every_seconds": 3600,
                **monitor_overrides(),
            },
        ),
        "--config", str(CONFIG),
    ]  # fmt: skip
    daemon = dk.start_daemon(argv, tmp / "daemon.log")
    prometheus = None
    try:
        prometheus, url = start_prometheus(tmp, f"127.0.0.1:{port}")
        r = Run(url, 0.0, 0.0, tmp / "daemon.log")

        def send(chunk: list[Any]) -> None:
            produce(
                chunk, topic=topic, bootstrap_servers=kafka_bootstrap, key="kd",
                progress=False, wall_clock_ts=True,
            )  # fmt: skip

        learned = "streammkl_model_examples_learned_total"
        send(records[:PHASE])
        r.switch_time = wait_for_value(r, learned, PHASE, 60)
        send(records[PHASE:])
        dk.produce(kafka_bootstrap, topic, [b'{"x": [1.0, NaN], "y": true}'])  # one dead letter
        r.end_time = wait_for_value(r, learned, 2 * PHASE, 60)
        wait_for_value(r, "streammkl_dead_letters_total", 1, 30)
        yield r
    finally:
        if prometheus is not None:
            stop(prometheus)
        stop(daemon)


def test_kernel_weights_sum_to_one_in_prometheus(run: Run) -> None:
    for at in (run.switch_time, run.end_time):
        assert run.value("count(streammkl_kernel_weight)", at) == KERNELS
        total = run.value("sum(streammkl_kernel_weight)", at)
        assert total is not None and abs(total - 1.0) <= 1e-6, total
        # each weight is a proportion
        assert run.value("min(streammkl_kernel_weight)", at) >= 0.0
    # the learner moved between the two moments (it learned phase two)
    before, after = (
        {
            r["metric"]["kernel"]: float(r["value"][1])
            for r in run.query("streammkl_kernel_weight", at)
        }
        for at in (run.switch_time, run.end_time)
    )
    assert before.keys() == after.keys()
    assert sum(abs(after[k] - before[k]) for k in before) > 0


def test_deploy_alert_rules_evaluate_on_the_live_series(run: Run) -> None:
    rules = [r for g in api(run.url, "/api/v1/rules")["groups"] for r in g["rules"]]
    assert len(rules) == 10
    assert all(r["health"] == "ok" for r in rules), [(r["name"], r.get("lastError")) for r in rules]

    def active() -> dict[str, set[str]]:
        out: dict[str, set[str]] = {"firing": set(), "pending": set()}
        for alert in api(run.url, "/api/v1/alerts")["alerts"]:
            out[alert["state"]].add(alert["labels"]["alertname"])
        return out

    def dead_letters_firing() -> dict[str, set[str]] | None:
        state = active()
        return state if "StreamMKLDeadLetters" in state["firing"] else None

    state = dk.wait_until(dead_letters_firing, 60, "StreamMKLDeadLetters to fire")
    # the one bad record fires the dead-letter alert (no `for`); learned examples with no
    # checkpoint yet (the run keeps every_seconds = 3600) make StreamMKLCheckpointTooOld pending
    # (it fires after 5 m); the regret may legitimately be rising right after the switch; a
    # ready, learning, finite model raises nothing else (the regret estimate may be stale
    # while the comparator fits its first window: pending at most, its `for` is 15 m)
    assert state["firing"] == {"StreamMKLDeadLetters"}, state
    assert "StreamMKLCheckpointTooOld" in state["pending"], state
    assert state["pending"] <= {
        "StreamMKLCheckpointTooOld",
        "StreamMKLRegretPerExampleRising",
        "StreamMKLRegretEstimateStale",
    }


def test_regret_is_finite_and_the_bounds_say_none_applies(run: Run) -> None:
    # the windowed regret is NaN until the comparator's first fit (on the monitor's worker
    # thread, off the learning path) has finished: wait for it rather than race it
    def fitted() -> float | None:
        now = time.time()
        value = run.value("streammkl_window_regret", now)
        return now if value is not None and math.isfinite(value) else None

    at = max(run.end_time, dk.wait_until(fitted, 120, "a finite windowed regret", every=0.5))
    # the deploy learner learns by FTRL (exact zeros for the kernel it does not need), which has
    # no regret bound proven here: the bounds are exported as +Inf ("no finite bound"), never
    # a made-up number
    for name in ("streammkl_window_regret_bound", "streammkl_regret_bound"):
        values = [float(s["value"][1]) for s in run.query(name, at)]
        assert values == [math.inf], f"{name}: {values}"
    for name in ("streammkl_window_regret",):
        series = run.query(name, at)
        assert series, (
            f"Prometheus has no {name} series: the daemon does not export it "
            "(streammkl/daemon/http/metrics.py)"
        )
        # The windowed values come from comparators fitted on a background thread: NaN until
        # the first fit is published, which on a loaded machine may be after the last record
        # was learned. Wait for it (generously) rather than for a fixed moment.
        deadline = time.monotonic() + 90
        values = [float(s["value"][1]) for s in series]
        while not all(math.isfinite(v) for v in values) and time.monotonic() < deadline:
            time.sleep(0.5)
            values = [float(s["value"][1]) for s in run.query(name, time.time())]
        assert values and all(math.isfinite(v) for v in values), f"{name}: {values}"


def test_drift_detection_visible_after_the_switch(run: Run) -> None:
    name = "streammkl_drift_detections_total"
    after = run.value(name, run.end_time)
    assert after is not None, (
        f"Prometheus has no {name} series: the daemon does not export it "
        "(streammkl/daemon/http/metrics.py)"
    )
    before = run.value(name, run.switch_time) or 0.0
    assert after > before, f"no drift detection after the switch at {PHASE}: {before} -> {after}"


#: The monitor's counts, as counters, and the gauges they replace (deprecated for one release).
COUNTERS = (
    ("streammkl_monitor_examples_total", "streammkl_monitor_examples"),
    ("streammkl_nonfinite_objective_terms_total", "streammkl_nonfinite_objective_terms"),
    ("streammkl_comparator_fits_skipped_total", "streammkl_comparator_fits_skipped"),
    ("streammkl_comparator_errors_total", "streammkl_comparator_errors"),
)


def test_counts_are_counters_and_their_old_gauges_are_marked_deprecated(run: Run) -> None:
    """The monitor's counts are scraped as counters (``_total``; ``increase()`` works on them,
    as StreamMKLNonFiniteLoss uses it), and their former gauges carry the same values for one
    release, with help texts that say they are deprecated."""
    for counter, gauge in COUNTERS:
        meta = api(run.url, "/api/v1/metadata?" + urllib.parse.urlencode({"metric": counter}))
        assert [m["type"] for m in meta[counter]] == ["counter"], meta
        old = api(run.url, "/api/v1/metadata?" + urllib.parse.urlencode({"metric": gauge}))
        (entry,) = old[gauge]
        assert entry["type"] == "gauge" and entry["help"].startswith("DEPRECATED"), entry
        assert counter in entry["help"], entry
    # every learned example is observed by the monitor (published with the model view, at most
    # 0.5 s later); none had a non-finite term
    at = wait_for_value(run, "streammkl_monitor_examples_total", 2 * PHASE, 30)
    assert run.value("streammkl_nonfinite_objective_terms_total", at) == 0.0
    for counter, gauge in COUNTERS:
        assert run.value(f"{counter} - {gauge}", at) == 0.0
    grew = run.value(
        f"increase(streammkl_monitor_examples_total[{at - run.switch_time + 30:.0f}s])", at
    )
    assert grew is not None and grew > 0, grew
