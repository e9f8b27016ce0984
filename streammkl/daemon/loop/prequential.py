"""The prequential step of the daemon: per batch, decode -> learn_predict -> emit -> account.

:class:`PrequentialStep` is an object the :class:`~streammkl.daemon.loop.runner.Runner` holds: it
works on the runner's learner step, counters, offsets, sink and metrics, and never touches Kafka
itself. Every record is either predicted (then learned when labelled) or dead-lettered with its
reason; nothing a record contains can stop the loop.

**One loop for every learner.** A batch is decoded (:meth:`PrequentialStep._decode_all`); the
learner step (:mod:`streammkl.daemon.learning.drivers`) returns one outcome per record --
``(prediction, probabilities)`` or ``None`` -- and the errors as data (``refused``: index -> refusal
or exception); :meth:`PrequentialStep._emit` writes predictions and dead letters and counts them.
Compiled runs are an optimisation inside the step, not a second loop: a streammkl classifier's step
plans the batch's leading run (``plan_run``), which is learned on a learner thread (GIL released)
while the previous batch is emitted; every step learns the rest through ``learn_predict_many``, the
records that make the model grow one by one, admitted and marked in flight
(:class:`~streammkl.daemon.loop.guarded.GuardedLearning`).

Hot-loop choices (measured, ``benchmarks/daemon_throughput.py``): a prediction's JSON is written
by orjson (:func:`streammkl.daemon.loop.predictions.prediction_bytes`); histogram observations are
list appends folded once per batch; counters are kept in locals and added once per batch.
"""

from __future__ import annotations

import hashlib
import math
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from streammkl import wire
from streammkl.daemon.kafka.sink import Output
from streammkl.daemon.learning.admission import REASONS as ADMISSION_REASONS
from streammkl.daemon.learning.admission import Refusal
from streammkl.daemon.loop.guarded import GuardedLearning
from streammkl.daemon.loop.predictions import prediction_bytes

#: Rejection reasons (a bounded set: metric labels): wire's decode reasons, the admission's
#: (features, classes, work), a learner that raised on a record, and a record that killed the
#: process (:mod:`streammkl.daemon.checkpoints.inflight`).
REASONS = (*wire.REASONS, *(r for r in ADMISSION_REASONS if r not in wire.REASONS),
           "learner_error", "crashed_worker")  # fmt: skip

_INDEX_KEYS = tuple(str(i) for i in range(4096))  # feature names of dense vectors


def _named(x: list[float]) -> dict[str, float]:
    """A dense vector's features, named ``"0"``, ``"1"``, ... (as the learners see them)."""
    if len(x) <= len(_INDEX_KEYS):
        return dict(zip(_INDEX_KEYS, x, strict=False))
    return {str(i): v for i, v in enumerate(x)}


