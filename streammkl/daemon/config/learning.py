"""The ``[learner]``, ``[reload]``, ``[monitor]`` and ``[mixing]`` sections: what learns, how
its kernels may change at run time, what watches it, and how a group trains one model."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from streammkl.daemon.config.section import Section


class LearnerSpec(Section):
    """The learner: task and every component, by name (resolved in :mod:`streammkl.core`).

    A component is a name (``"Hinge"``) or a table ``{type = "RBF", gamma = 0.5}``;
    ``kernels = None`` keeps the learner's default bank. ``factory = "module:callable"`` builds
    any other learner honouring :class:`streammkl.daemon.learning.learner.Learner` (called with
    this spec).
    """

    task: Literal["classification", "regression", "sequence", "parsing"] = "classification"
    factory: str | None = None
    kernels: tuple[str | dict[str, Any], ...] | None = None
    loss: str | dict[str, Any] | None = None
    regularizer: str | dict[str, Any] | None = None
    schedule: str | dict[str, Any] | None = None
    radius: float | None = Field(default=None, gt=0)
    budget: int | None = Field(default=None, ge=1)
    #: What a full support set does (streammkl.core.budget; None: the learner's default, merge).
    budget_policy: Literal["merge", "project", "smallest", "oldest"] | None = None
    #: An unregularized bias per output (None: the learner's default, True). With a bias the
    #: iterates are not confined to the radius ball, so the monitor's Prop. 3 bounds are +Inf.
    fit_intercept: bool | None = None
    #: Standardise every input online (running mean and variance, saved in the checkpoint with
    #: the model): the daemon's counterpart of ``StandardScaler() | MKLClassifier()``. The
    #: default kernels are made for standardised inputs; turn it off only for inputs that are
    #: already scaled. Classification and regression only (ignored by structured tasks).
    #: None (the default): on. In a mixing group the members' statistics are pooled at every
    #: merge (streammkl.river.pooling), so the group keeps one input scale.
    standardize: bool | None = None
    #: The "accurate" presets (issue 27): W wraps the learner the other settings build in a
    #: :class:`streammkl.river.MemoryClassifier` (classification: a Parzen vote over its last W
    #: core inputs; the library's measures: +0.6 to +2.5 points of accuracy) or a
    #: :class:`streammkl.river.MemoryRegressor` (regression, W >= 2: its prediction corrected by
    #: the kernel mean of its residuals on its last W raw inputs; the daemon's MAE -20 % on
    #: Friedman, -7 % on TrumpApproval, +0.4 % on ChickWeights), mixed with it by a fixed-share
    #: Hedge. The records then go one by one, without compiled runs and without the regret/drift
    #: monitor (benchmarks/results/daemon_memory.md: 2.3-2.7 times the default classifier's
    #: CPU per record, about 5 times the default regressor's).
    #: None (the default): off. Not for the structured tasks, not with ``factory``, not in a
    #: mixing group.
    memory_window: int | None = Field(default=None, ge=1)
    seed: int = 0
    params: dict[str, Any] = Field(default_factory=dict)  # free-form, for custom factories

    @field_validator("kernels")
    @classmethod
    def _bank_nonempty(cls, v: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
        if v is not None and not v:
            raise ValueError(
                "at least one kernel is required (leave kernels unset for the default bank)"
            )
        return v

    @model_validator(mode="after")
    def _memory_wraps_the_built_learner(self) -> LearnerSpec:
        if self.memory_window is None:
            return self
        if self.factory is not None:
            raise ValueError(
                "memory_window wraps the MKLClassifier or MKLRegressor the [learner] settings "
                "build; a learner.factory builds its own learner: unset one of them"
            )
        if self.task not in ("classification", "regression"):
            raise ValueError(
                "memory_window (a MemoryClassifier or MemoryRegressor: a vote of the last "
                "examples) is for classification and regression only, not learner.task = "
                f"{self.task!r}"
            )
        return self


class ReloadSettings(Section):
    """Guards on runtime kernel changes (SIGHUP, or settings edited while stopped)."""

    #: A new kernel list that would drop more than this fraction of the learned blocks (those
    #: with a non-zero norm) is refused ...
    max_dropped_fraction: float = Field(default=0.5, ge=0, le=1)
    #: ... as is one with a kernel on features never seen -- unless this is true (set it for
    #: the one reload that must go through, then back).
    force: bool = False


class MixingSettings(Section):
    """Scale-out (docs/scale-out.md): the members of a consumer group train ONE model by
    iterative parameter mixing through a compacted ``topic``. Off: each member learns its own
    model from its partitions."""

    enabled: bool = False
    topic: str = "streammkl.mix"
    #: K: a member ends a round after learning this many examples (and at every rebalance and
    #: clean shutdown); the others end theirs when they see it. Small K: fresher models, more
    #: merges (each costs a publish, a merge and a rebase); large K: staler members (pipelined
    #: rounds: a gradient misses at most 2 (N - 1) K of the others' examples; 250 gives the
    #: staleness the barrier protocol had at 500, docs/scale-out.md).
    every_records: int = Field(default=250, ge=1)
    #: Adaptive K: the group raises K up to this (halves it down to ``every_records``) so that a
    #: round's cost on the group stays below ``round_overhead`` of its learning time, measured
    #: by the members and decided by the group's log at every close (every member applies the
    #: same K at the same round), bounded by the accuracy: back to ``every_records`` at a drift,
    #: not growing while the error rate falls, at most 25 / the error rate (docs/scale-out.md,
    #: "Adaptive K bounded by the accuracy"). None: K stays ``every_records``. The founding member's
    #: ``every_records``, ``max_every_records`` and ``round_overhead`` are the group's.
    max_every_records: int | None = Field(default=None, ge=1)
    #: The staleness bound s: a member publishes its next round's delta (measured from its own
    #: previous delta) and learns on while the rounds before it close, and waits only when it
    #: is s rounds ahead of the last merged round it applied (stale-synchronous rounds,
    #: docs/scale-out.md). 1: a member waits for its last delta's round before its next (the
    #: default, chosen on the kernel-drift stream: s = 2 and 4 lost accuracy after every drift
    #: and did not lower the time blocked on a loaded 2-core machine, docs/scale-out.md).
    staleness: int = Field(default=1, ge=1, le=16)
    #: At s = 1, the records a member learns after a publish before it takes that round's
    #: merged model: with more, it waits for the round to close and rebases first (the
    #: batches are cut there). The others' examples of a round then reach a member's model
    #: at most this many records of its own late, whatever the broker's and the machine's
    #: timing (without the bound: up to K on a loaded machine, fewer on a quiet one, and the
    #: accuracy after a drift followed the load; docs/scale-out.md, "Staleness in records,
    #: not in time"). None (or K and more): the bound s = 1 alone. 60: chosen in process on
    #: kernel-drift with the loaded machine's timing (5 seeds: merged - single -0.41 point
    #: without the bound, -0.17 at 125, -0.05 at 60; a quiet machine's +0.01).
    ahead_records: int | None = Field(default=60, ge=0)
    #: The fraction of a round's learning time its cost on the group (publishing, folding the
    #: log, rebasing, waiting) may take, with adaptive K.
    round_overhead: float = Field(default=0.03, gt=0, lt=1)
    #: This member's name in the group, stable across restarts (default: ``kafka.client_id``
    #: and the host name).
    member: str | None = Field(default=None, min_length=1, max_length=200)
    #: How long a member that ended its round waits for the others before the round is closed
    #: without them (they are named in the log and the metrics, and join the next round).
    round_timeout_seconds: float = Field(default=30.0, gt=0)
    #: How FTRL's dual increments (and AdaGrad's sums) merge: added ("sum": the merged model took
    #: every example's gradient) or example-weighted averaged ("mean": steadier for long rounds).
    dual: Literal["sum", "mean"] = "sum"


class MonitorSettings(Section):
    """Regret, bound, drift detection and history (:class:`streammkl.monitor.Monitor`).

    Only for the streammkl learners (the monitor needs their core model); off for others.
    """

    enabled: bool = True
    #: W: windowed regret on the last W examples (0: no windowed regret).
    window: int = Field(default=2000, ge=0)
    #: K: the windowed regret is re-estimated every K examples, on a background thread.
    every: int = Field(default=500, ge=1)
    comparator: Literal["epochs", "exact", "auto"] = "epochs"
    #: At most this many passes over the window per epoch-comparator fit (each warm-started
    #: from the previous window's fit, so the fits go on converging across the overlapping
    #: windows): this bounds one fit's work to ``comparator_epochs * W`` rounds. Measured with
    #: W = 2000 (CPU of one fit, median): the default bank 0.14 s (0.28 s uncapped), budgeted
    #: exact kernels (the former deploy settings, budget 500) 0.68 s (6.3-6.8 s at the former
    #: cap of 100, which made their estimates ~2 minutes apart); the comparator's objective
    #: within 0.1-1.3 % (default bank) and 0.7-14 % (budgeted kernels) of 100 epochs', so the
    #: regret estimate (a lower bound) is a little lower.
    comparator_epochs: int = Field(default=10, ge=1)
    #: At most this fraction of the time fitting comparators (unthrottled, the worker would fit
    #: back to back and take a whole core); an epoch comparator's fit is paced every 256 rounds
    #: of its epochs (and before each objective), windows arriving meanwhile are skipped. A new
    #: estimate then comes every K examples or every ``fit CPU / duty`` seconds, whichever is
    #: later: ~3 s for the default bank at 0.05.
    #: The duty holds however far the estimate lags; only while the learning loop waits for a
    #: fit (``catch_up_share`` below) does the fit skip its pauses, on the CPU the loop gives up.
    comparator_duty: float = Field(default=0.05, gt=0, le=1)
    #: The comparator thread's nice value (Linux): it fits on CPU time the loop, the learner
    #: and the broker leave; 0 = the process's priority.
    comparator_nice: int = Field(default=19, ge=0, le=19)
    #: The windowed regret's schedule: an estimate whose window ended more than this many
    #: examples ago, or a window that has waited more than this many seconds for its fit, is
    #: *stale* (``streammkl_window_regret_stale`` says so). A backlog (the stream faster than
    #: the duty allows) is kept on schedule by the loop's waits below, each fit bounded by
    #: ``comparator_epochs``; a loaded machine slows the refreshes, never stops them.
    #: (30,000: at 1,000 records/s the seconds decide; in a backlog, where the default
    #: learner takes ~50,000 records/s, the loop waits for one bounded fit per ~18,000
    #: examples; at 10,000 a backlog was learned 8 times slower, measured.)
    refresh_examples: int = Field(default=30_000, ge=1)
    refresh_seconds: float = Field(default=15.0, gt=0)
    #: A stream faster than the comparator (a backlog: 30,000 examples can take a second)
    #: outruns any duty: when the estimate lags 60 % of ``refresh_examples`` and a fit is
    #: under way, the learning loop waits for it (hurried) until a fresh estimate is
    #: published, at most ``catch_up_seconds`` at a time and at most ``catch_up_share`` of its
    #: wall time (a token bucket). A fit's work is bounded by ``comparator_epochs``. The
    #: default share, 0.1, keeps a backlog at ~90 % of its speed, so the estimate may still
    #: go stale in one (``streammkl_window_regret_stale`` says so); 1: the loop waits as long
    #: as the schedule needs (measured: never stale, a backlog learned 2-3 times slower);
    #: 0: never waits.
    catch_up_seconds: float = Field(default=4.0, ge=0)
    catch_up_share: float = Field(default=0.1, ge=0, le=1)
    #: One single-kernel shadow learner per kernel (regret against the best single kernel).
    shadows: bool = False
    #: Drift detector on the prequential loss; a detected rise restarts the learning-rate schedule.
    detector: Literal["adwin", "page-hinkley", "none"] = "adwin"
    restart_on_drift: bool = True
    #: B: a detected rise restarts the schedule at the next multiple of B examples (not right
    #: after the detecting example), so runs of up to B rounds go through one compiled loop and
    #: the model does not depend on how the stream is cut into batches; β is sampled at
    #: multiples of B too. 1: restart right after the detection (then one round per record).
    stride: int = Field(default=50, ge=1, le=10_000)
    #: β movement over the last this-many examples (at least ``stride``).
    beta_lag: int = Field(default=1000, ge=1)
    #: The detector's inputs since its last detection are checkpointed (so a restart continues
    #: with exactly its state); after this many without a detection it starts afresh.
    detector_memory: int = Field(default=50_000, ge=100)
    #: One history row (``history.jsonl`` beside the checkpoints) every this-many examples ...
    history_every: int = Field(default=100, ge=1)
    #: ... and at most this many rows: beyond, every other row is dropped (the stride doubles).
    history_rows: int = Field(default=5_000, ge=10)

    @model_validator(mode="after")
    def _every_within_window(self) -> MonitorSettings:
        if self.window == 1:
            raise ValueError("window must be 0 (off) or at least 2")
        if self.window and self.every > self.window:
            raise ValueError(f"every ({self.every}) must not exceed window ({self.window})")
        if self.stride > self.beta_lag:
            raise ValueError(f"stride ({self.stride}) must not exceed beta_lag ({self.beta_lag})")
        return self
