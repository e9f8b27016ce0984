"""A mixing group's metrics (:mod:`streammkl.daemon.mixing.member`): the rounds, their merges and
the merged model's prequential and hindsight views. A daemon exports them only with mixing on
(``mixing.enabled``); without, its ``/metrics`` holds none (the dashboard's mixing panels are
empty, the mixing alerts silent)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from streammkl.daemon.mixing.log import SKIP_REASONS, MixLog, RoundResult, Skipped

#: The merged model's prequential and hindsight views, folded from the mix log (the same on
#: every member): MixLog attribute -> (metric, help).
GROUP_VIEWS = {
    "loss": (
        "streammkl_mix_loss_sum",
        "Sum of the log-losses of the group's predictions on the merged examples",
    ),
    "mistakes": ("streammkl_mix_mistakes", "Wrong predictions of the group on the merged examples"),
    "labelled": ("streammkl_mix_labelled", "Labelled examples in the merged rounds"),
    "regret": (
        "streammkl_mix_regret",
        "Sum over the reported rounds of (online log-loss - log-loss of the round's merged model "
        "on the same examples)",
    ),
    "regret_mistakes": (
        "streammkl_mix_regret_mistakes",
        "Sum over the reported rounds of (online mistakes - the round's merged model's)",
    ),
    "regret_examples": ("streammkl_mix_regret_examples", "Examples the regret sums are over"),
}


#: What a member's time on the group is spent on (``streammkl_mix_blocked_seconds_total``):
#: waiting for a round to close, draining the learner thread before reading or replacing the
#: model, publishing a delta, folding the log (decoding records, merging rounds) and rebasing.
BLOCKED_PARTS = ("wait", "drain", "publish", "fold", "rebase")


class MixMetrics:
    """A mixing group's metrics (:mod:`streammkl.daemon.mixing.member`), on ``registry`` (the
    daemon's own with mixing on)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.round = Gauge("streammkl_mix_round", "The open mixing round", registry=r)
        self.members = Gauge(
            "streammkl_mix_members", "Members the open round waits for", registry=r
        )
        self.rounds = Counter("streammkl_mix_rounds", "Mixing rounds merged", registry=r)
        self.late = Counter(
            "streammkl_mix_late_members", "Members a round closed without (timeout)", registry=r
        )
        self.staleness = Gauge(
            "streammkl_mix_staleness_rounds",
            "Largest staleness (rounds) of a delta in the last merge",
            registry=r,
        )
        self.delta_norm = Gauge(
            "streammkl_mix_delta_norm",
            "Norm of the example-weighted mean change of the last merge (before the prox)",
            registry=r,
        )
        self.merge_seconds = Histogram(
            "streammkl_mix_merge_seconds", "Time to merge one round",
            buckets=(1e-3, 5e-3, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0), registry=r,
        )  # fmt: skip
        self.wait_seconds = Histogram(
            "streammkl_mix_wait_seconds", "Time from a member's publish to its round's close",
            buckets=(0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0), registry=r,
        )  # fmt: skip
        self.active = Gauge(
            "streammkl_mix_active_blocks",
            "Blocks with a non-zero norm in the last merge, before and after the prox",
            ["stage"],
            registry=r,
        )
        for stage in ("before_prox", "after_prox"):
            self.active.labels(stage)
        self.examples = Gauge(
            "streammkl_mix_examples", "Examples in the merged model (all members)", registry=r
        )
        self.views = {
            attr: Gauge(name, doc, registry=r) for attr, (name, doc) in GROUP_VIEWS.items()
        }
        self.skips = Counter(
            "streammkl_mix_deltas_skipped",
            "Records of the mix topic skipped by this reader (deltas and others), by reason",
            ["reason"],
            registry=r,
        )
        for reason in SKIP_REASONS:
            self.skips.labels(reason)
        self.skipped_examples = Counter(
            "streammkl_mix_skipped_examples",
            "Examples of skipped deltas (learned by a member, not in the merged model)",
            registry=r,
        )
        self.fenced = Counter(
            "streammkl_mix_deltas_fenced",
            "Deltas set aside because their records' partitions had been taken by another member "
            "(a rebalance went on without their member): their records are learned again by the "
            "partitions' owners, so no example is lost or counted twice; only work is repeated",
            registry=r,
        )
        self.fenced_examples = Counter(
            "streammkl_mix_fenced_examples",
            "Examples of fenced deltas (learned again by the partitions' owners)",
            registry=r,
        )
        self.blocked = Counter(
            "streammkl_mix_blocked_seconds",
            "Seconds the loop spent on the group, by part: waiting for a round to close, "
            "draining the learner before reading or replacing the model, publishing, folding "
            "the mix log (merges included) and rebasing onto a merged model",
            ["part"],
            registry=r,
        )
        for part in BLOCKED_PARTS:
            self.blocked.labels(part)
        self.bank_changes = Counter(
            "streammkl_mix_bank_changes",
            "Switches of the group's kernel bank (at a round boundary, on every member)",
            registry=r,
        )

    def totals(self, log: MixLog) -> None:
        """The group's prequential and hindsight sums (``log``: a
        :class:`streammkl.daemon.mixing.log.MixLog`)."""
        for attr, gauge in self.views.items():
            gauge.set(getattr(log, attr))

    def skipped(self, skip: Skipped) -> None:
        """A record of the log was skipped (``skip``: a
        :class:`streammkl.daemon.mixing.log.Skipped`)."""
        self.skips.labels(skip.reason).inc()
        self.skipped_examples.inc(skip.examples or 0)

    def fenced_delta(self, fence: Skipped) -> None:
        """A delta of the log was fenced (``fence``: a
        :class:`streammkl.daemon.mixing.log.Skipped` of reason ``fenced``)."""
        self.fenced.inc()
        self.fenced_examples.inc(fence.examples or 0)

    def merged(self, res: RoundResult, members: int) -> None:
        """A round closed (``res``: a :class:`streammkl.daemon.mixing.log.RoundResult`)."""
        self.rounds.inc()
        self.round.set(res.round + 1)
        self.members.set(members)
        self.late.inc(len(res.late))
        self.staleness.set(max((s for _, s in res.stale), default=0))
        self.delta_norm.set(res.delta_norm)
        self.merge_seconds.observe(res.seconds)
        self.active.labels("before_prox").set(res.active_before)
        self.active.labels("after_prox").set(res.active_after)
