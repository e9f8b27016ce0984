"""Daemon settings: a TOML file, overridden by ``STREAMMKL_*`` variables, overridden by flags.

The result is one frozen :class:`Settings`, validated at start; every error names the field and
where its value came from. Environment variables spell the path with ``__``:
``STREAMMKL_KAFKA__BOOTSTRAP_SERVERS=host:9092``, ``STREAMMKL_LEARNER__BUDGET=500``; lists are
comma-separated or JSON (``STREAMMKL_RECORDS__CLASSES='["a","b"]'``). ``STREAMMKL_CONFIG`` names
the file when ``--config`` is not given.

Example file::

    [kafka]
    bootstrap_servers = "127.0.0.1:9092"
    topics = ["streammkl.examples"]
    group_id = "streammkl"

    [checkpoint]
    dir = "/var/lib/streammkl"
    every_records = 10000

    [learner]
    task = "classification"
    kernels = [{type = "Linear"}, {type = "RBF", gamma = 0.5}, {type = "Polynomial", degree = 2}]
    regularizer = {type = "SquaredGroupLasso", lam = 0.001}
    schedule = {type = "InvSqrt", eta0 = 1.0}
    budget = 500
"""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from streammkl import wire
from streammkl.daemon.kafka_security import SECRET_FIELDS, KafkaSecurity

ENV_PREFIX = "STREAMMKL_"


class ConfigError(ValueError):
    """Invalid settings; the message names each offending field and its source."""


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _split(value: Any) -> Any:
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


