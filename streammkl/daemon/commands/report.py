"""``streammkl report CHECKPOINT_DIR --out DIR``: the run's history as PNG figures.

Reads ``history.jsonl`` (:mod:`streammkl.daemon.learning.history`) and draws, with matplotlib's Agg
backend (no display needed):

- ``kernel_weights.png``: β per kernel over the examples, stacked (they sum to 1), with the drift
  detections (schedule restarts) as vertical lines — the picture of the paper's Figure 3; a
  kernel whose bandwidth was fitted to the data has the bandwidths it held in its legend entry;
- ``regret.png``: the cumulative online objective; the windowed regret with its upper bound (on a
  symmetric log scale: both are visible though the bound is ~10^4 times the regret); and the
  Prop. 3 bound for the rounds since the last schedule restart (log scale) — Figure 1's
  quantities;
- ``accuracy.png``: prequential accuracy, over the run and over each history interval (regression:
  the mean prequential loss per interval), with the drift detections.

A chart never shows a value that is not true: a value the history does not know (``null``) is a
gap in its line, never a point at 0 or a segment bridging it; a bound of ``"+inf"`` is drawn as
a shaded span labelled "no finite bound"; a windowed-regret estimate older than its refresh
schedule is labelled stale, with its lag in examples.
"""

from __future__ import annotations

import itertools
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streammkl.daemon.learning import history

if TYPE_CHECKING:  # matplotlib is imported when a report is drawn (the report extra)
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

FIGURES = ("kernel_weights.png", "regret.png", "accuracy.png")


def _finite(v: object) -> bool:
    return isinstance(v, int | float) and math.isfinite(v)


def _series(rows: list[dict[str, Any]], key: str) -> tuple[list[float], list[float]]:
    """(t, value) per row; a value that is not a finite number is NaN, a gap in the line.
    Empty when no row has a finite value."""
    if not any(_finite(r.get(key)) for r in rows):
        return [], []
    t = [float(r["t"]) for r in rows]
    return t, [float(r[key]) if _finite(r.get(key)) else math.nan for r in rows]


def infinite_spans(rows: list[dict[str, Any]], key: str) -> list[tuple[float, float]]:
    """The stretches of ``t`` (first row, last row) where ``key`` is ``"+inf"``: no finite
    bound applies there."""
    spans: list[tuple[float, float]] = []
    start = last = None
    for r in rows:
        t = float(r["t"])
        if r.get(key) == "+inf" or r.get(key) == math.inf:
            start = t if start is None else start
            last = t
        elif start is not None:
            spans.append((start, t))  # up to the next row, which has a value
            start = None
    if start is not None and last is not None:
        spans.append((start, last))
    return spans


def _bound_panel(ax: Axes, rows: list[dict[str, Any]]) -> None:
    """The Prop. 3 bound: its finite values (gaps where unknown), shaded where it is +inf."""
    bx, by = _series(rows, "regret_bound")
    finite = [v for v in by if math.isfinite(v)]
    if finite:
        ax.plot(bx, by, color="tab:green", label="Prop. 3 bound since the last restart")
        ax.set_yscale("log" if min(finite) > 0 else "linear")
    for i, (a, b) in enumerate(infinite_spans(rows, "regret_bound")):
        label = "no finite bound (+∞) for this configuration" if i == 0 else None
        ax.axvspan(a, b if b > a else a + 1, color="0.85", label=label)
    if not finite:
        ax.set_yticks([])


def legend_labels(names: list[str], entries: list[dict[str, Any]]) -> list[str]:
    """The kernel names, each with the bandwidths it was fitted (the history's ``bandwidth``
    events, in order; the last three) when it has any: ``rff(gamma=1/median,D=256): γ 0.5 →
    0.354``."""
    seen: dict[str, list[float]] = {}
    for e in entries:
        if e.get("event") == "bandwidth":
            for name, gamma in (e.get("bandwidths") or {}).items():
                values = seen.setdefault(name, [])
                if _finite(gamma) and (not values or values[-1] != gamma):
                    values.append(float(gamma))
    out = []
    for name in names:
        fitted = seen.get(name, [])
        out.append(name + (": γ " + " → ".join(f"{g:.3g}" for g in fitted[-3:]) if fitted else ""))
    return out


