"""Mixing: one model for a consumer group by iterative parameter mixing (daemon.mixing).

The fold of the mix log is tested on records built in memory; the protocol end to end with
daemons against the real broker, including kill -9 at random moments (exactly-once counts and
equal digests).
"""

from __future__ import annotations

import dataclasses
import io
import json
import random
import signal
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from streammkl.core import kernels
from streammkl.daemon.commands.broker import free_port
from streammkl.daemon.config import ConfigError, load_settings
from streammkl.daemon.kafka.clients.protocol import Partition, SendFailed
from streammkl.daemon.mixing.log import (
    MISTAKES_PER_ROUND,
    ErrorTrend,
    MixLog,
    above,
    canonical_bank,
    check_base_state,
    core_state,
    learner_digest,
    next_every,
    rebased,
)
from streammkl.daemon.mixing.member import MixingMember
from streammkl.daemon.mixing.metrics import MixMetrics
from streammkl.daemon.mixing.topic import (
    MAGIC,
    MixRecord,
    MixTopic,
    create_mix_topic,
    decode,
    encode,
)
from streammkl.river import MKLClassifier
from tests.daemon_kafka import (
    create_topic,
    daemon_argv,
    inspect,
    metrics,
    produce,
    start_daemon,
    unique,
    wait_until,
)

BANK = (
    kernels.Linear(),
    kernels.AdditiveRBF(1.0, 8),
    kernels.RBF(0.5, n_components=32),
    kernels.Polynomial(2, explicit=True),
)
KERNELS = [
    "linear",
    {"type": "AdditiveRBF", "gamma": 1.0, "n_components": 8},
    {"type": "RBF", "gamma": 0.5, "n_components": 32},
    {"type": "Polynomial", "degree": 2, "explicit": True},
]


def _stream(n: int, seed: int) -> tuple[list[dict], list[int]]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    Y = (X[:, 0] * X[:, 1] + 0.3 * X[:, 2] > 0).astype(int)
    return [{"a": float(a), "b": float(b), "c": float(c)} for a, b, c in X], [int(y) for y in Y]


def _base() -> tuple:
    learner = MKLClassifier(kernels=BANK)
    learner.rounds().declare_classes([0, 1])
    learner.rounds().declare_features([])
    return learner.to_state()


def _delta(base: tuple, round_: int, member: str, xs, ys, offsets=None) -> MixRecord:
    learner = MKLClassifier(kernels=BANK)
    learner.rounds().load_state(*base)
    start = learner.rounds().n_learned
    for x, y in zip(xs, ys, strict=True):
        learner.learn_one(x, y)
    return MixRecord(
        "delta", round_, member, examples=learner.rounds().n_learned - start, offsets=offsets or {},
        state=learner.to_state(), base_digest=learner_digest(base),
    )  # fmt: skip


def _roundtrip(rec: MixRecord) -> MixRecord:
    key, value = encode(rec)
    assert key.decode() == rec.key
    return decode(value)


def _replayed(records: list[MixRecord], learned: int, members: tuple) -> MixLog:
    """The mix log folded again from every record written: each of the ``learned`` examples
    counted once, nothing mismatched, skipped, fenced or pending, and every member's own fold
    equal to it."""
    log = MixLog()
    for rec in records:
        log.apply(_roundtrip(rec))
    assert log.examples == learned and log.labelled == learned
    assert log.mismatches == [] and log.skipped == [] and log.fenced == [] and log.pending == {}
    assert all(member.log.digest == log.digest for member in members)
    return log


def _npz(rec: MixRecord, compression: int) -> bytes:
    """``rec`` in the ``.npz`` form written before the raw one (a zip member per array)."""
    head = {"kind": rec.kind, "round": rec.round, "member": rec.member,
            "examples": rec.examples, "offsets": dict(rec.offsets),
            "meta": None if rec.state is None else rec.state[0]}  # fmt: skip
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as zf:
        for name, array in [
            ("__head__", np.frombuffer(json.dumps(head).encode(), np.uint8)),
            *((f"a/{k}", v) for k, v in (rec.state or ({}, {}))[1].items()),
        ]:
            member = io.BytesIO()
            np.save(member, np.asarray(array), allow_pickle=False)
            zf.writestr(f"{name}.npy", member.getvalue())
    return out.getvalue()


def test_a_delta_is_stored_raw_and_the_npz_forms_still_read():
    """Deltas are written raw behind an index (every member decodes every delta, every round:
    a zip member per array cost 0.7 ms a read); records written as a plain or compressed .npz
    read the same; a damaged index is not a record (never an array outside the bytes)."""
    X, Y = _stream(100, 0)
    rec = _delta(_base(), 0, "a", X, Y, {"t/0": 100})
    _, value = encode(rec)
    assert value.startswith(MAGIC)
    raw = decode(value)
    plain, packed = decode(_npz(rec, zipfile.ZIP_STORED)), decode(_npz(rec, zipfile.ZIP_DEFLATED))
    assert raw.state is not None and rec.state is not None
    for name, array in rec.state[1].items():  # the same values, shapes and dtypes, writable
        got = raw.state[1][name]
        assert got.dtype == np.asarray(array).dtype and got.shape == np.shape(array)
        assert np.array_equal(got, array) and got.flags.writeable
    assert learner_digest(raw.state) == learner_digest(plain.state) == learner_digest(rec.state)
    assert learner_digest(packed.state) == learner_digest(rec.state)
    assert (raw.examples, raw.offsets) == (plain.examples, plain.offsets) == (100, {"t/0": 100})
    assert raw.base_digest == rec.base_digest and raw.member == "a" and raw.round == 0
    for cut in (len(value) - 1, len(MAGIC) + 4, len(MAGIC) + 40):
        with pytest.raises(ValueError, match="not a mix record"):
            decode(value[:cut])
    assert decode(encode(MixRecord("hello", 3, "b"))[1]).state is None


def test_replays_change_nothing_and_every_reader_gets_the_same_model():
    X, Y = _stream(300, 0)
    base = _base()
    head = [MixRecord("base", 0, "a", state=base), MixRecord("hello", 0, "a"),
            MixRecord("hello", 0, "b")]  # fmt: skip
    da = _delta(base, 0, "a", X[:100], Y[:100], {"t/0": 100})
    db = _delta(base, 0, "b", X[100:250], Y[100:250], {"t/1": 150})
    close = MixRecord("close", 0, "b")
    first, second = MixLog(), MixLog()
    for rec in [*head, da, db, close]:
        first.apply(_roundtrip(rec))
    replayed = [*head, head[0], da, da, db, close, db, close]  # a member re-published after a crash
    for rec in replayed:
        second.apply(_roundtrip(rec))
    assert first.round == second.round == 1
    assert first.digest == second.digest and first.examples == second.examples == 250
    assert second.duplicates == 3 and second.mismatches == []
    assert len(first.results) == 1  # closed by b's delta (all published); the close is a no-op
    assert first.frontier == {"t/0": 100, "t/1": 150}
    res = first.results[0]
    assert res.members == ("a", "b") and res.late == () and res.active_after <= res.active_before


def test_a_late_member_is_merged_next_round_and_nothing_is_counted_twice():
    X, Y = _stream(400, 1)
    base = _base()
    log = MixLog()
    for rec in [MixRecord("base", 0, "a", state=base), MixRecord("hello", 0, "a"),
                MixRecord("hello", 0, "b")]:  # fmt: skip
        log.apply(rec)
    log.apply(_delta(base, 0, "a", X[:100], Y[:100]))
    assert not log.complete()  # b is expected
    res0 = log.apply(MixRecord("close", 0, "a", late=("b",)))  # timeout: closed without b
    assert res0 is not None and res0.late == ("b",) and log.members == {"a"}
    log.apply(_delta(base, 0, "b", X[100:200], Y[100:200]))  # b's late delta: from base 0
    base1 = log.base
    log.apply(_delta(base1, 1, "a", X[200:300], Y[200:300]))
    assert log.members == {"a", "b"}  # b is back: its stale delta waits for the next close
    assert log.fresh() == {"a"} and not log.complete()  # ... and round 1 waits for b
    res1 = log.apply(_delta(base1, 1, "b", X[300:400], Y[300:400]))  # complete: closes
    assert res1 is not None and res1.stale == (("b", 1),) and set(res1.members) == {"a", "b"}
    assert log.examples == 400 and log.mismatches == []
    stranger = _delta(_base(), 2, "c", X[:10], Y[:10])
    log.apply(MixRecord("delta", 2, "c", examples=10, state=stranger.state, base_digest="x"))
    assert log.mismatches == [(2, "c")]  # learned from another model than the group's base


def _chained(prev: MixRecord, round_: int, xs, ys) -> MixRecord:
    """The delta of ``prev``'s member for ``round_``, learned on from ``prev``'s state before
    ``prev``'s round closed (a staleness bound above one round): measured from that state."""
    assert prev.state is not None
    learner = MKLClassifier(kernels=BANK)
    learner.rounds().load_state(*prev.state)
    start = learner.rounds().n_learned
    for x, y in zip(xs, ys, strict=True):
        learner.learn_one(x, y)
    return MixRecord(
        "delta", round_, prev.member, examples=learner.rounds().n_learned - start,
        state=learner.to_state(), base_digest=prev.base_digest, on=prev.base_round,
        ref=prev.state,
    )  # fmt: skip


def test_a_delta_learned_ahead_from_its_own_previous_delta_merges_its_progress_once():
    """Staleness bound s = 2: members a and b publish their round-1 deltas, learned on from
    their round-0 deltas, before round 0 closes (member c is still expected). c's bye closes
    round 0 and, at once, round 1 (both of its deltas are in). Round 1's merge is the one of the
    same progress moved onto round 1's base and published from it (s = 1), every example once;
    the reference state travels with the delta."""
    X, Y = _stream(400, 2)
    base = _base()
    head = [MixRecord("base", 0, "a", state=base), *(MixRecord("hello", 0, m) for m in "abc")]
    a0 = _delta(base, 0, "a", X[:100], Y[:100])
    b0 = _delta(base, 0, "b", X[100:250], Y[100:250])
    a1, b1 = _chained(a0, 1, X[250:300], Y[250:300]), _chained(b0, 1, X[300:400], Y[300:400])
    log = MixLog()
    for rec in [*head, a0, a1, b0, b1]:
        assert log.apply(_roundtrip(rec)) is None  # round 0 waits for c
    assert _roundtrip(a1).ref is not None and _roundtrip(a1).base_round == 0
    res = log.apply(MixRecord("bye", 0, "c"))
    assert res is not None and res.round == 1 and [r.round for r in log.results] == [0, 1]
    assert log.round == 2 and log.examples == 400 and log.mismatches == []
    assert res.members == ("a", "b") and res.stale == ()
    # the same progress, moved onto round 1's base by its member and published from it
    other = MixLog()
    for rec in [*head, a0, b0, MixRecord("bye", 0, "c")]:
        other.apply(_roundtrip(rec))
    base1 = other.base
    assert base1 is not None
    moved = []
    for rec, prev in ((a1, a0), (b1, b0)):
        assert rec.state is not None and prev.state is not None
        state = rebased(base1, rec.state, prev.state, rec.examples)
        moved.append(dataclasses.replace(rec, state=state, on=-1, ref=None,
                                         base_digest=learner_digest(base1)))  # fmt: skip
    for rec in moved:
        other.apply(_roundtrip(rec))
    assert other.round == 2 and other.examples == 400
    assert log.base is not None and other.base is not None
    mine, theirs = core_state(log.base)[1], core_state(other.base)[1]
    assert mine.keys() == theirs.keys()
    for name, array in mine.items():
        if np.issubdtype(np.asarray(array).dtype, np.floating):
            np.testing.assert_allclose(array, theirs[name], rtol=1e-9, atol=1e-12, err_msg=name)
        else:
            assert np.array_equal(array, theirs[name]), name