class KafkaSettings(KafkaSecurity):
    """Broker, topics and consumer-group settings (docs/daemon.md on the broker explains the
    timeouts), and TLS / SASL (:class:`~streammkl.daemon.kafka_security.KafkaSecurity`)."""

    bootstrap_servers: str = "127.0.0.1:9092"
    topics: tuple[str, ...] = ("streammkl.examples",)
    group_id: str = "streammkl"
    #: "group": consumer-group membership (scale-out, a model per member); "all": this process
    #: assigns itself every partition (one model over the whole stream, no group join delay).
    assignment: Literal["group", "all"] = "group"
    #: Create the predictions and dead-letter topics at start if they are missing.
    create_topics: bool = True
    client_id: str = "streammkl"
    predictions_topic: str | None = "streammkl.predictions"
    dead_letter_topic: str = "streammkl.dead-letters"
    #: A dead letter carries at most this many bytes of its record (a longer one is cut, with
    #: headers giving the full size and sha256): an undeliverable dead letter would be retried
    #: forever. Below Kafka's default message.max.bytes (1,048,588) with room for the headers.
    dead_letter_max_bytes: int = Field(default=900_000, ge=1_024)
    #: Real Kafka rejects sessions under 6 s by default; tests against Tansu use ~2000/500.
    session_timeout_ms: int = Field(default=10_000, ge=500)
    heartbeat_interval_ms: int = Field(default=3_000, ge=100)
    max_poll_interval_ms: int = Field(default=300_000, ge=1_000)
    max_poll_records: int = Field(default=2_000, ge=1)
    poll_timeout_ms: int = Field(default=100, ge=0)
    request_timeout_ms: int = Field(default=30_000, ge=1_000)
    #: How long one connection attempt to the bootstrap servers may block (retried forever).
    bootstrap_timeout_ms: int = Field(default=5_000, ge=100)
    #: How long to wait for a caught-up partition before merging the others without it
    #: (Kafka Streams' ``max.task.idle.ms``; 0 = never wait for data not yet produced).
    merge_idle_ms: int = Field(default=0, ge=0)
    #: Bound on records fetched ahead of processing, per partition (the partition is paused) ...
    max_buffered_per_partition: int = Field(default=10_000, ge=1)
    #: ... and on their bytes (10,000 records of 1 MiB would be 10 GB).
    max_buffered_bytes_per_partition: int = Field(default=64 << 20, ge=1 << 16)
    #: The input consumer: librdkafka (confluent-kafka; fetching and parsing in C threads,
    #: ~1 us of the loop's time per record) or kafka-python (pure Python, 11-17 us per record).
    consumer_client: Literal["librdkafka", "kafka-python"] = "librdkafka"
    #: The output producer: librdkafka (confluent-kafka; batching and retries in C threads,
    #: ~1.8 us of the loop's time per message) or kafka-python (~30 us per message).
    producer_client: Literal["librdkafka", "kafka-python"] = "librdkafka"
    #: The producer waits up to this long to fill a batch of outputs (latency vs. CPU per record).
    producer_linger_ms: int = Field(default=20, ge=0)
    #: The producer's batch size in bytes (kafka-python's ``batch_size``): bigger batches cost the
    #: sender thread less per record.
    producer_batch_bytes: int = Field(default=262_144, ge=1_024)
    #: Verify record-batch CRCs on consume. kafka-python computes CRC32C in pure Python unless
    #: the ``crc32c`` package is installed, which makes this (and producing) much slower.
    check_crcs: bool = True

    _split_topics = field_validator("topics", mode="before")(_split)

    @field_validator("topics")
    @classmethod
    def _topics_nonempty(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v:
            raise ValueError("at least one input topic is required")
        return v

    @field_validator("predictions_topic", mode="before")
    @classmethod
    def _empty_is_none(cls, v: Any) -> Any:
        return None if v == "" else v

    @model_validator(mode="after")
    def _heartbeat_below_session(self) -> KafkaSettings:
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError(
                f"heartbeat_interval_ms ({self.heartbeat_interval_ms}) must be below "
                f"session_timeout_ms ({self.session_timeout_ms})"
            )
        return self


class RecordSettings(_Section):
    """How input records are validated (see :func:`streammkl.wire.decode`). A record beyond
    a limit is a dead letter whose reason names the limit; the defaults fit every stream of the
    simulators and datasets with a wide margin."""

    dim: int | None = Field(default=None, ge=1)
    classes: tuple[str | int | float | bool, ...] | None = None
    strict: bool = False
    max_bytes: int = Field(default=1 << 20, ge=16)
    #: Distinct feature names of one record (all the tokens of a sequence together).
    max_features: int = Field(default=1_000, ge=1)
    #: Tokens of a sequence.
    max_tokens: int = Field(default=1_000, ge=1)
    #: Values of a dense vector (each token's, in a sequence).
    max_vector_length: int = Field(default=4_096, ge=1)
    #: Characters of a feature name, of a label (digits of an integer label), of an id.
    max_name_length: int = Field(default=256, ge=1)
    max_label_length: int = Field(default=256, ge=1)
    max_id_length: int = Field(default=256, ge=1)
    #: Magnitude of a feature value (beyond: ``value_too_large``; the arithmetic of the
    #: kernels overflows around 1e77).
    max_abs_value: float = Field(default=1e30, gt=0)

    _split_classes = field_validator("classes", mode="before")(_split)

    def wire_limits(self) -> wire.Limits:
        """These limits as :func:`streammkl.wire.decode` takes them."""
        return wire.Limits(
            max_features=self.max_features,
            max_tokens=self.max_tokens,
            max_vector_length=self.max_vector_length,
            max_name_length=self.max_name_length,
            max_label_length=self.max_label_length,
            max_id_length=self.max_id_length,
            max_abs_value=self.max_abs_value,
        )


class LimitSettings(_Section):
    """What the model admits, and the net under it (:mod:`streammkl.daemon.admission`,
    :mod:`streammkl.daemon.inflight`). Checked when a record would make the model grow."""

    #: Inputs (distinct feature names) the model admits over its lifetime; a record that would
    #: take it beyond is a dead letter (``too_many_features``). Each input costs every later
    #: round (a dense vector entry, a column of every explicit map).
    max_model_features: int = Field(default=10_000, ge=1)
    #: Classes (labels of a sequence labeler) the model admits (``too_many_classes``): the
    #: weights, each round and each prediction grow with them.
    max_classes: int = Field(default=1_000, ge=2)
    #: Cells (float64 values) the model may cost after admitting a record
    #: (``over_work_budget``): its state (rebuilt when it grows, read by every later round), and
    #: with the regret monitor's comparator four copies of it plus three windows of each input
    #: (the window and the copies an epoch comparator fits on). 8 M cells = 64 MB.
    #: A round at the budget costs up to ~4 ms with the monitor, ~15 ms without it.
    max_record_work: int = Field(default=8_000_000, ge=1_000)
    #: A prediction carries the probabilities of at most this many classes (the most
    #: probable; 0 = all).
    prediction_top_k: int = Field(default=10, ge=0)
    #: Deaths of the process while one record was in flight (marked) after which that record
    #: is dead-lettered (``crashed_worker``) instead of being learned again. 1: at the first;
    #: 2 (default): a single ``kill -9`` during a marked step changes nothing.
    crash_strikes: int = Field(default=2, ge=1, le=10)


class CheckpointSettings(_Section):
    """Where and how often the model and offsets are checkpointed."""

    dir: Path = Path("checkpoints")
    #: A checkpoint every this many records or ``every_seconds``, whichever comes first. A crash
    #: replays at most that many records (about a second of a fast stream). Each checkpoint
    #: waits for the batch being learned and for the broker to acknowledge every prediction
    #: sent (~20-30 ms); every 10,000 records, that stall cost ~10 % of the throughput at
    #: 60,000 records/s (measured), hence the larger default.
    every_records: int = Field(default=100_000, ge=1)
    every_seconds: float = Field(default=30.0, gt=0)
    keep: int = Field(default=3, ge=1)
    #: A file holding a secret key: every checkpoint is signed (HMAC-SHA256) and only signed
    #: checkpoints are loaded, so whoever can write the directory but not read the key cannot
    #: plant a model.
    hmac_key_file: Path | None = None


class MetricsSettings(_Section):
    """The HTTP endpoint serving ``/metrics``, ``/healthz`` and ``/readyz``.

    It exposes the model (kernel weights, block norms, regret) and topic names: it listens on
    the loopback interface unless told otherwise, and ``web_config_file`` adds TLS and basic
    authentication (Prometheus exporter-toolkit format, :mod:`streammkl.daemon.webconfig`).
    """

    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(default=9108, ge=0, le=65535)  # 0 = any free port
    #: A YAML file with ``tls_server_config`` and/or ``basic_auth_users`` (bcrypt hashes).
    web_config_file: Path | None = None
    #: ``/healthz`` fails when the loop has not ticked for this long.
    stall_seconds: float = Field(default=120.0, gt=0)
    #: ``/readyz`` fails while one piece of work (a record, a batch) has run this long.
    slow_record_seconds: float = Field(default=30.0, gt=0)
    #: A connection must send its request (and TLS handshake) within this time.
    request_timeout_seconds: float = Field(default=10.0, gt=0)
    #: Requests served at once (a bounded pool); further connections wait in the backlog.
    max_connections: int = Field(default=8, ge=1, le=256)


class RunSettings(_Section):
    """Process behaviour."""

    #: Checkpoint and exit 0 once no record arrived for this many seconds, and for the last 10
    #: fetches in a row (a loop slow to poll has not reached the end) (None = run forever).
    exit_when_idle: float | None = Field(default=None, gt=0)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    #: Python's cyclic garbage collector, tuned for the loop (``gc.freeze`` after start-up and a
    #: first-generation threshold of this many allocations; 0 = Python's defaults). Every record
    #: allocates a few containers, and with the default threshold (700) the collector ran
    #: every ~100 records and scanned the whole heap often: ~30% of the loop's time (measured).
    gc_threshold: int = Field(default=100_000, ge=0)


class MonitorSettings(_Section):
    """Regret, bound, drift detection and history (:class:`streammkl.monitor.Monitor`).

    Only for the streammkl learners (the monitor needs their core model); off for others.
    """

    enabled: bool = True
    #: W: windowed regret on the last W examples (0: no windowed regret).
    window: int = Field(default=2000, ge=0)
    #: K: the windowed regret is re-estimated every K examples, on a background thread.
    every: int = Field(default=500, ge=1)
    comparator: Literal["epochs", "exact", "auto"] = "epochs"
    #: At most this fraction of the time fitting comparators (one fit of W = 2000 examples takes
    #: ~0.15-0.4 s of a core with the default bank: unthrottled, the worker would take a whole
    #: core); an epoch comparator's fit is paced epoch by epoch, windows arriving meanwhile are
    #: skipped. At 0.05, the windowed regret is refreshed every ~3-8 s, about as often as
    #: Prometheus scrapes it.
    comparator_duty: float = Field(default=0.05, gt=0, le=1)
    #: The comparator thread's nice value (Linux): it fits on CPU time the loop, the learner
    #: and the broker leave; 0 = the process's priority.
    comparator_nice: int = Field(default=19, ge=0, le=19)
    #: The windowed regret's schedule: an estimate whose window ended more than this many
    #: examples ago, or was published more than this many seconds ago, is *stale*: the
    #: comparator's pauses are skipped until a fresh one is published (a loaded machine slows
    #: the refreshes, never stops them); ``streammkl_window_regret_stale`` says so meanwhile.
    refresh_examples: int = Field(default=10_000, ge=1)
    refresh_seconds: float = Field(default=15.0, gt=0)
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


class LearnerSpec(_Section):
    """The learner: task and every component, by name (resolved in :mod:`streammkl.core`).

    A component is a name (``"Hinge"``) or a table ``{type = "RBF", gamma = 0.5}``;
    ``kernels = None`` keeps the learner's default bank. ``factory = "module:callable"`` builds
    any other learner honouring :class:`streammkl.daemon.learner.Learner` (called with this spec).
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
    seed: int = 0
    params: dict[str, Any] = Field(default_factory=dict)  # free-form, for custom factories


class ReloadSettings(_Section):
    """Guards on runtime kernel changes (SIGHUP, or settings edited while stopped)."""

    #: A new kernel list that would drop more than this fraction of the learned blocks (those
    #: with a non-zero norm) is refused ...
    max_dropped_fraction: float = Field(default=0.5, ge=0, le=1)
    #: ... as is one with a kernel on features never seen -- unless this is true (set it for
    #: the one reload that must go through, then back).
    force: bool = False


class MixingSettings(_Section):
    """Scale-out (docs/scale-out.md): the members of a consumer group train ONE model by
    iterative parameter mixing through a compacted ``topic``. Off: each member learns its own
    model from its partitions."""

    enabled: bool = False
    topic: str = "streammkl.mix"
    #: K: a member ends a round after learning this many examples (and at every rebalance and
    #: clean shutdown); the others end theirs when they see it. Small K: fresher models, more
    #: merges (each costs a publish, a wait and a prox); large K: staler members.
    every_records: int = Field(default=500, ge=1)
    #: This member's name in the group, stable across restarts (default: ``kafka.client_id``
    #: and the host name).
    member: str | None = Field(default=None, min_length=1, max_length=200)
    #: How long a member that ended its round waits for the others before the round is closed
    #: without them (they are named in the log and the metrics, and join the next round).
    round_timeout_seconds: float = Field(default=30.0, gt=0)
    #: How FTRL's dual increments (and AdaGrad's sums) merge: added ("sum": the merged model took
    #: every example's gradient) or example-weighted averaged ("mean": steadier for long rounds).
    dual: Literal["sum", "mean"] = "sum"


class Settings(_Section):
    """All daemon settings (frozen; secrets are :class:`pydantic.SecretStr`)."""

    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    records: RecordSettings = Field(default_factory=RecordSettings)
    limits: LimitSettings = Field(default_factory=LimitSettings)
    reload: ReloadSettings = Field(default_factory=ReloadSettings)
    checkpoint: CheckpointSettings = Field(default_factory=CheckpointSettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    run: RunSettings = Field(default_factory=RunSettings)
    learner: LearnerSpec = Field(default_factory=LearnerSpec)
    monitor: MonitorSettings = Field(default_factory=MonitorSettings)
    mixing: MixingSettings = Field(default_factory=MixingSettings)


# -- layering ---------------------------------------------------------------------------------


def _env_value(raw: str) -> Any:
    text = raw.strip()
    if text == "":
        return None
    if text[0] in "[{":
        try:
            return json.loads(text)
        except ValueError:
            return raw
    return raw


def _set(tree: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    node = tree
    for key in path[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = {}
            node[key] = child
        node = child
    node[path[-1]] = value


def _flatten(tree: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    out: dict[tuple[str, ...], Any] = {}
    for key, value in tree.items():
        path = (*prefix, key)
        # Sections are tables; a learner component table is a value, not a section.
        if isinstance(value, Mapping) and len(path) == 1:
            out.update(_flatten(value, path))
        else:
            out[path] = value
    return out


def load_settings(
    config: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Build the settings: file < environment < overrides.

    Parameters
    ----------
    config
        A TOML file (``None``: ``$STREAMMKL_CONFIG`` if set, else defaults only).
    env
        The environment (default ``os.environ``); only ``STREAMMKL_*`` names are read.
    overrides
        Values from command-line flags, keyed by dotted path (``"kafka.topics"``); ``None``
        values are ignored (flag not given).

    Raises
    ------
    ConfigError
        Naming every invalid field and the source of its value.
    """
    env = os.environ if env is None else env
    tree: dict[str, Any] = {}
    sources: dict[tuple[str, ...], str] = {}
    path = config if config is not None else env.get(f"{ENV_PREFIX}CONFIG")
    if path:
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except OSError as exc:
            raise ConfigError(f"config file {path}: {exc.strerror or exc}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path}: invalid TOML: {exc}") from exc
        for key, value in _flatten(data).items():
            _set(tree, key, value)
            sources[key] = f"file {path}"
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX) or name == f"{ENV_PREFIX}CONFIG":
            continue
        if name.startswith(f"{ENV_PREFIX}TANSU"):  # read by the broker module, not a setting
            continue
        key = tuple(part.lower() for part in name[len(ENV_PREFIX) :].split("__"))
        _set(tree, key, _env_value(env[name]))
        sources[key] = f"environment {name}"
    for dotted, value in (overrides or {}).items():
        if value is None:
            continue
        key = tuple(dotted.split("."))
        _set(tree, key, value)
        sources[key] = "command line"
    try:
        return Settings.model_validate(tree)
    except ValidationError as exc:
        raise ConfigError(_explain(exc, sources)) from None


def _explain(exc: ValidationError, sources: Mapping[tuple[str, ...], str]) -> str:
    lines = [f"invalid settings ({exc.error_count()} error(s)):"]
    for err in exc.errors():
        loc = tuple(str(p) for p in err["loc"])
        field = ".".join(loc) or "(settings)"
        source = next(
            (sources[loc[:i]] for i in range(len(loc), 0, -1) if loc[:i] in sources), None
        )
        if source is None and loc:  # a whole section: any value under it
            source = next((v for k, v in sources.items() if k[: len(loc)] == loc), None)
        origin = f" [from {source}]" if source else ""
        value = "" if err["type"] == "missing" else f" = {err.get('input')!r}"
        if isinstance(err.get("input"), Mapping):
            value = ""
        elif loc and loc[-1] in SECRET_FIELDS:
            value = " = '***'"  # a secret is never echoed
        lines.append(f"  {field}{value}: {err['msg']}{origin}")
    return "\n".join(lines)
