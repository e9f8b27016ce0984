"""The one state file of every learner (streammkl.statefile): round trip, clear errors for a
truncated, corrupt, foreign or newer file, and the earlier formats still loading."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest

from streammkl import statefile
from streammkl.core import OnlineMKL, kernels
from streammkl.river import MKLClassifier
from streammkl.statefile import StateError
from streammkl.structured import SequenceLabeler

META = {"format": "demo", "version": 1, "labels": [True, False]}
ARRAYS = {"w": np.arange(6.0).reshape(2, 3), "age": np.array([3, 1], dtype=np.int64)}


def _saved(tmp_path):
    return statefile.write(tmp_path / "s.npz", META, ARRAYS)


def test_round_trip_keeps_meta_and_arrays_exactly(tmp_path):
    meta, arrays = statefile.read(_saved(tmp_path))
    assert meta == META
    assert set(arrays) == {"w", "age"}
    np.testing.assert_array_equal(arrays["w"], ARRAYS["w"])
    assert arrays["age"].dtype == np.int64


def test_truncated_file_is_named_and_called_corrupt(tmp_path):
    raw = _saved(tmp_path).read_bytes()
    for cut in (len(raw) // 2, len(raw) - 5, 10):
        (tmp_path / "t.npz").write_bytes(raw[:cut])
        with pytest.raises(StateError, match=r"t\.npz: corrupt or not a model file"):
            statefile.read(tmp_path / "t.npz", "model")


def test_every_flipped_byte_is_caught(tmp_path):
    raw = _saved(tmp_path).read_bytes()
    caught = 0
    for i in range(0, len(raw), 7):
        bad = bytearray(raw)
        bad[i] ^= 0x5A
        (tmp_path / "b.npz").write_bytes(bytes(bad))
        try:
            meta, arrays = statefile.read(tmp_path / "b.npz")
        except StateError as exc:
            assert "b.npz" in str(exc) and "allow_pickle" not in str(exc)
            caught += 1
            continue
        # a flip in zip padding/metadata that zip ignores must leave the content intact
        assert meta == META and np.array_equal(arrays["w"], ARRAYS["w"])
    assert caught > len(raw) // 7 // 2


def test_checksum_mismatch_is_reported_as_corruption(tmp_path):
    path = tmp_path / "c.npz"
    with zipfile.ZipFile(path, "w") as zf:  # CRCs right, digest of other content
        zf.writestr("__format__", "streammkl-state 2")
        zf.writestr("__meta__.json", json.dumps(META))
        zf.writestr("__sha256__", "0" * 64)
    with pytest.raises(StateError, match="checksum does not match"):
        statefile.read(path)


def test_newer_container_and_garbage_give_our_own_messages(tmp_path):
    path = tmp_path / "n.npz"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("__format__", "streammkl-state 9")
    with pytest.raises(StateError, match=r"newer streammkl \(file format 9"):
        statefile.read(path)
    (tmp_path / "g.npz").write_bytes(b"\x93NUMPY garbage" * 10)
    with pytest.raises(StateError, match="corrupt or not a MKLClassifier file") as info:
        MKLClassifier.load(tmp_path / "g.npz")
    assert "allow_pickle" not in str(info.value)
    with pytest.raises(FileNotFoundError, match="no saved"):
        statefile.read(tmp_path / "missing.npz")


def test_a_pickled_array_is_refused_without_numpy_advice(tmp_path):
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    path = tmp_path / "p.npz"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("__format__", "streammkl-state 2")
        zf.writestr("__meta__.json", json.dumps(META))
        zf.writestr("a/x.npy", buf.getvalue())
        zf.writestr("__sha256__", "0" * 64)
    with pytest.raises(StateError, match="needs pickle, which streammkl never loads"):
        statefile.read(path)
    with pytest.raises(ValueError, match="object dtype"):
        statefile.write(tmp_path / "o.npz", META, {"x": np.array([None])})


def test_river_files_of_the_earlier_npz_format_still_load(tmp_path):
    """Container version 1: what MKLClassifier.save wrote before this format (np.savez of
    ``__meta__``, ``__sha256__`` and ``a/<name>``), checksum still checked."""
    model = MKLClassifier(kernels=(kernels.Linear(), kernels.RBF(0.5, n_components=8)))
    for i in range(40):
        model.learn_one({"a": float(i % 5), "b": float(i % 3)}, i % 2 == 0)
    meta, arrays = model.to_state()
    payload = {f"a/{k}": v for k, v in arrays.items()}
    payload["__meta__"] = np.frombuffer(json.dumps(meta, sort_keys=True).encode(), np.uint8)
    digest = statefile.state_digest(meta, arrays).encode()
    payload["__sha256__"] = np.frombuffer(digest, np.uint8)
    np.savez(tmp_path / "v1.npz", **payload)
    assert MKLClassifier.load(tmp_path / "v1.npz").rounds().digest() == model.rounds().digest()
    payload["__sha256__"] = np.frombuffer(b"f" * 64, np.uint8)
    np.savez(tmp_path / "v1bad.npz", **payload)
    with pytest.raises(StateError, match="checksum"):
        MKLClassifier.load(tmp_path / "v1bad.npz")


def test_structured_files_of_the_earlier_zip_format_still_load(tmp_path):
    """What SequenceLabeler.save wrote before this format: meta.json + <name>.npy, no checksum."""
    model = SequenceLabeler()
    rng = np.random.default_rng(0)
    for _ in range(5):
        model.learn_one(rng.normal(size=(3, 4)), list(rng.integers(0, 2, size=3)))
    meta, arrays = model.to_state()
    with zipfile.ZipFile(tmp_path / "old.npz", "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("meta.json", json.dumps(meta, sort_keys=True, indent=1))
        for name, arr in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, arr, allow_pickle=False)
            zf.writestr(f"{name}.npy", buf.getvalue())
    assert SequenceLabeler.load(tmp_path / "old.npz").digest() == model.digest()


def test_core_river_and_structured_learners_write_the_same_format(tmp_path):
    core = OnlineMKL(kernels=(kernels.Linear(),))
    core.learn(np.array([1.0, 2.0]), 1.0)
    river = MKLClassifier()
    river.learn_one({"a": 1.0}, True)
    seq = SequenceLabeler()
    seq.learn_one(np.ones((2, 3)), [0, 1])
    paths = [
        core.save(tmp_path / "core.npz"),
        river.save(tmp_path / "river.npz"),
    ]
    seq.save(tmp_path / "seq.npz")
    paths.append(tmp_path / "seq.npz")
    for path in paths:
        assert zipfile.ZipFile(path).read("__format__") == b"streammkl-state 2"
    assert OnlineMKL.load(paths[0]).digest() == core.digest()
    with pytest.raises(StateError, match="not a OnlineMKL state"):
        OnlineMKL.load(paths[1])
