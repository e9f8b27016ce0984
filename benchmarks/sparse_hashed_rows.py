"""Shared frequency rows for inputs beyond the first R (issue 25, part 1): a research prototype,
measured before any engineering.

The design: the first ``R`` inputs keep their own rows of frequencies (the random Fourier
blocks' normals and the landmark block's values), as today; every later input ``j`` reads the
row ``h(j)`` in ``[0, R)`` times a sign ``s(j) = +-1`` (both from a stable hash of the input's
name and the seed: feature hashing, Weinberger et al. 2009, inside the projection). The
frequency table then never grows past ``R`` rows, and a new input draws nothing.

The prototype (this script, nothing in the library): ``Layout.extend`` and
``Layout.set_landmarks`` are wrapped so that every input past the first ``R`` gets, as its own
row, a copy of row ``h(j)`` times ``s(j)`` (a copy gives exactly the numbers of the shared-row
design). Inputs past ``R`` skip the draw of their rows (``place_inputs`` is handed a placer
whose Fourier and landmark blocks place nothing; the copy is made in numpy). Its per-call time
is not the design's: the copy in Python (a hash, a gather, the bookkeeping) costs more than the
draw it skips, and every input still writes a row into a growing table; the design's own
admission and projection are measured apart (4 and 5 below).

Measured:

1. prequential accuracy, seeds ``--seeds`` (the learner's seed and the bag-of-words stream's;
   ``--stream 7``: river_speed's one stream for every learner seed), base and each ``R`` of
   ``--rows``, on the bag-of-words stream of ``river_speed.py`` (a 5,000-word Zipf vocabulary)
   over the first 300, 3,000 and ``--docs`` documents (prefixes of one run), against
   ``BagOfWords() | LogisticRegression()`` on the same documents and against a control: the
   base under learner seed + 1000 (every row drawn afresh: how far a new draw alone moves the
   accuracy). ``--own-landmarks``: only the random Fourier blocks share rows (the landmark
   block keeps a row per input);
2. bit for bit: SHA-256 of every ``predict_proba_one`` on Bananas, Phishing and the one-hot
   Agrawal stream (40 inputs), base against the smallest ``R``;
3. CPU time per document (``predict_proba_one`` + ``learn_one``), base and the prototype at
   ``--speed-rows`` alternating in one process, fresh learners, medians of ``--reps``;
4. a new word's admission (``_admit``, ``place_inputs``) today and in the design (the Fourier
   and landmark blocks place nothing), two copies of one learner alternating word by word;
5. a micro-benchmark of the compiled sparse projection: today's rows of a record's inputs from
   a table of one row per input (``wide.project_rows``; the 3,000 documents' inputs rounded up
   to a power of two: 4,096 rows, ~26 MB, about what the learner has written by then into its
   39 MB table of 6,016 rows) against the same rows read through ``row_of[j]``, ``sign[j]``
   from an ``R``-row table, each document once per pass (CPU time, process_time_ns: the box is
   shared; medians of passes, the cases interleaved pass by pass).

Run: ``python benchmarks/sparse_hashed_rows.py [--seeds 0,1,2,3,4]``; writes
``benchmarks/results/sparse_hashed_rows.md`` (the full, documented run only; the verdict and
the further runs' tables above its generated part are written by hand from the commands they
name).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import hashlib
import os
import pickle
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

from simulators.zipf_documents import zipf_documents
from streammkl.core import _numba as nb
from streammkl.core import layout as layout_module
from streammkl.core._jit import JIT
from streammkl.core._numba import wide

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import add_out, documented_run, machine, markdown, publish
from river_speed import VOCABULARY, _one_hot_agrawal, dense_stream

#: The library's compile options (fastmath's ``contract``: FMAs), not cached: a benchmark's
#: own kernels
_BENCH_JIT = {**JIT, "cache": False}

#: The rows kept per block (None: today's layout, a row per input).
_ROWS: int | None = None
_ORIGINAL_EXTEND = layout_module.Layout.extend
_ORIGINAL_SET_LANDMARKS = layout_module.Layout.set_landmarks
_ORIGINAL_PLACER = layout_module._placer
#: Whether the landmark block's columns are shared too (else only the random Fourier blocks'
#: rows are: the landmark block keeps a row per input, as today).
_SHARE_LANDMARKS = True
_SKIP_DRAW = False  # set while ``extend`` lays out inputs that are all past the first R
_QUIET_PLACERS: dict[int, Any] = {}
_ROW_FOURIER = (nb.PLACE_RFF, nb.PLACE_ZERO)
_FOURIER_MAPS = (nb.MAP_RFF, nb.MAP_LANDMARK, nb.MAP_BINNING)


def row_and_sign(name: str, seed: int, rows: int) -> tuple[int, float]:
    """The shared row ``h`` in ``[0, rows)`` and the sign of input ``name`` under ``seed``: a
    stable hash (BLAKE2b, 8 bytes) of the seed and the name, never Python's salted ``hash``."""
    v = int.from_bytes(hashlib.blake2b(f"{seed}\x1f{name}".encode(), digest_size=8).digest())
    return v % rows, (1.0 if v >> 63 else -1.0)


