"""wire: each rejection has a stable reason and a message naming the field; never raises."""

from __future__ import annotations

import json
import math
import random

import pytest

from simulators.hostile import mutate
from streammkl import wire
from streammkl.wire import REASONS, DecodeError, Limits, Record, decode, encode


def reject(data: bytes, **kw: object) -> DecodeError:
    out = decode(data, **kw)  # type: ignore[arg-type]
    assert isinstance(out, DecodeError), out
    assert out.reason in REASONS
    assert out.raw == data
    return out


def test_valid_dict_vector_sequence_records() -> None:
    rec = decode(b'{"x": {"a": 1, "b": -2.5e3}, "y": "spam", "id": "m1", "ts": 1700000000.5}')
    assert rec == Record(x={"a": 1.0, "b": -2500.0}, y="spam", id="m1", ts=1700000000.5)
    assert isinstance(rec, Record) and rec.labelled and not rec.is_sequence
    vec = decode(b'{"x": [1, 2, 3.5]}', dim=3)
    assert isinstance(vec, Record) and vec.x == [1.0, 2.0, 3.5] and vec.y is None
    assert not vec.labelled
    seq = decode(b'{"x": [{"a": 1}, {"b": 2}], "y": ["N", "V"]}')
    assert isinstance(seq, Record) and seq.is_sequence and seq.y == ["N", "V"]
    seq2 = decode(b'{"x": [[1, 2], [3, 4]], "y": [0, 1]}', dim=2, kind="sequence")
    assert isinstance(seq2, Record) and seq2.x == [[1.0, 2.0], [3.0, 4.0]]
    assert decode(b'{"x": [1], "y": null}').y is None  # type: ignore[union-attr]
    assert decode(b'{"x": {"a": 1}, "y": true}').y is True  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("data", "kw", "reason", "needle"),
    [
        (b"x" * 100, {"max_bytes": 50}, "too_large", "100 bytes, the limit is 50"),
        (b'{"x": [1]}\xff', {}, "invalid_utf8", "byte 10"),
        (b'{"x": [1]', {}, "invalid_json", "not valid JSON"),
        (b"", {}, "invalid_json", "not valid JSON"),
        (b"[1, 2]", {}, "not_an_object", "an array"),
        (b'{"x": [1], "z": 2}', {"strict": True}, "unknown_field", "'z'"),
        (b'{"y": 1}', {}, "missing_x", "no 'x'"),
        (b'{"x": "abc"}', {}, "bad_x", "a string"),
        (b'{"x": {}}', {}, "bad_x", "empty object"),
        (b'{"x": []}', {}, "bad_x", "empty array"),
        (b'{"x": {"age": "old"}}', {}, "non_numeric", "feature 'age' is a string"),
        (b'{"x": {"ok": true}}', {}, "non_numeric", "feature 'ok' is a boolean"),
        (b'{"x": [1, null]}', {}, "non_numeric", "x[1] is null"),
        (b'{"x": {"a": NaN}}', {}, "non_finite", "feature 'a' is nan"),
        (b'{"x": [Infinity]}', {}, "non_finite", "x[0] is inf"),
        (b'{"x": [1e999]}', {}, "non_finite", "x[0] is inf"),
        (b'{"x": [1e31]}', {}, "value_too_large", "x[0] is 1e+31, beyond +-1e+30"),
        (b'{"x": {"a": -2.5e200}}', {}, "value_too_large", "feature 'a' is -2.5e+200"),
        (b'{"x": {"a": 100}}', {"limits": Limits(max_abs_value=99)}, "value_too_large", "100"),
        (b'{"x": [1' + b"0" * 400 + b"]}", {}, "non_finite", "too large"),
        (b'{"x": [1, 2, 3]}', {"dim": 2}, "wrong_dim", "3 values, expected 2"),
        (b'{"x": [[1, 2], [1]]}', {"dim": 2}, "wrong_dim", "x[1] has 1 values"),
        (b'{"x": [{"a": 1}, [1]]}', {}, "bad_sequence", "x[1] is an array"),
        (b'{"x": [{"a": 1}], "y": "N"}', {}, "bad_sequence", "y must be an array"),
        (b'{"x": [{"a": 1}], "y": ["N", "V"]}', {}, "bad_sequence", "2 labels for 1 tokens"),
        (b'{"x": [{"a": 1}]}', {"kind": "vector"}, "wrong_kind", "sequence"),
        (b'{"x": [1]}', {"kind": "sequence"}, "wrong_kind", "single vector"),
        (b'{"x": [1], "y": {"a": 1}}', {}, "bad_label", "an object"),
        (b'{"x": [1], "y": [1]}', {}, "bad_label", "y is an array"),
        (b'{"x": [1], "y": NaN}', {}, "non_finite", "y is nan"),
        (b'{"x": [1], "y": "a"}', {"numeric_label": True}, "bad_label", "must be a number"),
        (b'{"x": [1], "y": "c"}', {"classes": {"a", "b"}, "strict": True}, "unknown_class", "'c'"),
        (b'{"x": [1], "id": 7}', {}, "bad_id", "a number (7)"),
        (b'{"x": [1], "ts": "now"}', {}, "bad_ts", "'now'"),
        (b'{"x": [1], "ts": true}', {}, "bad_ts", "True"),
        (b'{"x": {"form": "a"}}', {"kind": "sentence"}, "bad_x", "array of words"),
        (b'{"x": []}', {"kind": "sentence"}, "bad_x", "array of words"),
        (b'{"x": ["a"]}', {"kind": "sentence"}, "bad_token", "x[0] is a string"),
        (b'{"x": [{"form": ["a"]}]}', {"kind": "sentence"}, "bad_token", "x[0]['form']"),
        (b'{"x": [{"feats": {"Case": 1}}]}', {"kind": "sentence"}, "bad_token", "'feats'"),
        (b'{"x": [{"form": "a"}], "y": 0}', {"kind": "sentence"}, "bad_sequence", "an array"),
        (b'{"x": [{"form": "a"}], "y": [0, 1]}', {"kind": "sentence"}, "bad_sequence", "2 heads"),
        (b'{"x": [{"form": "a"}], "y": [0.5]}', {"kind": "sentence"}, "bad_label", "integer head"),
        (b'{"x": [{"form": "a"}], "y": [true]}', {"kind": "sentence"}, "bad_label", "y[0]"),
        (b'{"x": [{}, {}], "y": [0, 3]}', {"kind": "sentence"}, "bad_label", "y[1] = 3 is not"),
        (b'{"x": [{}, {}], "y": [-1, 0]}', {"kind": "sentence"}, "bad_label", "y[0] = -1"),
        (b'{"x": [{"form": "a"}], "id": 3}', {"kind": "sentence"}, "bad_id", "a number (3)"),
        (b'{"x": {"\\ud800a": 1}}', {}, "invalid_json", "lone surrogate"),
        (b'{"x": [1], "y": "\\udfff"}', {}, "invalid_json", "lone surrogate"),
        # limits (wire.Limits): one hostile record is rejected before any work is spent on it
        (
            b'{"x": {"a": 1, "b": 2, "c": 3}}',
            {"limits": Limits(max_features=2)},
            "too_many_features",
            "3 features, the limit is 2",
        ),
        (
            b'{"x": [{"a": 1}, {"b": 1}, {"c": 1}]}',
            {"limits": Limits(max_features=2)},
            "too_many_features",
            "more than 2 distinct feature names",
        ),
        (
            b'{"x": [[1], [2], [3]]}',
            {"limits": Limits(max_tokens=2)},
            "too_many_tokens",
            "3 tokens, the limit is 2",
        ),
        (
            b'{"x": [1, 2, 3]}',
            {"limits": Limits(max_vector_length=2)},
            "vector_too_long",
            "3 values, the limit is 2",
        ),
        (
            b'{"x": [[1, 2, 3]]}',
            {"limits": Limits(max_vector_length=2)},
            "vector_too_long",
            "x[0] has 3 values",
        ),
        (
            b'{"x": {"abcdef": 1}}',
            {"limits": Limits(max_name_length=5)},
            "name_too_long",
            "6 characters ('abcdef'...), the limit is 5",
        ),
        (
            b'{"x": [1], "y": "abcdef"}',
            {"limits": Limits(max_label_length=5)},
            "label_too_long",
            "y has 6 characters",
        ),
        (
            b'{"x": [{"a": 1}], "y": ["abcdef"]}',
            {"limits": Limits(max_label_length=5)},
            "label_too_long",
            "y[0] has 6 characters",
        ),
        (
            b'{"x": [1], "y": 1' + b"0" * 400 + b"}",
            {"limits": Limits(max_label_length=20)},
            "label_too_long",
            "401 digits, the limit is 20",
        ),
        (
            b'{"x": [1], "id": "abcdef"}',
            {"limits": Limits(max_id_length=5)},
            "id_too_long",
            "id has 6 characters",
        ),
    ],
)
def test_every_rejection_has_its_reason_and_names_the_field(
    data: bytes, kw: dict[str, object], reason: str, needle: str
) -> None:
    err = reject(data, **kw)
    assert err.reason == reason
    assert needle in err.message


