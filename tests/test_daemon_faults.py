"""What an operator sees while the broker misbehaves, and at exit: real processes, both clients.

- A broker frozen by ``SIGSTOP`` keeps its TCP connections but answers nothing (a hung broker
  does the same): ``/readyz`` goes 503 within ``metrics.progress_seconds`` (plus the clients'
  one-second view of their connections), saying the broker has not answered, while ``/healthz``
  stays 200; after ``SIGCONT`` it is ready again and learns what was produced meanwhile
  (before: 200 for the whole 20 s freeze, 3 runs of 3, both clients).
- An input topic re-created after the daemon rejoined a restarted broker (its absence seen or
  not: the new id tells) is consumed within the metadata refresh
  (``kafka.metadata_max_age_ms``, 5 s) and the daemon is ready again within :data:`READY_AGAIN`
  seconds of the topic's creation (before: librdkafka stayed ``assigned []`` over 5 minutes; a
  CI run whose looks missed the absence never rejoined); the topic is never auto-created by the
  consumer.
- ``SIGTERM`` under a slowloris attack on the metrics port: the process exits within seconds of
  its final checkpoint (before: ~100 s, the interpreter joining HTTP workers that read header
  lines).

The fake learner keeps the processes light (no compilation); the learner is not what is tested.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from kafka.admin import KafkaAdminClient

from simulators.slowloris import Slowloris
from streammkl.daemon.commands.broker import EmbeddedBroker, free_port
from tests import daemon_kafka as dk
from tests.daemon_fakes import bananas_like

pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group("kafka")]

CLIENTS = pytest.mark.parametrize("client", ["librdkafka", "kafka-python"])
FAKE = {"learner.factory": "tests.daemon_fakes:make_learner"}
#: Seconds from an input topic's re-creation to ``/readyz`` 200 (the stated bound: the metadata
#: refresh, 5 s, a group join and a fetch, with room for a loaded machine).
READY_AGAIN = float(os.environ.get("STREAMMKL_READY_AGAIN", "30"))


def produce(bootstrap: str, topic: str, start: int, n: int) -> None:
    rows = bananas_like(start + n)[start:]
    dk.produce(bootstrap, topic, [json.dumps(r).encode() for r in rows])


def learned(port: int) -> float:
    return dk.metrics(port).get(("streammkl_model_examples_learned_total", ()), -1)


def readyz(port: int) -> tuple[int, dict[str, Any]]:
    code, body = dk.http_get(port, "/readyz")
    return code, (json.loads(body) if body.startswith("{") else {})


def settings(client: str, **more: Any) -> dict[str, Any]:
    return {
        **FAKE, "kafka.consumer_client": client, "kafka.producer_client": client,
        "metrics.progress_seconds": 3.0, **more,
    }  # fmt: skip


@CLIENTS
def test_readyz_fails_while_the_broker_is_frozen(tmp_path: Path, client: str) -> None:
    broker = EmbeddedBroker(port=free_port(), log_path=tmp_path / "tansu.log").start()
    bootstrap, port, proc = broker.bootstrap_servers, free_port(), None
    try:
        dk.create_topic(bootstrap, "frozen", 1)
        produce(bootstrap, "frozen", 0, 200)
        argv = dk.daemon_argv(bootstrap, "frozen", "g", tmp_path / "ck", port=port,
                              settings=settings(client))  # fmt: skip
        proc = dk.start_daemon(argv, tmp_path / "daemon.log")
        dk.wait_until(lambda: learned(port) == 200, 90, "200 learned")
        dk.wait_until(lambda: readyz(port)[0] == 200, 30, "ready")
        assert broker.pid is not None
        os.kill(broker.pid, signal.SIGSTOP)
        frozen_at = time.monotonic()
        try:
            _, state = dk.wait_until(
                lambda: (r := readyz(port))[0] == 503 and r, 15, "not ready while frozen"
            )
            took = time.monotonic() - frozen_at
            print(f"{client}: /readyz 503 after {took:.1f} s of the freeze: {state['reasons']}")
            # the broker's silence (kafka-python), or librdkafka giving up the assignment its
            # silent coordinator no longer confirms: either way a reason is given
            assert state["reasons"] and not state["ready"], state
            assert dk.http_get(port, "/healthz")[0] == 200  # alive: only the broker is stuck
            time.sleep(3.0)
            assert readyz(port)[0] == 503  # and it stays so while frozen
        finally:
            os.kill(broker.pid, signal.SIGCONT)
        produce(bootstrap, "frozen", 200, 100)
        dk.wait_until(lambda: learned(port) == 300, 60, "the records produced after the thaw")
        dk.wait_until(lambda: readyz(port)[0] == 200, 30, "ready after the thaw")
        assert proc.poll() is None
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        broker.stop(kill=True)


@CLIENTS
def test_a_topic_re_created_after_a_broker_restart_is_consumed_within_the_bound(
    tmp_path: Path, client: str
) -> None:
    port_b = free_port()
    broker = EmbeddedBroker(port=port_b, log_path=tmp_path / "tansu.log").start()
    bootstrap, port, proc = broker.bootstrap_servers, free_port(), None
    try:
        dk.create_topic(bootstrap, "again", 3)
        produce(bootstrap, "again", 0, 150)
        argv = dk.daemon_argv(bootstrap, "again", "g", tmp_path / "ck", port=port,
                              settings=settings(client, **dk.FAST_GROUP))  # fmt: skip
        proc = dk.start_daemon(argv, tmp_path / "daemon.log")
        dk.wait_until(lambda: learned(port) == 150, 90, "150 learned")
        broker.stop(kill=True)  # memory-only: the topics and offsets are gone
        broker = EmbeddedBroker(port=port_b, log_path=tmp_path / "tansu.log").start()
        time.sleep(8.0)  # the daemon reconnects (and rejoins) before the topic is back
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            assert "again" not in admin.list_topics()  # not auto-created by the consumer
        finally:
            admin.close()
        dk.create_topic(bootstrap, "again", 3)
        created = time.monotonic()
        produce(bootstrap, "again", 150, 60)
        dk.wait_until(lambda: learned(port) == 210, READY_AGAIN, "the re-created topic read")
        dk.wait_until(lambda: readyz(port)[0] == 200, READY_AGAIN, "ready again")
        took = time.monotonic() - created
        print(f"{client}: ready {took:.1f} s after the input topic was re-created")
        assert took < READY_AGAIN
        resets = sum(
            v
            for (name, _), v in dk.metrics(port).items()
            if name == "streammkl_offset_resets_total"
        )
        assert resets >= 1  # the old offsets were reset (counted; logged as a warning)
        assert "re-created" in (tmp_path / "daemon.log").read_text() or resets >= 1
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        broker.stop(kill=True)


def test_exit_in_seconds_under_slowloris(kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = dk.unique("exit")
    dk.create_topic(kafka_bootstrap, topic, 1)
    produce(kafka_bootstrap, topic, 0, 100)
    port = free_port()
    argv = dk.daemon_argv(kafka_bootstrap, topic, dk.unique("g"), tmp_path / "ck", port=port,
                          settings=FAKE)  # fmt: skip
    log = tmp_path / "daemon.log"
    proc = dk.start_daemon(argv, log)
    try:
        dk.wait_until(lambda: learned(port) == 100, 90, "100 learned")
        with Slowloris("127.0.0.1", port, 100, source="127.0.0.2") as attack:
            dk.wait_until(lambda: attack.held > 50, 20, "the attack to hold connections")
            t0 = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=60)
            took = time.monotonic() - t0
        print(f"exit {took:.1f} s after SIGTERM under slowloris")
        assert code == 0
        assert took < 10.0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_startupz_covers_a_cold_warm_up(kafka_bootstrap: str, tmp_path: Path) -> None:
    """The real learner with an empty numba cache (``NUMBA_CACHE_DIR``): while it compiles,
    ``/startupz`` and ``/readyz`` are 503 (the body names the phase) and ``/healthz`` 200;
    then ``/startupz`` is 200 and the first record is predicted. Prints the times (the
    deployment's startup probe allows 6 minutes)."""
    topic = dk.unique("cold")
    dk.create_topic(kafka_bootstrap, topic, 1)
    produce(kafka_bootstrap, topic, 0, 1)
    port = free_port()
    argv = dk.daemon_argv(kafka_bootstrap, topic, dk.unique("g"), tmp_path / "ck", port=port)
    env_cache = tmp_path / "numba-cache"
    env_cache.mkdir()
    os.environ["NUMBA_CACHE_DIR"] = str(env_cache)  # inherited by the child only
    try:
        proc = dk.start_daemon(argv, tmp_path / "daemon.log")
    finally:
        del os.environ["NUMBA_CACHE_DIR"]
    t0 = time.monotonic()
    phases: set[str] = set()
    try:
        while time.monotonic() - t0 < 600:
            code, body = dk.http_get(port, "/startupz")
            if code == 200:
                break
            if code == 503:
                phases.add(json.loads(body).get("phase", ""))
                assert dk.http_get(port, "/healthz")[0] == 200
                assert dk.http_get(port, "/readyz")[0] == 503
            assert proc.poll() is None
            time.sleep(1.0)
        started = time.monotonic() - t0
        dk.wait_until(lambda: learned(port) >= 1, 120, "the first record learned")
        first = time.monotonic() - t0
        print(f"cold start: /startupz 200 after {started:.0f} s, first record {first:.0f} s; "
              f"phases seen {sorted(phases)}")  # fmt: skip
        assert any("compiling" in p for p in phases), phases
    finally:
        proc.kill()
        proc.wait()
