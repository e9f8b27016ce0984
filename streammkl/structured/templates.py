"""Feature templates of the dependency parser, as data; sentences as tables of hashed attributes.

A template is a string of atoms joined by ``+``, optionally followed by ``@bits`` (its hash size is
``2**bits`` coordinates; by default the sum of its atoms' sizes below, capped by ``max_bits``):

- ``h.ATTR``, ``m.ATTR``: an attribute of the head / the modifier; ``h-1.ATTR``, ``m+2.ATTR``: of
  the token at that offset (offsets -2..+2; beyond the sentence a boundary value);
- ``b.ATTR``: of each token strictly between head and modifier (one feature per token);
- ``dir``: the arc's direction; ``dist``: its length in buckets 1, 2, 3, 4, 5, 6-10, 11+.

Attributes are CoNLL-U columns as the ``conllu`` package gives them (``form``, ``lemma``, ``upos``,
``xpos``, ``feats``, ``misc``; a missing column, ``None`` or ``"_"`` is the value ``_``), plus
``lower`` (lower-cased form), ``prefixN`` / ``suffixN`` (first / last N characters of ``lower``),
``feats.KEY`` / ``misc.KEY`` (one morphological feature / one MISC field, e.g. ``feats.Case``,
``misc.SpaceAfter``). The root's attributes are ``<root>``.

Each template is one MKL group: the kernel of template ``t`` is the number of its features two arcs
share. The default list follows McDonald et al. (2005)'s first-order features (head and modifier
words and POS, their pairs, the POS in between and around), each with and without the arc's
direction and distance, plus lemmas, morphological features and suffixes for a morphologically
rich language. Modifier-only templates come only with direction and distance: without them they
add the same score to every tree (each token has exactly one head) and cannot be learned.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from streammkl.core import compiled as cnb

__all__ = ["DEFAULT_TEMPLATES", "Template", "TemplateSet", "parse_template"]

_HEAD_BOTH = ("h.form", "h.upos", "h.form+h.upos", "h.lemma", "h.xpos", "h.feats", "h.suffix3")
_MOD_DD = ("m.form", "m.upos", "m.form+m.upos", "m.lemma", "m.xpos", "m.feats", "m.suffix3")
_PAIRS_BOTH = (
    "h.form+h.upos+m.form+m.upos", "h.upos+m.form+m.upos", "h.form+m.form+m.upos",
    "h.form+h.upos+m.upos", "h.form+h.upos+m.form", "h.form+m.form", "h.upos+m.upos",
    "h.xpos+m.xpos", "h.lemma+m.lemma", "h.lemma+m.upos", "h.upos+m.lemma",
    "h.upos+m.feats.Case", "h.xpos+m.feats", "h.feats+m.upos", "h.suffix3+m.suffix3",
    "h.upos+b.upos+m.upos",
    "h.upos+h+1.upos+m-1.upos+m.upos", "h-1.upos+h.upos+m-1.upos+m.upos",
    "h.upos+h+1.upos+m.upos+m+1.upos", "h-1.upos+h.upos+m.upos+m+1.upos",
)  # fmt: skip
_EXTRA = ("dir+dist", "m.misc.SpaceAfter+dir+dist")

DD = "+dir+dist"
DEFAULT_TEMPLATES: tuple[str, ...] = (
    *_HEAD_BOTH,
    *(t + DD for t in _HEAD_BOTH),
    *(t + DD for t in _MOD_DD),
    *_PAIRS_BOTH,
    *(t + DD for t in _PAIRS_BOTH),
    *_EXTRA,
)

# Default hash bits: each atom has a size (below); a template gets 4 + its largest atom's size +
# half the sum of the others, capped by ``max_bits`` (conjunctions have far fewer distinct values
# than the product of their atoms'). On the Turkish Web Treebank this keeps the share of colliding
# features of the gold arcs around 1-10% per template (``benchmarks/results/parsing.md``).
ATOM_BITS = {"form": 14, "lower": 14, "lemma": 13, "upos": 4, "xpos": 6, "feats": 11,
             "prefix": 12, "suffix": 12, "feats.": 3, "misc.": 1, "dir": 1, "dist": 3}  # fmt: skip
HEADROOM_BITS = 4
MIN_BITS = 8
MAX_BITS = 20

_SPLIT = re.compile(r"\+(?=[hmb][+-]?[0-9]?\.|dir\b|dist\b)")  # "+" that starts an atom
_ATOM = re.compile(r"^(?P<role>[hmb])(?P<offset>[+-][0-2])?\.(?P<attr>.+)$")
_ATTR = re.compile(
    r"^(form|lower|lemma|upos|xpos|feats|misc|(prefix|suffix)[1-9]|(feats|misc)\.\S+)$"
)
_KINDS = {"h": cnb.A_HEAD, "m": cnb.A_MOD, "b": cnb.A_BETWEEN}
_ROLE_ORDER = {"h": 0, "m": 1, "b": 2, "dir": 3, "dist": 4}


@dataclass(frozen=True)
class Template:
    """One parsed template: its name (the spec without ``@bits``), atoms and hash bits."""

    name: str
    atoms: tuple[tuple[str, int, str], ...]  # (role, offset, attribute); role dir/dist: attr ""
    bits: int

    @property
    def spec(self) -> str:
        return f"{self.name}@{self.bits}"


def _atom_bits(attr: str) -> int:
    for key in ("prefix", "suffix", "feats.", "misc."):
        if attr.startswith(key) and (key.endswith(".") or attr[len(key) :].isdigit()):
            return ATOM_BITS[key]
    return ATOM_BITS[attr]


def parse_template(spec: str, max_bits: int = MAX_BITS) -> Template:
    """Parse ``"h.upos+m.upos+dist@12"``; ValueError naming the bad part."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"template must be a non-empty string, got {spec!r}")
    body, _, bits_txt = spec.strip().partition("@")
    atoms: list[tuple[str, int, str]] = []
    for part in _SPLIT.split(body):
        part = part.strip()
        if part in ("dir", "dist"):
            atoms.append((part, 0, ""))
            continue
        match = _ATOM.match(part)
        if match is None or not _ATTR.match(match["attr"]):
            raise ValueError(
                f"template {spec!r}: bad atom {part!r} (expected dir, dist or ROLE[±k].ATTR with "
                "ROLE h/m/b, k in 0..2, ATTR form/lower/lemma/upos/xpos/feats/misc/prefixN/"
                "suffixN/feats.KEY/misc.KEY)"
            )
        role, offset = match["role"], int(match["offset"] or 0)
        if role == "b" and offset:
            raise ValueError(f"template {spec!r}: in-between atoms take no offset ({part!r})")
        atoms.append((role, offset, match["attr"]))
    if sum(a[0] == "b" for a in atoms) > 1:
        raise ValueError(f"template {spec!r}: at most one in-between (b.) atom")
    if len(set(atoms)) != len(atoms):
        raise ValueError(f"template {spec!r}: repeated atom")
    if bits_txt:
        if not bits_txt.isdigit() or not 1 <= int(bits_txt) <= 30:
            raise ValueError(f"template {spec!r}: @bits must be an integer in 1..30")
        bits = int(bits_txt)
    else:
        sizes = sorted(_atom_bits(a[0] if a[0] in ("dir", "dist") else a[2]) for a in atoms)
        total = HEADROOM_BITS + sizes[-1] + sum(sizes[:-1]) // 2
        bits = min(max(total, MIN_BITS), max_bits)
    return Template(body.replace(" ", ""), tuple(atoms), bits)


