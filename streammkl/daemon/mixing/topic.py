"""The ``mix`` topic of a mixing group: its records, their encoding, and their reading and writing.

One partition, so that every member reads the same records in the same order: the group's state
is a function of that log alone (:mod:`streammkl.daemon.mixing.log`). Records are keyed by
``kind/round/member`` and carry a JSON head plus, for ``base`` and ``delta``, a learner state
(numpy arrays, never pickle) as raw bytes behind an index (:func:`encode`: no zip member per
array, no compression; a delta of the default bank on 4 inputs is 62 kB, written and read in
well under 0.1 ms by every member every round; readers also take the ``.npz`` blobs written
before, compressed or not):

- ``base``  (round 0): the group's starting model (the first one in the log wins);
- ``hello`` / ``bye``: a member joins / leaves cleanly;
- ``delta``: a member's end of a round: its state (learned from the round's base, so
  Δ = state - base; or, published ahead of that base under a staleness bound above one round,
  learned from its own previous delta, whose state it carries as ``ref``: Δ = state - ref),
  the examples it learned since, the next offset of every input partition it has learned up
  to and its *claims*: the offsets ``[start, end)`` it learned from each partition it owns
  since its previous delta;
- ``take``: a member starts owning partitions (its assignment callback): from then on, the
  group counts records of those partitions from that member only (the log fences the others,
  :mod:`streammkl.daemon.mixing.log`);
- ``close``: a round that timed out is merged with the deltas that precede it in the log
  (whoever writes it first; it names the members it did not wait for). A round whose expected
  members have all published closes without one;
- ``bank``: a member proposes another kernel bank (its ``learner.kernels``, changed by SIGHUP
  or while it was stopped); every reader switches the group's model to it when the open round
  closes (:mod:`streammkl.daemon.mixing.log`).

A record that cannot be decoded is not an error for the reader: :meth:`MixTopic.read` hands it
on as an *unreadable* record (named by its key when the key can be parsed), which the group log
skips and reports like any record it cannot use.

Publishes are idempotent by key: a member that publishes the same (round, member) twice (a
replay after a crash) changes nothing, because readers keep the first record of every key.
Kafka transactions are not needed (nor honoured by the embedded broker:
benchmarks/results/kafka_transactions.md). A compacted topic keeps the newest record per key;
every key here is written once, so compaction only drops replays.
"""

from __future__ import annotations

import io
import json
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streammkl.daemon.config import KafkaSettings
from streammkl.daemon.kafka.clients import (
    Acknowledgement,
    Message,
    MixLogReaderFactory,
    MixLogWriter,
    MixLogWriterFactory,
    SendFailed,
    mix_reader_for,
    mix_writer_for,
)
from streammkl.daemon.kafka.security import kafka_python_options
from streammkl.daemon.kafka.topics import ensure_topics

log = logging.getLogger(__name__)

KINDS = ("base", "hello", "delta", "close", "bye", "bank", "take")
#: The kind of a record that could not be decoded (never written).
UNREADABLE = "unreadable"
State = tuple[dict[str, Any], dict[str, np.ndarray]]

#: Largest mix record (a model state); the broker must accept it too.
MAX_RECORD_BYTES = 32 << 20


@dataclass(frozen=True)
class MixRecord:
    """One record of the mix topic (see the module docstring)."""

    kind: str
    round: int
    member: str
    examples: int = 0
    offsets: Mapping[str, int] = field(default_factory=dict)  # "topic/partition" -> next
    late: tuple[str, ...] = ()
    state: State | None = None
    sent: float = 0.0  # wall clock of the writer, for reports only
    base_digest: str = ""  # a delta's: the digest of the base its member learned from
    #: A delta's: the prequential view of its examples (``loss``: the sum of their log-losses,
    #: ``mistakes``, ``labelled``); a delta's or a bye's: the hindsight view of the member's
    #: last merged round (``h_round`` and the ``h_``-prefixed sums, daemon.group_log).
    stats: Mapping[str, float] = field(default_factory=dict)
    #: A bank proposal's kernel specs (``Kernel.to_spec()`` of the proposer's configured bank).
    kernels: tuple[dict[str, Any], ...] | None = None
    #: An unreadable record's reason (it could not be decoded; ``kind`` is ``UNREADABLE``).
    invalid: str = ""
    #: A delta's: ``"topic/partition" -> (start, end)``, the offsets it learned from each
    #: partition its member owns since its previous delta (None: a delta written before
    #: claims, whose ``offsets`` alone move the frontier).
    claims: Mapping[str, tuple[int, int]] | None = None
    #: A take's: the partitions (``"topic/partition"``) its member starts owning.
    partitions: tuple[str, ...] = ()
    #: A delta's: the round of the base its member's learner was on when it published (-1:
    #: ``round``, as every delta written before staleness bounds above one round).
    on: int = -1
    #: A delta's: the state it was learned from when that is not the base of round ``on``:
    #: its member's previous delta (moved onto that base if the member took a merged model
    #: since), so Δ = state - ref (stale-synchronous rounds, docs/scale-out.md).
    ref: State | None = None

    @property
    def base_round(self) -> int:
        """The round of the base a delta's member was on (:attr:`on`, or its round)."""
        return self.round if self.on < 0 else self.on

    @property
    def key(self) -> str:
        return f"{self.kind}/{self.round:010d}/{self.member}"

    @classmethod
    def unreadable(cls, key: bytes | None, why: str) -> MixRecord:
        """What a reader makes of a record it cannot decode: its round and member from its key
        (``kind/round/member``) when they can be read, else round -1 and member ``"?"``."""
        try:
            kind, round_, member = (key or b"").decode().split("/", 2)
            return cls(UNREADABLE, int(round_), member, invalid=f"{kind}: {why}")
        except ValueError:
            return cls(UNREADABLE, -1, "?", invalid=why)


