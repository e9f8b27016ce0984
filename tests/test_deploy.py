"""deploy/: promtool checks, alert unit tests, and the assets' references to each other.

- ``promtool check config`` / ``check rules`` / ``test rules`` pass, every alert has a firing and a
  non-firing unit test, and the unit tests fail when a rule is broken;
- every metric name in the alert rules and the Grafana dashboard is one a live daemon exports
  (started on the test broker with the deploy settings, fed records, scraped);
- compose, Kubernetes, Dockerfile and Grafana provisioning parse and point at files, ports and
  paths that exist and agree with the daemon's settings file.

promtool comes from the Debian package ``prometheus``: ``bash deploy/install-prometheus.sh``
(``make test`` runs it).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
PROM = DEPLOY / "prometheus"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "streammkl.json"
CONFIG = DEPLOY / "config" / "streammkl.toml"
#: The kernel bank of deploy/config/streammkl.toml, by core name.
DEPLOY_KERNELS = ["linear", "rff(gamma=2,D=256)", "poly2", "rff(gamma=0.2,D=128)"]


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def alerts() -> list[dict[str, Any]]:
    return [r for g in load_yaml(PROM / "alerts.yml")["groups"] for r in g["rules"] if "alert" in r]


def settings_file() -> dict[str, Any]:
    return tomllib.loads(CONFIG.read_text())


@pytest.fixture(scope="module")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool not found: run `bash deploy/install-prometheus.sh` (make test does)")
    return path


def run_promtool(promtool: str, *args: str, cwd: Path = PROM) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )


# -- promtool ---------------------------------------------------------------------------------


def test_promtool_check_config_loads_the_rules(promtool: str) -> None:
    out = run_promtool(promtool, "check", "config", "prometheus.yml")
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in out.stdout + out.stderr


def test_promtool_check_rules(promtool: str) -> None:
    out = run_promtool(promtool, "check", "rules", "alerts.yml")
    assert out.returncode == 0, out.stdout + out.stderr
    names = [a["alert"] for a in alerts()]
    assert len(names) == len(set(names)) == 10


def test_promtool_unit_tests_pass(promtool: str) -> None:
    out = run_promtool(promtool, "test", "rules", "alerts_test.yml")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_every_alert_has_a_firing_and_a_non_firing_case() -> None:
    cases: dict[str, dict[str, int]] = {}
    for group in load_yaml(PROM / "alerts_test.yml")["tests"]:
        instances = {
            m.group(1)
            for s in group["input_series"]
            for m in [re.search(r'instance="([^"]+)"', s["series"])]
            if m
        }
        for case in group.get("alert_rule_test", []):
            seen = cases.setdefault(case["alertname"], {"firing": 0, "silent": 0})
            fired = {a["exp_labels"]["instance"] for a in case.get("exp_alerts") or []}
            seen["firing"] += bool(fired)
            # silent: an evaluation with no alert, or input instances that must not fire
            seen["silent"] += (not fired) + bool(fired and instances - fired)
    for alert in alerts():
        name = alert["alert"]
        assert cases.get(name, {}).get("firing"), f"{name}: no firing unit test"
        assert cases[name]["silent"], f"{name}: no non-firing unit test"
        assert alert["labels"]["severity"] in ("warning", "critical")
        assert alert["annotations"]["summary"] and alert["annotations"]["description"]


@pytest.mark.parametrize(
    ("alert", "old", "new"),
    [
        ("StreamMKLCheckpointTooOld", "> 300", "> 3000"),
        ("StreamMKLNonFiniteLoss", "== Inf", "== 1"),
        ("StreamMKLConsumerLagGrowing", "[10m]) > 0", "[10m]) > -1000"),
        ("StreamMKLNonFiniteLoss", "terms_total[5m]) > 0", "terms_total[5m]) > 5"),
        ("StreamMKLRegretPerExampleRising", "example > 0", "example > -1"),
    ],
)
def test_unit_tests_catch_a_broken_rule(
    promtool: str, tmp_path: Path, alert: str, old: str, new: str
) -> None:
    text = (PROM / "alerts.yml").read_text()
    start = text.index(f"alert: {alert}")
    end = text.find("- alert:", start + 1)
    end = len(text) if end < 0 else end
    assert old in text[start:end]
    (tmp_path / "alerts.yml").write_text(
        text[:start] + text[start:end].replace(old, new) + text[end:]
    )
    shutil.copy(PROM / "alerts_test.yml", tmp_path)
    out = run_promtool(promtool, "test", "rules", "alerts_test.yml", cwd=tmp_path)
    assert out.returncode != 0
    assert alert in out.stdout + out.stderr


# -- metric names in PromQL -------------------------------------------------------------------

PROMQL_FUNCTIONS = {
    "abs", "absent", "absent_over_time", "avg", "avg_over_time", "bottomk", "ceil", "changes",
    "clamp", "clamp_max", "clamp_min", "count", "count_over_time", "count_values", "delta",
    "deriv", "exp", "floor", "group", "histogram_quantile", "idelta", "increase", "irate",
    "label_join", "label_replace", "last_over_time", "ln", "log2", "log10", "max",
    "max_over_time", "min", "min_over_time", "predict_linear", "quantile",
    "quantile_over_time", "rate", "resets", "round", "scalar", "sgn", "sort", "sort_desc",
    "sqrt", "stddev", "stddev_over_time", "stdvar", "sum", "sum_over_time", "time", "timestamp",
    "topk", "vector",
}  # fmt: skip
PROMQL_KEYWORDS = {"and", "or", "unless", "bool", "offset", "Inf", "NaN", "inf", "nan"}
#: Series that Prometheus itself makes for every target.
PROMETHEUS_SERIES = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}


def promql_metric_names(expr: str) -> set[str]:
    """Metric names in a PromQL (or Grafana query-variable) expression.

    Raises ``ValueError`` on a call of an unknown function (a typo would otherwise pass).
    """
    s = re.sub(r"label_values\(\s*([^,()]+?)\s*,\s*\w+\s*\)", r" \1 ", expr)  # Grafana
    s = re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`', '""', s)
    s = re.sub(r"\{[^{}]*\}", " ", s)  # label matchers
    s = re.sub(r"\[[^\]]*\]", " ", s)  # ranges, subqueries
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    s = re.sub(r"\$\{?\w+\}?", " ", s)  # Grafana variables
    names = set()
    for match in re.finditer(r"(?<![\w.$])([A-Za-z_:][\w:]*)(\s*\()?", s):
        token, call = match.group(1), match.group(2)
        if token in PROMQL_KEYWORDS:
            continue
        if call:
            if token not in PROMQL_FUNCTIONS:
                raise ValueError(f"unknown PromQL function {token!r} in {expr!r}")
        else:
            names.add(token)
    return names


def test_promql_metric_names_parser() -> None:
    expr = (
        "histogram_quantile(0.99, sum by (le) (rate(streammkl_learn_duration_seconds_bucket"
        '{instance=~"$instance", job="a b"}[$__rate_interval]))) / on (job) group_left (x)'
        " streammkl_ready offset 5m or abs(up) == Inf and 1e300 > bool 2 unless (a_total)"
    )
    assert promql_metric_names(expr) == {
        "streammkl_learn_duration_seconds_bucket", "streammkl_ready", "up", "a_total",
    }  # fmt: skip
    assert promql_metric_names("label_values(streammkl_up, instance)") == {"streammkl_up"}
    with pytest.raises(ValueError, match="ratee"):
        promql_metric_names("ratee(x[5m])")


def dashboard_queries(node: Any) -> list[str]:
    """Every PromQL string of the dashboard: panel targets, annotations, query variables."""
    out: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "definition") and isinstance(value, str):
                out.append(value)
            elif key == "query" and isinstance(value, str):
                out.append(value)
            else:
                out.extend(dashboard_queries(value))
    elif isinstance(node, list):
        for item in node:
            out.extend(dashboard_queries(item))
    return out


def used_metric_names() -> dict[str, set[str]]:
    """{metric name: where it is used} over alerts.yml and the dashboard."""
    used: dict[str, set[str]] = {}
    for alert in alerts():
        for name in promql_metric_names(alert["expr"]):
            used.setdefault(name, set()).add(f"alert {alert['alert']}")
    for expr in dashboard_queries(json.loads(DASHBOARD.read_text())):
        for name in promql_metric_names(expr):
            used.setdefault(name, set()).add("dashboard")
    return used


def exported_names(exposition: str) -> set[str]:
    """Series names a Prometheus scrape of this exposition can produce (families without a
    sample yet included, with the suffixes their type implies)."""
    from prometheus_client.parser import text_string_to_metric_families

    suffixes = {
        "counter": ("_total", "_created"),
        "histogram": ("_bucket", "_sum", "_count", "_created"),
        "summary": ("", "_sum", "_count", "_created"),
        "info": ("_info",),
    }
    names: set[str] = set()
    for fam in text_string_to_metric_families(exposition):
        names.update(fam.name + s for s in suffixes.get(fam.type, ("",)))
        names.update(s.name for s in fam.samples)
    return names


def test_exported_names_handles_suffixes() -> None:
    text = (
        '# TYPE a_total counter\n# TYPE h histogram\nh_bucket{le="+Inf"} 1\nh_sum 1\n'
        "h_count 1\n# TYPE g gauge\ng 1\n"
    )
    assert exported_names(text) >= {"a_total", "h_bucket", "h_sum", "h_count", "g"}
    assert "a" not in exported_names(text) and "h" not in exported_names(text)


@pytest.fixture(scope="module")
def live_exposition(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """``/metrics`` of a daemon run with the deploy settings, after learning kernel-drift
    records and dead-lettering one bad record."""
    from simulators import get
    from streammkl import wire
    from streammkl.daemon.commands.broker import free_port
    from tests import daemon_kafka as dk

    tmp = tmp_path_factory.mktemp("deploy-live")
    topic = dk.unique("deploy")
    dk.create_topic(kafka_bootstrap, topic, 1)
    values = [wire.encode(r) for r in get("kernel-drift", seed=3, phase_length=100)]
    dk.produce(kafka_bootstrap, topic, [*values, b"{not json"])
    port = free_port()
    argv = [
        *dk.daemon_argv(
            kafka_bootstrap, topic, dk.unique("g"), tmp / "ck", port=port,
            settings={"metrics.host": "127.0.0.1"},
        ),
        "--config", str(CONFIG),
    ]  # fmt: skip
    proc = dk.start_daemon(argv, tmp / "daemon.log")
    try:
        key = ("streammkl_model_examples_learned_total", ())
        dk.wait_until(
            lambda: dk.metrics(port).get(key) == len(values) or proc.poll() is not None,
            90, f"the daemon to learn {len(values)} records",
        )  # fmt: skip
        assert proc.poll() is None, (tmp / "daemon.log").read_text()
        dk.wait_until(lambda: dk.metrics(port).get(("streammkl_dead_letters_total", ())), 60, "DLQ")
        code, body = dk.http_get(port, "/metrics")
        assert code == 200
        return body
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def declared(name: str) -> str:
    """``"; declared by streammkl.monitor"`` if the monitor names this metric (not exported yet)."""
    try:
        from streammkl.monitor import METRICS
    except ImportError:
        return ""
    specs = {
        m.name + ("" if m.type == "gauge" or m.name.endswith("_total") else "_total")
        for m in METRICS.values()
    }
    return "; declared by streammkl.monitor.METRICS" if name in specs else ""


def mixing_exposition() -> str:
    """The ``streammkl_mix_*`` families a daemon with ``mixing.enabled`` exports (its
    ``DaemonMetrics(mixing=True)``; the live daemon here does not mix)."""
    from prometheus_client import CollectorRegistry, generate_latest

    from streammkl.daemon.http.metrics import DaemonMetrics

    text = generate_latest(DaemonMetrics(CollectorRegistry(), mixing=True).registry).decode()
    return "\n".join(line for line in text.splitlines() if "streammkl_mix_" in line) + "\n"


@pytest.mark.kafka
@pytest.mark.xdist_group("kafka")
def test_alert_and_dashboard_metrics_are_exported_by_a_live_daemon(live_exposition: str) -> None:
    """The deploy daemon (mixing off) exports every metric deploy/ uses but the mixing group's,
    which only a mixing daemon exports (:func:`mixing_exposition`)."""
    exported = exported_names(live_exposition)
    assert not {n for n in exported if n.startswith("streammkl_mix_")}, "mixing is off"
    exported |= exported_names(mixing_exposition())
    used = used_metric_names()
    missing = {
        name: sorted(where)
        for name, where in sorted(used.items())
        if name not in exported and name not in PROMETHEUS_SERIES
    }
    assert not missing, (
        "metrics used in deploy/ but not exported by the daemon "
        "(streammkl/daemon/http/metrics.py): "
        + "; ".join(f"{n} (in {', '.join(w)}{declared(n)})" for n, w in missing.items())
    )
    # the scrape really carries the model: one weight per configured kernel
    weights = re.findall(
        r'^streammkl_kernel_weight\{kernel="([^"]+)"\} (\S+)$', live_exposition, re.M
    )
    assert sorted(k for k, _ in weights) == sorted(DEPLOY_KERNELS)
    assert sum(float(v) for _, v in weights) == pytest.approx(1.0)


@pytest.mark.kafka
@pytest.mark.xdist_group("kafka")
def test_labels_used_in_deploy_exist_on_the_live_metrics(live_exposition: str) -> None:
    exposition = live_exposition + mixing_exposition()  # (the mixing group's: see above)
    labels = set(re.findall(r"[{,]\s*([a-zA-Z_]\w*)=\"", exposition))
    texts = [a["expr"] for a in alerts()] + [
        str(a.get("annotations", {}).get("summary", "")) for a in alerts()
    ]
    used = set()
    for text in texts:
        used |= set(re.findall(r"\$labels\.(\w+)", text))
        for group in re.findall(r"\b(?:by|without|on)\s*\(([^)]*)\)", text):
            used |= {g.strip() for g in group.split(",") if g.strip()}
    dash = DASHBOARD.read_text()
    used |= set(re.findall(r"\{\{\s*(\w+)\s*\}\}", dash))
    for group in re.findall(r"\b(?:by|without|on)\s*\(([^)]*)\)", dash):
        used |= {g.strip() for g in group.split(",") if g.strip()}
    target_labels = {"job", "instance", "le"}  # added by Prometheus / the histogram
    assert used - target_labels <= labels, (
        f"labels not on any metric: {used - target_labels - labels}"
    )
    assert {"kernel", "topic", "partition", "reason"} <= used


# -- the daemon's settings file and the image ---------------------------------------------------


def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of deploy/Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", (DEPLOY / "Dockerfile").read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def instruction(name: str) -> list[str]:
    return [args for word, args in dockerfile() if word == name]


def test_settings_file_builds_the_deploy_learner() -> None:
    from streammkl.daemon.config import load_settings
    from streammkl.daemon.learning.building import build_learner

    settings = load_settings(CONFIG, env={})
    assert settings.metrics.host == "127.0.0.1" and settings.metrics.port == 9108  # loopback
    assert settings.kafka.session_timeout_ms >= 6000  # real Kafka's minimum
    assert str(settings.checkpoint.dir) == "/var/lib/streammkl"
    assert list(build_learner(settings.learner).kernel_weights or DEPLOY_KERNELS) == DEPLOY_KERNELS


def test_the_deploy_learner_drops_the_kernel_the_simulator_does_not_need() -> None:
    """The shipped bank on the compose simulator's stream (kernel-drift, phases of 20,000):
    the wide RBF no phase needs has weight exactly 0 from a few thousand examples on (the
    sparsity the README promises, visible in the demo), through the switch to the RBF phase,
    while the phase's own kernel takes the weight. In process, the daemon's learner."""
    from simulators import get
    from streammkl.daemon.config import load_settings
    from streammkl.daemon.learning.building import build_learner

    learner = build_learner(load_settings(CONFIG, env={}).learner)
    unneeded = DEPLOY_KERNELS[3]
    zero_from = None
    for i, r in enumerate(get("kernel-drift", seed=0, phase_length=20_000, n_samples=24_000)):
        learner.learn_one(r.x, r.y)
        if (i + 1) % 500 == 0:
            w = learner.kernel_weights[unneeded]
            zero_from = (zero_from or i + 1) if w == 0.0 else None
    assert zero_from is not None and zero_from <= 6_000, zero_from  # ... and to the end
    weights = learner.kernel_weights
    assert weights[unneeded] == 0.0 and abs(sum(weights.values()) - 1.0) < 1e-9
    assert max(weights, key=weights.__getitem__) == "rff(gamma=2,D=256)"  # the RBF phase's


def test_dockerfile_warms_up_with_a_cli_command_that_runs_the_deploy_learner() -> None:
    """The image build's warm-up is ``streammkl warmup --config <the shipped settings>``: a
    command the CLI has, with the options it takes, and it runs on the deploy learner (rounds,
    a comparator fit and a checkpoint round trip) without an error."""
    from streammkl.daemon.commands.cli import build_parser

    config_dest = next(a.split()[-1] for a in instruction("COPY") if "streammkl.toml" in a)
    (warm,) = [a for a in instruction("RUN") if "warmup" in a]
    words = warm.split()
    assert words[:2] == ["streammkl", "warmup"], warm
    args = build_parser().parse_args(words[1:])  # an unknown command or option exits here
    assert args.func.__name__ == "cmd_warmup" and args.config == config_dest
    assert not (DEPLOY / "warm_numba.py").exists()
    done = subprocess.run(
        [sys.executable, "-m", "streammkl.daemon", "warmup", "--config", str(CONFIG)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "compiled" in done.stdout or "learner ready" in done.stdout, done.stdout


def test_dockerfile_references() -> None:
    s = settings_file()
    assert instruction("FROM") == ["python:3.11-slim"]
    for args in instruction("COPY"):
        *sources, _dest = args.split()
        for src in sources:
            assert (ROOT / src).exists(), f"COPY {src}: no such path in the build context"
    config_dest = next(a.split()[-1] for a in instruction("COPY") if "streammkl.toml" in a)
    cmd = json.loads(instruction("CMD")[-1])
    assert cmd[cmd.index("--config") + 1] == config_dest
    assert json.loads(instruction("ENTRYPOINT")[-1]) == ["streammkl"]
    assert any(f"warmup --config {config_dest}" in a for a in instruction("RUN"))
    assert any("NUMBA_CACHE_DIR=" in a for a in instruction("ENV"))
    users = instruction("USER")
    assert users and users[-1] not in ("root", "0")
    assert json.loads(instruction("VOLUME")[-1]) == [s["checkpoint"]["dir"]]
    assert instruction("EXPOSE") == [str(s["metrics"]["port"])]
    (health,) = instruction("HEALTHCHECK")
    assert f"127.0.0.1:{s['metrics']['port']}/healthz" in health
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().split()
    assert {".git", ".venv"} <= set(ignore)


# -- compose ------------------------------------------------------------------------------------


def compose() -> dict[str, Any]:
    return load_yaml(DEPLOY / "compose.yaml")


def volume_map(service: dict[str, Any]) -> dict[str, str]:
    """{container path: host source} of a compose service's volumes."""
    out = {}
    for v in service.get("volumes", []):
        source, target = v.split(":")[:2]
        out[target] = source
    return out


