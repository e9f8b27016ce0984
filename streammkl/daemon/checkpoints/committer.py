"""The one object that owns the daemon's commit: model state + next offsets, written together.

:class:`Checkpointer` holds the next offset of every partition (the dict the source reads and
the loop advances), the counters, and what has changed since the last checkpoint; its
:meth:`~Checkpointer.commit` writes the learner's state (and the monitor's), the offsets, the
counters and the sink's unacknowledged outbox as **one** checkpoint, atomically (temp file,
fsync, rename: :class:`~streammkl.daemon.checkpoints.store.CheckpointStore`), and
:meth:`~Checkpointer.restore` reads the newest usable one back. Nothing else in the daemon
writes model state or offsets, so they can never disagree: killed at any point, the daemon
resumes from a model and the offsets that model had consumed (exactly-once effect).

The same idea as quixstreams' ``checkpointing/checkpoint.py`` (one object stores the offsets and
the state transactions and commits them together); the name ``Checkpoint`` is the saved record
(:class:`streammkl.daemon.checkpoints.store.Checkpoint`) that a commit writes and a restore reads.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from streammkl.daemon.checkpoints.store import (
    Checkpoint,
    CheckpointError,
    CheckpointMismatch,
    CheckpointStore,
    encode_offsets,
    read_key,
)
from streammkl.daemon.config import CheckpointSettings
from streammkl.daemon.kafka.clients.protocol import Output
from streammkl.daemon.learning.learner import Learner, Memory, introspect
from streammkl.daemon.learning.stream_monitor import INPUTS, StreamMonitor
from streammkl.statefile import state_digest

log = logging.getLogger(__name__)


def class_path(obj: object) -> str:
    """``module:QualName`` of an object's class."""
    cls = type(obj)
    return f"{cls.__module__}:{cls.__qualname__}"


def model_view(ckpt: Checkpoint) -> dict[str, Any]:
    """The model's internals a checkpoint's summary holds (read by
    :func:`~streammkl.daemon.learning.learner.introspect` once, at the commit)."""
    return {k: v for k, v in ckpt.meta["summary"].items() if k != "model_digest"}


