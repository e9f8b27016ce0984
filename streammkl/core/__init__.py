"""numpy + numba core: kernels, losses, regularizers, schedules, block state and the round.

No river, kafka, prometheus or pydantic imports here (checked by import-linter).
"""

from __future__ import annotations

from streammkl.core import kernels, losses, regularizers, schedules
from streammkl.core.model import OnlineMKL

__all__ = ["OnlineMKL", "kernels", "losses", "regularizers", "schedules"]
