"""The daemon's fused learning rounds equal predict-then-learn; the hot-path encoders equal json."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest

from streammkl import wire
from streammkl.core import kernels, losses, regularizers
from streammkl.daemon.config import load_settings
from streammkl.daemon.learning import history
from streammkl.daemon.learning.drivers import LearnerDriver, MKLDriver, driver_for
from streammkl.daemon.learning.stream_monitor import INPUTS, StreamMonitor
from streammkl.daemon.loop.predictions import prediction_bytes, prediction_messages
from streammkl.river import MKLClassifier, MKLRegressor
from streammkl.statefile import digest_of


def stream(n: int, seed: int, task: str) -> list[tuple[dict[str, float], Any]]:
    """Records with a feature appearing late, a class appearing late and unlabelled ones."""
    rng = random.Random(seed)
    out: list[tuple[dict[str, float], Any]] = []
    for i in range(n):
        x = {"a": rng.gauss(0, 1), "b": rng.gauss(0, 1)}
        if i >= n // 3:
            x["late"] = rng.gauss(0, 1)
        if task == "regression":
            y: Any = 2.0 * x["a"] - x["b"] + rng.gauss(0, 0.1)
        elif task == "multiclass":
            y = ("cat", "dog", "emu")[int(x["a"] > 0) + int(i >= n // 2 and x["b"] > 0)]
        else:
            y = x["a"] * x["b"] > 0
        out.append((x, None if i % 7 == 3 else y))
    return out


def run(step: LearnerDriver, records: list[tuple[dict[str, float], Any]]) -> list[Any]:
    """The daemon's use of a step: fused when possible, else predict then learn."""
    out = []
    for x, y in records:
        done = step.predict_learn(x, y) if y is not None else None
        if done is None:
            done = step.predict(x)
            if y is not None:
                step.learn(x, y)
        out.append(done)
    return out


LEARNERS = {
    "default bank, boolean labels": (lambda: MKLClassifier(seed=1), "binary"),
    "three classes, softmax": (lambda: MKLClassifier(loss=losses.Softmax(), seed=2), "multiclass"),
    "binary hinge": (lambda: MKLClassifier(loss=losses.Hinge()), "binary"),
    "binary logistic": (lambda: MKLClassifier(loss=losses.Logistic()), "binary"),
    "kernelized with a budget": (
        lambda: MKLClassifier(kernels=(kernels.Linear(), kernels.RBF(0.5)), budget=20),
        "multiclass",
    ),
    "regressor": (lambda: MKLRegressor(), "regression"),
}


@pytest.mark.parametrize("name", LEARNERS)
def test_fused_rounds_learn_and_predict_exactly_like_predict_then_learn(name: str) -> None:
    make, task = LEARNERS[name]
    records = stream(300, seed=7, task=task)
    fused, generic = driver_for(make()), LearnerDriver(make())
    assert isinstance(fused, MKLDriver)
    got, want = run(fused, records), run(generic, records)
    assert digest_of(fused.learner) == digest_of(generic.learner)
    for (p1, q1), (p2, q2) in zip(got, want, strict=True):
        if q2 is None:  # regression: the value
            assert p1 == pytest.approx(p2, rel=1e-12, abs=1e-12)
            continue
        assert p1 == p2
        assert q1.keys() == q2.keys()
        assert all(math.isclose(q1[k], q2[k], rel_tol=1e-12, abs_tol=1e-15) for k in q2)


def test_fused_rounds_are_the_common_case_and_report_the_round() -> None:
    step = driver_for(MKLClassifier(loss=losses.Hinge(), averages=()))  # loss at the scores
    step.track = True
    records = [(x, y) for x, y in stream(200, seed=3, task="binary") if y is not None]
    fused = 0
    for x, y in records:
        core = step.learner.rounds().model
        reg = core.regularization_value() if core is not None else 0.0
        before = core.decision(step.learner.rounds().input_vector(x)) if core is not None else None
        known = step.learner.rounds().ready and step.learner.rounds().knows_features(x)
        step.predict_learn(x, y)
        r = step.last_round
        assert r is not None and r.y == (1.0 if y else -1.0) and r.reg == reg
        if not known:  # an empty model, a late feature: learn_predict_one's two calls
            assert r.loss == pytest.approx(max(0.0, 1.0 - r.y * r.scores[0]), abs=1e-12)
            continue
        fused += 1
        assert r.scores[0] == pytest.approx(before, abs=1e-12)  # prequential: before the update
        assert r.loss == pytest.approx(max(0.0, 1.0 - r.y * before), abs=1e-12)
    assert fused >= len(records) - 3  # only the first records (empty model, late feature)