def test_every_reason_is_reachable_and_documented() -> None:
    # The parametrised cases above cover every reason in the bounded set (metric labels).
    covered = {
        "too_large", "invalid_utf8", "invalid_json", "not_an_object", "unknown_field",
        "missing_x", "bad_x", "non_numeric", "non_finite", "wrong_dim", "bad_sequence",
        "wrong_kind", "bad_label", "unknown_class", "bad_id", "bad_ts", "bad_token",
        "too_many_features", "too_many_tokens", "vector_too_long", "name_too_long",
        "label_too_long", "id_too_long", "value_too_large",
    }  # fmt: skip
    assert covered == set(REASONS)
    assert all(isinstance(v, str) and v for v in REASONS.values())


def test_a_sentence_is_words_of_conllu_columns_and_integer_heads() -> None:
    rec = decode(
        b'{"x": [{"form": "Ev", "upos": "NOUN", "feats": {"Case": "Loc"}, "id": 1},'
        b' {"form": "geldi", "lemma": null}], "y": [2, 0], "id": "s1"}',
        kind="sentence",
    )
    assert isinstance(rec, Record)
    assert rec.x[0]["feats"] == {"Case": "Loc"} and rec.x[1]["lemma"] is None
    assert rec.y == [2, 0] and rec.id == "s1"
    unlabelled = decode(b'{"x": [{}]}', kind="sentence")  # a word may have no column at all
    assert isinstance(unlabelled, Record) and unlabelled.y is None
    bad_tree = decode(b'{"x": [{}, {}], "y": [2, 1]}', kind="sentence")  # a cycle: the parser's
    assert isinstance(bad_tree, Record)  # to reject (it names the cycle)