class Checkpointer:
    """Offsets, counters and the learner's state, committed together.

    Parameters
    ----------
    store
        Where checkpoints are written (atomically) and read back.
    every_records, every_seconds
        A checkpoint is due after this many records, or this long after the last one when
        anything changed.
    """

    @classmethod
    def from_settings(cls, cs: CheckpointSettings) -> Checkpointer:
        """The checkpointer the ``[checkpoint]`` settings ``cs`` describe (its HMAC key read)."""
        key = read_key(cs.hmac_key_file) if cs.hmac_key_file is not None else None
        return cls(CheckpointStore(cs.dir, cs.keep, hmac_key=key), cs.every_records,
                   cs.every_seconds)  # fmt: skip

    def __init__(self, store: CheckpointStore, every_records: int, every_seconds: float) -> None:
        self.store = store
        self.every_records = every_records
        self.every_seconds = every_seconds
        #: The next offset of every partition: shared with the source (which seeks there) and
        #: advanced by the loop once a batch is handled.
        self.offsets: dict[tuple[str, int], int] = {}
        #: The input topics' ids the offsets belong to (the source keeps them; a re-created topic
        #: has another id, and its offsets are reset).
        self.topic_ids: dict[str, str] = {}
        self.last: Checkpoint | None = None  # the newest checkpoint written or restored
        self.changed = False  # anything to commit since the last checkpoint
        self.since = 0  # records handled since the last checkpoint
        self._at = time.monotonic()

    # -- what the loop reports ---------------------------------------------------------------

    def handled(self, last: Mapping[tuple[str, int], int], records: int) -> None:
        """A batch of ``records`` records is fully handled (each predicted or dead-lettered):
        the next offset of each of its partitions (after ``last``, its last offset there)
        becomes part of the next commit."""
        offsets = self.offsets
        for tp, offset in last.items():
            offsets[tp] = offset + 1
        self.since += records
        self.changed = True

    def touch(self) -> None:
        """Something else changed that the next commit must hold (a reload, an offset reset)."""
        self.changed = True

    def due(self) -> bool:
        """Whether the loop should commit now."""
        if self.since >= self.every_records:
            return True
        return self.changed and time.monotonic() - self._at >= self.every_seconds

    # -- commit and restore -------------------------------------------------------------------

    def commit(
        self,
        reason: str,
        learner: Learner,
        counters: dict[str, Any],
        outbox: list[Output],
        monitor: StreamMonitor | None = None,
    ) -> Checkpoint:
        """Write the learner (quiescent: no round in flight), the monitor, the offsets, the
        counters and the outbox as one atomic checkpoint; returns it."""
        meta, arrays = learner.to_state()
        digest = state_digest(meta, arrays)  # of the state written: serialised once
        monitor_meta = None
        if monitor is not None:
            monitor_meta, monitor_arrays = monitor.to_state()
            arrays = {**arrays, **monitor_arrays}
        summary = {"model_digest": digest, **introspect(learner)}
        content = {
            "reason": reason,
            "offsets": encode_offsets(self.offsets),
            "topic_ids": dict(sorted(self.topic_ids.items())),
            "counters": counters,
            "model": {"class": class_path(learner), "meta": meta},
            "summary": summary,
            "outbox": [o.to_json() for o in outbox],
            "monitor": monitor_meta,
        }
        self.last = self.store.save(content, arrays)
        self.since = 0
        self.changed = False
        self._at = time.monotonic()
        return self.last

    def restore(self, template: Learner) -> tuple[Checkpoint, Learner, list[Output]] | None:
        """The newest usable checkpoint for a learner of ``template``'s class: (checkpoint,
        learner, outbox), the offsets taken; ``None`` when there is none. A checkpoint of
        another learner class is fatal (:class:`CheckpointMismatch`); one whose model does not
        load as saved is skipped for an older one (counted in ``store.skipped``)."""
        self.store.clean_temporaries()
        found = self.store.load_accepted(lambda ckpt: self._loadable(ckpt, template))
        if found is None:
            return None
        ckpt, (learner, outbox) = found
        self.offsets.update(ckpt.offsets)
        self.topic_ids.update(ckpt.topic_ids)
        self.last = ckpt
        return ckpt, learner, outbox

    @staticmethod
    def _loadable(ckpt: Checkpoint, template: Learner) -> tuple[Learner, list[Output]]:
        model, summary = ckpt.meta.get("model") or {}, ckpt.meta.get("summary") or {}
        if not isinstance(model.get("meta"), dict) or not isinstance(
            summary.get("model_digest"), str
        ):
            raise CheckpointError(f"{ckpt.path}: malformed: no model state or digest")
        if model.get("class") != class_path(template):
            raise CheckpointMismatch(
                f"{ckpt.path} holds a {model['class']} but the configuration builds a "
                f"{class_path(template)}"
            )
        arrays = {k: v for k, v in ckpt.arrays.items() if k != INPUTS}
        try:
            learner = type(template).from_state(model["meta"], arrays)
            digest = state_digest(*learner.to_state())
            outbox = [Output.from_json(o) for o in ckpt.meta.get("outbox", [])]
        except (ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
            raise CheckpointError(f"{ckpt.path}: the model does not load ({exc!r})") from exc
        if digest != summary["model_digest"] and not upgraded(
            model["meta"], arrays, learner, summary["model_digest"]
        ):
            raise CheckpointError(
                f"{ckpt.path}: the model does not load as saved (digest {digest} differs)"
            )
        if (
            isinstance(learner, Memory)
            and isinstance(template, Memory)  # (of the same class: checked above)
            and learner.window != template.window
        ):  # the saved window is the model's (its ring is that long): said, not applied
            log.warning(
                "%s: the checkpointed %s keeps its window of %d examples; "
                "learner.memory_window = %d applies to a model started in a new checkpoint "
                "directory",
                ckpt.path, type(learner).__name__, learner.window, template.window,
            )  # fmt: skip
        return learner, outbox


def _versions(meta: object) -> dict[str, Any]:
    """The (format: version) pairs of a saved state's meta, nested ones included."""
    out: dict[str, Any] = {}
    if isinstance(meta, dict):
        if isinstance(meta.get("format"), str) and "version" in meta:
            out[meta["format"]] = meta["version"]
        for value in meta.values():
            out.update(_versions(value))
    return out


def upgraded(
    meta: dict[str, Any], arrays: dict[str, np.ndarray], learner: Learner, digest: str
) -> bool:
    """Whether a model state saved by an older streammkl (an older version of one of its
    formats) was loaded as it was saved: its stored bytes have the digest it was saved with,
    and loading converted it to the current formats (so its digest is now another). Logged."""
    saved, now = _versions(meta), _versions(learner.to_state()[0])
    older = [f for f, v in saved.items() if isinstance(v, int) and v < now.get(f, v)]
    if not older or state_digest(meta, arrays) != digest:
        return False
    log.info(
        "the checkpoint's model was saved by an older streammkl (%s): loaded and upgraded "
        "(its digest changes with the format, the model does not)",
        ", ".join(f"{f} version {saved[f]} -> {now[f]}" for f in older),
    )
    return True
