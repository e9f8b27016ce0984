"""The metrics endpoint against hostile clients: TLS, basic auth, deadlines, lanes, slowloris.

A real HTTP(S) client (``urllib`` with a verifying TLS context) talks to the real server;
certificates come from a throwaway CA (``tests.tls``). The scrape by a real Prometheus over TLS
with basic authentication is ``test_prometheus_scrapes_over_tls_with_basic_auth``; the slowloris
client is ``simulators.slowloris`` (real sockets, 200 connections dripping a byte at a time).
"""

from __future__ import annotations

import base64
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import bcrypt
import pytest
import yaml
from prometheus_client import CollectorRegistry, Counter

from simulators.slowloris import Slowloris, probe
from streammkl.daemon.http.health import HealthServer
from streammkl.daemon.http.webconfig import WebConfigError, load_web_config
from streammkl.daemon.http.webserver import Request, Response, Route, WebServer
from tests.test_prometheus_live import api, start_prometheus, stop
from tests.tls import Certs, make_certs

PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def web_config(folder: Path, certs: Certs, **extra: Any) -> Path:
    config = {
        "tls_server_config": {
            "cert_file": str(certs.server_cert),
            "key_file": str(certs.server_key),
            "min_version": "TLS12",
        },
        "basic_auth_users": {
            "prometheus": bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
        },
        "http_server_config": {"headers": {"X-Content-Type-Options": "nosniff"}},
        **extra,
    }
    path = folder / "web.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def registry() -> CollectorRegistry:
    reg = CollectorRegistry()
    Counter("streammkl_probe", "a known metric", registry=reg).inc(42)
    return reg


def status() -> dict[str, Any]:
    return {"ready": True, "last_tick": time.monotonic(), "assigned": ["secret-topic/0"]}


def get(url: str, ca: Path | None = None, auth: str | None = None) -> tuple[int, dict, bytes]:
    request = urllib.request.Request(url)
    if auth is not None:
        request.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    context = ssl.create_default_context(cafile=str(ca)) if ca is not None else None
    try:
        with urllib.request.urlopen(request, timeout=30, context=context) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


@pytest.fixture
def tls_server(tmp_path: Path, certs: Certs, request: pytest.FixtureRequest) -> Any:
    """The endpoint with TLS and basic auth; a generous request timeout (a loaded machine
    must not cut honest clients) unless the test asks for a short one."""
    timeout = getattr(request, "param", 15.0)
    web = load_web_config(web_config(tmp_path, certs))
    server = HealthServer(registry(), status, web=web, request_timeout=timeout, max_connections=4)
    server.start()
    yield server
    server.stop()


def test_tls_and_basic_auth_guard_every_path(tls_server: HealthServer, certs: Certs) -> None:
    base = f"https://127.0.0.1:{tls_server.port}"
    for path in ("/metrics", "/healthz", "/readyz"):
        code, headers, body = get(base + path, certs.ca)
        assert code == 401 and headers["WWW-Authenticate"] == 'Basic realm="streammkl"'
        assert b"secret-topic" not in body and b"streammkl_probe" not in body
        assert get(base + path, certs.ca, f"prometheus:{PASSWORD}x")[0] == 401
        assert get(base + path, certs.ca, f"intruder:{PASSWORD}")[0] == 401
    code, headers, body = get(base + "/metrics", certs.ca, f"prometheus:{PASSWORD}")
    assert code == 200 and b"streammkl_probe_total 42.0" in body
    assert headers["X-Content-Type-Options"] == "nosniff"
    code, _, body = get(base + "/readyz", certs.ca, f"prometheus:{PASSWORD}")
    assert code == 200 and b"secret-topic/0" in body
    # plain HTTP to the TLS port gets nothing
    assert tls_server.scheme == "https"
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        urllib.request.urlopen(f"http://127.0.0.1:{tls_server.port}/metrics", timeout=10)
    # a client that does not trust the CA refuses the server
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        urllib.request.urlopen(base + "/metrics", timeout=10)


