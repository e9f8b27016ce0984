"""Dependency parsing with multiple kernels (SPOM, Martins et al. 2011, §4.2) on a real treebank.

Google's Turkish Web Treebank (PyPI ``turkish-treebanks``, Apache-2.0), the package's own split
(per section file, sentence i is train if i % 10 < 8, dev if 8, test if 9), gold POS, lemmas and
morphological features as input for every parser. Rows:

- **MKL over templates**: ``DependencyParser`` with sparse MKL (``SquaredGroupLasso``), one group
  per feature template (``DEFAULT_TEMPLATES``, hashed sparse blocks);
- **plain linear**: the same parser with ``L2`` (one group: every template weighs the same);
- **UDPipe 1**: its parser (Parsito) trained on the same split with the same gold columns.

For the two streammkl rows, lambda and the number of epochs are chosen on dev (UAS without
punctuation), with the averaged iterate; the test split is scored at the chosen epoch. Then the
paper's pruning figure: plain models retrained on the top-k templates ranked by MKL's beta and by
the block norms of the plain model. Writes ``benchmarks/results/parsing.md`` (+ ``.json``, and
``parsing_pruning.png``). Run from the repository root::

    .venv/bin/python benchmarks/parsing.py            # the full run (about an hour on 2 cores)
    .venv/bin/python benchmarks/parsing.py --quick    # a few minutes: a smoke run, not a result
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import _udpipe
from _table import add_out, documented_run, machine, markdown, publish

from streammkl.core import regularizers
from streammkl.structured import DEFAULT_TEMPLATES, DependencyParser
from streammkl.structured.conll import (
    attachment_scores,
    gold_heads,
    turkish_treebank,
)
from streammkl.structured.trees import is_projective

SELECT = "no_punct"  # dev UAS that picks lambda and the epoch
COLUMNS = {"all": "UAS", "no_punct": "−punct", "no_ig": "−ig", "no_ig_punct": "−ig −punct"}
UDPIPE_SYSTEMS = {  # Parsito's transition systems: projective (its default) and swap
    "projective": "transition_system=projective;transition_oracle=dynamic",
    "swap": "transition_system=swap;transition_oracle=static_lazy",  # non-projective
}


def load() -> dict[str, Any]:
    data = {split: turkish_treebank(split) for split in ("train", "dev", "test")}
    data["heads"] = [gold_heads(s) for s in data["train"]]
    return data


def train_run(name: str, templates, reg, data, epochs: int, record_beta: bool = False) -> dict:
    """Train with the averaged iterate; score dev and test after every epoch (dev selects)."""
    model = DependencyParser(templates=templates, regularizer=reg, average=True)
    rng = np.random.default_rng(0)
    train, heads = data["train"], data["heads"]
    run: dict[str, Any] = {"name": name, "epochs": [], "beta": [], "learn_s": 0.0}
    best = -1.0
    for epoch in range(1, epochs + 1):
        order = rng.permutation(len(train))
        start = time.perf_counter()
        for i in order:
            model.learn_one(train[i], heads[i])
        run["learn_s"] += time.perf_counter() - start
        dev = attachment_scores(data["dev"], model.predict_many(data["dev"]))
        start = time.perf_counter()
        predicted = model.predict_many(data["test"])
        decode_s = time.perf_counter() - start
        test = attachment_scores(data["test"], predicted)
        run["epochs"].append({"epoch": epoch, "dev": dev, "test": test})
        if record_beta:
            run["beta"].append(model.kernel_weights)
        if dev[SELECT] > best:
            best = dev[SELECT]
            run.update(best_epoch=epoch, dev=dev, test=test, decode_sps=len(predicted) / decode_s,
                       nonzero=model.n_nonzero, active=len(model.active_templates),
                       beta=run["beta"], norms=model.block_norms,
                       weights=model.kernel_weights)  # fmt: skip
        print(f"  {name} epoch {epoch}: dev {dev[SELECT]:.2f} test {test[SELECT]:.2f} "
              f"({len(train) * epoch / run['learn_s']:.0f} sentences/s)", flush=True)  # fmt: skip
    run["learn_sps"] = len(train) * epochs / run["learn_s"]
    run["n_features"] = model.n_features
    run["collisions"] = model.collisions(train) if templates is DEFAULT_TEMPLATES else None
    return run


def warm_up(data) -> None:
    """Load every compiled loop from numba's cache (about 2 s in a fresh process) before timing."""
    for average in (False, True):
        model = DependencyParser(templates=("h.upos+b.upos+m.upos", "dir+dist"), average=average)
        for sentence, heads in zip(data["train"][:3], data["heads"][:3], strict=True):
            model.learn_predict_one(sentence, heads)
            model.predict_one(sentence)


