"""SequenceLabeler persistence (JSON + npz, no pickle), versioning, corruption errors, clone."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

from streammkl.core import kernels, regularizers, schedules
from streammkl.structured import SequenceLabeler, StateError


def _data(seed, n, labels=("a", 1, ("t", 2), 2.5)):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        T = int(rng.integers(1, 6))
        idx = rng.integers(0, len(labels), T)
        X = rng.normal(size=(T, 4)) + idx[:, None]
        out.append((X, [labels[i] for i in idx]))
    return out


def _model(**kw):
    kw.setdefault(
        "kernels",
        (kernels.Linear(), kernels.RBF(gamma=0.3), kernels.RBF(gamma=0.5, n_components=16)),
    )
    kw.setdefault("regularizer", (regularizers.SquaredGroupLasso(1e-2), regularizers.Ball(5.0)))
    return SequenceLabeler(schedule=schedules.InvSqrt(0.7), budget=40, seed=3, **kw)


def _same(a, b, data):
    assert a.digest() == b.digest()
    assert a.block_norms == b.block_norms and a.kernel_weights == b.kernel_weights
    for X, _ in data:
        assert a.predict_one(X) == b.predict_one(X)


@pytest.mark.parametrize("loss", ["hinge", "crf"])
@pytest.mark.parametrize("learn_beta0", [False, True])
def test_save_load_round_trip_resumes_bit_for_bit(tmp_path, loss, learn_beta0):
    data = _data(0, 60)
    model = _model(loss=loss, learn_transition_weight=learn_beta0)
    for X, y in data[:40]:
        model.learn_one(X, y)
    path = tmp_path / "model.npz"
    model.save(path)
    loaded = SequenceLabeler.load(path)
    _same(model, loaded, data)
    assert loaded.labels == model.labels and set(model.labels) == {"a", 1, ("t", 2), 2.5}
    assert [type(v) for v in loaded.labels] == [type(v) for v in model.labels]
    for X, y in data[40:]:  # both keep learning identically (schedule, support, budget)
        model.learn_one(X, y)
        loaded.learn_one(X, y)
    _same(model, loaded, data)
    assert model.t == loaded.t == 60
    meta = json.loads(zipfile.ZipFile(path).read("__meta__.json"))  # plain JSON inside
    assert meta["format"] == "streammkl.SequenceLabeler" and meta["version"] == 2
    with np.load(path, allow_pickle=False) as npz:  # and a plain npz for the arrays
        assert npz["a/transition"].shape == (4, 4)


@pytest.mark.parametrize("policy", ["oldest", "project"])
def test_round_trip_resumes_bit_for_bit_under_each_budget_policy(tmp_path, policy):
    """The projection policy's Gram matrices and inverses are saved (trimmed to the pairs) and
    restored, so a loaded labeler keeps learning exactly as the original."""
    data = _data(2, 70)
    model = _model(budget_policy=policy)
    for X, y in data[:45]:
        model.learn_one(X, y)
    assert model.n_support == 40
    model.save(tmp_path / "m.npz")
    loaded = SequenceLabeler.load(tmp_path / "m.npz")
    for X, y in data[45:]:
        model.learn_one(X, y)
        loaded.learn_one(X, y)
    _same(model, loaded, data)
    assert model.to_state()[1]["gram"].shape == (
        (1, 2, 40, 40) if policy == "project" else (1, 2, 0, 0)
    )


def test_version_1_states_without_gram_still_load():
    data = _data(3, 50)
    model = _model(budget_policy="smallest")
    for X, y in data[:30]:
        model.learn_one(X, y)
    meta, arrays = model.to_state()
    del arrays["gram"]
    loaded = SequenceLabeler.from_state({**meta, "version": 1}, arrays)
    for X, y in data[30:]:
        model.learn_one(X, y)
        loaded.learn_one(X, y)
    _same(model, loaded, data)


def test_state_round_trip_with_dict_inputs_and_clone():
    model = _model(loss="crf")
    names = ["p", "q", "r", "s"]
    data = [([dict(zip(names, row, strict=True)) for row in X], y) for X, y in _data(1, 30)]
    for X, y in data:
        model.learn_one(X, y)
    meta, arrays = model.to_state()
    json.dumps(meta)
    restored = SequenceLabeler.from_state(meta, arrays)
    _same(model, restored, data)
    assert restored.feature_keys == names and restored.input_mode == "dict"
    marg_a = model.predict_marginals_one(data[0][0])
    assert marg_a == restored.predict_marginals_one(data[0][0])
    copy = model.clone(include_state=True)
    _same(model, copy, data)
    copy.learn_one(*data[0])  # independent arrays
    assert copy.digest() != model.digest()
    fresh = model.clone()
    assert fresh.t == 0 and fresh.n_support == 0 and fresh.labels == []
    assert fresh.config() == {**model.config(), "schedule": model.config()["schedule"]}
    other = model.clone({"loss": "hinge"})
    assert other.loss == "hinge" and other.names == model.names


def test_untrained_model_round_trips(tmp_path):
    model = _model()
    model.save(tmp_path / "m.npz")
    loaded = SequenceLabeler.load(tmp_path / "m.npz")
    assert loaded.labels == [] and loaded.predict_one(np.ones((2, 4))) is None
    assert loaded.digest() == model.digest()


def test_newer_version_and_foreign_states_are_refused(tmp_path):
    model = _model()
    for X, y in _data(2, 5):
        model.learn_one(X, y)
    meta, arrays = model.to_state()
    with pytest.raises(StateError, match="version 3 is newer"):
        SequenceLabeler.from_state({**meta, "version": 3}, arrays)
    with pytest.raises(StateError, match="not a SequenceLabeler state"):
        SequenceLabeler.from_state({**meta, "format": "streammkl.OnlineMKL"}, arrays)
    with pytest.raises(StateError, match="'coef' is missing"):
        SequenceLabeler.from_state(meta, {k: v for k, v in arrays.items() if k != "coef"})
    with pytest.raises(StateError, match="'transition' has"):
        SequenceLabeler.from_state(meta, {**arrays, "transition": np.zeros((7, 7))})
    bad = dict(arrays)
    bad["norms"] = bad["norms"].copy()
    bad["norms"][0] = np.nan
    with pytest.raises(StateError, match="'norms' holds NaN"):
        SequenceLabeler.from_state(meta, bad)
    with pytest.raises(StateError, match="bad meta"):
        SequenceLabeler.from_state({**meta, "labels": [["complex", 1]]}, arrays)


def test_corrupt_files_give_clear_errors(tmp_path):
    model = _model()
    for X, y in _data(3, 5):
        model.learn_one(X, y)
    path = tmp_path / "m.npz"
    model.save(path)
    raw = path.read_bytes()
    (tmp_path / "trunc.npz").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(StateError, match=r"trunc\.npz: corrupt"):
        SequenceLabeler.load(tmp_path / "trunc.npz")
    (tmp_path / "text.npz").write_text("hello")
    with pytest.raises(StateError, match="corrupt or not a SequenceLabeler file"):
        SequenceLabeler.load(tmp_path / "text.npz")
    with zipfile.ZipFile(tmp_path / "nometa.npz", "w") as zf:
        zf.writestr("w.npy", b"")
    with pytest.raises(StateError, match=r"nometa\.npz"):
        SequenceLabeler.load(tmp_path / "nometa.npz")
    with pytest.raises(FileNotFoundError):
        SequenceLabeler.load(tmp_path / "missing.npz")


def test_unsavable_labels_are_named():
    model = SequenceLabeler()
    model.learn_one(np.ones((1, 2)), [frozenset({1})])
    with pytest.raises(TypeError, match=r"label frozenset\(\{1\}\) of type frozenset"):
        model.to_state()