def test_compose_kafka_is_a_single_kraft_node() -> None:
    kafka = compose()["services"]["kafka"]
    assert kafka["image"].startswith("apache/kafka:")
    env = {k: str(v) for k, v in kafka["environment"].items()}
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    node = env["KAFKA_NODE_ID"]
    voter_id, _, voter = env["KAFKA_CONTROLLER_QUORUM_VOTERS"].partition("@")
    assert voter_id == node and voter.split(":")[0] == kafka.get("hostname", "kafka")
    listeners = dict(item.split("://") for item in env["KAFKA_LISTENERS"].split(","))
    assert listeners[env["KAFKA_CONTROLLER_LISTENER_NAMES"]] == ":" + voter.split(":")[1]
    protocol_map = dict(
        item.split(":") for item in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(",")
    )
    assert set(listeners) <= set(protocol_map)
    advertised = dict(item.split("://") for item in env["KAFKA_ADVERTISED_LISTENERS"].split(","))
    assert "CONTROLLER" not in advertised
    assert int(env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"]) == 1  # one broker
    import base64

    cluster = env["CLUSTER_ID"]
    assert len(base64.urlsafe_b64decode(cluster + "=" * (-len(cluster) % 4))) == 16
    # the daemon and the simulator reach the broker at its advertised internal listener
    internal = advertised[env["KAFKA_INTER_BROKER_LISTENER_NAME"]]
    daemon_env = compose()["services"]["streammkl"]["environment"]
    assert daemon_env["STREAMMKL_KAFKA__BOOTSTRAP_SERVERS"] == internal
    assert settings_file()["kafka"]["bootstrap_servers"] == internal


def test_compose_daemon_image_config_checkpoints_and_port() -> None:
    services = compose()["services"]
    daemon = services["streammkl"]
    build = daemon["build"]
    assert (DEPLOY / build["context"] / build["dockerfile"]).resolve() == DEPLOY / "Dockerfile"
    vols = volume_map(daemon)
    config_path = daemon["environment"]["STREAMMKL_CONFIG"]
    assert (DEPLOY / vols[config_path]).resolve() == CONFIG
    cmd = json.loads(instruction("CMD")[-1])
    assert cmd[cmd.index("--config") + 1] == config_path
    s = settings_file()
    assert s["checkpoint"]["dir"] in vols and vols[s["checkpoint"]["dir"]] in compose()["volumes"]
    port = s["metrics"]["port"]
    assert f"127.0.0.1:{port}:{port}" in daemon["ports"]
    assert daemon["environment"]["STREAMMKL_METRICS__HOST"] == "0.0.0.0"  # compose network
    assert daemon["stop_signal"] == "SIGTERM"
    assert daemon["read_only"] is True and "/tmp" in daemon["tmpfs"]
    assert vols["/var/cache/streammkl/numba"] in compose()["volumes"]  # writable numba cache


def test_compose_publishes_on_loopback_and_grafana_has_no_anonymous_access() -> None:
    services = compose()["services"]
    for name, service in services.items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} on every interface"
    env = services["grafana"]["environment"]
    assert env["GF_AUTH_ANONYMOUS_ENABLED"] == "false"
    assert env["GF_USERS_ALLOW_SIGN_UP"] == "false"
    assert env["GF_SECURITY_ADMIN_PASSWORD"].startswith("${GRAFANA_ADMIN_PASSWORD:?")


