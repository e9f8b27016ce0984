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
  checks (``check_numeric``); apart, the learning call of a record whose new names its
  prediction found (``Rounds._learn_admitting``: the record's values and columns, the arrays,
  and the Python of the model's sparse call);
- the compiled round (``RoundArgs.learn_sparse``; a dense route's ``learn_bound``,
  ``learn_predict``) and the compiled decision of ``predict_proba_one``
  (``RoundArgs.decision_sparse``; ``predict_bound``, ``decision``);
- the probabilities (``Classes.proba``).

Timers read ``time.perf_counter_ns`` (~0.08 µs a read; a CPU clock's read costs ~0.6 µs, more
than some parts): the per-part figures are wall time in one thread, each the mean per record
over a run, the median over ``--reps`` runs; each part's share of their sum then apportions the
CPU time per record (``time.process_time``) of the same run without timers. Each run starts
after a full garbage collection, the process warmed by a throwaway learner (compiled code
loaded), as ``river_speed.py`` does.

Then the steady-state round's floor (``floor_note``): the bank's projection columns, the
frequencies a bag-of-words record reads, and the compiled decision on the learned documents
cold and with the record's frequencies in cache; at each ``--n``, a record's mapping to its
entries for a prediction in the stream against the same record mapped again at once
(``map_note``); and a new word's admission taken apart (``admission_note``): through the
learner's path, the compiled draw and placement, its draws alone, the first touch of the word's
row of frequencies against a rewrite, and the learner's one-off rebuilds of the bank.

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

import numpy as np

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
        (rounds.Rounds, "_learn_admitting", "map dict -> entries, a new word's learning call"),
        (_known.KnownRecord, "values", "map dict -> entries"),
        (_features.FeatureIndex, "known_vector", _known_vector_part),
        (_features.FeatureIndex, "vector", "map dict -> dense vector"),
        (rounds, "check_numeric", "checks (check_numeric)"),
        (_features, "check_numeric", "checks (check_numeric)"),
        (classifier, "check_numeric", "checks (check_numeric)"),
        (update.RoundArgs, "learn_sparse", "compiled round (learn)"),
        (update.RoundArgs, "learn_predict", "compiled round (learn)"),
        (model.OnlineMKL, "learn_bound", "compiled round (learn)"),
        (update.RoundArgs, "decision_sparse", "compiled decision (predict)"),
        (update.RoundArgs, "decision", "compiled decision (predict)"),
        (model.OnlineMKL, "predict_bound", "compiled decision (predict)"),
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


def floor_note(n: int, reps: int) -> str:
    """The steady-state sparse round's floor on the bag-of-words stream: the default bank's
    projection blocks and explicit columns at ``n`` documents, the frequencies a record reads,
    and the compiled decision on the learned documents cold (each record once) and with its
    frequencies in cache (the same record decided twice in a row): medians of ``reps``
    passes, CPU time."""
    from river import feature_extraction

    from streammkl.core import _numba as nb
    from streammkl.core.update import wide_columns
    from streammkl.river import MKLClassifier

    data = _bag_of_words(n)
    pipe = feature_extraction.BagOfWords() | MKLClassifier()
    _run(pipe, data)
    seam = pipe["MKLClassifier"].rounds()
    model, layout = seam.model, seam.model.layout
    records = [
        seam.features.known_sparse(pipe["BagOfWords"].transform_one(x), learn=False)
        for x, _ in data
    ]
    records = [r for r in records if r is not None]
    nnz = statistics.mean(int(np.count_nonzero(vals)) for _, vals in records)
    widths = np.diff(layout.ex_off)
    projection = int(sum(widths[m] for m in layout.ex_blocks
                         if layout.ex_kind[m] in (nb.MAP_RFF, nb.MAP_LANDMARK)))  # fmt: skip
    clock = time.process_time_ns
    cold, hot = [], []
    for _ in range(reps):
        t0 = clock()
        for cols, vals in records:
            model.predict_sparse(cols, vals)
        cold.append((clock() - t0) / len(records) / 1e3)
        spent = 0
        for cols, vals in records:
            model.predict_sparse(cols, vals)
            t0 = clock()
            model.predict_sparse(cols, vals)
            spent += clock() - t0
        hot.append(spent / len(records) / 1e3)
    table = layout.rff_wt
    touched = wide_columns(layout, round(nnz)) or 0
    row_kb = nnz * projection * table.itemsize / 1e3
    return (
        f"The steady-state sparse round's floor (bag of words, {n:,} documents learned, the "
        f"default bank: {projection} projection columns (random Fourier and landmark blocks, "
        f"dense whatever the record) per input, {int(layout.ex_used.sum()):,} explicit columns "
        f"in use): a record has {nnz:.1f} distinct words, so its projection is {nnz:.1f} x "
        f"{projection} = {nnz * projection:,.0f} multiply-adds (under 2 µs at four doubles per "
        f"cycle) and {projection} cosines or exponentials, but it reads {row_kb:.0f} KB of "
        f"frequencies from a table of {table.nbytes / 1e6:.1f} MB ({table.shape[0]:,} inputs' "
        f"rows, {table.dtype}), and its scores read the weights and an average at the "
        "record's columns, scattered over the vocabulary's columns: neither is in cache "
        "for the most part, and the compiled decision "
        f"(`OnlineMKL.predict_sparse`) on the learned documents costs "
        f"{statistics.median(cold):.1f} µs per record, and {statistics.median(hot):.1f} µs "
        "when the same record is decided again at once (its rows in cache; CPU time, medians "
        f"of {reps} passes). The round on the same record reuses the decision's features "
        f"(`sparse_cached`) and then touches the record's {touched:,} columns (at most) in the "
        "weights, the averages and their mirrored rows (each a row of its own). "
        "Levers that keep the numbers: memory-level parallelism (the rows four at a time, "
        "taken) and not writing the mirrored rows in the "
        "sparse round (restored at settle; not done); fewer bytes (float32 frequencies, one "
        "standard-normal row shared by the three Fourier blocks' bandwidths, fewer components "
        "for wide input) change the numbers (measured in `sparse_levers.md`: the shared "
        "normals fail the accuracy bar; float32 frequencies keep every accuracy but save "
        "~1 µs of the decision and ~2 µs per new word, not taken)."
    )


def map_note(n: int, reps: int) -> str:
    """What mapping a bag-of-words record of known words to its entries costs a prediction in
    the stream (``FeatureIndex.known_sparse``: the index's ``get`` per word, the values'
    checks, two arrays, the memo's copy of the record) against the same record mapped again at
    once (the index's memory in cache): the median per call over the records of a run of
    ``n`` documents from a fresh learner whose words were all known, and over its documents
    mapped twice in a row by its index (the second timed), medians of ``reps`` runs (wall
    time, one thread; medians, not means: a full garbage collection or another process
    taking the core lands on a few calls, and on means)."""
    from river import feature_extraction

    from streammkl.river import MKLClassifier, _features

    data = _bag_of_words(n)
    real = _features.FeatureIndex.known_sparse
    clock = time.perf_counter_ns
    spent: list[int] = []

    def timed(self: Any, x: Any, learn: bool) -> Any:
        t0 = clock()
        found = real(self, x, learn)
        took = clock() - t0
        memo = self._memo
        if not learn and memo is not None and type(memo[1]) is tuple:  # (every word known)
            spent.append(took)
        return found

    _run(feature_extraction.BagOfWords() | MKLClassifier(), data[:50])  # (code loaded)
    stream, shares = [], []
    pipe = None
    for _ in range(reps):
        pipe = None
        pipe = feature_extraction.BagOfWords() | MKLClassifier()
        spent.clear()
        _features.FeatureIndex.known_sparse = timed  # type: ignore[method-assign]
        try:
            gc.collect()
            _run(pipe, data)
        finally:
            _features.FeatureIndex.known_sparse = real  # type: ignore[method-assign]
        stream.append(statistics.median(spent) / 1e3)
        shares.append(len(spent) / len(data))
    assert pipe is not None
    features = pipe["MKLClassifier"].rounds().features
    bow = pipe["BagOfWords"]
    records = [bow.transform_one(x) for x, _ in data]
    again = []
    for _ in range(reps):
        spent.clear()
        for x in records:
            features.known_sparse(x, False)
            t0 = clock()
            features.known_sparse(x, False)
            spent.append(clock() - t0)
        again.append(statistics.median(spent) / 1e3)
    words = statistics.mean(len(x) for x in records)
    cold, warm = statistics.median(stream), statistics.median(again)
    share = statistics.median(shares)
    return (
        f"Mapping a record to its entries for a prediction ({n:,} documents, {words:.1f} "
        f"distinct words a record, {len(features):,} names known at the end; "
        "`FeatureIndex.known_sparse`: the index's `get` per word, the values' checks, two "
        "arrays, the memo's copy of the record; the learning call then reads the memo, or "
        "the new names the prediction found): "
        f"{cold:.1f} µs per record of known words in the stream ({share:.0%} of the "
        f"predictions), {warm:.1f} µs for the same record mapped again at once (every word "
        f"known by then; wall time, medians per call and of {reps} runs). The difference is "
        "memory, not instructions (the same code on records of the same words): a lookup "
        "reads the dict's "
        "slot and entry, the name's string (the record's keys are the tokenizer's own "
        "strings, not the index's: compared, not matched by identity) and then the "
        "column's int object, about four cache lines a word, which the compiled calls "
        "between two records (their frequencies and weights, ~100 KB a record) have "
        "evicted."
    )


def _median_ns(fn: Callable[[], object], reps: int) -> float:
    """Median CPU ns of ``fn()`` over ``reps`` calls."""
    clock = time.process_time_ns
    spent = []
    for _ in range(reps):
        t0 = clock()
        fn()
        spent.append(clock() - t0)
    return float(statistics.median(spent))


def admission_note(n: int, reps: int) -> str:
    """Where a new word's admission goes once ``n`` documents are learned (bag of words, the
    default bank): one word per record admitted through the learner's own path
    (``_admit``: new names, the model's declare, the layout's growth in place, the compiled
    draw and placement), the compiled call alone (``place_inputs``), its draws alone (the
    three Fourier blocks' normals, ``draw_rows`` on rows already in cache), and the first
    touch of a row of frequencies' pages against a second write of the same row (what a new
    row in fresh memory costs the system); then the learner's one-off rebuilds (the
    provisional bandwidths' rescale on the first, wide documents; the warm-up's bandwidths)
    over a run of ``n`` documents. CPU time, medians."""
    import mmap

    from river import feature_extraction

    from streammkl.core import _numba as nb
    from streammkl.core import layout as layout_mod
    from streammkl.core import model as model_mod
    from streammkl.core.kernel_base import draw_keys
    from streammkl.core.kernels import LandmarkRBF, MedianRBF
    from streammkl.river import MKLClassifier

    data = _bag_of_words(n)
    clock = time.process_time_ns
    one_off: dict[str, list[int]] = defaultdict(list)
    inner_rebuild = model_mod.OnlineMKL._rebuild

    def timed_rebuild(self: Any, *args: Any) -> None:
        t0 = clock()
        try:
            inner_rebuild(self, *args)
        finally:
            one_off["rebuild"].append(clock() - t0)

    def timed_run(fresh: bool) -> tuple[Any, list[int], float]:
        """A learner over ``data`` with its rebuilds timed: the pipeline, the rebuilds' CPU
        times and the run's CPU µs per document; ``fresh``: the layouts built lately
        forgotten first (every rebuild a real one, as on a stream no learner of this process
        has met; else the throwaway learner's layouts of the same documents are copies
        handed out again, as when ``river_speed.py`` times fresh learners on one stream)."""
        if fresh:
            layout_mod.forget_built_layouts()
        one_off.clear()
        pipe = feature_extraction.BagOfWords() | MKLClassifier()
        gc.collect()  # (a full collection owed by earlier work costs ~0.1 s: not this run's)
        model_mod.OnlineMKL._rebuild = timed_rebuild  # type: ignore[method-assign]
        try:
            t0 = clock()
            _run(pipe, data)
            per_doc = (clock() - t0) / len(data) / 1e3
        finally:
            model_mod.OnlineMKL._rebuild = inner_rebuild  # type: ignore[method-assign]
        return pipe, list(one_off["rebuild"]), per_doc

    _run(feature_extraction.BagOfWords() | MKLClassifier(), data[:50])  # (code loaded)
    replays: list[tuple[list[int], float]] = []
    freshes: list[tuple[list[int], float]] = []
    pipe = None
    for _ in range(reps):  # (one learner held at a time: the last, measured below)
        pipe = None
        pipe, rebuilt, per_doc = timed_run(False)
        replays.append((rebuilt, per_doc))
    for _ in range(reps):
        pipe = None
        pipe, rebuilt, per_doc = timed_run(True)
        freshes.append((rebuilt, per_doc))
    replay_ms = statistics.median(sum(r) for r, _ in replays) / 1e6
    fresh_ms = statistics.median(sum(r) for r, _ in freshes) / 1e6
    replay_doc = statistics.median(t for _, t in replays)
    fresh_doc = statistics.median(t for _, t in freshes)
    rebuilds = fresh_each = freshes[-1][0]
    assert pipe is not None
    seam = pipe["MKLClassifier"].rounds()
    model = seam.model
    layout = model.layout
    room = layout.capacity - layout.n_inputs - 1
    words = max(min(room, 400), 1)
    admit, place = [], []
    inner_place = layout_mod._place_inputs

    def timed_place(*args: object) -> None:
        t0 = clock()
        inner_place(*args)
        place.append(clock() - t0)

    layout_mod._place_inputs = timed_place  # type: ignore[assignment]
    try:
        for i in range(words):
            x = {f"new-word-{i}": 1.0}
            t0 = clock()
            seam._admit(x)
            admit.append(clock() - t0)
    finally:
        layout_mod._place_inputs = inner_place  # type: ignore[assignment]
    fourier = [
        k for k in model.kernels
        if isinstance(k, MedianRBF) and not isinstance(k, LandmarkRBF) and not k.implicit
    ]  # fmt: skip
    D = sum(int(k.n_components or 0) for k in fourier)
    names = [f"w{j}" for j in range(64)]
    k0, k1 = draw_keys(model.seed, "a-kernel", names)
    out = np.empty((64, max(D, 1)))
    nb.draw_rows(k0, k1, np.uint64(0), True, 1.0, 0.0, out)  # (compiled, rows in cache)
    draws = _median_ns(lambda: nb.draw_rows(k0, k1, np.uint64(0), True, 1.0, 0.0, out), reps)
    draws /= 64
    cols = layout.rff_wt.shape[1]
    rows = 2048
    fresh = np.frombuffer(mmap.mmap(-1, rows * cols * 8), dtype=np.float64).reshape(rows, cols)
    row = np.ones(cols)
    first = []
    for i in range(rows):
        t0 = clock()
        fresh[i] = row
        first.append(clock() - t0)
    again = _median_ns(lambda: fresh.__setitem__(rows // 2, row), reps * 20)
    a, p = statistics.median(admit) / 1e3, statistics.median(place) / 1e3
    touch = statistics.median(first) / 1e3
    return (
        f"A new word's admission ({n:,} documents learned, the default bank; one word per "
        f"record, {words} words, CPU time, medians): {a:.1f} µs in all through the learner "
        f"(`_admit`), of which {p:.1f} µs in the compiled draw and placement (`place_inputs`) "
        f"and {a - p:.1f} µs of Python (new names, `declare_features`, the bandwidths' check, "
        f"`Layout.extend`'s arguments). The compiled call's own work: the {D} standard "
        f"normals of the three Fourier blocks cost {draws / 1e3:.1f} µs per word (Philox and "
        f"Box-Muller, `draw_rows`, rows in cache; bound by the logarithm), and the word's "
        f"row of {cols} frequencies ({cols * 8 / 1e3:.1f} KB) costs {touch:.1f} µs written "
        f"the first time into fresh pages and {again / 1e3:.2f} µs written again (this VM "
        "charges each 4 KB page's first touch: a learner's memory is that price per byte "
        "once, a doubling's copy into fresh pages once more). One-offs per learner over the "
        f"{n:,} documents: {len(rebuilds)} rebuilds of the bank (the provisional bandwidths "
        "rescaled while the first documents are wide, then the warm-up's medians) took "
        f"{fresh_ms:.1f} ms, {fresh_ms / n * 1e3:.1f} µs per document, on documents no "
        f"learner of the process had met (each, ms: "
        f"{', '.join(f'{r / 1e6:.1f}' for r in fresh_each)}; the run {fresh_doc:.1f} µs per "
        f"document), and {replay_ms:.1f} ms, {replay_ms / n * 1e3:.1f} µs per document, on "
        "the same documents again, as the tables above and `river_speed.py` time fresh "
        "learners (the layouts built lately are kept, `build_layout`: the throwaway "
        f"learner's are handed out again as copies; the run {replay_doc:.1f} µs per "
        "document). Medians of the runs."
    )


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
    floor = floor_note(max(map(int, args.n.split(","))), args.reps)
    print(floor, flush=True)
    maps = [map_note(n, args.reps) for n in map(int, args.n.split(","))]
    for note in maps:
        print(note, flush=True)
    admissions = [admission_note(n, args.reps) for n in map(int, args.n.split(","))]
    for note in admissions:
        print(note, flush=True)
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
        + "\n\n"
        + floor
        + "".join(f"\n\n{note}" for note in maps)
        + "".join(f"\n\n{note}" for note in admissions)
    )
    publish("sparse_profile", "Sparse rows per call, part by part", body,
            full=documented_run(parser, args), out=args.out)  # fmt: skip


if __name__ == "__main__":
    main()
