"""The record schema: what a decoded record is (:class:`Record`), why one was rejected
(:class:`DecodeError`, :data:`REASONS`) and the bounds on one record (:class:`Limits`).

Imports nothing from streammkl (see :mod:`streammkl.wire`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DEFAULT_MAX_BYTES = 1 << 20

#: Every rejection reason :func:`decode` can return, with what it means.
REASONS: dict[str, str] = {
    "too_large": "the record is larger than the size limit",
    "invalid_utf8": "the bytes are not valid UTF-8",
    "invalid_json": "the text is not valid JSON",
    "not_an_object": "the JSON value is not an object",
    "unknown_field": "a top-level key other than x, y, id, ts (strict mode only)",
    "missing_x": "there is no x",
    "bad_x": "x is not an object, an array of numbers or an array of tokens, or is empty",
    "non_numeric": "a feature value is not a number",
    "non_finite": "a feature value or a numeric label is NaN or infinite",
    "value_too_large": "a feature value beyond the magnitude limit",
    "wrong_dim": "a vector's length differs from the configured dimension",
    "bad_sequence": "a sequence mixes token kinds, or its labels do not match its tokens",
    "wrong_kind": "a sequence where vectors are expected, or the reverse",
    "bad_label": "y is not a string, number or boolean (or a list of them for a sequence; of "
    "integers for a sentence)",
    "bad_token": "a word of a sentence is not an object of CoNLL-U columns",
    "unknown_class": "y is not one of the configured classes (strict mode only)",
    "bad_id": "id is not a string",
    "bad_ts": "ts is not a finite number",
    "too_many_features": "more distinct feature names than the limit (a sequence: over its tokens)",
    "too_many_tokens": "a sequence with more tokens than the limit",
    "vector_too_long": "a dense vector longer than the limit",
    "name_too_long": "a feature name longer than the limit",
    "label_too_long": "a label longer than the limit (a number: its decimal digits)",
    "id_too_long": "an id longer than the limit",
}


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on one record, beyond which :func:`decode` rejects it (every count is inclusive).

    Parameters
    ----------
    max_features
        Distinct feature names of a record (of all the tokens of a sequence together).
    max_tokens
        Tokens of a sequence.
    max_vector_length
        Values of a dense vector (of each token's vector in a sequence).
    max_name_length
        Characters of a feature name.
    max_label_length
        Characters of a string label, digits of an integer label.
    max_id_length
        Characters of the record's id.
    max_abs_value
        Magnitude of a feature value. Beyond ~1e77 the fourth powers a quadratic kernel takes
        overflow and every kernel loses all precision: such a value is a unit error or an
        attack, not data (standardise inputs).
    """

    max_features: int = 1_000
    max_tokens: int = 1_000
    max_vector_length: int = 4_096
    max_name_length: int = 256
    max_label_length: int = 256
    max_id_length: int = 256
    max_abs_value: float = 1e30
    #: A record of at most this many bytes cannot hold a string over any length limit (the
    #: checks of lengths are skipped for it: the common, small record pays nothing for them).
    short_record: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        shortest = min(self.max_name_length, self.max_label_length, self.max_id_length)
        object.__setattr__(self, "short_record", shortest)


#: The limits :func:`decode` applies when given none.
DEFAULT_LIMITS = Limits()

Features = dict[str, float] | list[float]
Label = str | int | float | bool

_INT64 = 1 << 63
_UNBOUNDED = 1 << 62


@dataclass(slots=True)
class Record:
    """One decoded example (treat it as read-only; not frozen because a frozen dataclass costs
    0.6 us more per record to build, on the daemon's hot path).

    Parameters
    ----------
    x
        Features: a dict name -> float, a dense list of floats, or a sequence (list of either).
    y
        The label (a list of labels for a sequence); ``None`` means predict only.
    id
        Optional producer-side identifier, echoed in predictions.
    ts
        Optional event time (seconds since the epoch).
    raw
        The bytes the record was decoded from (kept for dead letters); empty when built in code.
    """

    x: Features | list[Features]
    y: Label | list[Label] | None = None
    id: str | None = None
    ts: float | None = None
    raw: bytes = field(default=b"", repr=False, compare=False)

    @property
    def labelled(self) -> bool:
        """Whether the record carries a label (and so is learned, not only predicted)."""
        return self.y is not None

    @property
    def is_sequence(self) -> bool:
        """Whether ``x`` is a sequence of tokens."""
        return isinstance(self.x, list) and bool(self.x) and isinstance(self.x[0], dict | list)


@dataclass(frozen=True, slots=True)
class DecodeError:
    """Why a record was rejected.

    Parameters
    ----------
    reason
        Stable machine code, one of :data:`REASONS`.
    message
        Human-readable explanation naming the offending field or feature.
    raw
        The rejected bytes, unchanged.
    """

    reason: str
    message: str
    raw: bytes = field(default=b"", repr=False)


class _Reject(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def _too_long(reason: str, where: str, length: int, limit: int) -> _Reject:
    return _Reject(reason, f"{where} has {length} characters, the limit is {limit}")


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"a number ({value!r})"
    return names.get(type(value), "null" if value is None else f"a {type(value).__name__}")
