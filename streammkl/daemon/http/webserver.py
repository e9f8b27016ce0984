"""A small HTTP server that a hostile client cannot exhaust: bounded workers, deadlines, TLS.

The standard library's ``ThreadingHTTPServer`` starts a thread per connection and waits for a
request forever: 200 half-sent requests held 200 threads (measured). Here

- at most ``workers`` connections are served at once (a fixed pool); the accept loop waits for
  a free worker, further connections wait in the listen backlog, and one that finds no worker
  within ``timeout`` seconds is closed;
- each connection has ``timeout`` seconds in total for its TLS handshake, its request and the
  response (a reaper closes it then, however slowly it drips bytes);
- with a TLS context, the handshake happens on the worker (a slow handshake blocks no one).
"""

from __future__ import annotations

import socket
import socketserver
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = ["BoundedServer"]


class BoundedServer(socketserver.TCPServer):
    """``TCPServer`` with a bounded worker pool, per-connection deadlines and optional TLS.

    Parameters
    ----------
    address
        ``(host, port)``; port 0 picks a free one.
    handler
        A ``BaseRequestHandler`` subclass (e.g. an ``http.server.BaseHTTPRequestHandler``).
    tls
        A server-side TLS context, or ``None`` for plain TCP.
    timeout
        Seconds a connection may last (handshake, request and response together).
    workers
        Connections served at once.
    """

    allow_reuse_address = True
    daemon_threads = True
    request_queue_size = 64

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[socketserver.BaseRequestHandler],
        tls: ssl.SSLContext | None = None,
        timeout: float = 10.0,
        workers: int = 8,
    ) -> None:
        self.tls = tls
        self.connection_timeout = float(timeout)
        self._slots = threading.BoundedSemaphore(workers)
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="streammkl-http")
        self._deadlines: dict[socket.socket, float] = {}
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self.refused = 0  # connections closed because no worker was free in time
        self.expired = 0  # connections closed at their deadline
        super().__init__(address, handler)
        self._reaper = threading.Thread(
            target=self._reap, name="streammkl-http-reaper", daemon=True
        )
        self._reaper.start()

    # -- the accept loop ----------------------------------------------------------------------

    # socketserver's own signature (typeshed types both as Any: a socket and its address)
    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(timeout=self.connection_timeout):
            self.refused += 1
            self.shutdown_request(request)
            return
        with self._lock:
            self._deadlines[request] = time.monotonic() + self.connection_timeout
        try:
            self._pool.submit(self._serve, request, client_address)
        except RuntimeError:  # the pool is shut down: we are closing
            self._done(request)

    def _serve(self, request: socket.socket, client_address: tuple[str, int]) -> None:
        conn: Any = request
        try:
            request.settimeout(self.connection_timeout)
            if self.tls is not None:
                conn = self.tls.wrap_socket(
                    request, server_side=True, do_handshake_on_connect=False
                )
                conn.do_handshake()
            self.finish_request(conn, client_address)
        except (OSError, ssl.SSLError, ValueError):
            pass  # a client that went away, timed out or failed its handshake
        finally:
            try:
                self.shutdown_request(conn)
            finally:
                self._done(request)

    def _done(self, request: socket.socket) -> None:
        with self._lock:
            self._deadlines.pop(request, None)
        self._slots.release()

    # -- deadlines ----------------------------------------------------------------------------

    def _reap(self) -> None:
        while not self._closing.wait(min(0.25, self.connection_timeout / 4)):
            now = time.monotonic()
            with self._lock:
                late = [s for s, deadline in self._deadlines.items() if deadline <= now]
            for sock in late:
                self.expired += 1
                try:
                    sock.shutdown(socket.SHUT_RDWR)  # the worker's blocked read returns
                except OSError:
                    pass

    def server_close(self) -> None:
        self._closing.set()
        super().server_close()
        self._pool.shutdown(wait=False, cancel_futures=True)