def _claiming(rec: MixRecord, claims: dict[str, tuple[int, int]]) -> MixRecord:
    return dataclasses.replace(rec, claims=claims)


def test_a_delta_claiming_records_another_member_has_taken_is_fenced_and_learned_again():
    """A rebalance went on without member a (say its revocation callback outlived the broker's
    join window): b took a's partition t/0 from the frontier, then a's revocation delta claims
    records of it. Every reader sets a's delta aside whole (its claims leave the frontier where
    it was), counts b's delta over the same records, and fences a's next delta too (learned on
    from where the fenced one ended: a gap) until a takes its partition again: every record
    once, none lost."""
    X, Y = _stream(400, 3)
    base = _base()
    log = MixLog()
    for rec in [MixRecord("base", 0, "a", state=base), MixRecord("hello", 0, "a"),
                MixRecord("hello", 0, "b"), MixRecord("take", 0, "a", partitions=("t/0", "t/1")),
                MixRecord("take", 0, "b", partitions=("t/2",))]:  # fmt: skip
        log.apply(_roundtrip(rec))
    assert log.owners["t/0"][:2] == ("a", 0) and log.owners["t/2"][:2] == ("b", 0)
    log.apply(_roundtrip(_claiming(_delta(base, 0, "a", X[:100], Y[:100]),
                                   {"t/0": (0, 60), "t/1": (0, 40)})))  # fmt: skip
    log.apply(_roundtrip(_claiming(_delta(base, 0, "b", X[100:150], Y[100:150]),
                                   {"t/2": (0, 50)})))  # fmt: skip
    assert log.round == 1 and log.examples == 150
    assert log.frontier == {"t/0": 60, "t/1": 40, "t/2": 50}
    base1 = log.base
    log.apply(_roundtrip(MixRecord("take", 1, "b", partitions=("t/0", "t/2"))))
    assert log.owners["t/0"][:2] == ("b", 60)  # from the frontier at the take
    zombie = _claiming(_delta(base1, 1, "a", X[150:210], Y[150:210]),
                       {"t/0": (60, 90), "t/1": (40, 70)})  # fmt: skip
    assert log.apply(_roundtrip(zombie)) is None
    assert log.fenced[-1].member == "a" and log.fenced[-1].examples == 60
    assert "taken over by 'b' from offset 60" in log.fenced[-1].detail
    assert log.frontier == {"t/0": 60, "t/1": 40, "t/2": 50}  # unmoved: learned again
    again = _claiming(_delta(base1, 1, "b", X[150:180], Y[150:180]), {"t/0": (60, 90)})
    res = log.apply(_roundtrip(again))  # both published: the round closes without a wait
    assert res is not None and res.members == ("b",) and res.late == () and res.examples == 30
    assert log.examples == 180 and log.members == {"a", "b"} and log.frontier["t/0"] == 90
    gap = _claiming(_delta(log.base, 2, "a", X[210:220], Y[210:220]), {"t/1": (70, 80)})
    log.apply(_roundtrip(gap))  # t/1 is still a's, but its records 40..70 were never counted
    assert len(log.fenced) == 2 and "not at the group's frontier 40" in log.fenced[-1].detail
    res = log.apply(_roundtrip(MixRecord("close", 2, "a")))
    assert res is not None and res.examples == 0 and res.late == ("b",)
    log.apply(_roundtrip(MixRecord("take", 3, "a", partitions=("t/1",))))  # a's next assignment
    assert log.owners["t/1"][:2] == ("a", 40)
    res = log.apply(
        _roundtrip(_claiming(_delta(log.base, 3, "a", X[180:220], Y[180:220]), {"t/1": (40, 80)}))
    )  # a alone is expected: closes
    assert res is not None and res.examples == 40 and log.examples == 220
    assert log.fenced_examples == 70 and log.skipped == []
    assert log.frontier == {"t/0": 90, "t/1": 80, "t/2": 50}


def test_the_merged_models_prequential_and_hindsight_views_fold_once():
    """Deltas carry their examples' prequential sums; a member's hindsight report (online vs
    the merged model on the same examples) counts once per (round, member), replays or not."""
    from streammkl.daemon.mixing.member import hindsight, prequential

    X, Y = _stream(200, 7)
    base = _base()
    log = MixLog()
    for rec in [MixRecord("base", 0, "a", state=base), MixRecord("hello", 0, "a")]:
        log.apply(rec)
    learner = MKLClassifier(kernels=BANK)
    learner.rounds().load_state(*base)
    kept = []
    for x, y in zip(X[:100], Y[:100], strict=True):
        proba = learner.predict_proba_one(x)
        kept.append((x, y, (max(proba, key=proba.__getitem__) if proba else None, proba)))
        learner.learn_one(x, y)
    view = prequential(kept)
    assert view["labelled"] == 100 and 0 < view["mistakes"] < 60
    delta = MixRecord("delta", 0, "a", examples=100, state=learner.to_state(),
                      base_digest=learner_digest(base), stats=view)  # fmt: skip
    log.apply(_roundtrip(delta))
    log.apply(_roundtrip(delta))  # a replay
    assert (log.loss, log.mistakes, log.labelled) == (view["loss"], view["mistakes"], 100)
    learner.rounds().load_state(*log.base)
    report = hindsight(learner.rounds(), kept, 0)
    again = sum(-np.log(max(learner.predict_proba_one(x).get(y, 0.0), 1e-15))
                for x, y, _ in kept)  # fmt: skip
    assert report["h_loss"] == view["loss"] and report["h_merged_loss"] == pytest.approx(again)
    assert report["h_merged_loss"] < report["h_loss"]  # the merged model has seen them
    bye = MixRecord("bye", 1, "a", stats=report)
    for rec in (bye, bye):  # a replayed bye counts once
        log.apply(_roundtrip(rec))
    assert log.regret == pytest.approx(report["h_loss"] - report["h_merged_loss"])
    assert log.regret_examples == 100 and log.regret_mistakes == int(
        report["h_mistakes"] - report["h_merged_mistakes"]
    )
    registry = CollectorRegistry()
    MixMetrics(registry).totals(log)  # exported as the streammkl_mix_* gauges
    sample = registry.get_sample_value
    assert sample("streammkl_mix_regret") == log.regret
    assert sample("streammkl_mix_loss_sum") == log.loss
    assert (
        sample("streammkl_mix_labelled") == 100 and sample("streammkl_mix_regret_examples") == 100
    )


def _foreign_delta(round_: int, member: str, n: int) -> MixRecord:
    """A delta learned with another kernel bank than the group's (what a member that changed
    its bank on its own would publish)."""
    X, Y = _stream(n, 11)
    learner = MKLClassifier(kernels=(kernels.Linear(), kernels.RBF(2.0, n_components=16)))
    learner.rounds().declare_classes([0, 1])
    for x, y in zip(X, Y, strict=True):
        learner.learn_one(x, y)
    return MixRecord("delta", round_, member, examples=n, state=learner.to_state())


def test_a_record_that_cannot_be_used_is_skipped_and_reported_by_every_reader():
    """Garbage, a base that is no learner, a bank that cannot be built and a delta over
    another bank: every reader skips the same records (with their examples, which the merged
    model lacks) and merges the rest; nothing raises, on the first fold or a replay."""
    X, Y = _stream(300, 2)
    base = _base()
    garbage = MixRecord.unreadable(b"delta/0000000000/zz", "not a zip file")
    assert garbage.round == 0 and garbage.member == "zz"
    with pytest.raises(ValueError, match="not a mix record"):
        decode(b"\x00garbage")
    records = [
        MixRecord("base", 0, "x", state=({"format": "nope"}, {})),  # not a learner: skipped
        MixRecord("base", 0, "a", state=base), MixRecord("hello", 0, "a"),
        MixRecord("hello", 0, "b"), garbage, MixRecord.unreadable(None, "empty"),
        MixRecord("bank", 0, "x", kernels=({"type": "Nope"},)),
        _foreign_delta(0, "c", 40),
        _delta(base, 0, "a", X[:100], Y[:100]),
        _delta(base, 0, "b", X[100:200], Y[100:200]),
        MixRecord("close", 0, "a", late=("c",)),
    ]  # fmt: skip
    logs = [MixLog(), MixLog()]
    for log in logs:
        for rec in records:
            log.apply(_roundtrip(rec) if rec.kind != "unreadable" else rec)
    first, second = logs
    assert first.round == second.round == 1 and first.digest == second.digest
    assert first.examples == 200  # a and b merged; c's 40 examples are not in the model
    assert [(s.reason, s.member, s.examples) for s in first.skipped] == [
        ("bad_base", "x", None), ("undecodable", "zz", None), ("undecodable", "?", None),
        ("bad_bank", "x", None), ("foreign_bank", "c", 40),
    ]  # fmt: skip
    assert first.skipped == second.skipped and first.skipped_examples == 40
    registry = CollectorRegistry()
    metrics = MixMetrics(registry)
    for skip in first.skipped:
        metrics.skipped(skip)
    sample = registry.get_sample_value
    assert sample("streammkl_mix_deltas_skipped_total", {"reason": "foreign_bank"}) == 1
    assert sample("streammkl_mix_deltas_skipped_total", {"reason": "undecodable"}) == 2
    assert sample("streammkl_mix_skipped_examples_total") == 40
    from streammkl.daemon.mixing.member import describe

    line = describe(first.skipped[-1])
    assert (
        "member 'c' for round 0" in line and "its 40 examples are not in the merged model" in line
    )
    # the merge of a and b alone gives the same model: the bad records changed nothing else
    clean = MixLog()
    for rec in [records[1], records[2], records[3], records[8], records[9], records[10]]:
        clean.apply(rec)
    assert clean.digest == first.digest


