"""``POST /predict``: the prediction the model makes for one record, from a published snapshot.

The loop thread publishes a *snapshot* of the model at each checkpoint (and at the restore of
one): a learner of its own, built from the checkpoint's state (:meth:`Predictor.published`), the
very state ``streammkl export`` writes, so the endpoint predicts exactly what the exported model
(``MKLClassifier.load``) predicts for the checkpoint it names. Publishing is one reference
assignment; the request handlers (HTTP worker threads) read that reference and never touch the
live learner, so a prediction neither blocks nor changes learning. A snapshot is as old as the
last checkpoint (``checkpoint.every_seconds``, 30 s by default, or ``checkpoint.every_records``);
each answer says which checkpoint and how many examples its model had learned.

The body is one record in the format the daemon consumes from Kafka (:func:`streammkl.wire.
decode`, with the ``[records]`` settings); its ``y``, if any, is ignored. The answers:

- 200 ``{"prediction": ..., "proba": {...}, "model_version": n, "checkpoint": seq,
  "snapshot_age_seconds": s}`` (``proba`` for classification only; regression answers the value);
- 400 with the decoder's reason and message for a body that is not a valid record;
- 413 for a body larger than ``records.max_bytes`` (the web server's limit);
- 503 before the first snapshot (nothing checkpointed or restored yet), or for a model the
  endpoint cannot serve (a ``learner.factory`` class, a sequence or parsing task).

Predictions on one snapshot are made one at a time (a lock): a learner's predict methods are
not promised thread-safe, and each takes microseconds.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from streammkl import wire
from streammkl.daemon.checkpoints.export import LEARNERS
from streammkl.daemon.checkpoints.store import Checkpoint
from streammkl.daemon.config import RecordSettings
from streammkl.daemon.http.webserver import Request, Response
from streammkl.daemon.learning.stream_monitor import INPUTS

__all__ = ["SERVED_TASKS", "Predictor"]

log = logging.getLogger(__name__)

#: The tasks whose models ``POST /predict`` serves.
SERVED_TASKS = ("classification", "regression")
_JSON = "application/json"


@dataclass(frozen=True)
class _Snapshot:
    """A model of the loop's, frozen at a checkpoint: never changed once published."""

    model: Any
    checkpoint: int
    version: int  # examples the model had learned
    published: float  # time.time() of the publication


class Predictor:
    """Serve predictions from the latest snapshot the loop published.

    Parameters
    ----------
    records
        The ``[records]`` settings (the decoder's limits, ``dim``, ``strict``, ``max_bytes``).
    task
        The learner's task (``learner.task``); only :data:`SERVED_TASKS` are served.
    """

    def __init__(self, records: RecordSettings, task: str) -> None:
        self.records = records
        self.task = task
        self._limits = records.wire_limits()
        self._snapshot: _Snapshot | None = None
        self._why_not = "no model snapshot yet: the daemon has not checkpointed or restored one"
        self._lock = threading.Lock()  # one prediction at a time on a snapshot

    @property
    def max_body(self) -> int:
        """The largest body accepted, in bytes (``records.max_bytes``, as on Kafka)."""
        return int(self.records.max_bytes)

    @property
    def snapshot_checkpoint(self) -> int | None:
        """The sequence number of the checkpoint served (``None`` before the first)."""
        snap = self._snapshot
        return None if snap is None else snap.checkpoint

    # -- the loop thread ----------------------------------------------------------------------

    def published(self, ckpt: Checkpoint) -> None:
        """Build a snapshot from ``ckpt`` (just written or restored) and serve it from now on.

        Called on the loop thread; the arrays are copied (a checkpoint just written holds the
        live learner's own arrays), so the snapshot shares nothing with the learner.
        """
        if self.task not in SERVED_TASKS:
            served = " and ".join(SERVED_TASKS)
            self._why_not = f"POST /predict serves {served} models, not {self.task}"
            return
        model_meta = ckpt.meta.get("model") or {}
        cls = LEARNERS.get(str(model_meta.get("class")))
        if cls is None:
            self._why_not = (
                f"the model is a {model_meta.get('class')!r}, not one of streammkl's learners: "
                "POST /predict cannot serve it"
            )
            return
        arrays = {k: np.array(v, copy=True) for k, v in ckpt.arrays.items() if k != INPUTS}
        try:
            model = cls.from_state(model_meta["meta"], arrays)
        except Exception as exc:  # a snapshot is a convenience: never a reason to stop learning
            log.warning("could not build the /predict snapshot of checkpoint %d: %r", ckpt.seq, exc)
            return
        version = int((ckpt.meta.get("counters") or {}).get("examples_learned", 0))
        self._snapshot = _Snapshot(model, ckpt.seq, version, time.time())

    # -- HTTP worker threads ------------------------------------------------------------------

    def handle(self, request: Request) -> Response:
        """``POST /predict``: one record in, the snapshot's prediction out (JSON)."""
        snap = self._snapshot  # one atomic read of the reference
        if snap is None:
            return _error(503, "unavailable", self._why_not, {"Retry-After": "5"})
        rs = self.records
        rec = wire.decode(
            request.body, dim=rs.dim, strict=rs.strict, max_bytes=rs.max_bytes, kind="vector",
            numeric_label=self.task == "regression", limits=self._limits,
        )  # fmt: skip
        if isinstance(rec, wire.DecodeError):
            return _error(400, rec.reason, rec.message)
        x = rec.x if isinstance(rec.x, dict) else {str(i): v for i, v in enumerate(rec.x)}
        with self._lock:
            try:
                prediction = snap.model.predict_one(x)
                proba = snap.model.predict_proba_one(x) if self.task == "classification" else None
            except (ValueError, TypeError, KeyError) as exc:  # the model refuses the record
                return _error(400, "invalid_record", f"the model cannot predict it: {exc}")
        answer: dict[str, Any] = {"id": rec.id, "prediction": prediction}
        if proba is not None:
            answer["proba"] = proba
        answer |= {
            "model_version": snap.version,
            "checkpoint": snap.checkpoint,
            "snapshot_age_seconds": round(max(0.0, time.time() - snap.published), 3),
        }
        return Response(200, _dumps(answer), _JSON)


def _dumps(obj: dict[str, Any]) -> bytes:
    """Compact JSON; labels as object keys the way ``json.dumps`` writes them (``True`` ->
    ``"true"``), as in the predictions topic's messages."""
    try:
        return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS)
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(obj, separators=(",", ":"), default=str).encode()


def _error(
    status: int, reason: str, message: str, headers: dict[str, str] | None = None
) -> Response:
    """A JSON error answer: ``{"error": reason, "message": message}``."""
    body = json.dumps({"error": reason, "message": message}).encode()
    return Response(status, body, _JSON, headers or {})
