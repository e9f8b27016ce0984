"""What a user meets in the first week: the warm-up's progress, the progress line, repeated log
lines held back with a count, and scores named for the task."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import pytest

from streammkl.daemon.commands.logfilter import RepeatLimit
from streammkl.daemon.config import load_settings
from streammkl.daemon.http.metrics import Snapshot
from streammkl.daemon.learning.scores import headline, prequential_scores
from streammkl.daemon.learning.warmup import (
    WarmUpProgress,
    sparse_examples,
    synthetic_examples,
    warm_up,
)
from streammkl.daemon.loop.progress import ProgressLine


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def record(msg: str, *args: object, level: int = logging.WARNING) -> logging.LogRecord:
    return logging.LogRecord("streammkl.kafka", level, __file__, 1, msg, args, None)


def test_repeated_lines_are_held_back_and_counted() -> None:
    clock = Clock()
    limit = RepeatLimit(10.0, clock)
    shown = []
    for i in range(412):  # ~40 lines/s for 10 s: one shown
        clock.t = i * 0.024
        rec = record("cannot reach %s (%s); retrying", "127.0.0.1:1", f"attempt {i}")
        if limit.filter(rec):
            shown.append(rec.getMessage())
    assert len(shown) == 1 and "×" not in shown[0]
    clock.t = 10.5
    rec = record("cannot reach %s (%s); retrying", "127.0.0.1:1", "attempt 413")
    assert limit.filter(rec)
    assert rec.getMessage().endswith("(×412 in the last 10 s)"), rec.getMessage()
    # another line (another topic), DEBUG lines and a window of 0 are never held back
    assert limit.filter(record("librdkafka: %s", "down"))
    assert limit.filter(record("mix topic: skipped member %r", "zz"))
    assert limit.filter(record("mix topic: skipped member %r", "intruder"))
    # a mixing group's round lines: one per 10 s, with the count
    merged = "round %d merged: %d examples from %s, digest %s, %.1f ms"
    assert limit.filter(record(merged, 1, 500, ["a", "b"], "3f2a9c01be77", 2.5, level=20))
    assert not limit.filter(record(merged, 2, 500, ["a", "b"], "9be0c3d4a1f2", 2.7, level=20))
    assert all(limit.filter(record("x %s", i, level=logging.DEBUG)) for i in range(5))
    assert all(RepeatLimit(0.0, clock).filter(record("y")) for _ in range(5))
    periodic = [record("%s", f"progress {i}") for i in range(3)]
    for rec in periodic:
        rec.periodic = True
    assert all(limit.filter(rec) for rec in periodic)  # the progress line is never held back


def test_progress_line_says_rate_lag_score_dead_letters_and_checkpoint_age() -> None:
    clock, wall = Clock(), Clock()
    wall.t = 1000.0
    progress = ProgressLine(10.0, "classification", clock, wall)
    counters = {"records_consumed": 0, "examples_learned": 0, "labelled_predictions": 0,
                "correct_predictions": 0, "online_loss": 0.0, "dead_letters": 0}  # fmt: skip
    snap = Snapshot(lag={("t", 0): 120}, checkpoint_time=996.0)
    assert progress.tick(counters, snap) is None  # not due yet
    clock.t = 10.0
    counters.update(records_consumed=10_120, examples_learned=10_100, labelled_predictions=10_100,
                    correct_predictions=9_635, online_loss=1_500.0, dead_letters=3)  # fmt: skip
    line = progress.tick(counters, snap)
    assert line is not None
    assert "1,012 records/s (10,120 in 10 s)" in line
    assert "learned 10,100" in line and "lag 120" in line
    assert "accuracy 0.954 (last 10 s: 0.954)" in line
    assert "dead letters 3 (+3)" in line and "checkpoint 4 s ago" in line
    clock.t = 20.0  # idle: one line saying so, then silence
    assert progress.tick(counters, snap) is not None
    clock.t = 30.0
    assert progress.tick(counters, snap) is None
    regression = ProgressLine(10.0, "regression", clock, wall)
    clock.t = 40.0
    counters.update(labelled_predictions=100, online_loss=25.0, correct_predictions=0)
    line = regression.tick(counters, Snapshot())
    assert line is not None and "RMSE 0.5" in line and "accuracy" not in line
    assert "no checkpoint yet" in line
    assert ProgressLine(0.0, "classification", clock).tick(counters, snap) is None


@pytest.mark.parametrize(
    ("task", "names"),
    [
        ("classification", ["accuracy", "log-loss"]),
        ("regression", ["RMSE", "MSE"]),
        ("sequence", ["label accuracy", "label error rate"]),
        ("parsing", ["UAS", "head error rate"]),
    ],
)
def test_scores_are_named_for_the_task(task: str, names: list[str]) -> None:
    scores = prequential_scores(task, 100, 80, 36.0)
    assert list(scores) == names
    if task == "regression":
        assert scores["RMSE"] == pytest.approx(math.sqrt(0.36))
        assert headline(task, 100, 80, 36.0) == "RMSE 0.6"
    else:
        assert scores[names[0]] == pytest.approx(0.8)
        assert headline(task, 100, 80, 36.0).startswith(f"{names[0]} 0.800")
    assert prequential_scores(task, 0, 0, 0.0) == {} and headline(task, 0, 0, 0.0) == "-"


def test_warm_up_reports_each_stage_then_done() -> None:
    settings = load_settings(None, overrides={"monitor.enabled": False})
    seen: list[WarmUpProgress] = []
    report = warm_up(settings, synthetic_examples(300), seen.append)
    stages = [p.stage for p in seen if p.compiling is None and not p.done]
    assert stages == list(range(1, seen[0].stages + 1))  # every stage announced, in order
    assert seen[-1].done and seen[-1].compiled == report.compiled
    assert all(p.what for p in seen) and report.seconds > 0
    # a compile in progress names the function (none when numba's cache was warm)
    assert all("." in p.compiling for p in seen if p.compiling)


def test_the_default_warm_up_also_learns_wide_sparse_records() -> None:
    """With the default examples the warm-up reaches the code a bag of words runs (new inputs
    in most records), which the dense examples never reach."""
    data = sparse_examples()
    seen_keys: set[str] = set()
    new_inputs = []
    for x, _ in data:
        new_inputs.append(len(set(x) - seen_keys))
        seen_keys |= set(x)
    assert sum(n > 0 for n in new_inputs[150:]) > 50  # new words keep arriving
    assert all(isinstance(v, int) and v >= 1 for x, _ in data for v in x.values())
    assert {y for _, y in data} == {False, True}
    settings = load_settings(None, overrides={"monitor.enabled": False})
    seen: list[WarmUpProgress] = []
    warm_up(settings, None, seen.append)
    stages = [p.what for p in seen if p.compiling is None and not p.done]
    assert any("sparse" in what for what in stages)
    assert len(stages) == seen[0].stages
    seen.clear()
    warm_up(settings, synthetic_examples(300), seen.append)  # the stream's own examples: none
    assert not any("sparse" in p.what for p in seen)
    seen.clear()
    warm_up(settings, None, seen.append, wide=False)  # the daemon's warm start: none either
    assert seen and not any("sparse" in p.what for p in seen)


def test_exported_model_predicts_exactly_what_the_daemon_would(tmp_path: Path) -> None:
    import json

    from prometheus_client import CollectorRegistry

    from streammkl.daemon.checkpoints.export import export_model
    from streammkl.daemon.commands.cli import main
    from streammkl.daemon.loop.runner import Runner
    from streammkl.river import MKLClassifier
    from streammkl.statefile import digest_of
    from tests.daemon_fakes import FakeCluster, bananas_like

    cluster = FakeCluster()
    cluster.create("in", 1)
    for i, r in enumerate(bananas_like(300)):
        cluster.append("in", json.dumps(r).encode(), 0, f"k{i}".encode(), i)
    settings = load_settings(env={}, overrides={
        "kafka.topics": "in", "kafka.create_topics": False, "kafka.poll_timeout_ms": 0,
        "kafka.max_poll_records": 50, "checkpoint.dir": str(tmp_path / "ck"),
        "run.exit_when_idle": 0.05, "metrics.enabled": False, "monitor.enabled": False,
    })  # fmt: skip
    runner = Runner(
        settings,
        registry=CollectorRegistry(),
        consumer_client=cluster.consumer(0),
        producer_client=cluster.producer(),
    )
    runner.run()
    daemon = runner.learner
    assert isinstance(daemon, MKLClassifier) and runner.counters["examples_learned"] == 300
    done = export_model(tmp_path / "ck", tmp_path / "model.smkl")
    model = MKLClassifier.load(done.path)
    assert digest_of(model) == digest_of(daemon) == done.model_digest
    assert done.examples_learned == 300
    for r in bananas_like(50, seed=7):  # records the daemon has not seen
        x = r["x"]
        assert model.predict_proba_one(x) == daemon.predict_proba_one(x)
        assert model.predict_one(x) == daemon.predict_one(x)
    # the command: a line saying what was written and how to load it; errors without a trace
    assert main(["export", str(tmp_path / "ck"), str(tmp_path / "m2.smkl")]) == 0
    assert digest_of(MKLClassifier.load(tmp_path / "m2.smkl")) == done.model_digest
    assert main(["export", str(tmp_path / "nothing"), str(tmp_path / "m3.smkl")]) == 1


def test_regret_and_its_bound_are_both_visible(tmp_path: Path) -> None:
    """The regret (~10^2) and its bound (~10^7) on one log axis: both within the limits (on a
    shared linear axis the regret was a flat line at 0); a negative regret: symlog."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from streammkl.daemon.commands import report

    rows = [{"t": 500 * i, "window_end": 500 * i, "window_regret": 80.0 + i,
             "window_regret_bound": 8e6 + i} for i in range(1, 6)]  # fmt: skip
    fig, ax = plt.subplots()
    report._regret_panel(ax, rows)
    low, high = ax.get_ylim()
    assert ax.get_yscale() == "log" and low <= 80.0 and high >= 8e6
    rows[0]["window_regret"] = -3.0
    fig2, ax2 = plt.subplots()
    report._regret_panel(ax2, rows)
    assert ax2.get_yscale() == "symlog"
    plt.close(fig)
    plt.close(fig2)


