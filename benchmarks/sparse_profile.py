"""Where one call of the sparse rows of ``benchmarks/river_speed.py`` goes (issue 25, part 1).

The two sparse rows (a bag-of-words stream, ``BagOfWords() | MKLClassifier()``, and one-hot
``synth.Agrawal``, ``MKLClassifier(standardize=True)``) are run prequentially
(``predict_proba_one`` then ``learn_one``) from a fresh learner, as ``river_speed.py`` times
them, with the functions below wrapped by timers; each part's time is *exclusive* (what its
callees that are parts themselves took is charged to them), and what no part covers is the
Python glue of the learner's calls (dispatch, checks, the pipeline's own code). The parts:

- river's ``BagOfWords`` (``transform_one``, twice per record: the same in both pipelines);
- new-input admission, in four parts: finding the record's new names (``new_names``), the
  model's Python to declare them (``OnlineMKL.declare_features``: the bandwidths' check, the
  layout's growth, a doubling's copy and the state's transplant), the compiled call that
  draws and writes their columns (``place_inputs``: a new word's Fourier frequencies drawn
  from (seed, its name's hash), O(D) per new word), and the index's bookkeeping
  (``FeatureIndex.add``);
- the record mapped dict -> entries (``FeatureIndex.known_sparse``: for the prediction and
  for the learning call; ``KnownRecord.values`` on the dense one-call route) and the inputs'
  checks (``check_numeric``);
- the compiled round (``RoundArgs.learn_sparse``; a dense route's ``learn_values``,
  ``learn_predict``) and the compiled decision of ``predict_proba_one``
  (``RoundArgs.decision_sparse``; ``predict_values``, ``decision``);
- the probabilities (``Classes.proba``).

Timers read ``time.perf_counter_ns`` (~0.08 µs a read; a CPU clock's read costs ~0.6 µs, more
than some parts): the per-part figures are wall time in one thread, each the mean per record
over a run, the median over ``--reps`` runs; each part's share of their sum then apportions the
CPU time per record (``time.process_time``) of the same run without timers. Each run starts
after a full garbage collection, the process warmed by a throwaway learner (compiled code
loaded), as ``river_speed.py`` does.

Run: ``python benchmarks/sparse_profile.py [--n 300,3000] [--reps 5]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import add_out, documented_run, machine, markdown, publish
from river_speed import _bag_of_words, _one_hot_agrawal

GLUE = "Python glue (the learner's calls, the pipeline's)"
GROWTH = "growth: a doubling or rebuild (arrays, copies, transplant)"


class Timers:
    """Exclusive wall time per part: a part's callees that are parts are charged to them."""

    def __init__(self) -> None:
        self.total: dict[str, int] = defaultdict(int)
        self.calls: dict[str, int] = defaultdict(int)
        self._stack: list[list[int]] = []  # per open part: [callees' time]
        self._undo: list[Callable[[], None]] = []

    def wrap(self, owner: Any, attr: str, part: str | Callable[..., str]) -> None:
        """Time ``owner.attr`` (a function of a module or a class) as ``part`` (or as the part
        ``part(*args, **kwargs)`` names for each call's arguments)."""
        inner = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)
        if isinstance(inner, staticmethod | classmethod | property):
            raise TypeError(f"{owner}.{attr}: wrap plain functions only")
        stack, total, calls = self._stack, self.total, self.calls
        clock = time.perf_counter_ns

        def timed(*args: Any, **kwargs: Any) -> Any:
            inside = [0]
            stack.append(inside)
            t0 = clock()
            try:
                return inner(*args, **kwargs)
            finally:
                spent = clock() - t0
                stack.pop()
                name = part if isinstance(part, str) else part(*args, **kwargs)
                total[name] += spent - inside[0]
                calls[name] += 1
                if stack:
                    stack[-1][0] += spent

        setattr(owner, attr, timed)
        self._undo.append(lambda: setattr(owner, attr, inner))

    def undo(self) -> None:
        for restore in reversed(self._undo):
            restore()
        self._undo.clear()


def _known_vector_part(index: Any, x: Any, learn: bool, entries: bool = False) -> str:
    """``FeatureIndex.known_vector``'s part: its loop maps a record to entries for
    ``known_sparse`` (``entries``) as well as to a dense vector."""
    return "map dict -> entries" if entries else "map dict -> dense vector"