@pytest.mark.parametrize("tls_server", [2.0], indirect=True)
def test_half_sent_requests_cannot_hold_the_server(tls_server: HealthServer, certs: Certs) -> None:
    """Slow clients (a TLS handshake never finished, a request never completed) hold a worker
    for at most the request timeout (2 s here); the pool stays at 4 threads. An honest client
    gets through (retrying: on a loaded machine its own handshake may take the 2 s)."""
    stalled = []
    for i in range(12):
        sock = socket.create_connection(("127.0.0.1", tls_server.port), timeout=30)
        if i % 2:  # half of them start a TLS handshake and a request, then stall
            ctx = ssl.create_default_context(cafile=str(certs.ca))
            try:
                sock = ctx.wrap_socket(sock, server_hostname="127.0.0.1")
                sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            except (ConnectionError, ssl.SSLError):
                # a loaded machine: the server's deadline ran out during this slow client's
                # handshake and it was closed already -- what the server must do to it anyway
                sock.close()
                continue
        stalled.append(sock)
    for attempt in range(10):
        try:
            code, _, body = get(
                f"https://127.0.0.1:{tls_server.port}/metrics", certs.ca, f"prometheus:{PASSWORD}"
            )
            break
        except (urllib.error.URLError, ConnectionError, ssl.SSLError):
            if attempt == 9:
                raise
    assert code == 200 and b"streammkl_probe" in body
    workers = [t for t in threading.enumerate() if t.name.startswith("streammkl-http-work_")]
    assert len(workers) == 4  # the pool, never a thread per connection
    for sock in stalled:  # the server closed every one of them (its deadline, 1 s)
        try:
            assert sock.recv(1024) == b""
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            sock.close()


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        ({"tls_server_config": {"cert_file": "missing.pem", "key_file": "k"}}, "no such file"),
        ({"tls_server_config": None}, "sends passwords in clear"),
        ({"basic_auth_users": {"u": "plaintext-password"}}, "basic_auth_users.u: not a bcrypt"),
        ({"tls_server_config": {"cipher_suites": ["x"]}}, "cipher_suites: not supported"),
        ({"listen": "0.0.0.0"}, "listen: unknown key"),
        ({"tls_server_config": {"client_auth_type": "Sometimes"}}, "client_auth_type"),
    ],
)
def test_web_config_errors_name_the_key_and_never_a_secret(
    tmp_path: Path, certs: Certs, edit: dict[str, Any], needle: str
) -> None:
    path = web_config(tmp_path, certs)
    config = yaml.safe_load(path.read_text())
    for key, value in edit.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            config[key] = {**config[key], **value}
        else:
            config[key] = value
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(WebConfigError) as info:
        load_web_config(path)
    assert needle in str(info.value) and str(path) in str(info.value)
    assert "$2b$" not in str(info.value) and "plaintext-password" not in str(info.value)