def test_inspect_text_is_for_people(tmp_path: Path) -> None:
    from streammkl.daemon.checkpoints.inspection import render_text

    text = render_text({"created": 1795772471.3, "offsets": {"in": {"10": 5, "2": 7}},
                        "prequential": {"RMSE": 0.41234567}, "skipped_by_reason": {},
                        "prequential_accuracy": None})  # fmt: skip
    assert "created: 2026-11-27 09:41:11 UTC (" in text
    assert "offsets (next to read):\n  in/2: 7\n  in/10: 5" in text  # partitions in order
    assert "RMSE: 0.412346" in text and "skipped_by_reason: -" in text
    assert "prequential_accuracy: -" in text and "{" not in text


def test_command_line_small_things(capsys: pytest.CaptureFixture[str]) -> None:
    from streammkl import __version__
    from streammkl.daemon.commands.cli import build_parser, main

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"streammkl {__version__}"
    # an unknown scenario, or one that needs a file: a clear error before any broker starts
    for bad in ("nope", "conllu"):
        assert main(["demo", "--scenario", bad, "--duration", "1"]) == 2
        err = capsys.readouterr().err
        assert f"unknown scenario {bad!r}" in err and "kernel-drift" in err
        assert "Traceback" not in err
    parser = build_parser()
    assert parser._subparsers is not None
    commands = parser._subparsers._group_actions[0].choices
    assert isinstance(commands, dict)
    helps = {name: sub.format_help() for name, sub in commands.items()}
    for option in ("--port", "--host", "--log-level"):  # every broker option says what it is
        line = next(ln for ln in helps["broker"].splitlines() if ln.strip().startswith(option))
        assert "default" in line or "default" in helps["broker"].split(option, 2)[-1][:200]
    assert "defaults: --bootstrap-servers 127.0.0.1:9092" in " ".join(helps["run"].split())
    assert "one of: kernel-drift" in " ".join(helps["demo"].split())
    assert "conllu" not in helps["demo"]


def test_a_start_that_compiles_says_so(caplog: pytest.LogCaptureFixture) -> None:
    """The daemon's start wraps its learner's warm-up in logging_compiles: a compile is logged
    (what, why, how long), a warm cache logs nothing."""
    from numba import njit

    from streammkl.daemon.learning.warmup import COLD_COMPILE_NOTE, logging_compiles

    logger = logging.getLogger("streammkl.test-compiles")

    @njit(cache=False)
    def fresh(x: float) -> float:  # never compiled before this test: a compile happens
        return x * 2.0 + 1.0

    with caplog.at_level(logging.INFO, logger=logger.name), logging_compiles(logger):
        assert fresh(1.0) == 3.0
    text = caplog.text
    assert COLD_COMPILE_NOTE in text and "fresh" in text
    assert "compiled 1 functions in" in text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=logger.name), logging_compiles(logger):
        assert fresh(2.0) == 5.0  # compiled already: silent
    assert caplog.text == ""