def _instrument(timers: Timers) -> None:
    from river import compose, feature_extraction

    from streammkl.core import bandwidth, layout, model, update
    from streammkl.river import _features, _known, _labels, classifier, rounds

    bow = feature_extraction.BagOfWords
    parts: list[tuple[Any, str, str]] = [
        (bow, "transform_one", "river BagOfWords (both pipelines)"),
        (compose.Pipeline, "predict_proba_one", GLUE),
        (compose.Pipeline, "learn_one", GLUE),
        (classifier.MKLClassifier, "predict_proba_one", GLUE),
        (classifier.MKLClassifier, "learn_one", GLUE),
        (_features.FeatureIndex, "new_names", "admission: new names"),
        (model.OnlineMKL, "declare_features", "admission: declare (Python, growth, copies)"),
        (layout, "_place_inputs", "admission: draw + place (compiled)"),
        (layout.Layout, "_place", "admission: quadratic map's first inputs (Python)"),
        (bandwidth, "for_inputs", "admission: bandwidths' check"),
        (layout, "_empty", GROWTH),
        (model, "transplant", GROWTH),
        (model.OnlineMKL, "_refresh_args", GROWTH),
        (_features.FeatureIndex, "add", "admission: index bookkeeping"),
        (_features.FeatureIndex, "known_sparse", "map dict -> entries"),
        (_known.KnownRecord, "values", "map dict -> entries"),
        (_features.FeatureIndex, "known_vector", _known_vector_part),
        (_features.FeatureIndex, "vector", "map dict -> dense vector"),
        (rounds, "check_numeric", "checks (check_numeric)"),
        (_features, "check_numeric", "checks (check_numeric)"),
        (classifier, "check_numeric", "checks (check_numeric)"),
        (update.RoundArgs, "learn_sparse", "compiled round (learn)"),
        (update.RoundArgs, "learn_predict", "compiled round (learn)"),
        (model.OnlineMKL, "learn_values", "compiled round (learn)"),
        (update.RoundArgs, "decision_sparse", "compiled decision (predict)"),
        (update.RoundArgs, "decision", "compiled decision (predict)"),
        (model.OnlineMKL, "predict_values", "compiled decision (predict)"),
        (model.OnlineMKL, "_after_round", "after a round (bandwidth warm-up)"),
        (_labels.Classes, "proba", "probabilities (Classes.proba)"),
    ]
    for owner, attr, part in parts:
        timers.wrap(owner, attr, part)


def _run(model: Any, data: Iterable[tuple[Any, Any]]) -> int:
    n = 0
    for x, y in data:
        model.predict_proba_one(x)
        model.learn_one(x, y)
        n += 1
    return n


def _cpu_us(make: Callable[[], Any], data: list) -> float:
    model = make()
    gc.collect()
    t0 = time.process_time()
    n = _run(model, data)
    return (time.process_time() - t0) / n * 1e6


def _profile(make: Callable[[], Any], data: list) -> tuple[dict[str, float], float]:
    """Per-part µs per record (exclusive, wall) and the wall µs per record of the whole run."""
    timers = Timers()
    _instrument(timers)
    try:
        model = make()
        gc.collect()
        t0 = time.perf_counter_ns()
        n = _run(model, data)
        wall = (time.perf_counter_ns() - t0) / n / 1e3
    finally:
        timers.undo()
    parts = {k: v / n / 1e3 for k, v in timers.total.items()}
    parts[GLUE] = parts.get(GLUE, 0.0) + wall - sum(parts.values())  # the loop's own, too
    return parts, wall


def rows_for(label: str, make: Callable[[], Any], data: list, reps: int) -> list[list[object]]:
    _run(make(), data[:50])  # the process warmed: compiled code loaded
    cpu = statistics.median(_cpu_us(make, data) for _ in range(reps))
    runs = [_profile(make, data) for _ in range(reps)]
    names = sorted({k for parts, _ in runs for k in parts}, key=lambda k: k == GLUE)
    med = {k: statistics.median(parts.get(k, 0.0) for parts, _ in runs) for k in names}
    wall = statistics.median(w for _, w in runs)
    order = sorted(names, key=lambda k: -med[k])
    out: list[list[object]] = []
    total = sum(med.values())
    for k in order:
        share = med[k] / total
        out.append([label, len(data), k, f"{med[k]:.1f}", f"{100 * share:.0f} %",
                    f"{share * cpu:.1f}"])  # fmt: skip
    out.append([label, len(data), "**the timed run (wall)**", f"{wall:.1f}", "100 %", ""])
    out.append([label, len(data), "**CPU time per record, no timers**", "", "", f"{cpu:.1f}"])
    for row in out:
        print(row, flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", default="300,3000", help="prefix lengths (a table each)")
    parser.add_argument("--reps", type=int, default=5, help="runs per figure (medians)")
    add_out(parser)
    args = parser.parse_args()
    from river import feature_extraction

    from streammkl.river import MKLClassifier

    start = machine()
    rows: list[list[object]] = []
    for n in map(int, args.n.split(",")):
        rows += rows_for(
            "bag of words (5,000-word Zipf)",
            lambda: feature_extraction.BagOfWords() | MKLClassifier(),
            _bag_of_words(n),
            args.reps,
        )
        rows += rows_for(
            "one-hot Agrawal", lambda: MKLClassifier(standardize=True), _one_hot_agrawal(n),
            args.reps,
        )  # fmt: skip
    body = (
        f"Measured on {start} (load average {os.getloadavg()[0]:.2f} at the end); "
        f"`predict_proba_one` + `learn_one` per record from a fresh learner, median of "
        f"{args.reps} runs; each part's exclusive wall time per record (mean over the run) "
        "and its share of their sum, then that share of the CPU time per record of the same "
        "run without timers (the parts' CPU time, apportioned: wall time under load counts "
        "the time other processes took the core, about in proportion to each part's length; "
        "the timers' own cost, ~0.2 µs a call, lands mostly in the glue).\n\n"
        + markdown(
            ["stream", "examples", "part", "wall µs per record", "share", "CPU µs (apportioned)"],
            rows,
        )
    )
    publish("sparse_profile", "Sparse rows per call, part by part", body,
            full=documented_run(parser, args), out=args.out)  # fmt: skip


if __name__ == "__main__":
    main()
