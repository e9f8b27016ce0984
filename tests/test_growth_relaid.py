"""A model's own bank change (the bandwidths' rescale, the warm-up) relays its layout in place
without the cache of ``build_layout``: no key over every input's name, no kept copy of every
input's row of frequencies. It learns the numbers of a learner whose every bank change goes
through the cache (looked up, built by copying, kept), bit for bit: predictions, learned
inputs, arrays, digest, a pickle that learns on."""

from __future__ import annotations

import pickle

import numpy as np
from river import feature_extraction

from simulators.zipf_documents import zipf_documents
from streammkl.core import layout as layout_mod
from streammkl.core import model as model_mod
from streammkl.core.layout import forget_built_layouts
from streammkl.river import MKLClassifier


def _stream(n: int) -> list[tuple[dict, object]]:
    """Bag-of-words counts (new words throughout), a third class from the middle on, every
    other record's keys in reversed order, and some records with ``int`` names."""
    docs = zipf_documents(n, vocabulary=900, words=(5, 19), seed=11)
    out: list[tuple[dict, object]] = []
    bow = feature_extraction.BagOfWords()
    for i, (text, label) in enumerate(docs):
        x = dict(bow.transform_one(text))
        if i % 2:
            x = dict(reversed(list(x.items())))
        if i % 7 == 3:  # int names: the column of their str
            x.update({i % 40: 1.0, 1000 + i: 2.0})
        y = "other" if i >= n // 2 and i % 5 == 0 else label
        out.append((x, y))
    return out


def _run(data, cached: bool, monkeypatch) -> tuple[list, MKLClassifier, int]:
    """Prequential probabilities of a fresh default learner (the layouts built lately
    forgotten); ``cached``: every bank change goes through ``build_layout``'s cache (the model's
    layout handed over as not its own). Also how many layouts the cache kept."""
    forget_built_layouts()
    if cached:
        real = model_mod.build_layout
        monkeypatch.setattr(  # (never owned: looked up, made by copying, kept)
            model_mod, "build_layout", lambda *a: real(*a[:8], False) if len(a) > 8 else real(*a)
        )
    kept = []
    store = layout_mod._copied
    monkeypatch.setattr(layout_mod, "_copied", lambda layout: kept.append(1) or store(layout))
    model = MKLClassifier()
    out = []
    for x, y in data:
        out.append(model.predict_proba_one(x))
        model.learn_one(x, y)
    monkeypatch.undo()
    return out, model, len(kept)


def test_a_bank_change_in_place_gives_the_numbers_of_the_cached_build(monkeypatch):
    data = _stream(400)
    mine, model, kept = _run(data, False, monkeypatch)
    theirs, other, kept_cached = _run(data, True, monkeypatch)
    assert mine == theirs  # every prediction, bit for bit
    a, b = model.rounds(), other.rounds()
    assert a.feature_names == b.feature_names and len(a.feature_names) > 300
    assert list(model.classes_) == list(other.classes_) and "other" in model.classes_
    assert a.digest() == b.digest()
    la, lb = a.model.layout, b.model.layout
    for name in ("phi_src", "masks", "in_pos", "ex_used", "blk_inputs", "rff_b"):
        np.testing.assert_array_equal(getattr(la, name), getattr(lb, name))
    np.testing.assert_array_equal(la.rff_wt[: la.capacity], lb.rff_wt[: lb.capacity])
    assert kept < kept_cached  # (the warm-up's relayout among those no longer kept)
    twin = pickle.loads(pickle.dumps(model))  # a pickle learns on bit for bit
    for x, y in _stream(460)[400:]:
        assert twin.predict_proba_one(x) == model.predict_proba_one(x)
        twin.learn_one(x, y)
        model.learn_one(x, y)
    assert twin.rounds().digest() == model.rounds().digest()


def test_a_models_own_bank_change_is_not_kept_by_the_build_cache():
    """The warm-up's relayout of a model's own layout leaves ``build_layout``'s cache as it
    was (no key made, no copy kept), and learns on."""
    forget_built_layouts()
    model = MKLClassifier()
    data = iter(_stream(200))
    for x, y in data:
        model.learn_one(x, y)
        if model.rounds().model.warmup_left == 1:
            break
    core = model.rounds().model
    kept, before = set(layout_mod._BUILT), core.kernel_bandwidths
    x, y = next(data)
    model.learn_one(x, y)  # the warm-up's last input: its bank change
    assert core.warmup_left == 0 and core.kernel_bandwidths != before
    assert set(layout_mod._BUILT) == kept
    for x, y in data:
        model.learn_one(x, y)
    assert set(layout_mod._BUILT) == kept  # (doublings grow, they do not build)