def test_mutual_tls_refuses_clients_without_a_certificate(tmp_path: Path, certs: Certs) -> None:
    path = web_config(tmp_path, certs)
    config = yaml.safe_load(path.read_text())
    config["tls_server_config"].update(
        client_auth_type="RequireAndVerifyClientCert", client_ca_file=str(certs.ca)
    )
    path.write_text(yaml.safe_dump(config))
    server = HealthServer(registry(), status, web=load_web_config(path), request_timeout=2.0)
    server.start()
    try:
        url = f"https://127.0.0.1:{server.port}/metrics"
        with pytest.raises((urllib.error.URLError, ConnectionError, ssl.SSLError)):
            get(url, certs.ca, f"prometheus:{PASSWORD}")
        ctx = ssl.create_default_context(cafile=str(certs.ca))
        ctx.load_cert_chain(certs.client_cert, certs.client_key)
        request = urllib.request.Request(url)
        token = base64.b64encode(f"prometheus:{PASSWORD}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
        with urllib.request.urlopen(request, timeout=30, context=ctx) as resp:
            assert resp.status == 200
    finally:
        server.stop()


def test_prometheus_scrapes_over_tls_with_basic_auth(tmp_path: Path, certs: Certs) -> None:
    server = HealthServer(registry(), status, web=load_web_config(web_config(tmp_path, certs)))
    server.start()
    (tmp_path / "password").write_text(PASSWORD)
    scrape = {
        "job_name": "streammkl",
        "scheme": "https",
        "tls_config": {"ca_file": str(certs.ca), "server_name": "127.0.0.1"},
        "basic_auth": {"username": "prometheus", "password_file": str(tmp_path / "password")},
        "static_configs": [{"targets": [f"127.0.0.1:{server.port}"]}],
    }
    denied = {**scrape, "job_name": "no-password"}
    denied.pop("basic_auth")
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "900ms"},
        "scrape_configs": [scrape, denied],
    }
    proc, url = start_prometheus(tmp_path, "", config)

    def query(expr: str) -> list[Any]:
        try:
            return list(
                api(url, "/api/v1/query?" + urllib.parse.urlencode({"query": expr}))["result"]
            )
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return []

    try:
        deadline = time.monotonic() + 90  # generous: a loaded machine scrapes late
        got: dict[str, Any] = {}
        while time.monotonic() < deadline and len(got) < 3:
            for expr in ('up{job="streammkl"}', 'up{job="no-password"}',
                         'streammkl_probe_total{job="streammkl"}'):  # fmt: skip
                result = query(expr)
                if result:
                    got[expr] = float(result[0]["value"][1])
            time.sleep(0.5)
        assert got == {
            'up{job="streammkl"}': 1.0,  # scraped over TLS with the password
            'up{job="no-password"}': 0.0,  # 401 without it
            'streammkl_probe_total{job="streammkl"}': 42.0,
        }, (tmp_path / "prometheus.log").read_text()[-2000:]
    finally:
        stop(proc)
        server.stop()


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.skipif(not hasattr(socket, "TCP_DEFER_ACCEPT"), reason="Linux's TCP_DEFER_ACCEPT")
def test_a_probe_slow_to_send_its_head_is_not_evicted_by_its_own_address() -> None:
    """The race a flood from the probes' own address opens: a probe connects, its client is
    slow to send the head (descheduled on a loaded machine), and meanwhile ``per_client`` more
    connections from the same address arrive. Accepted at its connect, the probe would be the
    client's oldest pending connection, evicted before its head came (reset: no answer). The
    listener accepts a connection once its first bytes are there (``TCP_DEFER_ACCEPT``): the
    silent connections are not accepted at all in the meantime, and the probe is served."""
    server = HealthServer(registry(), status, per_client=2, header_timeout=5.0).start()
    silent: list[socket.socket] = []
    try:
        addr = ("127.0.0.1", server.port)
        silent += [socket.create_connection(addr, timeout=2.0) for _ in range(2)]
        slow = socket.create_connection(addr, timeout=5.0)
        silent += [socket.create_connection(addr, timeout=2.0) for _ in range(4)]
        time.sleep(0.3)  # the server's event thread runs; the probe has sent nothing yet
        slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = b""
        while b"\r\n" not in answer:
            chunk = slow.recv(4096)
            assert chunk, "the probe's connection was closed without an answer"
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 200"), answer[:80]
        slow.close()
    finally:
        for sock in silent:
            sock.close()
        server.stop()


@pytest.mark.parametrize("source", ["127.0.0.2", "127.0.0.1"], ids=["other-client", "same-client"])
def test_probes_answer_under_slowloris(source: str) -> None:
    """200 connections dripping their heads a byte every 0.5 s, reopened when closed: every
    one of 200 probes is answered, and scrapes too (before: 1 of 200 probes, slowest 9.1 s).
    From another address the policy per client bounds the attacker; from the probes' own, a
    probe's head arrives with its connection and is served at once, while the attacker's
    connections evict its own oldest ones."""
    server = HealthServer(registry(), status, max_connections=4).start()
    try:
        with Slowloris("127.0.0.1", server.port, 200, source=source) as attack:
            wait_for(lambda: attack.dropped > 0, 20, "the server to close late heads")
            probes = probe("127.0.0.1", server.port, "/healthz", count=200, timeout=5.0)
            scrapes = probe("127.0.0.1", server.port, "/metrics", count=20, timeout=5.0)
            assert attack.held > 0  # the attack went on all along
        failed = [
            (i, c, round(t, 4))
            for i, (c, t) in enumerate(zip(probes.codes, probes.seconds))
            if c != 200
        ]
        assert probes.answered == 200, (failed, server.server.closed if server.server else None)
        assert scrapes.answered == 20
        closed = server.server.closed if server.server is not None else {}
        assert closed["head_late"] + closed["evicted"] + closed["refused"] > 0
    finally:
        server.stop()


