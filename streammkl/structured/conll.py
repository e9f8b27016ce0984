"""CoNLL-U treebanks: reading (the ``conllu`` package), gold heads, attachment scores, and the
Turkish Web Treebank with its own split.

Unlabelled attachment score (UAS) is the share of words whose predicted head is the gold one. It
is reported over every word and without the words a treebank makes easy or that conventions
decide: punctuation (UPOS ``PUNCT`` or relation ``punct``/``p``) and, in the Turkish Web Treebank,
the ``ig`` arcs that join the inflectional groups of one word (each to the next, almost always).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, TextIO

import conllu

from streammkl.structured.trees import words_of

__all__ = [
    "EXCLUSIONS",
    "TURKISH_SPLITS",
    "attachment_scores",
    "gold_heads",
    "read_conllu",
    "turkish_files",
    "turkish_treebank",
]

PUNCT_RELATIONS = frozenset({"punct", "p"})
EXCLUSIONS = ("all", "no_punct", "no_ig", "no_ig_punct")
TURKISH_SPLITS = ("train", "dev", "test")


def read_conllu(source: str | os.PathLike[str] | TextIO) -> list[conllu.TokenList]:
    """Every sentence of a CoNLL-U file (a path, or an open text file)."""
    if not isinstance(source, str | os.PathLike):
        return list(conllu.parse_incr(source))
    with open(source, encoding="utf-8") as fh:
        return list(conllu.parse_incr(fh))


def gold_heads(sentence: Sequence[Any]) -> list[int]:
    """The heads of the words of a parsed sentence (ranges and empty nodes skipped)."""
    heads = []
    for i, word in enumerate(words_of(sentence)):
        h = word.get("head")
        if h is None:
            raise ValueError(f"word {i + 1} has no head")
        heads.append(int(h))
    return heads


def _excluded(word: Any, exclusion: str) -> bool:
    relation = str(word.get("deprel") or "").split(":")[0]
    punct = word.get("upos") == "PUNCT" or relation in PUNCT_RELATIONS
    ig = relation == "ig"
    return {"all": False, "no_punct": punct, "no_ig": ig, "no_ig_punct": punct or ig}[exclusion]


def attachment_scores(
    sentences: Iterable[Sequence[Any]], predicted: Iterable[Sequence[int]]
) -> dict[str, float]:
    """UAS (in %) over every word and under each exclusion of :data:`EXCLUSIONS`."""
    right = dict.fromkeys(EXCLUSIONS, 0)
    total = dict.fromkeys(EXCLUSIONS, 0)
    for sentence, heads in zip(sentences, predicted, strict=True):
        words = words_of(sentence)
        if len(heads) != len(words):
            raise ValueError(f"{len(heads)} predicted heads for a sentence of {len(words)} words")
        for word, h in zip(words, heads, strict=True):
            hit = int(h) == int(word["head"])
            for ex in EXCLUSIONS:
                if not _excluded(word, ex):
                    total[ex] += 1
                    right[ex] += hit
    return {ex: 100.0 * right[ex] / total[ex] if total[ex] else float("nan") for ex in EXCLUSIONS}


def turkish_files() -> dict[str, Path]:
    """The installed section files of the Turkish Web Treebank, ``{"web": path, "wiki": path}``."""
    try:
        dist = metadata.distribution("turkish-treebanks")
    except metadata.PackageNotFoundError:
        raise ModuleNotFoundError(
            "the Turkish Web Treebank is not installed: pip install --no-deps turkish-treebanks "
            "(or pip install 'streammkl[parsing]')"
        ) from None
    found = {}
    for f in dist.files or ():
        if f.name in ("web.conllu", "wiki.conllu"):
            found[f.name.split(".")[0]] = Path(str(dist.locate_file(f)))
    if set(found) != {"web", "wiki"}:
        raise FileNotFoundError("turkish-treebanks is installed without its data/*.conllu files")
    return found


def turkish_treebank(
    split: str, sections: Sequence[str] = ("web", "wiki")
) -> list[conllu.TokenList]:
    """Google's Turkish Web Treebank (Apache-2.0, PyPI ``turkish-treebanks``), gold annotation.

    The package's own split, per section file: sentence ``i`` (0-based) is ``train`` if
    ``i % 10 < 8``, ``dev`` if ``i % 10 == 8``, ``test`` if ``i % 10 == 9``; sections in the
    package's order (web, then wiki).
    """
    if split not in TURKISH_SPLITS:
        raise ValueError(f"split must be one of {TURKISH_SPLITS}, got {split!r}")
    files = turkish_files()
    rest = {"train": range(8), "dev": (8,), "test": (9,)}[split]
    out: list[conllu.TokenList] = []
    for section in sections:
        if section not in files:
            raise ValueError(f"section must be 'web' or 'wiki', got {section!r}")
        out += [s for i, s in enumerate(read_conllu(files[section])) if i % 10 in rest]
    return out
