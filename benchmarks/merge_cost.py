"""What one mixing round costs a member: the merge of a round and the rebase, per call.

Two members of a group learn with the daemon's default bank (``MKLClassifier()``: linear,
additive Gaussian, three Gaussian bandwidths from the median heuristic as Fourier maps, the
quadratic kernel; FTRL with the group lasso) on ``--inputs`` standardised inputs, each ``--k``
records per round from the same merged base (the steady state: no new inputs, the bandwidths
decided). Timed, in process (no broker), the median of ``--reps`` calls (wall time):

- **merge**: :func:`streammkl.daemon.mixing.log.merge_states` of the two members' deltas over
  the base, what every member computes when a round closes;
- **rebase**: :func:`streammkl.daemon.mixing.log.rebased`, a member's progress since its publish
  moved onto the merged model (``merged + local - published``);
- **rebase, as a member did it** (its learner's state saved, rebased, loaded into the learner)
  against **in place** (``Rounds.rebase_onto``: the same bits on the learner's own arrays), and
  **taking the merged model** (the round's last publisher, nothing of its own): ``load_state``
  against ``Rounds.take_state``;
- **encode** / **decode**: a member's delta written to / read from the mix topic's record
  (:func:`streammkl.daemon.mixing.topic.encode`, ``decode``: every member reads every delta);
- **learning**: one member's ``learn_many`` of ``--k`` records, for scale.

Run: ``python benchmarks/merge_cost.py [--inputs 10 --k 250 --reps 30]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import add_out, documented_run, machine, markdown, publish

from streammkl.daemon.mixing.log import merge_states, rebased
from streammkl.daemon.mixing.topic import MixRecord, decode, encode
from streammkl.river import MKLClassifier


def _batch(rng: np.random.Generator, n: int, d: int) -> tuple[pd.DataFrame, pd.Series]:
    X = rng.normal(size=(n, d))
    y = (X[:, 0] + 0.5 * X[:, 1] * X[:, 2] > 0).astype(int)
    return pd.DataFrame(X, columns=[f"x{j}" for j in range(d)]), pd.Series(y)


def _copy(state):
    return state[0], {k: np.array(v, copy=True) for k, v in state[1].items()}


def _median_ms(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _median_ms_after(setup, fn, reps: int) -> float:
    """The median of ``fn``'s calls, each after an untimed ``setup``."""
    times = []
    for _ in range(reps):
        setup()
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _in_place(learner, ok: bool) -> None:
    if not ok:  # (the states share one layout: the in-place paths must take them)
        raise RuntimeError(f"the in-place path refused the states of {learner}")


def measure(d: int, k: int, reps: int, seed: int) -> list[list[object]]:
    rng = np.random.default_rng(seed)
    learner = MKLClassifier()
    learner.learn_many(*_batch(rng, 2000, d))  # past the warm-up: the bandwidths decided
    base = _copy(learner.to_state())
    parts = []
    for name in ("a", "b"):
        member = MKLClassifier.from_state(*base)
        member.learn_many(*_batch(rng, k, d))
        parts.append((name, k, _copy(member.to_state()), None))
    merged = merge_states(base, parts)
    mine = MKLClassifier.from_state(*parts[0][2])
    mine.learn_many(*_batch(rng, k, d))
    local = _copy(mine.to_state())
    X, y = _batch(rng, k, d)
    learn = MKLClassifier.from_state(*base)
    delta = MixRecord("delta", 1, "a", examples=k, state=local)
    _, value = encode(delta)
    member = MKLClassifier.from_state(*local)
    rounds = member.rounds()
    published = parts[0][2]

    def restore() -> None:
        rounds.load_state(*local)

    def loaded() -> None:
        rounds.load_state(*rebased(merged, _copy(member.to_state()), published, k), with_bank=True)

    return [
        ["merge (2 members)", _median_ms(lambda: merge_states(base, parts), reps)],
        ["rebase", _median_ms(lambda: rebased(merged, local, published, k), reps)],
        [
            "rebase, as a member did it (saved, rebased, loaded)",
            _median_ms_after(restore, loaded, reps),
        ],
        [
            "rebase in place (Rounds.rebase_onto)",
            _median_ms_after(
                restore, lambda: _in_place(member, rounds.rebase_onto(merged, published, k)), reps
            ),
        ],
        [
            "taking the merged model: load_state",
            _median_ms_after(restore, lambda: rounds.load_state(*merged, with_bank=True), reps),
        ],
        [
            "taking the merged model in place (Rounds.take_state)",
            _median_ms_after(restore, lambda: _in_place(member, rounds.take_state(*merged)), reps),
        ],
        ["encode a delta", _median_ms(lambda: encode(delta), reps)],
        [f"decode a delta ({len(value) // 1000} kB)", _median_ms(lambda: decode(value), reps)],
        [f"learning {k} records", _median_ms(lambda: learn.learn_many(X, y), reps)],
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", type=int, default=10)
    ap.add_argument("--k", type=int, default=250, help="records per member per round")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    add_out(ap)
    args = ap.parse_args(argv)
    header = machine()
    rows = measure(args.inputs, args.k, args.reps, args.seed)
    body = (
        f"{header}. Default bank, {args.inputs} inputs, K = {args.k}; medians of {args.reps} "
        f"calls (wall time, ms). Command: `python benchmarks/merge_cost.py`.\n\n"
        + markdown(["part of a round", "median ms"], rows)
    )
    publish("merge_cost", "What one mixing round costs a member", body, documented_run(ap, args),
            args.out)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