class PrequentialStep(GuardedLearning):
    """The pure step between the runner's I/O edges: batches in, predictions and dead letters
    to the sink, counts to the counters and metrics, next offsets to the checkpointer.

    Parameters
    ----------
    settings, metrics, sink
        The runner's settings, metrics and sink.
    marker
        The in-flight marker (:class:`~streammkl.daemon.checkpoints.inflight.InflightMarker`).
    checkpoints
        The :class:`~streammkl.daemon.checkpoints.committer.Checkpointer` (told each handled batch).
    counters
        The runner's counters (checkpointed with the model).
    """

    #: The batch whose learning is under way: (batch, valid, xs, ys, run end, future).
    _inflight: tuple[Any, ...] | None = None
    _learn_pool: ThreadPoolExecutor | None = None

    def __init__(
        self, settings: Any, metrics: Any, sink: Any, marker: Any, checkpoints: Any,
        counters: dict[str, Any],
    ) -> None:  # fmt: skip
        self.settings, self.metrics, self.sink = settings, metrics, sink
        self.marker, self.checkpoints, self.counters = marker, checkpoints, counters
        self._wire_limits = settings.records.wire_limits()
        r = settings.records
        self._classes = frozenset(r.classes) if r.classes is not None else None
        self.learner_step: Any = None
        self.admission: Any = None
        #: A batch was accounted since the runner last read the model (its view is stale).
        self.stale = False
        #: When set (a mixing group member), every example learned is appended to it as
        #: ``(x, y, (prediction, probabilities))`` (the group's hindsight view, daemon.group).
        self.learned_sink: list[tuple[Any, Any, Any]] | None = None

    def use(self, learner_step: Any, admission: Any) -> None:
        """Learn with this step (:mod:`streammkl.daemon.learning.drivers`) under this admission
        from now on (the runner's learner changed: built, restored)."""
        self.learner_step, self.admission = learner_step, admission

    def close(self) -> None:
        """Stop the learner thread (after :meth:`drain`)."""
        if self._learn_pool is not None:
            self._learn_pool.shutdown(wait=True)
            self._learn_pool = None

    def _reject(self, msg: Any, reason: str, message: str) -> None:
        c = self.counters
        c["records_rejected"] += 1
        c["rejected_by_reason"][reason] = c["rejected_by_reason"].get(reason, 0) + 1
        c["dead_letters"] += 1
        self.metrics.rejected.labels(reason).inc()
        self.metrics.dead_letters.inc()
        headers: tuple[tuple[str, bytes], ...] = (
            ("reason", reason.encode()),
            ("error", message[:1000].encode(errors="replace")),
            ("source_topic", msg.topic.encode()),
            ("source_partition", str(msg.partition).encode()),
            ("source_offset", str(msg.offset).encode()),
        )
        k = self.settings.kafka
        value = msg.value or b""
        if len(value) > k.dead_letter_max_bytes:  # deliverable, so that it is ever delivered
            headers += (
                ("value_truncated_from", str(len(value)).encode()),
                ("value_sha256", hashlib.sha256(value).hexdigest().encode()),
            )
            value = value[: k.dead_letter_max_bytes]
        self.sink.send(Output(k.dead_letter_topic, value, msg.key, headers))

    def process(self, batch: list[Any]) -> None:
        """Handle a batch of consumer records in order (the pure step between the I/O edges).

        Pipelined: this batch is decoded; the previous batch's learning is finished (its run
        waited for, its remaining records learned); this batch's leading compiled run, if the
        step plans one, is started on the learner thread, where it runs without the GIL; and
        only then are the previous batch's predictions written and its offsets taken, while the
        learner works. The rest of this batch is learned when the next batch (or
        :meth:`_drain`) comes, in order. Whatever reads the model, the monitor or the offsets
        calls :meth:`drain` first.
        """
        high = {(msg.topic, msg.partition): msg.offset for msg in batch}  # offsets ascend
        self.marker.entered(high)
        step = self.learner_step
        valid = self._decode_all(
            batch, kind=step.record_kind, numeric_label=not step.classifier and not step.sequence
        )
        finished = self._finish_learning()
        xs, ys = [rec.x for _, rec in valid], [rec.y for _, rec in valid]
        if self.marker.watching and self._any_alone(valid):
            end, X, Y = 0, None, None  # after a crash: every record alone and marked
        else:
            end, X, Y = step.plan_run(xs, ys)
        future = None
        if end:
            if self._learn_pool is None:
                self._learn_pool = ThreadPoolExecutor(1, thread_name_prefix="streammkl-learn")
            future = self._learn_pool.submit(step.run_rounds, X, Y)
        self._inflight = (batch, valid, xs, ys, end, future)
        if finished is not None:  # reads no model state the running rounds change
            self._emit(*finished)

    def _decode_all(
        self,
        batch: list[Any],
        kind: Literal["vector", "sequence", "sentence"] = "vector",
        numeric_label: bool = False,
    ) -> list[tuple[Any, Any]]:
        """Decode a batch in order: the valid (message, record) pairs, a dense vector's
        features named ``"0"``, ``"1"``, ...; the rest dead-lettered. Offsets are taken by
        :meth:`_account`, once the whole batch is handled."""
        rs = self.settings.records
        decode, decode_error = wire.decode, wire.DecodeError
        dim, classes, strict, max_bytes = rs.dim, self._classes, rs.strict, rs.max_bytes
        named = _named
        obs_decode = self.metrics.decode_seconds.observe
        perf = time.perf_counter
        marker = self.marker
        watching = marker.watching
        limits = self._wire_limits
        valid = []
        for msg in batch:
            if watching and marker.condemned(msg.topic, msg.partition, msg.offset):
                deaths = marker.condemned(msg.topic, msg.partition, msg.offset)
                self._reject(
                    msg, "crashed_worker",
                    f"the process died {deaths} time(s) while this record was in flight; it is "
                    "not learned again (limits.crash_strikes)",
                )  # fmt: skip
                continue
            t0 = perf()
            rec = decode(
                msg.value or b"", dim=dim, classes=classes, strict=strict, max_bytes=max_bytes,
                kind=kind, numeric_label=numeric_label, limits=limits,
            )  # fmt: skip
            obs_decode(perf() - t0)
            if isinstance(rec, decode_error):
                self._reject(msg, rec.reason, rec.message)
                continue
            if kind == "vector" and not isinstance(rec.x, dict):
                # kind="vector": x is one dense vector, never a sequence (decode rejects those);
                # mypy cannot see that invariant, and a cast() would cost a call per record.
                rec.x = named(rec.x)  # type: ignore[arg-type]
            valid.append((msg, rec))
        return valid

    def drain(self) -> None:
        """Finish the batch in flight, if any: wait for its run, learn its remaining records,
        emit its predictions, take its offsets and counts. After it the learner is quiescent.

        Threads: the learner thread touches only the learner, inside ``run_rounds``, and this
        waits for it. With kafka-python a revocation calls this (through the checkpoint) on its
        IO thread, but only from within ``consumer.poll`` (the coordinator's rebalance), while
        the loop thread waits there (measured: the listener runs on ``kafka-io-*`` during the
        loop's poll); librdkafka calls it on the loop thread itself, inside ``consume``: the two
        never run it at the same time."""
        finished = self._finish_learning()
        if finished is not None:
            self._emit(*finished)

    def _finish_learning(self) -> tuple[Any, ...] | None:
        """The learning half of :meth:`drain`: the in-flight batch's run waited for and its
        remaining records learned; returns what :meth:`_emit` needs (or ``None``)."""
        if self._inflight is None:
            return None
        batch, valid, xs, ys, end, future = self._inflight
        self._inflight = None
        outcomes: list[Any] = []
        per = 0.0
        if future is not None:
            outcomes, seconds = future.result()  # (observed by the monitor, when it is on)
            per = seconds / end
        refused: dict[int, Exception | Refusal] = {}
        if end < len(xs):
            t0 = time.perf_counter()
            outcomes += self._learn_tail(valid, xs, ys, end, refused)
            took = (time.perf_counter() - t0) / (len(xs) - end)
            per = took if not end else (per * end + took * (len(xs) - end)) / len(xs)
        return batch, valid, refused, outcomes, per

    def _emit(
        self,
        batch: list[Any],
        valid: list[tuple[Any, Any]],
        refused: dict[int, Exception | Refusal],
        outcomes: list[Any],
        per: float,
    ) -> None:
        """Predictions, dead letters and accounting of a batch whose rounds are done; the
        learn (predict) histogram observes the batch's mean time per learned (predict-only)
        record. The prequential loss: log-loss of the probabilities (classification), wrong
        labels (sequences: per label, as the per-character accuracy), squared error
        (regression)."""
        out_topic = self.settings.kafka.predictions_topic
        top_k = self.settings.limits.prediction_top_k
        send = self.sink.send_prediction
        m = self.metrics
        obs_learn, obs_predict = m.learn_seconds.observe, m.predict_seconds.observe
        step = self.learner_step
        sequence, classifier = step.sequence, step.classifier and not step.sequence
        learned = predicted = labelled = correct = 0
        loss = 0.0
        version = self.counters["examples_learned"]
        events: list[float] = []
        log, isfinite = math.log, math.isfinite
        for i, (msg, rec) in enumerate(valid):
            outcome, y = outcomes[i], rec.y
            error = refused.get(i)
            if outcome is None:  # refused by the admission, or the prediction failed
                if isinstance(error, Refusal):
                    self._reject(msg, error.reason, error.message)
                else:
                    self._reject(msg, "learner_error", f"predict failed: {error!r}")
                continue
            prediction, proba = outcome
            predicted += 1
            record_version = version
            if y is None:
                obs_predict(per)
            else:
                if error is None:
                    learned += 1
                    version += 1
                    obs_learn(per)
                else:
                    self._reject(msg, "learner_error", f"learn failed: {error!r}")
                if classifier:
                    labelled += 1
                    p = proba.get(y, 0.0) if proba else 0.0
                    loss -= log(p if p > 1e-15 else 1e-15)
                    correct += prediction == y
                elif sequence:
                    labelled += len(y)
                    hits = sum(1 for p, t in zip(prediction or (), y, strict=False) if p == t)
                    correct += hits
                    loss += len(y) - hits
                else:
                    labelled += 1
                    err = prediction - float(y) if prediction is not None else math.inf
                    if isfinite(err * err):  # a diverged model must not poison the total
                        loss += err * err
            if out_topic:
                send(
                    out_topic,
                    prediction_bytes(
                        rec.id, prediction, proba, record_version, msg.topic, msg.partition,
                        msg.offset, top_k,
                    ),
                    msg.key,
                )  # fmt: skip
            # Kafka timestamp (produce time); the record's own ts (event time, possibly a replay's
            # historical time) only when the broker gave none.
            ts = msg.timestamp
            events.append(ts / 1000.0 if ts is not None and ts >= 0 else (rec.ts or time.time()))
        if self.learned_sink is not None:  # a mixing group keeps its round's examples
            self.learned_sink.extend(
                (rec.x, rec.y, outcomes[i])
                for i, (_, rec) in enumerate(valid)
                if rec.y is not None and outcomes[i] is not None and i not in refused
            )
        self._account(batch, events, predicted, learned, labelled, correct, loss)

    def _account(
        self,
        batch: list[Any],
        events: list[float],
        predicted: int,
        learned: int,
        labelled: int,
        correct: int,
        loss: float,
    ) -> None:
        """Fold a processed batch's counts into the counters and metrics, and take the next
        offset of every record of the batch (each is predicted or dead-lettered by now)."""
        c, m = self.counters, self.metrics
        topics: dict[str, int] = {}
        for msg in batch:
            topics[msg.topic] = topics.get(msg.topic, 0) + 1
        self.checkpoints.handled(batch)  # the next offsets: part of the next commit
        now = time.time()
        obs_latency = m.latency_seconds.observe
        for event in events:
            obs_latency(now - event if now > event else 0.0)
        c["records_consumed"] += len(batch)
        c["records_predicted"] += predicted
        c["examples_learned"] += learned
        c["labelled_predictions"] += labelled
        c["correct_predictions"] += int(correct)
        c["online_loss"] += loss
        for topic, count in topics.items():
            m.consumed.labels(topic).inc(count)
        m.learned.inc(learned)
        m.predicted.inc(predicted)
        m.flush()
        self.stale = True
