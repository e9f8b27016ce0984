"""Replay of a CoNLL-U treebank, one record per sentence, for the dependency parser.

A record's ``x`` is the sentence's words (multiword-token ranges and empty nodes dropped), each a
dict of the CoNLL-U input columns it has (``form``, ``lemma``, ``upos``, ``xpos``, ``feats``,
``misc``; ``feats``/``misc`` as their CoNLL-U strings, ``Case=Loc|Number=Sing``); ``y`` is the
gold heads (``labelled=True``) or absent (predict-only records). ``split`` keeps the sentences of
one part of the rule of the Turkish Web Treebank package (sentence ``i`` is ``train`` if
``i % 10 < 8``, ``dev`` if ``i % 10 == 8``, ``test`` if ``i % 10 == 9``), or all of them.

Examples
--------
>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "tiny.conllu")
>>> _ = open(path, "w").write("1\\tEv\\tev\\tNOUN\\t_\\tCase=Loc\\t2\\tobl\\t_\\t_\\n"
...                           "2\\tgeldi\\tgel\\tVERB\\t_\\t_\\t0\\troot\\t_\\t_\\n\\n")
>>> rec = ConlluReplay(path=path).take(1)[0]
>>> rec.x[0], rec.y
({'form': 'Ev', 'lemma': 'ev', 'upos': 'NOUN', 'feats': 'Case=Loc'}, [2, 0])
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from typing import Any

import conllu
import numpy as np
from conllu.serializer import serialize_field

from .base import Param, Scenario, check_int, child_rng

__all__ = ["ConlluReplay", "read_sentences"]

SPLITS = ("all", "train", "dev", "test")
COLUMNS = ("form", "lemma", "upos", "xpos", "feats", "misc")
_TAG_ORDER = 1
_PARAMS = {
    "path": Param("str", "", "the CoNLL-U file to replay (required)"),
    "split": Param(
        "str", "all", "all, or the sentences i with i % 10 < 8 (train), 8 (dev), 9 (test)"
    ),
    "labelled": Param("bool", True, "send the gold heads (false: predict-only records)"),
    "shuffle": Param("bool", False, "replay in a seeded random order instead of the file's"),
    "n_samples": Param("int", None, "replay only the first n sentences (default: all)"),
}


@functools.lru_cache(maxsize=4)
def _read(
    path: str, mtime: float
) -> tuple[tuple[str, tuple[dict[str, str], ...], tuple[int, ...]], ...]:
    out = []
    with open(path, encoding="utf-8") as fh:
        for i, sentence in enumerate(conllu.parse_incr(fh)):
            words, heads = [], []
            for token in sentence:
                if not isinstance(token["id"], int):  # multiword range or empty node
                    continue
                word = {}
                for column in COLUMNS:
                    value = token.get(column)
                    if value is not None and value != "_":
                        word[column] = value if isinstance(value, str) else serialize_field(value)
                words.append(word)
                if token.get("head") is None:
                    raise ValueError(f"{path}: sentence {i + 1}, word {token['id']} has no head")
                heads.append(int(token["head"]))
            sent_id = sentence.metadata.get("sent_id", str(i + 1))
            out.append((sent_id, tuple(words), tuple(heads)))
    return tuple(out)


def read_sentences(
    path: str,
) -> tuple[tuple[str, tuple[dict[str, str], ...], tuple[int, ...]], ...]:
    """``(sent_id, words, heads)`` of every sentence of a CoNLL-U file (cached per file version)."""
    return _read(os.fspath(path), os.path.getmtime(path))


class ConlluReplay(Scenario):
    """A CoNLL-U treebank, one record per sentence: its words and (labelled) gold heads."""

    name, task = "conllu", "parsing"
    params = _PARAMS

    def __init__(
        self,
        seed: int = 0,
        path: str = "",
        split: str = "all",
        labelled: bool = True,
        shuffle: bool = False,
        n_samples: int | None = None,
    ) -> None:
        if not path:
            raise ValueError("path: give the CoNLL-U file to replay (--path FILE.conllu)")
        if not os.path.isfile(path):
            raise ValueError(f"path: no such file {path!r}")
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        for name, flag in (("labelled", labelled), ("shuffle", shuffle)):
            if not isinstance(flag, bool):
                raise TypeError(f"{name} must be a boolean, got {flag!r}")
        self.path, self.split, self.labelled, self.shuffle = str(path), split, labelled, shuffle
        keep = {"all": range(10), "train": range(8), "dev": (8,), "test": (9,)}[split]
        self.rows = [s for i, s in enumerate(read_sentences(self.path)) if i % 10 in keep]
        if not self.rows:
            raise ValueError(f"{path}: no sentences in split {split!r}")
        total = len(self.rows)
        if n_samples is not None:
            n_samples = check_int("n_samples", n_samples, 1)
            if n_samples > total:
                raise ValueError(f"n_samples: {path} has {total} sentences in {split!r}")
        super().__init__(seed, total if n_samples is None else n_samples)
        self.n_samples_arg = n_samples
        order = child_rng(self.seed, _TAG_ORDER).permutation(total) if shuffle else np.arange(total)
        self.order = order

    def get_params(self) -> dict[str, Any]:
        return {"path": self.path, "split": self.split, "labelled": self.labelled,
                "shuffle": self.shuffle, "n_samples": self.n_samples_arg}  # fmt: skip

    def _chunk(self, c: int) -> Iterator[tuple[Any, dict[str, Any]]]:
        start = c * self.chunk_size
        for i, row in enumerate(self.order[start : start + self.chunk_size], start=start):
            sent_id, words, heads = self.rows[row]
            y = list(heads) if self.labelled else None
            info = {"sent_id": sent_id, "heads": list(heads)}
            yield self.make_record(i, [dict(w) for w in words], y), info

    def _truth(self) -> dict[str, Any]:
        return {
            "source": self.path,
            "n_sentences": len(self.rows),
            "n_words": sum(len(h) for _, _, h in self.rows),
            "order": "shuffled" if self.shuffle else "original",
        }