def select(name: str, kind: str, lams: list[float], data, epochs: int) -> tuple[dict, list]:
    runs = []
    for lam in lams:
        reg = regularizers.SquaredGroupLasso(lam) if kind == "mkl" else regularizers.L2(lam)
        run = train_run(f"{name} λ={lam:g}", DEFAULT_TEMPLATES, reg, data, epochs, kind == "mkl")
        run["lam"] = lam
        runs.append(run)
    best = max(runs, key=lambda r: r["dev"][SELECT])
    return best, runs


def udpipe_row(data, systems: list[str]) -> tuple[dict, list]:
    """UDPipe 1 with each transition system; the one with the best dev UAS is the peer."""
    rows = []
    for system in systems:
        options = UDPIPE_SYSTEMS[system]
        print(f"  UDPipe 1 ({system}) training...", flush=True)
        model, seconds = _udpipe.train(data["train"], data["dev"], options)
        dev_heads, _ = _udpipe.parse(model, data["dev"])
        test_heads, parse_s = _udpipe.parse(model, data["test"])
        rows.append({
            "system": system, "train_s": seconds,
            "dev": attachment_scores(data["dev"], dev_heads),
            "test": attachment_scores(data["test"], test_heads),
            "decode_sps": len(test_heads) / parse_s,
        })  # fmt: skip
        print(f"  UDPipe 1 ({system}): {seconds:.0f} s, dev {rows[-1]['dev'][SELECT]:.2f}")
    return max(rows, key=lambda r: r["dev"][SELECT]), rows


def pruning(mkl: dict, sparse: dict, plain: dict, data, epochs: int, fractions) -> list[dict]:
    """Plain models (the chosen L2) on the top-k templates ranked by the chosen MKL's beta, by
    the beta of the sparsest MKL of the grid, and by the block norms of the plain model."""
    rankings = {
        "beta": sorted(DEFAULT_TEMPLATES, key=lambda t: -mkl["weights"][t]),
        "beta_sparse": sorted(DEFAULT_TEMPLATES, key=lambda t: -sparse["weights"][t]),
        "norm": sorted(DEFAULT_TEMPLATES, key=lambda t: -plain["norms"][t]),
    }
    out = []
    for frac in fractions:
        k = max(1, math.ceil(frac * len(DEFAULT_TEMPLATES)))
        row: dict[str, Any] = {"fraction": frac, "k": k}
        for label, ranking in rankings.items():
            if k == len(DEFAULT_TEMPLATES):
                row[label] = plain["test"]
                continue
            run = train_run(f"top {k} by {label}", tuple(ranking[:k]),
                            regularizers.L2(plain["lam"]), data, epochs)  # fmt: skip
            row[label] = run["test"]
        out.append(row)
    return out


def fmt(x: float) -> str:
    return f"{x:.2f}"


def target(ok: bool, text: str) -> str:
    return f"- {'MET' if ok else 'MISSED'}: {text}"


def report(data, mkl, plain, peer, grid, peers, curve, args) -> str:
    n_words = sum(len(h) for h in data["heads"])
    nonproj = np.mean([not is_projective(h) for h in data["heads"]])
    rows = [
        _row(f"MKL over templates (sparse MKL, λ={mkl['lam']:g})", mkl, args.epochs),
        _row(f"plain linear (one group, ℓ2, λ={plain['lam']:g})", plain, args.epochs),
    ]
    if peer is not None:
        scores = [fmt(peer["test"][e]) for e in COLUMNS]
        train_s = f"{peer['train_s']:.0f} s"
        rows.append([f"UDPipe 1 (Parsito, {peer['system']})", *scores, "—",
                     f"{peer['decode_sps']:.0f}", train_s, "—", "—"])  # fmt: skip
    head = ["parser", *(f"{c} (test)" for c in COLUMNS.values()), "learn sent/s",
            "decode sent/s", "training time", "non-zeros", "active templates"]  # fmt: skip
    parts = [
        "## Turkish Web Treebank, test split (UAS %, gold POS for every parser)",
        markdown(head, rows),
        "",
        f"Data: {len(data['train'])} / {len(data['dev'])} / {len(data['test'])} sentences "
        f"(train / dev / test; {n_words:,} training words, {100 * nonproj:.1f}% of the training "
        "trees non-projective), the package's split. Input: form, lemma, UPOS, XPOS, FEATS, MISC "
        "of the gold CoNLL-U (no heads) for both streammkl rows and UDPipe. `−ig −punct`: without "
        "the arcs inside a word (`ig`) and punctuation. streammkl rows: averaged iterate, "
        f"{len(DEFAULT_TEMPLATES)} templates, {mkl['n_features']:,} hashed coordinates, one "
        f"thread; sentences/s measured while {machine()}: re-run on a quiet machine for speed.",
        "",
        "## Targets",
        *targets(mkl, plain, peer, curve),
        "",
        "## Template pruning (plain ℓ2 models retrained on the top-k templates)",
        pruning_table(curve, args.sparse_lam),
        "",
        "![pruning](parsing_pruning.png)",
        "",
        "## Selection on dev (UAS without punctuation at the best epoch)",
        selection_table(grid, peers),
        "",
        "## Templates, hash sizes and collisions",
        templates_table(mkl, plain),
    ]  # fmt: skip
    return "\n".join(parts)


