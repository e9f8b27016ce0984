"""Feature templates as data, sentences as hashed attribute tables, arc scores and arc features."""

from __future__ import annotations

import numpy as np
import pytest

from streammkl.core import _numba as nb
from streammkl.structured.templates import (
    DEFAULT_TEMPLATES,
    TemplateSet,
    attribute,
    parse_template,
)

SENTENCE = [
    {"id": 1, "form": "Evde", "lemma": "ev", "upos": "NOUN", "feats": {"Case": "Loc"},
     "misc": {"SpaceAfter": "No"}},
    {"id": 2, "form": "kitap", "lemma": "kitap", "upos": "NOUN", "feats": None, "misc": None},
    {"id": 3, "form": "okudum", "upos": "VERB", "xpos": "Verb"},  # no lemma, feats, misc
    {"id": 4, "form": ".", "lemma": ".", "upos": "PUNCT"},
]  # fmt: skip


def test_templates_parse_into_atoms_and_sizes():
    t = parse_template("h.upos+h+1.upos+m-1.upos+m.upos+dir+dist")
    assert t.atoms == (
        ("h", 0, "upos"), ("h", 1, "upos"), ("m", -1, "upos"), ("m", 0, "upos"),
        ("dir", 0, ""), ("dist", 0, ""),
    )  # fmt: skip
    assert parse_template("h.form+m.form@12").bits == 12
    assert parse_template("h.form+m.form").bits == 20  # capped by the default max_bits
    assert parse_template("h.form+m.form", max_bits=16).bits == 16
    assert parse_template("dir+dist").bits == 8  # the floor
    assert parse_template("m.feats.Case+b.upos").atoms[1] == ("b", 0, "upos")
    assert len(DEFAULT_TEMPLATES) == len(set(DEFAULT_TEMPLATES)) == 63


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("h.word", "bad atom"),
        ("h+3.upos", "bad atom"),
        ("x.upos", "bad atom"),
        ("b+1.upos", "no offset"),
        ("h.upos+b.upos+b.form", "at most one"),
        ("h.upos+h.upos", "repeated"),
        ("h.upos@0", "@bits"),
        ("h.upos@x", "@bits"),
        ("", "non-empty"),
    ],
)
def test_bad_templates_are_named(spec, match):
    with pytest.raises(ValueError, match=match):
        parse_template(spec)


def test_a_template_set_refuses_the_same_atoms_twice():
    with pytest.raises(ValueError, match="twice"):
        TemplateSet(["h.upos+m.upos", "m.upos+h.upos"])
    with pytest.raises(ValueError, match="non-empty"):
        TemplateSet([])


def test_attributes_of_conllu_tokens_with_missing_columns():
    word = SENTENCE[0]
    assert attribute(word, "form") == "Evde"
    assert attribute(word, "lower") == "evde"
    assert attribute(word, "suffix3") == "vde"
    assert attribute(word, "prefix2") == "ev"
    assert attribute(word, "feats") == "Case=Loc"
    assert attribute(word, "feats.Case") == "Loc"
    assert attribute(word, "misc.SpaceAfter") == "No"
    assert attribute(SENTENCE[2], "lemma") == "_"
    assert attribute(SENTENCE[2], "feats.Case") == "_"
    assert attribute(SENTENCE[1], "feats") == "_"
    # the same values given as CoNLL-U strings, or under the older column names
    assert attribute({"feats": "Case=Loc|Number=Sing"}, "feats.Case") == "Loc"
    assert attribute({"upostag": "NOUN"}, "upos") == "NOUN"


def test_equal_attributes_hash_equally_whatever_their_form():
    ts = TemplateSet(["h.feats+m.upos", "h.feats.Case+m.upos"])
    as_dict = ts.encode([{"feats": {"Case": "Loc", "Number": "Sing"}, "upos": "NOUN"}])
    as_text = ts.encode([{"feats": "Case=Loc|Number=Sing", "upostag": "NOUN"}])
    np.testing.assert_array_equal(as_dict, as_text)
    assert as_dict.shape == (1 + 1 + 2 * nb.PAD, len(ts.columns))
    other = ts.encode([{"feats": {"Case": "Dat"}, "upos": "NOUN"}])
    assert not np.array_equal(as_dict, other)
    # the root and the boundaries differ from every word
    assert len({int(v) for v in as_dict[:, 0]}) == 4


def _set_and_table():
    ts = TemplateSet(
        ["h.form+m.upos+dir+dist", "h.upos+b.upos+m.upos", "h-1.upos+m+2.lemma", "dir+dist@8",
         "m.misc.SpaceAfter+dir"], seed=3
    )  # fmt: skip
    return ts, ts.encode(SENTENCE)