def _quiet_placer(kernels: Any, seed: int, draws: int) -> Any:
    placer = _ORIGINAL_PLACER(kernels, seed, draws)
    if not _SKIP_DRAW or placer is None:
        return placer
    quiet = _QUIET_PLACERS.get(id(placer))
    if quiet is None or quiet[0] is not placer:
        skipped = _ROW_FOURIER if _SHARE_LANDMARKS else (nb.PLACE_RFF,)
        kinds = np.where(np.isin(placer.kinds, skipped), nb.PLACE_NONE, placer.kinds)
        quiet = (placer, dataclasses.replace(placer, kinds=kinds))
        _QUIET_PLACERS[id(placer)] = quiet
    return quiet[1]


def _copy_rows(layout: Any, keys: Any, seed: int, lo: int, hi: int, cols: slice) -> None:
    """Rows ``[lo, hi)`` (all past the first R) of the frequencies at ``cols``: their shared
    row times their sign (only the random Fourier blocks' columns unless
    ``_SHARE_LANDMARKS``)."""
    rows = _ROWS
    assert rows is not None and lo >= rows
    pairs = [row_and_sign(f"{keys[j]}", seed, rows) for j in range(lo, hi)]
    h = np.fromiter((p[0] for p in pairs), np.int64, len(pairs))
    s = np.fromiter((p[1] for p in pairs), np.float64, len(pairs))
    if _SHARE_LANDMARKS:
        layout.rff_wt[lo:hi, cols] = s[:, None] * layout.rff_wt[h, cols]
        return
    for m in np.flatnonzero(layout.ex_kind == nb.MAP_RFF).tolist():
        a, e = int(layout.ex_off[m]), int(layout.ex_off[m + 1])
        r0 = int(layout.phi_src[0, a])
        block = slice(r0, r0 + e - a)
        layout.rff_wt[lo:hi, block] = s[:, None] * layout.rff_wt[h, block]


def _extend(self: Any, kernels: Any, keys: Any, seed: int, index: Any = None,
            blocks: Any = None) -> None:  # fmt: skip
    global _SKIP_DRAW
    rows = _ROWS
    d_old, d = self.n_inputs, len(keys)
    if rows is None or d <= rows or d <= d_old:
        _ORIGINAL_EXTEND(self, kernels, keys, seed, index, blocks)
        return
    skip = d_old >= rows and self.draws == layout_module.DRAWS
    before = self.blk_inputs.copy()
    _SKIP_DRAW = skip
    try:
        _ORIGINAL_EXTEND(self, kernels, keys, seed, index, blocks)
    finally:
        _SKIP_DRAW = False
    if skip:  # the skipped blocks' bookkeeping, as ``place_inputs`` does it
        new = np.arange(d_old, d)
        for m in range(len(kernels)):
            laid = blocks is None or blocks[m]
            fourier = self.ex_kind[m] in _FOURIER_MAPS and kernels[m].features is None
            if laid and fourier and self.blk_inputs[m] == before[m]:
                self.in_pos[m, new] = new
                self.blk_inputs[m] += new.size
    _copy_rows(self, keys, seed, max(rows, d_old), d, slice(None))