def test_compose_sasl_ssl_example_is_consistent(tmp_path: Path) -> None:
    """The SASL_SSL override: its secrets script runs (openssl), every listener but the
    controller's is SASL_SSL, and the daemon's settings in it validate and give its clients
    TLS + SASL with the generated CA and password."""
    from streammkl.daemon.config import load_settings
    from streammkl.daemon.kafka.security import kafka_python_options, librdkafka_options

    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed")
    script = DEPLOY / "kafka-sasl-ssl" / "make-secrets.sh"
    out = tmp_path / "secrets"
    env = {"PATH": "/usr/bin:/bin", "KAFKA_ADMIN_PASSWORD": "admin-pw",
           "KAFKA_CLIENT_PASSWORD": "client-pw"}  # fmt: skip
    done = subprocess.run(["bash", str(script), str(out)], env=env, capture_output=True,
                          text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "client-pw" not in done.stdout + done.stderr
    broker_files = {p.name for p in (out / "broker").iterdir()}
    assert {"kafka.p12", "keystore_creds", "key_creds", "kafka_server_jaas.conf", "ca.pem",
            "client.properties"} <= broker_files  # fmt: skip
    missing = subprocess.run(
        ["bash", str(script), str(tmp_path / "x")], env={"PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert missing.returncode != 0 and "KAFKA_ADMIN_PASSWORD" in missing.stderr

    override = load_yaml(DEPLOY / "compose.sasl-ssl.yaml")["services"]
    kafka = {**compose()["services"]["kafka"]["environment"], **override["kafka"]["environment"]}
    listeners = dict(item.split("://") for item in kafka["KAFKA_LISTENERS"].split(","))
    protocols = dict(i.split(":") for i in kafka["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    assert {protocols[name] for name in listeners if name != "CONTROLLER"} == {"SASL_SSL"}
    mount = override["kafka"]["volumes"][0].split(":")
    assert mount[1] == "/etc/kafka/secrets"
    for key in ("KAFKA_SSL_KEYSTORE_FILENAME", "KAFKA_SSL_KEYSTORE_CREDENTIALS",
                "KAFKA_SSL_KEY_CREDENTIALS"):  # fmt: skip
        assert kafka[key] in broker_files
    jaas = kafka["KAFKA_OPTS"].split("=", 1)[1]
    assert PurePosixPath(jaas).name in broker_files

    daemon = {**compose()["services"]["streammkl"]["environment"],
              **override["streammkl"]["environment"]}  # fmt: skip
    host, container = override["streammkl"]["volumes"][0].split(":")[:2]
    assert (DEPLOY / host).resolve() == (DEPLOY / "kafka-sasl-ssl" / "secrets" / "client").resolve()
    local = {k: v.replace(container, str(out / "client")) for k, v in daemon.items()
             if k.startswith("STREAMMKL_KAFKA__")}  # fmt: skip
    settings = load_settings(CONFIG, env=local)
    assert kafka_python_options(settings.kafka) == {
        "security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "streammkl", "sasl_plain_password": "client-pw",
        "ssl_check_hostname": True, "ssl_cafile": str(out / "client" / "ca.pem"),
    }  # fmt: skip
    assert librdkafka_options(settings.kafka)["sasl.password"] == "client-pw"
    sim = override["simulator"]["command"]
    config = json.loads((out / "client" / PurePosixPath(sim[sim.index("--kafka-config") + 1]).name)
                        .read_text())  # fmt: skip
    assert (
        config["security_protocol"] == "SASL_SSL" and config["sasl_plain_username"] == "streammkl"
    )


def test_compose_simulator_produces_kernel_drift_to_the_daemon_topic() -> None:
    from simulators import cli as sim_cli
    from streammkl.daemon.commands.cli import build_parser

    sim = compose()["services"]["simulator"]
    assert sim["image"] == compose()["services"]["streammkl"]["image"]
    assert sim["healthcheck"] == {"disable": True}  # the image's check probes the daemon port
    args = build_parser().parse_args([str(a) for a in sim["command"]])
    assert args.scenario == "kernel-drift"
    assert args.topic in settings_file()["kafka"]["topics"]
    assert args.bootstrap_servers == settings_file()["kafka"]["bootstrap_servers"]
    scenario = sim_cli.build(args)  # every option valid for the scenario
    # the phases' kernels are the bank's first three (the RBF by its random Fourier map, the
    # quadratic kernel by its explicit one: FTRL needs explicit blocks)
    phases = [s["kernel"] for s in scenario.ground_truth()["segments"][:3]]
    assert phases == ["linear", "rbf(gamma=2)", "poly2"]
    bank = settings_file()["learner"]["kernels"]
    assert bank[1] == {"type": "RBF", "gamma": 2.0, "n_components": 256}
    assert (bank[0]["type"], bank[2]["type"], bank[2]["degree"]) == ("Linear", "Polynomial", 2)


def test_compose_prometheus_and_grafana_mounts() -> None:
    services = compose()["services"]
    prom = services["prometheus"]
    vols = volume_map(prom)
    config_arg = next(a for a in prom["command"] if a.startswith("--config.file="))
    config_path = PurePosixPath(config_arg.split("=", 1)[1])
    host_dir = DEPLOY / vols[str(config_path.parent)]
    assert (host_dir / config_path.name).resolve() == PROM / "prometheus.yml"
    scrape = load_yaml(PROM / "prometheus.yml")
    assert all((host_dir / f).is_file() for f in scrape["rule_files"])
    job = next(j for j in scrape["scrape_configs"] if j["job_name"] == "streammkl")
    assert job["static_configs"][0]["targets"] == [
        f"streammkl:{settings_file()['metrics']['port']}"
    ]
    assert job.get("metrics_path", "/metrics") == "/metrics"
    assert any('up{job="streammkl"}' in a["expr"] for a in alerts())

    grafana = services["grafana"]
    gvols = volume_map(grafana)
    prov = DEPLOY / gvols["/etc/grafana/provisioning"]
    (ds,) = load_yaml(prov / "datasources" / "prometheus.yml")["datasources"]
    assert ds["type"] == "prometheus" and ds["url"] == "http://prometheus:9090"
    assert "127.0.0.1:9090:9090" in prom["ports"]
    (provider,) = load_yaml(prov / "dashboards" / "streammkl.yml")["providers"]
    dash_dir = DEPLOY / gvols[provider["options"]["path"]]
    assert (dash_dir / DASHBOARD.name).resolve() == DASHBOARD
    home = PurePosixPath(grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"])
    assert (DEPLOY / gvols[str(home.parent)] / home.name).resolve() == DASHBOARD
    uids = {t["datasource"]["uid"] for p in json.loads(DASHBOARD.read_text())["panels"]
            for t in p.get("targets", [])}  # fmt: skip
    assert uids == {ds["uid"]}


def test_dashboard_panels() -> None:
    dash = json.loads(DASHBOARD.read_text())
    panels = {p["title"]: p for p in dash["panels"]}
    assert len({p["id"] for p in dash["panels"]}) == len(dash["panels"])
    beta = panels["Kernel weights β (stacked)"]
    assert beta["fieldConfig"]["defaults"]["custom"]["stacking"]["mode"] == "normal"
    assert [t["legendFormat"] for t in beta["targets"]] == ["{{kernel}}"]
    fitted = panels["Fitted bandwidths γ"]  # beside the kernel label, which never changes
    assert [promql_metric_names(t["expr"]) for t in fitted["targets"]] == [
        {"streammkl_kernel_bandwidth"}
    ]
    assert [t["legendFormat"] for t in fitted["targets"]] == ["{{kernel}}"]
    drift = next(a for a in dash["annotations"]["list"] if a["name"] == "Drift detections")
    assert "streammkl_drift_detections_total" in drift["expr"]
    assert beta["id"] in drift["filter"]["ids"]
    assert {"streammkl_window_regret", "streammkl_window_regret_bound"} <= {
        n
        for t in panels["Windowed regret vs bound"]["targets"]
        for n in promql_metric_names(t["expr"])
    }
    latency = [t["expr"] for t in panels["Learn / predict latency quantiles"]["targets"]]
    for hist in ("streammkl_learn_duration_seconds", "streammkl_predict_duration_seconds"):
        for q in ("0.5", "0.9", "0.99"):
            assert any(
                e.startswith(f"histogram_quantile({q},") and f"{hist}_bucket" in e for e in latency
            )
    lag = panels["Consumer lag per partition"]["targets"][0]
    assert "{{partition}}" in lag["legendFormat"]


# -- Kubernetes ---------------------------------------------------------------------------------


def k8s() -> dict[str, dict[str, Any]]:
    kustomization = load_yaml(DEPLOY / "k8s" / "kustomization.yaml")
    out = {}
    for name in kustomization["resources"]:
        for doc in yaml.safe_load_all((DEPLOY / "k8s" / name).read_text()):
            out[doc["kind"]] = doc
    return out


def test_k8s_configmap_is_the_settings_file() -> None:
    cm = k8s()["ConfigMap"]
    (key,) = cm["data"]
    assert tomllib.loads(cm["data"][key]) == settings_file()


def test_k8s_deployment_probes_config_checkpoints_and_scraping(tmp_path: Path) -> None:
    from streammkl.daemon.config import load_settings

    docs = k8s()
    assert set(docs) == {
        "ConfigMap", "PersistentVolumeClaim", "Deployment", "Service", "NetworkPolicy"
    }  # fmt: skip
    pod = docs["Deployment"]["spec"]["template"]
    assert (
        docs["Deployment"]["spec"]["selector"]["matchLabels"].items()
        <= pod["metadata"]["labels"].items()
    )
    assert docs["Deployment"]["spec"]["strategy"]["type"] == "Recreate"
    spec = pod["spec"]
    (container,) = spec["containers"]
    cm = docs["ConfigMap"]
    (key,) = cm["data"]
    (tmp_path / key).write_text(cm["data"][key])
    settings = load_settings(
        tmp_path / key, env={e["name"]: e.get("value", "x") for e in container["env"]}
    )
    port = settings.metrics.port
    assert settings.metrics.host == "0.0.0.0"
    (named,) = container["ports"]
    assert named["containerPort"] == port
    for probe, path in (
        ("livenessProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
        ("startupProbe", "/startupz"),
    ):
        assert container[probe]["httpGet"] == {"path": path, "port": named["name"]}
    notes = pod["metadata"]["annotations"]
    assert notes == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(port),
        "prometheus.io/path": "/metrics",
    }
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    config_arg = container["args"][container["args"].index("--config") + 1]
    assert (
        volumes[mounts[str(PurePosixPath(config_arg).parent)]]["configMap"]["name"]
        == cm["metadata"]["name"]
    )
    assert PurePosixPath(config_arg).name == key
    claim = volumes[mounts[str(settings.checkpoint.dir)]]["persistentVolumeClaim"]["claimName"]
    assert claim == docs["PersistentVolumeClaim"]["metadata"]["name"]
    assert docs["PersistentVolumeClaim"]["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert spec["terminationGracePeriodSeconds"] >= 30
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert {"cpu", "memory"} <= container["resources"]["requests"].keys() & container["resources"][
        "limits"
    ].keys()
    service = docs["Service"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    (sport,) = service["spec"]["ports"]
    assert sport["port"] == port and sport["targetPort"] == named["name"]
    assert service["spec"]["publishNotReadyAddresses"] is True
    # hardening: read-only root filesystem, numba's warmed cache copied to a writable volume
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    (init,) = spec["initContainers"]
    assert init["securityContext"]["readOnlyRootFilesystem"] is True
    assert init["command"][:2] == ["cp", "-a"] and init["command"][2].startswith(
        "/var/cache/streammkl/numba"
    )
    assert volumes[mounts["/var/cache/streammkl/numba"]] == {"name": "numba-cache", "emptyDir": {}}
    assert "emptyDir" in volumes[mounts["/tmp"]]
    # only Prometheus pods reach the metrics port
    policy = docs["NetworkPolicy"]["spec"]
    assert policy["podSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert policy["policyTypes"] == ["Ingress"]
    (rule,) = policy["ingress"]
    assert rule["ports"] == [{"port": named["name"], "protocol": "TCP"}]
    (source,) = rule["from"]
    assert source["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "prometheus"}


def test_install_script_is_idempotent(promtool: str) -> None:
    script = DEPLOY / "install-prometheus.sh"
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    out = subprocess.run(
        ["bash", str(script)], capture_output=True, text=True, timeout=30, check=False
    )
    assert out.returncode == 0 and out.stdout == "" and out.stderr == ""  # both present: no-op


# -- scale-out: N replicas training one model (docs/scale-out.md) ---------------------------------


def _group_learner_accepted(settings: Any) -> None:
    """The settings start a mixing group: MixingMember accepts them, the learner is mergeable."""
    from prometheus_client import CollectorRegistry

    from streammkl.daemon.learning.building import build_learner
    from streammkl.daemon.mixing.log import check_base_state
    from streammkl.daemon.mixing.member import MixingMember
    from streammkl.daemon.mixing.metrics import MixMetrics

    assert settings.mixing.enabled
    MixingMember(settings, MixMetrics(CollectorRegistry()))
    learner = build_learner(settings.learner)
    learner.rounds().declare_classes(list(settings.records.classes))
    learner.rounds().declare_features([])
    check_base_state(learner.to_state())


def test_compose_group_runs_replicas_of_one_model_with_a_compacted_mix_topic() -> None:
    from streammkl.daemon.config import load_settings

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!override", lambda loader, node: loader.construct_sequence(node))
    group = yaml.load((DEPLOY / "compose.group.yaml").read_text(), Loader=Loader)
    daemon = group["services"]["streammkl"]
    env = {**compose()["services"]["streammkl"]["environment"], **daemon["environment"]}
    env.pop("STREAMMKL_CONFIG")
    settings = load_settings(CONFIG, env=env)
    _group_learner_accepted(settings)
    assert settings.checkpoint.dir == PurePosixPath("/tmp/streammkl")  # per replica (tmpfs)
    assert "/tmp" in compose()["services"]["streammkl"]["tmpfs"]
    (ports,) = daemon["ports"]
    assert re.fullmatch(r"127\.0\.0\.1:9108-91\d\d:9108", ports)  # one host port per replica
    script = group["services"]["kafka-init"]["command"][0]
    assert re.search(r"--topic streammkl\.examples \\\s*--partitions 6", script)
    assert re.search(
        rf"--topic {re.escape(settings.mixing.topic)} \\\s*--partitions 1 .*"
        r"--config cleanup\.policy=compact",
        script,
    )


def test_k8s_group_overlay_runs_replicas_without_the_shared_claim() -> None:
    from streammkl.daemon.config import load_settings

    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl (kustomize) not installed")
    out = subprocess.run(
        [kubectl, "kustomize", str(DEPLOY / "k8s-group")], capture_output=True, text=True,
        check=True, timeout=60,
    ).stdout  # fmt: skip
    docs = {d["kind"]: d for d in yaml.safe_load_all(out)}
    assert "PersistentVolumeClaim" not in docs
    spec = docs["Deployment"]["spec"]
    assert spec["replicas"] >= 2 and spec["strategy"] == {"type": "RollingUpdate"}
    pod = spec["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["checkpoints"] == {"name": "checkpoints", "emptyDir": {}}
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value", "pod-name") for e in container["env"]}
    member = next(e for e in container["env"] if e["name"] == "STREAMMKL_MIXING__MEMBER")
    assert member["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    settings = load_settings(CONFIG, env=env)
    _group_learner_accepted(settings)
