"""The in-flight journal under the checkpoints' HMAC: a forged one condemns nothing.

Whoever can write the checkpoint directory but not read ``checkpoint.hmac_key_file`` cannot plant
a model (checkpoints are signed); with the in-flight marker signed too, they cannot condemn chosen
future records either. The attack: rewrite ``inflight`` with a valid CRC, saying the last process
died and that a third of the coming records killed it (and a slot naming one more). With a key the
real daemon ignores the forgery, says so at WARNING and learns every record; without a key the
CRC-only marker is trusted as before (so the forgery is a real one). A genuine marker after a real
death (the process killed by the record it learns: ``tests.poison``) still dead-letters exactly
that record with a key configured: ``tests.test_daemon_crash``.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from pathlib import Path

import pytest

from tests.daemon_fakes import bananas_like
from tests.daemon_kafka import create_topic, daemon_argv, inspect, produce, run_daemon, unique

pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group("kafka")]

FIRST = 300  # records learned before the forgery
NEW = 3_000  # records produced after it; every third one is "condemned" by the forged journal


def forge(directory: Path, topic: str) -> int:
    """Rewrite ``directory/inflight`` as an attacker who knows the format but not the key: a
    CRC-valid slot and journal saying the last process died, with a third of the offsets to come
    condemned. Returns how many records the journal condemns."""
    condemned = [[topic, 0, off, 2] for off in range(FIRST, FIRST + NEW, 3)]
    journal = json.dumps(
        {"pid": 1, "clean": False, "span": {}, "careful": {}, "condemned": condemned,
         "suspects": []},
        separators=(",", ":"),
    ).encode()  # fmt: skip
    name = topic.encode()
    slot = struct.pack("<4sBxHiqH250s", b"SMIF", 1, 5, 0, FIRST + 1, len(name), name)
    with open(directory / "inflight", "r+b") as fh:
        fh.write(slot + struct.pack("<I", zlib.crc32(slot)))
        fh.seek(4096)
        fh.write(struct.pack("<II", len(journal), zlib.crc32(journal)) + journal)
    return len(condemned)


@pytest.mark.parametrize("signed", [True, False], ids=["with-key", "without-key"])
def test_a_forged_inflight_journal_condemns_nothing_when_a_key_is_set(
    kafka_bootstrap: str, tmp_path: Path, signed: bool
) -> None:
    key = tmp_path / "key"
    key.write_bytes(os.urandom(32).hex().encode())
    key.chmod(0o600)
    conf = {"checkpoint.hmac_key_file": str(key)} if signed else {}
    topic, group, ck = unique("forged"), unique("g"), tmp_path / "ck"
    create_topic(kafka_bootstrap, topic, 1)
    values = [json.dumps(r).encode() for r in bananas_like(FIRST + NEW, seed=11)]
    produce(kafka_bootstrap, topic, values[:FIRST])
    argv = daemon_argv(kafka_bootstrap, topic, group, ck, idle=1.5, settings=conf)
    log = tmp_path / "daemon.log"
    assert run_daemon(argv, log) == 0, log.read_text()[-3000:]
    assert inspect(ck)["examples_learned"] == FIRST

    condemned = forge(ck, topic)
    produce(kafka_bootstrap, topic, values[FIRST:])
    log = tmp_path / "again.log"
    assert run_daemon(argv, log) == 0, log.read_text()[-3000:]
    result = inspect(ck)
    text = log.read_text()
    if signed:
        assert result["examples_learned"] == FIRST + NEW  # every record learned
        assert result["rejected_by_reason"] == {}
        warnings = [line for line in text.splitlines() if "WARNING" in line and "inflight" in line]
        assert any("not signed" in line for line in warnings), text[-3000:]
        assert "crashed_worker" not in text
    else:  # without a key the CRC-only marker is trusted, as documented
        assert result["rejected_by_reason"] == {"crashed_worker": condemned + 1}  # + the slot's
        assert result["examples_learned"] == FIRST + NEW - condemned - 1
