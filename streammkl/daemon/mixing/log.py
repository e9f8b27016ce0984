"""The state of a mixing group, folded from its mix topic (pure: no I/O, no clocks).

Every member (and any reader, e.g. the scale-out benchmark) applies the same records in the same
order (the mix topic has one partition) and so computes the same rounds, bases, digests and
offsets:

- the first ``base`` record is round 0's base; later ones are ignored;
- a ``take`` makes its member the *owner* of its partitions, from the frontier as it stands at
  that point of the log: the owner's start there, whatever it read before;
- a ``delta`` for round q is kept (the first per (q, member): replays change nothing) until the
  next ``close``; it moves the *frontier* (the next offset of every input partition the group
  has learned up to) to the ends of its claims, so the next owner of a partition starts
  where its previous owner's last published delta ended, and nothing is learned twice. A delta
  that claims records of a partition another member has taken since, or that do not start at
  the frontier, is *fenced*: set aside whole (:attr:`MixLog.fenced`; not a skip: nothing is
  lost), its claims leave the frontier where it was, and the partitions' owners learn those
  records again. That is what keeps a member that a rebalance left behind (a *zombie*: it
  publishes its revocation's delta after the partitions' new owners started at the frontier,
  e.g. a revocation callback that outlived the broker's join window) from adding records to
  the group's model a second time; a delta without claims (written before them) moves the
  frontier to its offsets' maximum;
- the open round r closes as soon as every expected member has a delta for it, or at its first
  ``close`` record (written by a member that waited ``round_timeout_seconds``); closing merges
  every kept delta: those of round r (fresh) and
  those of earlier rounds that came after their round's close (stale, merged from their own
  base: bounded staleness), each measured from the state it names (:attr:`MixRecord.ref`: its
  member's previous delta, for a delta published ahead of the merged model under a staleness
  bound above one round) or else from its base — :func:`streammkl.core.mixing.merge`, the
  example-weighted delta merge followed by the prox — and opens round r + 1, and the rounds
  after it whose expected members have all published already;
- the members a round waits for are those that said ``hello`` or published a delta, minus those
  that said ``bye`` or missed a close (a late member is back as soon as it publishes);
- a ``bank`` record proposes another kernel bank: the last one folded before the open round
  closes is applied to the merged model (``add_kernel`` / ``remove_kernel``: new blocks start
  at zero, the others keep their merged state), so every member switches at that round
  boundary; a late delta learned before a switch gets the same switch (and so does its base)
  before it is merged;
- adaptive K (bounds in the ``base`` record): every close sets the next round's K from the
  fresh deltas' measured costs, bounded by the accuracy: the merged rounds' prequential error
  rate (:class:`ErrorTrend`) sends it back to its minimum at a drift (a jump of the rate, or
  a delta whose member saw one), keeps it from growing while the rate falls and caps it at
  :data:`MISTAKES_PER_ROUND` / rate (:func:`next_every`);
- a record that cannot be used (undecodable, a base or bank that cannot be applied, a delta
  learned with another bank or that the merge refuses, one staler than ``KEEP_BASES``) is
  skipped and reported (:attr:`MixLog.skipped`, with the examples it carried, which are then
  not in the merged model): never an error, so no record can stop a reader, on any replay;
- the group's prequential view: every merged delta's ``stats`` (the log-loss, mistakes and
  labels of the predictions its member made on the delta's examples) add up, exactly once like
  the examples, to ``loss`` / ``mistakes`` / ``labelled``; and the **hindsight** view: after
  adopting a merged model that holds its delta, a member scores that round's examples again
  with it and publishes both sums with its next delta (or its ``bye``): ``regret`` is
  Σ (online loss − merged model's loss) over the rounds reported so (each (round, member) once),
  on ``regret_examples`` examples (docs/scale-out.md, "The theory").
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streammkl.core import kernels as kernels_mod
from streammkl.core import mixing_bandwidth
from streammkl.core.flat_state import FlatLayout
from streammkl.core.kernels import Kernel
from streammkl.core.mixing import ForeignDelta, MemberRound, check_mixable, merge, merge_saved
from streammkl.core.model import OnlineMKL
from streammkl.core.state import state_digest
from streammkl.daemon.learning.bank import change_kernels
from streammkl.daemon.mixing.topic import UNREADABLE, MixRecord, State
from streammkl.river import MKLClassifier
from streammkl.river.pooling import has_scaler, pool_scalers, split_scaler

#: Bases kept for stale deltas; a delta staler than this cannot be merged (it is reported).
KEEP_BASES = 32

#: Why a record of the mix log was skipped (the ``reason`` of :class:`Skipped`).
SKIP_REASONS = (
    "undecodable",  # not a mix record (its bytes could not be decoded)
    "bad_base",  # a base that is not a group learner's state
    "bad_bank",  # a bank proposal that cannot be built or applied
    "foreign_bank",  # a delta learned with another configuration or kernel bank than its base
    "unmergeable",  # a delta the merge refuses for another reason (a damaged state)
    "too_stale",  # a delta learned from a base older than the KEEP_BASES kept
)


@dataclass(frozen=True)
class Skipped:
    """A record of the mix log that could not be used (the same on every reader)."""

    round: int
    member: str
    kind: str
    reason: str  # one of SKIP_REASONS
    examples: int | None  # a delta's examples, which the merged model then lacks (None: unknown)
    detail: str


@dataclass(frozen=True)
class RoundResult:
    """What closing one round did (the same on every reader, except ``seconds``)."""

    round: int
    members: tuple[str, ...]  # fresh deltas merged
    stale: tuple[tuple[str, int], ...]  # (member, rounds late) merged from an older base
    late: tuple[str, ...]  # expected members without a delta (they join the next round)
    examples: int
    digest: str
    delta_norm: float
    active_before: int
    active_after: int
    seconds: float
    loss: float = 0.0  # the prequential view of the merged deltas' examples
    mistakes: int = 0
    labelled: int = 0
    #: Wall-clock spread of the fresh deltas' publishes (writers' clocks): how long the first
    #: member to end the round waited for the last one.
    spread: float = 0.0
    #: The kernels added and removed by a bank switch at this round boundary (None: none).
    bank: tuple[tuple[str, ...], tuple[str, ...]] | None = None
    #: K of the next round (adaptive K, :func:`next_every`; None: the group's K is fixed).
    every: int | None = None


def learner_digest(state: State) -> str:
    """The digest of a learner state (what ``learner.rounds().digest()`` returns for it)."""
    return state_digest(*state)


def core_state(state: State) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The core model's (meta, arrays) inside a river learner's state (without the arrays of
    its input standardisation)."""
    meta, arrays = state
    if meta.get("core") is None:
        raise ValueError("the learner has no core model yet")
    return dict(meta["core"]), split_scaler(arrays)[0]


