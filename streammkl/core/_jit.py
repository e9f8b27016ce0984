"""The one place where numba JIT options live (STYLE.md).

fastmath is limited to flags that keep NaN/Inf detectable: no ``nnan``/``ninf``/``reassoc``.
"""

from __future__ import annotations

from typing import Any

JIT: dict[str, Any] = {"cache": True, "nogil": True, "fastmath": {"nsz", "arcp", "contract", "afn"}}

# Small scalar helpers called from inner loops: inlined at the numba IR level.
JIT_INLINE: dict[str, Any] = {**JIT, "inline": "always"}

# Loops whose results must match another implementation bit for bit (the compiled ADWIN against
# river's): no fastmath at all (``contract`` fuses into FMAs, ``afn`` approximates log/sqrt).
JIT_EXACT: dict[str, Any] = {"cache": True, "nogil": True, "error_model": "numpy"}