def _regret_panel(ax: Axes, rows: list[dict[str, Any]]) -> None:
    """The windowed regret and its upper bound, one point per fit (at the window's end), on a
    log scale (symmetric when a value is <= 0): the bound is ~10^4 times the regret, and on one
    linear axis the regret was a flat line at 0."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    fits = list({r["window_end"]: r for r in rows if r.get("window_end")}.values())  # one per fit
    values: list[float] = []
    for key, style in (("window_regret", "-"), ("window_regret_bound", ":")):
        xs = [float(r["window_end"]) for r in fits if _finite(r.get(key))]
        ys = [float(r[key]) for r in fits if _finite(r.get(key))]
        values += ys
        if key == "window_regret":
            label = "windowed regret (estimate)"
        else:
            label = (
                "its upper bound" if ys else "its upper bound: none finite for this configuration"
            )
        ax.plot(xs, ys, ls=style, marker=".", label=label)
    if values and min(values) > 0:
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        scale = "log"
    elif values:
        ax.set_yscale("symlog", linthresh=1.0)
        scale = "symlog"
    else:
        scale = "linear"
    ax.set(ylabel=f"regret on the window\n(objective units, {scale})")


def _stale_note(ax: Axes, rows: list[dict[str, Any]]) -> None:
    """Say how old the windowed-regret estimate is at the end of the history."""
    last = rows[-1]
    if not last.get("window_end"):
        ax.text(0.5, 0.5, "no windowed-regret estimate yet", transform=ax.transAxes,
                ha="center", va="center", color="0.4")  # fmt: skip
    elif last.get("window_regret_stale"):
        lag = last.get("window_regret_lag")
        ax.text(0.99, 0.95, f"stale: the last estimate is {lag:.0f} examples old"
                if _finite(lag) else "stale", transform=ax.transAxes, ha="right", va="top",
                color="crimson")  # fmt: skip


def _drifts(ax: Axes, events: list[float], label: bool = True) -> None:
    for i, t in enumerate(events):
        ax.axvline(
            t,
            color="crimson",
            lw=1.0,
            ls="--",
            label="drift detected" if label and i == 0 else None,
        )


def write_report(directory: str | os.PathLike[str], out: str | os.PathLike[str]) -> list[Path]:
    """Draw the figures of the history in ``directory`` into ``out``; returns their paths.

    Raises
    ------
    FileNotFoundError
        If there is no history (the monitor was off, or nothing was checkpointed yet).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    entries = history.read(directory)
    rows = [r for r in entries if "event" not in r]
    if not rows:
        raise FileNotFoundError(
            f"no history in {directory} (history.jsonl is written at checkpoints when the "
            "monitor is enabled)"
        )
    events = [float(r["t"]) for r in entries if r.get("event") == "drift"]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t = [float(r["t"]) for r in rows]
    paths = []

    # beta per kernel, stacked
    names = sorted({k for r in rows for k in (r.get("beta") or {})})
    fig, ax = plt.subplots(figsize=(9, 4.5))
    stacks = [[float((r.get("beta") or {}).get(k) or 0.0) for r in rows] for k in names]
    if names:
        ax.stackplot(t, stacks, labels=legend_labels(names, entries), alpha=0.85)
    _drifts(ax, events)
    ax.set(xlabel="examples", ylabel="kernel weight β", ylim=(0, 1), xlim=(t[0], t[-1]))
    ax.set_title("Kernel weights over the stream (stacked; sum to 1)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    paths.append(_save(fig, out / FIGURES[0]))

    # objective, windowed regret vs its bound, Prop. 3 bound (its panel only when it is finite
    # somewhere: for a configuration without one, a panel of grey "+inf" said nothing)
    has_bound = bool(_series(rows, "regret_bound")[1]) and any(
        math.isfinite(v) for v in _series(rows, "regret_bound")[1]
    )
    n_panels = 3 if has_bound else 2
    fig, axes = plt.subplots(n_panels, 1, figsize=(9, 3 * n_panels), sharex=True)
    axes[0].plot(*_series(rows, "objective"), label="online objective Σ λΩ(θ_t) + L_t")
    axes[0].plot(*_series(rows, "loss"), label="online loss Σ L_t", alpha=0.7)
    axes[0].set(ylabel="cumulative (objective units)")
    _regret_panel(axes[1], rows)
    _stale_note(axes[1], rows)
    if has_bound:
        _bound_panel(axes[2], rows)
        sx, sy = _series(rows, "shadow_regret")
        if sy:
            twin = axes[2].twinx()
            twin.plot(sx, sy, color="tab:purple", label="regret vs best single kernel")
            twin.set(ylabel="regret vs best single kernel")
            twin.legend(loc="lower right", fontsize=8)
        axes[2].set(ylabel="Prop. 3 bound (log)")
    else:
        axes[1].plot([], [], " ", label="Prop. 3 bound: +∞ for this configuration (not drawn)")
    axes[-1].set(xlabel="examples")
    for ax in axes:
        _drifts(ax, events, label=ax is axes[0])
        ax.legend(loc="best" if ax is axes[1] else "upper left", fontsize=8)  # (not on a point)
    axes[0].set_title("Online objective and regret")
    paths.append(_save(fig, out / FIGURES[1]))

    # prequential accuracy (or loss)
    steps = sorted(b - a for a, b in itertools.pairwise(t) if b > a)
    span = f"interval of {steps[len(steps) // 2]:.0f} examples" if steps else "interval"
    fig, ax = plt.subplots(figsize=(9, 4))
    if _series(rows, "accuracy")[1]:
        ax.plot(*_series(rows, "accuracy"), label="prequential accuracy (so far)")
        ax.plot(*_series(rows, "accuracy_recent"), alpha=0.6, label=f"per {span}")
        ax.set(ylabel="accuracy (fraction right)", ylim=(0, 1))
    else:  # a regression: its loss is the squared error (mean per interval)
        ax.plot(*_series(rows, "loss_recent"), label=f"mean prequential loss per {span}")
        ax.set(ylabel="prequential loss (squared error for a regression)")
    _drifts(ax, events)
    ax.set(xlabel="examples")
    ax.set_title("Prequential performance")
    ax.legend(loc="lower right", fontsize=8)
    paths.append(_save(fig, out / FIGURES[2]))
    return paths


def summary(directory: str | os.PathLike[str]) -> list[str]:
    """The run in a few lines, from the history and the newest checkpoint (if any): examples,
    the task's prequential scores, β from largest to smallest (dropped kernels named), drift
    detections and the latest windowed regret."""
    from streammkl.daemon.checkpoints.inspection import inspect_checkpoint

    entries = history.read(directory)
    rows = [r for r in entries if "event" not in r]
    lines: list[str] = []
    try:
        info = inspect_checkpoint(directory)
    except (FileNotFoundError, OSError, RuntimeError):
        info = None
    if info is not None:
        scores = ", ".join(f"{k} {v:.4g}" for k, v in info["prequential"].items()) or "-"
        lines.append(f"examples learned: {info['examples_learned']} ({info['task']})")
        lines.append(f"prequential: {scores}")
        betas = sorted(info["kernel_weights"].items(), key=lambda kv: -kv[1])
        kept = ", ".join(f"{k} {v:.3f}" for k, v in betas if v > 0) or "-"
        dropped = [k for k, v in betas if v == 0]
        lines.append(f"kernel weights β: {kept}")
        if dropped:
            lines.append(f"dropped kernels (β = 0): {', '.join(dropped)}")
    drifts = [r for r in entries if r.get("event") == "drift"]
    lines.append(f"drift detections: {len(drifts)}")
    fits = [r for r in rows if _finite(r.get("window_regret"))]
    if fits:
        last = fits[-1]
        lines.append(
            f"latest windowed regret: {float(last['window_regret']):.4g} (objective units) on "
            f"the window ending at example {float(last.get('window_end') or 0):.0f}"
        )
    else:
        lines.append("latest windowed regret: none estimated yet")
    return lines


def _save(fig: Figure, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
