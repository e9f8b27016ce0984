"""Growth the limits promise, through the real daemon and broker (issue 24, item 7).

A benign stream whose vocabulary keeps growing is learned whole with the default limits and the
regret monitor on: the admission counts the model once, and the monitor gives its windowed
regret up when the model is too wide for it instead of the records being refused. What the
limits refuse is still refused: a record beyond ``records.max_features`` names, and the record
that would take the model beyond ``limits.max_model_features``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from tests import daemon_kafka as dk

N_PLAIN, N_GROWING, NEW_PER_RECORD = 1_000, 100, 25  # 2 + 2,500 inputs: 3x the old ceiling
FLOOD, FLOOD_NAMES = 9, 900  # 8 fit under 10,000 inputs (9,702), the 9th does not


def growing_stream(seed: int = 3) -> list[bytes]:
    """Every third record brings 25 new words (until 100 have), the others reuse known ones;
    then the flood: nine records of 900 new names, and one of 1,001 (over the wire limit)."""
    rng = random.Random(seed)
    out: list[bytes] = []
    known = 0
    for i in range(N_PLAIN + N_GROWING):
        a, b = rng.uniform(-1, 1), rng.uniform(-1, 1)
        x: dict[str, float] = {"a": a, "b": b}
        if i % 3 == 0 and known < N_GROWING * NEW_PER_RECORD:  # (each a rebuild of the model)
            x.update({f"w{known + k}": 1.0 for k in range(NEW_PER_RECORD)})
            known += NEW_PER_RECORD
        elif known:
            x.update({f"w{rng.randrange(known)}": 1.0 for _ in range(2)})
        out.append(json.dumps({"x": x, "y": a + b > 0}).encode())
    assert known == N_GROWING * NEW_PER_RECORD
    for j in range(FLOOD):
        x = {f"f{j}_{k}": 0.5 for k in range(FLOOD_NAMES)}
        out.append(json.dumps({"x": x, "y": j % 2 == 0}).encode())
    out.append(json.dumps({"x": {f"over{k}": 1.0 for k in range(1_001)}, "y": True}).encode())
    return out


@pytest.mark.kafka
@pytest.mark.xdist_group("kafka")
def test_a_growing_vocabulary_is_learned_whole_and_floods_are_still_refused(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    values = growing_stream()
    topic = dk.unique("growth")
    dk.create_topic(kafka_bootstrap, topic, 1)
    dk.produce(kafka_bootstrap, topic, values)
    ck, log = tmp_path / "ck", tmp_path / "daemon.log"
    argv = dk.daemon_argv(kafka_bootstrap, topic, dk.unique("g"), ck, idle=3.0,
                          settings={"kafka.max_poll_records": 200})  # fmt: skip
    code = dk.run_daemon(argv, log, timeout=600)
    text = log.read_text()
    assert code == 0, text[-3000:]
    result = dk.inspect(ck)
    grown = N_PLAIN + N_GROWING
    assert result["records_consumed"] == len(values)
    assert result["examples_learned"] == grown + FLOOD - 1  # no growth record refused
    # the 9th flood record would hold 10,602 inputs; the last has 1,001 names (records limit)
    assert result["rejected_by_reason"] == {"too_many_features": 2}
    assert "windowed regret off" in text  # the monitor gave up its window, not the records
    dead = dk.read_topic(kafka_bootstrap, f"{topic}.dead-letters", 2, timeout=60)
    messages = sorted(dict(d.headers)["error"].decode() for d in dead)
    assert any("10602 inputs, the limit is 10000" in m for m in messages), messages
    assert any("1001 features" in m for m in messages), messages
