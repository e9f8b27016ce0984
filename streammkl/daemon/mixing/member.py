"""Mixing: the members of a consumer group train ONE model by iterative parameter mixing.

Each member learns locally from its partitions. A round ends (:meth:`MixingMember.after_batch`)
when the member has learned K examples since its last publish (``mixing.every_records``, or
the group's adaptive K: :func:`streammkl.daemon.mixing.log.next_every`; earlier when its
error rate jumps, or another member's delta says its did: :meth:`MixingMember._drifted`), when
it sees another member's delta for its round and has nothing to read, at a rebalance
(:meth:`MixingMember.on_revoke`) and at a clean shutdown (:meth:`MixingMember.leave`): it
publishes its state and count to the mix topic (:mod:`streammkl.daemon.mixing.topic`) and
**keeps learning** (pipelined rounds), without waiting for the broker's acknowledgement: the
send is confirmed (published again if it failed) before the member waits for its round, before
its next record to the log and before its partitions go to another member. The round closes
when every expected member has published or ``mixing.round_timeout_seconds`` passed (a
``close`` without the late ones, whose deltas are merged the next round); every member
computes the same merged model from the log (:mod:`streammkl.daemon.mixing.log`) and
*rebases* what it learned since its publish onto it (``merged + local - published``,
:func:`streammkl.daemon.mixing.log.rebased`), with the group's offsets. A member runs at most
``mixing.staleness`` (s) rounds ahead of the last merged round it applied: it publishes its
next round's delta measured from its own previous delta (the record carries that reference
state) and learns on, and waits only before a delta for round ``round + s``
(stale-synchronous rounds, docs/scale-out.md).

Exactly once, without Kafka transactions: the log is the group's checkpoint. A member's learned
records count once they are in a published delta (keyed by (round, member), deduplicated by
readers), acknowledged or not: a member killed between the send and the acknowledgement
restarts from the log, with its delta if it got there and without it otherwise; a partition's
next owner starts where the last published delta ended; a member that restarts adopts the
log's model and offsets and drops what it had not published, which the partition's owner
learns again. A member owns partitions from its ``take`` record (written at every assignment)
and claims the offsets it learned from them in every delta; a delta whose claims cover a
partition another member has taken since (a rebalance that went on without its member) is
fenced by every reader and its records learned again by their owner. So Σ examples in the
merged model = records learned, whatever was killed or left behind when.

Bandwidths fitted to the data (``MedianRBF``) and the input standardisation are part of the
merged base: members hold their bandwidths and the merge decides them from the group's pooled
warm-up inputs (:mod:`streammkl.core.mixing_bandwidth`; a round ends after the warm-up's 50
records while one waits), and pools the members' input statistics
(:mod:`streammkl.river.pooling`). Every delta carries its examples' prequential sums, and the
next one the member's hindsight report (its merged round's examples, or a sample of them,
scored again by the merged model): the group log folds the merged model's regret from them.

The group's kernel bank is part of its log: a member never changes its own bank live. A changed
``learner.kernels`` (SIGHUP, or settings edited while the member was stopped) is *proposed*
(:meth:`MixingMember.propose`, a ``bank`` record, after the guards a single daemon applies) and
the proposer ends its round; every member switches when that round closes (the merged model gets
the new bank, :mod:`streammkl.daemon.mixing.log`). A record of the log that cannot be used is
skipped and reported by every reader (a WARNING and ``streammkl_mix_deltas_skipped_total``),
never fatal.

The daemon loop calls these hooks (``join``, ``before_batch``, ``after_batch``, ``on_revoke``,
``catch_up``, ``leave``); the single-member path runs none of this code.
"""

from __future__ import annotations

import logging
import math
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streammkl.core import kernels
from streammkl.daemon.config import LearnerSpec, ReloadSettings, Settings
from streammkl.daemon.learning.bank import check_change, configured_kernels
from streammkl.daemon.learning.building import LearnerConfigError
from streammkl.daemon.learning.learner import (
    Learned,
    Learner,
    Memory,
    Prediction,
    Probas,
    Target,
)
from streammkl.daemon.mixing.log import (
    DRIFT_MIN_EXAMPLES,
    MixLog,
    Skipped,
    above,
    bank_of,
    canonical_bank,
    check_base_state,
    rebased,
    switch_bank,
)
from streammkl.daemon.mixing.metrics import BLOCKED_PARTS, MixMetrics
from streammkl.daemon.mixing.topic import UNREADABLE, MixRecord, MixTopic, State, create_mix_topic
from streammkl.river import MKLClassifier
from streammkl.river.rounds import Rounds

log = logging.getLogger(__name__)

TP = tuple[str, int]
#: Finishes the learning in flight (the daemon's pipelined batch) before the model is read.
Drain = Callable[[], None]
#: A hook the loop calls at a batch boundary: ``hook(learner, offsets, drain)``.
Hook = Callable[[MKLClassifier, dict[TP, int], Drain], None]


def _nothing() -> None:
    pass


#: Seconds between reads of the mix topic while learning (a trigger is seen that late at most).
READ_EVERY = 0.05

#: Seconds a member waits for its own acknowledged delta to show in the log it reads before it
#: publishes it again (:meth:`MixingMember._wait_close`). Seen in 1 of 5 scale-out runs on the
#: embedded broker, before and after issue 28's changes: a delta acknowledged and never read
#: back, so the other members closed its round at the round timeout (30 s) without it and its
#: next delta was fenced (its claims no longer started at the frontier).
UNSEEN_AFTER = 2.0

#: A steady-state rebase (:meth:`MixingMember._rebase`) checks the merged model it moved onto
#: every CHECK_EVERY-th time: it loads it into a copy of the learner, compares its digest with
#: the log's and scores the member's merged examples again with it (the hindsight view). Done
#: every round, that was a fifth of a member's mixing work (a model built, its state written
#: and hashed, 128 examples scored) for a check whose outcome is the same every round: loading
#: a state is deterministic, the log's digest is computed by the fold itself, the first
#: steady-state rebase is checked, every adoption outside the steady state (join, restart,
#: bandwidth warm-up, bank switch) is still checked at once, and every delta carries the
#: digest of the base it learned from, which every reader compares (``MixLog.mismatches``).
#: The hindsight view is then a sample of rounds, each with up to ``CHECK_EVERY`` times the
#: examples (:data:`SAMPLED`), so it covers about as much of the stream as before.
CHECK_EVERY = 4