def test_a_bank_proposal_switches_every_reader_at_the_round_boundary():
    """A ``bank`` record changes the merged model's bank when the open round closes: the kept
    blocks keep their merged state, the new one starts at zero, members adopt it (and its bank)
    with equal digests; a late delta learned before the switch gets the same switch and is
    merged, nothing skipped."""
    X, Y = _stream(500, 4)
    base = _base()
    new_bank = [*BANK[:2], kernels.RBF(2.0, n_components=16)]
    head = [MixRecord("base", 0, "a", state=base), MixRecord("hello", 0, "a"),
            MixRecord("hello", 0, "b")]  # fmt: skip
    da = _delta(base, 0, "a", X[:100], Y[:100])
    proposal = MixRecord("bank", 0, "a", kernels=tuple(canonical_bank(new_bank)))
    switched, plain = MixLog(), MixLog()
    for rec in [*head, da, proposal, MixRecord("close", 0, "a", late=("b",))]:
        switched.apply(_roundtrip(rec))
    for rec in [*head, da, MixRecord("close", 0, "a", late=("b",))]:
        plain.apply(rec)
    res = switched.results[-1]
    names = [k.name for k in new_bank]
    assert res.bank == ((names[2],), (BANK[2].name, BANK[3].name))
    assert switched.bank_changes == 1 and switched.skipped == []
    assert switched.bank == canonical_bank(new_bank)
    merged = MKLClassifier.from_state(*switched.base)
    kept = MKLClassifier.from_state(*plain.base)
    assert merged.rounds().kernel_names == names
    for name in names[:2]:
        assert merged.rounds().block_norms[name] == kept.rounds().block_norms[name] > 0
    assert merged.rounds().block_norms[names[2]] == 0.0
    member = MKLClassifier(kernels=BANK)  # a member configured with the old bank adopts it
    with pytest.raises(ValueError, match="other parameters: kernels"):
        member.rounds().load_state(*switched.base)
    member.rounds().load_state(*switched.base, with_bank=True)
    assert member.rounds().digest() == switched.digest
    # b's late delta (learned from base 0, over the old bank) is merged into round 1 with the
    # switch applied to it and to its base; a's fresh delta is over the new bank
    switched.apply(_roundtrip(_delta(base, 0, "b", X[100:200], Y[100:200])))
    fresh = MKLClassifier(kernels=BANK)
    fresh.rounds().load_state(*switched.base, with_bank=True)
    for x, y in zip(X[200:300], Y[200:300], strict=True):
        fresh.learn_one(x, y)
    switched.apply(MixRecord("delta", 1, "a", examples=100, state=fresh.to_state(),
                             base_digest=switched.digest))  # fmt: skip
    res1 = switched.apply(MixRecord("close", 1, "a", late=("b",)))
    assert res1 is not None and res1.stale == (("b", 1),) and res1.bank is None
    assert switched.examples == 300 and switched.skipped == [] and switched.mismatches == []


class MemoryTopic:
    """An in-memory mix topic (one shared list of records, each reader its own position)."""

    def __init__(self, records: list[MixRecord]) -> None:
        self.records, self.position = records, 0

    def publish(self, rec: MixRecord, timeout: float = 30.0, attempts: int = 0) -> None:
        self.records.append(_roundtrip(rec))

    def send(self, rec: MixRecord) -> None:
        self.publish(rec)

    def confirm(self, rec: MixRecord, sent: None, timeout: float = 30.0, attempts: int = 0) -> None:
        pass

    def read(self, timeout_ms: int = 0) -> list[MixRecord]:
        out, self.position = self.records[self.position :], len(self.records)
        return out

    def read_to_end(self, max_seconds: float = 10.0) -> list[MixRecord]:
        return self.read()

    def close(self) -> None:
        pass


def _member(
    records: list[MixRecord], name: str, mixing: dict[str, object] | None = None,
    topic: type[MemoryTopic] = MemoryTopic, classes: tuple = (0, 1), **learner: object,
) -> tuple[MixingMember, Any]:  # fmt: skip
    from streammkl.daemon.learning.building import build_learner

    # (staleness 1 unless a test says otherwise: the scripted sequences of records below are
    # those of a member that waits for its last delta's round before its next)
    overrides = {"mixing.enabled": True, "mixing.member": name, "records.classes": list(classes),
                 "kafka.create_topics": False, "learner.kernels": KERNELS[:3],
                 "mixing.round_timeout_seconds": 0.2, "mixing.staleness": 1,
                 **{f"mixing.{k}": v for k, v in (mixing or {}).items()},
                 **{f"learner.{k}": v for k, v in learner.items()}}  # fmt: skip
    settings = load_settings(env={}, overrides=overrides)
    member = MixingMember(settings, MixMetrics(CollectorRegistry()),
                         topic_factory=lambda k, t: topic(records))  # fmt: skip
    return member, build_learner(settings.learner)


def _learn_batch(member: MixingMember, learner: Any, xs: list[dict], ys: list[int]) -> None:
    """One batch of ``member``'s learning loop on ``learner``, with the prequential records the
    daemon keeps."""
    member.before_batch(learner, {})
    member.took(len(xs))
    for x, y in zip(xs, ys, strict=True):
        member.kept.append((x, y, (learner.predict_one(x), learner.predict_proba_one(x))))
        learner.learn_one(x, y)
    member.after_batch(learner, {})


def test_a_member_proposes_its_bank_and_is_refused_other_learner_settings():
    """At join, a member whose settings name another bank than the group's proposes it (the
    group's model is adopted meanwhile); one with another loss is refused, naming it; a
    proposal that drops most learned blocks is refused unless forced (SIGHUP's guards)."""
    from streammkl.daemon.config import LearnerSpec, ReloadSettings
    from streammkl.daemon.learning.building import LearnerConfigError

    records: list[MixRecord] = []
    a, learner_a = _member(records, "a")
    a.join(learner_a, {})
    assert [r.kind for r in records] == ["base", "hello"] and a.configured is not None
    other, learner_o = _member(records, "o", loss="Logistic")
    with pytest.raises(LearnerConfigError, match=r"other parameters: loss.*same \[learner\]"):
        other.join(learner_o, {})
    b, learner_b = _member(records, "b", kernels=[*KERNELS[:3], KERNELS[3]])
    b.join(learner_b, {})
    # the group's bank, until the switch
    assert learner_b.rounds().kernel_names == learner_a.rounds().kernel_names
    assert [r.kind for r in records[-2:]] == ["bank", "hello"]
    time.sleep(0.06)  # the loop reads the log every 50 ms (group.READ_EVERY)
    a.before_batch(learner_a, {})  # a reads the proposal: a pending proposal ends its round
    assert a.log.proposal is not None
    a.after_batch(learner_a, {})  # ... at once, and learns on (pipelined: no wait)
    assert records[-1].kind == "delta" and a.published and a.log.round == 0
    b.before_batch(learner_b, {})  # b reads a's delta and the proposal: it has nothing to
    b.took(0)  # read, so it ends the round at once, which closes it (every member published)
    b.after_batch(learner_b, {})
    assert records[-1].kind == "delta" and b.published
    a.before_batch(learner_a, {})  # both read the close and move onto the switched base
    b.before_batch(learner_b, {})
    for m in (a, b):
        assert m.log.bank_changes == 1 and m.log.proposal is None and not m.published
    rounds_a, rounds_b = learner_a.rounds(), learner_b.rounds()
    assert rounds_a.kernel_names == rounds_b.kernel_names == [k.name for k in BANK]
    assert rounds_a.digest() == rounds_b.digest() == a.log.digest == b.log.digest
    # a SIGHUP to a bank dropping 3 of the 4 learned blocks: refused, then forced
    X, Y = _stream(200, 5)
    for x, y in zip(X, Y, strict=True):
        learner_a.learn_one(x, y)
    spec = LearnerSpec(kernels=(KERNELS[0],))
    with pytest.raises(LearnerConfigError, match=r"reload\.force"):
        a.propose(learner_a, spec, ReloadSettings())
    assert a.propose(learner_a, spec, ReloadSettings(force=True)) is True
    assert a.propose(learner_a, spec, ReloadSettings(force=True)) is False  # pending already


def test_group_mode_refuses_what_it_cannot_merge():
    learner = MKLClassifier(kernels=(kernels.RBF(0.5),), budget=64)  # kernelized: merged
    learner.rounds().declare_features([])
    check_base_state(learner.to_state())
    with pytest.raises(ValueError, match="kernelized MedianRBF"):
        learner = MKLClassifier(kernels=(kernels.MedianRBF(1.0, None),), budget=64)
        learner.rounds().declare_features([])
        check_base_state(learner.to_state())
    default = MKLClassifier()  # the default bank (MedianRBF Fourier maps) is accepted
    default.rounds().declare_features([])
    check_base_state(default.to_state())
    for overrides, match in [
        ({"mixing.enabled": True}, "records.classes"),
        ({"mixing.enabled": True, "kafka.assignment": "all"}, "assignment"),
    ]:
        with pytest.raises(ConfigError, match=match):
            settings = load_settings(env={}, overrides=overrides)
            MixingMember(settings, MixMetrics(CollectorRegistry()))


# -- end to end, real broker ---------------------------------------------------------------------


def _produce(bootstrap: str, topic: str, n: int, seed: int, partitions: int) -> None:
    create_topic(bootstrap, topic, partitions)
    X, Y = _stream(n, seed)
    values = [json.dumps({"x": x, "y": y}).encode() for x, y in zip(X, Y, strict=True)]
    produce(bootstrap, topic, values, partition_of=lambda i: i % partitions)


def _argv(
    bootstrap, topic, group, ckpt, member, mix, every=500, idle=6.0, bank=KERNELS, learner=None,
    port=0, config=None,
):  # fmt: skip
    settings = {
        "mixing.enabled": True, "mixing.every_records": every, "mixing.member": member,
        "mixing.topic": mix, "mixing.round_timeout_seconds": 4.0, "records.classes": [0, 1],
        "monitor.enabled": False, "kafka.max_poll_records": 200,
        "checkpoint.every_records": 300, "kafka.session_timeout_ms": 1000,
        "kafka.heartbeat_interval_ms": 250,
    }  # fmt: skip
    if bank is not None:  # None: the default bank (MedianRBF) and standardised inputs
        settings["learner.kernels"] = bank
    settings.update(learner or {})  # more learner settings (and another bank)
    argv = daemon_argv(bootstrap, topic, group, ckpt, port=port, idle=idle, settings=settings)
    return argv if config is None else [*argv, "--config", str(config)]


def _fold(bootstrap: str, mix: str) -> MixLog:
    topic = MixTopic(load_settings(env={}, overrides={"kafka.bootstrap_servers": bootstrap}).kafka,
                     mix)  # fmt: skip
    log = MixLog()
    try:
        for rec in topic.read_to_end(30):
            log.apply(rec)
    finally:
        topic.close()
    return log