def _set_landmarks(self: Any, m: int, kernel: Any, keys: Any, seed: int,
                   changed: int | None = None) -> None:  # fmt: skip
    _ORIGINAL_SET_LANDMARKS(self, m, kernel, keys, seed, changed)
    rows = _ROWS
    if rows is None or self.n_inputs <= rows or not _SHARE_LANDMARKS:
        return
    a, e = int(self.ex_off[m]), int(self.ex_off[m + 1])
    r0 = int(self.phi_src[0, a])
    cols = slice(r0 + changed, r0 + changed + 1) if changed is not None else slice(r0, r0 + e - a)
    _copy_rows(self, keys, seed, rows, self.n_inputs, cols)


layout_module.Layout.extend = _extend  # type: ignore[method-assign]
layout_module.Layout.set_landmarks = _set_landmarks  # type: ignore[method-assign]
layout_module._placer = _quiet_placer


@contextmanager
def shared_rows(rows: int | None) -> Iterator[None]:
    """Learners made inside lay out inputs past the first ``rows`` on shared rows (None:
    today's layout). The layouts kept by ``build_layout`` are dropped on the way in and out
    (they are keyed by the bank and the names, not by this prototype's rows)."""
    global _ROWS
    layout_module._BUILT.clear()
    _ROWS = rows
    try:
        yield
    finally:
        _ROWS = None
        layout_module._BUILT.clear()


#: The bag-of-words stream's seed (None: each learner seed's own stream).
_STREAM_SEED: int | None = None


def _bag_of_words(n: int, seed: int) -> list[tuple[str, bool]]:
    """``river_speed``'s bag-of-words stream (its seed: 7) under ``seed`` (or ``--stream``)."""
    seed = seed if _STREAM_SEED is None else _STREAM_SEED
    return zipf_documents(n, vocabulary=VOCABULARY, words=(10, 30), noise=1.0, seed=seed)


def _prequential(model: Any, data: list, marks: tuple[int, ...]) -> dict[int, float]:
    """Prequential accuracy over the first ``n`` examples for each ``n`` of ``marks``."""
    hits = 0
    out = {}
    for t, (x, y) in enumerate(data, 1):
        p = model.predict_proba_one(x)
        hits += bool(p) and max(p, key=p.get) == y
        model.learn_one(x, y)
        if t in marks:
            out[t] = hits / t
    return out


def _mkl(seed: int) -> Any:
    from river import feature_extraction

    from streammkl.river import MKLClassifier

    return feature_extraction.BagOfWords() | MKLClassifier(seed=seed)


def _lr() -> Any:
    from river import feature_extraction, linear_model

    return feature_extraction.BagOfWords() | linear_model.LogisticRegression()


#: The control: today's layout under another learner seed (its rows drawn afresh), to gauge
#: how far any new draw of the rows moves the accuracy.
RESEEDED = "reseeded"


def _label(config: int | str | None) -> str:
    if config is None:
        return "base (a row per input)"
    if config == RESEEDED:
        return "control: base, learner seed + 1000"
    if config == "LR":
        return "LogisticRegression"
    return f"R = {config}" + ("" if _SHARE_LANDMARKS else ", Fourier rows only")


def accuracy(seeds: list[int], configs: list, docs: int) -> dict:
    """``acc[(config, n)][seed]`` in %, config ``"LR"`` for logistic regression."""
    marks = (300, 3000, docs)
    acc: dict = {}
    for seed in seeds:
        data = _bag_of_words(docs, seed)
        for n, a in _prequential(_lr(), data, marks).items():
            acc.setdefault(("LR", n), {})[seed] = 100 * a
        for rows in configs:
            t0 = time.process_time()
            with shared_rows(None if rows == RESEEDED else rows):
                got = _prequential(_mkl(seed + 1000 if rows == RESEEDED else seed), data, marks)
            for n, a in got.items():
                acc.setdefault((rows, n), {})[seed] = 100 * a
            print(f"seed {seed} rows {rows}: "
                  + ", ".join(f"{n}: {100 * a:.2f}" for n, a in got.items())
                  + f" ({time.process_time() - t0:.1f} s)", flush=True)  # fmt: skip
    return acc


