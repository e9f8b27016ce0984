"""Hostile input: good records interleaved with records crafted to break a daemon.

:func:`hostile_stream` yields ``(value, kind, expected)``: the message bytes, the attack's
name, and the dead-letter reason a daemon with :data:`HOSTILE_SETTINGS` must give it (``None``
for a good record, which must be learned exactly once). The attacks (:data:`ATTACKS`): feature
floods (too many names in one record, or names that would overflow the model), label floods,
long names / labels / ids, oversized records and dense vectors, deep nesting, huge numbers,
NaN / Infinity, wrong types, truncated and binary payloads. Everything is a function of the
seed. Good records are two-class, two-feature half moons (like Bananas).

The expected reasons assume the daemon's default record limits and
:data:`HOSTILE_SETTINGS` (the model may hold the good stream's 2 classes and at most 16
inputs): with them every attack is refused and the model equals that of the good records alone.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["ATTACKS", "FRAGMENTS", "HOSTILE_SETTINGS", "good_record", "hostile_stream", "mutate"]

#: Settings (dotted paths) under which the expected reasons hold.
HOSTILE_SETTINGS: dict[str, Any] = {"limits.max_classes": 2, "limits.max_model_features": 16}

_MB = 1 << 20


def good_record(i: int, rng: random.Random) -> dict[str, Any]:
    """One good example: two interleaved half moons, labels 0 / 1."""
    y = i % 2
    t = rng.uniform(0, math.pi)
    cx, cy = (math.cos(t), math.sin(t)) if y == 0 else (1 - math.cos(t), 0.5 - math.sin(t))
    x = {"x1": round(cx + rng.gauss(0, 0.15), 6), "x2": round(cy + rng.gauss(0, 0.15), 6)}
    return {"x": x, "y": y, "id": f"g{i}"}


def _dump(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _names(rng: random.Random, n: int, prefix: str) -> dict[str, float]:
    return {f"{prefix}{i}": round(rng.random(), 3) for i in range(n)}


def _x(rng: random.Random) -> dict[str, float]:
    return {"x1": round(rng.random(), 4), "x2": round(rng.random(), 4)}


Attack = Callable[[random.Random, int], bytes]

#: name -> (weight, expected dead-letter reason, maker(rng, i) -> bytes)
# fmt: off
ATTACKS: dict[str, tuple[float, str, Attack]] = {
    "feature_flood": (4, "too_many_features",
                      lambda r, i: _dump({"x": _names(r, r.randint(1001, 1100), f"f{i}_"),
                                          "y": 1})),
    "model_overflow": (6, "too_many_features",
                       lambda r, i: _dump({"x": _names(r, r.randint(15, 120), f"m{i}_"),
                                           "y": 0})),
    "label_flood": (8, "too_many_classes",
                    lambda r, i: _dump({"x": _x(r), "y": f"label-{i}"})),
    "long_name": (5, "name_too_long",
                  lambda r, i: _dump({"x": {"n" * r.randint(257, 3_000): 1.0}, "y": 1})),
    "long_label": (5, "label_too_long",
                   lambda r, i: _dump({"x": _x(r), "y": "L" * r.randint(257, 3_000)})),
    "long_id": (4, "id_too_long",
                lambda r, i: _dump({"x": _x(r), "y": 1, "id": "i" * r.randint(257, 5_000)})),
    "huge_vector": (3, "vector_too_long",
                    lambda r, i: _dump({"x": [0.5] * r.randint(4097, 5000), "y": 1})),
    "oversized": (0.05, "too_large",
                  lambda r, i: _dump({"x": _x(r), "y": 1, "pad": "p" * (_MB + r.randint(1, 999))})),
    "deep_nesting": (2, "invalid_json",
                     lambda r, i: b'{"x": ' + b"[" * (d := r.randint(1100, 3000)) + b"]" * d
                     + b"}"),
    "nested_value": (3, "non_numeric",
                     lambda r, i: _dump({"x": {"x1": {"deep": [1, {"a": 2}]}}, "y": 1})),
    "nan": (4, "non_finite", lambda r, i: b'{"x":{"x1":NaN,"x2":0.5},"y":1}'),
    "infinity": (3, "non_finite", lambda r, i: b'{"x":{"x1":-Infinity},"y":0}'),
    "huge_float": (3, "non_finite", lambda r, i: b'{"x":{"x1":1e999},"y":0}'),
    "out_of_range": (3, "value_too_large",
                     lambda r, i: _dump({"x": {"x1": r.choice([-1, 1]) * 10.0 ** r.randint(31, 300),
                                               "x2": 0.5}, "y": 0})),
    "huge_int": (3, "non_finite",
                 lambda r, i: b'{"x":{"x1":1' + b"0" * r.randint(400, 1000) + b"},\"y\":0}"),
    "string_value": (4, "non_numeric", lambda r, i: _dump({"x": {"x1": "1.5"}, "y": 1})),
    "bool_value": (3, "non_numeric", lambda r, i: _dump({"x": {"x1": True}, "y": 1})),
    # null is a missing feature (as for the river learners): with every feature null, no x at all
    "null_value": (3, "bad_x", lambda r, i: _dump({"x": {"x1": None}, "y": 1})),
    "x_string": (3, "bad_x", lambda r, i: _dump({"x": "DROP TABLE", "y": 1})),
    "x_empty": (2, "bad_x", lambda r, i: _dump({"x": {}, "y": 1})),
    "missing_x": (2, "missing_x", lambda r, i: _dump({"features": _x(r), "y": 1})),
    "not_an_object": (3, "not_an_object", lambda r, i: _dump([_x(r), 1])),
    "label_object": (3, "bad_label", lambda r, i: _dump({"x": _x(r), "y": {"$gt": ""}})),
    "id_number": (2, "bad_id", lambda r, i: _dump({"x": _x(r), "y": 1, "id": 12345})),
    "ts_string": (2, "bad_ts", lambda r, i: _dump({"x": _x(r), "y": 1, "ts": "yesterday"})),
    "sequence": (2, "wrong_kind",
                 lambda r, i: _dump({"x": [{"a": 1.0}, {"b": 2.0}], "y": ["N", "V"]})),
    "truncated": (6, "invalid_json",
                  lambda r, i: (b := _dump(good_record(i, r)))[: r.randint(1, len(b) - 1)]),
    "binary": (5, "invalid_utf8",
               lambda r, i: b"\xff\xfe" + bytes(r.randrange(256) for _ in range(r.randint(0, 99)))),
    "empty": (1, "invalid_json", lambda r, i: b""),
}
# fmt: on


#: What :func:`mutate` splices in: JSON fragments that change a record's meaning or break it.
FRAGMENTS = (b"NaN", b"[", b"{", b'"', b"1e999", b"null", b",", b'"y":', b'"x":{"a":1}',
             b"\\ud800", b"-0", b"99999999999999999999999", b"true")  # fmt: skip


def mutate(data: bytes, rng: random.Random, max_edits: int = 6) -> bytes:
    """``data`` with 1 to ``max_edits`` random edits: a byte deleted, a random byte inserted,
    or one of :data:`FRAGMENTS` spliced in (for fuzzing a decoder or a daemon)."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, max_edits)):
        op = rng.random()
        pos = rng.randrange(len(buf) + 1)
        if op < 0.35 and buf:
            del buf[min(pos, len(buf) - 1)]
        elif op < 0.7:
            buf.insert(pos, rng.randrange(256))
        else:
            buf[pos:pos] = rng.choice(FRAGMENTS)
    return bytes(buf)


def hostile_stream(
    n_good: int, n_bad: int, seed: int = 0, attacks: dict[str, Any] | None = None
) -> Iterator[tuple[bytes, str, str | None]]:
    """``n_good`` good records with ``n_bad`` attacks spread among them (the first 10 records
    are good, so the model knows its two classes before the label floods come).

    Yields ``(value, kind, expected reason or None)``.
    """
    rng = random.Random(seed)
    table = attacks if attacks is not None else ATTACKS
    kinds = list(table)
    weights = [table[k][0] for k in kinds]
    total = n_good + n_bad
    head = min(10, n_good)
    # positions of the attacks among the records after the head, chosen by the seed
    bad_at = set(rng.sample(range(head, total), n_bad)) if n_bad else set()
    g = 0
    for i in range(total):
        if i in bad_at:
            kind = rng.choices(kinds, weights)[0]
            _, reason, make = table[kind]
            yield make(rng, i), kind, reason
        else:
            yield _dump(good_record(g, rng)), "good", None
            g += 1
