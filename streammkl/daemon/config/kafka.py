"""The ``[kafka]`` section: broker, topics, consumer group, client libraries, TLS / SASL."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from streammkl.daemon.config.section import comma_list, renamed
from streammkl.daemon.config.security import KafkaSecurity


class KafkaSettings(KafkaSecurity):
    """Broker, topics and consumer-group settings (docs/daemon.md on the broker explains the
    timeouts), and TLS / SASL (:class:`~streammkl.daemon.config.security.KafkaSecurity`)."""

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
    #: The clients refresh the topics' metadata this often: a topic that appears (created
    #: late, re-created after a broker restart) is consumed within about this long (the
    #: clients' own default, 5 minutes, left a re-created input topic unread that long).
    metadata_max_age_ms: int = Field(default=5_000, ge=1_000)
    #: How long to wait for a caught-up partition before interleaving the others without it
    #: (Kafka Streams' ``max.task.idle.ms``; 0 = never wait for data not yet produced). Its old
    #: name ``merge_idle_ms`` is still read (deprecated: "merge" is the mixing's word).
    interleave_idle_ms: int = Field(default=0, ge=0)
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

    _split_topics = field_validator("topics", mode="before")(comma_list)
    _old_interleave = model_validator(mode="before")(
        renamed("kafka", "merge_idle_ms", "interleave_idle_ms")
    )

    @field_validator("topics")
    @classmethod
    def _topics_nonempty(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if not v:
            raise ValueError("at least one input topic is required")
        return v

    @field_validator("predictions_topic", mode="before")
    @classmethod
    def _empty_is_none(cls, v: object) -> object:
        return None if v == "" else v

    @model_validator(mode="after")
    def _heartbeat_below_session(self) -> KafkaSettings:
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError(
                f"heartbeat_interval_ms ({self.heartbeat_interval_ms}) must be below "
                f"session_timeout_ms ({self.session_timeout_ms})"
            )
        return self