def _prediction_digest(make: Callable[[], Any], data: list) -> str:
    model = make()
    h = hashlib.sha256()
    for x, y in data:
        h.update(pickle.dumps(sorted(model.predict_proba_one(x).items(), key=repr)))
        model.learn_one(x, y)
    return h.hexdigest()[:16]


def identity(rows: int) -> list[list[object]]:
    """Prediction digests, base against shared rows past the first ``rows`` inputs."""
    from streammkl.river import MKLClassifier

    out = []
    streams = [("Bananas", dense_stream("Bananas")[:2000]), ("Phishing", dense_stream("Phishing")),
               ("one-hot Agrawal (40 inputs)", _one_hot_agrawal(3000))]  # fmt: skip
    for label, data in streams:
        for standardize in (False, True):

            def make(standardize: bool = standardize) -> Any:
                return MKLClassifier(standardize=standardize, seed=0)

            base = _prediction_digest(make, data)
            with shared_rows(rows):
                shared = _prediction_digest(make, data)
            out.append([label, len(data), f"standardize={standardize}", base, shared,
                        "equal" if base == shared else "DIFFERENT"])  # fmt: skip
            print(out[-1], flush=True)
    return out


def _cpu_per_call(model: Any, data: list) -> float:
    gc.collect()
    t0 = time.process_time_ns()
    for x, y in data:
        model.predict_proba_one(x)
        model.learn_one(x, y)
    return (time.process_time_ns() - t0) / len(data) / 1e3


def speed(rows: int, ns: list[int], reps: int, seed: int) -> list[list[object]]:
    """CPU µs per document, fresh learners from the first document, base and shared rows
    alternating (one pair per repetition), LR in the same loop; then the last learners again
    over the same documents (every input known)."""
    out = []
    for n in ns:
        data = _bag_of_words(n, seed)
        _prequential(_mkl(seed), data[:50], ())  # compiled code loaded
        times: dict[str, list[float]] = {"LR": [], "base": [], "shared": []}
        again: dict[str, float] = {}
        for _ in range(reps):
            times["LR"].append(_cpu_per_call(_lr(), data))
            for label, r in (("base", None), ("shared", rows)):
                with shared_rows(r):
                    model = _mkl(seed)
                    times[label].append(_cpu_per_call(model, data))
                    again[label] = _cpu_per_call(model, data)
        lr = statistics.median(times["LR"])
        b = statistics.median(times["base"])
        s = statistics.median(times["shared"])
        out.append([n, f"{lr:.1f}", f"{b:.1f}", f"{lr / b:.3f}x", f"{s:.1f}", f"{lr / s:.3f}x",
                    f"{100 * (b - s) / b:+.0f} %", f"{again['base']:.1f}",
                    f"{again['shared']:.1f}"])  # fmt: skip
        print(out[-1], "runs:", {k: [round(v, 1) for v in vs] for k, vs in times.items()},
              flush=True)  # fmt: skip
    return out


def _hashed_rows(phi, ua, un, table, r0, x, nz, nnz, row_of, sign):
    """``wide.project_rows`` with input ``nz[q]``'s row read as ``sign[nz[q]]`` times row
    ``row_of[nz[q]]`` of an R-row ``table`` (four rows per sweep, as there)."""
    q = 0
    while q + 4 <= nnz:
        i0, i1, i2, i3 = nz[q], nz[q + 1], nz[q + 2], nz[q + 3]
        u0, u1, u2, u3 = row_of[i0], row_of[i1], row_of[i2], row_of[i3]
        x0 = x[i0] * sign[i0]
        x1 = x[i1] * sign[i1]
        x2 = x[i2] * sign[i2]
        x3 = x[i3] * sign[i3]
        for j in range(un):
            c = r0 + j
            acc = phi[ua + j]
            acc += table[u0, c] * x0
            acc += table[u1, c] * x1
            acc += table[u2, c] * x2
            acc += table[u3, c] * x3
            phi[ua + j] = acc
        q += 4
    while q < nnz:
        i = nz[q]
        u = row_of[i]
        xi = x[i] * sign[i]
        for j in range(un):
            phi[ua + j] += table[u, r0 + j] * xi
        q += 1


hashed_rows = njit(**_BENCH_JIT)(_hashed_rows)