def test_non_strict_mode_accepts_extra_fields_and_new_classes() -> None:
    rec = decode(b'{"x": [1], "y": "c", "extra": 1}', classes={"a", "b"})
    assert isinstance(rec, Record) and rec.y == "c"


def test_encode_roundtrip_and_refuses_nan() -> None:
    for rec in (
        Record(x={"a": 1.5}, y=True, id="1", ts=2.0),
        Record(x=[1.0, 2.0]),
        Record(x=[{"a": 1.0}, {"b": 2.0}], y=["N", "V"]),
    ):
        back = decode(encode(rec))
        assert back == rec
    assert json.loads(encode(Record(x=[1.0], y=0))) == {"x": [1.0], "y": 0}
    with pytest.raises(ValueError, match="NaN or infinity"):
        encode(Record(x=[float("nan")]))


def test_decode_never_raises_on_garbage() -> None:
    rng = random.Random(0)
    seeds = [b'{"x": {"a": 1}, "y": 1}', b'{"x": [[1], [2]], "y": [1, 2]}', b"[[[[" * 3000]
    for _ in range(3000):
        out = wire.decode(mutate(rng.choice(seeds), rng, 4), dim=1, strict=rng.random() < 0.5)
        assert isinstance(out, Record | DecodeError)
        if isinstance(out, DecodeError):
            assert out.reason in REASONS
    deep = b'{"x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert decode(deep, max_bytes=10**7).reason == "invalid_json"  # type: ignore[union-attr]


def test_a_bound_decoder_decides_as_decode() -> None:
    """``decoder(**settings)(data)`` is ``decode(data, **settings)`` (the daemon's hot loop
    binds the settings once), and ``batch_decoder(**settings)(values)`` is a ``decode`` of
    each value, on valid, hostile and mutated records, under every route."""
    rng = random.Random(1)
    seeds = [
        b'{"x": {"a": 0.5, "b": -2.5}, "y": false, "id": "r1"}',
        b'{"x": {"a": 1}, "y": 1}',
        b'{"x": [0.5, 1.5], "y": "cat", "ts": 3}',
        b'{"x": [[1], [2]], "y": [1, 2]}',
        b'{"x": [{"form": "a"}, {"form": "b"}], "y": [0, 1]}',
        b'{"x": {"a": NaN}}',
        b'{"x": {"a": 1e31}, "y": true}',
    ]
    settings: list[dict[str, object]] = [
        {},
        {"kind": "vector", "dim": 2},
        {"kind": "vector", "strict": True, "classes": frozenset({True, False, "cat"})},
        {"kind": "vector", "numeric_label": True},
        {"kind": "sequence"},
        {"kind": "sentence"},
        {"max_bytes": 30, "limits": Limits(max_features=1)},
    ]
    for kw in settings:
        bound = wire.decoder(**kw)  # type: ignore[arg-type]
        for data in [*seeds, *(mutate(rng.choice(seeds), rng, 3) for _ in range(300))]:
            want, got = wire.decode(data, **kw), bound(data)  # type: ignore[arg-type]
            assert type(got) is type(want) and got == want, (kw, data)
        assert bound(bytearray(seeds[0])) == wire.decode(seeds[0], **kw)  # type: ignore[arg-type]
        # the batch form: one call, the same answers in the same order
        mutated = (mutate(rng.choice(seeds), rng, 3) for _ in range(300))
        batch = [*seeds, bytearray(seeds[0]), *mutated]
        many = wire.batch_decoder(**kw)(batch)  # type: ignore[arg-type]
        assert len(many) == len(batch)
        for data, got in zip(batch, many, strict=True):
            want = wire.decode(bytes(data), **kw)  # type: ignore[arg-type]
            assert type(got) is type(want) and got == want, (kw, data)


