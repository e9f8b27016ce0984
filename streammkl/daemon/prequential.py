"""The prequential step of the daemon: per record, decode -> predict -> learn -> emit.

:class:`PrequentialStep` is mixed into :class:`~streammkl.daemon.runner.Runner`: it works on the
runner's learner, counters, offsets, sink and metrics, and never touches Kafka itself. Every
record is either predicted (then learned when labelled) or dead-lettered with its reason; nothing
a record contains can stop the loop.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

from streammkl import wire
from streammkl.daemon.sink import Output

#: Rejection reasons: wire's decode reasons plus a learner that raised on a record.
REASONS = (*wire.REASONS, "learner_error")

_LABEL_KEYS: dict[Any, str] = {}
_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


def label_key(label: Any) -> str:
    """JSON object key of a label (``True`` -> ``"true"``, ``1`` -> ``"1"``), cached."""
    key = _LABEL_KEYS.get((type(label), label))
    if key is None:
        key = label if isinstance(label, str) else json.dumps(label)
        if len(_LABEL_KEYS) < 10_000:
            _LABEL_KEYS[(type(label), label)] = key
    return key


class PrequentialStep:
    """Batch processing for the runner (attributes are the runner's; see its ``__init__``)."""

    counters: dict[str, Any]
    offsets: dict[tuple[str, int], int]
    learner: Any
    classifier: bool
    settings: Any
    metrics: Any
    sink: Any
    _classes: frozenset[Any] | None
    _since_checkpoint: int
    _dirty: bool
    _view_stale: bool

    def _reject(self, msg: Any, reason: str, message: str) -> None:
        c = self.counters
        c["records_rejected"] += 1
        c["rejected_by_reason"][reason] = c["rejected_by_reason"].get(reason, 0) + 1
        c["dead_letters"] += 1
        self.metrics.rejected.labels(reason).inc()
        self.metrics.dead_letters.inc()
        headers = (
            ("reason", reason.encode()),
            ("error", message[:1000].encode()),
            ("source_topic", msg.topic.encode()),
            ("source_partition", str(msg.partition).encode()),
            ("source_offset", str(msg.offset).encode()),
        )
        self.sink.send(
            Output(self.settings.kafka.dead_letter_topic, msg.value or b"", msg.key, headers)
        )

    def _predict(self, x: dict[str, float]) -> tuple[Any, dict[str, float] | None]:
        if not self.classifier:
            value = float(self.learner.predict_one(x))
            return (value if math.isfinite(value) else None), None
        proba = self.learner.predict_proba_one(x)
        if not proba:
            return None, {}
        best = max(proba, key=proba.__getitem__)  # first maximum in the learner's class order
        return best, {label_key(k): float(v) for k, v in proba.items()}

    def process(self, batch: list[Any]) -> None:
        """Handle a batch of consumer records in order (the pure step between the I/O edges).

        Per record: decode, predict (prequential: before learning), learn if labelled, emit the
        prediction; a record that cannot be decoded or that the learner refuses is dead-lettered.
        Hot loop: attribute lookups are hoisted and counters kept in locals until the end.
        """
        c = self.counters
        m = self.metrics
        out_topic = self.settings.kafka.predictions_topic
        rs = self.settings.records
        perf = time.perf_counter
        decode, decode_error = wire.decode, wire.DecodeError
        obs_decode, obs_predict = m.decode_seconds.observe, m.predict_seconds.observe
        obs_learn, obs_latency = m.learn_seconds.observe, m.latency_seconds.observe
        learn_one, predict = self.learner.learn_one, self._predict
        send, offsets, classifier = self.sink.send, self.offsets, self.classifier
        dim, classes, strict, max_bytes = rs.dim, self._classes, rs.strict, rs.max_bytes
        learned = predicted = labelled = correct = 0
        loss = 0.0
        version = c["examples_learned"]
        events: list[float] = []
        topics: set[str] = set()
        for msg in batch:
            topics.add(msg.topic)
            t0 = perf()
            rec = decode(
                msg.value or b"", dim=dim, classes=classes, strict=strict, max_bytes=max_bytes,
                kind="vector", numeric_label=not classifier,
            )  # fmt: skip
            t1 = perf()
            obs_decode(t1 - t0)
            offsets[(msg.topic, msg.partition)] = msg.offset + 1
            if isinstance(rec, decode_error):
                self._reject(msg, rec.reason, rec.message)
                continue
            x = rec.x if isinstance(rec.x, dict) else {str(i): v for i, v in enumerate(rec.x)}
            try:
                prediction, proba = predict(x)  # type: ignore[arg-type]
            except Exception as exc:  # the loop never dies on input
                self._reject(msg, "learner_error", f"predict failed: {exc!r}")
                continue
            t2 = perf()
            obs_predict(t2 - t1)
            predicted += 1
            y = rec.y
            record_version = version
            if y is not None:
                labelled += 1
                if classifier:
                    p = proba.get(label_key(y), 0.0) if proba else 0.0
                    loss -= math.log(p if p > 1e-15 else 1e-15)
                    correct += prediction == y
                else:
                    err = prediction - float(y) if prediction is not None else math.inf  # type: ignore[arg-type]
                    if math.isfinite(err * err):  # a diverged model must not poison the total
                        loss += err * err
                try:
                    learn_one(x, y)
                    obs_learn(perf() - t2)
                    learned += 1
                    version += 1
                except Exception as exc:
                    self._reject(msg, "learner_error", f"learn failed: {exc!r}")
            if out_topic:
                value = _ENCODE(
                    {
                        "id": rec.id,
                        "prediction": prediction,
                        "proba": proba,
                        "model_version": record_version,
                        "topic": msg.topic,
                        "partition": msg.partition,
                        "offset": msg.offset,
                    }
                )
                send(Output(out_topic, value.encode(), msg.key))
            # Kafka timestamp (produce time); the record's own ts (event time, possibly a replay's
            # historical time) only when the broker gave none.
            ts = msg.timestamp
            events.append(ts / 1000.0 if ts is not None and ts >= 0 else (rec.ts or time.time()))
        now = time.time()
        for event in events:
            obs_latency(now - event if now > event else 0.0)
        c["records_consumed"] += len(batch)
        c["records_predicted"] += predicted
        c["examples_learned"] += learned
        c["labelled_predictions"] += labelled
        c["correct_predictions"] += int(correct)
        c["online_loss"] += loss
        if len(topics) == 1:
            m.consumed.labels(batch[0].topic).inc(len(batch))
        else:
            for topic in topics:
                m.consumed.labels(topic).inc(sum(1 for msg in batch if msg.topic == topic))
        m.learned.inc(learned)
        m.predicted.inc(predicted)
        m.flush()
        self._since_checkpoint += len(batch)
        self._dirty = True
        self._view_stale = True
