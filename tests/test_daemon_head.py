"""A batch that opens with records that make the model grow: its head learned at once, the run
that follows on the learner thread -- the same numbers as the whole batch learned on the loop
thread when the next batch comes (the path before)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from streammkl.daemon.config import load_settings
from streammkl.daemon.learning.drivers import MKLDriver
from streammkl.daemon.loop.prequential import Prequential
from streammkl.daemon.loop.runner import Runner
from streammkl.statefile import digest_of
from tests.daemon_fakes import FakeCluster, bananas_like


def values(n: int) -> list[bytes]:
    """Bananas-like records; new inputs and a new class now and then (some open a batch)."""
    out = []
    for i, r in enumerate(bananas_like(n, seed=5)):
        r["y"] = bool(r["y"])
        if i % 130 == 100:
            r["x"][f"new{i}"] = 0.5
        if i % 170 == 120:
            r["y"] = f"class{i}"
        if i % 97 == 50:
            del r["y"]  # predicted only
        out.append(json.dumps(r).encode())
    return out


def run(tmp_path: Path, seed: int, monitor: bool) -> tuple[Any, ...]:
    cluster = FakeCluster()
    cluster.create("in", 2)
    for i, v in enumerate(values(900)):
        cluster.append("in", v, i % 2, f"k{i}".encode(), i // 3)
    settings = load_settings(env={}, overrides={
        "kafka.topics": "in", "kafka.create_topics": False, "kafka.poll_timeout_ms": 0,
        "kafka.max_poll_records": 60, "checkpoint.dir": str(tmp_path / "ck"),
        "checkpoint.every_records": 400, "run.exit_when_idle": 0.05, "metrics.enabled": False,
        "monitor.enabled": monitor,
    })  # fmt: skip
    runner = Runner(
        settings, registry=CollectorRegistry(), consumer_client=cluster.consumer(seed),
        producer_client=cluster.producer(),
    )  # fmt: skip
    runner.run()
    sent = b"\n".join(v + b"|" + (r.key or b"") for r in cluster.topics["streammkl.predictions"][0]
                      for v in [r.value])  # fmt: skip
    return (
        hashlib.sha256(sent).hexdigest(), digest_of(runner.learner), dict(runner.offsets),
        {k: v for k, v in runner.counters.items()},
    )  # fmt: skip


@pytest.mark.parametrize("monitor", [True, False])
def test_a_head_then_a_run_learns_what_the_loop_thread_learned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, monitor: bool
) -> None:
    heads: list[tuple[int, int, int]] = []  # (head records, run start, run end) per head
    learn_head = Prequential._learn_head

    def counted(self: Prequential, valid: Any, xs: Any, ys: Any, head: Any, refused: Any) -> Any:
        start, run_ = learn_head(self, valid, xs, ys, head, refused)
        heads.append((len(head), start, run_[0]))
        return start, run_

    monkeypatch.setattr(Prequential, "_learn_head", counted)
    runs: list[int] = []
    run_rounds = MKLDriver.run_rounds
    monkeypatch.setattr(
        MKLDriver, "run_rounds", lambda self, X, Y: runs.append(len(X)) or run_rounds(self, X, Y)
    )
    got = run(tmp_path / "head", 3, monitor)
    # the first batch: the first records learned alone, the rest of it one run on the thread
    assert heads and heads[0][0] == heads[0][1] and 0 < heads[0][1] < heads[0][2]
    assert any(start < end for _, start, end in heads[1:])  # a batch opening with a new input
    assert runs and len(runs) >= len(heads)

    def before(self: Prequential, valid: Any, xs: Any, ys: Any, head: Any, refused: Any) -> Any:
        return 0, (0, None, None)  # no head: the batch learned by _learn_tail, as before

    monkeypatch.setattr(Prequential, "_learn_head", before)
    want = run(tmp_path / "before", 3, monitor)
    assert got == want
    assert got[3]["records_consumed"] == 900 and got[3]["examples_learned"] < 900
