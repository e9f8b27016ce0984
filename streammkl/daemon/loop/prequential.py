"""The prequential handling of a batch: decode -> learn_predict (guarded) -> emit -> account.

:class:`Prequential` is an object the :class:`~streammkl.daemon.loop.runner.Runner` holds: it
works on the runner's driver, counters, sink, metrics, in-flight marker and checkpointer, and
never touches Kafka itself. Every record is either predicted (then learned when labelled) or
dead-lettered with its reason; nothing a record contains can stop the loop.

**One loop for every learner.** A batch is decoded (:meth:`Prequential._decode_all`); the driver
(:mod:`streammkl.daemon.learning.drivers`) returns one outcome per record -- ``(prediction,
probabilities)`` or ``None`` -- and the errors as data (``refused``: index -> refusal or
exception); :meth:`Prequential._emit` writes predictions and dead letters and counts them.
Compiled runs are an optimisation inside the driver, not a second loop: a streammkl classifier's
driver plans the batch's leading run (``plan_run``), which is learned on a learner thread (GIL
released) while the previous batch is emitted; the rest is learned through the driver's
``learn_predict_many``. A batch that opens with records that make the model grow (a fresh
model's first batch, a new input or class) has them learned at once, alone (its head), and the
run that follows them planned and started on the learner thread in the same way.

**Guarded against poison records.** Records that bring nothing new are learned in stretches (the
driver's ``learn_predict_many``, with its compiled runs); a record that makes the model grow --
new features, a new class -- is checked by the admission
(:mod:`streammkl.daemon.learning.admission`: refused records become dead letters) and learned
alone, marked in flight (:mod:`streammkl.daemon.checkpoints.inflight`), so that if it kills the
process the restart knows which record it was. After a crash, the records the marker asks for (a
suspect; the span of a process that died outside a marked round) are learned alone too.

Hot-loop choices (measured, ``benchmarks/daemon_throughput.py``): a batch's predictions are
written by one orjson call (:func:`streammkl.daemon.loop.predictions.prediction_messages`) and
handed to the sink in one call, the batch's counts and model versions made a column at a time;
histogram observations are folded once per batch, the duration histograms (decode, learn,
predict) observing the batch's mean per record (one clock reading per batch, not two per record),
the latencies computed and folded with numpy; the checkpointer is told the batch's last offset
in each partition, not every record's.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import accumulate, repeat
from operator import attrgetter, is_not
from typing import Any, NamedTuple

import numpy as np

from streammkl import wire
from streammkl.daemon.checkpoints.committer import Checkpointer
from streammkl.daemon.checkpoints.inflight import InflightMarker
from streammkl.daemon.config import Settings
from streammkl.daemon.http.metrics import DaemonMetrics
from streammkl.daemon.kafka.clients.protocol import Message, Output
from streammkl.daemon.kafka.sink import Sink
from streammkl.daemon.learning.admission import REASONS as ADMISSION_REASONS
from streammkl.daemon.learning.admission import Admission, Refusal
from streammkl.daemon.learning.drivers import LearnerDriver, Run
from streammkl.daemon.learning.learner import Inputs, Learned, Outcome, Prediction, Probas, Target
from streammkl.daemon.loop.predictions import prediction_messages
from streammkl.wire import DecodeError, Record

#: Rejection reasons (a bounded set: metric labels): wire's decode reasons, the admission's
#: (features, classes, work), a learner that raised on a record, and a record that killed the
#: process (:mod:`streammkl.daemon.checkpoints.inflight`).
REASONS = (*wire.REASONS, *(r for r in ADMISSION_REASONS if r not in wire.REASONS),
           "learner_error", "crashed_worker")  # fmt: skip

_INDEX_KEYS = tuple(str(i) for i in range(4096))  # feature names of dense vectors
_topic = attrgetter("topic")
_x = attrgetter("x")


def _named(x: list[float]) -> dict[str, float]:
    """A dense vector's features, named ``"0"``, ``"1"``, ... (as the learners see them)."""
    if len(x) <= len(_INDEX_KEYS):
        return dict(zip(_INDEX_KEYS, x, strict=False))
    return {str(i): v for i, v in enumerate(x)}


