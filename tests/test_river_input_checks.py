"""``check_numeric`` (a record's values checked before the learner changes) and the count of a
raw record's non-zeros (``Rounds._nonzeros``): their C-speed forms against the per-value
reference, on plain records and on every edge the per-value rule decides (NaN, infinities,
the bound as a float and as an int either side of it, ints beyond a float's range, bools,
None, numpy scalars, strings)."""

from __future__ import annotations

import random
from fractions import Fraction

import numpy as np

from streammkl.core.model import MAX_ABS_INPUT
from streammkl.river import MKLClassifier
from streammkl.river._features import _number, check_numeric

EDGES = [
    0, 0.0, -0.0, 1, -3, 2.5, 1e-300, MAX_ABS_INPUT, -MAX_ABS_INPUT, 1e101, -1e101,
    int(MAX_ABS_INPUT), int(MAX_ABS_INPUT) + 1, -int(MAX_ABS_INPUT) - 10**85, 10**101,
    10**400, -(10**400), float("nan"), float("inf"), float("-inf"), 1e308, True, False, None,
    np.float64(2.0), np.int64(0), Fraction(1, 3), "x",
]  # fmt: skip


def _reference(x: dict) -> tuple[str, str] | None:
    """The per-value rule: the first value ``_number`` refuses, as (error type, message)."""
    for key, value in x.items():
        if value is not None:
            try:
                _number(key, value)
            except (TypeError, ValueError) as exc:
                return type(exc).__name__, str(exc)
    return None


def _outcome(x: dict) -> tuple[str, str] | None:
    try:
        check_numeric(x)
    except (TypeError, ValueError) as exc:
        return type(exc).__name__, str(exc)
    return None


def _records(n: int) -> list[dict]:
    rng = random.Random(3)
    plain = [0, 1, 2, 7, 0.5, -1.25, 3.0, 1e99, -1e99]
    out: list[dict] = [{}]
    for _ in range(n):
        size = rng.randint(1, 6)
        pool = EDGES if rng.random() < 0.5 else plain
        out.append({f"f{i}": rng.choice(pool) for i in range(size)})
    out += [{"a": v} for v in EDGES]
    out += [{"a": 1.0, "b": v, "c": 2} for v in EDGES]
    out.append({"a": float("inf"), "b": float("-inf")})  # (their sum is NaN)
    out.append({"a": 1e308, "b": 1e308})  # (their sum overflows)
    out.append({"a": 10**300, "b": 1.5})
    return out


def test_check_numeric_refuses_and_names_what_the_per_value_rule_does():
    records = _records(3000)
    refused = 0
    for x in records:
        expected = _reference(x)
        refused += expected is not None
        assert _outcome(x) == expected, x
    assert 0 < refused < len(records)  # both outcomes met


def test_a_raw_records_non_zeros_are_its_true_values():
    rounds = MKLClassifier().rounds()
    rng = random.Random(5)
    values = [0, 0.0, -0.0, False, None, 1, True, 2.5, np.float64(0.0), np.int64(4), Fraction(0)]
    for _ in range(500):
        x = {f"f{i}": rng.choice(values) for i in range(rng.randint(0, 8))}
        assert rounds._nonzeros(x) == sum(1 for v in x.values() if v)