def _row(label: str, run: dict, epochs: int) -> list[str]:
    """A results row: test UAS at the chosen epoch, speed, the time to reach that epoch, size."""
    seconds = run["learn_s"] / epochs * run["best_epoch"]
    return [
        f"{label}, {run['best_epoch']} epochs", *(fmt(run["test"][e]) for e in COLUMNS),
        f"{run['learn_sps']:.0f}", f"{run['decode_sps']:.0f}", f"{seconds:.0f} s",
        f"{run['nonzero']:,}", f"{run['active']} / {len(DEFAULT_TEMPLATES)}",
    ]  # fmt: skip


def pruning_table(curve, sparse_lam: float) -> str:
    keys = [(key, e) for key in ("beta", "beta_sparse", "norm") for e in ("all", "no_ig_punct")]
    rows = [[f"{r['k']} ({100 * r['fraction']:.0f}%)", *(fmt(r[k][e]) for k, e in keys)]
            for r in curve]  # fmt: skip
    head = ["k (share)", "by MKL β: UAS", "−ig −punct", f"by β of MKL λ={sparse_lam:g}: UAS",
            "−ig −punct", "by plain norms: UAS", "−ig −punct"]  # fmt: skip
    return markdown(head, rows)


def selection_table(grid, peers) -> str:
    rows = [
        [r["name"], r["best_epoch"], fmt(r["dev"][SELECT]), fmt(r["test"]["all"]),
         f"{r['learn_sps']:.0f}"]
        for r in grid
    ]  # fmt: skip
    rows += [
        [f"UDPipe 1 ({p['system']})", "—", fmt(p["dev"][SELECT]), fmt(p["test"]["all"]),
         f"train {p['train_s']:.0f} s"]
        for p in peers
    ]  # fmt: skip
    return markdown(["run", "best epoch", "dev −punct", "test UAS", "learn sent/s"], rows)


def targets(mkl, plain, peer, curve) -> list[str]:
    out = []
    for e in ("all", "no_ig_punct"):
        gap = plain["test"][e] - mkl["test"][e]
        text = (f"MKL within 0.5 point of the plain model ({COLUMNS[e]}): "
                f"{mkl['test'][e]:.2f} vs {plain['test'][e]:.2f} (gap {gap:+.2f})")  # fmt: skip
        out.append(target(gap <= 0.5, text))
    if peer is None:
        out.append("- NOT RUN: MKL ≥ UDPipe 1 (--skip-udpipe)")
    for e in ("all", "no_ig_punct") if peer is not None else ():
        out.append(target(mkl["test"][e] >= peer["test"][e], f"MKL ≥ UDPipe 1 ({COLUMNS[e]}): "
                          f"{mkl['test'][e]:.2f} vs {peer['test'][e]:.2f}"))  # fmt: skip
    out.append(target(mkl["learn_sps"] >= 200, f"≥ 200 training sentences/s on 2 cores: "
                      f"{mkl['learn_sps']:.0f} (one thread, machine shared)"))  # fmt: skip
    top = next((r for r in curve if abs(r["fraction"] - 0.2) < 1e-9), None)
    if top is not None:
        for e in ("all", "no_ig_punct"):
            gap = plain["test"][e] - top["beta"][e]
            out.append(target(gap <= 1.0, f"top 20% templates by β ({top['k']}) within 1 point "
                              f"of all ({COLUMNS[e]}): {top['beta'][e]:.2f} vs "
                              f"{plain['test'][e]:.2f} (gap {gap:+.2f})"))  # fmt: skip
    return out


