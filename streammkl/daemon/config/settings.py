"""The whole settings object: one frozen :class:`Settings` of every section."""

from __future__ import annotations

from pydantic import Field

from streammkl.daemon.config.kafka import KafkaSettings
from streammkl.daemon.config.learning import (
    LearnerSpec,
    MixingSettings,
    MonitorSettings,
    ReloadSettings,
)
from streammkl.daemon.config.records import LimitSettings, RecordSettings
from streammkl.daemon.config.section import Section
from streammkl.daemon.config.service import CheckpointSettings, MetricsSettings, RunSettings


class Settings(Section):
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