def mixing_learner(learner: Learner) -> MKLClassifier:
    """``learner`` as a mixing member's (a streammkl :class:`~streammkl.river.MKLClassifier`),
    or the settings error (:class:`LearnerConfigError`: at start, a refusal, exit 2)."""
    if isinstance(learner, Memory):  # (the settings refuse it first: config.Settings)
        raise LearnerConfigError(
            "learner.memory_window: mixing groups merge MKLClassifier models; a "
            f"{type(learner).__name__}'s memory and Hedge do not merge: unset it or disable "
            "mixing"
        )
    if not isinstance(learner, MKLClassifier):
        raise LearnerConfigError(
            f"learner.factory: mixing groups need streammkl's MKLClassifier, not a "
            f"{type(learner).__name__}"
        )
    return learner


def member_name(settings: Settings) -> str:
    return settings.mixing.member or f"{settings.kafka.client_id}@{socket.gethostname()}"


class MixingMember:
    """One member's side of the protocol (see the module docstring)."""

    def __init__(
        self,
        settings: Settings,
        metrics: MixMetrics,
        topic_factory: Callable[..., MixTopic] = MixTopic,
    ) -> None:
        # what a group needs of the settings is checked with them (config.Settings)
        self.settings = settings
        self.name = member_name(settings)
        self.K = settings.mixing.every_records
        self.K_round = self.K  # this round's K (shorter while the group measures bandwidths)
        self.timeout = settings.mixing.round_timeout_seconds
        self.metrics = metrics
        self._topic_factory = topic_factory
        self.topic: MixTopic | None = None
        self.log = MixLog(dual=settings.mixing.dual)
        #: The round of the base the learner derives from (the last merged round applied).
        self.round = -1
        #: The round of this member's next delta (``round`` or, ahead of it by up to the
        #: staleness bound ``s``, one after its last published delta's).
        self.next = 0
        #: The staleness bound s: this member publishes its delta for round ``round + s - 1``
        #: at most before it has applied a newer merged round (stale-synchronous rounds).
        self.staleness = settings.mixing.staleness
        #: At s = 1, the records this member learns after a publish before it takes that
        #: round's merged model (None: up to K; :meth:`_hold`).
        self.ahead = settings.mixing.ahead_records
        #: This member's published deltas not in the base it is on yet, oldest first, on the
        #: learner's coordinates (moved onto every merged model it takes).
        self.outstanding: list[Sent] = []
        #: The state the next delta is measured from: the base of ``round`` or this member's
        #: last published delta's state (:attr:`outstanding`).
        self.ref: State | None = None
        self.mark = 0  # the learner's core count at ``ref``
        self.published_at: dict[int, float] = {}  # round -> when this member's delta went out
        self.digests: dict[int, str] = {}  # round -> digest of the base adopted
        self._read_at = 0.0
        self._attempts = 0  # publishes retry until they succeed (bounded at shutdown)
        #: The delta sent and not yet known to be in the log (record, send handle): a member
        #: learns on while the broker acknowledges it (:meth:`_confirm`).
        self._unacked: tuple[MixRecord, Any] | None = None
        self._last_sent: MixRecord | None = None  # the last delta sent (sent again if unseen)
        #: The partitions this member owns (taken in the log at its assignment) and the offset
        #: its next delta's claim on each starts at.
        self.owned: dict[TP, int] = {}
        self.taken = 0  # records taken for learning since the last publish (K of them a round)
        self._last_took = 0
        self._waiting = False  # the last batch was empty while records wait on the partitions
        #: The examples learned since the last publish, with their predictions:
        #: (x, y, (pred, probas)), appended by the daemon's prequential handling (the next
        #: delta's prequential view).
        self.kept: list[Learned] = []
        #: Adaptive K's drift watch over :attr:`kept`: entries scanned, their mistakes, and
        #: whether this round's error rate jumped (:meth:`_drifted`).
        self._scanned = 0
        self._mistakes = 0
        self._drift = False
        self.hindsight: dict[str, float] = {}  # of the last round merged with this delta
        #: A steady-state rebase's checks, done after the next publish (:meth:`_check_later`):
        #: (the learner, the merged base, its digest and round, (round, examples) to score
        #: again or None).
        self._later: (
            tuple[MKLClassifier, State, str, int, tuple[int, list[Learned], int] | None] | None
        ) = None
        #: The learner the sampled checks copied and its copy (:meth:`_copy_holding`).
        self._checker: tuple[MKLClassifier, MKLClassifier] | None = None
        self._steady = 0  # steady-state rebases so far (the first is checked)
        self._full = 0  # ... that took a round of this member's (every CHECK_EVERY-th checked)
        #: This member's configured bank (``learner.kernels`` as specs; None: unset, it keeps
        #: the group's), updated by every reload.
        self.configured: list[dict[str, Any]] | None = None
        self._reported = 0  # skipped records of the log already reported
        self._reported_fenced = 0  # fenced deltas already reported
        self._warned_bank: list[dict[str, Any]] | None = None
        #: Seconds the loop spent on the group, by part (:data:`BLOCKED_PARTS`), since join.
        self.blocked: dict[str, float] = dict.fromkeys(BLOCKED_PARTS, 0.0)
        self.joined_at = time.monotonic()
        #: The staleness met at this member's rebases since join: their number, and the
        #: examples it had learned and not published at them (summed: at each, the merged
        #: model came that many examples of its own late; in every delta's stats).
        self.rebases = 0
        self.rebase_unpublished = 0
        #: When the round being learned started (the previous publish), and the time spent on
        #: the group by then (drains left out: they are the round's learning): adaptive K's
        #: measure (:func:`streammkl.daemon.mixing.log.next_every`).
        self._round_started = time.perf_counter()
        self._cost_before = 0.0

    @property
    def published(self) -> bool:
        """Whether this member has a delta for the round of its base or a later one (the
        merged model that holds it has not come yet)."""
        return self.next > self.round

    def _bound(self) -> int:
        """The staleness bound now: the configured one in a settled group, one round while the
        group decides bandwidths or switches its bank (those rounds change the model's layout,
        which a delta learned ahead of them would not have)."""
        if self.K_round != self.K or self.log.proposal is not None:
            return 1
        return self.staleness

    def _resolved(self, round_: int) -> bool:
        """Whether this member's delta of ``round_`` is done with: its round closed and it is
        not waiting as a late delta (merged, or fenced / skipped: its records learned again)."""
        return round_ < self.log.round and (round_, self.name) not in self.log.pending

    @staticmethod
    def check_learner(learner: Learner) -> None:
        """Raise a :class:`LearnerConfigError` naming the setting if ``learner`` cannot be a
        group member's (at start: a refusal, exit 2)."""
        fresh = mixing_learner(learner).clone()
        fresh.rounds().declare_features([])
        try:
            check_base_state(fresh.to_state())
        except ValueError as exc:
            raise LearnerConfigError(f"learner.kernels (mixing.enabled): {exc}") from exc

    def _spent(self, part: str, since: float) -> float:
        """Count the time since ``since`` as blocked on the group (``part``); returns now."""
        now = time.perf_counter()
        self.blocked[part] += now - since
        self.metrics.blocked.labels(part).inc(now - since)
        return now

    # -- the log --------------------------------------------------------------------------------

    def _apply(self, records: list[MixRecord]) -> None:
        if records:
            self._fold(records)
            self.metrics.totals(self.log)

    def _fold(self, records: list[MixRecord]) -> None:
        for rec in records:
            res = self.log.apply(rec)
            self._report_skipped()
            if res is not None:
                self.metrics.merged(res, len(self.log.members))
                if res.late:
                    log.warning("round %d closed without %s (late)", res.round, list(res.late))
                log.info(
                    "round %d merged: %d examples from %s%s, digest %s, %.1f ms", res.round,
                    res.examples, list(res.members),
                    f" + stale {list(res.stale)}" if res.stale else "", res.digest[:12],
                    res.seconds * 1e3,
                )  # fmt: skip
                if res.bank is not None:
                    self.metrics.bank_changes.inc()
                    log.info(
                        "the group's kernels change at round %d: added %s, removed %s",
                        res.round + 1, list(res.bank[0]), list(res.bank[1]),
                    )  # fmt: skip

    def _report_skipped(self) -> None:
        """Report the records the log skipped or fenced since the last call (every reader
        does)."""
        for skip in self.log.skipped[self._reported :]:
            self.metrics.skipped(skip)
            log.warning("mix topic: %s", describe(skip))
        self._reported = len(self.log.skipped)
        for fence in self.log.fenced[self._reported_fenced :]:
            self.metrics.fenced_delta(fence)
            log.warning(
                "mix topic: fenced the delta of member %r for round %d (%s examples learned "
                "again, none lost): %s", fence.member, fence.round, fence.examples, fence.detail,
            )  # fmt: skip
        self._reported_fenced = len(self.log.fenced)

    def _read(self, timeout_ms: int = 0) -> None:
        assert self.topic is not None
        t0 = time.perf_counter()
        records = self.topic.read(timeout_ms)
        if records:  # the fold: decoding (a read that waited counts from its return) and
            if timeout_ms:  # merges, when a round closes
                t0 = time.perf_counter()
            self._apply(records)
            self._spent("fold", t0)
        self._read_at = time.monotonic()

    def _publish(self, rec: MixRecord) -> None:
        assert self.topic is not None
        self._confirm()  # (the log keeps this member's records in the order it wrote them)
        self.topic.publish(rec, attempts=self._attempts)

    def _send(self, rec: MixRecord) -> None:
        """Send a delta without waiting for the broker (:meth:`_confirm` does, later)."""
        assert self.topic is not None
        self._confirm()
        self._unacked = (rec, self.topic.send(rec))
        self._last_sent = rec

    def _confirm(self, wait: bool = True) -> None:
        """Make sure the delta in flight is in the log: wait for its acknowledgement, or
        publish it again if its send failed. ``wait=False``: only if its send has finished
        (nothing to wait for)."""
        if self._unacked is None or self.topic is None:
            return
        rec, sent = self._unacked
        if not wait and sent is not None and not sent.is_done:
            return
        t0 = time.perf_counter()
        self._unacked = None
        self.topic.confirm(rec, sent, attempts=self._attempts)
        self._spent("publish", t0)

    # -- the learner ----------------------------------------------------------------------------

    def _learned(self, learner: MKLClassifier) -> int:
        """Examples learned since :attr:`ref` (the next delta's)."""
        return int(learner.rounds().n_learned) - self.mark

    def _adopt(self, learner: MKLClassifier, offsets: dict[TP, int]) -> None:
        """Make the learner the group's latest base (nothing of its own unpublished) and the
        offsets the group's frontier."""
        assert self.log.base is not None
        rounds = learner.rounds()
        rounds.load_state(*self.log.base, with_bank=True)  # the group's bank, if it changed
        self.outstanding = []
        self._after_base(learner)
        for key, offset in self.log.frontier.items():
            topic, _, part = key.rpartition("/")
            offsets[(topic, int(part))] = offset
        self._check_digest(rounds)

    def _check_digest(self, rounds: Rounds, want: str | None = None, round_: int = -1) -> None:
        digest = rounds.digest()
        want = self.log.digest if want is None else want
        if digest != want:  # the learner must hold exactly the merged model
            raise RuntimeError(
                f"adopted round {self.round if round_ < 0 else round_} but digest {digest} "
                f"differs from the group's {want}"
            )

    def _checked_now(self, examples: int) -> bool:
        """Whether this steady-state rebase is one that checks the merged model: the first,
        then every :data:`CHECK_EVERY`-th of those that take a round of this member's
        (``examples``, its examples the merged model now holds, at least K / 2: with a
        staleness bound above one round, the first steady rebase may take a short warm-up
        delta, and a rebase may take none; the hindsight view samples rounds, not rebases)."""
        self._steady += 1
        if 2 * examples < self.K:
            return self._steady == 1
        self._full += 1
        return self._steady == 1 or (self._full - 1) % CHECK_EVERY == 0

    def _check_later(self) -> None:
        """The work a steady-state rebase left for after this member's next publish (off the
        group's critical path: the others wait for that delta, not for this): the merged model
        it rebased onto, loaded into a copy of the learner, must have the log's digest, and
        the examples of this member's merged delta are scored again by it (the hindsight
        view)."""
        if self._later is None:
            return
        t0 = time.perf_counter()
        learner, base, digest, round_, scored = self._later
        self._later = None
        rounds = self._copy_holding(learner, base)
        self._check_digest(rounds, digest, round_)
        if scored is not None:
            self.add_hindsight(hindsight(rounds, scored[1], scored[0], SAMPLED * scored[2]))
        self._spent("rebase", t0)

    def _copy_holding(self, learner: MKLClassifier, base: State) -> Rounds:
        """A copy of ``learner`` that holds ``base`` (the sampled check's): kept from one check
        to the next, ``base`` taken on its own arrays (``Rounds.take_state``: the same bits as
        ``load_state``, which builds a model, its layout and its feature maps anew: measured
        ~1.4 ms against ~0.2); a new copy, loaded, the first time, for another learner (a
        reload) or when the layout changed (new inputs or classes, a bank switch)."""
        kept = self._checker
        if kept is not None and kept[0] is learner:
            rounds = kept[1].rounds()
            if rounds.take_state(*base):
                return rounds
        copy = learner.clone()
        rounds = copy.rounds()
        rounds.load_state(*base, with_bank=True)
        self._checker = (learner, copy)
        return rounds

    def _after_base(self, learner: MKLClassifier) -> None:
        """Bookkeeping once the learner derives from the log's latest base."""
        self._warn_bank()
        rounds = learner.rounds()
        core = rounds.model
        if core is not None:  # the group decides the bandwidths (core.mixing_bandwidth)
            core.hold_bandwidths = True
        if self.log.every is not None:  # adaptive K: the group's, the same for every member
            self.K = self.log.every
        # While a bandwidth waits for the group's warm-up inputs, a round ends as soon as this
        # member alone could fill the group's reservoir: the blocks then restart at most once,
        # early, instead of learning K records per member over a provisional bandwidth.
        left = 0 if core is None else core.warmup_left
        self.K_round = min(self.K, left) if left else self.K
        self.round = self.log.round
        self.next = max(self.next, self.round)
        self.ref = self.outstanding[-1].state if self.outstanding else self.log.base
        self.digests[self.round] = self.log.digest
        self.metrics.round.set(self.round)
        self.metrics.examples.set(self.log.examples)

    def _rebase(self, learner: MKLClassifier, offsets: dict[TP, int], drain: Drain) -> None:
        """The log's base is newer than the learner's: move the learner onto it. Its own
        progress that the merged model does not hold (learned since the state its oldest
        published delta not merged yet was learned from, or since :attr:`ref`) is kept on top
        of the merged model, ``w <- w_merged + (w_local - w_since)`` for every part of the
        state, and so are those deltas' states (the next delta is measured from the last); a
        delta it did not publish for its old round (the round closed without it) is published
        first, stale."""
        assert self.log.base is not None and self.ref is not None
        t0 = time.perf_counter()
        drain()
        t0 = self._spent("drain", t0)
        if not self.published and (self._learned(learner) > 0 or self.kept):
            self._publish_delta(learner, offsets)  # late: merged next round, from its base
            t0 = time.perf_counter()
        self._check_later()  # (a previous base's, if any)
        rounds = learner.rounds()
        base = self.log.base
        done = [sent for sent in self.outstanding if self._resolved(sent.round)]
        left = [sent for sent in self.outstanding if not self._resolved(sent.round)]
        ref = left[0].ref if left else self.ref  # what the merged model holds of this member
        unpublished = self._learned(learner)
        n = unpublished + sum(sent.examples for sent in left)
        self.rebases += 1
        self.rebase_unpublished += unpublished
        learned = n > 0 or bool(self.kept)
        merged = [sent for sent in done if self._merged_in(sent.round)]
        kept = [x for sent in merged for x in sent.kept]
        # the merged model holds them; a sample per delta (a rebase may take several)
        scored = (done[-1].round, kept, len(merged)) if kept else None
        self.outstanding = self._moved(left, base, ref)
        # a settled group (the same bank, inputs and layout): the rebase on the learner's own
        # arrays, the same bits as the rebased state loaded below, without building either
        in_place = learned and self.K_round == self.K and rounds.rebase_onto(base, ref, n)
        local = snapshot(learner) if learned and not in_place else None
        bank = bank_of(base)
        switched = local is not None and bank is not None and bank_of(local) != bank
        steady = not switched and self.K_round == self.K
        if in_place or (local is not None and steady):
            # the steady state (no bank switch, no bandwidth warm-up): the learner takes its
            # rebased state at once; every CHECK_EVERY-th time, the check of the merged model's
            # digest and the hindsight scoring follow after this member's next delta is out
            # (:meth:`_check_later`)
            if not in_place:
                assert local is not None
                rounds.load_state(*rebased(base, local, ref, n), with_bank=True)
            if self._checked_now(sum(sent.examples for sent in merged)):
                self._later = (learner, base, self.log.digest, self.log.round, scored)
            self._after_base(learner)
        elif steady and bank_of(ref) == bank:
            # nothing learned since its publish (the round's last member to publish reads the
            # close right after it): the merged model, exactly (taken on the learner's own
            # arrays when its layout is the same), checked like the rebase above
            if not rounds.take_state(*base):
                rounds.load_state(*base, with_bank=True)
            if self._checked_now(sum(sent.examples for sent in merged)):
                self._check_digest(rounds)
                if scored is not None:
                    self.add_hindsight(hindsight(rounds, scored[1], scored[0], SAMPLED * scored[2]))
            self._after_base(learner)
        else:
            rounds.load_state(*base, with_bank=True)  # the merged model, exactly
            self._check_digest(rounds)
            if scored is not None:  # score them again
                self.add_hindsight(
                    hindsight(rounds, scored[1], scored[0], HINDSIGHT_SAMPLE * scored[2])
                )
            self._after_base(learner)
            if local is not None:
                if switched:  # the round switched the bank: its progress and its reference
                    assert bank is not None  # alike (new blocks at zero: no delta there)
                    local, ref = switch_bank(local, bank)[0], switch_bank(ref, bank)[0]
                rounds.load_state(*rebased(base, local, ref, n), with_bank=True)
                core = rounds.model
                if core is not None:
                    core.hold_bandwidths = True
        self._rebased(rounds, unpublished, offsets, t0)

    def _moved(self, left: list[Sent], base: State, since: State) -> list[Sent]:
        """This member's published deltas that ``base`` does not hold, moved onto it like the
        learner (``state <- base + (state - since)``): each is measured from the previous one's
        moved state, the first from ``base``. A bank switched at ``base`` switches them too."""
        bank = bank_of(base)
        out: list[Sent] = []
        prev, total = base, 0
        for sent in left:
            total += sent.examples
            state, src = sent.state, since
            if bank is not None and bank_of(state) != bank:
                state, src = switch_bank(state, bank)[0], switch_bank(since, bank)[0]
            moved = rebased(base, state, src, total)
            out.append(Sent(sent.round, moved, prev, sent.examples, sent.kept))
            prev = moved
        return out

    def _rebased(self, rounds: Rounds, n: int, offsets: dict[TP, int], t0: float) -> None:
        """A rebase's end: the learner's mark (``n`` of its examples are not published yet)
        and the group's offsets of the others' partitions."""
        self.mark = int(rounds.n_learned) - n
        for key, offset in self.log.frontier.items():  # others' partitions: the group's
            topic, _, part = key.rpartition("/")
            tp = (topic, int(part))
            offsets[tp] = max(offsets.get(tp, 0), offset)
        self._spent("rebase", t0)

    def _warn_bank(self) -> None:
        """Say so (once per bank) when the group learns with another bank than this member's
        settings name: a restart or SIGHUP of this member would propose its own again."""
        bank = self.log.bank
        if self.configured is None or bank == self.configured or bank == self._warned_bank:
            return
        self._warned_bank = bank
        log.warning(
            "the group learns with the kernels %s, but this member's learner.kernels are %s: a "
            "restart or SIGHUP of this member would propose them to the group again; give every "
            "member the same learner.kernels", _names(bank), _names(self.configured),
        )  # fmt: skip

    def propose(self, learner: MKLClassifier, spec: LearnerSpec, guard: ReloadSettings) -> bool:
        """Propose the bank ``spec`` (the ``[learner]`` settings) configures to the group, if it
        differs from the group's; whether a proposal was published. The learner itself keeps
        its bank: every member (this one too) switches when the open round closes, which every
        member ends at its next batch boundary once it has read the proposal.

        Raises
        ------
        LearnerConfigError
            A change that looks like a mistake (the guards of a single daemon's reload, unless
            ``guard.force``), or that the learner refuses (tried on a copy).
        """
        wanted = configured_kernels(spec)
        if wanted is None:
            return False
        bank = canonical_bank(wanted)
        self.configured = bank
        self._read()  # the group's bank as of now (a proposal pending included)
        if bank == self.log.bank:
            return False
        check_change(learner, wanted, guard)
        try:  # on a copy: what the group's switch will do to the merged model
            _, added, removed = switch_bank(learner.to_state(), bank)
        except LearnerConfigError:
            raise
        except Exception as exc:
            raise LearnerConfigError(f"learner.kernels: the change was refused: {exc!r}") from exc
        self._publish(MixRecord("bank", self.round, self.name, kernels=tuple(bank),
                                sent=time.time()))  # fmt: skip
        log.info(
            "learner.kernels: proposed to the group (adding %s, removing %s); every member "
            "switches when round %d closes", added, removed, self.round,
        )  # fmt: skip
        return True

    def _merged_in(self, round_: int) -> bool:
        """Whether a merge holds this member's delta of ``round_`` (fresh or late)."""
        for res in reversed(self.log.results):
            if (self.name, res.round - round_) in res.stale:
                return True
            if res.round == round_:
                return self.name in res.members
        return False

    def _publish_delta(self, learner: MKLClassifier, offsets: dict[TP, int]) -> None:
        """Publish what the learner learned since the base of :attr:`round` (it is drained):
        its state, examples, offsets and prequential view; the learner then keeps learning,
        and its progress is measured from this state until the round's merge comes."""
        t0 = time.perf_counter()
        state = snapshot(learner)
        n = self._learned(learner)
        chained = self.outstanding[-1].state if self.outstanding else None
        claims = {}
        for (topic, part), start in self.owned.items():
            end = offsets.get((topic, part), start)
            if end != start:
                claims[f"{topic}/{part}"] = (start, end)
                self.owned[(topic, part)] = end
        self._send(MixRecord(
            "delta", self.next, self.name, examples=n,
            offsets={f"{t}/{p}": o for (t, p), o in offsets.items()}, claims=claims,
            state=state, sent=time.time(), base_digest=self.digests[self.round],
            stats={**prequential(self.kept), **self._take_hindsight(),
                   **self._blocked_stats(), **self._round_stats(learner),
                   **({"drift": 1.0} if self._drift else {})},
            on=-1 if self.next == self.round else self.round, ref=chained,
        ))  # fmt: skip
        assert self.ref is not None
        self.outstanding.append(Sent(self.next, state, self.ref, n, list(self.kept)))
        self.published_at[self.next] = time.monotonic()
        for old in [q for q in self.published_at if q < self.round]:
            del self.published_at[old]
        self.next += 1
        self.ref, self.mark = state, int(learner.rounds().n_learned)
        self.kept.clear()
        self._scanned = self._mistakes = 0
        self._drift = False
        self.taken = 0
        self._spent("publish", t0)

    def _blocked_stats(self) -> dict[str, float]:
        """This member's time on the group so far (in every delta and its bye: readers of the
        log see what the protocol cost each member)."""
        out = {f"blocked_{part}": seconds for part, seconds in self.blocked.items()}
        out["member_seconds"] = time.monotonic() - self.joined_at
        out["rebases"] = float(self.rebases)
        out["rebase_unpublished"] = float(self.rebase_unpublished)
        return out

    def _round_stats(self, learner: MKLClassifier) -> dict[str, float]:
        """This member's round as adaptive K measures it: its wall time since the previous
        publish, the part spent on the group (drains left out), its examples."""
        now = time.perf_counter()
        cost = sum(v for part, v in self.blocked.items() if part != "drain")
        out = {"round_seconds": now - self._round_started, "round_cost": cost - self._cost_before,
               "round_examples": float(self._learned(learner))}  # fmt: skip
        self._round_started, self._cost_before = now, cost
        return out

    def add_hindsight(self, report: dict[str, float]) -> None:
        """Keep a hindsight report for the next record; one not yet published is added to it
        (the sums of both rounds' examples under the later round: a record carries one
        report, and a deferred scoring (:meth:`_check_later`) can meet the next one)."""
        if not self.hindsight:
            self.hindsight = report
            return
        for key, value in report.items():
            if key != "h_round":
                self.hindsight[key] = self.hindsight.get(key, 0.0) + value
        self.hindsight["h_round"] = report["h_round"]

    def _take_hindsight(self) -> dict[str, float]:
        out, self.hindsight = self.hindsight, {}
        return out

    # -- hooks ----------------------------------------------------------------------------------

    def join(self, learner: MKLClassifier, offsets: dict[TP, int], drain: Drain = _nothing) -> None:
        """Connect, read the log, found round 0 if the log is empty, adopt the group's model and
        offsets (a restarted member drops what it had not published), propose its configured
        bank if the group's differs (as a single daemon applies settings edited while it was
        stopped) and say hello.

        Raises
        ------
        LearnerConfigError
            This member's settings cannot join the group's model (other learner settings than
            the group's), or its bank change is refused (:meth:`propose`).
        """
        self.check_learner(learner)
        k = self.settings.kafka
        topic = self.settings.mixing.topic
        if k.create_topics:
            create_mix_topic(k, topic)
        self.topic = self._topic_factory(k, topic)
        self._apply(self.topic.read_to_end())
        if self.log.base is None:  # a new group starts from an empty model
            fresh = learner.clone()
            seam = fresh.rounds()
            seam.declare_classes(list(self.settings.records.classes or ()))
            seam.declare_features([])  # the core model exists: every member shares it
            state = fresh.to_state()
            check_base_state(state)
            mixing = self.settings.mixing
            every = {} if mixing.max_every_records is None else {
                "k_min": float(mixing.every_records),
                "k_max": float(max(mixing.max_every_records, mixing.every_records)),
                "k_overhead": mixing.round_overhead,
            }  # fmt: skip
            self._publish(MixRecord("base", 0, self.name, state=state, sent=time.time(),
                                    stats=every))  # fmt: skip
            while self.log.base is None:
                self._apply(self.topic.read_to_end())
        offsets.clear()  # the group's frontier, not this member's unpublished progress
        self.owned.clear()  # partitions are owned from this member's next take on
        try:
            self._adopt(learner, offsets)
        except ValueError as exc:  # other parameters than the group's: a settings error
            raise LearnerConfigError(
                f"learner: this member cannot adopt the group's model ({exc}); every member of "
                f"the group of {self.settings.mixing.topic} needs the same [learner] settings"
            ) from exc
        self.mark = int(learner.rounds().n_learned)
        # published before a crash: this member's part of the open round (and of later ones,
        # up to its staleness bound) is in the log already; its next delta follows them
        self.next = max(self.round, self.log.last_delta.get(self.name, -1) + 1)
        for q in range(self.round, self.next):
            self.published_at[q] = time.monotonic()
        self.joined_at = time.monotonic()
        self.propose(learner, self.settings.learner, self.settings.reload)
        self._publish(MixRecord("hello", self.round, self.name, sent=time.time()))
        log.info("joined the mixing group as %s at round %d", self.name, self.round)

    def catch_up(self, assigned: list[Any], offsets: dict[TP, int]) -> None:
        """Before an assignment: *take* the assigned partitions in the log and read it up to
        the take, so that every assigned partition starts at the frontier as it stands there
        (its previous owner published its delta when the partition was revoked), or at its
        first offset if the group never learned from it (never at a committed offset: a member
        may have committed progress it never published). A previous owner's delta that comes
        after the take is fenced by every reader (:mod:`streammkl.daemon.mixing.log`): its
        records are learned again here, never twice."""
        assert self.topic is not None
        names = [f"{tp.topic}/{tp.partition}" for tp in assigned]
        self.owned.clear()
        before = self.log.applied  # the take lands after every record folded so far
        if names:
            self._publish(MixRecord("take", self.round, self.name, partitions=tuple(names),
                                    sent=time.time()))  # fmt: skip
        self._apply(self.topic.read_to_end())
        waited = time.monotonic()
        while any(self.log.owners.get(n, ("", 0, -1))[2] <= before for n in names):
            if time.monotonic() - waited > 10.0:  # acknowledged, so in the log: keep reading
                log.warning("mix topic: this member's take of %s is not read back yet", names)
                waited = time.monotonic()
            self._apply(self.topic.read(timeout_ms=50))
        for tp, name in zip(assigned, names, strict=True):
            owner, start, _ = self.log.owners[name]
            if owner != self.name:  # taken again by another member since: its records
                start = self.log.frontier.get(name, 0)  # learned here will be fenced
                log.warning("partition %s was taken by %r after this member took it", name, owner)
            self.owned[(tp.topic, tp.partition)] = start
            offsets[(tp.topic, tp.partition)] = start

    def on_revoke(
        self, learner: MKLClassifier, offsets: dict[TP, int], drain: Drain = _nothing
    ) -> None:
        """Partitions are taken away: publish what was learned from them (no wait for the
        round, only for the broker's acknowledgement: the next owners start at the frontier
        the delta moves). If this member's delta of the open round is published already and it
        learned more since, the round must close first (a member publishes once per round;
        every member publishes at its own revocation, so the wait is short, bounded by the
        timeout): then what it learned since is rebased and published as the next round's
        delta, and the partitions' next owners start where it ended."""
        t0 = time.perf_counter()
        drain()
        self._spent("drain", t0)
        if not self.published or self._learned(learner) > 0 or self.kept:
            self._publish_within(learner, offsets, drain)
        self._confirm()  # in the log before the partitions' next owners read the frontier
        self.owned.clear()  # (every partition is revoked: both clients' protocols are eager)

    def before_batch(
        self, learner: MKLClassifier, offsets: dict[TP, int], drain: Drain = _nothing
    ) -> None:
        """Before learning: read the log (at every batch while a delta waits for its round to
        close) and move onto a newer base when one came (:meth:`_rebase`)."""
        self._confirm(wait=False)  # a failed send is published again at once
        self._check_later()
        if self.published or time.monotonic() - self._read_at >= READ_EVERY:
            self._read()
        if self.log.round > self.round:
            self._rebase(learner, offsets, drain)

    def room(self, limit: int) -> int:
        """How many records the next batch may take so that the round ends at K of them; with
        adaptive K above its minimum, at most that minimum (the batches of a fixed-K group):
        the drift watch (:meth:`_drifted`) looks at every batch, so a round of a large K still
        ends within about a batch of a drift instead of at its end."""
        bounds = self.log.every_bounds
        if bounds is not None and self.K_round > bounds[0]:
            limit = min(limit, bounds[0])
        ahead = self._ahead()
        if ahead is not None and self.taken < ahead:  # the batch ends where it takes the merge
            limit = min(limit, ahead - self.taken)
        return max(1, min(limit, self.K_round - self.taken))

    def took(self, records: int, waiting: bool = False) -> None:
        """The loop took ``records`` for the next batch; ``waiting``: none, while records wait
        on this member's partitions (not fetched yet: a slow or starved member, not an idle
        one). A member that owns no partitions (none taken since its join or its last
        revocation) is idle whatever the loop says: before its first assignment the loop
        cannot know whether records wait, and holding the round until its timeout (30 s)
        would hold the assignment too, since the member that ended the round waits for its
        close without serving its consumer's rebalance (seen as a late join: round 0 closed
        at the timeout, the new member assigned right after)."""
        self.taken += records
        self._last_took = records
        self._waiting = waiting and bool(self.owned)

    def after_batch(
        self, learner: MKLClassifier, offsets: dict[TP, int], drain: Drain = _nothing
    ) -> None:
        """After learning: end the round after K records, or when another member ended it and
        this one has nothing to read (an idle member: members that have data all contribute
        K and so move through the stream at the same pace), or when a bank switch is pending.
        A member whose previous delta's round has not closed yet waits for it first: members
        are at most one round apart.

        First, the group's work that does not touch the learner is done while the batch is
        still being learned (the learner thread runs its compiled rounds without the GIL until
        the drain): the deferred checks of the last rebase and the read of the log, whose fold
        merges a round that closes. Done before the batch (:meth:`before_batch`), they kept
        the learner idle."""
        self._check_later()
        if self.published or time.monotonic() - self._read_at >= READ_EVERY:
            self._read()
        drift = self._drifted()
        if self.published:  # a delta ahead: the round ends at K records (or at a drift)
            if self.taken < self.K_round and not drift:
                self._hold(learner, offsets, drain)
                return
        else:
            triggered = self.log.fresh() - {self.name}
            idle = self._last_took == 0 and not self._waiting
            switching = self.log.proposal is not None  # a bank proposal: switch at once
            if not (self.taken >= self.K_round or switching or (triggered and idle) or drift):
                return
        t0 = time.perf_counter()
        drain()
        self._spent("drain", t0)
        self._publish_within(learner, offsets, drain)
        self._hold(learner, offsets, drain)  # (ahead_records = 0: at once)

    def _ahead(self) -> int | None:
        """The records this member may learn past its last publish before it takes that
        round's merged model, while it waits for one at s = 1 (None: no bound below K)."""
        if self.ahead is None or not self.published or self._bound() != 1:
            return None
        return self.ahead if self.ahead < self.K_round else None

    def _hold(self, learner: MKLClassifier, offsets: dict[TP, int], drain: Drain) -> None:
        """The staleness bound in records (``mixing.ahead_records``): a member that has learned
        that many records since its publish waits for the round to close and rebases before
        it learns more, so that the others' examples reach its model at most that many of its
        own records late, however long the broker and the fold took (on a loaded machine the
        merged round came after the member's whole next K, on a quiet one sooner: accuracy
        followed the timing). The same wait and rebase as at the bound s = 1
        (:meth:`_publish_within`), earlier in the round."""
        ahead = self._ahead()
        if ahead is None or self.taken < ahead:
            return
        t0 = time.perf_counter()
        drain()
        self._spent("drain", t0)
        self._wait_close()
        self._rebase(learner, offsets, drain)

    def _drifted(self) -> bool:
        """Adaptive K's early end of a round: whether this member's error rate in its round
        so far is above the group's running rate (:func:`streammkl.daemon.mixing.log.above`,
        on at least :data:`DRIFT_MIN_EXAMPLES` examples; its delta then says so), or another
        member's delta for the same round says it saw a drift. The round then closes at once
        and the log sets the next K to the minimum
        (:func:`streammkl.daemon.mixing.log.next_every`): a long round would keep the members
        on a stale base while the model must move. Never while K is at its minimum (nothing
        to shorten) or fixed."""
        bounds, rate = self.log.every_bounds, self.log.trend.rate
        if bounds is None or rate is None or self.K_round <= bounds[0]:
            return False
        for _, y, outcome in self.kept[self._scanned :]:
            self._mistakes += _loss(y, outcome)[1]
        self._scanned = len(self.kept)
        if not self._drift and self._scanned >= DRIFT_MIN_EXAMPLES:
            self._drift = above(rate, self._mistakes, self._scanned)
            if self._drift:
                log.info("error rate %d/%d above the group's %.3f: round %d ends now (drift)",
                         self._mistakes, self._scanned, rate, self.next)  # fmt: skip
        return self._drift or self.log.flagged(self.next)

    def _publish_within(self, learner: MKLClassifier, offsets: dict[TP, int], drain: Drain) -> None:
        """Publish the next delta (the learner is drained) within the staleness bound: a
        member more than s rounds ahead of the last merged round it applied (its next delta's
        round ``>= round + s``) first waits for round ``next - s`` to close and rebases onto
        what has come."""
        if self.next >= self.round + self._bound():
            self._wait_close(self.next - self._bound())
            self._rebase(learner, offsets, drain)
        self._publish_delta(learner, offsets)

    def _wait_close(self, until: int | None = None) -> None:
        """Wait until round ``until`` closes (default: the round of this member's last
        delta): every expected member published, or this member closes the open round after
        the timeout if its delta for it is out."""
        assert self.topic is not None
        self._confirm()  # the round cannot close without this member's delta
        r = self.next - 1 if until is None else until
        t0, folded = time.perf_counter(), self.blocked["fold"]
        closed_by_me: set[int] = set()
        confirmed = time.monotonic()
        while self.log.round <= r:
            mine = self._last_sent
            if (
                mine is not None
                and mine.round >= self.log.round
                and not self.log.has_delta(mine.round, self.name)
                and time.monotonic() - confirmed > UNSEEN_AFTER
            ):  # acknowledged, yet not in the log as read: publish it again (readers keep the
                log.warning(  # first of a key), not wait for the round's timeout without it
                    "mix topic: this member's delta for round %d was acknowledged but is not "
                    "read back after %.0f s; publishing it again", mine.round, UNSEEN_AFTER,
                )  # fmt: skip
                self._publish(mine)
                confirmed = time.monotonic()
            o = self.log.round
            at = self.published_at.get(o)
            if o not in closed_by_me and at is not None and time.monotonic() - at > self.timeout:
                late = tuple(sorted(self.log.members - self.log.fresh()))
                self._publish(MixRecord("close", o, self.name, late=late, sent=time.time()))
                closed_by_me.add(o)
            self._read(timeout_ms=20)
        at = self.published_at.get(r)
        if at is not None:
            self.metrics.wait_seconds.observe(time.monotonic() - at)
        self._spent("wait", t0 + (self.blocked["fold"] - folded))  # the folds are counted

    def leave(
        self, learner: MKLClassifier, offsets: dict[TP, int], drain: Drain = _nothing
    ) -> None:
        """Clean shutdown: publish what is left (so nothing learned is lost), wait for the
        last round and adopt it, then say bye."""
        if self.topic is None:
            return
        drain()
        self._attempts = 3
        try:
            self._read()
            if self.log.round > self.round:
                self._rebase(learner, offsets, drain)
            if not self.published or self._learned(learner) > 0 or self.kept:
                self._publish_within(learner, offsets, drain)
            self._wait_close()
            self._rebase(learner, offsets, drain)  # nothing learned since: the merged model
            self._check_later()  # (its last hindsight report goes with the bye)
            self._publish(MixRecord("bye", self.round, self.name, sent=time.time(),
                                    stats={**self._take_hindsight(),
                                           **self._blocked_stats()}))  # fmt: skip
        finally:
            self.topic.close()
            self.topic = None


