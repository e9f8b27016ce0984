"""Where one call of the default river classifier goes: ``MKLClassifier(standardize=True)``'s
``learn_predict_one`` and its ``predict_proba_one`` + ``learn_one`` (the memo path) broken down
into the work of each hop, from the dict to the compiled round and back to a dict of
probabilities. CPU time per example (``time.process_time_ns``) of a loop over a stream's timed
examples, median of ``--reps`` runs; the stages' runs interleave (one run of each stage per
repetition, each on a copy of the same warmed learner, after a full garbage collection), so a
change of the machine's load shifts them alike.

Stages (each a loop doing the named work per example; the differences between them are the
hops):

- ``dict -> values``: what the record round does before its compiled call (the record's keys
  compared with the bound ones, ``KnownRecord.fill``: its values checked and written in the
  dict's order into the bound buffer);
- ``+ the compiled call``: the same, then the one compiled call the round goes through
  (``OnlineMKL.learn_bound``'s call, ``RoundArgs.record_calls``, called directly:
  unboxing its arguments, the record scattered and standardised, the round);
- ``the same calls from a compiled loop``: the calls of ``+ the compiled call`` (each record's
  values copied into the bound buffer, then the compiled round by the record's address) from a
  compiled loop: what the calls from Python cost beyond it (less ``dict -> values``) is the
  Python-to-compiled boundary (the entry point's unboxing and boxing, the GIL released and
  taken, the interpreter between the calls);
- ``the round in the compiled loop``: the same rounds on the standardised rows in one compiled
  loop (``learn_many``: no call per round): what the calls from a compiled loop cost beyond it
  is the scatter, the standardisation and the checked round called per record (its checks, its
  pack's fields read and counted per call, which the loop reads once);
- ``Rounds.record_round``: the river layer's round (``Rounds.learn_known``'s one-call round as
  one callable: the record's values checked and written, ``OnlineMKL.bound_round``, the last
  round's view kept; all the Python down to the compiled call);
- ``learn_predict_one``: the whole call (the learner's lane, ``Rounds.make_lane``: the class
  lookup and the record round's steps in one Python frame; for two classes of a multiclass
  loss the probabilities computed in the compiled round, ``OnlineMKL.bound_round_softmax2``,
  and only their dict built in Python);
- ``probabilities``: ``Classes.proba`` of two scores alone (the formula and the dict in Python:
  what the lane does for a binary loss or more classes);
- the memo path: ``Rounds.predict_known`` (values, the compiled decision), ``predict_proba_one``
  (its lane, ``Rounds.make_predict_lane``: the values and the compiled decision in one Python
  frame, and the probabilities), each then ``+ learn_one`` (its lane, the round, whose
  featurisation the memo saves): the lane can cost less than ``Rounds.predict_known``'s hops, so
  "predict_proba_one's own hop" can come out negative.

Run: ``python benchmarks/river_breakdown.py [--reps 7]``; writes
``benchmarks/results/river_breakdown.md``.
"""

from __future__ import annotations

import argparse
import copy
import gc
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import add_out, documented_run, machine, markdown, publish

WARM = 1100  # examples before the timed ones (past the default bandwidth warm-up of 1,000)
STREAMS = ("Bananas", "Phishing", "Hyperplane")
TIMED = 2000  # at least these many timed examples per run


def _stream(name: str) -> list[tuple[dict, Any]]:
    from river import datasets
    from river.datasets import synth

    if name == "Bananas":
        return list(datasets.Bananas())
    if name == "Phishing":
        return list(datasets.Phishing())
    return list(synth.Hyperplane(seed=42, n_features=10).take(10_000))


Stage = Callable[[Any, list], Callable[[], None]]


def _values(model: Any, timed: list) -> Callable[[], None]:
    rounds = model.rounds()
    known, features = rounds._known, rounds.features
    known.values(timed[0][0], features, True)  # (the columns of the timed records' keys)
    keys, fill = known.keys, known.fill

    def go() -> None:
        for x, _ in timed:
            if tuple(x) == keys:
                fill(x.values())

    return go


