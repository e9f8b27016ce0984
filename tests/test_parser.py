"""DependencyParser: learning planted treebanks, validation, beta reporting, persistence."""

from __future__ import annotations

import numpy as np
import pytest

from streammkl.core import regularizers as R
from streammkl.core import schedules as S
from streammkl.structured import DependencyParser, StateError
from streammkl.structured.trees import check_heads
from tests.planted import non_projective_count, planted_treebank

GOOD = "h.upos+m.upos+dir+dist"
NOISE = ("m.misc.Noise+dir+dist", "h.misc.Noise+m.misc.Noise")


def _uas(model, bank):
    return float(np.mean([np.mean(np.equal(model.predict_one(s), h)) for s, h in bank]))


@pytest.fixture(scope="module")
def banks():
    return planted_treebank(300, seed=0), planted_treebank(100, seed=1)


def test_learns_a_planted_non_projective_treebank(banks):
    train, test = banks
    assert non_projective_count(train) > 50  # many gold trees are non-projective
    adjacent = float(np.mean([np.mean(np.equal(range(len(h)), h)) for _, h in test]))
    model = DependencyParser(templates=(GOOD, "h.upos+m.upos"), average=True)
    for _ in range(3):
        for s, h in train:
            model.learn_one(s, h)
    uas = _uas(model, test)
    assert uas > 0.75 > adjacent + 0.3  # far above attaching each word to the previous one
    assert model.t == 900
    for s, _ in test[:20]:  # decoded trees are trees with one root arc
        check_heads(model.predict_one(s), len(s), single_root=True)


def test_mkl_ranks_the_planted_template_above_noise_templates(banks):
    train, test = banks
    model = DependencyParser(templates=(GOOD, *NOISE), regularizer=R.SquaredGroupLasso(0.01),
                             average=True)  # fmt: skip
    for _ in range(3):
        for s, h in train:
            model.learn_one(s, h)
    beta = model.kernel_weights
    assert set(beta) == {GOOD, *NOISE}
    assert sum(beta.values()) == pytest.approx(1.0)
    assert beta[GOOD] > 0.7 and all(beta[GOOD] > 5 * beta[n] for n in NOISE)
    assert _uas(model, test) > 0.75
    norms = model.block_norms
    assert max(norms, key=norms.get) == GOOD


def test_learn_predict_one_predicts_before_learning(banks):
    train, _ = banks
    a = DependencyParser(templates=(GOOD,))
    b = DependencyParser(templates=(GOOD,))
    for s, h in train[:50]:
        before = a.predict_one(s)
        assert b.learn_predict_one(s, h) == before
        a.learn_one(s, h)
        assert a.digest() == b.digest()
    s, _ = train[60]
    assert b.learn_predict_one(s) == a.predict_one(s)  # no heads: predict only
    assert a.digest() == b.digest()


def test_learn_predict_one_with_averaging_predicts_with_the_average(banks):
    train, _ = banks
    a = DependencyParser(templates=(GOOD,), average=True)
    b = DependencyParser(templates=(GOOD,), average=True)
    for s, h in train[:40]:
        assert b.learn_predict_one(s, h) == a.predict_one(s)
        a.learn_one(s, h)
    assert a.digest() == b.digest()


def test_the_hinge_loss_is_the_structured_hinge_with_hamming_cost(banks):
    train, _ = banks
    model = DependencyParser(templates=(GOOD,))
    s, h = train[0]
    assert model.loss_one(s, h) == len(h)  # all-zero scores: every wrong tree costs its errors
    for s2, h2 in train[:100]:
        model.learn_one(s2, h2)
    loss, reg = model.objective_terms(s, h)
    scores = model.arc_scores(s, averaged=False)
    mods = np.arange(1, len(h) + 1)
    gold = scores[h, mods].sum()
    best = model.predict_one(s)
    assert loss >= scores[best, mods].sum() + np.sum(np.not_equal(best, h)) - gold - 1e-9
    assert loss >= 0.0 and reg == pytest.approx(model.regularization_value()) and reg > 0.0


@pytest.mark.parametrize(
    ("heads", "match"),
    [
        ([2, 3, 1], "cycle"),
        ([0, 1], "wrong length"),
        ([0, 1, 7], "unknown head index 7"),
        ([0, 1, -1], "unknown head index -1"),
        ([0, 2, 2], "its own head"),
        ([0, 0, 1], "2 words attach to the root"),
        ([0, 1, 1.5], "not an integer"),
    ],
)
def test_bad_gold_trees_are_refused_and_change_nothing(heads, match):
    model = DependencyParser(templates=(GOOD,))
    sentence = [{"upos": "NOUN"}, {"upos": "VERB"}, {"upos": "DET"}]
    digest = model.digest()
    with pytest.raises(ValueError, match=match):
        model.learn_one(sentence, heads)
    with pytest.raises(ValueError, match=match):
        model.learn_predict_one(sentence, heads)
    assert model.digest() == digest and model.t == 0


