"""The whole settings object: one frozen :class:`Settings` of every section, the rules that tie
sections together (topics the daemon writes are never topics it reads; what a mixing group
needs), and what a reload keeps of new settings (:func:`reloaded_settings`)."""

from __future__ import annotations

from pydantic import Field, model_validator

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

    @model_validator(mode="after")
    def _outputs_are_not_inputs(self) -> Settings:
        """A topic the daemon writes (predictions, dead letters, the mix topic) that it also
        reads would feed the daemon its own output: every dead letter read back as a bad record
        and dead-lettered again, without end."""
        k = self.kafka
        outputs = {"kafka.predictions_topic": k.predictions_topic,
                   "kafka.dead_letter_topic": k.dead_letter_topic}  # fmt: skip
        if self.mixing.enabled:
            outputs["mixing.topic"] = self.mixing.topic
        for field, topic in outputs.items():
            if topic and topic in k.topics:
                raise ValueError(
                    f"{field} = {topic!r} is also an input topic (kafka.topics): the daemon would "
                    "read back what it writes (a feedback loop); give it another topic"
                )
        if self.mixing.enabled:
            for field, topic in outputs.items():
                if field != "mixing.topic" and topic == self.mixing.topic:
                    raise ValueError(
                        f"mixing.topic = {topic!r} is also {field}: the mix topic holds only the "
                        "group's records; give it a topic of its own"
                    )
        return self

    @model_validator(mode="after")
    def _group_needs(self) -> Settings:
        """What a mixing group needs (docs/scale-out.md), refused at start like any setting."""
        if not self.mixing.enabled:
            return self
        if self.kafka.assignment != "group":
            raise ValueError(
                "mixing.enabled needs kafka.assignment = 'group' (the members split the "
                f"partitions), not {self.kafka.assignment!r}"
            )
        if self.learner.task != "classification":
            raise ValueError(
                "mixing.enabled: a mixing group learns classification models only "
                f"(learner.task = {self.learner.task!r})"
            )
        if self.learner.memory_window is not None:
            raise ValueError(
                "mixing.enabled: a mixing group merges MKLClassifier models; "
                "learner.memory_window (a memory preset, whose memory and Hedge do not "
                "merge) is not allowed in one: unset it or disable mixing"
            )
        if not self.records.classes:
            raise ValueError(
                "mixing.enabled needs records.classes (every member must map labels to the "
                "same outputs, in the same order)"
            )
        return self


def reloaded_settings(old: Settings, new: Settings) -> tuple[Settings, list[str]]:
    """The settings in force after a reload (``old`` with ``new``'s kernel list) and the changed
    settings that wait for a restart (dotted names)."""
    ignored = [n for n in type(new).model_fields if getattr(new, n) != getattr(old, n)]
    ignored = [n for n in ignored if n not in ("learner", "reload")] + [
        f"learner.{n}"
        for n in type(new.learner).model_fields
        if n != "kernels" and getattr(new.learner, n) != getattr(old.learner, n)
    ]
    kept = old.model_copy(
        update={"learner": old.learner.model_copy(update={"kernels": new.learner.kernels})}
    )
    return kept, ignored