def _arc_sum(ts, tok, n, h, m, w, coef, u):
    size = ts.max_features(1, n)
    keys = np.empty(size, dtype=np.uint64)
    idx = np.empty(size, dtype=np.int64)
    blk = np.empty(size, dtype=np.int64)
    val = np.empty(size)
    c = nb.arc_features(tok, n, np.array([h]), np.array([m]), np.array([1.0]), *ts.arrays(),
                        keys, idx, blk, val)  # fmt: skip
    total = sum(coef[blk[i]] * w[idx[i]] - (u[idx[i]] if u.size else 0.0) for i in range(c))
    return total, c, idx[:c], blk[:c]


@pytest.mark.parametrize("averaged", [False, True])
def test_arc_scores_are_the_sums_of_the_arcs_features(averaged):
    ts, tok = _set_and_table()
    n = len(SENTENCE)
    rng = np.random.default_rng(0)
    w = rng.normal(size=ts.width)
    u = rng.normal(size=ts.width) if averaged else np.zeros(0)
    coef = rng.uniform(0.5, 2.0, size=len(ts.names))
    live = np.array([True, True, True, False, True])
    out = np.full((n + 1, n + 1), np.nan)
    nb.arc_scores(tok, n, *ts.arrays(), live, coef, w, u, out)
    coef_live = np.where(live, coef, 0.0)
    for h in range(n + 1):
        assert out[h, h] == 0.0 and out[h, 0] == 0.0
        for m in range(1, n + 1):
            if h == m:
                continue
            u_live = u * np.repeat(live, ts.sizes) if averaged else u
            total, count, idx, blk = _arc_sum(ts, tok, n, h, m, w, coef_live, u_live)
            assert out[h, m] == pytest.approx(total, abs=1e-12)
            between = max(abs(h - m) - 1, 0)
            assert count == 4 + between  # one feature per template, one per in-between word
            assert np.all(idx >= ts.off[blk]) and np.all(idx < ts.off[blk + 1])


def test_features_depend_on_the_seed_and_on_the_arc():
    ts, tok = _set_and_table()
    other = TemplateSet(ts.specs, seed=4)
    n = len(SENTENCE)
    w = np.zeros(ts.width)
    _, _, a, _ = _arc_sum(ts, tok, n, 3, 1, w, np.ones(5), np.zeros(0))
    _, _, b, _ = _arc_sum(other, other.encode(SENTENCE), n, 3, 1, w, np.ones(5), np.zeros(0))
    _, _, c, _ = _arc_sum(ts, tok, n, 1, 3, w, np.ones(5), np.zeros(0))
    assert not np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_compiled_arc_loops_match_python(monkeypatch):
    """Every compiled arc loop against its Python original, the helpers it calls included."""
    from streammkl.core._numba import arcs

    ts, tok = _set_and_table()
    n = len(SENTENCE)
    rng = np.random.default_rng(1)
    w, u = rng.normal(size=ts.width), rng.normal(size=ts.width)
    live, coef = np.ones(5, dtype=bool), rng.uniform(size=5)
    size = ts.max_features(3, n)
    arcs_in = (np.array([0, 4, 2]), np.array([3, 1, 4]), np.array([1.0, -1.0, 1.0]))
    seed, _, _, atoms, n_atoms, n_head, _ = ts.arrays()

    def run(mod):
        scores = np.zeros((n + 1, n + 1))
        mod.arc_scores(tok, n, *ts.arrays(), live, coef, w, u, scores)
        outs = [np.zeros(size, np.uint64), np.zeros(size, np.int64), np.zeros(size, np.int64),
                np.zeros(size)]  # fmt: skip
        count = mod.arc_features(tok, n, *arcs_in, *ts.arrays(), *outs)
        helpers = [mod.distance_bucket(d) for d in range(1, 15)]
        helpers.append(mod.finish(mod.mix(np.uint64(12345), np.uint64(7))))
        for t in range(len(ts.names)):
            p = mod.head_prefix(t, 2, tok, n, seed, atoms, n_head)
            helpers += [p, mod.arc_key(t, np.uint64(p), 2, 4, 3, tok, n, atoms, n_atoms, n_head)]
            helpers += [mod.atom_value(*atoms[t, j], 2, 4, 3, tok, n) for j in range(n_atoms[t])]
        return scores, [x[:count] for x in outs], [int(v) for v in helpers]

    compiled = run(arcs)
    for name in ("mix", "finish", "distance_bucket", "atom_value", "arc_key", "head_prefix",
                 "arc_scores", "arc_features"):  # fmt: skip
        monkeypatch.setattr(arcs, name, getattr(arcs, name).py_func)
    with np.errstate(over="ignore"):  # uint64 products wrap, as in the compiled code
        python = run(arcs)
    np.testing.assert_allclose(compiled[0], python[0], rtol=1e-12)
    for x, y in zip(compiled[1], python[1], strict=True):
        np.testing.assert_array_equal(x, y)
    assert compiled[2] == python[2]
    assert [nb.distance_bucket(d) for d in (1, 5, 6, 10, 11, 40)] == [1, 5, 6, 6, 7, 7]
