"""``streammkl export CHECKPOINT_DIR model.smkl``: the daemon's model as a file a river user loads.

The newest valid checkpoint's model (its state checked against the digest the checkpoint holds)
is written as the learner's own state file (:mod:`streammkl.statefile`), which the learner's
``load`` reads::

    from streammkl.river import MKLClassifier
    model = MKLClassifier.load("model.smkl")     # predicts exactly what the daemon would

Only streammkl's own learner classes are exported (a checkpoint names its class; nothing else
named there is imported). The monitor's state stays behind (it is not part of the model).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streammkl.daemon.checkpoints.committer import upgraded
from streammkl.daemon.checkpoints.store import CheckpointStore, read_key
from streammkl.daemon.learning.stream_monitor import INPUTS
from streammkl.river import MemoryClassifier, MemoryRegressor, MKLClassifier, MKLRegressor
from streammkl.statefile import state_digest
from streammkl.structured import DependencyParser, SequenceLabeler

#: The learner classes a checkpoint may name, by the path it names them with.
LEARNERS: dict[str, type[Any]] = {
    f"{cls.__module__}:{cls.__qualname__}": cls
    for cls in (
        MKLClassifier,
        MKLRegressor,
        MemoryClassifier,
        MemoryRegressor,
        SequenceLabeler,
        DependencyParser,
    )
}


@dataclass(frozen=True, slots=True)
class Exported:
    """What :func:`export_model` wrote: the file, the checkpoint it came from, the model's
    class, digest and examples learned."""

    path: Path
    checkpoint: Path
    model_class: str
    model_digest: str
    examples_learned: int


def load_model(directory: str | os.PathLike[str], hmac_key_file: str | None = None) -> Any:
    """The model of the newest valid checkpoint in ``directory`` (a streammkl learner), loaded
    as saved (its digest checked). Raises ``FileNotFoundError`` without a checkpoint,
    ``ValueError`` for a class that is not a streammkl learner or a model that does not load."""
    return _load(directory, hmac_key_file)[0]


def _load(directory: str | os.PathLike[str], hmac_key_file: str | None) -> tuple[Any, Any]:
    key = read_key(hmac_key_file) if hmac_key_file else None
    ckpt = CheckpointStore(directory, hmac_key=key).load_latest()
    if ckpt is None:
        raise FileNotFoundError(f"no checkpoint in {directory}")
    model = ckpt.meta.get("model") or {}
    cls = LEARNERS.get(str(model.get("class")))
    if cls is None:
        raise ValueError(
            f"{ckpt.path} holds a {model.get('class')!r}, not one of streammkl's learners "
            f"({', '.join(sorted(LEARNERS))}): nothing to export"
        )
    arrays = {k: v for k, v in ckpt.arrays.items() if k != INPUTS}
    learner = cls.from_state(model["meta"], arrays)
    digest = state_digest(*learner.to_state())
    saved = (ckpt.meta.get("summary") or {}).get("model_digest")
    if digest != saved and not upgraded(model["meta"], arrays, learner, str(saved)):
        raise ValueError(f"{ckpt.path}: the model does not load as saved (digest {digest})")
    return learner, ckpt


def export_model(
    directory: str | os.PathLike[str],
    out: str | os.PathLike[str],
    hmac_key_file: str | None = None,
) -> Exported:
    """Write the newest valid checkpoint's model in ``directory`` to ``out`` (the learner's
    ``save``: ``MKLClassifier.load(out)`` reads it)."""
    learner, ckpt = _load(directory, hmac_key_file)
    learner.save(out)
    return Exported(
        path=Path(out),
        checkpoint=ckpt.path,
        model_class=ckpt.meta["model"]["class"],
        model_digest=ckpt.meta["summary"]["model_digest"],
        examples_learned=int(ckpt.counters.get("examples_learned", 0)),
    )


__all__ = ["LEARNERS", "Exported", "export_model", "load_model"]