def test_probes_that_pause_before_sending_are_answered_under_a_same_address_flood() -> None:
    """A flood from the probes' own address of more connections than a small listen backlog
    fills the kernel's queue of deferred connections, so it completes handshakes by SYN
    cookies, and a cookie's connection is accepted before its first byte: a probe whose client
    pauses between its connect and its send then sat pending, empty, and the flood evicted it
    (with a backlog of 128: 5 of 200 probes unanswered at 400 connections). Within the backlog
    every probe's head is there when it is accepted."""
    server = HealthServer(registry(), status, max_connections=4).start()
    try:
        with Slowloris("127.0.0.1", server.port, 400, source="127.0.0.1") as attack:
            wait_for(lambda: attack.dropped > 0, 20, "the server to close late heads")
            probes = probe(
                "127.0.0.1", server.port, "/healthz", count=100, timeout=5.0, pause=0.05
            )  # fmt: skip
            assert attack.held > 0
        failed = [(i, c) for i, c in enumerate(probes.codes) if c != 200]
        assert probes.answered == 100, (failed, server.server.closed if server.server else None)
        closed = server.server.closed if server.server is not None else {}
        assert closed["evicted"] > 0  # the flood went on and was evicted meanwhile
    finally:
        server.stop()


def test_probes_answer_under_slowloris_over_tls(tls_server: HealthServer, certs: Certs) -> None:
    """The same attack completing its TLS handshakes first (each costs the server a handshake)
    against TLS + basic auth: every authenticated probe is answered."""
    client = ssl.create_default_context(cafile=str(certs.ca))
    token = base64.b64encode(f"prometheus:{PASSWORD}".encode()).decode()
    with Slowloris("127.0.0.1", tls_server.port, 100, tls=client) as attack:
        wait_for(lambda: attack.held > 0, 20, "the attack to connect")
        probes = probe(
            "127.0.0.1", tls_server.port, "/readyz", count=50, timeout=10.0, tls=client,
            headers={"Authorization": f"Basic {token}"},
        )  # fmt: skip
    assert probes.answered == 50, probes.codes


def _post(port: int, results: list[int]) -> None:
    """``POST /stuck`` (a 1-byte body); its status appended to ``results``."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}/stuck", data=b"x", method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            results.append(resp.status)
    except urllib.error.HTTPError as exc:
        results.append(exc.code)


def test_a_saturated_work_lane_leaves_the_probes_their_workers() -> None:
    """A route added beside the others (as a ``POST /predict`` would be) whose handler blocks
    holds the ``work`` lane's 2 workers and fills its queue; a further request there gets 503 at
    once, and the probes, on a lane of their own, are still answered."""
    release = threading.Event()
    entered = threading.Semaphore(0)

    def stuck(request: Request) -> Response:
        entered.release()
        release.wait(30)
        return Response(200, b"done " + request.body + b"\n")

    route = Route("POST", "/stuck", stuck, lane="work", max_body=64)
    server = HealthServer(registry(), status, max_connections=2, routes=[route]).start()
    results: list[int] = []

    # 2 workers + a queue of 4
    posts = [threading.Thread(target=_post, args=(server.port, results)) for _ in range(6)]
    try:
        for t in posts:
            t.start()
        for _ in range(2):
            assert entered.acquire(timeout=10)
        assert server.server is not None
        deadline = time.monotonic() + 30
        while server.server.queued("work") < 4 and time.monotonic() < deadline:
            time.sleep(0.01)  # the other 4 reach the queue (a fixed 1-s wait failed at load 12)
        queued = server.server.queued("work")
        assert queued == 4, (  # what the server did with them, for a failure under load
            f"queued {queued}, held {server.server.held('work')}, "
            f"closed {dict(server.server.closed)}, answered {results}"
        )
        busy = probe("127.0.0.1", server.port, "/metrics", count=1, timeout=5.0)
        assert busy.codes == [503]
        probes = probe("127.0.0.1", server.port, "/healthz", count=50, timeout=2.0)
        assert probes.answered == 50
        base = f"http://127.0.0.1:{server.port}"
        assert get(base + "/stuck")[0] == 405  # the route's method only
        assert get(base + "/nowhere")[0] == 404
    finally:
        release.set()
        for t in posts:
            t.join(30)
        server.stop()
    assert results == [200] * 6


def test_a_burst_before_the_workers_wake_is_held_not_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Six requests reach a lane of 2 workers before either worker has taken from the queue (the
    workers are held at their start, as a loaded machine holds threads that have not run yet):
    the lane holds all six (2 workers + 4 waiting), none is answered 503; a seventh, once they
    are all held, is. Before, the lane counted its queue's length: 2 of the 6 got 503 while both
    workers were idle (seen in CI under load)."""
    gate = threading.Event()
    release = threading.Event()
    entered = threading.Semaphore(0)
    work = WebServer._work

    def held_back(self: WebServer, lane: str) -> None:
        gate.wait(30)
        work(self, lane)

    monkeypatch.setattr(WebServer, "_work", held_back)

    def stuck(request: Request) -> Response:
        entered.release()
        release.wait(30)
        return Response(200, b"done\n")

    route = Route("POST", "/stuck", stuck, lane="work", max_body=64)
    server = HealthServer(registry(), status, max_connections=2, routes=[route]).start()
    assert server.server is not None
    results: list[int] = []

    posts = [threading.Thread(target=_post, args=(server.port, results)) for _ in range(6)]
    try:
        for t in posts:
            t.start()
        deadline = time.monotonic() + 30
        while server.server.held("work") < 6 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.server.held("work") == 6
        assert server.server.queued("work") == 6  # no worker has taken one yet
        assert server.server.closed["busy"] == 0
        extra = probe("127.0.0.1", server.port, "/metrics", count=1, timeout=5.0)
        assert extra.codes == [503]  # the lane holds 2 x (1 + 2): full
        gate.set()
        for _ in range(2):
            assert entered.acquire(timeout=10)
        assert server.server.held("work") == 6
    finally:
        gate.set()
        release.set()
        for t in posts:
            t.join(30)
        server.stop()
    assert results == [200] * 6
    assert server.server is None


