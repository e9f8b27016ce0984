"""No crash loop: a record that kills the process is dead-lettered after a restart or two.

The daemon (a real process, against the real broker) learns a stream with one poison record:
learning it sends SIGKILL to the process (``tests.poison``), exactly as an out-of-memory kill or
an abort in native code would end it, with nothing to catch. The in-flight marker
(:mod:`streammkl.daemon.checkpoints.inflight`) names the record on the next start; after
``limits.crash_strikes`` deaths it goes to the dead-letter topic with reason ``crashed_worker``
and every other record is learned exactly once: the model equals that of a run over the same
stream without the poison record. With ``checkpoint.hmac_key_file`` the marker is signed, and
the genuine one left by the death does the same (a forged one is ignored:
``tests.test_daemon_inflight_signed``).
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.daemon_fakes import bananas_like
from tests.daemon_kafka import (
    create_topic,
    daemon_argv,
    inspect,
    produce,
    read_topic,
    run_daemon,
    unique,
)
from tests.poison import POISON

pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group("kafka")]

N = 500
AT = 317  # the poison record's position in the stream


def records(poison: bool) -> list[bytes]:
    out = [json.dumps(r).encode() for r in bananas_like(N, seed=5)]
    if poison:
        out.insert(AT, json.dumps({"x": {"x1": 0.1, POISON: 1.0}, "y": 1, "id": "bad"}).encode())
    return out


def settings(**over: Any) -> dict[str, Any]:
    return {
        "learner.factory": "tests.poison:make_learner",
        "kafka.max_poll_records": 50,
        "kafka.session_timeout_ms": 1000,
        "kafka.heartbeat_interval_ms": 250,
        **over,
    }


@pytest.mark.parametrize(
    ("strikes", "every", "signed"),
    [(1, 100, False), (2, 100_000, False), (1, 100, True)],
    ids=["dead-lettered-at-the-first-restart-after-checkpoints", "two-strikes-no-checkpoint",
         "signed-marker"],
)  # fmt: skip
def test_a_record_that_kills_the_process_is_dead_lettered_and_the_rest_learned_once(
    kafka_bootstrap: str, tmp_path: Path, strikes: int, every: int, signed: bool
) -> None:
    conf = settings(**{"limits.crash_strikes": strikes, "checkpoint.every_records": every})
    if signed:
        key = tmp_path / "key"
        key.write_text("a checkpoint key of 32 bytes....")
        key.chmod(0o600)
        conf["checkpoint.hmac_key_file"] = str(key)
    # the reference: the same stream without the poison record, uninterrupted
    ref_topic = unique("crash-ref")
    create_topic(kafka_bootstrap, ref_topic, 1)
    produce(kafka_bootstrap, ref_topic, records(poison=False))
    ref_dir = tmp_path / "ref"
    argv = daemon_argv(kafka_bootstrap, ref_topic, unique("g"), ref_dir, idle=1.5, settings=conf)
    assert run_daemon(argv, tmp_path / "ref.log") == 0
    reference = inspect(ref_dir)
    assert reference["examples_learned"] == N

    topic, group, ck = unique("crash"), unique("g"), tmp_path / "ck"
    create_topic(kafka_bootstrap, topic, 1)
    produce(kafka_bootstrap, topic, records(poison=True))
    argv = daemon_argv(kafka_bootstrap, topic, group, ck, idle=1.5, settings=conf)
    log = tmp_path / "daemon.log"
    codes = [run_daemon(argv, log) for _ in range(strikes)]
    assert codes == [-signal.SIGKILL] * strikes, log.read_text()[-3000:]  # killed by the record
    assert run_daemon(argv, log) == 0, log.read_text()[-3000:]  # then: no loop
    text = log.read_text()
    assert "crashed_worker" in text and f"{topic}/0@{AT}" in text
    assert "not signed" not in text  # the genuine marker is believed

    result = inspect(ck)
    assert result["examples_learned"] == N
    assert result["rejected_by_reason"] == {"crashed_worker": 1}
    assert result["model_digest"] == reference["model_digest"]
    assert result["offsets"] == {topic: {"0": N + 1}}

    dead = read_topic(kafka_bootstrap, f"{topic}.dead-letters", 1)
    headers = [dict(d.headers) for d in dead]
    assert {h["reason"] for h in headers} == {b"crashed_worker"}
    assert {int(h["source_offset"]) for h in headers} == {AT}
    assert all(d.value == records(poison=True)[AT] for d in dead)
    assert f"{strikes} time(s)".encode() in headers[0]["error"]
    preds = read_topic(kafka_bootstrap, f"{topic}.predictions", N)
    seen: dict[int, bytes] = {}
    for p in preds:
        offset = json.loads(p.value)["offset"]
        assert seen.setdefault(offset, p.value) == p.value  # duplicates (replays) identical
    assert sorted(seen) == [o for o in range(N + 1) if o != AT]  # every good record, once
