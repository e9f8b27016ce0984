"""Honest idle exits: ``--exit-when-idle`` ends with 0 only when nothing is left to read.

Real processes, both Kafka clients:

- the broker never reached (a closed port): exit 4; the broker refusing the SASL credentials
  (``tests.kafka_front``: Tansu has no SASL, a PLAIN gate stands in front of it; the right
  password learns through the same gate): exit 5; the input topic missing: exit 6 -- each with
  one clear line, instead of exit 0 having read nothing;
- a consumer that owns its partitions but gets no fetch response (the front withholds them: the
  state of a group member during a rebalance, or behind a stalled broker) does not take the
  unknown backlog for zero: it waits, learns everything once the fetches flow, and exits 0; if
  they never do, it exits 7 naming the partitions, with the records unread.

The rule itself, with the in-memory adapters: ``tests.test_daemon_runner``.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient

from streammkl.daemon.commands.broker import free_port
from streammkl.daemon.kafka.topics import ensure_topics
from tests import daemon_kafka as dk
from tests.daemon_fakes import bananas_like
from tests.kafka_front import FrontedBroker

CLIENTS = ["librdkafka", "kafka-python"]
SASL = {"kafka.security_protocol": "SASL_PLAINTEXT", "kafka.sasl_mechanism": "PLAIN",
        "kafka.sasl_username": "streammkl"}  # fmt: skip
PASSWORD = "the-right-password"


def clients(client: str) -> dict[str, Any]:
    return {"kafka.consumer_client": client, "kafka.producer_client": client}


#: One connection attempt to a broker that does not answer (or refuses the credentials) blocks
#: at most this long (default 5 s): with kafka-python the start's three attempts (the output
#: topics' admin client, the producer, the consumer) took 5 + 5 + 5 s (daemon logs here; the test
#: took 32 s in CI), 1 + 1 + 1 s with this (load 11). The exit codes do not depend on them: they
#: come from the idle clock and the refusal, and each attempt is retried a second after it ends.
SHORT_ATTEMPTS = {"kafka.bootstrap_timeout_ms": 1000}


def run(argv: list[str], log: Path, timeout: float = 150.0) -> tuple[int, float, str]:
    """(exit code, seconds, the log) of one daemon run."""
    t0 = time.monotonic()
    code = dk.run_daemon(argv, log, timeout=timeout)
    return code, time.monotonic() - t0, log.read_text()


def errors(text: str) -> list[str]:
    return [line for line in text.splitlines() if " ERROR streammkl.daemon.loop.runner:" in line]


@pytest.mark.parametrize("client", CLIENTS)
def test_a_broker_never_reached_is_no_success(tmp_path: Path, client: str) -> None:
    port = free_port()  # nothing listens there
    argv = dk.daemon_argv(f"127.0.0.1:{port}", "in", "g", tmp_path / "ck", idle=1.0,
                          settings={**clients(client), **SHORT_ATTEMPTS})  # fmt: skip
    code, _, text = run(argv, tmp_path / "daemon.log")
    assert code == 4, text[-3000:]
    (line,) = errors(text)
    assert f"never reached the broker at 127.0.0.1:{port}" in line


@pytest.mark.kafka
@pytest.mark.xdist_group("kafka")
@pytest.mark.parametrize("client", CLIENTS)
def test_a_missing_input_topic_is_no_success(
    kafka_bootstrap: str, tmp_path: Path, client: str
) -> None:
    topic = dk.unique("missing")
    argv = dk.daemon_argv(kafka_bootstrap, topic, dk.unique("g"), tmp_path / "ck", idle=1.0,
                          settings=clients(client))  # fmt: skip
    code, _, text = run(argv, tmp_path / "daemon.log")
    assert code == 6, text[-3000:]
    (line,) = errors(text)
    assert f"input topic(s) {topic} not found" in line
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        assert topic not in admin.list_topics()  # the consumer did not create it either
    finally:
        admin.close()


@pytest.mark.parametrize("client", CLIENTS)
def test_refused_credentials_are_no_success(tmp_path: Path, client: str) -> None:
    broker = FrontedBroker(tmp_path / "tansu.log", sasl=("streammkl", PASSWORD))
    try:
        topic = dk.unique("sasl")
        n = 50
        security = {
            "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
            "sasl_plain_username": "streammkl", "sasl_plain_password": PASSWORD,
        }  # fmt: skip
        ensure_topics(broker.bootstrap_servers, {topic: 1}, 10_000, security)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all", **security)
        for r in bananas_like(n, seed=4):
            producer.send(topic, json.dumps(r).encode())
        producer.flush(30)
        producer.close()

        def argv(password: str, ck: str) -> list[str]:
            conf = {**SASL, "kafka.sasl_password": password, **clients(client), **SHORT_ATTEMPTS}
            return dk.daemon_argv(broker.bootstrap_servers, topic, dk.unique("g"),
                                  tmp_path / ck, idle=1.0, settings=conf)  # fmt: skip

        code, _, text = run(argv("wrong", "refused"), tmp_path / "refused.log")
        assert code == 5, text[-3000:]
        (line,) = errors(text)
        assert f"the broker at {broker.bootstrap_servers} refused the credentials" in line
        assert "wrong" not in line
        refused = broker.front.refused
        assert refused >= 1
        # the same gate lets the right password through: the daemon learns the topic
        code, _, text = run(argv(PASSWORD, "ck"), tmp_path / "daemon.log")
        assert code == 0, text[-3000:]
        assert dk.inspect(tmp_path / "ck")["examples_learned"] == n
        assert broker.front.authenticated >= 2
    finally:
        broker.stop()


@pytest.mark.parametrize("client", CLIENTS)
def test_an_unknown_backlog_is_never_taken_for_zero(tmp_path: Path, client: str) -> None:
    """Fetch responses withheld: the daemon owns its partitions, but their highwater is unknown
    (the state of a member during a rebalance, or behind a stalled broker)."""
    broker = FrontedBroker(tmp_path / "tansu.log")
    try:
        topic = dk.unique("stalled")
        n = 2_000
        dk.create_topic(broker.bootstrap_servers, topic, 2)
        values = [json.dumps(r).encode() for r in bananas_like(n, seed=8)]
        dk.produce(broker.bootstrap_servers, topic, values, partition_of=lambda i: i % 2)
        front = broker.front
        conf = {**clients(client), "kafka.request_timeout_ms": 60_000}

        # never released: after the patient wait (10 x 1 s), exit 7 naming the partitions
        front.hold_fetches("streammkl")
        argv = dk.daemon_argv(broker.bootstrap_servers, topic, dk.unique("g"), tmp_path / "a",
                              idle=1.0, settings=conf)  # fmt: skip
        code, seconds, text = run(argv, tmp_path / "never.log")
        assert code == 7, text[-3000:]
        (line,) = errors(text)
        assert f"{topic}/0" in line and f"{topic}/1" in line and "still unknown" in line
        assert seconds >= 10.0
        assert dk.inspect(tmp_path / "a")["examples_learned"] == 0

        # released after 5 s (five times the idle limit): everything learned, exit 0
        front.release()
        time.sleep(1.0)  # the first daemon's withheld answers are gone
        front.hold_fetches("streammkl")
        argv = dk.daemon_argv(broker.bootstrap_servers, topic, dk.unique("g"), tmp_path / "b",
                              idle=1.0, settings=conf)  # fmt: skip
        log = tmp_path / "released.log"
        proc = dk.start_daemon(argv, log)
        try:
            deadline = time.monotonic() + 90
            while front.held == 0 and time.monotonic() < deadline:  # a fetch is withheld
                time.sleep(0.1)
            assert front.held > 0, log.read_text()[-3000:]
            held = front.held
            time.sleep(5.0)
            assert proc.poll() is None, log.read_text()[-3000:]  # still waiting, not exited
            front.release()
            code = proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        text = log.read_text()
        assert code == 0, text[-3000:]
        assert held > 0 and not errors(text)
        assert dk.inspect(tmp_path / "b")["examples_learned"] == n
    finally:
        broker.stop()


_STRAGGLER = """
import logging, sys, threading, time
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
from streammkl.daemon.commands import cli
cli.STRAGGLER_SECONDS = 0.3
seconds = float(sys.argv[1])
threading.Thread(target=time.sleep, args=(seconds,), name="streammkl-regret", daemon=True).start()
threading.Thread(target=time.sleep, args=(60,), name="someone-else", daemon=True).start()
cli._leave_when_threads_end(7)
print("returned", flush=True)
sys.exit(5)
"""


@pytest.mark.parametrize("seconds", [0.05, 60.0], ids=["ends-in-time", "still-at-work"])
def test_the_exit_waits_a_little_for_its_threads_then_leaves_without_the_teardown(
    seconds: float,
) -> None:
    """After the shutdown, ``streammkl run`` waits a moment for its own background threads
    (not anyone else's); one still at work (a comparator fit, possibly inside numba's
    compiler, whose teardown aborted the process) makes it leave at once with the run's exit
    code, logs flushed, instead of through the interpreter's teardown."""
    import sys

    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", _STRAGGLER, str(seconds)], capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    took = time.monotonic() - t0
    if seconds < 0.3:  # it ended in time: back to the normal exit
        assert out.returncode == 5 and "returned" in out.stdout, out.stderr
        assert "leaving without waiting" not in out.stderr
    else:
        assert out.returncode == 7 and "returned" not in out.stdout, out.stderr
        assert "leaving without waiting for ['streammkl-regret']" in out.stderr
        assert took < 30  # not the 60 s of either sleeping thread
