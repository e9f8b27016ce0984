"""Hostile HTTP clients for the daemon's endpoint: a slowloris, and probes timed under it.

:class:`Slowloris` holds many connections to a server, each sending a request head one byte at a
time and never finishing it, and reopens every connection the server closes (the attack that held
every worker of the daemon's health endpoint: 1 of 200 probes answered). :func:`probe` times
sequential ``GET`` requests of an honest client meanwhile (:class:`Probes`: answered, slowest).
Standard library only; from the tests and ``benchmarks/operability.py``.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import statistics
import threading
import time
from dataclasses import dataclass, field

__all__ = ["Probes", "Slowloris", "probe"]


class Slowloris:
    """Holds ``connections`` half-sent requests to ``host:port`` from the address ``source``.

    Parameters
    ----------
    host, port
        The server.
    connections
        Connections held at once (each reopened when the server closes it).
    source
        The local address the connections come from (``127.0.0.2``: another client than a
        probe from ``127.0.0.1``; the same address as the probes tests a policy per client).
    drip
        Seconds between two bytes of one connection.
    tls
        A client TLS context (the server speaks TLS): each connection completes its handshake,
        then drips.
    """

    HEAD = b"GET /healthz HTTP/1.1\r\nHost: x\r\n"

    def __init__(
        self,
        host: str,
        port: int,
        connections: int = 200,
        source: str = "127.0.0.2",
        drip: float = 0.5,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.host, self.port = host, port
        self.connections = connections
        self.source = source
        self.drip = drip
        self.tls = tls
        self.opened = 0  # connections opened (reopened ones included)
        self.dropped = 0  # connections the server closed
        self._socks: list[tuple[socket.socket, int]] = []  # (socket, bytes of the head sent)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Slowloris:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> Slowloris:
        """Open the connections, then drip in a background thread."""
        self._socks = [s for s in (self._open() for _ in range(self.connections)) if s]
        self._thread = threading.Thread(target=self._run, name="slowloris", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop dripping and close every connection."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        for sock, _ in self._socks:
            sock.close()
        self._socks = []

    @property
    def held(self) -> int:
        """Connections open now."""
        return len(self._socks)

    def _open(self) -> tuple[socket.socket, int] | None:
        try:
            sock = socket.create_connection(
                (self.host, self.port), timeout=2.0, source_address=(self.source, 0)
            )
            if self.tls is not None:
                sock = self.tls.wrap_socket(sock, server_hostname=self.host)
            sock.settimeout(0.05)
        except (OSError, ssl.SSLError):
            return None
        self.opened += 1
        return sock, 0

    def _byte(self, sent: int) -> bytes:
        """The next byte of a head that never ends: the request line, then headers forever."""
        if sent < len(self.HEAD):
            return self.HEAD[sent : sent + 1]
        filler = b"X-a: b\r\n"
        at = (sent - len(self.HEAD)) % len(filler)
        return filler[at : at + 1]

    def _run(self) -> None:
        while not self._stop.wait(self.drip):
            kept: list[tuple[socket.socket, int]] = []
            for sock, sent in self._socks:
                try:
                    sock.send(self._byte(sent))
                    kept.append((sock, sent + 1))
                except (OSError, ssl.SSLError):
                    self.dropped += 1
                    sock.close()
                    fresh = self._open()
                    if fresh is not None:
                        kept.append(fresh)
            self._socks = kept


@dataclass
class Probes:
    """The outcome of :func:`probe`: per request, its status (0: no answer) and seconds."""

    codes: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    @property
    def answered(self) -> int:
        """Requests answered 200."""
        return sum(1 for c in self.codes if c == 200)

    @property
    def slowest(self) -> float:
        """The slowest request's seconds."""
        return max(self.seconds, default=0.0)

    @property
    def median(self) -> float:
        """The median request's seconds."""
        return statistics.median(self.seconds) if self.seconds else 0.0


def probe(
    host: str,
    port: int,
    path: str = "/healthz",
    count: int = 200,
    timeout: float = 2.0,
    every: float = 0.02,
    tls: ssl.SSLContext | None = None,
    headers: dict[str, str] | None = None,
    pause: float = 0.0,
) -> Probes:
    """``count`` sequential ``GET path`` requests, each given ``timeout`` seconds; with
    ``pause``, each client waits that many seconds between its connect and its request (a
    client descheduled there, as on a loaded machine)."""
    out = Probes()
    for _ in range(count):
        t0 = time.perf_counter()
        code = 0
        conn: http.client.HTTPConnection
        if tls is None:
            conn = http.client.HTTPConnection(host, port, timeout=timeout)
        else:
            conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=tls)
        try:
            if pause:
                conn.connect()
                time.sleep(pause)
            conn.request("GET", path, headers=headers or {})
            resp = conn.getresponse()
            resp.read()
            code = resp.status
        except (OSError, http.client.HTTPException, ssl.SSLError):
            code = 0
        finally:
            conn.close()
        out.codes.append(code)
        out.seconds.append(time.perf_counter() - t0)
        time.sleep(every)
    return out