def _run_group(
    kafka_bootstrap: str,
    tmp_path: Path,
    n: int,
    kills: int,
    seed: int,
    bank=KERNELS,
    learner=None,
    client: str = "librdkafka",
) -> MixLog:
    topic, mix, group = unique("grp"), unique("mix"), unique("g")
    learner = {**(learner or {}), "kafka.consumer_client": client}
    _produce(kafka_bootstrap, topic, n, seed, partitions=6)
    rng = random.Random(seed)
    argvs = [_argv(kafka_bootstrap, topic, group, tmp_path / f"m{i}", f"m{i}", mix, bank=bank,
                   learner=learner) for i in range(2)]  # fmt: skip
    procs = [start_daemon(a, tmp_path / f"m{i}.log") for i, a in enumerate(argvs)]
    for _ in range(kills):  # kill -9 member 1 at a random moment, restart it
        time.sleep(rng.uniform(1.5, 5.0))
        assert procs[1].poll() is None, "the member ended before it could be killed"
        procs[1].send_signal(signal.SIGKILL)
        assert procs[1].wait(timeout=30) == -signal.SIGKILL
        procs[1] = start_daemon(argvs[1], tmp_path / "m1.log")
    for p in procs:
        assert p.wait(timeout=300) == 0, (tmp_path / "m0.log").read_text()[-3000:]
    log = _fold(kafka_bootstrap, mix)
    assert log.examples == n  # every record learned exactly once in the merged model
    assert log.mismatches == [] and log.dropped == []
    assert log.pending == {}  # the last member's shutdown closed the last round
    views = [inspect(tmp_path / f"m{i}") for i in range(2)]
    final = {v["model_digest"] for v in views}
    assert final <= set(log.digests.values())  # each member holds exactly a merged model
    assert log.digest in final  # the last one out holds the group's final model
    # the merged model's prequential view counts every example once; its hindsight view
    # covers the rounds the members reported (all of them but a killed member's last)
    assert log.labelled == n and 0 < log.mistakes < n / 2 and log.loss > 0
    assert 0 < log.regret_examples <= n
    if not kills:  # nothing unpublished was thrown away: the members' counters agree
        assert log.regret_examples >= n // 5  # a sample of every CHECK_EVERY-th round
        assert sum(v["examples_learned"] for v in views) == n
        assert sum(v["online_loss"] for v in views) == pytest.approx(log.loss, rel=1e-9)
    return log


@pytest.mark.kafka
@pytest.mark.xdist_group("kafka")
@pytest.mark.parametrize(("n", "kills", "seed", "bank", "client"),
                         [(4000, 0, 3, KERNELS, "librdkafka"),
                          (8000, 1, 4, KERNELS, "librdkafka"),
                          (8000, 1, 4, KERNELS, "kafka-python"),
                          (8000, 1, 8, None, "librdkafka"),
                          (8000, 1, 9, None, "staleness-2")],
                         ids=["no-fault", "kill9-once", "kill9-once-kafka-python",
                              "kill9-once-default-bank", "kill9-once-staleness-2"])  # fmt: skip
def test_two_members_learn_one_model_exactly_once(
    kafka_bootstrap: str, tmp_path: Path, n: int, kills: int, seed: int, bank, client: str
) -> None:
    """kill9-once: SIGKILL of a member at a random moment, then a restart (with the fixed
    bank, and with the default one: held bandwidths, pooled input statistics), with either
    consumer client (``kafka.consumer_client``: the group consumes with the one it names),
    and with the staleness bound 2 (a member killed with deltas published ahead of the merged
    model: they are merged from their own references, its next delta follows them)."""
    learner = None
    if client == "staleness-2":
        client, learner = "librdkafka", {"mixing.staleness": 2}
    _run_group(kafka_bootstrap, tmp_path, n=n, kills=kills, seed=seed, bank=bank,
               client=client, learner=learner)  # fmt: skip


