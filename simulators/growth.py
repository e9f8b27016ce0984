"""Benign growth: streams whose models legitimately widen, for the promise the limits make.

Two streams of good two-class records (the half moons of :func:`simulators.hostile.good_record`,
inputs ``x1``, ``x2``) that also carry word features, every one within the daemon's default
limits (at most 1,000 names a record, 10,000 inputs a model):

- :func:`growing_vocabulary`: a vocabulary that keeps growing at an even pace until it holds
  ``vocabulary`` words (each record also reuses two known words);
- :func:`growth_bursts`: ``n_before`` normal records over a fixed base vocabulary, then
  ``n_after`` records of which one in ``every`` (1 % by default) brings ``new_per_record`` new
  names at once.

Everything is a function of the seed; the values are compact JSON (``{"x": ..., "y": ...,
"id": ...}``).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

from simulators.hostile import good_record

__all__ = ["BASE_WORDS", "growing_vocabulary", "growth_bursts"]

#: The base vocabulary of :func:`growth_bursts`' normal records (known after a few records).
BASE_WORDS = 20


def _dump(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def growing_vocabulary(n_records: int, vocabulary: int = 5_000, seed: int = 0) -> Iterator[bytes]:
    """``n_records`` good records whose word vocabulary grows evenly to ``vocabulary`` words.

    Record ``i`` brings the words ``w{k}`` for ``k`` in ``[i * vocabulary // n_records,
    (i + 1) * vocabulary // n_records)`` (none, one or a few new words) and two words drawn
    from those already known, each with value 1; the last record completes the vocabulary.
    """
    if n_records < 1 or vocabulary < 0:
        raise ValueError("n_records must be >= 1 and vocabulary >= 0")
    rng = random.Random(seed)
    for i in range(n_records):
        record = good_record(i, rng)
        known = i * vocabulary // n_records
        new = range(known, (i + 1) * vocabulary // n_records)
        words = {f"w{k}": 1.0 for k in new}
        if known:
            words.update({f"w{rng.randrange(known)}": 1.0 for _ in range(2)})
        record["x"].update(words)
        yield _dump(record)


def growth_bursts(
    n_before: int, n_after: int, every: int = 100, new_per_record: int = 100, seed: int = 0
) -> Iterator[tuple[bytes, bool]]:
    """``n_before`` normal records, then ``n_after`` in which one in ``every`` is a growth record.

    A normal record carries three words of the base vocabulary (``b0`` ... ``b19``); a growth
    record carries ``new_per_record`` names seen nowhere before (``g{j}_{k}``, value 0.5) besides
    its two coordinates. The growth records of the second part are its records ``every // 2``,
    ``every // 2 + every``, ... (exactly ``n_after // every`` of them when ``every`` divides
    ``n_after``). Yields ``(value, is_growth)``.
    """
    if n_before < 0 or n_after < 0 or every < 1 or new_per_record < 1:
        raise ValueError("counts must be >= 0, every and new_per_record >= 1")
    rng = random.Random(seed)
    burst = 0
    for i in range(n_before + n_after):
        record = good_record(i, rng)
        after = i - n_before
        if after >= 0 and after % every == every // 2:
            record["x"].update({f"g{burst}_{k}": 0.5 for k in range(new_per_record)})
            burst += 1
            yield _dump(record), True
        else:
            record["x"].update({f"b{rng.randrange(BASE_WORDS)}": 1.0 for _ in range(3)})
            yield _dump(record), False