#: The first bytes of a record in the raw form (:func:`encode`); an ``.npz`` blob (the form
#: written before it) starts with ``PK`` and is still read.
MAGIC = b"SMKMIX1\n"
_ALIGN = 64


def encode(rec: MixRecord) -> tuple[bytes, bytes]:
    """(key, value) of a record: :data:`MAGIC`, the JSON head's length (8 bytes, little
    endian), the head (with an index of the state's arrays: name, dtype, shape, offset) and the
    arrays' raw bytes, each aligned to 64 bytes. Measured on a delta of the default bank on 4
    inputs (62 kB): written in 0.03 ms and read in 0.05 ms, against 0.27 ms and 0.69 ms for the
    ``.npz`` blob it replaces (a zip member per array), by every member every round."""
    head: dict[str, Any] = {
        "kind": rec.kind, "round": rec.round, "member": rec.member, "examples": rec.examples,
        "offsets": dict(rec.offsets), "late": list(rec.late), "sent": rec.sent,
        "base_digest": rec.base_digest, "stats": dict(rec.stats),
        "meta": None if rec.state is None else rec.state[0],
        "kernels": None if rec.kernels is None else [dict(k) for k in rec.kernels],
        "claims": None if rec.claims is None else {k: list(v) for k, v in rec.claims.items()},
        "partitions": list(rec.partitions),
    }  # fmt: skip
    if rec.on >= 0:
        head["on"] = rec.on
    if rec.ref is not None:
        head["ref_meta"] = rec.ref[0]
    chunks: list[bytes | memoryview] = []
    at = 0
    for key, state in (("arrays", rec.state), ("ref_arrays", rec.ref)):
        index = []
        for name, value in (state[1] if state is not None else {}).items():
            array = np.ascontiguousarray(value)
            if array.dtype.hasobject:
                raise ValueError(f"array {name!r}: object arrays are not written")
            index.append([name, array.dtype.str, list(array.shape), at])
            chunks.append(array.tobytes() if array.size else b"")
            pad = -array.nbytes % _ALIGN
            chunks.append(b"\0" * pad)
            at += array.nbytes + pad
        if index or key == "arrays":
            head[key] = index
    text = json.dumps(head).encode()
    text += b" " * (-(len(MAGIC) + 8 + len(text)) % _ALIGN)
    out = b"".join([MAGIC, len(text).to_bytes(8, "little"), text, *chunks])
    return rec.key.encode(), out


