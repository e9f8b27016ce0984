"""Checkpoints: atomic and checksummed, keep the last K, fall back past corruption, no pickle."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from streammkl.daemon.checkpoints.store import (
    CheckpointError,
    CheckpointStore,
    decode_offsets,
    encode_offsets,
)


def save(store: CheckpointStore, n: int) -> None:
    store.save(
        {"counters": {"n": n}, "offsets": encode_offsets({("t", 0): n})}, {"w": np.arange(n)}
    )


def test_roundtrip_exact_arrays_and_meta(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path, keep=3)
    arrays = {
        "w": np.linspace(0, 1, 7),
        "idx": np.array([3, 1], dtype=np.int64),
        "s": np.float64(2),
    }
    offsets = {("in", 0): 10, ("in", 2): 5, ("other", 1): 0}
    written = store.save({"offsets": encode_offsets(offsets), "counters": {"a": 1}}, arrays)
    back = store.load_latest()
    assert back is not None and back.seq == written.seq == 1
    assert back.offsets == offsets
    assert back.counters == {"a": 1}
    for k, v in arrays.items():
        np.testing.assert_array_equal(back.arrays[k], v)
        assert back.arrays[k].dtype == np.asarray(v).dtype
    assert back.size_bytes == written.size_bytes > 0
    assert sorted(p.name for p in back.path.iterdir()) == ["SHA256SUMS", "arrays.npz", "meta.json"]
    assert json.loads((back.path / "meta.json").read_text())["format"] == "streammkl-checkpoint"


def test_keeps_only_the_newest_k(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path, keep=2)
    for n in range(1, 6):
        save(store, n)
    assert [p.name for p in store.list()] == ["ckpt-000000000005", "ckpt-000000000004"]
    assert store.load_latest().counters == {"n": 5}  # type: ignore[union-attr]


@pytest.mark.parametrize("damage", ["flip_array_byte", "truncate_meta", "delete_sums", "bad_json"])
def test_corrupt_newest_falls_back_with_warning(
    tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = CheckpointStore(tmp_path, keep=3)
    save(store, 1)
    save(store, 2)
    newest = store.list()[0]
    if damage == "flip_array_byte":
        data = bytearray((newest / "arrays.npz").read_bytes())
        data[len(data) // 2] ^= 0xFF
        (newest / "arrays.npz").write_bytes(bytes(data))
    elif damage == "truncate_meta":
        (newest / "meta.json").write_bytes((newest / "meta.json").read_bytes()[:10])
    elif damage == "delete_sums":
        (newest / "SHA256SUMS").unlink()
    else:  # valid checksum of invalid JSON: checksums are recomputed to reach the JSON parser
        import hashlib

        bad = b"{not json"
        (newest / "meta.json").write_bytes(bad)
        arrays = (newest / "arrays.npz").read_bytes()
        (newest / "SHA256SUMS").write_text(
            f"{hashlib.sha256(bad).hexdigest()}  meta.json\n"
            f"{hashlib.sha256(arrays).hexdigest()}  arrays.npz\n"
        )
    with caplog.at_level("WARNING"):
        back = store.load_latest()
    assert back is not None and back.counters == {"n": 1}
    assert store.fallbacks == 1
    assert "falling back" in caplog.text


def test_all_corrupt_refuses_to_start_from_scratch(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    save(store, 1)
    (store.list()[0] / "arrays.npz").write_bytes(b"junk")
    with pytest.raises(CheckpointError, match=r"none of the 1 checkpoint\(s\) .* \(1 corrupt\)"):
        store.load_latest()


def test_newer_format_version_is_a_clear_error(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    ckpt = store.save({"version": 99}, {})
    with pytest.raises(CheckpointError, match="version 99 is newer"):
        CheckpointStore.read(ckpt.path)


def test_object_arrays_are_refused_no_pickle(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    with pytest.raises(CheckpointError, match="object dtype"):
        store.save({}, {"bad": np.array([{"a": 1}], dtype=object)})
    assert store.list() == []


def test_half_written_temporaries_are_ignored_and_cleaned(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path)
    save(store, 1)
    tmp = tmp_path / ".tmp-000000000002-1234"
    tmp.mkdir()
    (tmp / "meta.json").write_text("{")
    assert store.load_latest().seq == 1  # type: ignore[union-attr]
    store.clean_temporaries()
    assert not tmp.exists()


def test_write_is_fsynced_then_renamed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    real_fsync, real_rename = os.fsync, os.rename
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(
        os, "rename", lambda a, b: (events.append(f"rename {Path(b).name}"), real_rename(a, b))[1]
    )
    CheckpointStore(tmp_path).save({}, {"w": np.zeros(2)})
    # three files + the temp dir fsynced before the rename, the parent directory after it
    assert events == ["fsync"] * 4 + ["rename ckpt-000000000001", "fsync"]


def test_offsets_codec() -> None:
    offsets = {("b", 1): 3, ("a", 10): 7, ("a", 2): 0}
    enc = encode_offsets(offsets)
    assert enc == {"a": {"10": 7, "2": 0}, "b": {"1": 3}}
    assert decode_offsets(json.loads(json.dumps(enc))) == offsets


def _resum(path: Path) -> None:
    """Recompute a checkpoint's checksums after editing it (a writer that knows the format)."""
    import hashlib

    meta, arrays = (path / "meta.json").read_bytes(), (path / "arrays.npz").read_bytes()
    (path / "SHA256SUMS").write_text(
        f"{hashlib.sha256(meta).hexdigest()}  meta.json\n"
        f"{hashlib.sha256(arrays).hexdigest()}  arrays.npz\n"
    )


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda m: m["offsets"]["t"].update({"0": "ten"}), "offsets['t']['0'] = 'ten'"),
        (lambda m: m["offsets"]["t"].update({"x": 3}), "offsets['t']['x'] = 3"),
        (lambda m: m.update(offsets=[1, 2]), "offsets is not an object"),
        (lambda m: m["counters"].update(n="many"), "counters['n'] = 'many'"),
        (lambda m: m.update(outbox=[{"topic": "t"}]), "outbox is not a list of outputs"),
        (lambda m: m.update(seq="7"), "seq / created"),
    ],
)
def test_malformed_but_checksummed_newest_is_skipped_with_a_log_line_and_a_count(
    tmp_path: Path, edit: object, needle: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = CheckpointStore(tmp_path, keep=3)
    save(store, 1)
    save(store, 2)
    newest = store.list()[0]
    meta = json.loads((newest / "meta.json").read_text())
    edit(meta)  # type: ignore[operator]
    (newest / "meta.json").write_text(json.dumps(meta))
    _resum(newest)
    with caplog.at_level("WARNING"):
        back = store.load_latest()
    assert back is not None and back.counters == {"n": 1}
    assert store.fallbacks == 1 and store.skipped == {"malformed": 1}
    assert "malformed checkpoint skipped" in caplog.text and needle in caplog.text


def test_signed_checkpoints_only_load_with_the_key(tmp_path: Path) -> None:
    key = b"k" * 32
    signed = CheckpointStore(tmp_path, hmac_key=key)
    save(signed, 1)
    assert (signed.list()[0] / "HMAC-SHA256").exists()
    assert signed.load_latest().counters == {"n": 1}  # type: ignore[union-attr]
    # a writer without the key plants a newer checkpoint (valid checksums, no signature) ...
    save(CheckpointStore(tmp_path), 2)
    assert signed.load_latest().counters == {"n": 1}  # type: ignore[union-attr]
    assert signed.skipped == {"unsigned": 1}
    # ... or copies an old signature next to its own content
    save(CheckpointStore(tmp_path), 3)
    planted, old = signed.list()[0], signed.list()[-1]
    (planted / "HMAC-SHA256").write_bytes((old / "HMAC-SHA256").read_bytes())
    assert signed.load_latest().counters == {"n": 1}  # type: ignore[union-attr]
    assert signed.skipped == {"unsigned": 2}
    with pytest.raises(CheckpointError, match="none of the 3"):
        CheckpointStore(tmp_path, hmac_key=b"another key, not the one").load_latest()
    # without a key the signatures are not checked
    assert CheckpointStore(tmp_path).load_latest().counters == {"n": 3}  # type: ignore[union-attr]


def test_hmac_key_file_checks(tmp_path: Path) -> None:
    from streammkl.daemon.checkpoints.store import read_key

    short = tmp_path / "short"
    short.write_text("abc\n")
    with pytest.raises(CheckpointError, match="3 bytes; use at least 16"):
        read_key(short)
    with pytest.raises(CheckpointError, match="No such file"):
        read_key(tmp_path / "missing")
    good = tmp_path / "key"
    good.write_text("0123456789abcdef0123\n")
    assert read_key(good) == b"0123456789abcdef0123"


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o077])
def test_checkpoint_files_are_private_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    import stat

    old = os.umask(umask)
    try:
        store = CheckpointStore(tmp_path / "a" / "ck")
        save(store, 1)
    finally:
        os.umask(old)
    ckpt = store.list()[0]
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in [ckpt, *ckpt.iterdir()]}
    assert modes == {ckpt.name: 0o700, "meta.json": 0o600, "arrays.npz": 0o600, "SHA256SUMS": 0o600}
    assert stat.S_IMODE((tmp_path / "a" / "ck").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o700


def test_inspect_verifies_signatures_with_the_key(tmp_path: Path) -> None:
    from streammkl.daemon.commands.cli import main

    key = tmp_path / "key"
    key.write_text("k" * 32)
    signed = CheckpointStore(tmp_path / "ck", hmac_key=b"k" * 32)
    for n in (1, 2):
        signed.save(
            {"counters": {"examples_learned": n}, "offsets": encode_offsets({("t", 0): n}),
             "model": {"class": "x", "meta": {}}, "summary": {"model_digest": "d"}},
            {"w": np.arange(n)},
        )  # fmt: skip
    save_unsigned = CheckpointStore(tmp_path / "ck")
    save_unsigned.save(
        {"counters": {"examples_learned": 99}, "offsets": {}, "model": {"class": "x", "meta": {}},
         "summary": {"model_digest": "d"}},
        {},
    )  # fmt: skip
    from streammkl.daemon.checkpoints.inspection import inspect_checkpoint

    assert inspect_checkpoint(tmp_path / "ck")["examples_learned"] == 99
    info = inspect_checkpoint(tmp_path / "ck", str(key))
    assert info["examples_learned"] == 2 and info["skipped_by_reason"] == {"unsigned": 1}
    assert main(["inspect", str(tmp_path / "ck"), "--hmac-key-file", str(key), "--json"]) == 0