def test_learner_refusals_leave_the_model_untouched() -> None:
    step = driver_for(MKLClassifier(loss=losses.Hinge()))
    run(step, [(x, y) for x, y in stream(20, seed=1, task="binary") if y is not None])
    digest = digest_of(step.learner)
    with pytest.raises(ValueError):  # a third class for a binary loss
        step.predict_learn({"a": 1.0, "b": 0.0}, "third") or step.learn({"a": 1.0}, "third")
    assert digest_of(step.learner) == digest


@pytest.mark.parametrize(
    ("rid", "prediction", "proba"),
    [
        ("e1", True, {False: 0.25, True: 0.75}),
        (None, 3, {0: 0.1, 3: 0.9000000000000001}),
        ('quo"te\u00e9', "cat", {"cat": 1.0, "dog": 0.0}),
        ("r", 0.1 + 0.2, None),
        ("s", ["B", "I", "O"], None),
        ("n", None, {}),
    ],
)
def test_prediction_bytes_are_the_json_of_the_message(
    rid: Any, prediction: Any, proba: Any
) -> None:
    got = prediction_bytes(rid, prediction, proba, 12, "in.topic", 3, 99)
    assert b" " not in got  # compact (no value of these cases holds a space)
    keys = {k: k if isinstance(k, str) else json.dumps(k) for k in proba or ()}
    want = {
        "id": rid,
        "prediction": prediction,
        "proba": None if proba is None else {keys[k]: v for k, v in proba.items()},
        "model_version": 12,
        "topic": "in.topic",
        "partition": 3,
        "offset": 99,
    }
    assert json.loads(got) == want
    assert list(json.loads(got)) == list(want)  # the keys in this order


def test_prediction_bytes_of_labels_orjson_refuses() -> None:
    huge = 2**70  # beyond 64 bits: the standard library writes it
    got = prediction_bytes("h", huge, {huge: 0.75, 1: math.nan}, 1, "t", 0, 5)
    assert json.loads(got) == {
        "id": "h", "prediction": huge, "proba": {str(huge): 0.75, "1": None},
        "model_version": 1, "topic": "t", "partition": 0, "offset": 5,
    }  # fmt: skip


def test_prediction_bytes_hold_only_their_own_bytes() -> None:
    """The sink keeps every prediction until nothing is in flight: a kept message must cost its
    length, not the encoder's working buffer (orjson's bytes keep ~4 KB each)."""
    import tracemalloc

    proba = {False: 0.12345678901234567, True: 0.8765432109876543}
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [prediction_bytes(str(i), True, proba, i, "in.topic", 0, i) for i in range(1000)]
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    size = sum(len(m) for m in kept)
    assert 130_000 < size < 170_000
    assert held < 2 * size + 20_000  # bytes objects and the list: ~1.3x the text (base: ~27x)


class Msg(NamedTuple):
    topic: str
    partition: int
    offset: int


class Rec(NamedTuple):
    id: str | None


@pytest.mark.parametrize(
    ("rows", "top_k"),
    [
        ([("e1", True, {False: 0.25, True: 0.75}), (None, False, {False: 0.5, True: 0.5})], 0),
        (  # text of the cut inside ids and labels, a label "id", non-finite numbers, one class
            [
                ('a,{"id":1}', "id", {"id": 0.6, ',{"id":': 0.4}),
                (',{"id":', ',{"id":', {"id": math.nan, ',{"id":': math.inf}),
                ("q", "only", {"only": 1.0}),
                ("n", None, {}),
            ],
            10,
        ),
        ([("r", 0.1 + 0.2, None), ("s", None, None)], 10),  # regression
        ([("t", ["B", "I", "O"], None), ("u", [], None)], 10),  # label sequences
        ([("v", ["B", {"id": 1}], None), ("w", "x", None)], 0),  # the cut's text between values
        ([("h", 2**70, {2**70: 0.75, 1: 0.25}), ("g", 1, {2**70: 0.75, 1: 0.25})], 10),  # orjson
        ([("k", "b", {"a": 0.2, "b": 0.5, "c": 0.3}), ("l", "a", {"a": 0.6, "b": 0.4})], 2),
    ],
)
def test_prediction_messages_are_the_prediction_bytes_of_each_record(
    rows: list[tuple[Any, Any, Any]], top_k: int
) -> None:
    records = [(Msg("in.topic", 3, 99 + i), Rec(rid)) for i, (rid, _, _) in enumerate(rows)]
    outcomes = [(prediction, proba) for _, prediction, proba in rows]
    versions = [12 + 2 * i for i in range(len(rows))]
    want = [
        prediction_bytes(rec.id, pred, proba, v, msg.topic, msg.partition, msg.offset, top_k)
        for (msg, rec), (pred, proba), v in zip(records, outcomes, versions, strict=True)
    ]
    assert prediction_messages(records, outcomes, versions, top_k) == want
    assert prediction_messages([], [], [], top_k) == []


