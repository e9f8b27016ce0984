"""The message schema between producers and the daemon: ``decode(bytes) -> Record | DecodeError``.

A record is one JSON object::

    {"x": {"name": number, ...} | [number, ...] | [{...} | [...], ...],
     "y": label | [label, ...],  "id": "optional string",  "ts": optional number}

``x`` is a feature dict, a dense vector, or a *sequence* (a list of dicts or of vectors, one per
token, for sequence labelling); in a feature object ``null`` means the feature is missing (as
for the river learners), in a vector it is an error. No ``"y"`` (or ``"y": null``) means predict
only. ``ts`` is the event time in seconds since the epoch.

With ``kind="sentence"`` (dependency parsing) ``x`` is a *sentence*: a list of words, each an
object of CoNLL-U columns (``{"form": "Ev", "upos": "NOUN", "feats": "Case=Loc"}``: strings,
numbers or null, or an object of strings for ``feats``/``misc``), and ``y`` its heads, one
integer per word in 0..n (0 = the root). Whether the heads form a tree (no cycle, one root arc)
is the parser's to check.

:func:`decode` never raises: every rejection is a :class:`DecodeError` whose ``reason`` is one of
:data:`REASONS` (a bounded set, safe as a metric label) and whose ``message`` names the offending
field. This module imports nothing from streammkl (DESIGN.md).

Examples
--------
>>> rec = decode(b'{"x": {"a": 1, "b": 2.5}, "y": true, "id": "e1"}')
>>> rec.x, rec.y, rec.id
({'a': 1.0, 'b': 2.5}, True, 'e1')
>>> decode(b'{"x": [1, NaN]}').reason
'non_finite'
>>> decode(b'{"x": [1, 2, 3]}', dim=2).message
'x has 3 values, expected 2 (the configured dimension)'
>>> decode(encode(Record(x=[0.5, 1.0], y="cat"))).y
'cat'

Every record is bounded (:class:`Limits`): bytes, distinct feature names, tokens, vector length,
and the lengths of names, labels and ids; a record beyond a limit is a :class:`DecodeError`
whose reason names the limit, so one hostile record costs at most a bounded amount of work.

>>> decode(b'{"x": {"a": 1, "b": 2, "c": 3}}', limits=Limits(max_features=2)).reason
'too_many_features'
"""

from __future__ import annotations

from streammkl.wire.codec import batch_decoder, decode, decoder, encode
from streammkl.wire.schema import (
    DEFAULT_LIMITS,
    DEFAULT_MAX_BYTES,
    REASONS,
    DecodeError,
    Limits,
    Record,
)

__all__ = [
    "DEFAULT_LIMITS",
    "DEFAULT_MAX_BYTES",
    "REASONS",
    "DecodeError",
    "Limits",
    "Record",
    "batch_decoder",
    "decode",
    "decoder",
    "encode",
]
