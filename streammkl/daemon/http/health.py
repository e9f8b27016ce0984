"""``/metrics``, ``/healthz`` and ``/readyz`` on one port, in a background thread.

- ``/healthz``: 200 while the processing loop has ticked within ``stall_seconds`` (it is alive,
  not stuck).
- ``/readyz``: 200 when partitions are assigned, the broker connection works, and no piece of
  work has run longer than the runner allows (``metrics.slow_record_seconds``), else 503.
  Both answer a small JSON body explaining the state.

The server (:class:`~streammkl.daemon.http.webserver.BoundedServer`) serves a bounded number of
connections at once, each with a deadline; with a web config
(:mod:`streammkl.daemon.http.webconfig`) it speaks TLS and every path asks for basic
authentication.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from streammkl.daemon.config import MetricsSettings
from streammkl.daemon.http.webconfig import BasicAuth, WebConfig
from streammkl.daemon.http.webserver import BoundedServer

log = logging.getLogger(__name__)


class HealthServer:
    """Serve the registry and the health probes.

    Parameters
    ----------
    registry
        The registry to expose at ``/metrics``.
    status
        Called per probe; returns ``{"ready": bool, "last_tick": monotonic seconds, ...}``.
    host, port
        Where to listen (port 0 = any free port; see :attr:`port` after :meth:`start`).
    stall_seconds
        ``/healthz`` fails when the loop has not ticked for this long.
    web
        TLS and basic authentication (``None``: plain HTTP, no authentication).
    request_timeout
        Seconds a connection may take for its handshake, request and response.
    max_connections
        Connections served at once.
    """

    @classmethod
    def serve(
        cls,
        ms: MetricsSettings,
        registry: CollectorRegistry,
        status: Callable[[], dict[str, Any]],
        web: WebConfig | None = None,
    ) -> HealthServer:
        """Start a server as the ``[metrics]`` settings ``ms`` say (and log where it listens)."""
        server = cls(
            registry, status, ms.host, ms.port, stall_seconds=ms.stall_seconds, web=web,
            request_timeout=ms.request_timeout_seconds, max_connections=ms.max_connections,
        ).start()  # fmt: skip
        log.info("metrics on %s://%s:%d/metrics", server.scheme, ms.host, server.port)
        return server

    def __init__(
        self,
        registry: CollectorRegistry,
        status: Callable[[], dict[str, Any]],
        host: str = "127.0.0.1",
        port: int = 0,
        stall_seconds: float = 120.0,
        web: WebConfig | None = None,
        request_timeout: float = 10.0,
        max_connections: int = 8,
    ) -> None:
        self.registry = registry
        self.status = status
        self.host = host
        self.port = port
        self.stall_seconds = stall_seconds
        self.web = web
        self.request_timeout = request_timeout
        self.max_connections = max_connections
        self.auth = BasicAuth(web.users) if web is not None and web.users else None
        self._server: BoundedServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def scheme(self) -> str:
        """``https`` with TLS, else ``http``."""
        return "https" if self.web is not None and self.web.tls is not None else "http"

    def start(self) -> HealthServer:
        """Bind and serve in a background thread."""
        owner = self
        headers = dict(self.web.headers) if self.web is not None else {}

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if (
                    owner.auth is not None
                    and owner.auth.check(self.headers["Authorization"]) is None
                ):
                    self._send(401, b"unauthorized\n", "text/plain", auth=True)
                    return
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, generate_latest(owner.registry), CONTENT_TYPE_LATEST)
                elif path in ("/healthz", "/readyz"):
                    state = owner.status()
                    stalled = time.monotonic() - state.get("last_tick", 0.0) > owner.stall_seconds
                    state["alive"] = not stalled
                    ok = (
                        not stalled
                        if path == "/healthz"
                        else bool(state.get("ready")) and not stalled
                    )
                    body = json.dumps(state, default=str).encode()
                    self._send(200 if ok else 503, body, "application/json")
                else:
                    self._send(404, b"not found\n", "text/plain")

            def _send(self, code: int, body: bytes, ctype: str, auth: bool = False) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                if auth:
                    self.send_header("WWW-Authenticate", 'Basic realm="streammkl"')
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:  # silence per-request logging
                pass

        self._server = BoundedServer(
            (self.host, self.port),
            Handler,
            tls=self.web.tls if self.web is not None else None,
            timeout=self.request_timeout,
            workers=self.max_connections,
        )
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="streammkl-http", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