def test_prediction_messages_hold_only_their_own_bytes() -> None:
    import tracemalloc

    proba = {False: 0.12345678901234567, True: 0.8765432109876543}
    records = [(Msg("in.topic", 0, i), Rec(str(i))) for i in range(1000)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = prediction_messages(records, [(True, proba)] * 1000, list(range(1000)))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    size = sum(len(m) for m in kept)
    assert 130_000 < size < 170_000
    assert held < 2 * size + 20_000


def test_prediction_bytes_turn_non_finite_numbers_into_null() -> None:
    got = json.loads(prediction_bytes("i", math.nan, {True: math.inf, False: 0.5}, 0, "t", 0, 0))
    assert got["prediction"] is None and got["proba"] == {"true": None, "false": 0.5}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (b'{"x": [1, 2.5, -3]}', [1.0, 2.5, -3.0]),
        (b'{"x": {"a": 1, "b": 2.5}}', {"a": 1.0, "b": 2.5}),
        (b'{"x": [1e29, 1e29]}', [1e29, 1e29]),  # large values within records.max_abs_value
        (b'{"x": [1e308, 1e308]}', "value_too_large"),  # finite, but beyond the limit
        (b'{"x": [1, true]}', "non_numeric"),
        (b'{"x": {"a": 1, "b": "2"}}', "non_numeric"),
        (b'{"x": [1, 1' + b"0" * 400 + b"]}", "non_finite"),
        (b'{"x": {"a": -Infinity}}', "non_finite"),
        (b'{"x": [[1, 2], [3, NaN]], "y": [0, 1]}', "non_finite"),
    ],
)
def test_decode_fast_path_keeps_values_and_reasons(text: bytes, expected: Any) -> None:
    got = wire.decode(text)
    if isinstance(expected, str):
        assert isinstance(got, wire.DecodeError) and got.reason == expected, got
    else:
        assert isinstance(got, wire.Record) and got.x == expected
        values = got.x.values() if isinstance(got.x, dict) else got.x
        assert all(type(v) is float for v in values)


