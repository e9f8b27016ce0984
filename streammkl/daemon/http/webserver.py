"""A small HTTP server that a hostile client cannot starve: routes in lanes, deadlines, TLS.

The standard library's servers give every connection a thread from the moment it is accepted:
a client that drips its request one byte at a time holds that thread until its deadline, and a
few such clients held every worker of the bounded pool that served ``/healthz`` (measured: 1 of
200 probes answered under a slowloris client). Here a connection goes through three stages:

1. **Accepted** by the one event thread (``streammkl-http``) once its first bytes have arrived
   (Linux: :data:`DEFER_ACCEPT_SECONDS`), under a policy per client (its IP
   address): a client holds at most ``per_client`` connections at once; a new one beyond that
   closes the client's oldest connection still sending its request head (or is closed itself
   when all of the client's connections are being served). At most :data:`MAX_PENDING`
   connections send their heads at once; beyond, the oldest of the client holding the most is
   closed.
2. **Pending**: the TLS handshake and the request head are read *without blocking*, by the event
   thread, within ``header_timeout`` seconds of the accept; a slow client holds a socket, never a
   worker. A head larger than :data:`MAX_HEAD` bytes is refused (431).
3. **Served** once the head is complete: the request goes to its route's *lane*, a fixed pool of
   worker threads with a short queue. A lane of n workers holds at most
   ``n * (1 + QUEUE_PER_WORKER)`` requests at once, in service or waiting; one more is answered
   503 at once. The lane counts what it holds, not its queue's length: a burst that arrives
   before the workers have woken to take from the queue is not refused while they idle (seen
   under load: 2 of 6 requests answered 503 by a lane whose 2 workers had not yet run). Lanes
   keep routes apart: the health probes have workers of their own, so scrapes (or a future
   ``POST /predict``) cannot take them. A worker reads the body (routes that accept one), calls
   the handler and writes the response, within ``request_timeout`` seconds (the event thread
   shuts the socket down at the deadline, however slowly the client reads).

One request per connection (``Connection: close``). ``HEAD`` is answered for every ``GET`` route
as ``GET`` is, without the body (its ``Content-Length`` that of the ``GET`` answer).
:meth:`WebServer.stop` closes every socket and returns within ``timeout`` seconds whatever the
clients do; every thread is a daemon thread, so a stuck handler never holds the interpreter's
exit.

A route is added by naming it (:class:`Route`): a method, a path, a handler from
:class:`Request` to :class:`Response`, its lane and the body it accepts (``max_body`` bytes, 0:
none)::

    Route("POST", "/predict", predict, lane="work", max_body=1 << 20)
"""

from __future__ import annotations

import collections
import http
import http.client
import io
import logging
import queue
import selectors
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = ["MAX_HEAD", "MAX_PENDING", "Request", "Response", "Route", "WebServer"]

log = logging.getLogger(__name__)

#: The largest request head (request line and headers) accepted, in bytes.
MAX_HEAD = 16_384
#: Connections sending their request heads at once, over all clients.
MAX_PENDING = 256
#: Requests a lane holds waiting for a worker, per worker (beyond those in service).
QUEUE_PER_WORKER = 2
_EVENT_TICK = 0.1  # the event thread's longest wait (deadlines are checked at least this often)
#: Linux's ``TCP_DEFER_ACCEPT``: the kernel hands a connection over once its first bytes have
#: arrived (or after about this many seconds without any). A probe's head, sent in one write
#: right after its connect, is then there when the connection is accepted and is served at
#: once: never a pending connection that a flood from the probe's own address could evict
#: before its head arrived (seen under load: 1 of 200 probes reset while its client had not
#: yet sent). A client that connects and sends nothing (a TCP probe) still connects.
DEFER_ACCEPT_SECONDS = 1
#: The listen backlog, which is also the kernel's queue of connections whose handshake is done
#: but whose first bytes have not arrived (deferred, above). When that queue is full the kernel
#: answers with SYN cookies, and a connection completed by a cookie is accepted *before* its
#: first byte: a probe whose client was descheduled between its connect and its send then sat
#: pending with nothing to read while a flood from its own address evicted it (the rare failed
#: probe under a same-address slowloris; reproduced with 200 flooding connections, a backlog
#: of 128 and probes pausing 10-50 ms before sending: 1-2 of 200 closed unanswered; with this
#: backlog 200 of 200). Linux caps it at ``net.core.somaxconn`` (4096 by default). A flood from
#: one address of more connections than this can still evict such a paused probe: no policy on
#: the server's side tells a silent probe from the flood's own silent connections.
LISTEN_BACKLOG = 1024


