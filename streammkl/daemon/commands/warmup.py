"""``streammkl warmup`` and the demo's first step: the one-time compile, with a progress bar.

:func:`run_warm_up` says before it starts what it does and how long it takes on a cold cache
(:data:`~streammkl.daemon.learning.warmup.COLD_COMPILE_NOTE`), then shows the stage, the function
numba compiles and the elapsed time (a live bar on a terminal, a line per stage otherwise), and
ends with one line: compiled N functions in S s, or loaded from the cache.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from streammkl.daemon.config import Settings
from streammkl.daemon.learning.learner import Inputs, Target
from streammkl.daemon.learning.warmup import (
    COLD_COMPILE_NOTE,
    WarmUpProgress,
    WarmUpReport,
    warm_up,
)


def run_warm_up(
    console: Console,
    settings: Settings,
    examples: Iterable[tuple[Inputs, Target]] | None = None,
) -> WarmUpReport:
    """Warm the learner of ``settings`` up (:func:`streammkl.daemon.learning.warmup.warm_up`),
    showing its progress on ``console``."""
    console.print(f"[bold]{COLD_COMPILE_NOTE}[/bold]")
    if console.is_terminal:
        bar = Progress(
            TextColumn("[cyan]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), TextColumn("{task.fields[fn]}", style="dim"),
            console=console, transient=True,
        )  # fmt: skip
        task = bar.add_task("warm-up", total=None, fn="")

        def show(p: WarmUpProgress) -> None:
            fn = f"compiling {p.compiling} (#{p.compiled})" if p.compiling else ""
            done = p.stages if p.done else p.stage - 1
            bar.update(task, description=p.what, completed=done, total=p.stages, fn=fn)

        with bar:
            report = warm_up(settings, examples, show)
    else:
        seen = {"stage": 0, "at": 0.0}

        def show(p: WarmUpProgress) -> None:  # a line per stage, and every 15 s within one
            if p.done:
                return
            if p.stage != seen["stage"]:
                seen["stage"], seen["at"] = p.stage, p.elapsed
                console.print(
                    f"  [{p.stage}/{p.stages}] {p.what} ({p.elapsed:.0f} s, "
                    f"{p.compiled} functions compiled so far)"
                )
            elif p.compiling and p.elapsed - seen["at"] >= 15.0:
                seen["at"] = p.elapsed
                console.print(f"      compiling {p.compiling} (#{p.compiled}, {p.elapsed:.0f} s)")

        report = warm_up(settings, examples, show)
    if report.compiled:
        console.print(
            f"compiled {report.compiled} functions in {report.seconds:.0f} s "
            "(cached: the next runs start at once)"
        )
    else:
        console.print(f"learner ready in {report.seconds:.1f} s (numba's cache was warm)")
    return report


__all__ = ["run_warm_up"]