def _sweep_own(phi, table, x, nz, starts, blocks):
    """Every record's projection, block by block (``blocks[b]``: first column, width), as the
    sparse round's ``wide_features`` makes it: the offsets, then the rows."""
    for k in range(starts.shape[0] - 1):
        lo, hi = starts[k], starts[k + 1]
        for b in range(blocks.shape[0]):
            r0, un = blocks[b, 0], blocks[b, 1]
            for j in range(un):
                phi[r0 + j] = 0.5
            wide.project_rows(phi, r0, un, table, r0, x, nz[lo:hi], hi - lo)


def _sweep_hashed(phi, table, x, nz, starts, blocks, row_of, sign):
    """:func:`_sweep_own` through the shared rows."""
    for k in range(starts.shape[0] - 1):
        lo, hi = starts[k], starts[k + 1]
        for b in range(blocks.shape[0]):
            r0, un = blocks[b, 0], blocks[b, 1]
            for j in range(un):
                phi[r0 + j] = 0.5
            hashed_rows(phi, r0, un, table, r0, x, nz[lo:hi], hi - lo, row_of, sign)


sweep_own = njit(**_BENCH_JIT)(_sweep_own)
sweep_hashed = njit(**_BENCH_JIT)(_sweep_hashed)


def projection(n: int, rows_list: list[int], passes: int, seed: int) -> list[list[object]]:
    """The compiled projection of ``n`` documents, each once per pass: CPU ns per document."""
    from river import feature_extraction

    bow = feature_extraction.BagOfWords()
    index: dict[str, int] = {}
    records = []
    for text, _ in _bag_of_words(n, seed):
        counts = bow.transform_one(text)
        for w in counts:
            index.setdefault(w, len(index))
        records.append(sorted((index[w], float(c)) for w, c in counts.items()))
    d = len(index)
    capacity = 1 << (d - 1).bit_length()  # (about the rows the learner has written)
    width = 818  # three 256-component Fourier blocks and 50 landmarks
    rng = np.random.default_rng(0)
    own = rng.standard_normal((capacity, width))
    nz = np.array([i for r in records for i, _ in r], dtype=np.int64)
    starts = np.cumsum([0] + [len(r) for r in records]).astype(np.int64)
    # the record's values: each record's own entries written before its pass would cost the
    # same in both; one array of every input's value (the same for both) stands in
    x = np.ones(capacity)
    phi = np.zeros(width)
    blocks = np.array([[0, 256], [256, 256], [512, 256], [768, 50]], dtype=np.int64)
    cases: list[tuple[str, Callable[[], None]]] = [
        (f"a row per input ({capacity} rows, {own.nbytes / 2**20:.1f} MB)",
         lambda: sweep_own(phi, own, x, nz, starts, blocks)),
    ]  # fmt: skip
    for rows in rows_list:
        table = np.ascontiguousarray(own[:rows])
        row_of = np.arange(capacity, dtype=np.int64)
        sign = np.ones(capacity)
        names = sorted(index, key=index.__getitem__)
        for j in range(rows, d):
            row_of[j], sign[j] = row_and_sign(names[j], seed, rows)

        def run(t: np.ndarray = table, r: np.ndarray = row_of, s: np.ndarray = sign) -> None:
            sweep_hashed(phi, t, x, nz, starts, blocks, r, s)

        cases.append((f"shared rows past R = {rows} ({table.nbytes / 2**20:.2f} MB)", run))
    for _, sweep in cases:
        sweep()  # compiled
    per: dict[str, list[float]] = {label: [] for label, _ in cases}
    for _ in range(passes):
        for label, sweep in cases:
            t0 = time.process_time_ns()
            sweep()
            per[label].append((time.process_time_ns() - t0) / n)
    nnz = starts[-1] / n
    out = []
    base = statistics.median(per[cases[0][0]])
    for label, _ in cases:
        med = statistics.median(per[label])
        out.append([label, f"{nnz:.1f}", f"{med / 1e3:.2f}", f"{base / med:.2f}x",
                    f"{min(per[label]) / 1e3:.2f}", f"{max(per[label]) / 1e3:.2f}"])  # fmt: skip
        print(out[-1], flush=True)
    return out


