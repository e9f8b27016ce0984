"""The state of a mixing group, folded from its mix topic (pure: no I/O, no clocks).

Every member (and any reader, e.g. the scale-out benchmark) applies the same records in the same
order (the mix topic has one partition) and so computes the same rounds, bases, digests and
offsets:

- the first ``base`` record is round 0's base; later ones are ignored;
- a ``delta`` for round q is kept (the first per (q, member): replays change nothing) until the
  next ``close``; it moves the *frontier* (the next offset of every input partition the group
  has learned up to, its maximum over all deltas), so the next owner of a partition starts
  where its previous owner's last published delta ended, and nothing is learned twice;
- the open round r closes as soon as every expected member has a delta for it, or at its first
  ``close`` record (written by a member that waited ``round_timeout_seconds``); closing merges
  every kept delta: those of round r (fresh) and
  those of earlier rounds that came after their round's close (stale, merged from their own
  base: bounded staleness) — :func:`streammkl.core.mixing.merge`, the example-weighted delta
  merge followed by the prox — and opens round r + 1;
- the members a round waits for are those that said ``hello`` or published a delta, minus those
  that said ``bye`` or missed a close (a late member is back as soon as it publishes);
- the group's prequential view: every merged delta's ``stats`` (the log-loss, mistakes and
  labels of the predictions its member made on the delta's examples) add up, exactly once like
  the examples, to ``loss`` / ``mistakes`` / ``labelled``; and the **hindsight** view: after
  adopting a merged model that holds its delta, a member scores that round's examples again
  with it and publishes both sums with its next delta (or its ``bye``): ``regret`` is
  Σ (online loss − merged model's loss) over the rounds reported so (each (round, member) once),
  on ``regret_examples`` examples (docs/scale-out.md, "The theory").
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streammkl.core import mixing_bandwidth
from streammkl.core.mixing import MemberRound, check_mixable, merge
from streammkl.core.model import OnlineMKL
from streammkl.core.state import state_digest
from streammkl.daemon.group_topic import MixRecord, State
from streammkl.river.pooling import pool_scalers, split_scaler

#: Bases kept for stale deltas; a delta staler than this cannot be merged (it is reported).
KEEP_BASES = 32


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


def check_group_learner(state: State) -> None:
    """Raise a clear ValueError if a learner state cannot be the base of a group."""
    meta = state[0]
    if meta.get("format") is None or "core" not in meta:
        raise ValueError("mixing groups need a streammkl river learner (MKLClassifier)")
    if meta["core"] is not None:
        check_mixable(OnlineMKL.from_state(*core_state(state)))


@dataclass
class GroupLog:
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
    _hindsight: set[tuple[int, str]] = field(default_factory=set)
    _bases: dict[int, State] = field(default_factory=dict)
    _seen: set[str] = field(default_factory=set)

    def fresh(self) -> set[str]:
        """Members with a delta for the open round."""
        return {m for (q, m) in self.pending if q == self.round}

    def complete(self) -> bool:
        """Whether every expected member has a delta for the open round."""
        return self.round >= 0 and self.members <= self.fresh()

    def has_delta(self, round_: int, member: str) -> bool:
        return f"delta/{round_:010d}/{member}" in self._seen

    def apply(self, rec: MixRecord) -> RoundResult | None:
        """Apply one record; returns the round it closed, if any."""
        if rec.kind in ("delta", "base") and rec.key in self._seen:
            self.duplicates += 1
            return None
        if rec.kind in ("delta", "base"):
            self._seen.add(rec.key)
        if "h_round" in rec.stats:
            self._hindsight_of(rec)
        if rec.kind == "base":
            if self.base is None and rec.state is not None:
                self._adopt(0, rec.state, examples=rec.examples)
        elif rec.kind == "hello":
            self.members.add(rec.member)
        elif rec.kind == "bye":
            self.members.discard(rec.member)
            if self.fresh() and self.complete():
                return self._close()
        elif rec.kind == "delta":
            self.members.add(rec.member)
            want = self.digests.get(rec.round)
            if rec.base_digest and want is not None and rec.base_digest != want:
                self.mismatches.append((rec.round, rec.member))
            for tp, offset in rec.offsets.items():
                self.frontier[tp] = max(self.frontier.get(tp, 0), offset)
            self.pending[(rec.round, rec.member)] = rec
            if rec.round == self.round and self.complete():
                return self._close()
        elif rec.kind == "close" and rec.round == self.round and self.base is not None:
            return self._close()
        return None

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

    def _close(self) -> RoundResult:
        t0 = time.perf_counter()
        assert self.base is not None
        r = self.round
        taken = sorted(k for k in self.pending if k[0] <= r)
        rounds: list[tuple[MixRecord, State | None]] = []
        sent = [self.pending[k].sent for k in taken if k[0] == r]
        for key in taken:
            rec = self.pending.pop(key)
            since = self._bases.get(rec.round)
            if rec.state is None or since is None:
                self.dropped.append(key)  # staler than KEEP_BASES: cannot be merged
                continue
            if rec.state[0].get("core") is None:  # learned nothing, ever
                continue
            rounds.append((rec, None if rec.round == r else since))
        fresh = tuple(m for (q, m) in taken if q == r)
        stale = tuple((m, r - q) for (q, m) in taken if q < r)
        late = tuple(sorted(self.members - set(fresh)))
        self.members -= set(late)
        stats: dict[str, float] = {}
        n = sum(rec.examples for rec, _ in rounds)
        state = self.base if not rounds else self._merged(rounds, stats)
        self._adopt(r + 1, state, self.examples + n)
        loss = sum(rec.stats.get("loss", 0.0) for rec, _ in rounds)
        mistakes = int(sum(rec.stats.get("mistakes", 0) for rec, _ in rounds))
        labelled = int(sum(rec.stats.get("labelled", 0) for rec, _ in rounds))
        self.loss += loss
        self.mistakes += mistakes
        self.labelled += labelled
        result = RoundResult(
            r, fresh, stale, late, n, self.digest, stats.get("delta_norm", 0.0),
            int(stats.get("active_before", 0)), int(stats.get("active_after", 0)),
            time.perf_counter() - t0, loss, mistakes, labelled,
            max(sent, default=0.0) - min(sent, default=0.0),
        )  # fmt: skip
        self.results.append(result)
        return result

    def _merged(
        self, rounds: list[tuple[MixRecord, State | None]], stats: dict[str, float]
    ) -> State:
        """The merged learner state: the base learner's with the merged core (on the group's
        bandwidths, :mod:`streammkl.core.mixing_bandwidth`) and pooled input statistics."""
        assert self.base is not None
        rounds = sorted(rounds, key=lambda p: (p[0].member, p[1] is None))
        parts = [
            (rec.member, rec.examples, core_state(rec.state), old and core_state(old))
            for rec, old in rounds
            if rec.state is not None
        ]
        base, states, olds, rows, keys = mixing_bandwidth.align(core_state(self.base), parts)
        members = [
            MemberRound(name, n, *state, old)
            for (name, n, _, _), state, old in zip(parts, states, olds, strict=True)
        ]
        merged = merge(*base, members, stats, dual=self.dual)
        mixing_bandwidth.decide(merged, rows, keys)
        core_meta, arrays = merged.to_state()
        out = dict(self.base[0])
        out["core"] = core_meta
        out["features"] = list(merged.feature_keys)
        if split_scaler(self.base[1])[1]:  # standardize: one input scale for the group
            learners = [
                (_stats(rec.state), old and _stats(old))
                for rec, old in rounds
                if rec.state is not None
            ]
            arrays.update(pool_scalers(_stats(self.base), learners, merged.feature_keys))
        return out, arrays


def _stats(state: State) -> tuple[list[str], dict[str, np.ndarray]]:
    """(input names, arrays) of a learner state, for :func:`pool_scalers`."""
    return list(state[0].get("features") or []), dict(state[1])
