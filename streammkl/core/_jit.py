"""The one place where numba JIT options live (STYLE.md).

fastmath is limited to flags that keep NaN/Inf detectable: no ``nnan``/``ninf``/``reassoc``.
"""

from __future__ import annotations

from typing import Any

JIT: dict[str, Any] = {"cache": True, "nogil": True, "fastmath": {"nsz", "arcp", "contract", "afn"}}

# Small scalar helpers called from inner loops: inlined at the numba IR level.
JIT_INLINE: dict[str, Any] = {**JIT, "inline": "always"}