def test_bad_sentences_are_refused():
    model = DependencyParser(templates=(GOOD,))
    with pytest.raises(ValueError, match="no words"):
        model.predict_one([])
    with pytest.raises(TypeError, match="list of token dicts"):
        model.predict_one("a sentence")
    with pytest.raises(TypeError, match="token 1"):
        model.predict_one([{"form": "a"}, "b"])
    with pytest.raises(ValueError, match="id 3 where 2"):
        model.predict_one([{"id": 1}, {"id": 3}])


def test_multiword_ranges_empty_nodes_and_missing_columns():
    import conllu

    text = (
        "1-2\tvámonos\t_\t_\t_\t_\t_\t_\t_\t_\n"
        "1\tvamos\tir\tVERB\t_\t_\t0\troot\t_\t_\n"
        "2\tnos\tnosotros\tPRON\t_\t_\t1\tobj\t_\t_\n"
        "2.1\tvamos\tir\tVERB\t_\t_\t_\t_\t1:conj\t_\n"
        "3\tya\tya\tADV\t_\t_\t1\tadvmod\t_\t_\n\n"
    )
    sentence = conllu.parse(text)[0]
    model = DependencyParser()
    model.learn_one(sentence, [0, 1, 1])
    assert len(model.predict_one(sentence)) == 3
    bare = [{"form": "vamos"}, {}, {"upos": "ADV"}]  # any column may be missing
    assert len(model.predict_one(bare)) == 3


def test_configuration_errors():
    with pytest.raises(ValueError, match="single coordinates"):
        DependencyParser(regularizer=R.L1(0.1))
    with pytest.raises(ValueError, match="radius"):
        DependencyParser(radius=0.0)
    with pytest.raises(ValueError, match="max_hash_bits"):
        DependencyParser(max_hash_bits=40)
    with pytest.raises(ValueError, match="bad atom"):
        DependencyParser(templates=("h.upos+q.form",))

    class PerBlock(S.InvSqrt):  # a schedule with one step per block (AdaGrad-like)
        adaptive = True

    with pytest.raises(ValueError, match="its own step"):
        DependencyParser(schedule=PerBlock())


def test_save_load_resumes_bit_for_bit(tmp_path, banks):
    train, test = banks
    model = DependencyParser(templates=(GOOD, *NOISE), average=True, radius=50.0,
                             schedule=S.InvSqrt(0.5))  # fmt: skip
    for s, h in train[:100]:
        model.learn_one(s, h)
    path = tmp_path / "parser.npz"
    model.save(str(path))
    twin = DependencyParser.load(str(path))
    assert twin.digest() == model.digest()
    assert twin.config() == model.config()
    for s, h in train[100:150]:
        model.learn_one(s, h)
        twin.learn_one(s, h)
    assert twin.digest() == model.digest()
    assert twin.predict_many(s for s, _ in test[:10]) == model.predict_many(s for s, _ in test[:10])
    _, arrays = model.to_state()
    assert arrays["w_index"].size == model.n_nonzero < model.n_features  # stored sparsely
    copy = model.clone(include_state=True)
    assert copy.digest() == model.digest()
    fresh = model.clone()
    assert fresh.t == 0 and fresh.n_nonzero == 0


def test_corrupt_or_foreign_states_are_refused(tmp_path):
    model = DependencyParser(templates=(GOOD,))
    meta, arrays = model.to_state()
    with pytest.raises(StateError, match="not a DependencyParser"):
        DependencyParser.from_state({**meta, "format": "other"}, arrays)
    with pytest.raises(StateError, match="newer"):
        DependencyParser.from_state({**meta, "version": 99}, arrays)
    with pytest.raises(StateError, match="scale"):
        DependencyParser.from_state(meta, {**arrays, "scale": np.zeros(3)})
    path = tmp_path / "junk.npz"
    path.write_bytes(b"not a zip")
    with pytest.raises(StateError, match="corrupt"):
        DependencyParser.load(str(path))


def test_introspection():
    model = DependencyParser(templates=("h.upos+m.upos@10", "dir+dist"))
    assert model.hash_sizes == {"h.upos+m.upos": 1024, "dir+dist": 256}
    assert model.n_features == 1280
    assert model.names == ["h.upos+m.upos", "dir+dist"]
    assert model.kernel_weights == {"h.upos+m.upos": 0.0, "dir+dist": 0.0}
    assert "2 templates" in repr(model)
    sentence = [{"upos": "NOUN"}, {"upos": "VERB"}]
    model.learn_one(sentence, [2, 0])
    assert model.active_templates == ["h.upos+m.upos", "dir+dist"]
    stats = model.collisions([sentence], [[2, 0]])
    assert stats["dir+dist"] == {"size": 256, "features": 2, "buckets": 2, "collision_rate": 0.0}


def test_l2_is_the_plain_model_with_equal_weights(banks):
    train, _ = banks
    model = DependencyParser(templates=(GOOD, *NOISE), regularizer=R.L2(1e-4))
    for s, h in train[:50]:
        model.learn_one(s, h)
    assert set(model.kernel_weights.values()) == {1 / 3}
