"""``/metrics``, ``/healthz`` and ``/readyz`` on one port (a daemon thread, stdlib HTTP server).

- ``/healthz``: 200 while the processing loop has ticked recently (it is alive, not stuck).
- ``/readyz``: 200 when partitions are assigned and the broker connection works, else 503.
  Both answer a small JSON body explaining the state.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest


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
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        status: Callable[[], dict[str, Any]],
        host: str = "127.0.0.1",
        port: int = 0,
        stall_seconds: float = 120.0,
    ) -> None:
        self.registry = registry
        self.status = status
        self.host = host
        self.port = port
        self.stall_seconds = stall_seconds
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> HealthServer:
        """Bind and serve in a background thread."""
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
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

            def _send(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:  # silence per-request logging
                pass

        self._server = ThreadingHTTPServer((self.host, self.port), Handler)
        self._server.daemon_threads = True
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
