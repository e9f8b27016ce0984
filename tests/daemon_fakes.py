"""Deterministic test doubles for the daemon: a tiny two-block learner and in-memory Kafka.

``FakeLearner`` honours :class:`streammkl.daemon.learning.learner.Learner` (learn/predict/persist/
digest, kernel weights) with plain float arithmetic, so its digest is a function of the examples
seen and their order. ``FakeCluster`` holds topics in memory; its client adapters (the daemon's
``kafka.clients`` protocols): ``FakeConsumer`` hands records out in a seeded pseudo-random
interleaving of partitions and batch sizes (so tests can prove the merge order does not depend on
fetch timing); ``FakeProducer`` records what was sent and can be told to fail.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import time
import uuid
from collections import namedtuple
from typing import Any

import numpy as np

from streammkl.daemon.kafka.clients import Output

TopicPartition = namedtuple("TopicPartition", ["topic", "partition"])


class FakeLearner:
    """Two blocks ("linear": x, "square": x²), one weight row per class, softmax SGD.

    ``learn_one`` raises ``ValueError`` on a feature named ``boom`` (the learner-error path).
    """

    def __init__(self, lr: float = 0.1, task: str = "classification") -> None:
        self.lr = lr
        self.task = task
        self.features: list[str] = []
        self.classes: list[Any] = []
        self.w = np.zeros((0, 0, 2))  # class x feature x block
        if task == "regression":  # a regressor has no predict_proba_one
            self.predict_proba_one = None  # type: ignore[assignment]

    # river surface
    def _vec(self, x: dict[str, float], grow: bool) -> np.ndarray:
        if grow and "boom" in x:
            raise ValueError("feature 'boom' is not accepted")
        if grow:
            for k in x:
                if k not in self.features:
                    self.features.append(k)
            if self.w.shape[1] < len(self.features):
                pad = len(self.features) - self.w.shape[1]
                self.w = np.concatenate([self.w, np.zeros((self.w.shape[0], pad, 2))], axis=1)
        v = np.zeros((len(self.features), 2))
        for i, k in enumerate(self.features):
            if k in x:
                v[i] = (x[k], x[k] * x[k])
        return v

    def _scores(self, v: np.ndarray) -> np.ndarray:
        return np.einsum("cfb,fb->c", self.w[:, : v.shape[0]], v)

    def predict_proba_one(self, x: dict[str, float]) -> dict[Any, float]:
        if not self.classes:
            return {}
        s = self._scores(self._vec(x, grow=False))
        e = np.exp(s - s.max())
        p = e / e.sum()
        return {c: float(p[i]) for i, c in enumerate(self.classes)}

    def predict_one(self, x: dict[str, float]) -> Any:
        if self.task == "regression":
            return float(self._scores(self._vec(x, grow=False)).sum()) if self.classes else 0.0
        proba = FakeLearner.predict_proba_one(self, x)
        return max(proba, key=proba.__getitem__) if proba else None

    def learn_one(self, x: dict[str, float], y: Any) -> None:
        v = self._vec(x, grow=True)
        if self.task == "regression":
            y = float(y)
            if not self.classes:
                self.classes = [0]
                self.w = np.zeros((1, len(self.features), 2))
            err = float(self._scores(v).sum()) - y
            self.w[0] -= self.lr * err * v
            return
        if y not in self.classes:
            self.classes.append(y)
            self.w = np.concatenate([self.w, np.zeros((1, len(self.features), 2))], axis=0)
        s = self._scores(v)
        e = np.exp(s - s.max())
        p = e / e.sum()
        p[self.classes.index(y)] -= 1.0
        self.w -= self.lr * p[:, None, None] * v[None]

    # introspection
    @property
    def block_norms(self) -> dict[str, float]:
        return {
            "linear": float(np.linalg.norm(self.w[..., 0])),
            "square": float(np.linalg.norm(self.w[..., 1])),
        }

    @property
    def kernel_weights(self) -> dict[str, float]:
        norms = self.block_norms
        total = sum(norms.values())
        return {k: (v / total if total else 0.0) for k, v in norms.items()}

    @property
    def active_kernels(self) -> tuple[str, ...]:
        return tuple(k for k, v in self.block_norms.items() if v > 0)

    @property
    def n_support(self) -> int:
        return 0

    # persistence
    def to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        meta = {
            "lr": self.lr,
            "task": self.task,
            "features": self.features,
            "classes": self.classes,
        }
        return meta, {"w": self.w.copy()}

    @classmethod
    def from_state(cls, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> FakeLearner:
        obj = cls(lr=meta["lr"], task=meta["task"])
        obj.features = list(meta["features"])
        obj.classes = list(meta["classes"])
        obj.w = np.array(arrays["w"], dtype=float)
        return obj

    def digest(self) -> str:
        meta, arrays = self.to_state()
        h = hashlib.sha256(json.dumps(meta, sort_keys=True).encode())
        h.update(np.ascontiguousarray(arrays["w"]).tobytes())
        return h.hexdigest()


def make_learner(spec: Any) -> FakeLearner:
    """``learner.factory`` entry point (``tests.daemon_fakes:make_learner``)."""
    params = getattr(spec, "params", {}) or {}
    return FakeLearner(lr=float(params.get("lr", 0.1)), task=spec.task)


# -- in-memory Kafka -----------------------------------------------------------------------------

Record = namedtuple(
    "Record", ["topic", "partition", "offset", "timestamp", "key", "value", "headers"]
)


class FakeCluster:
    """Topics in memory, shared by fake consumers and producers."""

    def __init__(self) -> None:
        self.topics: dict[str, list[list[Record]]] = {}
        self.committed: dict[str, dict[TopicPartition, int]] = {}
        self.fail_sends = 0  # the next N sends fail
        self.ids: dict[str, str] = {}  # topic -> its id (another when re-created)

    def create(self, topic: str, partitions: int = 1) -> None:
        if topic not in self.topics:
            self.ids[topic] = str(uuid.uuid4())
        self.topics.setdefault(topic, [[] for _ in range(partitions)])

    def delete(self, topic: str) -> None:
        """The topic is gone (with its log and id), as after a memory-only broker's restart."""
        self.topics.pop(topic, None)
        self.ids.pop(topic, None)

    def append(
        self, topic: str, value: bytes, partition: int = 0, key: bytes | None = None,
        timestamp: int = 0, headers: list[tuple[str, bytes]] | None = None,
    ) -> Record:  # fmt: skip
        self.create(topic)
        log = self.topics[topic][partition]
        rec = Record(topic, partition, len(log), timestamp, key, value, list(headers or []))
        log.append(rec)
        return rec

    def values(self, topic: str) -> list[bytes]:
        return [r.value for part in self.topics.get(topic, []) for r in part]

    def consumer(self, seed: int = 0) -> Any:
        """A consumer adapter class over this cluster (``Runner(consumer_client=...)``)."""

        def factory(settings: Any) -> FakeConsumer:
            return FakeConsumer(self, settings, seed)

        return factory

    def producer(self) -> Any:
        """A producer adapter class over this cluster (``Runner(producer_client=...)``)."""

        def factory(settings: Any) -> FakeProducer:
            return FakeProducer(self)

        return factory


