"""The one place where numba JIT options live (STYLE.md).

fastmath is limited to flags that keep NaN/Inf detectable: no ``nnan``/``ninf``/``reassoc``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streammkl.files import atomic_write


def _cpu_option(name: str) -> bool:
    """Whether numba's CPU target takes the option ``name``."""
    try:
        from numba.core.cpu import CPUTargetOptions
    except ImportError:  # pragma: no cover - numba moved its internals
        return False
    return hasattr(CPUTargetOptions, name)


JIT: dict[str, Any] = {"cache": True, "nogil": True, "fastmath": {"nsz", "arcp", "contract", "afn"}}

# Small scalar helpers called from inner loops: inlined at the numba IR level.
JIT_INLINE: dict[str, Any] = {**JIT, "inline": "always"}

# The default round's functions, which allocate nothing (nor do the functions they call, which
# numba compiles with the caller's flags): compiled without numba's reference counting, so
# reading the pack's fields and making views costs no NRT_incref/NRT_decref call (each a call
# and an atomic operation: measured at a third of the default round's time, and most of a
# small bank's). Safe because such a function creates no array that outlives the call: every
# array it touches belongs to its caller. numba refuses to compile one that allocates.
# ``_nrt`` is an underscored option of numba's CPU target (0.59 to 0.68 at least): where a numba
# release no longer has it, these functions compile with reference counting (slower, same
# numbers) instead of failing at import.
JIT_NORC: dict[str, Any] = {**JIT, "_nrt": False} if _cpu_option("_nrt") else dict(JIT)

# The Parzen vote of a local memory (``_numba.parzen``): its max, total and class sums are
# reductions over a window of 1,000 float32 weights, which vectorise only when they may be
# reassociated. The vote's numbers are an approximation anyway (its exp is within 0.27 %), and
# no other path must match them bit for bit; NaN/Inf stay detectable (no nnan/ninf). With it the
# vote took 1.65 µs per call at W = 1,000 on Bananas (research prototype, quiet machine), about
# half of its time without it (measured side by side under load: 8.1 against 15.2 µs).
JIT_VOTE: dict[str, Any] = {**JIT, "fastmath": JIT["fastmath"] | {"reassoc"}}

# Loops whose results must match another implementation bit for bit (the compiled ADWIN against
# river's): no fastmath at all (``contract`` fuses into FMAs, ``afn`` approximates log/sqrt).
JIT_EXACT: dict[str, Any] = {"cache": True, "nogil": True, "error_model": "numpy"}


def entry_point(dispatcher: Any, args: tuple[Any, ...]) -> Callable[..., Any]:
    """The compiled entry point of ``dispatcher`` for exactly these argument types (compiled
    on the first call if needed), which skips the dispatcher's type resolution of every
    argument (~0.1-0.5 µs per array on each call); the dispatcher itself when numba's internals
    differ, or when the function is not compiled (a test runs the Python original). A caller
    must pass arguments of exactly these types (float64 C-contiguous arrays stay so)."""
    try:
        sig = tuple(dispatcher.typeof_pyval(a) for a in args)
        if sig not in dispatcher.overloads:
            dispatcher.compile(sig)
        return dispatcher.overloads[sig].entry_point
    except Exception:  # a Python function, or numba internals changed: the slower route
        return dispatcher


def native_address(dispatcher: Any, args: tuple[Any, ...]) -> int:
    """The address of the compiled function of ``dispatcher`` for exactly these argument types
    (compiled on the first call if needed), in numba's own calling convention: for a compiled
    function that calls it there (``core._numba.known``) instead of compiling its own copy of
    it. 0 when numba's internals differ or the function is not compiled (a test runs the
    Python original): the caller must not call it then."""
    try:
        sig = tuple(dispatcher.typeof_pyval(a) for a in args)
        if sig not in dispatcher.overloads:
            dispatcher.compile(sig)
        cres = dispatcher.overloads[sig]
        return int(cres.library.get_pointer_to_function(cres.fndesc.mangled_name))
    except Exception:  # a Python function, or numba internals changed
        return 0


def cache_guard(package_init: str) -> None:
    """Drop a package's numba cache when any of its sources changed since the cache was written.

    numba keys a cached function by the stamp of its own source file only; a function that
    inlines a helper from a sibling module would keep stale machine code after the helper
    changed. A fingerprint of every ``*.py`` of the package (names and bytes) is kept beside the
    cache; when it differs, the package's ``.nbi``/``.nbc`` files are removed first. Best effort:
    a read-only install (numba then caches elsewhere, and its files never change) is left alone.
    """
    pkg = Path(package_init).parent
    h = hashlib.sha256()
    for src in sorted(pkg.glob("*.py")):
        h.update(src.name.encode())
        h.update(src.read_bytes())
    digest = h.hexdigest()
    cache = pkg / "__pycache__"
    stamp = cache / "numba-sources.sha256"
    try:
        if stamp.read_text() == digest:
            return
    except OSError:
        pass
    try:
        cache.mkdir(exist_ok=True)
        for stale in (*cache.glob("*.nbi"), *cache.glob("*.nbc")):
            stale.unlink(missing_ok=True)
        atomic_write(stamp, digest.encode())
    except OSError:
        pass