def _compiled_call(model: Any, timed: list) -> Callable[[], None]:
    rounds = model.rounds()
    known, features, core = rounds._known, rounds.features, rounds.model
    targets = [rounds.target(y) for _, y in timed]
    known.values(timed[0][0], features, True)  # (the buffers of the timed records' keys)
    rounds._bind_record(core)  # (the buffers, as the first one-call round binds them)
    bound = core._bind_record()
    address, learn = bound[0], bound[1]
    t0, n0 = core.schedule.t, core.t
    keys, fill = known.keys, known.fill

    def go() -> None:
        # ``bound`` holds the record pack the address points into: the model, and with it the
        # pack, would otherwise be freed once this stage is made (the calls then read freed
        # memory; main's version of this stage crashed so)
        assert bound[0] == address
        for i, ((x, _), y) in enumerate(zip(timed, targets, strict=True), start=1):
            if tuple(x) == keys:
                fill(x.values())
            learn(address, y, t0 + i, n0 + i)

    return go


def _calls_in_loop(model: Any, timed: list) -> Callable[[], None]:
    from numba import njit

    from streammkl.core import _numba as nb

    @njit(cache=False)
    def calls(address, vals, V, Y, t0, n0):  # the same calls as ``_compiled_call``'s, compiled
        for i in range(V.shape[0]):
            vals[:] = V[i]
            nb.learn_record_at(address, Y[i], t0 + i + 1, n0 + i + 1)

    rounds = model.rounds()
    known, features, core = rounds._known, rounds.features, rounds.model
    targets = np.array([rounds.target(y) for _, y in timed])
    rows = np.array([known.values(x, features, True).copy() for x, _ in timed])
    rounds._bind_record(core)
    bound = core._bind_record()
    calls(bound[0], known.vals, rows[:0], targets[:0], 0, 0)  # (compiled before the timing)

    def go() -> None:
        calls(bound[0], known.vals, rows, targets, core.schedule.t, core.t)

    return go


def _compiled_loop(model: Any, timed: list) -> Callable[[], None]:
    rounds = model.rounds()
    rows = np.array([rounds.features.vector(x, validated=True) for x, _ in timed])
    standardised = rounds.scaler.rows(rows, learn=True)  # the rows as the rounds see them
    targets = np.array([rounds.target(y) for _, y in timed])

    def go() -> None:
        rounds.model.learn_many_prepared(standardised, targets)

    return go


def _record_round(model: Any, timed: list) -> Callable[[], None]:
    rounds = model.rounds()
    targets = [rounds.target(y) for _, y in timed]
    rounds.learn_known(timed[0][0], targets[0])  # (one round makes it: a copy has none)
    record_round = rounds.record_round
    assert record_round is not None

    def go() -> None:
        for (x, _), y in zip(timed, targets, strict=True):
            record_round(x, y)

    return go


def _each(method: str) -> Stage:
    """The stage calling the learner's ``method(x, y)`` on every timed example."""

    def stage(model: Any, timed: list) -> Callable[[], None]:
        call = getattr(model, method)

        def go() -> None:
            for x, y in timed:
                call(x, y)

        return go

    return stage


def _probabilities(model: Any, timed: list) -> Callable[[], None]:
    classes = model._classes
    scores = np.array([0.25, -0.25])

    def go() -> None:
        for _ in timed:
            classes.proba(scores.tolist())

    return go


def _predict_known(model: Any, timed: list) -> Callable[[], None]:
    rounds = model.rounds()
    learn = model.learn_one

    def go() -> None:  # (learning too, untimed apart: the predictions see a learning model)
        for x, y in timed:
            rounds.predict_known(x)
            learn(x, y)

    return go


def _predict_proba_one(model: Any, timed: list) -> Callable[[], None]:
    predict, learn = model.predict_proba_one, model.learn_one

    def go() -> None:
        for x, y in timed:
            predict(x)
            learn(x, y)

    return go


