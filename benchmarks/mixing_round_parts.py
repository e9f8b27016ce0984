"""Where a mixing member's protocol CPU per round goes, in one process (no broker, no threads).

``mixing_rounds.py``'s two members (K = 250, ``mixing.ahead_records`` 60, batches of up to 60
records, seed 0) run the daemon's hooks; every part of the protocol is timed inclusively with
``time.thread_time_ns`` around its function (a part's time holds the parts it calls: the
close holds the core merge, the rebase its take of the merged model, and so on), after a
warm-up run. Reported per learned record and per member-round (each member's share of one
round: the rounds' count times the two members). With ``--vs CHECKOUT`` the same run alternates
with that checkout's code (``--pairs`` times, each in its own process) and the table gives both,
medians over the pairs.

``--delay D`` (``mixing_rounds.py``'s): the log's news reach a member only after D of its records
since its publish, as in the daemons, where a member rebases progress of its own in place and
the sampled check of the merged model runs deferred, after its next publish (at 0 the member
that waits reads the close at once, and the check runs inside the rebase).

Run: ``python benchmarks/mixing_round_parts.py --vs <a checkout of main> [--delay 250]``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]

#: (module, owner, function, label): the parts timed, each where its callers look it up (a
#: function imported by name is timed in the importing module; those a checkout lacks are
#: left out).
PARTS = [
    ("streammkl.daemon.mixing.member", "MixingMember", "before_batch", "hook: before_batch"),
    ("streammkl.daemon.mixing.member", "MixingMember", "after_batch", "hook: after_batch"),
    ("streammkl.daemon.mixing.member", "MixingMember", "_read", "read the log (decode, fold)"),
    ("mixing_rounds", None, "decode", "— decode a record"),
    ("streammkl.daemon.mixing.log", "MixLog", "_close", "— close a round"),
    ("streammkl.daemon.mixing.log", None, "merge_states", "—— merge_states"),
    ("streammkl.daemon.mixing.log", None, "merge_saved", "——— core merge: flat, no model"),
    ("streammkl.core.mixing", None, "_merged", "——— core merge: merged model"),
    ("streammkl.core.mixing", None, "_merged_state", "———— merged arrays"),
    ("streammkl.core.model", "OnlineMKL", "__init__", "———— a model built (any)"),
    ("streammkl.core.model", "OnlineMKL", "_refresh_args", "———— round arguments built (any)"),
    ("streammkl.core.model", "OnlineMKL", "to_state", "—— a core state saved (any)"),
    ("streammkl.daemon.mixing.log", None, "pool_scalers", "—— input statistics pooled"),
    ("streammkl.daemon.mixing.log", None, "learner_digest", "—— the merged state's digest"),
    ("streammkl.daemon.mixing.member", "MixingMember", "_rebase", "rebase"),
    ("streammkl.river.rounds", "Rounds", "take_state", "— take the merged model"),
    ("streammkl.river.rounds", "Rounds", "rebase_onto", "— rebase in place"),
    ("streammkl.daemon.mixing.member", "MixingMember", "_check_digest", "— check its digest"),
    ("streammkl.daemon.mixing.member", "MixingMember", "_check_later", "the deferred check"),
    ("streammkl.river.rounds", "Rounds", "load_state", "— a state loaded (any)"),
    ("streammkl.daemon.mixing.member", None, "hindsight", "— hindsight scoring (any)"),
    ("streammkl.daemon.mixing.member", "MixingMember", "_publish_delta", "publish a delta"),
    ("streammkl.daemon.mixing.member", None, "snapshot", "— snapshot"),
    ("streammkl.daemon.mixing.member", None, "prequential", "— prequential sums (any)"),
    ("mixing_rounds", None, "encode", "— encode"),
    ("streammkl.core.update", "RoundArgs", "values_calls", "compiled record calls bound"),
]


def child(root: str, records: int, seed: int, delay: int = 0) -> dict[str, Any]:
    sys.path[:0] = [root, str(Path(root) / "benchmarks")]
    import importlib

    import mixing_rounds as mr

    spent: collections.Counter[str] = collections.Counter()
    calls: collections.Counter[str] = collections.Counter()
    clock = time.thread_time_ns

    def timed(f: Any, label: str) -> Any:
        def run(*a: Any, **k: Any) -> Any:
            t0 = clock()
            try:
                return f(*a, **k)
            finally:
                spent[label] += clock() - t0
                calls[label] += 1

        return run

    for module, owner, name, label in PARTS:
        mod = importlib.import_module(module)
        target = getattr(mod, owner) if owner else mod
        if not hasattr(target, name):
            continue
        setattr(target, name, timed(getattr(target, name), label))
    recs, classes = mr.stream(records, seed)
    mr.group(recs[: records // 10], classes, 250, None, 60, delay, 60)  # warm-up
    spent.clear()
    calls.clear()
    r = mr.group(recs, classes, 250, None, 60, delay, 60)
    return {"hooks_us": r["hooks_us"], "rounds": r["rounds"], "records": len(recs),
            "parts": {k: [calls[k], spent[k]] for k in spent}}  # fmt: skip


def run(root: str, records: int, seed: int, delay: int = 0) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, str(HERE), "--child", root, "--records", str(records),
         "--seed", str(seed), "--delay", str(delay)],
        check=True, capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"},
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=60_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vs", default=None, help="another checkout to compare with")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument(
        "--delay",
        type=int,
        default=0,
        help="the log's news reach a member after this many of its records since its "
        "publish (mixing_rounds.py --delay; 250: a daemon's timing, where a member "
        "rebases progress of its own in place and the sampled check is deferred)",
    )
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help="write the table here too")
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.records, args.seed, args.delay)))
        return 0
    sys.path.insert(0, str(HERE.parent))
    import _table

    header = _table.machine()
    roots = [("this checkout", str(ROOT))] + ([("vs", args.vs)] if args.vs else [])
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in roots}
    for i in range(args.pairs):
        for name, root in roots if i % 2 == 0 else roots[::-1]:
            runs[name].append(run(root, args.records, args.seed, args.delay))
            print(name, f"{runs[name][-1]['hooks_us']:.2f} µs/record", file=sys.stderr)
    head = ["part"]
    for name, _ in roots:
        head += [f"{name}: calls / member-round", f"{name}: µs / record",
                 f"{name}: µs / member-round"]  # fmt: skip
    rows: list[list[object]] = []
    hooks = ["hooks (process time), median"]
    for name, _ in roots:
        hooks += ["", f"{statistics.median(r['hooks_us'] for r in runs[name]):.2f}", ""]
    rows.append(hooks)
    for _, _, _, label in PARTS:
        row: list[object] = [label]
        for name, _ in roots:
            got = [r for r in runs[name] if label in r["parts"]]
            if not got:
                row += ["—", "—", "—"]
                continue
            mr_ = 2 * got[0]["rounds"]
            ns = statistics.median(r["parts"][label][1] for r in got)
            row += [f"{got[0]['parts'][label][0] / mr_:.2f}", f"{ns / 1e3 / got[0]['records']:.2f}",
                    f"{ns / 1e3 / mr_:.0f}"]  # fmt: skip
        rows.append(row)
    body = (
        f"{header}. {args.records:,} records, seed {args.seed}, K = 250, ahead 60, "
        f"news after {args.delay} records, "
        f"{args.pairs} alternated runs per checkout ({', '.join(f'{n}: {r}' for n, r in roots)}); "
        "medians.\n\n" + _table.markdown(head, rows)
    )
    print(body)
    if args.out:
        Path(args.out).write_text(body + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
