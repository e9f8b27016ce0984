"""The ``[records]`` and ``[limits]`` sections: what a record may hold, what the model admits."""

from __future__ import annotations

import dataclasses

from pydantic import Field, field_validator

from streammkl import wire
from streammkl.daemon.config.section import Section, comma_list


class RecordSettings(Section):
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
    #: kernels overflows around 1e77). At most 1e100, the largest value a model takes
    #: (``streammkl.core.model.MAX_ABS_INPUT``).
    max_abs_value: float = Field(default=1e30, gt=0, le=1e100)

    _split_classes = field_validator("classes", mode="before")(comma_list)

    def wire_limits(self) -> wire.Limits:
        """These limits as :func:`streammkl.wire.decode` takes them: every field of
        :class:`streammkl.wire.Limits` is the setting of the same name."""
        names = [f.name for f in dataclasses.fields(wire.Limits) if f.init]
        return wire.Limits(**{name: getattr(self, name) for name in names})


class LimitSettings(Section):
    """What the model admits, and the net under it (:mod:`streammkl.daemon.learning.admission`,
    :mod:`streammkl.daemon.checkpoints.inflight`). Checked when a record would make the model
    grow."""

    #: Inputs (distinct feature names) the model admits over its lifetime; a record that would
    #: take it beyond is a dead letter (``too_many_features``). Each input costs every later
    #: round (a dense vector entry, a column of every explicit map).
    max_model_features: int = Field(default=10_000, ge=1)
    #: Classes (labels of a sequence labeler) the model admits (``too_many_classes``): the
    #: weights, each round and each prediction grow with them.
    max_classes: int = Field(default=1_000, ge=2)
    #: Cells (float64 values) the model may cost after admitting a record
    #: (``over_work_budget``): its state, rebuilt when it grows and read by every later round.
    #: The regret monitor's windowed regret (its window of inputs and the comparator's copies
    #: of the model) runs while it and the model fit the same number, and is given up on a
    #: model too wide for it: a record is never refused for a metric. 20 M cells = 160 MB: the
    #: default bank's model (weights and three averaged iterates, at the arrays' capacity,
    #: which doubles when full) holds 19.4 M cells with 2 classes at the largest room the
    #: documented ``max_model_features`` (10,000) can land in (just under 20,000 inputs).
    max_record_work: int = Field(default=20_000_000, ge=1_000)
    #: A prediction carries the probabilities of at most this many classes (the most
    #: probable; 0 = all).
    prediction_top_k: int = Field(default=10, ge=0)
    #: Deaths of the process while one record was in flight (marked) after which that record
    #: is dead-lettered (``crashed_worker``) instead of being learned again. 1: at the first;
    #: 2 (default): a single ``kill -9`` during a marked round changes nothing.
    crash_strikes: int = Field(default=2, ge=1, le=10)
