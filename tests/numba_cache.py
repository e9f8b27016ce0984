"""A numba cache for a child process, seeded with part of this tree's machine code.

Tests that run the daemon on a cache of their own (an empty one: a fresh clone's first run; one
under ``NUMBA_BOUNDSCHECK=1``) pay a cold compile of everything, minutes on two cores, most of it
for two modules (the compiled rounds and runs: measured below). :func:`seed_cache` copies the
machine code of the named modules from the cache this tree already has (``make install``'s
warm-up wrote it) into the layout numba reads under ``NUMBA_CACHE_DIR``, so that the child
compiles every other function and loads these.

numba keys a cached function by its source file's content and the argument types, not by the
compiler's flags: machine code copied this way is loaded as it is, also under the bounds check
(it then runs unchecked). A module absent from this tree's cache is simply compiled.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Collection
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The compiled rounds and runs of the dense and the wide layout (``core/_numba/rounds.py`` and
#: ``wide.py``): of the demo's cold warm-up (2 cores at load 7-10), every other function took
#: 20 s of CPU (39 compiles), these over 4 minutes; the wide round, a new layout's compile in the
#: middle of a stream that brings new inputs, took minutes of the growth test's phases.
COMPILED_ROUNDS = ("rounds", "wide")


def _user_dir(cache_dir: Path, source_dir: Path) -> Path:
    """Where numba keeps the functions of ``source_dir`` under ``NUMBA_CACHE_DIR=cache_dir``
    (``numba.core.caching.UserProvidedCacheLocator``)."""
    digest = hashlib.sha1(str(source_dir).encode()).hexdigest()
    return cache_dir / f"{source_dir.name}_{digest}"


def tree_cache_dir(source_dir: Path) -> Path:
    """Where this tree's machine code for ``source_dir`` is: beside the sources, or under the
    ``NUMBA_CACHE_DIR`` of this process's environment."""
    user = os.environ.get("NUMBA_CACHE_DIR")
    return _user_dir(Path(user), source_dir) if user else source_dir / "__pycache__"


def seed_cache(cache_dir: Path, modules: Collection[str]) -> int:
    """Copy this tree's cached machine code of ``modules`` (by file stem, e.g. ``"rounds"``)
    into ``cache_dir`` as numba reads it under ``NUMBA_CACHE_DIR``; returns the number of files
    copied (0 on a tree whose cache is cold: the child then compiles them too)."""
    copied = 0
    for source in sorted({p.parent for p in (ROOT / "streammkl").rglob("*.py")}):
        cached = tree_cache_dir(source)
        if not cached.is_dir():
            continue
        for f in cached.iterdir():
            if f.suffix in (".nbi", ".nbc") and f.name.split(".", 1)[0] in modules:
                target = _user_dir(cache_dir, source)
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy2(f, target / f.name)
                copied += 1
    return copied