@pytest.mark.kafka
@pytest.mark.xdist_group("kafka")
def test_two_members_learn_one_model_with_the_default_bank(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The default bank (MedianRBF bandwidths, standardised inputs): the group agrees on one
    bandwidth per kernel (decided by the merge from the members' pooled warm-up inputs), every
    record is learned once, and every member holds the merged models."""
    log = _run_group(kafka_bootstrap, tmp_path, n=4000, kills=0, seed=6, bank=None)
    final = learner_digest(log.base)  # type: ignore[arg-type]
    assert final == log.digest
    learner = MKLClassifier.from_state(*log.base)  # type: ignore[misc]
    medians = [k for k in learner.rounds().model.kernels if isinstance(k, kernels.MedianRBF)]
    assert len(medians) == 4 and all(k.fit.final for k in medians)  # 3 RFF + landmarks
    landmarks = medians[-1]
    assert isinstance(landmarks, kernels.LandmarkRBF) and landmarks.landmarks  # the group's
    # the warm-up round
    assert learner.rounds().model.warmup_left == 0 and log.results[0].examples <= 2 * 50
    count = learner.to_state()[1]["inputs.count"]
    assert count.tolist() == [4000.0] * 3  # the pooled input statistics count every record once


@pytest.mark.kafka
@pytest.mark.xdist_group("kafka")
def test_a_kernelized_bank_merges_its_support_sets_exactly_once(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Kernelized blocks (support sets under a budget) next to an explicit one: two members,
    every record learned once in the merged model, equal digests, the budget held."""
    learner = {
        "learner.kernels": ["linear", {"type": "RBF", "gamma": 0.5},
                            {"type": "Polynomial", "degree": 2}],
        "learner.budget": 64,
    }  # fmt: skip
    log = _run_group(kafka_bootstrap, tmp_path, n=3000, kills=0, seed=6, learner=learner)
    assert len(log.results) >= 3  # several merges of support sets
    assert log.base is not None
    _, arrays = core_state(log.base)
    assert 0 < arrays["coef"].shape[1] <= 64  # the merged support set within the budget


#: The issue's bank: a linear kernel and a Fourier-mapped Gaussian (in the settings file).
ISSUE_BANK = '[{type = "Linear"}, {type = "RBF", gamma = 0.5, n_components = 32}]'
ADDED_RBF = '{type = "RBF", gamma = 2.0, n_components = 16}'
#: A group lasso too weak to zero a block that learns: the test checks that the added kernel
#: learns after the switch, however late in the stream the switch lands (under the default 1e-2,
#: FTRL kept a block added in the last rounds at exactly 0, as it should: 1 of 2 fresh-clone runs).
WEAK_LASSO = '{type = "GroupLasso", lam = 1e-6}'


def _metric(port: int, name: str, **labels: str) -> float:
    return metrics(port).get((name, tuple(sorted(labels.items()))), 0.0)


def _member_configs(tmp_path: Path, bank: str) -> list[Path]:
    paths = [tmp_path / f"m{i}.toml" for i in range(2)]
    for path in paths:
        path.write_text(f"[learner]\nkernels = {bank}\nregularizer = {WEAK_LASSO}\n")
    return paths


@pytest.mark.kafka
@pytest.mark.xdist_group("kafka")
def test_a_kernel_change_on_one_member_switches_the_whole_group_at_one_round(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The issue's scenario: after some records, an RBF kernel is appended to ONE member's
    settings file and that member gets SIGHUP. It proposes the bank through the mix log and
    every member switches at the same round boundary: the group keeps learning (the new block
    too), every record is learned once, every member holds the merged models, nothing is
    skipped. (Before: every member folding the other's delta exited 1, for good.)"""
    n = 16000
    topic, mix, group = unique("grp"), unique("mix"), unique("g")
    _produce(kafka_bootstrap, topic, n, 9, partitions=6)
    ports = [free_port(), free_port()]
    configs = _member_configs(tmp_path, ISSUE_BANK)
    argvs = [_argv(kafka_bootstrap, topic, group, tmp_path / f"m{i}", f"m{i}", mix, bank=None,
                   port=ports[i], config=configs[i]) for i in range(2)]  # fmt: skip
    procs = [start_daemon(a, tmp_path / f"m{i}.log") for i, a in enumerate(argvs)]
    try:
        wait_until(lambda: _metric(ports[0], "streammkl_mix_examples") >= 2000, 120,
                   "two merged rounds")  # fmt: skip
        configs[1].write_text(
            f"[learner]\nkernels = {ISSUE_BANK[:-1]}, {ADDED_RBF}]\nregularizer = {WEAK_LASSO}\n"
        )
        procs[1].send_signal(signal.SIGHUP)
        for port in ports:  # the switch, seen by both members (folded from the log)
            wait_until(lambda p=port: _metric(p, "streammkl_mix_bank_changes_total") == 1, 60,
                       "the group's bank switch")  # fmt: skip
        applied = _metric(ports[1], "streammkl_config_reloads_total", result="applied")
        assert applied == 1 and all(p.poll() is None for p in procs)
        switched_at = _metric(ports[0], "streammkl_mix_examples")
        for p in procs:
            assert p.wait(timeout=300) == 0, (tmp_path / "m0.log").read_text()[-3000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    log = _fold(kafka_bootstrap, mix)
    assert log.examples == n and log.skipped == [] and log.mismatches == []  # exactly once
    assert log.bank_changes == 1 and log.pending == {}
    assert switched_at < n  # the switch came mid-stream: the group learned on with the new bank
    views = [inspect(tmp_path / f"m{i}") for i in range(2)]
    assert {v["model_digest"] for v in views} <= set(log.digests.values())
    assert log.digest in {v["model_digest"] for v in views}
    added = kernels.RBF(2.0, n_components=16).name
    for view in views:
        assert len(view["kernel_weights"]) == 3 and view["block_norms"][added] > 0
    texts = [(tmp_path / f"m{i}.log").read_text() for i in range(2)]
    assert "learner.kernels: proposed to the group" in texts[1]
    for text in texts:
        assert "the group's kernels change at round" in text and "Traceback" not in text


@pytest.mark.kafka
@pytest.mark.xdist_group("kafka")
def test_bad_records_in_the_mix_log_are_skipped_by_every_member_and_on_restart(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Garbage and a delta learned over another bank are planted in the mix topic mid-run:
    both members skip them (counted, a WARNING naming member and round), learn on, and a member
    killed and restarted re-folds the log past them; every produced record is in the merged
    model once, the planted delta's examples are not."""
    from kafka import KafkaProducer

    n = 24000  # enough that the group still learns when the planted records are read
    topic, mix, group = unique("grp"), unique("mix"), unique("g")
    _produce(kafka_bootstrap, topic, n, 12, partitions=6)
    ports = [free_port(), free_port()]
    argvs = [_argv(kafka_bootstrap, topic, group, tmp_path / f"m{i}", f"m{i}", mix,
                   port=ports[i]) for i in range(2)]  # fmt: skip
    procs = [start_daemon(a, tmp_path / f"m{i}.log") for i, a in enumerate(argvs)]
    skipped = "streammkl_mix_deltas_skipped_total"
    try:
        wait_until(lambda: _metric(ports[0], "streammkl_mix_round") >= 2, 120, "round 2")
        r = int(_metric(ports[0], "streammkl_mix_round"))
        producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
        producer.send(mix, key=f"delta/{r:010d}/zz".encode(), value=b"\x00 not a mix record",
                      partition=0).get(timeout=30)  # fmt: skip
        key, value = encode(_foreign_delta(r, "intruder", 40))
        producer.send(mix, key=key, value=value, partition=0).get(timeout=30)
        producer.close()
        for port in ports:
            wait_until(lambda p=port: _metric(p, skipped, reason="foreign_bank") == 1
                       and _metric(p, skipped, reason="undecodable") == 1, 60,
                       "both records skipped")  # fmt: skip
        assert _metric(ports[0], "streammkl_mix_skipped_examples_total") == 40
        procs[1].send_signal(signal.SIGKILL)
        assert procs[1].wait(timeout=30) == -signal.SIGKILL
        procs[1] = start_daemon(argvs[1], tmp_path / "m1.log")  # re-folds the whole log
        wait_until(lambda: _metric(ports[1], skipped, reason="foreign_bank") == 1, 120,
                   "the restarted member to skip the planted delta again")  # fmt: skip
        for p in procs:
            assert p.wait(timeout=300) == 0, (tmp_path / "m1.log").read_text()[-3000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    log = _fold(kafka_bootstrap, mix)
    assert log.examples == n  # every produced record once; the intruder's 40 are not in it
    assert [(s.reason, s.member) for s in log.skipped] == [
        ("undecodable", "zz"), ("foreign_bank", "intruder")
    ]  # fmt: skip
    assert log.skipped_examples == 40 and log.pending == {}
    views = [inspect(tmp_path / f"m{i}") for i in range(2)]
    assert log.digest in {v["model_digest"] for v in views}
    for i in range(2):
        text = (tmp_path / f"m{i}.log").read_text()
        line = f"skipped the delta of member 'intruder' for round {r}"
        assert text.count(line) == (2 if i == 1 else 1), text[-3000:]  # m1: again on restart
        assert "its 40 examples are not in the merged model" in text


@pytest.mark.slow
@pytest.mark.kafka
@pytest.mark.xdist_group("kafka")
@pytest.mark.parametrize("client", ["librdkafka", "kafka-python"])
def test_repeated_kill9_loses_nothing_and_counts_nothing_twice(
    kafka_bootstrap: str, tmp_path: Path, client: str
) -> None:
    _run_group(kafka_bootstrap, tmp_path, n=60000, kills=4, seed=5, client=client)


class _IdleReader:
    """A mix log reader that is never read (the publishing tests only send)."""

    def __init__(self, settings, topic, max_record_bytes, max_wait_ms):
        pass


def test_a_record_the_client_skips_is_read_again_not_lost() -> None:
    """The mix topic's reader hands on every record of the log in order: a gap in the offsets
    a poll returns (a record the client skipped) sends it back to the first missing offset,
    once per gap; a record read before is dropped; a gap met again after going back is the
    log's own (a record compacted away) and is read past."""
    from types import SimpleNamespace

    encoded = {i: encode(MixRecord("hello", i, f"m{i}"))[1] for i in range(8)}
    polls: list[list[int]] = [[0, 1, 3, 4], [2, 3, 4], [3, 4, 6], [6], [7]]
    seeks: list[int] = []

    class Reader(_IdleReader):  # read, from a script of polls
        def seek(self, offset):
            seeks.append(offset)

        def poll(self, timeout_ms):
            offsets = polls.pop(0) if polls else []
            return [SimpleNamespace(offset=o, key=b"k", value=encoded[o]) for o in offsets]

    topic = MixTopic(load_settings(env={}).kafka, "mix", writer=lambda *a: None,
                     reader=Reader)  # fmt: skip
    read = [[r.round for r in topic.read()] for _ in range(5)]
    assert read == [[0, 1], [2, 3, 4], [], [6], [7]]
    assert seeks == [2, 5] and topic.gaps == 2  # offset 5 is not in the log: read past it


def test_a_failed_publish_is_retried_on_a_new_producer(monkeypatch):
    import streammkl.daemon.mixing.topic as gt

    monkeypatch.setattr(gt.time, "sleep", lambda s: None)
    sent, producers = [], []

    class Writer:
        def __init__(self, settings, topic, max_record_bytes):
            producers.append(self)

        def send(self, key, value):
            if len(producers) == 1:  # the first producer is broken (e.g. after a broker restart)
                raise SendFailed("broken")
            sent.append(key)
            return type("Acked", (), {"wait": lambda self, timeout: None})()

        def close(self, timeout):
            pass

    kafka = load_settings(env={}).kafka
    topic = MixTopic(kafka, "mix", writer=Writer, reader=_IdleReader)
    topic.publish(MixRecord("hello", 0, "a"))
    assert sent == [b"hello/0000000000/a"] and len(producers) == 2
    with pytest.raises(SendFailed):  # bounded at shutdown
        broken = MixTopic(kafka, "mix", writer=Writer, reader=_IdleReader)
        producers[:] = [broken.writer]
        broken.publish(MixRecord("bye", 0, "a"), attempts=1)


def test_a_delta_sent_without_waiting_is_confirmed_or_published_again(monkeypatch):
    """The topic sends a delta without waiting; confirming it waits for the acknowledgement,
    and publishes it again (a new producer, the same key) if the send failed, later or at
    once. The member confirms before it waits for its round and before its partitions go,
    never while it learns on."""
    from types import SimpleNamespace

    import streammkl.daemon.mixing.topic as gt

    monkeypatch.setattr(gt.time, "sleep", lambda s: None)
    sent: list[tuple[int, bytes]] = []
    producers: list[Any] = []

    class Acknowledgement:
        def __init__(self, ok: bool) -> None:
            self.ok, self.is_done = ok, False

        def wait(self, timeout):
            self.is_done = True
            if not self.ok:
                raise SendFailed("no acknowledgement")

    class Writer:
        def __init__(self, settings, topic, max_record_bytes):
            producers.append(self)

        def send(self, key, value):
            sent.append((len(producers), key))
            if len(producers) == 1 and key.startswith(b"hello"):
                raise SendFailed("at once")
            return Acknowledgement(ok=len(producers) > 1)  # the first producer's sends fail

        def close(self, timeout):
            pass

    kafka = load_settings(env={}).kafka
    topic = MixTopic(kafka, "mix", writer=Writer, reader=_IdleReader)
    rec = MixRecord("delta", 3, "a", examples=5)
    handle = topic.send(rec)
    assert handle is not None and not handle.is_done and sent == [(1, b"delta/0000000003/a")]
    topic.confirm(rec, handle)  # no acknowledgement: published again, on a new producer
    assert [p for p, _ in sent] == [1, 1, 2] and {k for _, k in sent} == {b"delta/0000000003/a"}
    topic.confirm(rec, topic.send(rec))  # acknowledged: nothing more
    assert len(sent) == 4 and len(producers) == 2
    producers.clear()
    fresh = MixTopic(kafka, "mix", writer=Writer, reader=_IdleReader)
    hello = MixRecord("hello", 0, "b")
    assert fresh.send(hello) is None  # failed at once: confirming publishes it
    fresh.confirm(hello, None)
    assert sent[-1] == (2, b"hello/0000000000/b")

    confirmed: list[str] = []

    class Unacked(MemoryTopic):
        def send(self, rec: MixRecord) -> Any:
            self.publish(rec)
            return SimpleNamespace(is_done=False)

        def confirm(self, rec, sent, timeout=30.0, attempts=0) -> None:
            confirmed.append(rec.key)

    records: list[MixRecord] = []
    (a, la), (b, lb) = _member(records, "a", topic=Unacked), _member(records, "b")
    a.join(la, {})
    b.join(lb, {})
    a.K = a.K_round = 40
    X, Y = _stream(100, 13)
    _learn(a, la, X[:40], Y[:40])  # sent, not waited for
    _learn(a, la, X[40:60], Y[40:60])  # learns on: still not waited for
    assert records[-1].kind == "delta" and a.published and confirmed == []
    # its partitions go: round 0's delta is confirmed before a waits for the round (closed
    # without b after the timeout), and the 20 learned since, published as round 1's delta,
    # before the partitions' next owners read the frontier
    a.on_revoke(la, {})
    assert confirmed == ["delta/0000000000/a", "delta/0000000001/a"] and a.log.round == 1


def test_group_members_standardize_like_one_daemon(tmp_path: Path) -> None:
    """learner.standardize is on by default for a group member as for one daemon (the merge
    pools the members' statistics: streammkl.river.pooling), and can be turned off."""
    from streammkl.daemon.loop.runner import Runner

    base = {"records.classes": [0, 1], "records.dim": 2, "checkpoint.dir": str(tmp_path / "a")}
    alone = Runner(load_settings(env={}, overrides=base), registry=CollectorRegistry())
    assert alone.learner.standardize is True
    group = {**base, "mixing.enabled": True, "checkpoint.dir": str(tmp_path / "b")}
    member = Runner(load_settings(env={}, overrides=group), registry=CollectorRegistry())
    assert member.learner.standardize is True
    off = {**group, "learner.standardize": False, "checkpoint.dir": str(tmp_path / "c")}
    assert (
        Runner(
            load_settings(env={}, overrides=off), registry=CollectorRegistry()
        ).learner.standardize
        is False
    )


def _learn(member: MixingMember, learner: Any, xs: list, ys: list) -> None:
    """One batch as the daemon loop runs it: the hooks around the learning."""
    member.before_batch(learner, {})
    member.took(len(xs))
    for x, y in zip(xs, ys, strict=True):
        learner.learn_one(x, y)
    member.after_batch(learner, {})


def test_a_group_of_three_classes_predicts_every_class_before_the_third_is_met():
    """The group's base declares ``records.classes`` before any is met; with three classes the
    base model had two outputs, and every prediction raised until the third class was learned.
    Now the base has an output per declared class: the members predict all three from the
    first record, learn the third when it comes, and end on one model."""
    records: list[MixRecord] = []
    mixing = {"every_records": 40}
    (a, la), (b, lb) = (_member(records, name, mixing, classes=(0, 1, 2)) for name in "ab")
    a.join(la, {})
    b.join(lb, {})
    assert la.rounds().n_outputs == lb.rounds().n_outputs == 3
    X, Y = _stream(600, 5)
    Y = [2 if i >= 300 and i % 4 == 0 else y for i, y in enumerate(Y)]  # class 2 from 300 on
    for i in range(0, 600, 20):
        _learn_batch(a, la, X[i : i + 10], Y[i : i + 10])  # (predicts each record first)
        _learn_batch(b, lb, X[i + 10 : i + 20], Y[i + 10 : i + 20])
    for m, lr in ((a, la), (b, lb)):
        m.before_batch(lr, {})
        assert set(lr.predict_proba_one(X[0])) == {0, 1, 2}
    predicted = {p for _, _, (p, _) in a.kept + b.kept}
    assert 2 in predicted  # (the class is learned: the group predicts it)
    assert a.log.mismatches == [] == b.log.mismatches
    assert a.log.round >= 5 and a.log.digest == b.log.digest  # (one merged model)


def test_pipelined_rounds_rebase_a_members_progress_and_count_every_example_once():
    """A member publishes its round and learns on (no wait); when the merged model comes, what
    it learned since is rebased onto it (merged + local - published), then published with its
    next round: every example once in the merged model, every member on the merged digest."""
    records: list[MixRecord] = []
    (a, la), (b, lb) = _member(records, "a"), _member(records, "b")
    a.join(la, {})
    b.join(lb, {})
    for m in (a, b):
        m.K = m.K_round = 40
    X, Y = _stream(400, 11)
    _learn(a, la, X[:40], Y[:40])  # round 0 published; a learns on
    assert records[-1].kind == "delta" and a.published
    _learn(a, la, X[40:60], Y[40:60])
    assert a.published and a.log.round == 0  # no wait: 20 examples beyond its delta
    published = core_state(records[-1].state)[1]
    local = core_state(la.to_state())[1]
    _learn(b, lb, X[60:100], Y[60:100])  # b's delta closes round 0
    a.before_batch(la, {})  # a reads the merge and rebases its 20 examples onto it
    assert a.log.round == 1 and not a.published and a.log.examples == 80
    merged = core_state(a.log.base)[1]
    rebased_ = core_state(la.to_state())[1]
    for key in ("counters", "step_acc"):  # counts and schedule sums: merged + own since
        np.testing.assert_allclose(rebased_[key], merged[key] + local[key] - published[key])
    assert la.rounds().n_learned == 80 + 20  # the group's 80 and its own 20 since
    _learn(a, la, X[100:120], Y[100:120])  # 40 since its publish: round 1's delta
    assert records[-1].kind == "delta" and records[-1].examples == 40
    _learn(b, lb, X[120:160], Y[120:160])  # b rebases (nothing of its own), learns, publishes
    for m, lr in ((a, la), (b, lb)):
        m.before_batch(lr, {})
        assert m.log.round == 2 and m.log.examples == 160 and m.log.mismatches == []
    assert la.rounds().digest() == lb.rounds().digest() == a.log.digest


def _pipelined_digests(monkeypatch: pytest.MonkeyPatch, fast: bool, **learner: object) -> tuple:
    """Two members in process, b half a round ahead of a in batches of a quarter round (each
    learns on while the other's delta is on its way: rebases with progress of their own and
    without), K = 40: every
    member's digest after every batch, and how often each in-place path was taken (``fast``
    False: never, today's path of a state built and loaded)."""
    from streammkl.river.rounds import Rounds

    taken = {"rebase_onto": 0, "take_state": 0}
    for name in taken:
        method = getattr(Rounds, name)

        def counted(self, *args, _method=method, _name=name):
            done = fast and _method(self, *args)
            taken[_name] += done
            return done

        monkeypatch.setattr(Rounds, name, counted)
    records: list[MixRecord] = []
    mixing = {"every_records": 40}
    (a, la), (b, lb) = (_member(records, name, mixing, **learner) for name in "ab")
    a.join(la, {})
    b.join(lb, {})
    X, Y = _stream(2400, 21)
    digests = []
    _learn(b, lb, X[:20], Y[:20])
    for i in range(20, 2380, 20):
        _learn(a, la, X[i : i + 10], Y[i : i + 10])
        _learn(b, lb, X[i + 10 : i + 20], Y[i + 10 : i + 20])
        digests.append((a.log.round, la.rounds().digest(), lb.rounds().digest()))
    assert a.log.round > 25 and a.log.mismatches == [] and b.log.mismatches == []
    return digests, taken


@pytest.mark.parametrize("bank", ["default", "kernelized"])
def test_the_in_place_rebase_gives_todays_digests_round_after_round(
    monkeypatch: pytest.MonkeyPatch, bank: str
) -> None:
    """The same rounds through the in-place rebase (the learner's own arrays) and through
    today's path (a rebased state built, then loaded): the same digests after every batch.
    The default bank takes both in-place paths once its bandwidths are settled; a bank with a
    kernelized block (support sets) takes the merged model in place, and today's rebase."""
    learner: dict[str, object] = (
        {"kernels": None}
        if bank == "default"
        else {"kernels": ["linear", {"type": "RBF", "gamma": 0.5}], "budget": 32}
    )
    fast, taken = _pipelined_digests(monkeypatch, True, **learner)
    today, never = _pipelined_digests(monkeypatch, False, **learner)
    assert fast == today
    assert never == {"rebase_onto": 0, "take_state": 0}
    assert taken["take_state"] > 10  # the merged model taken as it is, support sets too
    if bank == "default":
        assert taken["rebase_onto"] > 10
    else:  # support sets merge by identity: today's rebase
        assert taken["rebase_onto"] == 0


@pytest.mark.parametrize("bank", ["default", "kernelized"])
def test_a_close_merges_onto_the_model_it_kept_as_onto_the_base_loaded_again(
    monkeypatch: pytest.MonkeyPatch, bank: str
) -> None:
    """A close merges onto the core model the previous close made (kept, not saved and loaded
    again): the same digests after every batch as a reader that loads every base from its
    state (a member that restarts, the benchmark's reader), and the kept model is used."""
    from streammkl.daemon.mixing import log as mixlog

    learner: dict[str, object] = (
        {"kernels": None}
        if bank == "default"
        else {"kernels": ["linear", {"type": "RBF", "gamma": 0.5}], "budget": 32}
    )
    built = {"n": 0}
    from_state = mixlog.OnlineMKL.from_state

    def counted(*args: object, **kwargs: object) -> object:
        built["n"] += 1
        return from_state(*args, **kwargs)

    monkeypatch.setattr(mixlog.OnlineMKL, "from_state", counted)
    kept, _ = _pipelined_digests(monkeypatch, True, **learner)
    with_keep = built["n"]
    monkeypatch.setattr(mixlog._LastBase, "keep", lambda self, state, model: None)
    built["n"] = 0
    loaded, _ = _pipelined_digests(monkeypatch, True, **learner)
    assert kept == loaded
    assert with_keep < built["n"] - 25  # a base built once per close less


def test_a_slow_members_round_is_merged_late_not_lost_nor_counted_twice():
    """A member that does not publish in time: the other learns its K ahead, waits the timeout,
    closes the round without it and learns on; the slow member's delta is merged the round
    after, from the base it learned from (stale), and its rebase keeps its later examples."""
    records: list[MixRecord] = []
    (a, la), (b, lb) = _member(records, "a"), _member(records, "b")
    a.join(la, {})
    b.join(lb, {})
    for m in (a, b):
        m.K = m.K_round = 40
    X, Y = _stream(400, 12)
    _learn(a, la, X[:40], Y[:40])
    _learn(a, la, X[40:80], Y[40:80])  # K ahead: waits 0.2 s, closes round 0 without b
    assert [r.kind for r in records[-3:]] == ["delta", "close", "delta"]
    assert a.log.round == 1 and a.log.results[-1].late == ("b",)
    b.took(30)  # b learned 30 meanwhile, on round 0's base
    for x, y in zip(X[80:110], Y[80:110], strict=True):
        lb.learn_one(x, y)
    b.after_batch(lb, {})
    # round 1 closed on a's delta alone (a late member is not waited for again until it
    # publishes): b publishes its 30 late (stale, from round 0's base) and moves on
    b.before_batch(lb, {})
    assert b.log.round == 2 and not b.published
    assert (records[-1].kind, records[-1].round, records[-1].examples) == ("delta", 0, 30)
    _learn(b, lb, X[110:150], Y[110:150])  # b's round 2
    _learn(a, la, X[150:190], Y[150:190])  # a moves onto round 2 and publishes its round 2
    for m, lr in ((a, la), (b, lb)):
        m.before_batch(lr, {})
        assert m.log.round == 3 and m.log.examples == 190 and m.log.mismatches == []
    assert a.log.results[-1].stale == (("b", 2),)  # 2 rounds stale, from its own base
    assert la.rounds().digest() == lb.rounds().digest() == a.log.digest


def _learn_from(member: MixingMember, learner: Any, offsets: dict, tp: Partition, xs, ys) -> None:
    """One batch of partition ``tp``'s next records, as the daemon loop runs it."""
    member.before_batch(learner, offsets)
    member.took(len(xs))
    for x, y in zip(xs, ys, strict=True):
        learner.learn_one(x, y)
        offsets[tp] += 1
    member.after_batch(learner, offsets)


@pytest.mark.parametrize("where", ["memory", pytest.param("broker", marks=pytest.mark.kafka)])
def test_a_member_left_behind_by_a_rebalance_cannot_count_its_records_twice(
    where: str, request: pytest.FixtureRequest
) -> None:
    """Member a learns past its last delta; a rebalance goes on without it (the broker's join
    window closed while a was still in its revocation callback): b takes a's partition at the
    frontier and learns those records again. a's revocation delta, published after b's take,
    is fenced by every reader: the merged model holds each record once, both members agree on
    it, and b's partition moves on from where b ended. On the real broker too (the mix topic,
    its one partition's order and the takes' read-back)."""
    records: list[MixRecord] = []
    topic: Any = MemoryTopic
    if where == "broker":
        bootstrap = request.getfixturevalue("kafka_bootstrap")
        kafka = load_settings(env={}, overrides={"kafka.bootstrap_servers": bootstrap}).kafka
        mix = unique("mix")
        create_mix_topic(kafka, mix)
        topic = lambda _records: MixTopic(kafka, mix)  # noqa: E731
    (a, la), (b, lb) = _member(records, "a", topic=topic), _member(records, "b", topic=topic)
    t0, t1 = Partition("t", 0), Partition("t", 1)
    oa: dict = {}
    ob: dict = {}
    try:
        a.join(la, oa)
        b.join(lb, ob)
        a.catch_up([t0], oa)
        b.catch_up([t1], ob)
        assert oa[t0] == 0 and ob[t1] == 0
        for m in (a, b):
            m.K = m.K_round = 40
        X, Y = _stream(400, 13)
        xs0, ys0 = X[:200], Y[:200]  # partition t/0's records, in offset order
        _learn_from(a, la, oa, t0, xs0[:40], ys0[:40])  # a's round 0
        _learn_from(b, lb, ob, t1, X[200:240], Y[200:240])  # b's: round 0 closes
        _learn_from(a, la, oa, t0, xs0[40:60], ys0[40:60])  # a moves on, unpublished
        assert oa[t0] == 60
        b.before_batch(lb, ob)  # b adopts round 1 (a's 40 of t/0 and its own 40)
        b.catch_up([t0, t1], ob)  # the rebalance that went on without a: b takes t/0 ...
        assert ob[t0] == 40  # ... from the frontier
        _learn_from(b, lb, ob, t0, xs0[40:80], ys0[40:80])  # the same 20 records, and 20 more
        a.on_revoke(la, oa)  # a's revocation, late: it claims t/0's 40..60 after b's take
        assert a.owned == {}
        for m, lr, off in ((a, la, oa), (b, lb, ob)):
            wait_until(lambda m=m, lr=lr, off=off: m.before_batch(lr, off) or m.log.round == 2,
                       30, "round 1 to close")  # fmt: skip
            assert [(f.member, f.examples) for f in m.log.fenced] == [("a", 20)]
            assert m.log.skipped == []
            samples = {s.name: s.value for s in m.metrics.fenced_examples.collect()[0].samples}
            assert samples["streammkl_mix_fenced_examples_total"] == 20  # reported by each
        assert a.log.examples == b.log.examples == 40 + 40 + 40  # a's 20 re-learned by b, once
        assert a.log.frontier["t/0"] == b.log.frontier["t/0"] == 80 and b.owned[t0] == 80
        assert a.log.fenced_examples == b.log.fenced_examples == 20
        assert la.rounds().digest() == lb.rounds().digest() == a.log.digest == b.log.digest
    finally:
        for m in (a, b):
            if m.topic is not None:
                m.topic.close()


def test_adaptive_k_is_decided_by_the_log_the_same_for_every_member():
    """K from the rounds' measured cost: c (1 - f) / (f l), the largest a member asks for, at
    most doubled or halved a round, within [min, max]; no usable report keeps it. The founding
    member's bounds are the group's: every reader of the log computes the same K at the same
    round, and every member learns its next round with it."""
    bounds = (100, 1000, 0.05)
    # 1 ms of group cost on 10 ms of learning for 250 records: K = 0.001 * 0.95 / (0.05 * 4e-5)
    report = {"round_seconds": 0.011, "round_cost": 0.001, "round_examples": 250.0}
    assert next_every(250, bounds, [report]) == 475
    cheap = {"round_seconds": 0.0101, "round_cost": 0.0001, "round_examples": 250.0}
    assert next_every(250, bounds, [cheap, report]) == 475  # the costliest member's K
    assert next_every(250, bounds, [cheap]) == 125  # halved at most ...
    assert next_every(100, bounds, [cheap]) == 100  # ... and never below the minimum
    dear = {"round_seconds": 0.2, "round_cost": 0.1, "round_examples": 250.0}
    assert next_every(250, bounds, [dear]) == 500 and next_every(800, bounds, [dear]) == 1000
    assert next_every(250, bounds, [{}, {"round_seconds": 0.1, "round_cost": 0.2}]) == 250

    records: list[MixRecord] = []
    adaptive = {"every_records": 40, "max_every_records": 160, "round_overhead": 0.001}
    (a, la), (b, lb) = _member(records, "a", adaptive), _member(records, "b")  # b: fixed K
    a.join(la, {})
    b.join(lb, {})
    assert records[0].kind == "base" and records[0].stats["k_max"] == 160
    assert a.log.every == b.log.every == 40 and a.K == b.K == 40
    X, Y = _stream(400, 21)
    at = 0
    for _ in range(3):  # three rounds, both members publish K each
        for m, lr in ((a, la), (b, lb)):
            k = m.K_round
            _learn(m, lr, X[at : at + k], Y[at : at + k])
            at += k
        for m, lr in ((a, la), (b, lb)):
            m.before_batch(lr, {})
    assert a.log.round == b.log.round == 3 and a.log.mismatches == []
    ks = [40] + [res.every for res in a.log.results]  # (the measured costs vary: not the Ks)
    assert ks[1:] == [res.every for res in b.log.results]  # the same K at the same round
    assert all(k is not None and 40 <= k <= 160 for k in ks)
    assert all(ks[i] / 2 <= ks[i + 1] <= 2 * ks[i] for i in range(3))
    for r in range(3):  # every member learned the group's K of the round (b's setting: 40)
        assert [x.examples for x in records if x.kind == "delta" and x.round == r] == [ks[r]] * 2
    assert a.K == b.K == ks[3] and a.log.examples == 2 * sum(ks[:3])
    fixed = MixLog()  # a log whose base has no bounds: K is the members' own, never adapted
    for rec in records[:1]:
        fixed.apply(rec)
    assert MixLog().every is None and fixed.every == 40


def test_adaptive_k_falls_to_its_minimum_at_a_drift_and_grows_only_on_a_settled_stream():
    """The accuracy bounds adaptive K from above: the log's running error rate of the merged
    rounds (the same on every reader) calls a round whose rate jumps (or whose delta says its
    member saw a jump) a drift, and K is the minimum at once; while the rate falls (the model
    still learning) K does not grow; only a settled stream lets the cost raise it."""
    trend = ErrorTrend()
    assert trend.observe([]) == "settled" and trend.rate is None
    assert trend.observe([{"mistakes": 40.0, "labelled": 100.0}]) == "learning"  # the first
    assert trend.rate == pytest.approx(0.4)
    assert trend.observe([{"mistakes": 10.0, "labelled": 200.0}]) == "learning"  # falls
    rate = trend.rate
    assert rate is not None and 0.05 < rate < 0.4
    steady = [{"mistakes": rate * 250, "labelled": 250.0}] * 2
    assert trend.observe(steady) == "settled"
    assert trend.observe([{"mistakes": 200.0, "labelled": 500.0}]) == "drift"  # jumps
    assert trend.observe([{"drift": 1.0, "mistakes": 1.0, "labelled": 100.0}]) == "drift"
    assert above(0.1, 30, 100) and not above(0.1, 15, 100) and not above(0.1, 5, 0)
    assert above(0.3, 5, 100, sign=-1.0) and not above(0.3, 25, 100, sign=-1.0)

    bounds = (100, 1000, 0.05)
    dear = {"round_seconds": 0.2, "round_cost": 0.1, "round_examples": 250.0}
    cheap = {"round_seconds": 0.0101, "round_cost": 0.0001, "round_examples": 250.0}
    assert next_every(800, bounds, [dear], "settled") == 1000
    assert next_every(800, bounds, [dear], "learning") == 800  # does not grow ...
    assert next_every(800, bounds, [cheap], "learning") == 400  # ... but may fall
    assert next_every(800, bounds, [dear], "drift") == 100  # the minimum at once
    # the accuracy's bound: MISTAKES_PER_ROUND / the running error rate
    assert next_every(800, bounds, [dear], "settled", 0.05) == round(MISTAKES_PER_ROUND / 0.05)
    assert next_every(800, bounds, [dear], "settled", 0.5) == 100  # (not below the minimum)
    assert next_every(800, bounds, [{}], "settled", 0.1) == 250  # no report: the bound only


def test_a_member_that_sees_its_error_rate_jump_ends_the_round_for_the_group(monkeypatch):
    """With adaptive K above its minimum, a member whose round's error rate jumps above the
    group's running rate publishes at once (its delta says so), the other member ends the
    same round at its next batch, and the log sets the next K to the minimum, on both; every
    example is counted once and the digests are equal."""
    from streammkl.daemon.mixing import member as member_mod

    monkeypatch.setattr(member_mod, "READ_EVERY", 0.0)  # every batch reads the log
    records: list[MixRecord] = []
    adaptive = {"every_records": 40, "max_every_records": 400, "round_overhead": 0.001}
    (a, la), (b, lb) = _member(records, "a", adaptive), _member(records, "b", adaptive)
    a.join(la, {})
    b.join(lb, {})
    X, Y = _stream(2000, 23)
    at = 0
    for _ in range(8):  # eight rounds (the model learns, the log's rate falls, K grows)
        for m, lr in ((a, la), (b, lb)):
            k = m.K_round
            _learn_batch(m, lr, X[at : at + k], Y[at : at + k])
            at += k
        for m, lr in ((a, la), (b, lb)):
            m.before_batch(lr, {})
    assert a.log.round == b.log.round == 8 and a.log.trend.rate is not None
    for m in (a, b):  # a large K (as the cost would ask on a settled stream)
        m.K = m.K_round = 400
        assert m.room(2000) == 40  # batches of the minimum K: the drift watch sees each
    r = a.next
    flipped = [1 - y for y in Y[at : at + 120]]  # the concept flips: most predictions wrong
    _learn_batch(a, la, X[at : at + 120], flipped)
    at += 120
    delta = [x for x in records if x.kind == "delta" and x.member == "a" and x.round == r]
    assert len(delta) == 1 and delta[0].stats["drift"] == 1.0 and delta[0].examples == 120
    _learn_batch(b, lb, X[at : at + 30], Y[at : at + 30])  # b ends the round at once
    at += 30
    assert [x.examples for x in records if x.kind == "delta" and x.member == "b"][-1] == 30
    for m, lr in ((a, la), (b, lb)):
        m.before_batch(lr, {})
    assert a.log.round == b.log.round == r + 1
    assert a.log.results[-1].every == b.log.results[-1].every == 40 == a.K == b.K
    assert a.log.examples == b.log.examples == at  # every example once
    assert a.log.digest == b.log.digest and a.log.mismatches == []


def test_a_member_without_partitions_answers_a_round_at_once(monkeypatch):
    """A member that owns no partitions yet (its assignment pending: the loop cannot know
    whether records wait for it) answers a round another member ended with an empty delta at
    once, so the round closes without its timeout (the member that ended it waits for the
    close without serving its consumer's rebalance, which would give the new member its
    partitions: a late join held round 0 for 30 s). Once it owns partitions, a batch it could
    not fetch yet is a slow member's, not an idle one's: it contributes its K."""
    from streammkl.daemon.mixing import member as member_mod

    monkeypatch.setattr(member_mod, "READ_EVERY", 0.0)  # every batch reads the log
    records: list[MixRecord] = []
    (a, la), (b, lb) = _member(records, "a"), _member(records, "b")
    oa: dict = {}
    ob: dict = {}
    a.join(la, oa)
    b.join(lb, ob)
    t0, t1 = Partition("t", 0), Partition("t", 1)
    a.catch_up([t0], oa)  # b: no partitions yet
    for m in (a, b):
        m.K = m.K_round = 40
    X, Y = _stream(200, 17)
    _learn_from(a, la, oa, t0, X[:40], Y[:40])  # a ends round 0
    b.before_batch(lb, ob)
    b.took(0, waiting=True)  # the loop's view before an assignment
    b.after_batch(lb, ob)
    assert [(r.round, r.examples) for r in records if r.kind == "delta" and r.member == "b"] == [
        (0, 0)
    ]
    b.catch_up([t1], ob)
    b.before_batch(lb, ob)
    assert b.log.round == 1 and b.log.examples == 40
    _learn_from(a, la, oa, t0, X[40:80], Y[40:80])  # a ends round 1
    b.before_batch(lb, ob)
    b.took(0, waiting=True)  # owns t/1 now: records wait, not fetched yet
    b.after_batch(lb, ob)
    assert [r.round for r in records if r.kind == "delta" and r.member == "b"] == [0]
    _learn_from(b, lb, ob, t1, X[80:120], Y[80:120])  # its K: round 1 closes
    for m, lr, o in ((a, la, oa), (b, lb, ob)):
        m.before_batch(lr, o)
        assert m.log.round == 2 and m.log.examples == 120 and m.log.mismatches == []


def test_two_hindsight_reports_before_a_publish_add_up():
    """A deferred scoring can meet the next one before the member publishes: the record's one
    report then holds both rounds' sums (under the later round), so no round's examples are
    lost from the hindsight view nor counted twice."""
    records: list[MixRecord] = []
    a, _ = _member(records, "a")
    first = {"h_round": 3.0, "h_loss": 2.0, "h_mistakes": 1.0, "h_labelled": 10.0,
             "h_merged_loss": 1.5, "h_merged_mistakes": 1.0}  # fmt: skip
    second = {**first, "h_round": 4.0, "h_loss": 1.0, "h_labelled": 5.0}
    a.add_hindsight(first)
    a.add_hindsight(second)
    report = a.hindsight
    assert report["h_round"] == 4.0 and report["h_labelled"] == 15.0
    assert report["h_loss"] == 3.0 and report["h_merged_loss"] == 3.0
    log = MixLog()
    log.apply(MixRecord("bye", 5, "a", stats=report))
    assert log.regret_examples == 15 and log.regret == pytest.approx(0.0)


def test_the_sampled_checks_copy_is_kept_and_holds_each_merged_model_as_loaded():
    """The sampled check scores a member's examples again on a copy of its learner holding the
    merged model: the copy is kept from one check to the next and takes each model in place,
    with the digest and hindsight report of a copy loaded anew (the pre-change check); a model
    of another layout (a new input) or another learner gets a new copy, loaded."""
    from streammkl.daemon.mixing.member import hindsight

    X, Y = _stream(400, 11)
    records: list[MixRecord] = []
    a, learner = _member(records, "a")
    a.join(learner, {})
    other = learner.clone()
    other.rounds().load_state(*learner.to_state(), with_bank=True)
    kept = []
    states = []
    for lo in (0, 100, 200):  # merged models of one layout, then one with a new input
        for x, y in zip(X[lo : lo + 100], Y[lo : lo + 100], strict=True):
            x = {**x, "d": 1.0} if lo == 200 else x
            kept.append((x, y, (other.predict_one(x), other.predict_proba_one(x))))
            other.learn_one(x, y)
        states.append(other.to_state())

    def loaded(state):  # the check before: a new copy, the model loaded
        copy = learner.clone()
        copy.rounds().load_state(*state, with_bank=True)
        return copy.rounds()

    copies = []
    for state in states:
        rounds = a._copy_holding(learner, state)
        assert a._checker is not None and a._checker[0] is learner
        copies.append(a._checker[1])
        want = loaded(state)
        assert rounds.digest() == want.digest() == learner_digest(state)
        assert hindsight(rounds, kept[:200], 0) == hindsight(want, kept[:200], 0)
    assert copies[1] is copies[0] and copies[2] is not copies[1]  # (kept; a new input: new)
    rounds = a._copy_holding(other, states[2])  # another learner (a reload): its own copy
    assert a._checker is not None and a._checker[0] is other and a._checker[1] is not copies[2]
    assert rounds.digest() == learner_digest(states[2])


def test_steady_rebases_check_the_merged_model_on_a_schedule(monkeypatch):
    """A settled member's rebases check the merged model they move onto (its digest, and the
    hindsight scoring of the member's merged examples) on the first and every CHECK_EVERY-th
    one that takes a round of the member's (at least K / 2 of its examples), whether it
    rebases its own progress (the check waits for its next publish) or has nothing of its own
    since its publish (the round's last publisher: at once); every other adoption is checked
    every time. The counts and the digests stay exact, and the sampled
    checks still feed the hindsight view."""
    from streammkl.daemon.mixing import member as member_mod

    records: list[MixRecord] = []
    (a, la), (b, lb) = _member(records, "a"), _member(records, "b")
    checks = {"a": 0, "b": 0}
    for m in (a, b):
        m.join(la if m is a else lb, {})
        m.K = m.K_round = 40
        check = m._check_digest

        def counted(rounds, want=None, round_=-1, check=check, name=m.name):
            checks[name] += 1
            check(rounds, want, round_)

        monkeypatch.setattr(m, "_check_digest", counted)
    X, Y = _stream(2000, 17)

    def learn(m, lr, lo, hi):
        _learn_batch(m, lr, X[lo:hi], Y[lo:hi])

    i = 0
    learn(b, lb, 0, 20)  # b half a round ahead: the members' rounds overlap
    i = 20
    while i + 40 <= 1960:
        learn(a, la, i, i + 20)
        learn(b, lb, i + 20, i + 40)
        i += 40
    learned = i
    for m, lr in ((a, la), (b, lb)):
        m.leave(lr, {})
    log = MixLog()  # the whole log, as any reader folds it
    for rec in records:
        log.apply(rec)
    assert log.examples == learned and log.mismatches == [] and log.skipped == []
    assert lb.rounds().digest() == log.digest  # the last one out holds the final model
    assert la.rounds().digest() in log.digests.values()
    steady = a._steady + b._steady  # (each member: its first, then every CHECK_EVERY-th)
    assert steady > 4 * member_mod.CHECK_EVERY
    assert all(m._full > 4 for m in (a, b))  # most rebases take a round of the member's
    scheduled = sum(-(-m._full // member_mod.CHECK_EVERY) for m in (a, b))
    # the scheduled checks, plus the adoptions outside the steady state (join, the rounds
    # before the group settles, the shutdown): far fewer than one check per rebase
    assert scheduled <= sum(checks.values()) < steady
    assert 0 < log.regret_examples <= learned  # the sampled rounds' hindsight reports


def test_a_member_a_round_ahead_publishes_from_its_own_delta_without_waiting(monkeypatch):
    """``mixing.staleness = 2``: member b runs a whole round ahead of a. It publishes its next
    round's delta measured from its own previous delta (the record carries that state and the
    base round it was on) without waiting for the merge, and when the merge comes it rebases
    its learner and that delta onto it. b never waits; every example is counted once; every
    reader folds the same merged models, and the last one out holds the final one."""
    records: list[MixRecord] = []
    (a, la), (b, lb) = (_member(records, m, {"staleness": 2}) for m in "ab")
    waits: list[int | None] = []
    for m, lr in ((a, la), (b, lb)):
        m.join(lr, {})
        m.K = m.K_round = 40
    wait = b._wait_close

    def counted(until=None):
        waits.append(until)
        wait(until)

    monkeypatch.setattr(b, "_wait_close", counted)
    X, Y = _stream(2000, 18)

    def learn(m, lr, lo, hi):
        _learn_batch(m, lr, X[lo:hi], Y[lo:hi])

    learn(b, lb, 0, 40)  # b's round 0; then b one round ahead of a all along
    i = 40
    while i + 80 <= 1960:
        learn(b, lb, i, i + 40)
        learn(a, la, i + 40, i + 80)
        i += 80
    assert waits == [] and b.next == b.round + 2  # never blocked, its bound reached
    chained = [r for r in records if r.kind == "delta" and r.ref is not None]
    assert chained and {r.member for r in chained} == {"b"}
    assert all(r.base_round == r.round - 1 for r in chained)
    learned = i
    a.leave(la, {})
    b.leave(lb, {})
    log = _replayed(records, learned, (a, b))
    assert lb.rounds().digest() == log.digest  # the last one out holds the final model
    assert la.rounds().digest() in log.digests.values()
    assert [r.round for r in log.results] == list(range(len(log.results)))


def test_an_acknowledged_delta_that_never_shows_in_the_log_is_published_again(monkeypatch):
    """A delta the broker acknowledged but that the member does not read back (seen on the
    embedded broker: the other members then closed the round at its timeout without it and
    fenced the member's next delta) is published again after UNSEEN_AFTER seconds: the round
    closes with it, before the timeout, and every example is counted once."""
    from streammkl.daemon.mixing import member as member_mod

    monkeypatch.setattr(member_mod, "UNSEEN_AFTER", 0.05)
    dropped: list[str] = []

    class Lossy(MemoryTopic):
        def send(self, rec: MixRecord) -> None:
            if rec.kind == "delta" and not dropped:  # acknowledged, never written
                dropped.append(rec.key)
                return
            self.publish(rec)

    records: list[MixRecord] = []
    (a, la), (b, lb) = _member(records, "a", topic=Lossy), _member(records, "b")
    a.join(la, {})
    b.join(lb, {})
    for m in (a, b):
        m.K = m.K_round = 40
        m.timeout = 60.0  # (the test would wait this long without the new publish)
    X, Y = _stream(200, 19)
    _learn(b, lb, X[:40], Y[:40])
    _learn(a, la, X[40:80], Y[40:80])  # a's delta of round 0: acknowledged, lost
    assert dropped == ["delta/0000000000/a"] and not a.log.has_delta(0, "a")
    t0 = time.monotonic()
    _learn(a, la, X[80:120], Y[80:120])  # K more: a waits for round 0, publishes it again
    assert time.monotonic() - t0 < 10.0 and a.log.round >= 1
    b.before_batch(lb, {})
    log = MixLog()
    for rec in records:
        log.apply(rec)
    assert log.results[0].members == ("a", "b") and log.results[0].late == ()
    assert log.fenced == [] and log.skipped == [] and log.examples >= 80


@pytest.mark.parametrize("ahead", [None, 10])
def test_ahead_records_bounds_the_records_a_member_learns_before_it_takes_the_merge(ahead):
    """``mixing.ahead_records``: after its publish a member learns at most that many records
    (its batches are cut there) and then waits for the round and rebases, so the others'
    examples reach its model at most that many of its own records late whatever the timing
    (here: the other member publishes late, after this one's whole next K: without the bound
    the merged round comes after K records, as on a loaded machine). Every example is still
    counted once and every reader folds the same merged models."""

    class Late(MemoryTopic):
        late = False  # (on once the members joined)

        def read(self, timeout_ms: int = 0) -> list[MixRecord]:
            # the log's news reach a member that learns only when it waits for them (a
            # merged round that takes longer than the member's next K records)
            return [] if Late.late and not timeout_ms else super().read(timeout_ms)

    records: list[MixRecord] = []
    mixing = {} if ahead is None else {"ahead_records": ahead}
    (a, la), (b, lb) = (_member(records, m, mixing, topic=Late) for m in "ab")
    for m, lr in ((a, la), (b, lb)):
        m.join(lr, {})
        m.K = m.K_round = 40
    Late.late = True
    X, Y = _stream(1200, 20)
    i, rooms = 0, []
    while i + 80 <= 1160:
        for m, lr in ((a, la), (b, lb)):  # a member takes what room() allows, up to 40
            m.before_batch(lr, {})
            n = m.room(40)
            rooms.append(n)
            m.took(n)
            for x, y in zip(X[i : i + n], Y[i : i + n], strict=True):
                m.kept.append((x, y, (lr.predict_one(x), lr.predict_proba_one(x))))
                lr.learn_one(x, y)
            m.after_batch(lr, {})
            i += n
    late = [m.rebase_unpublished / m.rebases for m in (a, b)]
    if ahead is None:
        assert max(late) > 20  # rebased after (most of) its next K
        assert min(rooms) == 40
    else:
        assert max(late) <= ahead and min(a.rebases, b.rebases) > 10
        assert ahead in rooms and max(rooms) == 40  # cut at the bound, then the round's rest
    learned = i
    Late.late = False
    a.leave(la, {})
    b.leave(lb, {})
    log = _replayed(records, learned, (a, b))
    assert lb.rounds().digest() == log.digest
