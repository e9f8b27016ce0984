"""What ``streammkl inspect`` shows: a JSON-able summary of a daemon's newest valid checkpoint.

Used by the CLI, the demo's closing summary and the benchmarks; it reads checkpoints only (it
never opens Kafka), so it sits below both the CLI and the demo.
"""

from __future__ import annotations

import os
from typing import Any

from streammkl.daemon.checkpoints.store import CheckpointStore, read_key
from streammkl.daemon.learning.scores import prequential_scores

__all__ = ["TASKS", "inspect_checkpoint", "render_text"]

#: The task of each of streammkl's learner classes (what its prequential counts mean).
TASKS = {
    "streammkl.river.classifier:MKLClassifier": "classification",
    "streammkl.river.regressor:MKLRegressor": "regression",
    "streammkl.river.memory_classifier:MemoryClassifier": "classification",
    "streammkl.river.memory_regressor:MemoryRegressor": "regression",
    "streammkl.structured.labeler:SequenceLabeler": "sequence",
    "streammkl.structured.parser:DependencyParser": "parsing",
}


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
    task = TASKS.get(ckpt.meta["model"]["class"], "classification")
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
        "task": task,
        # the task's own scores (an RMSE for a regression, never an "accuracy")
        "prequential": prequential_scores(
            task, labelled, c.get("correct_predictions", 0), c.get("online_loss", 0.0)
        ),
        "prequential_accuracy": (c.get("correct_predictions", 0) / labelled)
        if labelled and task != "regression"
        else None,
        "online_loss": c.get("online_loss", 0.0),
        "offsets": ckpt.meta["offsets"],
        "kernel_weights": s.get("kernel_weights", {}),
        "block_norms": s.get("block_norms", {}),
        "kernel_bandwidths": s.get("kernel_bandwidths", {}),
        "active_kernels": s.get("active_kernels"),
        "support_vectors": s.get("support_vectors"),
        # a memory preset's (learner.memory_window) weight on its vote
        **({"memory_weight": s["memory_weight"]} if "memory_weight" in s else {}),
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


def render_text(info: dict[str, Any]) -> str:
    """``inspect``'s summary for a person: times as UTC dates (with their age), offsets as
    ``topic/partition: offset``, numbers rounded; ``--json`` keeps the raw values."""
    import datetime
    import time

    lines: list[str] = []
    for key, value in info.items():
        if key == "created" and isinstance(value, int | float):
            when = datetime.datetime.fromtimestamp(value, datetime.UTC)
            age = max(0.0, time.time() - value)
            lines.append(f"created: {when:%Y-%m-%d %H:%M:%S} UTC ({_age(age)} ago)")
        elif key == "offsets" and isinstance(value, dict):
            lines.append("offsets (next to read):")
            for topic, parts in sorted(value.items()):
                for part, offset in sorted(parts.items(), key=lambda kv: int(kv[0])):
                    lines.append(f"  {topic}/{part}: {offset}")
        elif isinstance(value, dict):
            lines.append(f"{key}:" + ("" if value else " -"))
            for k, v in value.items():
                lines.append(f"  {k}: {_fmt(v)}")
        else:
            lines.append(f"{key}: {_fmt(value)}")
    return "\n".join(lines)


def _fmt(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"