STAGES: tuple[tuple[str, Stage], ...] = (
    ("dict -> values", _values),
    ("+ the compiled call", _compiled_call),
    ("the same calls from a compiled loop", _calls_in_loop),
    ("the round in the compiled loop", _compiled_loop),
    ("Rounds.record_round", _record_round),
    ("learn_predict_one", _each("learn_predict_one")),
    ("probabilities (a dict of two)", _probabilities),
    ("learn_one alone (no memo)", _each("learn_one")),
    ("Rounds.predict_known + learn_one", _predict_known),
    ("predict_proba_one + learn_one", _predict_proba_one),
)


def breakdown(name: str, reps: int) -> dict[str, float]:
    """Median CPU ns per example of every stage on ``name``'s timed examples."""
    from streammkl.river import MKLClassifier

    data = _stream(name)
    warm, timed = data[:WARM], data[WARM:]
    timed = timed * -(-TIMED // len(timed))  # (Phishing's 150 again and again: its rounds go on)
    warmed = MKLClassifier(standardize=True)
    for x, y in warm:
        warmed.learn_predict_one(x, y)
    times: dict[str, list[float]] = {label: [] for label, _ in STAGES}
    for _ in range(reps):
        for label, stage in STAGES:
            run = stage(copy.deepcopy(warmed), timed)
            gc.collect()
            t0 = time.process_time_ns()
            run()
            times[label].append((time.process_time_ns() - t0) / len(timed))
    return {label: statistics.median(v) for label, v in times.items()}


def rows_of(name: str, t: dict[str, float]) -> list[list[object]]:
    values, call, loop, calls = (
        t["dict -> values"],
        t["+ the compiled call"],
        t["the round in the compiled loop"],
        t["the same calls from a compiled loop"],
    )
    known, one = t["Rounds.record_round"], t["learn_predict_one"]
    proba = t["probabilities (a dict of two)"]
    predict_known, two = t["Rounds.predict_known + learn_one"], t["predict_proba_one + learn_one"]
    learn_only = t["learn_one alone (no memo)"]
    us = lambda v: f"{v / 1000:.2f}"  # noqa: E731
    return [
        [name, "learn_predict_one", "dict -> values (`KnownRecord.fill`)", us(values)],
        [name, "", "the compiled round (in a compiled loop)", us(loop)],
        [name, "", "scatter, standardisation, the checked round's call", us(calls - loop)],
        [name, "", "Python-to-compiled boundary", us(call - values - calls)],
        [name, "", "Python in `Rounds.record_round` / `OnlineMKL.bound_round`", us(known - call)],
        [name, "", "classifier lane and probabilities", us(one - known)],
        [name, "", "(`Classes.proba` alone: the two-class lane computes it compiled)", us(proba)],
        [name, "", "**total**", f"**{us(one)}**"],
        [name, "predict + learn_one", "learn_one alone (featurising)", us(learn_only)],
        [name, "", "`Rounds.predict_known` + learn_one", us(predict_known)],
        [name, "", "predict_proba_one's own hop and probabilities", us(two - predict_known)],
        [name, "", "**total**", f"**{us(two)}**"],
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=7, help="interleaved runs per stage")
    parser.add_argument("--streams", default=",".join(STREAMS), help="comma-separated streams")
    add_out(parser)
    args = parser.parse_args()
    start = machine()
    rows: list[list[object]] = []
    for name in args.streams.split(","):
        rows += rows_of(name, breakdown(name, args.reps))
        print(markdown(["stream", "call", "part", "µs per example"], rows[-12:]), flush=True)
    body = (
        f"Measured on {start} (load average {os.getloadavg()[0]:.2f} at the end); CPU time per "
        f"example of a loop over each stream's examples after the first {WARM:,} (the learner "
        f"warmed on them; repeated to at least {TIMED:,}), median of {args.reps} interleaved "
        "runs per stage (`benchmarks/river_breakdown.py`: the stages and how each part is "
        "derived from them). "
        "The parts are differences of medians: on a loaded machine a small one can come out "
        "negative.\n\n" + markdown(["stream", "call", "part", "µs per example"], rows)
    )
    full = documented_run(parser, args)
    publish("river_breakdown", "Where a river call goes", body, full=full, out=args.out)


if __name__ == "__main__":
    main()
