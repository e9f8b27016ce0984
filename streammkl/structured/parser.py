"""``DependencyParser``: SPOM (Martins et al. 2011, §4.2) for arc-factored dependency parsing.

The joint feature map is ``phi(x, y) = sum_{(h, m) in y} phi_{h,m}(x)``, one block per feature
template (``streammkl.structured.templates``), each a hashed sparse explicit block of the core
(``streammkl.core.hashed``). Each round: the scores of every arc ``h -> m`` (the n^2 candidate arcs,
templates whose block is zero skipped), loss-augmented decoding — the maximum spanning
arborescence (Chu-Liu-Edmonds, non-projective, one root arc) of the scores plus the Hamming cost
``[h != gold head of m]`` — then the gradient step on the arcs where the decoded tree and the gold
tree differ, the prox steps of the regularizer on the vector of template norms, the optional
projection. ``kernel_weights`` maps each template to its beta.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from streammkl import statefile
from streammkl.core import compiled as cnb
from streammkl.core import regularizers as regs_mod
from streammkl.core import schedules as schedules_mod
from streammkl.core.hashed import HashedBlocks
from streammkl.core.regularizers import Regularizer
from streammkl.core.schedules import Schedule
from streammkl.core.state import state_digest
from streammkl.statefile import StateError, check_header
from streammkl.structured.persistence import load_with, optimizer_config, state_meta
from streammkl.structured.templates import DEFAULT_TEMPLATES, MAX_BITS, TemplateSet
from streammkl.structured.trees import check_heads, words_of

__all__ = ["DependencyParser"]

FORMAT = "streammkl.DependencyParser"
VERSION = 1


class DependencyParser:
    """Online multiple-kernel dependency parser (structured hinge), one sentence per round.

    Parameters
    ----------
    templates
        Feature templates (strings, see ``streammkl.structured.templates``), one MKL group each;
        ``DEFAULT_TEMPLATES`` by default.
    regularizer
        A core regularizer of the block norms, or a tuple of them (sequential prox steps);
        ``SquaredGroupLasso(1e-4)`` (sparse MKL) by default. ``L2(lam)`` is the plain linear
        model (one group). Coordinate-wise regularizers (L1) are refused: on hashed blocks they
        would touch every coordinate each round.
    schedule
        A core schedule, ``InvSqrt(1.0)`` by default (copied; t counts sentences).
    radius
        Project theta onto ``||theta|| <= radius`` after the prox steps (None: no projection).
    average
        Predict with the running average of the iterates (Prop. 4; the averaged perceptron's
        trick); learning, ``block_norms`` and ``kernel_weights`` use the current iterate.
    single_root
        Exactly one word attaches to the root, in decoded trees and in the gold trees accepted.
    max_hash_bits
        Cap of the default hash size ``2**bits`` of a template (a template's ``@bits`` wins).
    seed
        Seeds the template hash functions.

    Examples
    --------
    A toy language where determiners (DET) attach to the next noun and nouns to the verb:

    >>> from streammkl.structured import DependencyParser
    >>> def sentence(*upos):
    ...     return [{"form": p.lower(), "upos": p} for p in upos]
    >>> model = DependencyParser(templates=("h.upos+m.upos+dir+dist", "h.upos+m.upos"))
    >>> for _ in range(5):
    ...     model.learn_one(sentence("DET", "NOUN", "VERB", "DET", "NOUN"), [2, 3, 0, 5, 3])
    ...     model.learn_one(sentence("NOUN", "VERB", "DET", "NOUN"), [2, 0, 4, 2])
    >>> model.predict_one(sentence("DET", "NOUN", "VERB"))
    [2, 3, 0]
    """

    def __init__(
        self,
        templates: Sequence[str] = DEFAULT_TEMPLATES,
        regularizer: Regularizer | Sequence[Regularizer] | None = None,
        schedule: Schedule | None = None,
        radius: float | None = None,
        average: bool = False,
        single_root: bool = True,
        max_hash_bits: int = MAX_BITS,
        seed: int = 0,
    ):
        self.templates = tuple(templates) if not isinstance(templates, str) else templates
        self.regularizer = regularizer
        self.schedule = schedule
        self.radius = radius
        self.average = bool(average)
        self.single_root = bool(single_root)
        self.max_hash_bits = int(max_hash_bits)
        self.seed = int(seed)
        if not 1 <= self.max_hash_bits <= 30:
            raise ValueError(f"max_hash_bits must be in 1..30, got {max_hash_bits!r}")
        if radius is not None and not float(radius) > 0:
            raise ValueError(f"radius must be > 0 or None, got {radius!r}")
        reg = regs_mod.SquaredGroupLasso(1e-4) if regularizer is None else regularizer
        regs = (reg,) if isinstance(reg, Regularizer | dict) else tuple(reg)
        self._regularizers = tuple(regs_mod.from_spec(r) for r in regs)
        if not self._regularizers:
            raise ValueError("regularizer: give at least one (e.g. SquaredGroupLasso(1e-4))")
        self._schedule = copy.deepcopy(
            schedules_mod.from_spec(schedule) if schedule is not None else schedules_mod.InvSqrt()
        )
        if getattr(self._schedule, "adaptive", False):
            raise ValueError(
                f"schedule {self._schedule!r} gives every block its own step; the parser takes "
                "one step per round (Constant, InvSqrt, InvT)"
            )
        self._templates = TemplateSet(self.templates, self.seed, self.max_hash_bits)
        self._blocks = HashedBlocks(self._templates.sizes, self._regularizers, radius, self.average)
        self.t = 0
        self.last_loss: float | None = None  # loss of the last learned sentence, before its update

    # --- scoring and decoding ---------------------------------------------------------------
    def _encode(self, sentence: Any) -> tuple[int, np.ndarray]:
        words = words_of(sentence)
        return len(words), self._templates.encode(words)

    def arc_scores(self, sentence: Any, averaged: bool | None = None) -> np.ndarray:
        """Scores (n + 1, n + 1) of every arc ``h -> m`` (row h, column m; column 0 unused).

        ``averaged`` (default: the ``average`` setting) scores with the running average.
        """
        n, tok = self._encode(sentence)
        return self._scores(tok, n, self.average if averaged is None else averaged)

    def _scores(self, tok: np.ndarray, n: int, averaged: bool) -> np.ndarray:
        live, coef, u = self._blocks.scoring(averaged)
        out = np.empty((n + 1, n + 1))
        T = self._templates
        cnb.arc_scores(tok, n, T.seed, T.off, T.mask, T.atoms, T.n_atoms, T.n_head, T.between,
                       live, coef, self._blocks.w, u, out)  # fmt: skip
        if averaged and self.average and self._blocks.rounds:
            out /= self._blocks.rounds
        return out

    def _decode(self, scores: np.ndarray) -> np.ndarray:
        heads = np.empty(scores.shape[0], dtype=np.int64)
        cnb.max_arborescence(scores, self.single_root, heads)
        return heads

    # --- learning ---------------------------------------------------------------------------
    def learn_one(self, sentence: Any, heads: Sequence[int]) -> None:
        """One round of SPOM on a sentence and its gold heads (1-based, 0 = root)."""
        n, tok = self._encode(sentence)
        gold = np.asarray(check_heads(heads, n, self.single_root), dtype=np.int64)
        self._learn(tok, n, gold, self._scores(tok, n, False))

    def _learn(self, tok: np.ndarray, n: int, gold: np.ndarray, scores: np.ndarray) -> None:
        mods = np.arange(1, n + 1)
        aug = scores + 1.0  # Hamming cost: 1 for every head but the gold one
        aug[gold, mods] -= 1.0
        pred = self._decode(aug)[1:]
        self.last_loss = max(float(aug[pred, mods].sum() - scores[gold, mods].sum()), 0.0)
        wrong = np.flatnonzero(pred != gold)
        heads = np.concatenate([gold[wrong], pred[wrong]])
        arc_mods = np.concatenate([mods[wrong], mods[wrong]])
        signs = np.concatenate([np.ones(wrong.size), -np.ones(wrong.size)])
        T = self._templates
        size = T.max_features(heads.size, n)
        keys = np.empty(size, dtype=np.uint64)
        idx = np.empty(size, dtype=np.int64)
        blk = np.empty(size, dtype=np.int64)
        val = np.empty(size)
        count = cnb.arc_features(tok, n, heads, arc_mods, signs, *T.arrays(), keys, idx, blk, val)
        self._blocks.step(idx, blk, val, count, self._schedule.step())
        self.t += 1

    def learn_predict_one(self, sentence: Any, heads: Sequence[int] | None = None) -> list[int]:
        """The prediction before learning (prequential), then one round if ``heads`` is given.

        Everything is validated before anything changes.
        """
        n, tok = self._encode(sentence)
        gold = None
        if heads is not None:
            gold = np.asarray(check_heads(heads, n, self.single_root), dtype=np.int64)
        scores = self._scores(tok, n, self.average)
        pred = self._decode(scores)[1:].tolist()
        if gold is not None:
            if self.average:
                scores = self._scores(tok, n, False)
            self._learn(tok, n, gold, scores)
        return pred

    # --- prediction -------------------------------------------------------------------------
    def predict_one(self, sentence: Any) -> list[int]:
        """The highest-scoring tree's heads, one per word (1-based, 0 = root)."""
        n, tok = self._encode(sentence)
        return self._decode(self._scores(tok, n, self.average))[1:].tolist()

    def predict_many(self, sentences: Iterable[Any]) -> list[list[int]]:
        return [self.predict_one(s) for s in sentences]

    # --- objective --------------------------------------------------------------------------
    def loss_one(self, sentence: Any, heads: Sequence[int]) -> float:
        """The structured hinge loss at the current iterate; learns nothing."""
        n, tok = self._encode(sentence)
        gold = np.asarray(check_heads(heads, n, self.single_root), dtype=np.int64)
        scores = self._scores(tok, n, False)
        mods = np.arange(1, n + 1)
        aug = scores + 1.0
        aug[gold, mods] -= 1.0
        pred = self._decode(aug)[1:]
        return max(float(aug[pred, mods].sum() - scores[gold, mods].sum()), 0.0)

    def regularization_value(self) -> float:
        """``lambda * Omega(theta)`` over the template blocks."""
        return self._blocks.regularization_value()

    def objective_terms(self, sentence: Any, heads: Sequence[int]) -> tuple[float, float]:
        return self.loss_one(sentence, heads), self.regularization_value()

    # --- introspection ----------------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        """Template names (the keys of ``block_norms`` and ``kernel_weights``)."""
        return list(self._templates.names)

    @property
    def block_norms(self) -> dict[str, float]:
        """Exact ``||theta_t||`` of every template's block."""
        return dict(zip(self.names, self._blocks.norms.tolist(), strict=True))

    @property
    def kernel_weights(self) -> dict[str, float]:
        """beta_t ∝ ||theta_t|| (∝ ||theta_t||^(2-q) for GroupLq; equal for L2) per template."""
        return dict(zip(self.names, self._blocks.kernel_weights().tolist(), strict=True))

    @property
    def active_templates(self) -> list[str]:
        return [n for n, b in self.block_norms.items() if b > 0]

    @property
    def hash_sizes(self) -> dict[str, int]:
        """Coordinates of every template's hashed block (a power of two)."""
        return dict(zip(self.names, self._templates.sizes.tolist(), strict=True))

    @property
    def n_features(self) -> int:
        """Coordinates of all blocks together."""
        return self._templates.width

    @property
    def n_nonzero(self) -> int:
        """Non-zero coordinates of the current iterate (the model's size)."""
        return self._blocks.n_nonzero

    def nonzero_per_template(self) -> dict[str, int]:
        return dict(zip(self.names, self._blocks.nonzero_per_block().tolist(), strict=True))

    def collisions(
        self, sentences: Iterable[Any], heads: Iterable[Sequence[int]] | None = None
    ) -> dict[str, dict[str, float]]:
        """Hash collisions per template over the features of the gold arcs of ``sentences``.

        ``features``: distinct 64-bit feature keys; ``buckets``: distinct coordinates they hash
        to; ``collision_rate`` = 1 - buckets / features (the share of features that share their
        coordinate with another one). Gold heads come from ``heads`` or the words' ``head``.
        """
        T = self._templates
        keys_all, blk_all, idx_all = [], [], []
        head_lists = iter(heads) if heads is not None else None
        for sentence in sentences:
            words = words_of(sentence)
            n = len(words)
            given = next(head_lists) if head_lists is not None else [w["head"] for w in words]
            gold = np.asarray(check_heads(given, n, False), dtype=np.int64)
            size = T.max_features(n, n)
            keys = np.empty(size, dtype=np.uint64)
            idx = np.empty(size, dtype=np.int64)
            blk = np.empty(size, dtype=np.int64)
            val = np.empty(size)
            tok = T.encode(words)
            c = cnb.arc_features(tok, n, gold, np.arange(1, n + 1), np.ones(n), *T.arrays(),
                                 keys, idx, blk, val)  # fmt: skip
            keys_all.append(keys[:c])
            blk_all.append(blk[:c])
            idx_all.append(idx[:c])
        keys = np.concatenate(keys_all) if keys_all else np.zeros(0, dtype=np.uint64)
        blk = np.concatenate(blk_all) if blk_all else np.zeros(0, dtype=np.int64)
        idx = np.concatenate(idx_all) if idx_all else np.zeros(0, dtype=np.int64)
        out = {}
        for t, name in enumerate(self.names):
            sel = blk == t
            n_keys = int(np.unique(keys[sel]).size)
            n_buckets = int(np.unique(idx[sel]).size)
            out[name] = {
                "size": int(T.sizes[t]),
                "features": n_keys,
                "buckets": n_buckets,
                "collision_rate": 1.0 - n_buckets / n_keys if n_keys else 0.0,
            }
        return out

    # --- persistence ------------------------------------------------------------------------
    def _params(self) -> dict[str, Any]:
        return {
            "templates": self.templates,
            "regularizer": self.regularizer,
            "schedule": self.schedule,
            "radius": self.radius,
            "average": self.average,
            "single_root": self.single_root,
            "max_hash_bits": self.max_hash_bits,
            "seed": self.seed,
        }

    def clone(self, new_params: dict[str, Any] | None = None, include_state: bool = False):
        """A new parser with the same parameters (overridden by ``new_params``); with
        ``include_state`` also the learned state (through ``to_state``: no shared arrays)."""
        if include_state:
            if new_params:
                raise ValueError("clone: include_state=True cannot change parameters")
            return type(self).from_state(*self.to_state())
        return type(self)(**copy.deepcopy({**self._params(), **(new_params or {})}))

    def config(self) -> dict[str, Any]:
        """Constructor arguments as JSON-able specs (``DependencyParser(**config)`` rebuilds it);
        templates carry their ``@bits``, so the hash sizes survive a change of defaults."""
        return {
            "templates": self._templates.specs,
            **optimizer_config(self._regularizers, self._schedule, self.radius),
            "average": self.average,
            "single_root": self.single_root,
            "max_hash_bits": self.max_hash_bits,
            "seed": self.seed,
        }

    def to_state(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """(JSON-able meta, named arrays), enough to resume bit for bit (no pickle): ``meta``
        holds the format, version, the configuration with every template's hash size written
        out, and the counters; ``arrays`` the non-zeros of the hashed blocks with their scales
        (``core.hashed.HashedBlocks.to_arrays``), so a model's state grows with what it learned,
        not with its tens of millions of coordinates."""
        meta = state_meta(FORMAT, VERSION, self.config(), self.t, self._schedule.t)
        return meta, self._blocks.to_arrays()

    @classmethod
    def from_state(cls, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> DependencyParser:
        """The parser :meth:`to_state` gave ``(meta, arrays)`` for: the format checked (a newer
        version refused), every array validated and the block norms recounted from the
        weights."""
        check_header(meta, FORMAT, VERSION, "DependencyParser")
        try:
            model = cls(**meta["config"])
            t, schedule_t = int(meta["t"]), int(meta["schedule_t"])
        except (KeyError, TypeError, ValueError) as exc:
            raise _fail(f"bad meta ({type(exc).__name__}: {exc})") from None
        cls._restore(model, arrays, (t, schedule_t))  # the class's own, on the instance just built
        return model

    def _restore(self, arrays: dict[str, np.ndarray], counters: tuple[int, int]) -> None:
        """Load a state's arrays and counters into this fresh parser."""
        try:
            self._blocks.load_arrays(arrays)
        except ValueError as exc:
            raise _fail(str(exc)) from None
        self.t, self._schedule.t = counters

    def save(self, path: str | os.PathLike) -> None:
        """Write the state to one zip file (``meta.json`` + one ``.npy`` per array), atomically
        (:mod:`streammkl.statefile`)."""
        statefile.write(path, *self.to_state())

    @classmethod
    def load(cls, path: str | os.PathLike) -> DependencyParser:
        """The parser saved at ``path``."""
        return load_with(cls.from_state, path, "DependencyParser")

    def digest(self) -> str:
        """sha256 of the canonical state."""
        return state_digest(*self.to_state())

    def __repr__(self) -> str:
        return (
            f"DependencyParser({len(self.names)} templates, {self.n_features:,} hashed "
            f"coordinates, regularizer={self._regularizers!r}, average={self.average}, t={self.t})"
        )


def _fail(msg: str) -> StateError:
    return StateError(f"DependencyParser state: {msg}")