def check_base_state(state: State) -> None:
    """Raise a clear ValueError if a learner state cannot be the base of a group."""
    meta = state[0]
    if meta.get("format") is None or "core" not in meta:
        raise ValueError("mixing groups need a streammkl river learner (MKLClassifier)")
    if meta["core"] is not None:
        check_mixable(OnlineMKL.from_state(*core_state(state)))


def bank_of(state: State) -> list[dict[str, Any]] | None:
    """The kernel bank a learner state was configured with (its ``kernels`` parameter, as
    ``to_spec()`` tables; None: the default bank). A group compares its members' settings with
    it, whatever bandwidths its ``MedianRBF`` kernels have fitted since."""
    bank = state[0].get("params", {}).get("kernels")
    return None if bank is None else [dict(k) for k in bank]


def canonical_bank(kernels: Iterable[Kernel | Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Kernel specs (or kernels) as the tables a learner state holds (JSON-normalised)."""
    return json.loads(json.dumps([kernels_mod.from_spec(k).to_spec() for k in kernels]))


def switch_bank(state: State, bank: list[dict[str, Any]]) -> tuple[State, list[str], list[str]]:
    """A learner state with another kernel bank: ``add_kernel`` / ``remove_kernel`` by kernel
    (new blocks start at zero, the others keep their state) and ``bank`` as its configured
    kernels. Returns (state, added, removed); raises whatever the learner refuses."""
    learner = MKLClassifier.from_state(*state)
    added, removed = change_kernels(learner, tuple(kernels_mod.from_spec(k) for k in bank))
    meta, arrays = learner.to_state()
    meta["params"] = {**meta["params"], "kernels": bank}
    return (meta, arrays), added, removed


@dataclass
class MixLog:
    """The fold of a mix topic (see the module docstring)."""

    dual: str = "sum"  # how FTRL's dual increments merge (core.mixing.merge)
    round: int = -1  # the open round (-1: no base yet)
    base: State | None = None
    digest: str = ""
    examples: int = 0  # examples in the current base (the sum over all merged rounds)
    frontier: dict[str, int] = field(default_factory=dict)
    members: set[str] = field(default_factory=set)
    pending: dict[tuple[int, str], MixRecord] = field(default_factory=dict)
    results: list[RoundResult] = field(default_factory=list)
    duplicates: int = 0
    #: (round, member) of deltas learned from another base than the group's for that round:
    #: that member's merged model differed from the others' (never expected; reported).
    mismatches: list[tuple[int, str]] = field(default_factory=list)
    digests: dict[int, str] = field(default_factory=dict)  # round -> digest of its base
    dropped: list[tuple[int, str]] = field(default_factory=list)
    loss: float = 0.0  # the group's prequential log-loss (merged deltas' examples)
    mistakes: int = 0
    labelled: int = 0
    regret: float = 0.0  # Σ (online loss − loss of the merged model in hindsight)
    regret_mistakes: int = 0  # Σ (online mistakes − the merged model's mistakes in hindsight)
    regret_examples: int = 0  # the examples those sums are over
    #: Records that could not be used, in log order (every reader skips the same ones).
    skipped: list[Skipped] = field(default_factory=list)
    skipped_examples: int = 0  # examples of skipped deltas: not in the merged model
    #: Deltas fenced (their claims overlap records another member took; in log order, reason
    #: "fenced"): their records are learned again by the partitions' owners, so only the
    #: work is lost, never an example.
    fenced: list[Skipped] = field(default_factory=list)
    fenced_examples: int = 0  # examples of fenced deltas (learned twice, counted once)
    #: K of the open round when the group adapts it (:func:`next_every`), else None.
    every: int | None = None
    #: Adaptive K's bounds and target, from the base record: (min, max, overhead).
    every_bounds: tuple[int, int, float] | None = None
    #: Adaptive K's view of the stream: the merged rounds' prequential error rate
    #: (:class:`ErrorTrend`; the same on every reader).
    trend: ErrorTrend = field(default_factory=lambda: ErrorTrend())
    #: The bank proposal to apply when the open round closes (the last one folded).
    proposal: MixRecord | None = None
    bank_changes: int = 0  # bank switches applied
    _switches: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # round -> bank
    _hindsight: set[tuple[int, str]] = field(default_factory=set)
    _bases: dict[int, State] = field(default_factory=dict)
    _seen: set[str] = field(default_factory=set)
    #: Partition ("topic/partition") -> (owner, its start, the take's position in the log).
    owners: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    applied: int = 0  # records applied (a record's position in the log, for takes)
    _fenced: set[tuple[int, str]] = field(default_factory=set)  # pending deltas set aside
    #: Member -> the latest round it published a delta for (a member that restarts publishes
    #: its next delta for a later round: the log keeps the first record of every key).
    last_delta: dict[str, int] = field(default_factory=dict)

    def fresh(self) -> set[str]:
        """Members with a delta for the open round."""
        return {m for (q, m) in self.pending if q == self.round}

    def complete(self) -> bool:
        """Whether every expected member has a delta for the open round."""
        return self.round >= 0 and self.members <= self.fresh()

    def flagged(self, round_: int) -> bool:
        """Whether a delta for ``round_`` not merged yet says its member saw a drift
        (adaptive K: the others end that round at once)."""
        return any(
            q == round_ and rec.stats.get("drift", 0.0) > 0 for (q, _), rec in self.pending.items()
        )

    def has_delta(self, round_: int, member: str) -> bool:
        return f"delta/{round_:010d}/{member}" in self._seen

    @property
    def bank(self) -> list[dict[str, Any]] | None:
        """The group's configured kernel bank, a pending proposal included (None: the default
        bank, or no base yet)."""
        if self.proposal is not None and self.proposal.kernels is not None:
            return [dict(k) for k in self.proposal.kernels]
        return None if self.base is None else bank_of(self.base)

    def apply(self, rec: MixRecord) -> RoundResult | None:
        """Apply one record; returns the round it closed, if any. A record that cannot be
        used is skipped (:attr:`skipped`), never raised."""
        self.applied += 1
        if rec.kind == UNREADABLE:
            self._skip(rec, "undecodable", rec.invalid)
            return None
        if rec.kind in ("delta", "base") and rec.key in self._seen:
            self.duplicates += 1
            return None
        if rec.kind in ("delta", "base"):
            self._seen.add(rec.key)
        if "h_round" in rec.stats:
            self._hindsight_of(rec)
        if rec.kind == "base":
            if self.base is None:
                why = _unusable_base(rec)
                if why:
                    self._skip(rec, "bad_base", why)
                else:
                    assert rec.state is not None
                    self._adopt(0, rec.state, examples=rec.examples)
                    self._every_from(rec.stats)
        elif rec.kind == "bank":
            why = _unusable_bank(rec) if self.base is not None else "before the group's base"
            if why:
                self._skip(rec, "bad_bank", why)
            else:
                self.proposal = rec
        elif rec.kind == "hello":
            self.members.add(rec.member)
        elif rec.kind == "bye":
            self.members.discard(rec.member)
            if self.fresh() and self.complete():
                return self._closes()
        elif rec.kind == "take":
            for tp in rec.partitions:
                self.owners[tp] = (rec.member, self.frontier.get(tp, 0), self.applied)
        elif rec.kind == "delta":
            self.members.add(rec.member)
            self.last_delta[rec.member] = max(self.last_delta.get(rec.member, -1), rec.round)
            want = self.digests.get(rec.base_round)
            if rec.base_digest and want is not None and rec.base_digest != want:
                self.mismatches.append((rec.round, rec.member))
            fence = self._fence(rec)
            if fence:  # the round does not wait for it; its records are learned again
                self.fenced.append(
                    Skipped(rec.round, rec.member, rec.kind, "fenced", rec.examples, fence)
                )
                self.fenced_examples += rec.examples
                self._fenced.add((rec.round, rec.member))
            elif rec.claims is not None:
                for tp, (_, end) in rec.claims.items():
                    self.frontier[tp] = end
            else:  # written before claims
                for tp, offset in rec.offsets.items():
                    self.frontier[tp] = max(self.frontier.get(tp, 0), offset)
            self.pending[(rec.round, rec.member)] = rec
            if rec.round == self.round and self.complete():
                return self._closes()
        elif rec.kind == "close" and rec.round == self.round and self.base is not None:
            return self._closes()
        return None

    def _closes(self) -> RoundResult:
        """Close the open round, and every next one whose expected members have all
        published already (a member may publish up to its staleness bound ahead of the open
        round); returns the last result (all of them are in :attr:`results`)."""
        result = self._close()
        while self.fresh() and self.complete():
            result = self._close()
        return result

    def _fence(self, rec: MixRecord) -> str:
        """Why a delta's claims cannot count (empty: they can): a partition another member has
        taken since, or records that do not start at the frontier (a member whose earlier
        delta was fenced, or that learned on from where a fenced one ended)."""
        for tp, (start, _) in (rec.claims or {}).items():
            owner = self.owners.get(tp)
            if owner is not None and owner[0] != rec.member:
                return (
                    f"its records of {tp} from offset {start} were taken over by {owner[0]!r} "
                    f"from offset {owner[1]} (a rebalance went on without {rec.member!r}); "
                    "they are learned again by the partitions' owners"
                )
            at = self.frontier.get(tp, 0)
            if start != at:
                return (
                    f"its records of {tp} start at offset {start}, not at the group's frontier "
                    f"{at}; they are learned again by the partitions' owners"
                )
        return ""

    def _every_from(self, stats: Mapping[str, float]) -> None:
        """Adaptive K's bounds from the base record's stats (none: K is fixed)."""
        try:
            lo, hi, target = int(stats["k_min"]), int(stats["k_max"]), float(stats["k_overhead"])
        except (KeyError, ValueError, OverflowError):
            return
        if 1 <= lo <= hi and 0.0 < target < 1.0:
            self.every_bounds, self.every = (lo, hi, target), lo

    def _hindsight_of(self, rec: MixRecord) -> None:
        """Fold a member's hindsight report of one of its merged rounds (once per round)."""
        st = rec.stats
        key = (int(st["h_round"]), rec.member)
        if key in self._hindsight:
            return
        self._hindsight.add(key)
        self.regret += st.get("h_loss", 0.0) - st.get("h_merged_loss", 0.0)
        self.regret_mistakes += int(st.get("h_mistakes", 0) - st.get("h_merged_mistakes", 0))
        self.regret_examples += int(st.get("h_labelled", 0))

    def _adopt(self, round_: int, state: State, examples: int) -> None:
        self.round, self.base, self.examples = round_, state, examples
        self.digest = learner_digest(state)
        self.digests[round_] = self.digest
        self._bases[round_] = state
        for old in [q for q in self._bases if q <= round_ - KEEP_BASES]:
            del self._bases[old]

    def _skip(self, rec: MixRecord, reason: str, detail: str) -> None:
        examples = rec.examples if rec.kind == "delta" else None
        self.skipped.append(Skipped(rec.round, rec.member, rec.kind, reason, examples, detail))
        self.skipped_examples += examples or 0

    def _close(self) -> RoundResult:
        t0 = time.perf_counter()
        assert self.base is not None
        r = self.round
        taken = sorted(k for k in self.pending if k[0] <= r)
        rounds: list[Merged] = []
        sent = [self.pending[k].sent for k in taken if k[0] == r]
        fenced = self._fenced & set(taken)  # set aside when they were read (reported then)
        self._fenced -= fenced
        for key in taken:
            rec = self.pending.pop(key)
            since = self._bases.get(rec.base_round)
            if key in fenced:
                continue
            if rec.state is None:
                self._skip(rec, "unmergeable", "a delta without a state")
            elif since is None:
                self.dropped.append(key)  # staler than KEEP_BASES: cannot be merged
                self._skip(
                    rec, "too_stale", f"learned from round {rec.base_round}'s base, not kept"
                )
            elif rec.state[0].get("core") is not None:  # else: learned nothing, ever
                item = self._switched(rec, since, r)
                if item is not None:
                    rounds.append(item)
        spoke = {m for (q, m) in taken if q == r}  # a fenced member is not late: it published
        fresh = tuple(m for (q, m) in taken if q == r and (q, m) not in fenced)
        stale = tuple((m, r - q) for (q, m) in taken if q < r and (q, m) not in fenced)
        late = tuple(sorted(self.members - spoke))
        self.members -= set(late)
        stats: dict[str, float] = {}
        rounds, state = self._merge_usable(rounds, stats)
        n = sum(rec.examples for rec, _, _ in rounds)
        state, bank = self._switch(state, r + 1)
        self._adopt(r + 1, state, self.examples + n)
        if self.every is not None and self.every_bounds is not None:
            fresh_stats = [rec.stats for rec, _, _ in rounds if rec.round == r]
            phase = self.trend.observe(fresh_stats)
            self.every = next_every(
                self.every, self.every_bounds, fresh_stats, phase, self.trend.rate
            )
        loss = sum(rec.stats.get("loss", 0.0) for rec, _, _ in rounds)
        mistakes = int(sum(rec.stats.get("mistakes", 0) for rec, _, _ in rounds))
        labelled = int(sum(rec.stats.get("labelled", 0) for rec, _, _ in rounds))
        self.loss += loss
        self.mistakes += mistakes
        self.labelled += labelled
        result = RoundResult(
            r, fresh, stale, late, n, self.digest, stats.get("delta_norm", 0.0),
            int(stats.get("active_before", 0)), int(stats.get("active_after", 0)),
            time.perf_counter() - t0, loss, mistakes, labelled,
            max(sent, default=0.0) - min(sent, default=0.0), bank, self.every,
        )  # fmt: skip
        self.results.append(result)
        return result

    def _switched(self, rec: MixRecord, since: State, r: int) -> Merged | None:
        """A delta ready to merge into round ``r``'s close: (record, state, the state it
        learned from unless that is round ``r``'s base: an older base when stale, or the
        member's previous delta, :attr:`MixRecord.ref`). A delta learned before a bank switch
        gets every switch made since (it and the state it learned from alike: its delta is then
        over the group's bank, new blocks at zero); None (skipped) if that fails."""
        assert rec.state is not None
        on = rec.base_round
        state, old = rec.state, since if rec.ref is None else rec.ref
        try:
            for q in sorted(q for q in self._switches if on < q <= r):
                state = switch_bank(state, self._switches[q])[0]
                old = switch_bank(old, self._switches[q])[0]
        except Exception as exc:
            self._skip(rec, "foreign_bank", f"the group's bank switch cannot apply: {exc!r}")
            return None
        return rec, state, None if on == r and rec.ref is None else old

    def _merge_usable(self, rounds: list[Merged], stats: dict[str, float]) -> tuple[list, State]:
        """The merge of the deltas (the base if none), and the deltas it holds. A delta the
        merge refuses is skipped (each is then tried alone against the base, so one bad record
        costs only its own examples), the others are merged: the same on every reader."""
        assert self.base is not None
        if not rounds:
            return rounds, self.base
        try:
            return rounds, self._merged(rounds, stats)
        except Exception:
            pass
        usable = []
        for item in rounds:
            try:
                self._merged([item], {})
            except ForeignDelta as exc:
                self._skip(item[0], "foreign_bank", str(exc))
            except Exception as exc:
                self._skip(item[0], "unmergeable", repr(exc))
            else:
                usable.append(item)
        if not usable:
            return usable, self.base
        try:
            return usable, self._merged(usable, stats)
        except Exception as exc:  # each merges alone, not together: none is merged
            for item in usable:
                self._skip(item[0], "unmergeable", f"merged with the others: {exc!r}")
            return [], self.base

    def _switch(
        self, state: State, round_: int
    ) -> tuple[State, tuple[tuple[str, ...], tuple[str, ...]] | None]:
        """Round ``round_``'s base: ``state`` with the pending bank proposal applied (a proposal
        that cannot be applied is skipped: the bank stays)."""
        rec, self.proposal = self.proposal, None
        if rec is None or rec.kernels is None:
            return state, None
        bank = canonical_bank(rec.kernels)
        try:
            switched, added, removed = switch_bank(state, bank)
        except Exception as exc:
            self._skip(rec, "bad_bank", f"cannot be applied: {exc!r}")
            return state, None
        if bank == bank_of(state) and not (added or removed):
            return state, None
        self._switches[round_] = bank
        self.bank_changes += 1
        return switched, (tuple(added), tuple(removed))

    def _merged(self, rounds: list[Merged], stats: dict[str, float]) -> State:
        """The merged learner state (:func:`merge_states`) of the deltas over the base."""
        assert self.base is not None
        parts = [(rec.member, rec.examples, state, old) for rec, state, old in rounds]
        return merge_states(self.base, parts, stats, self.dual)


#: One member's part of a merge: (name, examples, state, the older state it learned from, or
#: None for the merge's base).
Part = tuple[str, int, State, State | None]


def merge_states(
    base: State, parts: list[Part], stats: dict[str, float] | None = None, dual: str = "sum",
    rebase: bool = False,
) -> State:  # fmt: skip
    """The merged learner state: the base learner's with the merged core (on the group's
    bandwidths, :mod:`streammkl.core.mixing_bandwidth`) and pooled input statistics.

    ``rebase``: one member's progress moved onto a merged model (:func:`rebased`): no prox step
    of its own and no bandwidth decision (those are the group's, made by its merges)."""
    parts = sorted(parts, key=lambda p: (p[0], p[3] is None))
    cores = [(name, n, core_state(state), old and core_state(old)) for name, n, state, old in parts]
    core = core_state(base)
    model: OnlineMKL | None = _BASE_MODEL.of(base, core)
    assert model is not None
    aligned, states, olds, rows, keys = mixing_bandwidth.align(core, cores, model.kernels)
    members = [
        MemberRound(name, n, *state, old)
        for (name, n, _, _), state, old in zip(cores, states, olds, strict=True)
    ]
    saved = None
    flat = FlatLayout.of(model)
    if aligned is core and flat is not None and flat.settled:
        # a settled group's round: the merged arrays from the saved ones, no model built
        saved = merge_saved(*aligned, members, model, stats, dual=dual, prox=not rebase)
    shape: OnlineMKL = model
    if saved is None:
        model = model if aligned is core else None  # (not re-aligned)
        merged = merge(*aligned, members, stats, dual=dual, prox=not rebase, base_model=model)
        if rebase:
            mixing_bandwidth.keep(merged, rows, keys)
        else:
            mixing_bandwidth.decide(merged, rows, keys)
        saved, shape = merged.to_state(), merged
    core_meta, arrays = saved
    out = dict(base[0])
    out["core"] = core_meta
    out["features"] = list(core_meta["feature_keys"])
    # standardize: one input scale for the group
    if has_scaler(base[1]):
        learners = [(_stats(state), old and _stats(old)) for _, _, state, old in parts]
        arrays.update(pool_scalers(_stats(base), learners, out["features"]))
    if not rebase:  # the next round's base: its close merges onto this model, not a reload
        _BASE_MODEL.keep((out, arrays), shape)
    return out, arrays


class _LastBase:
    """The core models of the last bases merged onto, built once: a member merges onto each
    base twice (its rebase onto the merged model, then that model's close as the next base),
    and the model a close merged is the next close's base (:meth:`keep`: not saved and loaded
    again, 0.3-0.7 ms a round; the merge takes the base's arrays from its saved state either
    way, and from the model only its layout, kernels and configuration: a close that merged
    the saved arrays without building a model, :func:`~streammkl.core.mixing.merge_saved`,
    keeps its base's model for the merged state, which has the same layout). Kept by the
    identity of the state's core meta and arrays (states are never changed in
    place); a few of them, for readers of several logs in one process (tests, benchmarks)."""

    KEEP = 4

    def __init__(self) -> None:
        #: (core meta, arrays) -> the model; the pair is held so that its ids stay its own.
        self._models: dict[tuple[int, int], tuple[Any, Any, OnlineMKL]] = {}

    def of(self, base: State, core: tuple[dict[str, Any], dict[str, np.ndarray]]) -> OnlineMKL:
        key = (id(base[0].get("core")), id(base[1]))
        hit = self._models.get(key)
        if hit is None:
            hit = self._put(base, OnlineMKL.from_state(*core))
        return hit[2]

    def keep(self, state: State, model: OnlineMKL) -> None:
        """``model`` is the core model of ``state`` (the merge that made it; never changed
        after)."""
        self._put(state, model)

    def _put(self, state: State, model: OnlineMKL) -> tuple[Any, Any, OnlineMKL]:
        core = state[0].get("core")
        entry = self._models[(id(core), id(state[1]))] = (core, state[1], model)
        while len(self._models) > self.KEEP:
            del self._models[next(iter(self._models))]
        return entry


_BASE_MODEL = _LastBase()


def rebased(merged: State, local: State, since: State, examples: int) -> State:
    """A member's learner moved onto the group's merged model: ``merged + (local - since)``
    for every part of the state (weights or FTRL's dual, AdaGrad's sums, biases, averaged
    iterates, the round counts, support sets, warm-up inputs and input statistics), where
    ``since`` is the state the member published and ``examples`` what it learned after it. The
    member then holds the group's progress and its own unpublished progress, each once."""
    return merge_states(merged, [("", examples, local, since)], rebase=True)


#: A delta ready to merge: (record, its state, the older base it learned from when stale).
Merged = tuple[MixRecord, State, State | None]


#: Adaptive K's drift test (:func:`above`): a round's error rate is "above" a reference rate p
#: when it exceeds p + DRIFT_Z sqrt(p (1 - p) / n) + DRIFT_MARGIN on its n examples (the
#: binomial noise of n examples at rate p, and an absolute margin against the small rates
#: of a settled stream); "below" symmetrically. Chosen on the kernel-drift scenario only.
DRIFT_Z = 3.0
DRIFT_MARGIN = 0.02
#: Examples a member's round must hold before its own error rate can say "drift".
DRIFT_MIN_EXAMPLES = 100
#: Weight of the newest round in the group's running error rate (:class:`ErrorTrend`).
TREND_WEIGHT = 0.3
#: Adaptive K's accuracy bound on a stream that is not drifting: K <= MISTAKES_PER_ROUND / p
#: at the group's running error rate p (a member's round holds about that many mistakes, the
#: examples that move the model): the K that kept the merged model within a few tenths of a
#: point of one learner on the kernel-drift scenario (250 at its 10-25 % error phases) there,
#: and up to 10 times more on its 1-2 % phase. Chosen on the kernel-drift scenario only.
MISTAKES_PER_ROUND = 25.0

#: What the merged rounds say of the stream (:meth:`ErrorTrend.observe`): a drift (the error
#: rate jumped, or a member saw it jump within its round), the model still learning (the rate
#: falls), or settled.
PHASES = ("drift", "learning", "settled")


def above(rate: float, mistakes: float, n: float, sign: float = 1.0) -> bool:
    """Whether ``mistakes`` in ``n`` examples is significantly above the error rate ``rate``
    (``sign=-1``: below), by :data:`DRIFT_Z` standard errors and :data:`DRIFT_MARGIN`."""
    if n <= 0:
        return False
    p = min(max(rate, 0.0), 1.0)
    bar = DRIFT_Z * math.sqrt(p * (1.0 - p) / n) + DRIFT_MARGIN
    return sign * (mistakes / n - p) > bar


@dataclass
class ErrorTrend:
    """The group's prequential error rate by merged round (a running mean weighted
    :data:`TREND_WEIGHT` toward the newest round): adaptive K's signal of a drift. Folded from
    the log's numbers alone, so every reader has the same."""

    rate: float | None = None

    def observe(self, stats: Iterable[Mapping[str, float]]) -> str:
        """The phase (:data:`PHASES`) of a closing round from its fresh deltas' prequential
        sums and drift flags; the running rate then takes the round in."""
        stats = list(stats)
        mistakes = sum(float(st.get("mistakes", 0.0)) for st in stats)
        n = sum(float(st.get("labelled", 0.0)) for st in stats)
        flagged = any(st.get("drift", 0.0) > 0 for st in stats)
        if n <= 0 or not math.isfinite(mistakes):
            return "drift" if flagged else "settled"
        rate = mistakes / n
        if self.rate is None:
            self.rate = rate
            return "drift" if flagged else "learning"
        phase = "settled"
        if flagged or above(self.rate, mistakes, n):
            phase = "drift"
        elif above(self.rate, mistakes, n, sign=-1.0):
            phase = "learning"
        self.rate += TREND_WEIGHT * (rate - self.rate)
        return phase


def next_every(
    every: int,
    bounds: tuple[int, int, float],
    stats: Iterable[Mapping[str, float]],
    phase: str = "settled",
    rate: float | None = None,
) -> int:
    """K of the next round, from the fresh deltas' reports of their round (``round_seconds``:
    the member's wall time from its previous publish to this one; ``round_cost``: the part of
    it spent on the group, waiting included, its learning pipeline's drain not: that is the
    round's own learning). A round of K records costs c + K l (c: the group's part, l: the
    learning time of one record), so the cost stays below the fraction f of the whole at
    K = c (1 - f) / (f l); the group takes the largest K its members ask for (the slowest
    member's overhead is the group's), at most twice and at least half the current K, within
    the bounds (min, max, f).

    The accuracy bounds it from above (``phase``, :meth:`ErrorTrend.observe`): a round's
    members learn from a base up to 2 (N - 1) K examples old, which costs most while the model
    moves. After a drift K is the minimum at once; while the error rate still falls (the
    model learning the new concept) K does not grow; only a settled stream lets the cost
    raise it, and never above :data:`MISTAKES_PER_ROUND` / ``rate`` (the group's running
    error rate: the model moves with its mistakes). The same on every reader: only the log's
    numbers are used."""
    lo, hi, target = bounds
    if phase == "drift":
        return lo
    wanted = []
    for st in stats:
        seconds, cost = st.get("round_seconds", 0.0), st.get("round_cost", 0.0)
        examples = st.get("round_examples", 0.0)
        learning = seconds - cost
        if examples > 0 and learning > 0 and 0 <= cost and math.isfinite(seconds):
            wanted.append(cost * (1.0 - target) / (target * learning / examples))
    cap = math.inf if rate is None else MISTAKES_PER_ROUND / max(rate, 1e-6)
    if not wanted:
        return int(min(max(min(every, cap), lo), hi))
    k = min(max(max(wanted), every / 2), every * (2.0 if phase == "settled" else 1.0), cap)
    return int(min(max(round(k), lo), hi))


def _unusable_base(rec: MixRecord) -> str:
    """Why a ``base`` record cannot be a group's base ("" if it can)."""
    if rec.state is None:
        return "a base without a state"
    try:
        MKLClassifier.from_state(*rec.state)
        check_base_state(rec.state)
    except Exception as exc:
        return repr(exc)
    return ""


def _unusable_bank(rec: MixRecord) -> str:
    """Why a ``bank`` record cannot be a bank ("" if it can be built; whether it applies to
    the merged model is known at the close)."""
    if not rec.kernels:
        return "no kernels"
    try:
        names = [kernels_mod.from_spec(k).name for k in rec.kernels]
    except Exception as exc:
        return repr(exc)
    if len(set(names)) != len(names):
        return f"two kernels share a name in {names}"
    return ""


def _stats(state: State) -> tuple[list[str], Mapping[str, np.ndarray]]:
    """(input names, arrays) of a learner state, for :func:`pool_scalers` (which reads them)."""
    return list(state[0].get("features") or []), state[1]