#: A decoded record with the message it came in.
Valid = list[tuple[Message, Record]]
#: Records refused (by the admission) or that the learner raised on, by index in the batch.
Refused = dict[int, Exception | Refusal]
#: A batch's last offset in each of its partitions (in the order the batch first names them).
Offsets = dict[tuple[str, int], int]


class InFlight(NamedTuple):
    """The batch whose learning is under way (its leading run on the learner thread)."""

    batch: list[Message]
    last: Offsets
    valid: Valid
    xs: list[Inputs]
    ys: list[Target]
    start: int  # the records [0, start) were learned before the run (the head) ...
    end: int  # ... and the records [start, end) are the run's
    future: Future[tuple[list[Outcome], float]] | None
    head: list[Outcome]  # the head's outcomes
    refused: Refused  # the head's refusals and learner errors
    head_seconds: float


class Finished(NamedTuple):
    """A batch whose rounds are done, for :meth:`Prequential._emit`."""

    batch: list[Message]
    last: Offsets
    valid: Valid
    refused: Refused
    outcomes: list[Outcome]
    per: float  # seconds per record
    ys: list[Target]  # the valid records' labels


class Prequential:
    """The pure handling between the runner's I/O edges: batches in, predictions and dead
    letters to the sink, counts to the counters and metrics, next offsets to the checkpointer.

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

    #: The batch whose learning is under way.
    _inflight: InFlight | None = None
    _learn_pool: ThreadPoolExecutor | None = None

    def __init__(
        self, settings: Settings, metrics: DaemonMetrics, sink: Sink, marker: InflightMarker,
        checkpoints: Checkpointer, counters: dict[str, Any],
    ) -> None:  # fmt: skip
        self.settings, self.metrics, self.sink = settings, metrics, sink
        self.marker, self.checkpoints, self.counters = marker, checkpoints, counters
        self._wire_limits = settings.records.wire_limits()
        r = settings.records
        self._classes = frozenset(r.classes) if r.classes is not None else None
        self._decoders: dict[
            tuple[str, bool], Callable[[list[bytes]], list[Record | DecodeError]]
        ] = {}
        self.driver: LearnerDriver | None = None
        self.admission: Admission | None = None
        #: A batch was accounted since the runner last read the model (its view is stale).
        self.stale = False
        #: When set (a mixing member), every example learned is appended to it as
        #: ``(x, y, (prediction, probabilities))`` (the member's hindsight view).
        self.learned_sink: list[Learned] | None = None
        #: The consumed counter's child of each input topic (looked up once per topic).
        self._consumed: dict[str, Any] = {}

    def use(self, driver: LearnerDriver, admission: Admission) -> None:
        """Learn with this driver (:mod:`streammkl.daemon.learning.drivers`) under this
        admission from now on (the runner's learner changed: built, restored)."""
        self.driver, self.admission = driver, admission

    def close(self) -> None:
        """Stop the learner thread (after :meth:`drain`)."""
        if self._learn_pool is not None:
            self._learn_pool.shutdown(wait=True)
            self._learn_pool = None

    def _reject(self, msg: Message, reason: str, message: str) -> None:
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

    def process(self, batch: list[Message]) -> None:
        """Handle a batch of consumer records in order (between the runner's I/O edges).

        Pipelined: this batch is decoded; the previous batch's learning is finished (its run
        waited for, its remaining records learned); this batch's leading compiled run, if the
        driver plans one (after the head that makes the model grow, learned now:
        :meth:`_learn_head`), is started on the learner thread, where it runs without the GIL; and
        only then are the previous batch's predictions written and its offsets taken, while the
        learner works. The rest of this batch is learned when the next batch (or
        :meth:`drain`) comes, in order. Whatever reads the model, the monitor or the offsets
        calls :meth:`drain` first.
        """
        last = {(msg.topic, msg.partition): msg.offset for msg in batch}  # offsets ascend
        self.marker.entered(last)
        driver = self.driver
        assert driver is not None, "use() gives the driver"
        numeric = not driver.classifier and not driver.sequence
        valid = self._decode_all(batch, kind=driver.record_kind, numeric_label=numeric)
        finished = self._finish_learning()
        xs, ys = [rec.x for _, rec in valid], [rec.y for _, rec in valid]
        head: list[Outcome] = []
        refused: Refused = {}
        start, head_seconds = 0, 0.0
        if self.marker.watching and self._any_alone(valid):
            end, X, Y = 0, None, None  # after a crash: every record alone and marked
        else:
            end, X, Y = driver.plan_run(xs, ys)
            if not end and xs and driver.batched:  # the first records make the model grow
                t0 = time.perf_counter()
                start, (end, X, Y) = self._learn_head(valid, xs, ys, head, refused)
                head_seconds = time.perf_counter() - t0
        future = None
        if end > start:
            if self._learn_pool is None:
                self._learn_pool = ThreadPoolExecutor(1, thread_name_prefix="streammkl-learn")
            future = self._learn_pool.submit(driver.run_rounds, X, Y)  # type: ignore[arg-type]
        self._inflight = InFlight(
            batch, last, valid, xs, ys, start, end, future, head, refused, head_seconds
        )
        if finished is not None:  # reads no model state the running rounds change
            self._emit(finished)

    def _decode_all(
        self,
        batch: list[Message],
        kind: str = "vector",
        numeric_label: bool = False,
    ) -> Valid:
        """Decode a batch in order: the valid (message, record) pairs, a dense vector's
        features named ``"0"``, ``"1"``, ...; the rest dead-lettered (in the batch's order).
        Offsets are taken by :meth:`_account`, once the whole batch is handled.

        The values are decoded by one call (:func:`streammkl.wire.batch_decoder`); a batch
        whose every record decodes to a feature dict (the usual one) is paired with its
        messages a column at a time, the others walked record by record. A record a crash
        condemned is never decoded again."""
        decode = self._decoder(kind, numeric_label)
        marker = self.marker
        t0 = time.perf_counter()
        deaths: list[int] | None = None
        todo = batch
        if marker.watching:
            condemned = marker.condemned
            deaths = [condemned(m.topic, m.partition, m.offset) for m in batch]
            todo = [m for m, dead in zip(batch, deaths, strict=True) if not dead]
        recs = decode([msg.value or b"" for msg in todo])
        if (
            deaths is None
            and set(map(type, recs)) <= {Record}
            and (kind != "vector" or set(map(type, map(_x, recs))) <= {dict})
        ):
            valid: Valid = list(zip(batch, recs, strict=True))  # type: ignore[arg-type]
        else:
            valid = self._walk_decoded(batch, recs, deaths, kind)
        if todo:  # the batch's mean per record, once per record (as the learn histogram)
            per = (time.perf_counter() - t0) / len(todo)
            self.metrics.decode_seconds.observe_repeated(per, len(todo))
        return valid

    def _walk_decoded(
        self,
        batch: list[Message],
        recs: list[Record | DecodeError],
        deaths: list[int] | None,
        kind: str,
    ) -> Valid:
        """:meth:`_decode_all`'s pairs of a batch with rejections, condemned records or dense
        vectors, record by record (``recs``: the decoded records of the messages not condemned
        in ``deaths``, in order)."""
        decoded = iter(recs)
        valid: Valid = []
        for i, msg in enumerate(batch):
            if deaths is not None and deaths[i]:
                self._reject(
                    msg, "crashed_worker",
                    f"the process died {deaths[i]} time(s) while this record was in flight; it "
                    "is not learned again (limits.crash_strikes)",
                )  # fmt: skip
                continue
            rec = next(decoded)
            if isinstance(rec, DecodeError):
                self._reject(msg, rec.reason, rec.message)
                continue
            if kind == "vector" and not isinstance(rec.x, dict):
                # kind="vector": x is one dense vector, never a sequence (decode rejects those);
                # mypy cannot see that invariant, and a cast() would cost a call per record.
                rec.x = _named(rec.x)  # type: ignore[arg-type]
            valid.append((msg, rec))
        return valid

    def _decoder(
        self, kind: str, numeric_label: bool
    ) -> Callable[[list[bytes]], list[Record | DecodeError]]:
        """:func:`streammkl.wire.batch_decoder` with the record settings bound (made once per
        kind)."""
        key = (kind, numeric_label)
        decode = self._decoders.get(key)
        if decode is None:
            rs = self.settings.records
            decode = self._decoders[key] = wire.batch_decoder(
                dim=rs.dim, classes=self._classes, strict=rs.strict, max_bytes=rs.max_bytes,
                kind=kind,  # type: ignore[arg-type]
                numeric_label=numeric_label, limits=self._wire_limits,
            )  # fmt: skip
        return decode

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
            self._emit(finished)

    def _finish_learning(self) -> Finished | None:
        """The learning half of :meth:`drain`: the in-flight batch's run waited for and its
        remaining records learned; returns what :meth:`_emit` needs (or ``None``)."""
        if self._inflight is None:
            return None
        batch, last, valid, xs, ys, _, end, future, head, refused, seconds = self._inflight
        self._inflight = None
        outcomes = head
        if future is not None:
            run, took = future.result()  # (observed by the monitor, when it is on)
            outcomes += run
            seconds += took
        if end < len(xs):
            t0 = time.perf_counter()
            outcomes += self._learn_tail(valid, xs, ys, end, refused)
            seconds += time.perf_counter() - t0
        per = seconds / len(xs) if xs else 0.0
        return Finished(batch, last, valid, refused, outcomes, per, ys)

    def _emit(self, finished: Finished) -> None:
        """Predictions, dead letters and accounting of a batch whose rounds are done; the
        learn (predict) histogram observes the batch's mean time per learned (predict-only)
        record.

        A batch without refusals or learner errors (the usual one) is handled a column at a
        time: the model versions by ``accumulate``, the messages by
        :func:`~streammkl.daemon.loop.predictions.prediction_messages`, handed to the sink in
        one call (measured: ~0.6 us per record less on the loop thread than a pass doing all
        of it per record); a batch with some walks its records (:meth:`_emit_refused`)."""
        batch, last, valid, refused, outcomes, per, ys = finished
        version = self.counters["examples_learned"]
        predicted: Valid
        scored: list[tuple[Prediction, Probas | None]]
        if refused:
            predicted, scored, learned = self._emit_refused(valid, refused, outcomes, version)
            ys = [rec.y for _, rec in predicted]
        else:  # every record predicted, every label learned (a record without outcome is refused)
            predicted, scored = valid, outcomes  # type: ignore[assignment]
            versions = list(accumulate(map(is_not, ys, repeat(None)), initial=version))
            learned = versions.pop() - version
            self._send_predictions(valid, scored, versions)
        unlabelled = ys.count(None)
        labelled, correct, loss = self._scores(scored, ys)
        # Kafka timestamp (produce time); the record's own ts (event time, possibly a replay's
        # historical time) only when the broker gave none.
        now = time.time
        events = [
            ts / 1000.0 if (ts := msg.timestamp) is not None and ts >= 0 else (rec.ts or now())
            for msg, rec in predicted
        ]
        m = self.metrics
        m.learn_seconds.observe_repeated(per, learned)
        m.predict_seconds.observe_repeated(per, unlabelled)
        if self.learned_sink is not None:  # a mixing member keeps its round's examples
            if refused:
                self.learned_sink.extend(
                    (rec.x, rec.y, outcome)
                    for i, (_, rec) in enumerate(valid)
                    if rec.y is not None
                    and (outcome := outcomes[i]) is not None
                    and i not in refused
                )
            else:  # every record predicted (the usual batch): the labelled ones, a column at
                # a time (the same entries; ys are the valid records' labels, in order)
                self.learned_sink.extend(
                    (rec.x, y, outcome)
                    for (_, rec), y, outcome in zip(valid, ys, outcomes, strict=True)
                    if y is not None and outcome is not None
                )
        self._account(batch, last, events, len(predicted), learned, labelled, correct, loss)

    def _emit_refused(
        self, valid: Valid, refused: Refused, outcomes: list[Outcome], version: int
    ) -> tuple[Valid, list[tuple[Prediction, Probas | None]], int]:
        """:meth:`_emit`'s records of a batch with refusals or learner errors, in order: a
        refused record (or one whose prediction failed) is dead-lettered; one whose learning
        failed is dead-lettered, then predicted; the predictions before a dead letter are sent
        before it. Returns the predicted records, their outcomes and how many were learned."""
        predicted: Valid = []
        scored: list[tuple[Prediction, Probas | None]] = []
        versions: list[int] = []
        first = version
        sent = 0  # predictions[:sent] handed to the sink
        for i, (msg, rec) in enumerate(valid):
            outcome, error = outcomes[i], refused.get(i)
            if error is not None or outcome is None:
                self._send_predictions(predicted[sent:], scored[sent:], versions[sent:])
                sent = len(predicted)
                if outcome is None:  # refused by the admission, or the prediction failed
                    if isinstance(error, Refusal):
                        self._reject(msg, error.reason, error.message)
                    else:
                        self._reject(msg, "learner_error", f"predict failed: {error!r}")
                    continue
                if rec.y is not None:
                    self._reject(msg, "learner_error", f"learn failed: {error!r}")
            predicted.append((msg, rec))
            scored.append(outcome)
            versions.append(version)
            if rec.y is not None and error is None:
                version += 1
        self._send_predictions(predicted[sent:], scored[sent:], versions[sent:])
        return predicted, scored, version - first

    def _send_predictions(
        self,
        predicted: Valid,
        outcomes: list[tuple[Prediction, Probas | None]],
        versions: list[int],
    ) -> None:
        """Hand the predictions of these records (made by these model versions) to the sink."""
        out_topic = self.settings.kafka.predictions_topic
        if out_topic and predicted:
            top_k = self.settings.limits.prediction_top_k
            self.sink.send_predictions(
                out_topic,
                prediction_messages(predicted, outcomes, versions, top_k),
                [msg.key for msg, _ in predicted],
            )

    def _scores(
        self, outcomes: list[tuple[Prediction, Probas | None]], ys: list[Target]
    ) -> tuple[int, int, float]:
        """The labelled predictions' count, hits and prequential loss, summed in record order:
        log-loss of the probabilities (classification), wrong labels (sequences: per label, as
        the per-character accuracy), squared error (regression)."""
        driver = self.driver
        assert driver is not None
        labelled = correct = 0
        loss = 0.0
        if driver.sequence:
            for (prediction, _), y in zip(outcomes, ys, strict=True):
                if y is None:
                    continue
                assert isinstance(y, list)  # decoded as a sequence (or a sentence's heads)
                labelled += len(y)
                tags = prediction if isinstance(prediction, list) else ()
                hits = sum(1 for p, t in zip(tags, y, strict=False) if p == t)
                correct += hits
                loss += len(y) - hits
        elif driver.classifier:
            log = math.log
            for (prediction, proba), y in zip(outcomes, ys, strict=True):
                if y is None:
                    continue
                labelled += 1
                p = proba.get(y, 0.0) if proba else 0.0
                loss -= log(p if p > 1e-15 else 1e-15)
                correct += prediction == y
        else:
            isfinite = math.isfinite
            for (prediction, _), y in zip(outcomes, ys, strict=True):
                if y is None:
                    continue
                assert isinstance(y, int | float)  # decoded with numeric_label
                labelled += 1
                err = prediction - float(y) if isinstance(prediction, float) else math.inf
                if isfinite(err * err):  # a diverged model must not poison the total
                    loss += err * err
        return labelled, correct, loss

    def _account(
        self,
        batch: list[Message],
        last: Offsets,
        events: list[float],
        predicted: int,
        learned: int,
        labelled: int,
        correct: int,
        loss: float,
    ) -> None:
        """Fold a processed batch's counts into the counters and metrics, and take the next
        offset of every partition of the batch (each record is predicted or dead-lettered by
        now; ``last``: the batch's last offset in each)."""
        c, m = self.counters, self.metrics
        names = {topic for topic, _ in last}
        topics = {names.pop(): len(batch)} if len(names) == 1 else Counter(map(_topic, batch))
        self.checkpoints.handled(last, len(batch))  # the next offsets: part of the next commit
        if events:
            latency = time.time() - np.asarray(events)
            m.latency_seconds.observe_array(np.maximum(latency, 0.0, out=latency))
        c["records_consumed"] += len(batch)
        c["records_predicted"] += predicted
        c["examples_learned"] += learned
        c["labelled_predictions"] += labelled
        c["correct_predictions"] += int(correct)
        c["online_loss"] += loss
        consumed = self._consumed
        for topic, count in topics.items():
            child = consumed.get(topic)
            if child is None:  # (labels() takes a lock and builds a key: ~3 us per batch)
                child = consumed[topic] = m.consumed.labels(topic)
            child.inc(count)
        m.learned.inc(learned)
        m.predicted.inc(predicted)
        m.flush()
        self.stale = True

    # -- learning guarded against poison records ----------------------------------------------

    def _any_alone(self, valid: Valid) -> bool:
        alone = self.marker.alone
        return any(alone(m.topic, m.partition, m.offset) for m, _ in valid)

    def _alone(self, msg: Message, x: Inputs, y: Target) -> bool:
        """Whether a record is learned alone, marked in flight: it makes the model grow (its
        admission is checked then), or a crash asks for it (a suspect, a careful replay)."""
        marker = self.marker
        if marker.watching and marker.alone(msg.topic, msg.partition, msg.offset):
            return True
        assert self.admission is not None
        return self.admission.grows(x, y)

    def _learn_head(
        self, valid: Valid, xs: list[Inputs], ys: list[Target], head: list[Outcome],
        refused: Refused,
    ) -> tuple[int, Run]:  # fmt: skip
        """The records before the batch's first compiled run, learned now (a fresh model, or a
        batch that opens with a new input or class): each record as :meth:`_learn_tail` learns
        it, into ``head`` and ``refused``, until the driver plans a run from one. Returns where
        the run starts and the run (``(start, (end, X, Y))``; the whole batch learned:
        ``(n, (n, None, None))``), so that the run goes to the learner thread as a leading run
        does (before: the rest of such a batch was learned on the loop thread, ~6 us per
        record, when the next batch came)."""
        driver = self.driver
        assert driver is not None
        n = len(xs)
        i = 0
        while i < n:
            run = driver.plan_run(xs, ys, i)
            if run[0] > i:
                return i, run
            head += self._learn_tail(valid, xs, ys, i, refused, i + 1)
            i += 1
        return n, (n, None, None)

    def _learn_tail(
        self,
        valid: Valid,
        xs: list[Inputs],
        ys: list[Target],
        start: int,
        refused: Refused,
        stop: int | None = None,
    ) -> list[Outcome]:
        """The outcomes of ``xs[start:stop]`` (:data:`streammkl.daemon.learning.drivers.Outcome`),
        learned in order: the records that bring nothing new through the driver's
        ``learn_predict_many`` in stretches (its compiled runs, if any), each other record alone
        (:meth:`_learn_alone`); refusals and learner errors into ``refused`` (errors are data)."""
        driver = self.driver
        assert driver is not None
        out: list[Outcome] = []
        n = len(xs) if stop is None else stop
        i = start
        while i < n:
            j = i
            while j < n and not self._alone(valid[j][0], xs[j], ys[j]):
                j += 1
            if j > i:

                def note(k: int, exc: Exception, base: int = i) -> None:
                    refused[base + k] = exc

                out += driver.learn_predict_many(xs[i:j], ys[i:j], note)
            if j < n:
                out.append(self._learn_alone(valid[j][0], xs[j], ys[j], j, refused))
            i = j + 1
        return out

    def _learn_alone(self, msg: Message, x: Inputs, y: Target, i: int, refused: Refused) -> Outcome:
        """One record that makes the model grow (or that a crash asks for): admitted or
        refused, then learned marked in flight; its outcome (``None``: refused)."""
        assert self.admission is not None and self.driver is not None
        refusal = self.admission.admit(x, y)
        if refusal is not None:
            refused[i] = refusal
            return None

        def note(k: int, exc: Exception) -> None:
            refused[i] = exc

        self.marker.begin(msg.topic, msg.partition, msg.offset)
        outcome = self.driver.learn_predict_many([x], [y], note)[0]
        self.marker.end()  # (not on an exception out of the loop: that is a crash too)
        return outcome