@dataclass
class Sent:
    """One of a member's published deltas: its round, its state, the state it was learned
    from (both on the learner's coordinates: moved onto every merged model the member takes
    before the delta's own merge), its examples and their predictions (the hindsight view)."""

    round: int
    state: State
    ref: State
    examples: int
    kept: list[Learned]


def snapshot(learner: MKLClassifier) -> State:
    """The learner's state (its arrays are copies: the learner keeps learning)."""
    return learner.to_state()


def _names(bank: list[dict[str, Any]] | None) -> str | list[str]:
    return "of the default bank" if bank is None else [kernels.from_spec(k).name for k in bank]


def describe(skip: Skipped) -> str:
    """One line for a skipped record of the log: whose, which round, why, what it costs."""
    kind = "a record" if skip.kind == UNREADABLE else f"the {skip.kind}"
    what = f"{kind} of member {skip.member!r} for round {skip.round}"
    if skip.examples is None:
        cost = "examples unknown" if skip.kind in ("delta", UNREADABLE) else "no examples"
    else:
        cost = f"its {skip.examples} examples are not in the merged model"
    return f"skipped {what} ({skip.reason}: {skip.detail}); {cost}"


def _loss(y: Target, outcome: tuple[Prediction, Probas | None]) -> tuple[float, bool]:
    """Log-loss and mistake of one prediction ``(prediction, probabilities)`` of label y (the
    daemon's prequential conventions: probabilities floored at 1e-15)."""
    prediction, proba = outcome
    p = proba.get(y, 0.0) if proba else 0.0
    return -math.log(p if p > 1e-15 else 1e-15), prediction != y


