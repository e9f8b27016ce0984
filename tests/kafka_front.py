"""A Kafka-protocol front for the test broker: a SASL/PLAIN gate, and fetches that can be stalled.

The embedded Tansu has no SASL listener and cannot be told to withhold fetch responses, so this
front stands between the clients and a Tansu that *advertises the front's address* (every
connection a client opens, bootstrap then the advertised broker, passes here). It reads the Kafka
frames (length, request header) and:

- with ``sasl=(user, password)``: answers the SASL exchange itself, as a broker's
  ``SASL_PLAINTEXT`` listener would -- ``ApiVersions`` is forwarded to Tansu and its answer gains
  ``SaslHandshake`` and ``SaslAuthenticate``; ``SaslHandshake`` offers ``PLAIN``; other
  credentials get ``SASL_AUTHENTICATION_FAILED`` (error 58) and the connection is closed 100 ms
  later, as a Kafka broker closes it; once
  authenticated the connection is Tansu's;
- :meth:`KafkaFront.hold_fetches` withholds the responses to ``Fetch`` requests of the clients
  whose ``client.id`` starts with a prefix (and, Kafka answering in order, whatever follows them
  on that connection) until :meth:`KafkaFront.release`: those consumers own their partitions and
  keep their group membership (requests still reach the broker) but never learn a highwater.

Responses are built and requests read with kafka-python's protocol classes.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import subprocess
import threading
import time
from collections import deque
from pathlib import Path

from kafka.protocol.metadata import ApiVersionsResponse
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from streammkl.daemon.commands.broker import free_port, port_accepts, tansu_binary

FETCH, API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 1, 18, 17, 36
SASL_AUTHENTICATION_FAILED = 58
UNSUPPORTED_SASL_MECHANISM = 33
#: Seconds between refusing credentials and closing the connection: Apache Kafka's default
#: ``connection.failed.authentication.delay.ms``. Without it a loaded client can read the refusal
#: and the close in one read, and kafka-python 3.0 then discards the refusal (its transport
#: aborts on the close before handing on the bytes read with it).
FAILED_AUTHENTICATION_DELAY = 0.1


def _read_exactly(sock: socket.socket, n: int) -> bytes | None:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            return None
        out += chunk
    return bytes(out)


def read_frame(sock: socket.socket) -> bytes | None:
    """One Kafka frame's payload (``None`` at the end of the stream)."""
    head = _read_exactly(sock, 4)
    if head is None:
        return None
    return _read_exactly(sock, struct.unpack(">i", head)[0])


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def request_header(payload: bytes) -> tuple[int, int, int, str]:
    """(api key, api version, correlation id, client id) of a request."""
    key, version, corr, size = struct.unpack(">hhih", payload[:10])
    client = payload[10 : 10 + size].decode(errors="replace") if size >= 0 else ""
    return key, version, corr, client