def drifting(n: int, seed: int) -> list[tuple[dict[str, float], Any]]:
    """Labels that flip at n/3 and back at 2n/3 (two rises of the loss), a feature appearing at
    n/5, a class appearing late, unlabelled records."""
    rng = random.Random(seed)
    out: list[tuple[dict[str, float], Any]] = []
    for i in range(n):
        x = {"a": rng.gauss(0, 1), "b": rng.gauss(0, 1)}
        if i >= n // 5:
            x["late"] = rng.gauss(0, 1)
        y = (x["a"] + 0.5 * x["b"] > 0) != (n // 3 <= i < 2 * n // 3)
        label = "maybe" if i > 2 * n // 3 and i % 97 == 0 else ("yes" if y else "no")
        out.append((x, None if i % 11 == 5 else label))
    return out


def monitored(tmp: Path, learner: Any = None, **over: Any) -> tuple[MKLDriver, StreamMonitor]:
    """A classifier's step with the daemon's monitor (no windowed regret: its fits run on a
    thread; a short detector memory, so the detector also starts afresh)."""
    overrides = {
        "monitor.window": 0, "monitor.stride": 50, "monitor.detector_memory": 300,
        "monitor.history_every": 100, **over,
    }  # fmt: skip
    settings = load_settings(env={}, overrides=overrides).monitor
    if learner is None:
        learner = MKLClassifier(kernels=(kernels.Linear(), kernels.RBF(1.0, n_components=16)))
    step = driver_for(learner)
    assert isinstance(step, MKLDriver)
    step.track = True
    return step, StreamMonitor(settings, tmp)


@pytest.mark.parametrize("seed", [0, 1])
def test_monitored_runs_cut_anywhere_equal_the_per_record_path(tmp_path: Path, seed: int) -> None:
    """With the monitor on, the daemon's runs (cut at the monitor's stride, each chunk observed;
    the records a run cannot take observed one by one) give the per-record path's model,
    predictions, monitor, detector log and history, for any batching, with a checkpoint of
    learner and monitor between a detection and its boundary."""
    records = drifting(1200, seed=3)
    ref, ref_watch = monitored(tmp_path / "ref")
    ref.observer = ref_watch  # its rounds one at a time (predict_learn, then observe_round)
    want = []
    first_rise = None  # a record soon after the first detection, before its boundary
    for i, (x, y) in enumerate(records):  # _process_records with the runner's _observed
        done = ref.predict_learn(x, y) if y is not None else None
        learned = done is not None
        if done is None:
            done = ref.predict(x)
            if y is not None:
                ref.learn(x, y)
                learned = True
        if learned:
            ref.observe_round(done[0] == y)
            if first_rise is None and ref_watch.monitor.restart_pending:
                first_rise = i + 1 + seed
        want.append(done)
    detector = ref_watch.monitor.detector
    assert detector.n_restarts == 2 and detector.last_restart > 700

    step, watch = monitored(tmp_path / "run")
    step.observer = watch
    assert step.batched
    rng = random.Random(seed)
    ends, end = {first_rise, len(records)}, 0
    while end < len(records):
        end += rng.choice([1, 1, 3, 50, 64, 100, 173])
        ends.add(min(end, len(records)))
    got: list[Any] = []
    checkpointed = False
    i = 0
    for end in sorted(ends):
        batch, i = records[i:end], end
        xs, ys = [x for x, _ in batch], [y for _, y in batch]
        end, X, Y = step.plan_run(xs, ys)  # Prequential.process, then _drain
        outcomes = step.run_rounds(X, Y)[0] if end else []
        got += outcomes + step.learn_predict_many(xs[end:], ys[end:], None)
        monitor = watch.monitor
        if not checkpointed and monitor is not None and monitor.restart_pending:
            checkpointed = True
            meta, arrays = watch.to_state()
            watch.history.flush()
            learner = type(step.learner).from_state(*step.learner.to_state())
            step, watch = monitored(tmp_path / "run", learner)
            step.observer = watch
            watch.restore(meta, arrays, learner.rounds().model)
            assert watch.monitor.restart_pending and watch.monitor.n % 50
    assert checkpointed
    assert digest_of(step.learner) == digest_of(ref.learner)
    for (p1, q1), (p2, q2) in zip(got, want, strict=True):
        assert p1 == p2 and q1 == q2
    (meta, arrays), (ref_meta, ref_arrays) = watch.to_state(), ref_watch.to_state()
    assert meta == ref_meta
    np.testing.assert_array_equal(arrays[INPUTS], ref_arrays[INPUTS])
    assert 0 < len(arrays[INPUTS]) < 300
    a, b = watch.snapshot(), ref_watch.snapshot()
    differ = {k for k in a if not (a[k] == b[k] or (math.isnan(a[k]) and math.isnan(b[k])))}
    assert not differ, differ
    watch.history.flush()
    ref_watch.history.flush()
    rows, ref_rows = history.read(tmp_path / "run"), history.read(tmp_path / "ref")
    assert rows == ref_rows and sum("event" in r for r in rows) == 2 and len(rows) > 10


def test_monitored_runs_feed_the_shadow_learners_as_the_per_record_path(tmp_path: Path) -> None:
    records = [(x, y) for x, y in drifting(600, seed=4) if y is not None]
    ref, ref_watch = monitored(tmp_path / "ref", **{"monitor.shadows": True})
    ref.observer = ref_watch
    for x, y in records:
        done = ref.predict_learn(x, y)
        if done is None:
            done = ref.predict(x)
            ref.learn(x, y)
        ref.observe_round(done[0] == y)
    step, watch = monitored(tmp_path / "run", **{"monitor.shadows": True})
    step.observer = watch
    for lo, hi in [(0, 7), (7, 8), (8, 300), (300, 333), (333, len(records))]:
        xs, ys = [x for x, _ in records[lo:hi]], [y for _, y in records[lo:hi]]
        step.learn_predict_many(xs, ys, None)
    assert digest_of(step.learner) == digest_of(ref.learner)
    a, b = watch.snapshot(), ref_watch.snapshot()
    assert a["shadow_regret"] == b["shadow_regret"] and np.isfinite(a["shadow_regret"])
    shadows, ref_shadows = watch.loop.shadows, ref_watch.loop.shadows
    assert shadows.shadow_loss == ref_shadows.shadow_loss and shadows.n_fed == len(records)


def test_monitored_runs_need_block_norm_regularizers() -> None:
    step = driver_for(MKLClassifier(regularizer=regularizers.SparseGroupLasso(1e-3)))
    step.track = True
    step.observer = object()
    assert not step.batched  # ||theta||_1 per round: one record at a time
    plain = driver_for(MKLClassifier())
    plain.track, plain.observer = True, type("Stride1", (), {"stride": 1})()
    assert not plain.batched  # no room for a run
    plain.observer = type("Stride50", (), {"stride": 50})()
    assert plain.batched


@pytest.mark.parametrize(
    ("classes", "loss"),
    [((False, True), None), ((False, True), "logistic"), (("a", "b", "c"), None)],
)
def test_a_run_planned_a_column_at_a_time_is_the_loop_of_checks(
    classes: tuple[Any, ...], loss: str | None
) -> None:
    """Rounds.plan of validated records: the whole stretch built a column at a time when every
    record joins the run, else where the loop of checks ends it -- the same end, rows and
    targets as that loop (Rounds._known_run), whatever breaks the run: a new input, a missing
    one, an unknown class, a label of another type."""
    rng = random.Random(5)
    learner = MKLClassifier(loss=losses.Logistic() if loss else None)  # a binary loss: +-1
    names = ["a", "b", "c"]
    for i in range(30):  # inputs and classes known
        learner.learn_one({k: rng.uniform(-1, 1) for k in names}, classes[i % len(classes)])
    rounds = learner.rounds()
    assert rounds.classes.binary == (loss is not None)

    def batch() -> tuple[list[dict[str, float]], list[Any]]:
        xs = [{k: rng.uniform(-1, 1) for k in names} for _ in range(40)]
        return xs, [rng.choice(classes) for _ in xs]

    breaks = {
        "none": lambda xs, ys: None,
        "new input": lambda xs, ys: xs[17].update(d=1.0),
        "input swapped": lambda xs, ys: xs.__setitem__(17, {"a": 0.5, "b": 0.1, "z": 1.0}),
        "missing input": lambda xs, ys: xs[17].pop("b"),
        "unknown class": lambda xs, ys: ys.__setitem__(17, "unseen"),
        "numpy label": lambda xs, ys: ys.__setitem__(17, np.array([classes[0]])[0]),
        "first": lambda xs, ys: xs[0].update(d=1.0),
    }
    for name, spoil in breaks.items():
        xs, ys = batch()
        spoil(xs, ys)
        for start in (0, 5):
            end, X, Y = rounds.plan(xs, ys, start, validated=True)
            j, rows, targets = rounds._known_run(xs, ys, start, True)
            assert end == j, name
            if j == start:
                assert X.size == 0 and Y.size == 0, name
                continue
            assert X.dtype == np.float64 and X.flags.c_contiguous, name
            assert X.tobytes() == np.array(rows, dtype=np.float64).tobytes(), name
            assert Y.tobytes() == np.array(targets).tobytes(), name
        whole = rounds._whole_run(xs, ys, 0)
        assert (whole is not None) == (name == "none"), name  # the fast path took the stretch


@pytest.mark.parametrize("dim", [None, 3])
def test_a_dense_vector_takes_the_fast_path_to_the_record_the_full_walk_gives(
    dim: int | None,
) -> None:
    """codec._plain reads a dense vector of finite floats (of ``dim`` values when set) in one
    pass: the Record the full walk (codec._judged) gives; every other array is left to the
    walk (None), which names its reason."""
    from streammkl.wire import codec

    limits = codec.Limits(max_vector_length=4)  # a short limit, to be reached
    texts = [
        b'{"x": [1.5, -2.0, 0.25], "y": "a", "id": "r1"}',
        b'{"x": [1.5, -2.0, 0.25], "y": true}',
        b'{"x": [1.5, -2.0]}',  # of another dimension
        b'{"x": [1.5, -2.0, 0.25, 1.0, 2.0]}',  # beyond max_vector_length
        b'{"x": [1, -2.0, 0.25]}',  # an int: the walk converts it
        b'{"x": [1.5, true, 0.25]}',
        b'{"x": [1.5, -2.0, 1e300]}',  # beyond max_abs_value
        b'{"x": []}',
        b'{"x": [[1.5], [2.0]], "y": ["a", "b"]}',  # a sequence
        b'{"x": [1.5, -2.0, 0.25], "ts": 3}',
        b'{"x": [1.5, -2.0, 0.25], "y": [1]}',
    ]
    fast = 0
    for text in texts:
        plain = codec._plain(text, limits, dim)
        judged = codec._judged(text, dim, None, False, 10_000, "vector", False, limits)
        full = codec._decoded(codec._plain_up_to(False, "vector", False, limits), dim, None,
                              False, 10_000, "vector", False, limits, text)  # fmt: skip
        assert full == judged, text  # the decoder's answer is the walk's, by either path
        if plain is None:
            continue
        fast += 1
        assert isinstance(judged, wire.Record) and plain == judged, text
        assert all(type(v) is float for v in plain.x), text
    assert fast == (2 if dim == 3 else 3)
