"""UDPipe 1 (Straka & Straková 2017, PyPI ``ufal.udpipe``) as the parsing peer: train its parser
(Parsito, a transition-based neural parser) on CoNLL-U, parse with the given POS.

Both parsers get the same input: the gold CoNLL-U columns of the treebank (form, lemma, UPOS,
XPOS, FEATS), never the heads of the sentences they parse. UDPipe's tagger is not trained
(``tagger=none``), so its parser reads the gold tags ("from gold data" in its log).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import conllu


def _serialize(sentences: Sequence[Any], keep_tree: bool = True) -> str:
    out = []
    for sentence in sentences:
        copy = conllu.TokenList([dict(t) for t in sentence], metadata=sentence.metadata)
        if not keep_tree:
            for token in copy:
                if isinstance(token["id"], int):
                    token["head"], token["deprel"] = 0, "_"
        out.append(copy.serialize())
    return "".join(out)


def _sentences(text: str) -> Any:
    from ufal import udpipe

    reader = udpipe.InputFormat.newConlluInputFormat()
    reader.setText(text)
    out = udpipe.Sentences()
    error = udpipe.ProcessingError()
    sentence = udpipe.Sentence()
    while reader.nextSentence(sentence, error):
        out.push_back(sentence)
        sentence = udpipe.Sentence()
    if error.occurred():
        raise RuntimeError(f"UDPipe could not read the CoNLL-U: {error.message}")
    return out


def train(train: Sequence[Any], heldout: Sequence[Any], parser_options: str) -> tuple[bytes, float]:
    """``(model bytes, training seconds)``; ``parser_options`` as UDPipe's ``--parser``."""
    from ufal import udpipe

    train_s, heldout_s = _sentences(_serialize(train)), _sentences(_serialize(heldout))
    error = udpipe.ProcessingError()
    start = time.perf_counter()
    model = udpipe.Trainer.train(
        "morphodita_parsito", train_s, heldout_s, "none", "none", parser_options, error
    )
    seconds = time.perf_counter() - start
    if error.occurred():
        raise RuntimeError(f"UDPipe training failed: {error.message}")
    return bytes(model), seconds


def parse(model_bytes: bytes, sentences: Sequence[Any]) -> tuple[list[list[int]], float]:
    """``(heads per sentence, seconds)``: UDPipe parses the sentences with their given tags."""
    from ufal import udpipe

    with tempfile.NamedTemporaryFile(suffix=".udpipe", delete=False) as fh:
        fh.write(model_bytes)
        path = fh.name
    try:
        model = udpipe.Model.load(path)
    finally:
        os.unlink(path)
    if model is None:
        raise RuntimeError("UDPipe could not load the trained model")
    parsed = _sentences(_serialize(sentences, keep_tree=False))
    start = time.perf_counter()
    heads = []
    for i in range(len(parsed)):
        sentence = parsed[i]
        model.parse(sentence, udpipe.Model.DEFAULT)
        heads.append([sentence.words[j].head for j in range(1, len(sentence.words))])
    return heads, time.perf_counter() - start
