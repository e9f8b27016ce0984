"""``POST /predict`` and ``HEAD`` on the real daemon process, with the real broker and HTTP client.

The prediction the endpoint answers is compared with what ``streammkl export`` + ``MKLClassifier.
load`` predicts for the same records at the same checkpoint; the endpoint is off by default
(404), behind basic authentication when the web config asks for it, 503 before the first
snapshot, 400 for a bad record, 413 for a body over ``records.max_bytes``.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import urllib.error
import urllib.request
from itertools import islice
from pathlib import Path
from typing import Any

import bcrypt
import pytest
import yaml

from tests import daemon_kafka as dk

pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group("kafka")]

PASSWORD = "predict me"
AUTH = "Basic " + base64.b64encode(f"client:{PASSWORD}".encode()).decode()


def request(
    port: int, method: str, path: str, body: bytes | None = None, auth: str | None = AUTH
) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method=method)
    if auth is not None:
        req.add_header("Authorization", auth)
    if body is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, {}, b""


def records(n: int) -> list[Any]:
    from simulators import get

    return list(islice(get("kernel-drift", seed=5, phase_length=200), n))


def test_predict_answers_what_the_exported_model_predicts(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    from streammkl import wire
    from streammkl.daemon.commands.broker import free_port
    from streammkl.river import MKLClassifier

    web = tmp_path / "web.yml"
    web.write_text(yaml.safe_dump({
        "basic_auth_users": {
            "client": bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
        },
        "allow_plaintext_basic_auth": True,
    }))  # fmt: skip
    topic = dk.unique("predict")
    dk.create_topic(kafka_bootstrap, topic, 1)
    port = free_port()
    ck = tmp_path / "ck"
    argv = dk.daemon_argv(
        kafka_bootstrap, topic, dk.unique("g"), ck, port=port,
        settings={
            "metrics.predict": True, "metrics.web_config_file": str(web),
            "checkpoint.every_seconds": 0.5, "records.max_bytes": 4096,
        },
    )  # fmt: skip
    proc = dk.start_daemon(argv, tmp_path / "daemon.log")
    try:
        # before the first snapshot: 503, with a reason; authentication first
        one = wire.encode(records(1)[0])
        dk.wait_until(lambda: request(port, "GET", "/startupz")[0] == 200 or proc.poll(), 120,
                      "the daemon to start")  # fmt: skip
        assert proc.poll() is None, (tmp_path / "daemon.log").read_text()
        code, _, body = request(port, "POST", "/predict", one)
        assert code == 503 and b"no model snapshot yet" in body
        code, headers, _ = request(port, "POST", "/predict", one, auth=None)
        assert code == 401 and headers["WWW-Authenticate"] == 'Basic realm="streammkl"'
        wrong = "Basic " + base64.b64encode(b"client:nope").decode()
        assert request(port, "POST", "/predict", one, auth=wrong)[0] == 401

        learned = records(300)
        dk.produce(kafka_bootstrap, topic, [wire.encode(r) for r in learned])

        def served() -> dict[str, Any] | None:
            code, _, body = request(port, "POST", "/predict", one)
            if code != 200:
                return None
            answer = json.loads(body)
            return answer if answer["model_version"] == len(learned) else None

        first = dk.wait_until(served, 120, "a snapshot of the model after every record", 0.3)
        assert proc.poll() is None, (tmp_path / "daemon.log").read_text()

        # bad bodies: a clear 400 / 413, and the daemon goes on
        code, _, body = request(port, "POST", "/predict", b"{not json")
        assert code == 400 and json.loads(body)["error"] == "invalid_json", body
        code, _, body = request(port, "POST", "/predict", b'{"x": {"a": "high"}}')
        assert code == 400 and "a" in json.loads(body)["message"], body
        code, _, body = request(port, "POST", "/predict", b"{}")
        assert code == 400, body
        assert request(port, "POST", "/predict", b" " * 5000)[0] == 413
        assert request(port, "GET", "/predict")[0] == 405

        # HEAD: answered as GET without a body (Content-Length that of the GET answer)
        for path in ("/metrics", "/healthz", "/readyz", "/startupz"):
            code, headers, body = request(port, "HEAD", path)
            assert code == 200 and body == b"" and int(headers["Content-Length"]) > 0, path
        assert request(port, "HEAD", "/metrics", auth=None)[0] == 401

        # the same checkpoint, exported and loaded: the same predictions, to the last bit
        out = tmp_path / "model.smkl"
        subprocess.run(
            [sys.executable, "-m", "streammkl.daemon", "export", str(ck), str(out)],
            check=True, env=dk.subprocess_env(), timeout=120, capture_output=True,
        )  # fmt: skip
        model = MKLClassifier.load(out)
        probe = records(340)[300:]
        for rec in probe:
            code, _, body = request(port, "POST", "/predict", wire.encode(rec))
            assert code == 200, body
            answer = json.loads(body)
            assert answer["checkpoint"] == first["checkpoint"]
            assert answer["model_version"] == len(learned)
            x = rec.x if isinstance(rec.x, dict) else {str(i): v for i, v in enumerate(rec.x)}
            expected = model.predict_proba_one(x)
            assert answer["prediction"] == json.loads(json.dumps(model.predict_one(x)))
            assert answer["proba"] == {
                (k if isinstance(k, str) else json.dumps(k)): v for k, v in expected.items()
            }
            assert answer["snapshot_age_seconds"] >= 0
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_predict_is_off_by_default(kafka_bootstrap: str, tmp_path: Path) -> None:
    from streammkl.daemon.commands.broker import free_port
    from streammkl.daemon.config import MetricsSettings

    assert MetricsSettings().predict is False
    topic = dk.unique("nopredict")
    dk.create_topic(kafka_bootstrap, topic, 1)
    port = free_port()
    argv = dk.daemon_argv(kafka_bootstrap, topic, dk.unique("g"), tmp_path / "ck", port=port)
    proc = dk.start_daemon(argv, tmp_path / "daemon.log")
    try:
        dk.wait_until(lambda: request(port, "GET", "/startupz", auth=None)[0] == 200
                      or proc.poll(), 120, "the daemon to start")  # fmt: skip
        assert proc.poll() is None, (tmp_path / "daemon.log").read_text()
        code, _, _ = request(port, "POST", "/predict", b'{"x": {"a": 1.0}}', auth=None)
        assert code == 404
        # and the checkpoint age says "never checkpointed" as documented: -1
        samples = dk.metrics(port)
        assert samples[("streammkl_checkpoint_age_seconds", ())] == -1.0
        code, headers, body = request(port, "HEAD", "/metrics", auth=None)
        assert code == 200 and body == b"" and int(headers["Content-Length"]) > 0
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_mixing_metrics_are_exported_only_when_mixing_is_on() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from streammkl.daemon.http.metrics import DaemonMetrics

    off = generate_latest(DaemonMetrics(CollectorRegistry()).registry).decode()
    on = generate_latest(DaemonMetrics(CollectorRegistry(), mixing=True).registry).decode()
    assert "streammkl_mix_" not in off
    assert "streammkl_mix_rounds_total" in on and "streammkl_mix_deltas_skipped_total" in on
    # the rest is the same
    strip = {line for line in on.splitlines() if "streammkl_mix_" not in line}
    assert strip - {line for line in off.splitlines()} <= {
        line for line in strip if "_created" in line
    }
