"""``/metrics``, ``/healthz``, ``/readyz`` and ``/startupz`` on one port, in background threads.

What the probes say is decided by the loop's status (``status()``, called per probe:
:meth:`streammkl.daemon.loop.publishing.Publisher.health`); this module serves it:

- ``/healthz``: 200 while the status says ``alive`` (the loop ticks, or is still starting);
- ``/readyz``: 200 while it says ``ready`` (and alive); 503 with the ``reasons`` otherwise;
- ``/startupz``: 200 once it says ``started`` (restored, compiled, connected: a startup probe).

Each answers a small JSON body: the status itself. The probes are served by workers of their
own (the ``probe`` lane, :data:`PROBE_WORKERS`), apart from ``/metrics`` (the ``work`` lane,
``metrics.max_connections`` workers), by a server whose slow clients hold no worker
(:class:`~streammkl.daemon.http.webserver.WebServer`); with a web config
(:mod:`streammkl.daemon.http.webconfig`) it speaks TLS and every path asks for basic
authentication.

A route is added with ``routes`` (:class:`~streammkl.daemon.http.webserver.Route`): e.g.
``Route("POST", "/predict", handler, lane="work", max_body=1 << 20)``; it is served beside the
others, behind the same TLS and authentication, on the lane it names.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from streammkl.daemon.config import MetricsSettings
from streammkl.daemon.http.webconfig import BasicAuth, WebConfig
from streammkl.daemon.http.webserver import Request, Response, Route, WebServer

log = logging.getLogger(__name__)

#: Workers that answer the probes (``/healthz``, ``/readyz``, ``/startupz``), and only them.
PROBE_WORKERS = 2
_UNAUTHORIZED = Response(
    401, b"unauthorized\n", headers={"WWW-Authenticate": 'Basic realm="streammkl"'}
)


class HealthServer:
    """Serve the registry and the health probes.

    Parameters
    ----------
    registry
        The registry to expose at ``/metrics``.
    status
        Called per probe; returns ``{"alive": bool, "ready": bool, "started": bool, ...}``
        (``alive`` and ``started`` default to true when absent).
    host, port
        Where to listen (port 0 = any free port; see :attr:`port` after :meth:`start`).
    web
        TLS and basic authentication (``None``: plain HTTP, no authentication).
    request_timeout
        Seconds a request may take once its head has arrived (body, handler, response).
    max_connections
        Workers serving ``/metrics`` (and any route of the ``work`` lane).
    header_timeout
        Seconds a connection has to send its request head (its TLS handshake included).
    per_client
        Connections one client address may hold at once.
    routes
        More routes, served beside these (e.g. a ``POST /predict``).
    """

    @classmethod
    def serve(
        cls,
        ms: MetricsSettings,
        registry: CollectorRegistry,
        status: Callable[[], dict[str, Any]],
        web: WebConfig | None = None,
        routes: Sequence[Route] = (),
    ) -> HealthServer:
        """Start a server as the ``[metrics]`` settings ``ms`` say (and log where it listens)."""
        server = cls(
            registry, status, ms.host, ms.port, web=web,
            request_timeout=ms.request_timeout_seconds, max_connections=ms.max_connections,
            header_timeout=ms.header_timeout_seconds, per_client=ms.max_connections_per_client,
            routes=routes,
        ).start()  # fmt: skip
        log.info("metrics on %s://%s:%d/metrics", server.scheme, ms.host, server.port)
        return server

    def __init__(
        self,
        registry: CollectorRegistry,
        status: Callable[[], dict[str, Any]],
        host: str = "127.0.0.1",
        port: int = 0,
        web: WebConfig | None = None,
        request_timeout: float = 10.0,
        max_connections: int = 8,
        header_timeout: float = 2.0,
        per_client: int = 8,
        routes: Sequence[Route] = (),
    ) -> None:
        self.registry = registry
        self.status = status
        self.host = host
        self.port = port
        self.web = web
        self.request_timeout = request_timeout
        self.max_connections = max_connections
        self.header_timeout = header_timeout
        self.per_client = per_client
        self.auth = BasicAuth(web.users) if web is not None and web.users else None
        own = [
            Route("GET", "/metrics", self._metrics, lane="work"),
            Route("GET", "/healthz", self._probe("alive"), lane="probe"),
            Route("GET", "/readyz", self._probe("ready"), lane="probe"),
            Route("GET", "/startupz", self._probe("started"), lane="probe"),
        ]
        self.routes = [r._replace(handler=self._guarded(r.handler)) for r in [*own, *routes]]
        self.server: WebServer | None = None

    @property
    def scheme(self) -> str:
        """``https`` with TLS, else ``http``."""
        return "https" if self.web is not None and self.web.tls is not None else "http"

    def _guarded(self, handler: Callable[[Request], Response]) -> Callable[[Request], Response]:
        """``handler`` behind basic authentication (when the web config asks for it)."""
        auth = self.auth
        if auth is None:
            return handler

        def guarded(request: Request) -> Response:
            if auth.check(request.headers["Authorization"]) is None:
                return _UNAUTHORIZED
            return handler(request)

        return guarded

    def _metrics(self, request: Request) -> Response:
        return Response(200, generate_latest(self.registry), CONTENT_TYPE_LATEST)

    def _probe(self, verdict: str) -> Callable[[Request], Response]:
        def probe(request: Request) -> Response:
            state = self.status()
            alive = bool(state.get("alive", True))
            ok = bool(state.get(verdict, True)) and (alive or verdict == "started")
            body = json.dumps(state, default=str).encode()
            return Response(200 if ok else 503, body, "application/json")

        return probe

    def start(self) -> HealthServer:
        """Bind and serve in background threads."""
        self.server = WebServer(
            (self.host, self.port),
            self.routes,
            {"probe": PROBE_WORKERS, "work": self.max_connections},
            tls=self.web.tls if self.web is not None else None,
            header_timeout=self.header_timeout,
            request_timeout=self.request_timeout,
            per_client=self.per_client,
            headers=dict(self.web.headers) if self.web is not None else {},
        ).start()
        self.port = self.server.port
        return self

    def stop(self, timeout: float = 2.0) -> None:
        """Stop serving and close every connection (returns within ``timeout`` seconds)."""
        if self.server is not None:
            self.server.stop(timeout)
            self.server = None