def test_the_magnitude_limit_can_be_lifted_and_an_overflowing_sum_still_decodes() -> None:
    unbounded = Limits(max_abs_value=math.inf)
    rec = decode(b'{"x": [1e308, 1e308]}', limits=unbounded)  # the sum overflows, values do not
    assert isinstance(rec, Record) and rec.x == [1e308, 1e308]
    rec = decode(b'{"x": {"a": -1e308, "b": -1e308}}', limits=unbounded)
    assert isinstance(rec, Record) and rec.x == {"a": -1e308, "b": -1e308}


def test_null_is_a_missing_feature_as_for_the_river_learners() -> None:
    """One rule for ``null`` in a feature object: the daemon (wire) and the river learners both
    read it as a missing feature (it used to be a non_numeric dead letter in the daemon)."""
    from streammkl.river import MKLClassifier

    rec = decode(b'{"x": {"a": 1, "b": null}, "y": true}')
    assert isinstance(rec, Record) and rec.x == {"a": 1.0}
    clf = MKLClassifier(seed=0)
    clf.learn_one({"a": 1.0, "b": 2.0}, True)
    clf.learn_one({"a": -1.0, "b": 0.5}, False)
    assert clf.predict_proba_one({"a": 1.0, "b": None}) == clf.predict_proba_one(rec.x)
    bad = decode(b'{"x": {"b": null}, "y": 1}')
    assert isinstance(bad, DecodeError) and bad.reason == "bad_x" and "null" in bad.message
    seq = decode(b'{"x": [{"a": 1, "b": null}, {"a": 2}], "y": ["N", "V"]}')
    assert isinstance(seq, Record) and seq.x == [{"a": 1.0}, {"a": 2.0}]
    vec = decode(b'{"x": [1, null]}')  # a vector has no names: null there stays an error
    assert isinstance(vec, DecodeError) and vec.reason == "non_numeric"


@pytest.mark.parametrize(
    "text",
    [
        '{"x": {"a": 0.5, "b": -2.5}, "y": false, "id": "r1"}',
        '{"x": {"a": 0.5}, "y": "spam"}',
        '{"x": {"a": 0.5}, "extra": [1, 2]}',  # non-strict: an unknown field is ignored
        '{"x": {"a": 1e31}, "y": true}',  # beyond max_abs_value: value_too_large
        '{"x": {"a": -1e31}}',
        '{"x": {"a": 1}, "y": true}',  # an integer value: converted to a float
        '{"x": {"a": 0.5}, "y": 3}',  # an integer label: checked as a label
        '{"x": {"a": 0.5}, "y": 1.5}',
        '{"x": {"a": 0.5}, "id": 7}',  # bad_id
        '{"x": {"a": 0.5}, "ts": 1.5}',
        '{"x": {}, "y": true}',  # bad_x
        '{"x": {"a": null, "b": 0.5}}',  # a missing feature
        '{"x": {"a": "1"}}',  # non_numeric
        '{"x": {"a": true}}',
        '{"x": [0.5, 1.5], "y": true}',  # a dense vector
        '{"y": true}',  # missing_x
        "[1, 2]",  # not_an_object
        '{"x": {"a": NaN}}',  # orjson refuses NaN: the standard library's parse
    ],
)
def test_the_plain_record_fast_path_decides_as_the_general_walk(text: str) -> None:
    """Short records take a one-pass route (``_plain``); whatever it accepts is what the
    general walk (``_decode``) gives, and what it leaves goes there (same outcome)."""
    from streammkl.wire import codec

    raw = text.encode()
    limits = Limits(max_features=4)
    assert len(raw) <= limits.short_record
    fast = codec._plain(raw, limits)
    try:
        slow: Record | str = codec._decode(raw, None, None, False, 1 << 20, "vector", False, limits)
    except Exception as exc:  # a rejection (the general walk raises it as _Reject)
        slow = getattr(exc, "reason", repr(exc))
    if fast is not None:
        assert fast == slow
    out = decode(raw, kind="vector", limits=limits)
    assert (out.reason if isinstance(out, DecodeError) else out) == slow
    too_many = b'{"x": {"a": 0.5, "b": 0.5, "c": 0.5, "d": 0.5, "e": 0.5}}'
    assert codec._plain(too_many, limits) is None
    assert reject(too_many, limits=limits).reason == "too_many_features"