def admission(n: int, words: int) -> list[list[object]]:
    """A new word's admission once ``n`` documents are learned (river_speed's stream, seed 7):
    the learner's own path (``_admit``) and its compiled call (``place_inputs``), CPU µs per
    word, medians over ``words`` words, one per record, today's against the design's (the
    random Fourier and landmark blocks place nothing: no draw, no row; two copies of one
    learner, word by word alternately)."""
    import copy

    from streammkl.river import MKLClassifier

    global _SKIP_DRAW
    data = zipf_documents(n, vocabulary=VOCABULARY, words=(10, 30), noise=1.0, seed=7)
    from river import feature_extraction

    pipe = feature_extraction.BagOfWords() | MKLClassifier()
    _prequential(pipe, data, ())
    seams = {"today": pipe["MKLClassifier"].rounds(),
             "design": copy.deepcopy(pipe)["MKLClassifier"].rounds()}  # fmt: skip
    room = min(seam.model.layout.capacity - seam.model.layout.n_inputs for seam in seams.values())
    words = max(min(words, room - 1), 1)
    clock = time.process_time_ns
    inner_place = layout_module._place_inputs
    place: list[int] = []

    def timed_place(*args: object) -> None:
        t0 = clock()
        inner_place(*args)
        place.append(clock() - t0)

    admit: dict[str, list[int]] = {k: [] for k in seams}
    placed: dict[str, list[int]] = {k: [] for k in seams}
    layout_module._place_inputs = timed_place
    try:
        for i in range(words):
            for label, seam in seams.items():
                place.clear()
                _SKIP_DRAW = label == "design"
                t0 = clock()
                seam._admit({f"new-word-{i}": 1.0})
                admit[label].append(clock() - t0)
                _SKIP_DRAW = False
                placed[label].append(sum(place))
    finally:
        layout_module._place_inputs = inner_place
        _SKIP_DRAW = False
    out = []
    for label in seams:
        a = statistics.median(admit[label]) / 1e3
        p = statistics.median(placed[label]) / 1e3
        out.append([f"{n:,}", label, words, f"{a:.1f}", f"{p:.1f}", f"{a - p:.1f}"])
        print(out[-1], flush=True)
    return out


def _mean_sd(values: list[float]) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else float("nan")
    return f"{statistics.mean(values):.2f} ± {sd:.2f}"


