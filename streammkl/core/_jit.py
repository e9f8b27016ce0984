"""The one place where numba JIT options live (STYLE.md).

fastmath is limited to flags that keep NaN/Inf detectable: no ``nnan``/``ninf``/``reassoc``.
"""

from __future__ import annotations

JIT = {"cache": True, "nogil": True, "fastmath": {"nsz", "arcp", "contract", "afn"}}

# Small scalar helpers called from inner loops: inlined at the numba IR level.
JIT_INLINE = {**JIT, "inline": "always"}
