"""What :class:`~streammkl.structured.SequenceLabeler`'s constructor refuses, checked before
anything is built: kernels, loss, regularizers, transition weight, radius and budget."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from streammkl.core import budget as budgets
from streammkl.core import regularizers as regs_mod
from streammkl.core.kernels import Kernel
from streammkl.core.model_checks import check_regularizers
from streammkl.core.regularizers import Regularizer
from streammkl.structured.joint import TRANSITION
from streammkl.structured.sequence_loss import LOSSES


def check_options(
    kernels: Sequence[Kernel],
    loss: str,
    regularizer: Any,
    transition_weight: float,
    radius: float | None,
    budget: int | None,
    budget_policy: str,
) -> tuple[tuple[Regularizer, ...], int]:
    """Refuse a bad configuration with a clear error; else the regularizers (default
    ``SquaredGroupLasso(1e-3)``) and the budget policy's code."""
    if not kernels:
        raise ValueError("kernels: give at least one base kernel")
    names = [k.name for k in kernels]
    dupes = sorted({n for n in names if names.count(n) > 1 or n == TRANSITION})
    if dupes:
        raise ValueError(f"kernels: names must be distinct and not {TRANSITION!r}: {dupes}")
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
    reg = regularizer
    if reg is None:
        reg = regs_mod.SquaredGroupLasso(1e-3)
    if isinstance(reg, Regularizer | dict):
        reg = (reg,)
    regularizers = tuple(regs_mod.from_spec(r) for r in reg)
    if not regularizers:
        raise ValueError("regularizer: give at least one (e.g. SquaredGroupLasso(1e-3))")
    check_regularizers(kernels, regularizers)
    if not (transition_weight > 0 and np.isfinite(transition_weight)):
        raise ValueError(f"transition_weight must be > 0, got {transition_weight!r}")
    if radius is not None and not float(radius) > 0:
        raise ValueError(f"radius must be > 0 or None, got {radius!r}")
    budgets.check_budget(budget)
    return regularizers, budgets.policy_code(budget_policy)
