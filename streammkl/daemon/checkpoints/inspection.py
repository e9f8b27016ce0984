"""What ``streammkl inspect`` shows: a JSON-able summary of a daemon's newest valid checkpoint.

Used by the CLI, the demo's closing summary and the benchmarks; it reads checkpoints only (it
never opens Kafka), so it sits below both the CLI and the demo.
"""

from __future__ import annotations

import os
from typing import Any

from streammkl.daemon.checkpoints.store import CheckpointStore, read_key

__all__ = ["inspect_checkpoint"]


def inspect_checkpoint(
    directory: str | os.PathLike[str], hmac_key_file: str | None = None
) -> dict[str, Any]:
    """Summary of the newest valid checkpoint in ``directory`` (JSON-able); with
    ``hmac_key_file``, of the newest one signed with that key."""
    key = read_key(hmac_key_file) if hmac_key_file else None
    store = CheckpointStore(directory, hmac_key=key)
    ckpt = store.load_latest()
    if ckpt is None:
        raise FileNotFoundError(f"no checkpoint in {directory}")
    c = ckpt.counters
    s = ckpt.meta["summary"]
    labelled = c.get("labelled_predictions", 0)
    return {
        "checkpoint": str(ckpt.path),
        "seq": ckpt.seq,
        "created": ckpt.meta["created"],
        "reason": ckpt.meta.get("reason"),
        "corrupt_skipped": store.fallbacks,
        "skipped_by_reason": store.skipped,
        "model_class": ckpt.meta["model"]["class"],
        "model_digest": s["model_digest"],
        "examples_learned": c.get("examples_learned", 0),
        "records_consumed": c.get("records_consumed", 0),
        "records_predicted": c.get("records_predicted", 0),
        "records_rejected": c.get("records_rejected", 0),
        "rejected_by_reason": c.get("rejected_by_reason", {}),
        "dead_letters": c.get("dead_letters", 0),
        "offset_resets": c.get("offset_resets", 0),
        "prequential_accuracy": (c.get("correct_predictions", 0) / labelled) if labelled else None,
        "online_loss": c.get("online_loss", 0.0),
        "offsets": ckpt.meta["offsets"],
        "kernel_weights": s.get("kernel_weights", {}),
        "block_norms": s.get("block_norms", {}),
        "kernel_bandwidths": s.get("kernel_bandwidths", {}),
        "active_kernels": s.get("active_kernels"),
        "support_vectors": s.get("support_vectors"),
        "monitor": _monitor_summary(ckpt.meta.get("monitor")),
        "outbox": len(ckpt.meta.get("outbox", [])),
        "size_bytes": ckpt.size_bytes,
    }


def _monitor_summary(meta: dict[str, Any] | None) -> dict[str, Any] | None:
    state = (meta or {}).get("monitor")
    if not state:
        return None
    objective = state.get("objective", {})
    return {
        "examples": state.get("n"),
        "online_objective": objective.get("loss", 0.0) + objective.get("regularization", 0.0),
        "drift_detections": state.get("drift_detections"),
        "last_drift_example": state.get("last_drift_example"),
    }
