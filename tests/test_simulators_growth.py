"""The growth streams (``simulators.growth``) produce what ``benchmarks/hostile_input.py --growth``
claims of them: a vocabulary that reaches 5,000 words at an even pace, and 1 % of records that
bring 100 names seen nowhere before, every record within the daemon's default record limits."""

from __future__ import annotations

import json

import pytest

from simulators.growth import BASE_WORDS, growing_vocabulary, growth_bursts
from streammkl.daemon.config import Settings


def _x(value: bytes) -> dict[str, float]:
    record = json.loads(value)
    assert record["y"] in (0, 1)
    return record["x"]


@pytest.mark.parametrize("n_records", [2_500, 10_000])
def test_the_vocabulary_grows_evenly_to_5000_words(n_records: int) -> None:
    known: set[str] = set()
    sizes = []
    limits = Settings().records
    for i, value in enumerate(growing_vocabulary(n_records, 5_000, seed=1)):
        x = _x(value)
        assert {"x1", "x2"} <= set(x) and len(x) <= limits.max_features
        known |= {k for k in x if k.startswith("w")}
        sizes.append(len(known))
        if i == n_records // 2 - 1:
            assert len(known) == 2_500  # even pace: half the records, half the words
    assert len(known) == 5_000 == sizes[-1]
    assert known == {f"w{k}" for k in range(5_000)}
    # each record brings exactly its share of new words (reused ones are known already)
    assert sizes == [(i + 1) * 5_000 // n_records for i in range(n_records)]
    assert list(growing_vocabulary(n_records, 5_000, seed=1))[-1] == value  # seeded


def test_one_record_in_a_hundred_brings_100_new_names_after_the_first_part() -> None:
    n_before, n_after = 1_000, 3_000
    stream = list(growth_bursts(n_before, n_after, seed=2))
    assert len(stream) == n_before + n_after
    seen: set[str] = set()
    growth = 0
    for i, (value, grows) in enumerate(stream):
        names = set(_x(value)) - {"x1", "x2"}
        new = names - seen
        if grows:
            assert i >= n_before
            assert len(names) == len(new) == 100  # all of them new
            growth += 1
        else:
            assert len(names) <= 3 and all(n.startswith("b") for n in names)
            assert {int(n[1:]) for n in names} <= set(range(BASE_WORDS))
        seen |= names
    assert growth == n_after // 100 == 30  # exactly 1 % of the second part
    assert not any(grows for _, grows in stream[:n_before])
    assert len(seen) == BASE_WORDS + 30 * 100  # within the default limits.max_model_features
    assert len(seen) + 2 <= Settings().limits.max_model_features