def _raw(value: bytes) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(head, arrays) of a record in the raw form; the arrays are copies (writable, and
    independent of the consumer's buffer). A delta's reference state's arrays are in
    ``head["ref_arrays"]``."""
    n = int.from_bytes(value[len(MAGIC) : len(MAGIC) + 8], "little")
    start = len(MAGIC) + 8
    if n < 0 or start + n > len(value):
        raise ValueError(f"head of {n} bytes in a record of {len(value)}")
    head = json.loads(value[start : start + n])
    body = bytearray(memoryview(value)[start + n :])  # one copy for every array
    if head.get("ref_arrays") is not None:
        head["ref_arrays"] = _arrays(body, head["ref_arrays"])
    return head, _arrays(body, head.pop("arrays", None) or [])


def _arrays(body: bytearray, index: list[Any]) -> dict[str, np.ndarray]:
    """The arrays an index names, read from a record's body."""
    arrays: dict[str, np.ndarray] = {}
    for name, dtype, shape, at in index:
        dt = np.dtype(dtype)
        if dt.hasobject:
            raise ValueError(f"array {name!r}: object dtype")
        count = math.prod(int(n) for n in shape)
        if at < 0 or count < 0 or at + count * dt.itemsize > len(body):
            raise ValueError(f"array {name!r} lies outside the record")
        arrays[str(name)] = np.frombuffer(body, dtype=dt, count=count, offset=at).reshape(shape)
    return arrays


def _npz(value: bytes) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(head, arrays) of a record in the ``.npz`` form (written before the raw form)."""
    with np.load(io.BytesIO(value), allow_pickle=False) as npz:
        files = {k: npz[k] for k in npz.files}
    head = json.loads(files.pop("__head__").tobytes().decode())
    return head, {k[2:]: v for k, v in files.items() if k.startswith("a/")}


def decode(value: bytes) -> MixRecord:
    """A record from its value (either form); ValueError if it is not one."""
    try:
        head, arrays = _raw(value) if value.startswith(MAGIC) else _npz(value)
        kind = str(head["kind"])
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}")
        meta = head.get("meta")
        ref_meta = head.get("ref_meta")
        return MixRecord(
            kind=kind,
            round=int(head["round"]),
            member=str(head["member"]),
            examples=int(head.get("examples", 0)),
            offsets={str(k): int(v) for k, v in (head.get("offsets") or {}).items()},
            late=tuple(str(m) for m in head.get("late") or ()),
            state=None if meta is None else (dict(meta), arrays),
            sent=float(head.get("sent", 0.0)),
            base_digest=str(head.get("base_digest", "")),
            stats={str(k): float(v) for k, v in (head.get("stats") or {}).items()},
            kernels=_kernels(head.get("kernels")),
            claims=_claims(head.get("claims")),
            partitions=tuple(str(p) for p in head.get("partitions") or ()),
            on=int(head.get("on", -1)),
            ref=None if ref_meta is None else (dict(ref_meta), dict(head.get("ref_arrays") or {})),
        )
    except Exception as exc:  # zip / json / key / index errors all mean the same thing
        raise ValueError(f"not a mix record: {exc!r}") from None


def _kernels(value: object) -> tuple[dict[str, Any], ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(k, dict) for k in value):
        raise ValueError(f"kernels must be a list of tables, got {value!r}")
    return tuple(dict(k) for k in value)


def _claims(value: object) -> dict[str, tuple[int, int]] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(f"claims must be a table, got {value!r}")
    out = {}
    for key, pair in value.items():
        start, end = (int(v) for v in pair)
        out[str(key)] = (start, end)
    return out


def create_mix_topic(settings: KafkaSettings, topic: str) -> None:
    """Create the mix topic (1 partition, ``cleanup.policy=compact``) if it is missing."""
    ensure_topics(
        settings.bootstrap_servers, {topic: 1}, settings.bootstrap_timeout_ms,
        kafka_python_options(settings), configs={topic: {"cleanup.policy": "compact"}},
    )  # fmt: skip


class MixTopic:
    """Publish to and read the mix topic, with the clients the settings name: the reader
    ``kafka.consumer_client``'s, the writer ``kafka.producer_client``'s (librdkafka by default;
    :func:`~streammkl.daemon.kafka.clients.mix_reader_for` / ``mix_writer_for``). The reader is
    assigned the one partition, not subscribed: it needs no group and reads from offset 0.

    Parameters
    ----------
    settings
        Kafka settings.
    topic
        The mix topic.
    writer, reader
        The mix log adapters (default: those the settings name; tests inject fakes).
    max_wait_ms
        How long the broker may hold the reader's fetch that finds nothing: a round waits on
        this topic, so no long polls.
    """

    def __init__(
        self,
        settings: KafkaSettings,
        topic: str,
        writer: MixLogWriterFactory | None = None,
        reader: MixLogReaderFactory | None = None,
        max_wait_ms: int = 10,
    ) -> None:
        self.settings = settings
        self.topic = topic
        self.bad_records = 0
        self._next: int | None = None  # the offset the next record must have (None: any)
        self._gap: tuple[int, int] | None = None  # the last gap read again: (wanted, got)
        self.gaps = 0  # gaps read again
        self._writer_factory = writer or mix_writer_for(settings)
        self.writer = self._new_writer()
        read = reader or mix_reader_for(settings)
        self.reader = read(settings, topic, MAX_RECORD_BYTES, max_wait_ms)

    def _new_writer(self) -> MixLogWriter:
        return self._writer_factory(self.settings, self.topic, MAX_RECORD_BYTES)

    def publish(self, rec: MixRecord, timeout: float = 30.0, attempts: int = 0) -> None:
        """Send one record and wait for the broker's acknowledgement. A failure is retried
        (``attempts`` times, 0: until it succeeds) with a new writer each time (an idempotent
        producer stays broken after a broker restart, KAFKA.md); a replay is harmless: readers
        keep the first record of every key."""
        key, value = encode(rec)
        tried = 0
        while True:
            try:
                self.writer.send(key, value).wait(timeout)
                return
            except SendFailed as exc:
                tried += 1
                if attempts and tried >= attempts:
                    raise
                log.warning("mix topic: publishing %s failed (%s); retrying", rec.key, exc)
                time.sleep(min(1.0 * tried, 5.0))
                try:
                    self.writer.close(timeout=1)
                except Exception:  # a broken writer may not close cleanly
                    pass
                self.writer = self._new_writer()

    def send(self, rec: MixRecord) -> Acknowledgement | None:
        """Send one record without waiting for the broker's acknowledgement: the handle to give
        :meth:`confirm` (None if the send failed at once; :meth:`confirm` then publishes)."""
        key, value = encode(rec)
        try:
            return self.writer.send(key, value)
        except SendFailed as exc:
            log.warning("mix topic: sending %s failed (%s); it is published again", rec.key, exc)
            return None

    def confirm(
        self, rec: MixRecord, sent: Acknowledgement | None, timeout: float = 30.0, attempts: int = 0
    ) -> None:
        """Wait until the record :meth:`send` sent (``sent``: its handle) is in the log; if its
        send failed, publish it again (:meth:`publish`: a replay is harmless, readers keep the
        first record of every key)."""
        if sent is not None:
            try:
                sent.wait(timeout)
                return
            except SendFailed as exc:
                log.warning("mix topic: sending %s failed (%s); publishing it again", rec.key, exc)
        self.publish(rec, timeout, attempts)

    def read(self, timeout_ms: int = 0) -> list[MixRecord]:
        """The records that arrived since the last read, in the log's order and without a
        gap; one that cannot be decoded comes as an unreadable record
        (:meth:`MixRecord.unreadable`: the group log skips and reports it).

        The group's state is the fold of *every* record in order, so a record the client
        skipped would make this member's fold differ from the others' (seen once in a
        scale-out run on the embedded broker: one member's reader never got the other's
        delta of a round that member had read, closed that round at its timeout without it
        and fenced that member's next deltas). Offsets of the one partition follow each other
        (every key is written once; the log is not compacted in practice): at a gap the
        reader goes back to the first offset it has not read and reads from there again
        (:meth:`_in_order`)."""
        out = []
        for r in self._in_order(self.reader.poll(timeout_ms)):
            try:
                out.append(decode(r.value or b""))
            except ValueError as exc:
                self.bad_records += 1
                out.append(MixRecord.unreadable(r.key, f"offset {r.offset}: {exc}"))
        return out

    def _in_order(self, records: list[Message]) -> list[Message]:
        """``records`` (one poll's, of the one partition) from the next offset on: a record
        read before is dropped; at a gap the rest is dropped and the reader seeks back to
        the first offset missing, once per gap (the same gap met again after that is taken
        as the log's: a record compaction removed, or a transaction's marker)."""
        out = []
        for r in records:
            want = self._next
            if want is not None and r.offset < want:
                continue  # read already
            if want is not None and r.offset > want and self._gap != (want, r.offset):
                self._gap = (want, r.offset)
                self.gaps += 1
                log.warning(
                    "mix topic: the client returned offset %d where %d was next; reading "
                    "again from %d", r.offset, want, want,
                )  # fmt: skip
                self.reader.seek(want)
                break
            out.append(r)
            self._next = r.offset + 1
        return out

    def read_to_end(self, max_seconds: float = 10.0) -> list[MixRecord]:
        """Everything up to the partition's end as of now (the fetch highwater: Tansu's
        ``end_offsets`` is wrong, KAFKA.md), or what arrived within ``max_seconds``."""
        out: list[MixRecord] = []
        deadline = time.monotonic() + max_seconds
        fetched = False
        while time.monotonic() < deadline:
            batch = self.read(timeout_ms=100)
            out += batch
            high = self.reader.highwater()
            fetched = fetched or high is not None
            if fetched and not batch:
                position = self.reader.position()
                if position is not None and position >= (high or 0):
                    break
        return out

    def close(self) -> None:
        for close in (lambda: self.writer.close(timeout=2), self.reader.close):
            try:
                close()
            except Exception as exc:  # closing must not mask a shutdown
                log.warning("mix topic client close failed: %s", exc)