def _stable_hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


class TemplateSet:
    """Templates compiled to the arrays of ``streammkl.core.compiled.arc_features`` (one hashed
    block each)."""

    def __init__(self, specs: Sequence[str], seed: int = 0, max_bits: int = MAX_BITS):
        if isinstance(specs, str) or not specs:
            raise ValueError("templates: give a non-empty sequence of template strings")
        self.templates = [parse_template(s, max_bits) for s in specs]
        names = [t.name for t in self.templates]
        canon = [tuple(sorted(t.atoms, key=_canonical)) for t in self.templates]
        dupes = sorted({names[i] for i, c in enumerate(canon) if canon.count(c) > 1})
        if dupes:
            raise ValueError(f"templates: the same atoms appear twice: {dupes}")
        self.names = names
        self.columns = sorted({a[2] for t in self.templates for a in t.atoms if a[2]})
        col = {c: i for i, c in enumerate(self.columns)}
        T = len(self.templates)
        J = max(len(c) for c in canon)
        self.sizes = np.array([1 << t.bits for t in self.templates], dtype=np.int64)
        self.off = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        self.mask = (self.sizes - 1).astype(np.uint64)
        self.seed = np.array([_stable_hash(f"{seed}\x1f{n}") for n in names], dtype=np.uint64)
        self.atoms = np.zeros((T, J, 3), dtype=np.int64)
        self.n_atoms = np.array([len(c) for c in canon], dtype=np.int64)
        self.n_head = np.array([sum(a[0] == "h" for a in c) for c in canon], dtype=np.int64)
        self.between = np.full(T, -1, dtype=np.int64)
        for t, atoms in enumerate(canon):
            for j, (role, offset, attr) in enumerate(atoms):
                kind = {"dir": cnb.A_DIR, "dist": cnb.A_DIST}.get(role, _KINDS.get(role, -1))
                self.atoms[t, j] = (kind, offset, col.get(attr, 0))
                if role == "b":
                    self.between[t] = j
        self._raw = [_raw_getter(c) for c in self.columns]
        self._cache: dict[tuple[int, Any], int] = {}

    @property
    def specs(self) -> list[str]:
        return [t.spec for t in self.templates]

    @property
    def width(self) -> int:
        return int(self.off[-1])

    def arrays(self) -> tuple[np.ndarray, ...]:
        """``(seed, off, mask, atoms, n_atoms, n_head, between)`` for the compiled loops."""
        return (self.seed, self.off, self.mask, self.atoms, self.n_atoms, self.n_head,
                self.between)  # fmt: skip

    def max_features(self, n_arcs: int, n: int) -> int:
        """Room for the features of ``n_arcs`` arcs of an n-token sentence."""
        per_arc = int(np.sum(np.where(self.between >= 0, max(n - 1, 0), 1)))
        return n_arcs * per_arc

    def encode(self, words: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """The sentence as its table of attribute hashes, (n + 1 + 2 PAD, A) uint64."""
        n = len(words)
        pad = cnb.PAD
        tok = np.empty((n + 1 + 2 * pad, max(len(self.columns), 1)), dtype=np.uint64)
        rows = [[self._hash(a, _BOS) for a in range(len(self.columns))]] * pad
        rows.append([self._hash(a, _ROOT) for a in range(len(self.columns))])
        for word in words:
            rows.append([self._hash(a, raw(word)) for a, raw in enumerate(self._raw)])
        rows += [[self._hash(a, _EOS) for a in range(len(self.columns))]] * pad
        if self.columns:
            tok[:] = rows
        else:
            tok[:] = 0
        return tok

    def _hash(self, column: int, raw: Any) -> int:
        """Stable 64-bit hash of a column's value, from the raw cell (cached per raw cell)."""
        key = (column, raw)
        try:
            h = self._cache.get(key)
        except TypeError:  # an unhashable cell (e.g. a list): hashed, not cached
            return _stable_hash(f"{self.columns[column]}\x1f{_value(self.columns[column], raw)}")
        if h is None:
            if len(self._cache) >= 1 << 20:  # bounded: a stream has unboundedly many words
                self._cache.clear()
            name = self.columns[column]
            value = raw.text if isinstance(raw, _Marker) else _value(name, raw)
            h = self._cache[key] = _stable_hash(f"{name}\x1f{value}")
        return h


class _Marker:
    """The root and the sentence boundaries: values no token can have."""

    def __init__(self, text: str):
        self.text = text


_ROOT, _BOS, _EOS = _Marker("<root>"), _Marker("<s>"), _Marker("</s>")
_ALIASES = {"upos": "upostag", "xpos": "xpostag"}  # the conllu package's older column names


def _raw_getter(column: str):
    """``word -> raw cell`` for a column: a cheap, hashable key of the attribute's value."""
    head = column.partition(".")[0]
    if column == "lower" or column[:6] in ("prefix", "suffix"):
        head = "form"
    alias = _ALIASES.get(head)

    def raw(word: Mapping[str, Any]) -> Any:
        value = dict.get(word, head) if isinstance(word, dict) else word.get(head)
        if value is None and alias is not None:
            value = word.get(alias)
        if isinstance(value, Mapping):  # feats / misc parsed into a dict
            return tuple(value.items())
        return value

    return raw


def _value(column: str, raw: Any) -> str:
    """The attribute's value as a string from a raw cell (``_`` when missing)."""
    if column == "lower" or column[:6] in ("prefix", "suffix"):
        form = _text(raw).lower()
        if column == "lower":
            return form
        k = int(column[6:])
        return form[:k] if column.startswith("prefix") else form[-k:]
    _, dot, key = column.partition(".")
    if dot:
        pairs = dict(raw) if isinstance(raw, tuple) else _parse_pairs(raw)
        return _text(pairs.get(key))
    if isinstance(raw, tuple):
        return "|".join(f"{k}={_text(v)}" for k, v in raw) or "_"
    return _text(raw)


def attribute(word: Mapping[str, Any], column: str) -> str:
    """One attribute of a token dict as a string (``_`` when missing)."""
    return _value(column, _raw_getter(column)(word))


def _canonical(atom: tuple[str, int, str]) -> tuple[int, int, str]:
    return (_ROLE_ORDER[atom[0]], atom[1], atom[2])


def _parse_pairs(value: Any) -> dict[str, str]:
    if not isinstance(value, str) or value in ("", "_"):
        return {}
    out = {}
    for item in value.split("|"):
        k, _, v = item.partition("=")
        out[k] = v
    return out


def _text(value: Any) -> str:
    if value is None or value == "":
        return "_"
    return value if isinstance(value, str) else str(value)