def crash_and_resume(
    make_runner: Any, values: list[bytes], steps: tuple[int, ...] = (5, 9), partitions: int = 2
) -> tuple[Any, Any]:
    """``(reference, final)`` runners over ``values`` (spread over the partitions): the reference
    runs uninterrupted; the other is dropped after each of ``steps`` loop steps (its checkpoint
    kept, as after a crash) and restarted, the last run to the end. ``make_runner(name, cluster,
    seed)`` builds a runner whose checkpoints live under ``name``."""

    def cluster_with_stream() -> FakeCluster:
        cluster = FakeCluster()
        cluster.create("in", partitions)
        for i, value in enumerate(values):
            cluster.append("in", value, i % partitions, None, i)
        return cluster

    reference = make_runner("ref", cluster_with_stream(), 0)
    reference.run()
    cluster = cluster_with_stream()
    for i, n in enumerate(steps):
        crashed = make_runner("run", cluster, i + 1)
        crashed.start()
        for _ in range(n):
            crashed.tick()
    final = make_runner("run", cluster, 7)
    final.run()
    return reference, final


class FakeConsumer:
    """An in-memory consumer adapter (:class:`~streammkl.daemon.kafka.clients.ConsumerClient`);
    seeded random fetch interleaving."""

    def __init__(self, cluster: FakeCluster, settings: Any, seed: int) -> None:
        self.cluster = cluster
        self.settings = settings
        self.rng = random.Random(seed)
        self.on_assign: Any = None
        self.on_revoke: Any = None
        self.subscribed: list[str] = []
        self.assigned: list[TopicPartition] = []
        self.positions: dict[TopicPartition, int] = {}
        self.highwaters: dict[TopicPartition, int] = {}
        self.paused_set: set[TopicPartition] = set()
        self.pending_assignment: list[TopicPartition] | None = None
        self.closed = False
        self.connected = True
        self.refusal: str | None = None
        self.last_error: str | None = None
        self.assign_at = 0.0  # a pending assignment waits until then (a slow rebalance)
        self.withheld_until = 0.0  # until then no fetch returns: no record, no highwater
        self.withheld_for = 0.0
        self._revoked = False  # revoked, the pending assignment not given yet
        self.topic_id_is_a_request = False  # (True: as librdkafka's, asked less often)
        self.id_requests = 0  # topic_id calls

    def subscribe(self, topics: list[str], on_assign: Any, on_revoke: Any) -> None:
        self.subscribed = list(topics)
        self.on_assign, self.on_revoke = on_assign, on_revoke
        self.pending_assignment = [
            TopicPartition(t, p) for t in topics for p in range(len(self.cluster.topics.get(t, [])))
        ]

    def rebalance(self, partitions: list[TopicPartition], delay: float = 0.0) -> None:
        """Schedule a rebalance to ``partitions`` at the next poll; with ``delay`` the partitions
        are revoked at the next poll and assigned at the first one ``delay`` seconds later."""
        self.pending_assignment = list(partitions)
        self.assign_at = time.monotonic() + delay

    def withhold(self, seconds: float) -> None:
        """No fetch returns for ``seconds`` (a stalled broker): no record, no highwater."""
        self.withheld_until = time.monotonic() + seconds
        self.withheld_for = seconds

    def _own(self, partitions: list[Any]) -> None:
        self.assigned = [TopicPartition(*tp) for tp in partitions]
        self.highwaters = {}
        self.positions = {tp: o for tp, o in self.positions.items() if tp in self.assigned}

    def start_assigned(self, starts: dict[Any, int | None]) -> None:
        for tp, own in starts.items():
            if own is not None:
                self.seek(tp, own)

    def assign(self, starts: dict[Any, int | None]) -> None:
        self._own(list(starts))
        self.start_assigned(starts)

    def partitions(self, topic: str) -> list[int]:
        return list(range(len(self.cluster.topics.get(topic, []))))

    def topic_missing(self, topic: str) -> bool:
        return topic not in self.cluster.topics

    def topic_id(self, topic: str) -> str | None:
        self.id_requests += 1
        return self.cluster.ids.get(topic)

    def silence(self) -> float | None:
        """Seconds since a withholding began (a stalled broker says nothing), else 0."""
        since = self.withheld_until - self.withheld_for
        return max(0.0, time.monotonic() - since) if time.monotonic() < self.withheld_until else 0.0

    def committed(self, tp: Any) -> int | None:
        return self.cluster.committed.get(self.settings.group_id, {}).get(tp)

    def commit(self, offsets: dict[Any, int], blocking: bool) -> None:
        group = self.cluster.committed.setdefault(self.settings.group_id, {})
        for tp, at in offsets.items():
            group[TopicPartition(tp.topic, tp.partition)] = at

    def beginning(self, tp: Any) -> int:
        return 0

    def seek(self, tp: Any, offset: int) -> None:
        self.positions[TopicPartition(*tp)] = offset

    def position(self, tp: Any) -> int | None:
        return self.positions.get(tp)

    def highwater(self, tp: Any) -> int | None:
        return self.highwaters.get(tp)

    def pause(self, tp: Any) -> None:
        self.paused_set.add(tp)

    def resume(self, tp: Any) -> None:
        self.paused_set.discard(tp)

    def poll(self, timeout_ms: int, max_records: int) -> dict[Any, list[Record]]:
        if self.pending_assignment is not None:
            if self.on_revoke is not None and not self._revoked:
                self.on_revoke(list(self.assigned))
            if time.monotonic() < self.assign_at:  # the group is still rebalancing
                self._revoked, self.assigned = True, []
                return {}
            new, self.pending_assignment = self.pending_assignment, None
            self._revoked = False
            self._own(new)
            if self.on_assign is not None:
                self.on_assign(list(new))
        if time.monotonic() < self.withheld_until:
            return {}
        out: dict[Any, list[Record]] = {}
        budget = max_records or 500
        order = list(self.assigned)
        self.rng.shuffle(order)
        for tp in order:
            log = self.cluster.topics[tp.topic][tp.partition]
            if self.rng.random() < 0.3:  # this partition's fetch "has not returned yet"
                continue
            self.highwaters[tp] = len(log)
            if tp in self.paused_set:
                continue
            if tp not in self.positions:  # like the real clients: committed offset, else earliest
                self.positions[tp] = self.committed(tp) or 0
            pos = self.positions[tp]
            take = min(budget, self.rng.randint(0, 7), len(log) - pos)
            if take > 0:
                out[tp] = log[pos : pos + take]
                self.positions[tp] = pos + take
                budget -= take
        return out

    def close(self) -> None:
        self.closed = True