@dataclass(frozen=True)
class Request:
    """A request as a handler sees it.

    Parameters
    ----------
    method, path, query
        ``GET``, ``/metrics``, and what followed ``?`` (``""`` when nothing).
    headers
        The request's headers (case-insensitive lookups: ``headers["Authorization"]``).
    body
        The body (empty for routes that accept none).
    client
        The client's address.
    """

    method: str
    path: str
    query: str
    headers: http.client.HTTPMessage
    body: bytes
    client: tuple[str, int]


@dataclass(frozen=True)
class Response:
    """A response: status, body, content type and extra headers."""

    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: Mapping[str, str] = field(default_factory=dict)

    def encode(self, extra: Mapping[str, str] | None = None, head: bool = False) -> bytes:
        """The bytes on the wire (HTTP/1.1, ``Connection: close``), with ``extra`` headers;
        ``head``: without the body (the answer to ``HEAD``; ``Content-Length`` as for ``GET``)."""
        try:
            phrase = http.HTTPStatus(self.status).phrase
        except ValueError:
            phrase = ""
        lines = [
            f"HTTP/1.1 {self.status} {phrase}",
            f"Content-Type: {self.content_type}",
            f"Content-Length: {len(self.body)}",
            "Connection: close",
        ]
        lines += [f"{k}: {v}" for k, v in {**(extra or {}), **self.headers}.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (b"" if head else self.body)


class Route(NamedTuple):
    """A path the server answers: ``handler`` is called on a worker of ``lane``."""

    method: str
    path: str
    handler: Callable[[Request], Response]
    lane: str = "work"
    #: The largest body accepted (``Content-Length``), in bytes; 0: no body.
    max_body: int = 0


class _Conn:
    """One client connection, pending (its head being read) or served."""

    __slots__ = ("buf", "client", "closed", "deadline", "ip", "sock", "tls_done")

    def __init__(self, sock: socket.socket, client: tuple[str, int], deadline: float) -> None:
        self.sock = sock  # an ssl.SSLSocket with TLS (it took the accepted socket over)
        self.client = client
        self.ip = client[0]
        self.deadline = deadline
        self.buf = bytearray()
        self.tls_done = not isinstance(sock, ssl.SSLSocket)
        self.closed = False


class _Job(NamedTuple):
    """A request whose head is complete, for a lane's worker."""

    conn: _Conn
    route: Route
    target: str
    headers: http.client.HTTPMessage
    rest: bytes  # what followed the head (the body's start)
    head: bool = False  # a HEAD request: answered as GET, without the body


class WebServer:
    """An HTTP(S) server of fixed routes, in lanes of workers, with deadlines per stage.

    Parameters
    ----------
    address
        ``(host, port)``; port 0 picks a free one (:attr:`port` after :meth:`start`).
    routes
        What is served.
    lanes
        Workers per lane (every route's lane must be here).
    tls
        A server-side TLS context, or ``None`` for plain HTTP.
    header_timeout
        Seconds from the accept to a complete request head (TLS handshake included).
    request_timeout
        Seconds a served request may take (body, handler, response).
    per_client
        Connections one client address may hold at once.
    headers
        Extra headers of every response.
    """

    def __init__(
        self,
        address: tuple[str, int],
        routes: Sequence[Route],
        lanes: Mapping[str, int],
        tls: ssl.SSLContext | None = None,
        header_timeout: float = 2.0,
        request_timeout: float = 10.0,
        per_client: int = 8,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.routes: dict[tuple[str, str], Route] = {}
        for route in routes:
            if route.lane not in lanes:
                raise ValueError(f"route {route.method} {route.path}: no lane {route.lane!r}")
            self.routes[(route.method, route.path)] = route
        self.tls = tls
        self.header_timeout = float(header_timeout)
        self.request_timeout = float(request_timeout)
        self.per_client = int(per_client)
        self.headers = dict(headers or {})
        self._lanes = {name: int(n) for name, n in lanes.items()}
        self._queues: dict[str, queue.Queue[_Job | None]] = {
            name: queue.Queue()
            for name in self._lanes  # bounded by _held, below
        }
        #: Requests each lane holds (waiting or in service), under ``_lock``.
        self._held: collections.Counter[str] = collections.Counter()
        self._listener = socket.create_server(address, backlog=LISTEN_BACKLOG)
        self._listener.setblocking(False)
        defer = getattr(socket, "TCP_DEFER_ACCEPT", None)  # Linux only
        if defer is not None:
            self._listener.setsockopt(socket.IPPROTO_TCP, defer, DEFER_ACCEPT_SECONDS)
        self.port = int(self._listener.getsockname()[1])
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._pending: collections.OrderedDict[_Conn, None] = collections.OrderedDict()
        self._served: dict[_Conn, float] = {}  # connection -> its deadline
        self._per_ip: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()  # _served, _per_ip, _held (workers end what they serve)
        self._closing = threading.Event()
        self._threads: list[threading.Thread] = []
        #: Connections closed by the policy, per why: ``evicted`` (a newer one of the client, or
        #: too many pending), ``refused`` (the client's connections all served), ``head_late``
        #: (no complete head in time), ``late`` (a served request past its deadline), ``busy``
        #: (the lane's queue full: 503), ``bad`` (a malformed or oversized request).
        self.closed: collections.Counter[str] = collections.Counter()

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> WebServer:
        """Serve in background threads: the event thread and every lane's workers."""
        self._selector.register(self._listener, selectors.EVENT_READ, "accept")
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._threads = [threading.Thread(target=self._events, name="streammkl-http", daemon=True)]
        for lane, n in self._lanes.items():
            self._threads += [
                threading.Thread(
                    target=self._work, args=(lane,), name=f"streammkl-http-{lane}_{i}", daemon=True
                )
                for i in range(n)
            ]
        for thread in self._threads:
            thread.start()
        return self

    def queued(self, lane: str) -> int:
        """Requests waiting in ``lane``'s queue for a worker."""
        return self._queues[lane].qsize()

    def held(self, lane: str) -> int:
        """Requests ``lane`` holds, waiting or in service (at ``(1 + QUEUE_PER_WORKER)`` per
        worker, a further request there gets 503)."""
        with self._lock:
            return self._held[lane]

    def stop(self, timeout: float = 2.0) -> None:
        """Close every connection and the socket; return within ``timeout`` seconds."""
        if self._closing.is_set():
            return
        self._closing.set()
        self._wake()
        with self._lock:
            for conn in self._served:
                self._shut(conn)
        for lane, jobs in self._queues.items():
            while True:  # requests not taken by a worker yet: closed, unanswered
                try:
                    job = jobs.get_nowait()
                except queue.Empty:
                    break
                if job is not None:
                    self._close(job.conn)
            for _ in range(self._lanes[lane]):
                jobs.put_nowait(None)
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))
        late = [t.name for t in self._threads if t.is_alive()]
        if late:
            log.warning("http threads still busy at exit (daemon threads, not waited for): %s",
                        ", ".join(late))  # fmt: skip

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass

    # -- the event thread: accept, handshake, read heads, deadlines ---------------------------

    def _events(self) -> None:
        try:
            while not self._closing.is_set():
                for key, _ in self._selector.select(_EVENT_TICK):
                    if key.data == "accept":
                        self._accept()
                    elif key.data == "wake":
                        try:
                            self._wake_r.recv(4096)
                        except OSError:
                            pass
                    else:
                        self._advance(key.data)
                self._expire(time.monotonic())
        except Exception:  # never silently: the probes would stop answering
            log.exception("the http event thread failed")
        finally:
            for conn in list(self._pending):
                self._drop(conn, None)
            self._selector.close()
            for sock in (self._listener, self._wake_r, self._wake_w):
                sock.close()

    def _accept(self) -> None:
        for _ in range(64):  # a burst at most, then the other events get their turn
            try:
                sock, client = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # EMFILE and the like: the listener stays
                log.warning("http accept failed: %s", exc)
                return
            sock.setblocking(False)
            if self.tls is not None:
                try:
                    sock = self.tls.wrap_socket(
                        sock, server_side=True, do_handshake_on_connect=False
                    )
                except (OSError, ValueError):
                    self._close_socket(sock)
                    continue
            conn = _Conn(sock, client, time.monotonic() + self.header_timeout)
            if not self._admit(conn):
                self.closed["refused"] += 1
                self._close_socket(sock)
                continue
            self._pending[conn] = None
            self._selector.register(sock, selectors.EVENT_READ, conn)
            self._advance(conn)  # the head may be there already

    def _admit(self, new: _Conn) -> bool:
        """The accept policy: room for ``new``'s client (evicting its oldest pending connection
        when it holds ``per_client``) and among all pending connections."""
        with self._lock:
            held = self._per_ip[new.ip]
        while held >= self.per_client:
            oldest = next((c for c in self._pending if c.ip == new.ip), None)
            if oldest is None:
                return False
            # its head may have arrived since its last read (a burst of accepts comes before
            # the read events): a probe sent from the attacker's own address is served, not
            # evicted (seen under load: 1 of 200 probes reset)
            self._advance(oldest)
            if oldest in self._pending:
                self._drop(oldest, "evicted")
            with self._lock:
                held = self._per_ip[new.ip]
        if len(self._pending) >= MAX_PENDING:
            counts = collections.Counter(c.ip for c in self._pending)
            hog = counts.most_common(1)[0][0]
            self._drop(next(c for c in self._pending if c.ip == hog), "evicted")
        with self._lock:
            self._per_ip[new.ip] += 1
        return True

    def _advance(self, conn: _Conn) -> None:
        """Move a pending connection on: its handshake, then its head, without blocking."""
        try:
            if not conn.tls_done:
                try:
                    conn.sock.do_handshake()  # type: ignore[attr-defined]
                except ssl.SSLWantReadError:
                    return self._want(conn, selectors.EVENT_READ)
                except ssl.SSLWantWriteError:
                    return self._want(conn, selectors.EVENT_WRITE)
                conn.tls_done = True
            while True:
                try:
                    data = conn.sock.recv(8192)
                except (BlockingIOError, ssl.SSLWantReadError):
                    return self._want(conn, selectors.EVENT_READ)
                except ssl.SSLWantWriteError:
                    return self._want(conn, selectors.EVENT_WRITE)
                if not data:
                    return self._drop(conn, None)  # the client went away
                conn.buf += data
                end = _head_end(conn.buf)
                if end >= 0:
                    return self._dispatch(conn, end)
                if len(conn.buf) > MAX_HEAD:
                    return self._answer_now(conn, Response(431, b"request head too large\n"))
        except (OSError, ssl.SSLError, ValueError):
            self._drop(conn, None)  # a failed handshake, a reset

    def _want(self, conn: _Conn, events: int) -> None:
        try:
            self._selector.modify(conn.sock, events, conn)
        except (KeyError, ValueError, OSError):
            self._drop(conn, None)

    def _dispatch(self, conn: _Conn, end: int) -> None:
        """A complete head: find the route and hand the request to its lane."""
        parsed = _parse_head(bytes(conn.buf[:end]))
        if parsed is None:
            return self._answer_now(conn, Response(400, b"bad request\n"))
        method, target, headers = parsed
        path = target.split("?", 1)[0]
        head = method == "HEAD" and (method, path) not in self.routes
        route = self.routes.get(("GET", path) if head else (method, path))
        if route is None:
            if any(p == path for _, p in self.routes):
                methods = {m for m, p in self.routes if p == path}
                allowed = ", ".join(sorted(methods | ({"HEAD"} if "GET" in methods else set())))
                return self._answer_now(
                    conn, Response(405, b"method not allowed\n", headers={"Allow": allowed})
                )
            return self._answer_now(conn, Response(404, b"not found\n"))
        self._unwatch(conn)
        now = time.monotonic()
        with self._lock:
            full = self._held[route.lane] >= self._lanes[route.lane] * (1 + QUEUE_PER_WORKER)
            if not full:
                self._held[route.lane] += 1
                self._served[conn] = now + self.request_timeout
        if full:
            self.closed["busy"] += 1
            self._reply_once(conn, Response(503, b"busy\n", headers={"Retry-After": "1"}))
            self._close(conn)
            return
        self._queues[route.lane].put_nowait(
            _Job(conn, route, target, headers, bytes(conn.buf[end:]), head)
        )

    def _answer_now(self, conn: _Conn, response: Response) -> None:
        """Answer from the event thread (one non-blocking send at most) and close."""
        self.closed["bad" if response.status in (400, 431) else "answered"] += 1
        self._unwatch(conn)
        self._reply_once(conn, response)
        self._close(conn)

    def _reply_once(self, conn: _Conn, response: Response) -> None:
        try:
            conn.sock.send(response.encode(self.headers))
        except (OSError, ssl.SSLError, ValueError):
            pass  # a client that does not read gets nothing

    def _expire(self, now: float) -> None:
        late = [c for c in self._pending if c.deadline <= now]
        for conn in late:
            self._drop(conn, "head_late")
        with self._lock:
            over = [c for c, deadline in self._served.items() if deadline <= now]
            for conn in over:
                self.closed["late"] += 1
                self._served[conn] = float("inf")  # shut once; the worker closes it
                self._shut(conn)

    def _unwatch(self, conn: _Conn) -> None:
        self._pending.pop(conn, None)
        try:
            self._selector.unregister(conn.sock)
        except (KeyError, ValueError, OSError):
            pass

    def _drop(self, conn: _Conn, why: str | None) -> None:
        if why is not None:
            self.closed[why] += 1
        self._unwatch(conn)
        self._close(conn)

    # -- workers ------------------------------------------------------------------------------

    def _work(self, lane: str) -> None:
        jobs = self._queues[lane]
        while True:
            job = jobs.get()
            if job is None or self._closing.is_set():
                if job is not None:
                    self._close(job.conn)
                return
            try:
                self._serve(job)
            except (OSError, ssl.SSLError, ValueError):
                pass  # a client that went away, or its deadline shut the socket
            finally:
                self._close(job.conn)
                with self._lock:
                    self._held[lane] -= 1

    def _serve(self, job: _Job) -> None:
        sock, route = job.conn.sock, job.route
        sock.settimeout(self.request_timeout)  # blocking, each wait bounded (and the deadline)
        body = b""
        if route.max_body:
            try:
                length = int(job.headers.get("Content-Length", "0"))
            except ValueError:
                length = -1
            if not 0 <= length <= route.max_body:
                sock.sendall(Response(413, b"body too large\n").encode(self.headers))
                return
            body = job.rest
            while len(body) < length:
                chunk = sock.recv(min(65_536, length - len(body)))
                if not chunk:
                    return
                body += chunk
            body = body[:length]
        path, _, query = job.target.partition("?")
        request = Request(route.method, path, query, job.headers, body, job.conn.client)
        try:
            response = route.handler(request)
        except Exception:
            log.exception("http %s %s failed", route.method, path)
            response = Response(500, b"internal error\n")
        sock.sendall(response.encode(self.headers, head=job.head))

    # -- closing ------------------------------------------------------------------------------

    def _shut(self, conn: _Conn) -> None:
        try:  # the plain socket's shutdown, also under TLS: a blocked read or write returns
            socket.socket.shutdown(conn.sock, socket.SHUT_RDWR)
        except OSError:
            pass

    def _close(self, conn: _Conn) -> None:
        with self._lock:
            if conn.closed:
                return
            conn.closed = True
            self._served.pop(conn, None)
            if self._per_ip[conn.ip] > 0:
                self._per_ip[conn.ip] -= 1
            if self._per_ip[conn.ip] <= 0:
                del self._per_ip[conn.ip]
        self._close_socket(conn.sock)

    @staticmethod
    def _close_socket(sock: socket.socket) -> None:
        try:
            sock.close()
        except OSError:
            pass


def _head_end(buf: bytes | bytearray) -> int:
    """The index just past the blank line ending a request head (-1: not there yet)."""
    crlf = buf.find(b"\r\n\r\n")
    lf = buf.find(b"\n\n")
    ends = [i + 4 for i in (crlf,) if i >= 0] + [i + 2 for i in (lf,) if i >= 0]
    return min(ends) if ends else -1


def _parse_head(head: bytes) -> tuple[str, str, http.client.HTTPMessage] | None:
    """(method, target, headers) of a request head, or ``None`` when it is malformed."""
    line, _, rest = head.partition(b"\n")
    parts = line.decode("latin-1").strip().split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/1.") or not parts[1].startswith("/"):
        return None
    try:
        headers = http.client.parse_headers(io.BytesIO(rest))
    except (http.client.HTTPException, ValueError):
        return None
    return parts[0], parts[1], headers
