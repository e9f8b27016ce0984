"""What ``OnlineMKL`` refuses at construction (and when its bank changes): the projection
radius it resolves, and the combinations of kernels, regularizers and schedules it cannot learn.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from streammkl.core import _numba as nb
from streammkl.core import schedules as schedules_mod
from streammkl.core.kernels import Kernel
from streammkl.core.losses import Loss
from streammkl.core.regularizers import Regularizer
from streammkl.core.schedules import Schedule

#: The prox steps that act on each block's norm alone (``nb.blockwise``): L2, the group lasso's
#: soft-threshold, l_q.
BLOCKWISE = (nb.P_L2, nb.P_BLOCKSOFT, nb.P_GROUPLQ)


def resolve_radius(
    radius: float | str | None, regularizers: Sequence[Regularizer], loss: Loss
) -> float:
    """The projection radius (0.0: none): a number > 0, or ``"auto"`` for the paper's
    ``gamma = sqrt(2 Lambda / lambda)`` (Prop. 9)."""
    if radius is None:
        return 0.0
    if radius == "auto":
        lam_c = sum(r.strong_convexity() * getattr(r, "lam", 0.0) for r in regularizers)
        if lam_c <= 0:
            raise ValueError(
                "radius='auto' (gamma = sqrt(2 Lambda/lambda)) needs a regularizer with "
                "Omega >= 1/2 ||theta||^2, e.g. SquaredGroupLasso, L2 or ElasticNetMKL"
            )
        big_lambda = {
            nb.L_HINGE: 1.0,
            nb.L_MC_HINGE: 1.0,
            nb.L_LOGISTIC: math.log(2.0),
        }.get(loss.code)
        if big_lambda is None:
            raise ValueError(
                f"radius='auto' needs a loss bounded at theta = 0 (Hinge, Logistic, "
                f"MulticlassHinge); give a number for {loss!r}"
            )
        return math.sqrt(2.0 * big_lambda / lam_c)
    radius = float(radius)
    if not radius > 0:
        raise ValueError(f"radius must be > 0, 'auto' or None, got {radius!r}")
    return radius


def check_regularizers(kernels: Sequence[Kernel], regularizers: Sequence[Regularizer]) -> None:
    """ValueError for a regularizer that acts on coordinates beside kernelized blocks (they
    have no coordinates); every learner over the core's blocks checks this."""
    implicit = [k.name for k in kernels if k.implicit]
    for reg in regularizers:
        if reg.explicit_only and implicit:
            raise ValueError(
                f"regularizer {reg!r} acts on coordinates and needs explicit blocks; "
                f"kernelized blocks: {implicit}"
            )


def check_compatible(
    kernels: Sequence[Kernel],
    regularizers: Sequence[Regularizer],
    schedule: Schedule,
    average: bool,
    averages: bool = False,
    radius: float = 0.0,
) -> None:
    """ValueError for a bank the regularizers, the schedule, the averaging (``average``: the
    running mean of Prop. 4; ``averages``: exponential averages) or the projection (``radius``
    > 0) cannot serve. Beside kernelized blocks only the exponential averages of per-block
    schedules are kept (of the explicit blocks; each predicts with the kernelized blocks'
    current scores).

    ``FTRL`` over a bank with kernelized blocks runs per-block schedules (FTRL on the explicit
    blocks, AdaGrad's mirror descent on the kernelized ones, ``core._numba.rounds.ftrl_mixed``),
    which is exact only for a block-separable regularizer: it refuses a penalty that couples
    blocks (squared group lasso, elastic net MKL, groups of blocks) and the projection."""
    check_regularizers(kernels, regularizers)
    implicit = [k.name for k in kernels if k.implicit]
    per_block = isinstance(schedule, schedules_mod.FTRL)
    if (average or (averages and not per_block)) and implicit:
        raise ValueError(
            f"average / averages are supported for explicit blocks only (averages: also beside "
            f"kernelized blocks under FTRL's per-block schedules); got {implicit}"
        )
    if not per_block:
        return
    coordinate = [r for r in regularizers if not r.norm_only]
    if coordinate:
        raise ValueError(
            f"FTRL needs regularizers of the block norms (theta_m stays a multiple of its "
            f"accumulated gradient); {coordinate} act on coordinates: use AdaGrad or a "
            "global schedule with them"
        )
    if not implicit:
        return
    names = [k.name for k in kernels]
    coupling = [
        r for r in regularizers
        if any(code not in BLOCKWISE for code, *_ in r.steps(len(kernels), names))
    ]  # fmt: skip
    if coupling or radius > 0.0:
        what = f"{coupling} couple blocks" if coupling else f"the projection (radius {radius:g})"
        raise ValueError(
            f"FTRL with kernelized blocks {implicit} runs per-block schedules (FTRL on the "
            f"explicit blocks, AdaGrad on the kernelized ones), exact only for a "
            f"block-separable regularizer (GroupLasso, L2, GroupLq) and no projection: {what}; "
            "use AdaGrad for the whole bank"
        )