class KafkaFront:
    """Listen on ``port`` and front each connection to ``backend`` (see the module docstring)."""

    def __init__(
        self,
        backend: tuple[str, int],
        port: int = 0,
        sasl: tuple[str, str] | None = None,
    ) -> None:
        self.backend = backend
        self.sasl = sasl
        self.listener = socket.create_server(("127.0.0.1", port))
        self.port = self.listener.getsockname()[1]
        self.authenticated = 0  # connections let through the gate
        self.refused = 0  # ... and refused by it
        self.held = 0  # fetch responses withheld so far
        self._hold_prefix: str | None = None
        self._released = threading.Event()
        self._released.set()
        self._closing = False
        threading.Thread(target=self._accept, daemon=True, name="kafka-front").start()

    # -- control --------------------------------------------------------------------------------

    def hold_fetches(self, client_prefix: str) -> None:
        """Withhold the fetch responses of clients whose id starts with ``client_prefix``."""
        self._hold_prefix = client_prefix
        self._released.clear()

    def release(self) -> None:
        """Send what was withheld, and hold nothing more."""
        self._hold_prefix = None
        self._released.set()

    def close(self) -> None:
        self._closing = True
        self._released.set()
        with contextlib.suppress(OSError):
            self.listener.close()

    # -- connections ----------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.backend, timeout=10)
            upstream.settimeout(None)
        except OSError:
            client.close()
            return
        with client, upstream:
            if self.sasl is not None and not self._authenticate(client, upstream):
                return
            pending: deque[tuple[int, int, str]] = deque()  # (correlation id, api key, client)
            lock = threading.Lock()
            back = threading.Thread(
                target=self._responses, args=(upstream, client, pending, lock), daemon=True
            )
            back.start()
            self._requests(client, upstream, pending, lock)
            with contextlib.suppress(OSError):
                upstream.shutdown(socket.SHUT_RDWR)
            back.join(5)

    def _requests(
        self,
        client: socket.socket,
        upstream: socket.socket,
        pending: deque[tuple[int, int, str]],
        lock: threading.Lock,
    ) -> None:
        while True:
            try:
                payload = read_frame(client)
            except OSError:
                return
            if payload is None:
                return
            key, _, corr, client_id = request_header(payload)
            with lock:
                pending.append((corr, key, client_id))
            try:
                upstream.sendall(frame(payload))
            except OSError:
                return

    def _responses(
        self,
        upstream: socket.socket,
        client: socket.socket,
        pending: deque[tuple[int, int, str]],
        lock: threading.Lock,
    ) -> None:
        while True:
            try:
                payload = read_frame(upstream)
            except OSError:
                payload = None
            if payload is None:
                with contextlib.suppress(OSError):
                    client.shutdown(socket.SHUT_RDWR)
                return
            (corr,) = struct.unpack(">i", payload[:4])
            key, client_id = -1, ""
            with lock:
                while pending:  # requests without a response (acks=0) are skipped
                    c, key, client_id = pending.popleft()
                    if c == corr:
                        break
            prefix = self._hold_prefix
            if key == FETCH and prefix is not None and client_id.startswith(prefix):
                self.held += 1
                self._released.wait()
            try:
                client.sendall(frame(payload))
            except OSError:
                return

    # -- the SASL gate --------------------------------------------------------------------------

    def _authenticate(self, client: socket.socket, upstream: socket.socket) -> bool:
        """The SASL exchange, answered here; whether the client may go on."""
        assert self.sasl is not None
        while True:
            payload = read_frame(client)
            if payload is None:
                return False
            key, version, corr, _ = request_header(payload)
            if key == API_VERSIONS:
                upstream.sendall(frame(payload))
                answer = read_frame(upstream)
                if answer is None:
                    return False
                client.sendall(frame(self._with_sasl(answer, version)))
            elif key == SASL_HANDSHAKE:
                mechanism = SaslHandshakeRequest.decode(payload, version=version, header=True)
                ok = mechanism.mechanism == "PLAIN"
                hs = SaslHandshakeResponse(
                    error_code=0 if ok else UNSUPPORTED_SASL_MECHANISM,
                    mechanisms=["PLAIN"],
                    version=version,
                )
                hs.with_header(correlation_id=corr)
                client.sendall(hs.encode(header=True, framed=True))
                if not ok:
                    return False
            elif key == SASL_AUTHENTICATE:
                auth = SaslAuthenticateRequest.decode(payload, version=version, header=True)
                _, user, password = bytes(auth.auth_bytes).split(b"\0", 2)
                ok = (user.decode(), password.decode()) == self.sasl
                response = SaslAuthenticateResponse(
                    error_code=0 if ok else SASL_AUTHENTICATION_FAILED,
                    error_message=None
                    if ok
                    else "Authentication failed: Invalid username or password",
                    auth_bytes=b"",
                    version=version,
                )
                response.with_header(correlation_id=corr)
                client.sendall(response.encode(header=True, framed=True))
                if ok:
                    self.authenticated += 1
                else:
                    self.refused += 1
                    # as a Kafka broker does (connection.failed.authentication.delay.ms, 100 by
                    # default): kafka-python drops a response read together with the close
                    time.sleep(FAILED_AUTHENTICATION_DELAY)
                return ok
            else:  # a request before authentication: a SASL listener drops the connection
                self.refused += 1
                return False

    @staticmethod
    def _with_sasl(answer: bytes, version: int) -> bytes:
        """Tansu's ApiVersions answer, listing the SASL requests too."""
        decoded = ApiVersionsResponse.decode(answer, version=version, header=True)
        if decoded.error_code != 0:
            return answer
        listed = {a.api_key for a in decoded.api_keys}
        for key, high in ((SASL_HANDSHAKE, 1), (SASL_AUTHENTICATE, 2)):
            if key not in listed:
                decoded.api_keys.append(
                    ApiVersionsResponse.ApiVersion(
                        api_key=key, min_version=0, max_version=high, version=version
                    )
                )
        (corr,) = struct.unpack(">i", answer[:4])
        decoded.with_header(correlation_id=corr)
        return decoded.encode(header=True)


class FrontedBroker:
    """A Tansu broker reachable only through a :class:`KafkaFront` (it advertises the front)."""

    def __init__(self, log: Path, sasl: tuple[str, str] | None = None) -> None:
        self.front_port = free_port()
        self.broker_port = free_port()
        url = f"tcp://127.0.0.1:{self.broker_port}"
        advertised = f"tcp://127.0.0.1:{self.front_port}"
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
        self.front = KafkaFront(("127.0.0.1", self.broker_port), self.front_port, sasl)

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.front_port}"

    def stop(self) -> None:
        self.front.close()
        self.proc.kill()
        self.proc.wait()
