"""The CoNLL-U replay: words and heads per sentence, the split rule, into Kafka, to the parser."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulators import cli, get
from simulators.conllu_replay import ConlluReplay
from streammkl.structured import DependencyParser
from streammkl.structured.conll import gold_heads, read_conllu
from streammkl.structured.trees import words_of
from tests.test_simulators_kafka import consume_all

SAMPLE = str(Path(__file__).resolve().parent / "data" / "sample.conllu")


def test_one_record_per_sentence_with_its_words_and_heads():
    sim = get("conllu", path=SAMPLE)
    gold = read_conllu(SAMPLE)
    assert len(sim) == len(gold) == 12
    for (record, info), sentence in zip(sim.annotated(), gold, strict=True):
        words = words_of(sentence)  # multiword ranges and empty nodes are not words
        assert [w["form"] for w in record.x] == [w["form"] for w in words]
        assert record.y == gold_heads(sentence) == info["heads"]
        assert info["sent_id"] == sentence.metadata["sent_id"]
    birds = sim.take(3)[2].x
    assert birds[0] == {"form": "Birds", "lemma": "bird", "upos": "NOUN", "feats": "Number=Plur"}
    assert all(isinstance(v, str) for w in sim.take(12)[0].x for v in w.values())
    truth = sim.ground_truth()
    assert truth["n_sentences"] == 12 and truth["n_words"] == sum(len(r.y) for r in sim)


def test_splits_order_and_predict_only_records():
    every = [r.y for r in ConlluReplay(path=SAMPLE)]
    assert [r.y for r in ConlluReplay(path=SAMPLE, split="train")] == [
        y for i, y in enumerate(every) if i % 10 < 8
    ]
    assert [r.y for r in ConlluReplay(path=SAMPLE, split="dev")] == [every[8]]
    assert [r.y for r in ConlluReplay(path=SAMPLE, split="test")] == [every[9]]
    shuffled = [r.y for r in ConlluReplay(path=SAMPLE, shuffle=True, seed=3)]
    assert shuffled != every and sorted(map(tuple, shuffled)) == sorted(map(tuple, every))
    assert all(r.y is None for r in ConlluReplay(path=SAMPLE, labelled=False))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({}, "give the CoNLL-U file"),
        ({"path": "/nonexistent.conllu"}, "no such file"),
        ({"path": SAMPLE, "split": "validation"}, "split"),
        ({"path": SAMPLE, "n_samples": 99}, "has 12 sentences"),
    ],
)
def test_bad_parameters_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ConlluReplay(**kwargs)


def test_the_parser_learns_from_the_replayed_records():
    model = DependencyParser(templates=("h.upos+m.upos+dir+dist", "h.form+m.form"))
    records = list(ConlluReplay(path=SAMPLE, split="train"))
    for _ in range(5):
        for record in records:
            model.learn_one(record.x, record.y)
    right = sum(p == h for r in records for p, h in zip(model.predict_one(r.x), r.y, strict=True))
    assert right / sum(len(r.y) for r in records) > 0.9


def test_cli_writes_json_lines(tmp_path, capsys):
    out = tmp_path / "sentences.jsonl"
    assert cli.main(["conllu", "--path", SAMPLE, "--out", str(out), "--no-progress"]) == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 12
    first = json.loads(lines[0])
    assert first["y"] == [2, 3, 0, 3] and first["x"][3] == {"form": ".", "lemma": ".",
                                                              "upos": "PUNCT"}  # fmt: skip
    assert json.loads((tmp_path / "sentences.truth.json").read_text())["task"] == "parsing"


@pytest.mark.kafka
@pytest.mark.xdist_group("kafka")
def test_replay_into_kafka(kafka_bootstrap):
    topic = "conllu-replay"
    argv = ["conllu", "--path", SAMPLE, "--bootstrap-servers", kafka_bootstrap, "--topic", topic,
            "--no-progress"]  # fmt: skip
    assert cli.main(argv) == 0
    messages = sorted(consume_all(kafka_bootstrap, topic, 12), key=lambda m: m.offset)
    assert len(messages) == 12
    sent = [json.loads(m.value) for m in messages]
    want = list(ConlluReplay(path=SAMPLE))
    assert [m["y"] for m in sent] == [r.y for r in want]
    assert [m["x"] for m in sent] == [r.x for r in want]
    assert [m["id"] for m in sent] == [f"conllu:0:{i}" for i in range(12)]
