"""The numba compile options of streammkl, public for the packages above the core.

Every compiled loop in streammkl is compiled with one of these (``njit(**JIT)(_f)``, STYLE.md);
they live in :mod:`streammkl.core._jit` beside the numba cache guard.

``JIT``
    The default: cached, GIL released, fastmath limited to flags that keep NaN/Inf detectable.
``JIT_INLINE``
    ``JIT`` for small scalar helpers inlined at the numba IR level.
``JIT_EXACT``
    No fastmath at all, for loops whose results must match another implementation bit for bit.
``entry_point``
    A compiled function's entry point for fixed argument types: a per-call route that skips
    the dispatcher's type resolution.
"""

from streammkl.core._jit import JIT, JIT_EXACT, JIT_INLINE, entry_point

__all__ = ["JIT", "JIT_EXACT", "JIT_INLINE", "entry_point"]
