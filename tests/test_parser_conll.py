"""CoNLL-U reading, attachment scores, the Turkish Web Treebank split, and a real-data smoke run."""

from __future__ import annotations

import io

import numpy as np
import pytest

from streammkl.structured import DependencyParser
from streammkl.structured.conll import (
    attachment_scores,
    gold_heads,
    read_conllu,
    turkish_files,
    turkish_treebank,
)
from streammkl.structured.trees import check_heads, is_projective, words_of

TEXT = """# sent_id = s1
# text = Evde kitap okudum.
1-2\tEvde kitap\t_\t_\t_\t_\t_\t_\t_\t_
1\tEv\tev\tNOUN\tNN\tCase=Loc\t2\tig\t_\tSpaceAfter=No
2\tde\t_\tNOUN\tNN\t_\t4\tnpadvmod\t_\t_
2.1\tkitap\tkitap\tNOUN\t_\t_\t_\t_\t4:obj\t_
3\tkitap\tkitap\tNOUN\tNN\t_\t4\tdobj\t_\t_
4\tokudum\toku\tVERB\tVB\t_\t0\troot\t_\tSpaceAfter=No
5\t.\t.\tPUNCT\t.\t_\t4\tp\t_\t_

"""


def test_reading_skips_multiword_ranges_and_empty_nodes():
    sentences = read_conllu(io.StringIO(TEXT))
    assert len(sentences) == 1
    words = words_of(sentences[0])
    assert [w["form"] for w in words] == ["Ev", "de", "kitap", "okudum", "."]
    assert gold_heads(sentences[0]) == [2, 4, 4, 0, 4]


def test_attachment_scores_with_and_without_ig_and_punctuation():
    sentence = read_conllu(io.StringIO(TEXT))[0]
    # right: the ig arc (1 <- 2) and the punctuation (5 <- 4); wrong: 2, 3, 4
    scores = attachment_scores([sentence], [[2, 3, 2, 0, 4]])
    assert scores["all"] == pytest.approx(100 * 3 / 5)  # words 1, 4, 5
    assert scores["no_punct"] == pytest.approx(100 * 2 / 4)
    assert scores["no_ig"] == pytest.approx(100 * 2 / 4)
    assert scores["no_ig_punct"] == pytest.approx(100 * 1 / 3)
    with pytest.raises(ValueError, match="2 predicted heads"):
        attachment_scores([sentence], [[0, 1]])


def test_tree_checks_and_projectivity():
    assert check_heads([2, 0, 2], 3) == [2, 0, 2]
    assert is_projective([2, 0, 2])
    assert not is_projective([3, 4, 0, 3])
    with pytest.raises(ValueError, match="cycle through words 1 -> 2 -> 1"):
        check_heads([2, 1, 0], 3)
    assert check_heads([0, 0], 2, single_root=False) == [0, 0]
    with pytest.raises(TypeError, match="list of integers"):
        check_heads("021", 3)


def test_the_turkish_treebank_split_is_the_packages_own():
    files = turkish_files()
    web_total = sum(
        1 for line in files["web"].open(encoding="utf-8") if line.startswith("# sent_id")
    )
    wiki_total = sum(
        1 for line in files["wiki"].open(encoding="utf-8") if line.startswith("# sent_id")
    )
    assert (web_total, wiki_total) == (2541, 2310)
    dev = turkish_treebank("dev", sections=("web",))
    test = turkish_treebank("test", sections=("web",))
    assert len(dev) == len(range(8, web_total, 10)) and len(test) == len(range(9, web_total, 10))
    everything = read_conllu(files["web"])
    assert [s.metadata["sent_id"] for s in dev[:3]] == [
        everything[i].metadata["sent_id"] for i in (8, 18, 28)
    ]
    with pytest.raises(ValueError, match="split"):
        turkish_treebank("validation")


def test_real_data_smoke_run():
    """A few hundred Turkish sentences: the parser learns far beyond attaching to a neighbour."""
    train = turkish_treebank("train", sections=("web",))[:400]
    dev = turkish_treebank("dev", sections=("web",))[:80]
    model = DependencyParser(average=True)
    for sentence in train:
        model.learn_one(sentence, gold_heads(sentence))
    predicted = [model.predict_one(s) for s in dev]
    for s, heads in zip(dev, predicted, strict=True):
        check_heads(heads, len(words_of(s)))
    uas = attachment_scores(dev, predicted)
    right_neighbour = attachment_scores(dev, [[i + 2 for i in range(len(s))] for s in dev])
    assert uas["all"] > 70.0 and uas["no_ig_punct"] > 55.0
    assert uas["no_ig_punct"] > right_neighbour["no_ig_punct"] + 20.0
    assert len(model.active_templates) > 0 and model.n_nonzero > 10_000
    stats = model.collisions(train[:100])
    assert all(0.0 <= v["collision_rate"] < 0.2 for v in stats.values())
    assert np.mean([v["collision_rate"] for v in stats.values()]) < 0.05