def test_stop_returns_in_seconds_whatever_the_clients_do() -> None:
    """Slow heads, a handler that never returns and a client that never reads: ``stop`` returns
    within its 2 s, and every thread left is a daemon thread (the interpreter's exit never waits
    for them; before, the process lingered ~100 s after its final checkpoint)."""
    never = threading.Event()

    def stuck(request: Request) -> Response:
        never.wait(60)
        return Response(200)

    route = Route("GET", "/stuck", stuck, lane="work")
    server = HealthServer(registry(), status, routes=[route]).start()
    holder = threading.Thread(
        target=probe, args=("127.0.0.1", server.port, "/stuck", 1, 30.0), daemon=True
    )
    holder.start()
    quiet = socket.create_connection(("127.0.0.1", server.port))
    quiet.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")  # never reads the answer
    try:
        with Slowloris("127.0.0.1", server.port, 50):
            time.sleep(1.0)
            t0 = time.monotonic()
            server.stop(timeout=2.0)
            took = time.monotonic() - t0
        assert took < 3.0
        left = [t for t in threading.enumerate() if t.name.startswith("streammkl-http")]
        assert all(t.daemon for t in left)
        assert len(left) == 1 and left[0].name.startswith("streammkl-http-work_")  # stuck
    finally:
        never.set()
        quiet.close()


def test_head_is_answered_like_get_without_a_body() -> None:
    server = HealthServer(registry(), status).start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        for path in ("/metrics", "/healthz", "/readyz", "/startupz"):
            code, headers, body = get(base + path)
            req = urllib.request.Request(base + path, method="HEAD")
            with urllib.request.urlopen(req, timeout=10) as resp:
                assert resp.status == code == 200, path
                assert resp.read() == b""
                assert resp.headers["Content-Type"] == headers["Content-Type"]
                if path == "/metrics":  # the probes' bodies carry a clock: lengths may differ
                    assert int(resp.headers["Content-Length"]) == len(body)
                else:
                    assert int(resp.headers["Content-Length"]) > 0
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(urllib.request.Request(base + "/metrics", method="PUT"))
        assert info.value.code == 405 and info.value.headers["Allow"] == "GET, HEAD"
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(urllib.request.Request(base + "/nope", method="HEAD"))
        assert info.value.code == 404
    finally:
        server.stop()