def templates_table(mkl, plain) -> str:
    coll = mkl["collisions"]
    ranked = sorted(DEFAULT_TEMPLATES, key=lambda t: -mkl["weights"][t])
    rank = {t: i + 1 for i, t in enumerate(ranked)}
    rows = [[t, int(math.log2(coll[t]["size"])), f"{coll[t]['features']:,}",
             f"{100 * coll[t]['collision_rate']:.1f}%", f"{mkl['weights'][t]:.4f}", rank[t],
             f"{plain['norms'][t]:.3g}"]
            for t in sorted(DEFAULT_TEMPLATES, key=lambda t: rank[t])]  # fmt: skip
    note = (
        "Bits: the block has 2^bits coordinates. Features: distinct feature keys of the gold "
        "arcs of the training split; collisions: the share of them that share a coordinate."
    )
    return markdown(["template", "bits", "features", "collisions", "MKL β", "β rank",
                     "plain norm"], rows) + "\n\n" + note  # fmt: skip


def plot(mkl, curve, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    final = mkl["weights"]
    top = sorted(final, key=lambda t: -final[t])[:8]
    epochs = np.arange(1, len(mkl["beta"]) + 1)
    for t in top:
        left.plot(epochs, [b[t] for b in mkl["beta"]], marker=".", label=t)
    left.set(xlabel="epoch", ylabel="β (MKL)", title="template weights, top 8")
    left.legend(fontsize=6)
    ks = [r["k"] for r in curve]
    rankings = (("by MKL β", "beta", "o-", "C0"), ("by sparser MKL β", "beta_sparse", "^:", "C2"),
                ("by plain norms", "norm", "s--", "C3"))  # fmt: skip
    for label, key, style, color in rankings:
        right.plot(ks, [r[key]["all"] for r in curve], style, color=color, label=f"{label}: UAS")
        right.plot(ks, [r[key]["no_ig_punct"] for r in curve], style, color=color, alpha=0.45,
                   label=f"{label}: −ig −punct")  # fmt: skip
    right.set(xlabel="templates kept (k)", ylabel="test UAS %", title="plain model on top-k")
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run (not a result)")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--skip-udpipe", action="store_true")
    parser.add_argument(
        "--udpipe-systems", default="projective",
        help="UDPipe transition systems to train, comma-separated (projective, swap); the best "
        "on dev is the peer (default: projective, UDPipe 1's default; each takes ~10-40 min)",
    )  # fmt: skip
    add_out(parser)
    args = parser.parse_args(argv)
    documented = documented_run(parser, args)  # the full run: every option at its default
    data = load()
    mkl_lams, plain_lams, fractions = [3e-5, 1e-4, 3e-4, 1e-3], [1e-6, 1e-5], [0.1, 0.2, 0.4, 1.0]
    if args.quick:
        args.epochs = min(args.epochs, 2)
        data["train"], data["heads"] = data["train"][:600], data["heads"][:600]
        mkl_lams, plain_lams, fractions = [1e-4, 1e-3], [1e-6], [0.2, 1.0]
    print(f"{len(data['train'])} training sentences, {args.epochs} epochs; {machine()}")
    warm_up(data)
    mkl, mkl_grid = select("MKL", "mkl", mkl_lams, data, args.epochs)
    plain, plain_grid = select("plain", "plain", plain_lams, data, args.epochs)
    systems = [s.strip() for s in args.udpipe_systems.split(",") if s.strip()]
    peer, peers = (None, []) if args.skip_udpipe else udpipe_row(data, systems)
    sparse = max(mkl_grid, key=lambda r: r["lam"])  # the sparsest MKL: a second beta ranking
    args.sparse_lam = sparse["lam"]
    curve = pruning(mkl, sparse, plain, data, args.epochs, fractions)
    body = report(data, mkl, plain, peer, mkl_grid + plain_grid, peers, curve, args)
    title = "Dependency parsing with multiple kernels (SPOM §4.2)"
    written = publish("parsing", title, body, documented, args.out)
    if written is None:  # a quick or partial run: the chart and the raw numbers are not kept
        return 0
    plot(mkl, curve, written.with_name(f"{written.stem}_pruning.png"))
    grid = [{k: v for k, v in r.items() if k != "collisions"} for r in mkl_grid + plain_grid]
    raw = {"mkl": mkl, "plain": plain, "udpipe": peers, "pruning": curve, "machine": machine(),
           "grid": grid}  # fmt: skip
    written.with_suffix(".json").write_text(json.dumps(raw, indent=1, default=float))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    sys.exit(main())