def prequential(kept: list[Learned]) -> dict[str, float]:
    """The prequential view of a round's examples: the sums the group log folds.

    :func:`_loss` inlined (the same floats, summed in the same order): a call per example was
    half of this loop's time, which runs over every example of a round at its publish (and
    over the hindsight view's sample), ~1.8 us per learned record in process at load 9
    (``mixing_round_parts.py``, "prequential sums")."""
    loss = mistakes = 0.0
    log = math.log
    for _, y, (prediction, proba) in kept:
        p = proba.get(y, 0.0) if proba else 0.0
        loss += -log(p if p > 1e-15 else 1e-15)
        mistakes += prediction != y
    return {"loss": loss, "mistakes": mistakes, "labelled": float(len(kept))}


#: Examples per round the hindsight view scores again (every k-th of the round's): scoring all
#: of them cost 40-80 % of the round's learning time with the default bank (measured).
HINDSIGHT_SAMPLE = 128


#: Examples a sampled check (:data:`CHECK_EVERY`) scores again: as many as the rounds it
#: stands for would have had, so that the hindsight view covers about as much of the stream.
SAMPLED = HINDSIGHT_SAMPLE * CHECK_EVERY


def hindsight(
    rounds: Rounds, kept: list[Learned], round_: int, sample: int = HINDSIGHT_SAMPLE
) -> dict[str, float]:
    """A sample of the round's examples (every k-th, at most ``sample``) scored again by the
    merged model that holds them (the learner's, just adopted), next to their online scores:
    the group log's regret view (both sums over the same examples)."""
    kept = kept[:: -(-len(kept) // sample)] if kept else kept
    online = prequential(kept)
    # vector records: every x is a feature dict; one compiled loop
    rows = rounds.input_rows([x for x, _, _ in kept])  # type: ignore[misc]
    assert rounds.model is not None
    # (predict_one and predict_proba_one of each row: two classes in one pass)
    outcomes = rounds.predictions(rounds.model.decision_many(rounds.scale_rows(rows)))
    again = prequential([(x, y, o) for (x, y, _), o in zip(kept, outcomes, strict=True)])
    return {
        "h_round": float(round_), "h_loss": online["loss"], "h_mistakes": online["mistakes"],
        "h_labelled": online["labelled"], "h_merged_loss": again["loss"],
        "h_merged_mistakes": again["mistakes"],
    }  # fmt: skip