class FakeProducer:
    """An in-memory producer adapter (:class:`~streammkl.daemon.kafka.clients.ProducerClient`):
    appends to the cluster at once; the cluster's ``fail_sends`` makes the next sends fail."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self._failed: list[Output] = []
        self._error: BaseException | None = None

    def produce(self, topic: str, value: bytes, key: Any = None, headers: Any = None) -> None:
        if self.cluster.fail_sends > 0:
            self.cluster.fail_sends -= 1
            self._failed.append(Output(topic, value, key, tuple(headers or ())))
            self._error = RuntimeError("broker restarted")
            return
        self.cluster.append(topic, value, key=key, headers=headers)

    def serve(self, timeout: float) -> None:
        pass

    def failures(self) -> tuple[list[Output], BaseException | None]:
        failed, self._failed = self._failed, []
        error, self._error = self._error, None
        return failed, error

    def in_flight(self) -> int:
        return len(self._failed)

    def flush(self, timeout: float) -> None:
        pass

    def abandon(self) -> None:
        pass

    def close(self) -> None:
        pass


def bananas_like(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` deterministic 2-d binary examples (two interleaved half-moons, like Bananas)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        y = i % 2
        t = rng.uniform(0, math.pi)
        cx, cy = (math.cos(t), math.sin(t)) if y == 0 else (1 - math.cos(t), 0.5 - math.sin(t))
        x = {"x1": round(cx + rng.gauss(0, 0.15), 6), "x2": round(cy + rng.gauss(0, 0.15), 6)}
        out.append({"x": x, "y": y, "id": f"r{i}"})
    return out
