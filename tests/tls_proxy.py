"""A TLS front for the test broker: Kafka clients speak TLS to it, it speaks plain TCP to Tansu.

The embedded Tansu build has no working TLS listener, so TLS is terminated here, in front of a
broker that *advertises this proxy's address*: every connection a client opens (bootstrap,
then the advertised broker) goes through TLS, verified against the test CA, optionally with a
client certificate (mutual TLS). Threads copy bytes both ways; nothing is parsed.
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import subprocess
import threading
from pathlib import Path

from streammkl.daemon.commands.broker import free_port, port_accepts, tansu_binary


class TLSProxy:
    """Listen with TLS on ``port`` and forward each connection to ``backend``."""

    def __init__(
        self,
        backend: tuple[str, int],
        cert: Path,
        key: Path,
        client_ca: Path | None = None,
        port: int = 0,
    ) -> None:
        self.backend = backend
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        if client_ca is not None:  # mutual TLS: only clients with a certificate of this CA
            self.context.load_verify_locations(client_ca)
            self.context.verify_mode = ssl.CERT_REQUIRED
        self.listener = socket.create_server(("127.0.0.1", port))
        self.port = self.listener.getsockname()[1]
        self.handshakes = 0  # completed TLS handshakes
        self.refused = 0  # failed ones (a plain client, an unknown certificate)
        self._closing = False
        threading.Thread(target=self._accept, daemon=True, name="tls-proxy").start()

    def _accept(self) -> None:
        while not self._closing:
            try:
                raw, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        try:
            raw.settimeout(10)
            conn = self.context.wrap_socket(raw, server_side=True)
            conn.settimeout(None)
            self.handshakes += 1
        except (ssl.SSLError, OSError):
            self.refused += 1
            raw.close()
            return
        try:
            upstream = socket.create_connection(self.backend, timeout=10)
            upstream.settimeout(None)
        except OSError:
            conn.close()
            return
        with conn, upstream:
            self._pump(conn, upstream)

    @staticmethod
    def _pump(a: ssl.SSLSocket, b: socket.socket) -> None:
        while True:
            ready = [a] if a.pending() else select.select([a, b], [], [], 30)[0]
            if not ready:
                continue
            for src in ready:
                dst = b if src is a else a
                try:
                    data = src.recv(65536)
                except (OSError, ssl.SSLError):
                    return
                if not data:
                    return
                try:
                    dst.sendall(data)
                except OSError:
                    return

    def close(self) -> None:
        self._closing = True
        with contextlib.suppress(OSError):
            self.listener.close()


class TLSBroker:
    """A Tansu broker reachable only through a :class:`TLSProxy` (it advertises the proxy)."""

    def __init__(self, cert: Path, key: Path, client_ca: Path | None, log: Path) -> None:
        self.proxy_port = free_port()
        self.broker_port = free_port()
        url = f"tcp://127.0.0.1:{self.broker_port}"
        advertised = f"tcp://127.0.0.1:{self.proxy_port}"
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                [str(tansu_binary()), "broker", "--listener-url", url,
                 "--advertised-listener-url", advertised],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        for _ in range(500):
            if port_accepts("127.0.0.1", self.broker_port):
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"tansu exited: {log.read_text()}")
            threading.Event().wait(0.02)
        self.proxy = TLSProxy(("127.0.0.1", self.broker_port), cert, key, client_ca,
                              port=self.proxy_port)  # fmt: skip

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.proxy_port}"

    def stop(self) -> None:
        self.proxy.close()
        self.proc.kill()
        self.proc.wait()
