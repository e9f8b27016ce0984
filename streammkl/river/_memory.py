"""River's memory measure (``_raw_memory_usage``) for the library's learners, without walking
into numba's compiler state."""

from __future__ import annotations

import gc
import sys
import types
import weakref
from typing import Any

import numpy as np

_STOP = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType)


def memory_usage(root: Any) -> int:
    """Bytes of every object reachable from ``root`` (numpy buffers included), as river's
    ``Base._raw_memory_usage`` counts them, except that compiled code is not walked into.

    The compiled entry points a model keeps are numba's, shared by every model of the process;
    behind them lies numba's compiler state, which grows with whatever else the process
    compiled and holds weak proxies that die with a compilation (river's own walk raises
    ``ReferenceError`` on one, and counts the compiler's growth as the model's). A wrapper
    (``MemoryClassifier``, a ``Pipeline`` inside one) must measure itself with this walk too:
    river's walk, started from a river ``Pipeline``, reaches the same compiled code."""
    seen: set[int] = set()
    size = 0
    pending: list[Any] = [root]
    while pending:
        walk: list[Any] = []
        for obj in pending:
            if type(obj) in weakref.ProxyTypes or isinstance(obj, _STOP):
                continue
            if type(obj).__module__.startswith(("numba.", "llvmlite.")):
                continue
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            size += sys.getsizeof(obj)
            if isinstance(obj, np.ndarray):
                size += obj.nbytes
            walk.append(obj)
        pending = gc.get_referents(*walk)
    return size