def accuracy_tables(acc: dict, configs: list, seeds: list[int],
                    docs: int) -> tuple[str, str, list[str]]:  # fmt: skip
    """The mean ± sd table, the per-seed table and the verdict lines."""
    rows = []
    for n in (300, 3000, docs):
        lr = [acc[("LR", n)][s] for s in seeds]
        base = [acc[(None, n)][s] for s in seeds]
        for config in configs:
            got = [acc[(config, n)][s] for s in seeds]
            diff = [g - b for g, b in zip(got, base, strict=True)]
            rows.append([f"{n:,}", _label(config),
                         _mean_sd(got), f"{max(got) - min(got):.2f}",
                         "" if config is None else f"{statistics.mean(diff):+.2f}",
                         "" if config is None else _mean_sd(diff),
                         f"{statistics.mean(got) - statistics.mean(lr):+.2f}"])  # fmt: skip
        rows.append([f"{n:,}", "LogisticRegression", _mean_sd(lr), f"{max(lr) - min(lr):.2f}",
                     "", "", ""])  # fmt: skip
    table = markdown(["documents", "learner", "accuracy % (mean ± sd)", "seed spread",
                      "Δ vs base", "paired Δ (mean ± sd)", "Δ vs LR"], rows)  # fmt: skip
    seed_rows = []
    for n in (300, 3000, docs):
        for config in [*configs, "LR"]:
            seed_rows.append(
                [f"{n:,}", _label(config), *(f"{acc[(config, n)][s]:.2f}" for s in seeds)]
            )
    per_seed = markdown(["documents", "learner", *(f"seed {s}" for s in seeds)], seed_rows)
    verdict = []
    lr3 = statistics.mean(acc[("LR", 3000)][s] for s in seeds)
    base3 = statistics.mean(acc[(None, 3000)][s] for s in seeds)
    for config in configs:
        if config is None:
            continue
        m3 = statistics.mean(acc[(config, 3000)][s] for s in seeds)
        ok = m3 - base3 >= -0.1 and m3 >= lr3
        verdict.append(f"{_label(config)}: {m3:.2f} % at 3,000 documents, "
                       f"{m3 - base3:+.2f} point vs base ({base3:.2f}), "
                       f"{m3 - lr3:+.2f} vs LR ({lr3:.2f}): "
                       + ("PASSES" if ok else "FAILS"))  # fmt: skip
    return table, per_seed, verdict


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2,3,4", help="learner and stream seeds")
    parser.add_argument("--rows", default="64,256,1024", help="the R values (rows kept)")
    parser.add_argument("--docs", type=int, default=10_000, help="the longest prefix")
    parser.add_argument("--speed-rows", type=int, default=256, help="R of the speed rows")
    parser.add_argument("--speed-n", default="300,3000", help="prefixes timed")
    parser.add_argument("--reps", type=int, default=5, help="timed pairs per prefix")
    parser.add_argument("--passes", type=int, default=7, help="passes of the projection")
    parser.add_argument(
        "--stream",
        type=int,
        default=None,
        help="one stream seed for every learner seed (river_speed's: 7)",
    )
    parser.add_argument(
        "--own-landmarks",
        action="store_true",
        help="share only the random Fourier rows (the landmark block keeps a row per input)",
    )
    parser.add_argument(
        "--skip", default="", help="parts to skip: accuracy,identity,speed,admission,proj"
    )
    add_out(parser)
    args = parser.parse_args()
    global _STREAM_SEED, _SHARE_LANDMARKS
    _STREAM_SEED = args.stream
    _SHARE_LANDMARKS = not args.own_landmarks
    seeds = [int(s) for s in args.seeds.split(",")]
    rows_list = [int(r) for r in args.rows.split(",")]
    skip = set(args.skip.split(",")) - {""}
    configs: list[int | str | None] = [None, RESEEDED, *rows_list]
    start = machine()
    parts = [f"Measured on {start}."]
    if "accuracy" not in skip:
        acc = accuracy(seeds, configs, args.docs)
        table, per_seed, verdict = accuracy_tables(acc, configs, seeds, args.docs)
        parts += ["## Accuracy", table, "Per seed:", per_seed, "Verdict lines (decision rule: "
                  "no loss > 0.1 point at 3,000 documents and accuracy >= LR's):",
                  "\n".join(f"- {v}" for v in verdict)]  # fmt: skip
    if "identity" not in skip:
        ident = identity(min(rows_list))
        parts += [f"## Streams with at most R inputs (R = {min(rows_list)})",
                  markdown(["stream", "examples", "learner", "base digest", "shared digest", ""],
                           ident)]  # fmt: skip
    if "speed" not in skip:
        sp = speed(args.speed_rows, [int(n) for n in args.speed_n.split(",")], args.reps, 0)
        parts += [f"## CPU time per document (R = {args.speed_rows}, prototype)",
                  markdown(["documents", "LR µs", "base µs", "base ratio", "prototype µs",
                            "prototype ratio", "Δ", "again: base µs", "again: prototype µs"],
                           sp)]  # fmt: skip
    if "admission" not in skip:
        adm = [row for n in (300, 3000) for row in admission(n, 400)]
        parts += [
            "## A new word's admission, today's and the design's (no draw, no row)",
            markdown(["documents", "layout", "words", "`_admit` µs", "`place_inputs` µs",
                      "Python µs"], adm),
        ]  # fmt: skip
    if "proj" not in skip:
        pr = projection(3000, rows_list, args.passes, 0)
        parts += ["## The compiled sparse projection (3,000 documents, 818 columns)",
                  markdown(["table", "non-zeros per document", "µs per document (median)",
                            "speed-up", "min", "max"], pr)]  # fmt: skip
    parts.append(f"Load average {os.getloadavg()[0]:.2f} at the end.")
    body = "\n\n".join(parts)
    title = "Shared frequency rows past the first R inputs (issue 25.1, prototype)"
    publish("sparse_hashed_rows", title, body, documented_run(parser, args), args.out)  # fmt: skip


if __name__ == "__main__":
    main()
