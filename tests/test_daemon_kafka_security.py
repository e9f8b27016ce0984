"""Kafka TLS / SASL: every client gets exactly its options, secrets never leak, TLS end to end.

Plumbing: each client the daemon creates (kafka-python consumer and producer, librdkafka
consumer and producer, the admin client) is built through an injected factory that records its
options. End to end: the daemon, its admin client and the test's producer and reader talk to the
real broker through TLS only (``tests.tls_proxy``: the Tansu build here has no TLS listener, so a
TLS front terminates it), with the broker's certificate verified against a test CA, and with a
client certificate when the front asks for one. SASL cannot run end to end here (Tansu has no
SASL), so its plumbing is checked, and librdkafka validates the options it receives.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient
from prometheus_client import CollectorRegistry

from streammkl.daemon.config import ConfigError, load_settings
from streammkl.daemon.kafka.clients import (
    ConfluentConsumer,
    ConfluentProducer,
    KafkaPythonConsumer,
    KafkaPythonProducer,
)
from streammkl.daemon.kafka.security import (
    RedactSecrets,
    kafka_python_options,
    librdkafka_options,
)
from streammkl.daemon.kafka.topics import ensure_topics
from streammkl.daemon.loop.runner import Runner
from tests import daemon_kafka as dk
from tests.daemon_fakes import bananas_like
from tests.tls import Certs, make_certs
from tests.tls_proxy import TLSBroker

SECRET = "s3cr3t-Pa55word"

SASL_SSL = {
    "kafka.security_protocol": "SASL_SSL",
    "kafka.sasl_mechanism": "SCRAM-SHA-512",
    "kafka.sasl_username": "streammkl",
    "kafka.sasl_password": SECRET,
}

KAFKA_PYTHON = {
    "security_protocol": "SASL_SSL",
    "sasl_mechanism": "SCRAM-SHA-512",
    "sasl_plain_username": "streammkl",
    "sasl_plain_password": SECRET,
    "ssl_check_hostname": True,
}
LIBRDKAFKA = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "streammkl",
    "sasl.password": SECRET,
    "ssl.endpoint.identification.algorithm": "https",
}


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("kafka-certs"))


def settings(tmp_path: Path, **over: Any) -> Any:
    base = {
        "kafka.topics": "in",
        "kafka.poll_timeout_ms": 0,
        "checkpoint.dir": str(tmp_path / "ck"),
        "run.exit_when_idle": 0.05,
        "metrics.enabled": False,
        "monitor.enabled": False,
    }
    return load_settings(env={}, overrides={**base, **over})


def test_every_client_receives_exactly_the_security_options(tmp_path: Path, certs: Certs) -> None:
    tls = {"kafka.ssl_cafile": str(certs.ca), "kafka.ssl_certfile": str(certs.client_cert),
           "kafka.ssl_keyfile": str(certs.client_key)}  # fmt: skip
    s = settings(tmp_path, **SASL_SSL, **tls)
    expected_py = {
        **KAFKA_PYTHON,
        "ssl_cafile": str(certs.ca),
        "ssl_certfile": str(certs.client_cert),
        "ssl_keyfile": str(certs.client_key),
    }
    expected_rd = {**LIBRDKAFKA, "ssl.ca.location": str(certs.ca),
                   "ssl.certificate.location": str(certs.client_cert),
                   "ssl.key.location": str(certs.client_key)}  # fmt: skip
    assert kafka_python_options(s.kafka) == expected_py
    assert librdkafka_options(s.kafka) == expected_rd

    # kafka-python consumer and producer: the adapters the settings select, each building its
    # client through an injected factory that records the options
    over = {"kafka.create_topics": False}
    clients = {"kafka.consumer_client": "kafka-python", "kafka.producer_client": "kafka-python"}
    py = settings(tmp_path, **SASL_SSL, **tls, **over, **clients)
    r = Runner(py, registry=CollectorRegistry())
    assert r.source.client is KafkaPythonConsumer and r.sink.client is KafkaPythonProducer
    seen: dict[str, dict[str, Any]] = {}
    KafkaPythonConsumer(py.kafka, factory=lambda **options: seen.__setitem__("consumer", options))
    KafkaPythonProducer(py.kafka, factory=lambda **options: seen.__setitem__("producer", options))
    for name in ("consumer", "producer"):
        got = {k: v for k, v in seen[name].items() if k.startswith(("security", "sasl", "ssl"))}
        assert got == expected_py, name
    assert set(expected_py) <= set(KafkaConsumer.DEFAULT_CONFIG)  # real option names
    assert set(expected_py) <= set(KafkaProducer.DEFAULT_CONFIG)

    # librdkafka consumer and producer (the default): the real classes, wrapped to record their
    # options (librdkafka validates every option when a client is created)
    confs: dict[str, dict[str, Any]] = {}

    def recording(name: str, cls: Any) -> Any:
        return lambda conf: confs.__setitem__(name, dict(conf)) or cls(conf)

    r = Runner(settings(tmp_path / "rd", **SASL_SSL, **tls, **over), registry=CollectorRegistry())
    assert r.source.client is ConfluentConsumer and r.sink.client is ConfluentProducer
    consumer, producer = confluent_kafka.Consumer, confluent_kafka.Producer
    r.source.client = lambda k: ConfluentConsumer(k, recording("consumer", consumer))
    r.sink.client = lambda k: ConfluentProducer(k, recording("producer", producer))
    r.sink.start()
    r.source.start()
    for name in ("consumer", "producer"):
        got = {k: v for k, v in confs[name].items() if k.startswith(("security", "sasl", "ssl"))}
        assert got == expected_rd, name
    r.source.close()

    # the admin client
    admin: dict[str, Any] = {}

    class Admin:
        def __init__(self, **options: Any) -> None:
            admin.update(options)

        def list_topics(self) -> list[str]:
            return ["t"]

        def close(self) -> None:
            pass

    ensure_topics("b:9092", {"t": 1}, 1000, kafka_python_options(s.kafka), admin_factory=Admin)
    assert {k: v for k, v in admin.items() if k not in ("bootstrap_servers", "request_timeout_ms",
            "bootstrap_timeout_ms")} == expected_py  # fmt: skip
    assert set(expected_py) <= set(KafkaAdminClient.DEFAULT_CONFIG)


def test_plaintext_adds_no_option(tmp_path: Path) -> None:
    s = settings(tmp_path)
    assert kafka_python_options(s.kafka) == {} and librdkafka_options(s.kafka) == {}


def test_secrets_from_files_and_the_environment(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text(SECRET + "\n")
    over = {k: v for k, v in SASL_SSL.items() if k != "kafka.sasl_password"}
    s = settings(tmp_path, **over, **{"kafka.sasl_password_file": str(secret)})
    assert kafka_python_options(s.kafka)["sasl_plain_password"] == SECRET
    env = {"STREAMMKL_KAFKA__SASL_PASSWORD": SECRET, "STREAMMKL_KAFKA__SECURITY_PROTOCOL":
           "SASL_PLAINTEXT", "STREAMMKL_KAFKA__SASL_MECHANISM": "PLAIN",
           "STREAMMKL_KAFKA__SASL_USERNAME": "u"}  # fmt: skip
    from_env = load_settings(env=env)
    assert librdkafka_options(from_env.kafka) == {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "u",
        "sasl.password": SECRET,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("over", "needle"),
    [
        ({"kafka.sasl_mechanism": "MD5"}, "kafka.sasl_mechanism = 'MD5'"),
        ({"kafka.sasl_password": [SECRET]}, "kafka.sasl_password = '***'"),
        ({"kafka.sasl_username": None}, "needs sasl_mechanism and sasl_username"),
        ({"kafka.sasl_password_file": "/nonexistent"}, "exactly one of sasl_password"),
        ({"kafka.ssl_cafile": "/nonexistent/ca.pem"}, "ssl_cafile: no such file"),
        ({"kafka.security_protocol": "SSL"}, "SASL settings are given"),
    ],
)
def test_settings_errors_never_echo_a_secret(
    tmp_path: Path, over: dict[str, Any], needle: str
) -> None:
    with pytest.raises(ConfigError) as info:
        settings(tmp_path, **{**SASL_SSL, **over})
    assert needle in str(info.value)
    assert SECRET not in str(info.value)


def test_repr_and_logs_never_show_a_secret(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    s = settings(tmp_path, **SASL_SSL)
    assert SECRET not in repr(s) and SECRET not in str(s.model_dump())
    assert SECRET not in s.model_dump_json()
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "client said %s", (
        f"bad config sasl.password={SECRET}",), None)  # fmt: skip
    assert RedactSecrets(s.kafka.secret_values()).filter(record)
    assert record.getMessage() == "client said bad config sasl.password=***"


def test_the_daemon_process_never_prints_a_secret(tmp_path: Path) -> None:
    """The real CLI with SASL_SSL towards a broker that is not there: whatever the clients
    complain about (connections refused, handshakes), the password never reaches stderr."""
    argv = [sys.executable, "-m", "streammkl.daemon", "run", "--bootstrap-servers",
            "127.0.0.1:9", "--checkpoint-dir", str(tmp_path / "ck"), "--metrics-port", "0",
            "--exit-when-idle", "3", "--log-level", "DEBUG"]  # fmt: skip
    fast = {"kafka.session_timeout_ms": 1000, "kafka.heartbeat_interval_ms": 250}
    for key, value in {**SASL_SSL, **fast}.items():
        argv += ["--set", f"{key}={value}"]
    out = subprocess.run(argv, capture_output=True, timeout=120, env=dk.subprocess_env())
    text = out.stdout.decode() + out.stderr.decode()
    assert "sasl" in text.lower() or "SASL" in text  # the clients did talk about it
    assert SECRET not in text
    bad = [*argv, "--set", "kafka.sasl_mechanism=MD5"]
    out = subprocess.run(bad, capture_output=True, timeout=60, env=dk.subprocess_env())
    assert out.returncode == 2 and b"sasl_mechanism" in out.stderr
    assert SECRET.encode() not in out.stderr + out.stdout


@pytest.mark.kafka
@pytest.mark.xdist_group("kafka")
@pytest.mark.parametrize(
    ("client", "mutual"),
    [("librdkafka", False), ("kafka-python", True)],
    ids=["librdkafka-tls", "kafka-python-mutual-tls"],
)
def test_the_daemon_learns_over_tls_end_to_end(
    tmp_path: Path, certs: Certs, client: str, mutual: bool
) -> None:
    broker = TLSBroker(certs.server_cert, certs.server_key, certs.ca if mutual else None,
                       tmp_path / "tansu.log")  # fmt: skip
    try:
        security = {"kafka.security_protocol": "SSL", "kafka.ssl_cafile": str(certs.ca)}
        if mutual:
            security |= {"kafka.ssl_certfile": str(certs.client_cert),
                         "kafka.ssl_keyfile": str(certs.client_key)}  # fmt: skip
        s = settings(tmp_path, **security)
        tls = kafka_python_options(s.kafka)
        topic = dk.unique("tls")
        ensure_topics(broker.bootstrap_servers, {topic: 1}, 10_000, tls)  # admin over TLS
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all", **tls)
        n = 200
        for r in bananas_like(n, seed=9):
            producer.send(topic, json.dumps(r).encode())
        producer.flush(30)
        producer.close()
        argv = dk.daemon_argv(
            broker.bootstrap_servers, topic, dk.unique("g"), tmp_path / "ck", idle=2.0,
            settings={**security, "kafka.consumer_client": client,
                      "kafka.producer_client": client},
        )  # fmt: skip
        assert dk.run_daemon(argv, tmp_path / "daemon.log") == 0, (
            tmp_path / "daemon.log"
        ).read_text()[-3000:]
        assert dk.inspect(tmp_path / "ck")["examples_learned"] == n
        reader = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, **tls,
                               auto_offset_reset="earliest", consumer_timeout_ms=5000)  # fmt: skip
        reader.subscribe([f"{topic}.predictions"])
        offsets = {json.loads(m.value)["offset"] for m in reader}
        reader.close()
        assert offsets == set(range(n))
        assert broker.proxy.handshakes >= 3  # admin, producer, daemon clients: all TLS
        # the only way in is TLS: a plaintext client gets nowhere
        refused = broker.proxy.refused
        with pytest.raises(Exception):  # kafka-python: NoBrokersAvailable
            KafkaProducer(bootstrap_servers=broker.bootstrap_servers, bootstrap_timeout_ms=1500)
        assert broker.proxy.refused > refused
    finally:
        broker.stop()
