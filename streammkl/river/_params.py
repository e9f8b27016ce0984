"""Checks of the river wrappers' constructor parameters: a clear error naming the parameter
(``TypeError`` for the wrong kind, ``ValueError`` for a value out of range), raised before any
state is made."""

from __future__ import annotations

import math
from typing import Any


def check_int(name: str, value: Any, least: int) -> None:
    """``value`` is an ``int`` (not a ``bool``) of at least ``least``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < least:
        raise ValueError(f"{name} must be >= {least}, got {value!r}")


def check_number(name: str, value: Any, low: float, high: float, closed: bool = False) -> None:
    """``value`` is a finite real number (not a ``bool``) in ``(low, high)``, or in
    ``[low, high]`` when ``closed``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number, got {value!r}")
    inside = low <= value <= high if closed else low < value < high
    if not (math.isfinite(value) and inside):
        span = f"[{low:g}, {high:g}]" if closed else f"({low:g}, {high:g})"
        raise ValueError(f"{name} must lie in {span}, got {value!r}")


def check_share(share: Any) -> None:
    """A fixed-share Hedge's ``share``: a number in ``[0, 1)`` (at 1 the weights never move)."""
    check_number("share", share, 0.0, 1.0, closed=True)
    if share == 1.0:
        raise ValueError("share must be < 1: at 1 the weights never move")
