"""The daemon's log on the real broker (Tansu): a progress line while it learns, a WARNING for
an input topic that does not exist."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.daemon_fakes import bananas_like
from tests.daemon_kafka import create_topic, daemon_argv, produce, run_daemon, unique

pytestmark = [pytest.mark.kafka, pytest.mark.xdist_group("kafka")]


def test_progress_lines_while_learning(kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = unique("progress")
    create_topic(kafka_bootstrap, topic, 2)
    values = [json.dumps(r).encode() for r in bananas_like(1500)]
    produce(kafka_bootstrap, topic, values, partition_of=lambda i: i % 2)
    argv = daemon_argv(kafka_bootstrap, topic, unique("g"), tmp_path / "ck", idle=1.5,
                       settings={"run.progress_seconds": 1.0})  # fmt: skip
    assert run_daemon(argv, tmp_path / "log") == 0
    lines = [ln for ln in (tmp_path / "log").read_text().splitlines() if "progress: " in ln]
    assert lines, (tmp_path / "log").read_text()[-3000:]
    assert " INFO streammkl.progress: " in lines[0]
    for part in ("records/s", "learned ", "lag ", "accuracy ", "dead letters ", "checkpoint"):
        assert part in " ".join(lines), (part, lines)
    assert any("learned 1,500" in ln for ln in lines), lines


def test_a_missing_input_topic_is_a_warning(kafka_bootstrap: str, tmp_path: Path) -> None:
    topic = unique("no-such-topic")  # never created
    argv = daemon_argv(kafka_bootstrap, topic, unique("g"), tmp_path / "ck", idle=4.0)
    assert run_daemon(argv, tmp_path / "log") == 6  # (exit code: input topic missing)
    text = (tmp_path / "log").read_text()
    warning = [ln for ln in text.splitlines() if "does not exist on the broker" in ln]
    assert warning and " WARNING " in warning[0] and repr(topic) in warning[0], text[-3000:]
    assert "kafka.topics" in warning[0]
