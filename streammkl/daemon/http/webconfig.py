"""TLS and basic authentication of the metrics endpoint, configured as Prometheus exporters are.

The file is the one of the Prometheus exporter-toolkit (``--web.config.file``), so an operator
who protects node_exporter protects streammkl the same way::

    tls_server_config:
      cert_file: server.crt          # relative paths: to this file's directory
      key_file: server.key
      client_auth_type: RequireAndVerifyClientCert   # optional: mutual TLS
      client_ca_file: clients-ca.crt
      min_version: TLS12
    basic_auth_users:                # user: bcrypt hash (htpasswd -nBC 10 "" | tr -d ':\\n')
      prometheus: $2y$10$...
    http_server_config:
      headers:
        Strict-Transport-Security: max-age=31536000

Every key of the toolkit's format is accepted; the ones this server cannot honour
(``cipher_suites``, ``curve_preferences``, ``prefer_server_cipher_suites``, ``http2``) are
refused with a clear error rather than ignored. Basic auth without TLS is refused too unless
``allow_plaintext_basic_auth: true`` (the password would cross the network in clear).
Errors name the key, never a password hash.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import ssl
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bcrypt
import yaml

__all__ = ["BasicAuth", "WebConfig", "WebConfigError", "load_web_config"]

_CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "RequestClientCert": ssl.CERT_OPTIONAL,
    "RequireAnyClientCert": ssl.CERT_REQUIRED,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
_TLS_KEYS = {"cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version",
             "max_version"}  # fmt: skip
_UNSUPPORTED_TLS = {"cipher_suites", "curve_preferences", "prefer_server_cipher_suites",
                    "cert", "key", "client_allowed_sans"}  # fmt: skip
_TOP_KEYS = {"tls_server_config", "basic_auth_users", "http_server_config",
             "allow_plaintext_basic_auth"}  # fmt: skip


class WebConfigError(ValueError):
    """An invalid web config file; the message names the file and the key."""


@dataclass(frozen=True)
class WebConfig:
    """A loaded web config.

    Parameters
    ----------
    source
        The file it was read from.
    tls
        The server's TLS context (``None``: plain HTTP).
    users
        User name -> bcrypt hash (empty: no authentication).
    headers
        Extra response headers.
    """

    source: Path
    tls: ssl.SSLContext | None = None
    users: dict[str, bytes] = field(default_factory=dict, repr=False)
    headers: dict[str, str] = field(default_factory=dict)


def _fail(path: Path, where: str, what: str) -> WebConfigError:
    return WebConfigError(f"web config {path}: {where}: {what}")


def _file(path: Path, section: dict[str, Any], key: str) -> Path:
    value = section.get(key)
    if not isinstance(value, str) or not value:
        raise _fail(path, f"tls_server_config.{key}", "must be a file name")
    resolved = (path.parent / value).resolve()
    if not resolved.is_file():
        raise _fail(path, f"tls_server_config.{key}", f"no such file {resolved}")
    return resolved


def _tls_context(path: Path, tls: object) -> ssl.SSLContext:
    if not isinstance(tls, dict):
        raise _fail(path, "tls_server_config", "must be a mapping")
    unsupported = sorted(set(tls) & _UNSUPPORTED_TLS)
    if unsupported:
        raise _fail(path, f"tls_server_config.{unsupported[0]}", "not supported by streammkl")
    unknown = sorted(set(tls) - _TLS_KEYS)
    if unknown:
        raise _fail(path, f"tls_server_config.{unknown[0]}", "unknown key")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(_file(path, tls, "cert_file"), _file(path, tls, "key_file"))
    except ssl.SSLError as exc:
        raise _fail(path, "tls_server_config.cert_file/key_file", f"unusable: {exc}") from None
    for key, attr in (("min_version", "minimum_version"), ("max_version", "maximum_version")):
        if key in tls:
            version = _VERSIONS.get(str(tls[key]))
            if version is None:
                raise _fail(path, f"tls_server_config.{key}", f"one of {sorted(_VERSIONS)}")
            setattr(ctx, attr, version)
    auth = tls.get("client_auth_type", "NoClientCert")
    if auth not in _CLIENT_AUTH:
        raise _fail(path, "tls_server_config.client_auth_type", f"one of {sorted(_CLIENT_AUTH)}")
    if auth != "NoClientCert":
        if auth.startswith(("Verify", "RequireAndVerify")) or "client_ca_file" in tls:
            ctx.load_verify_locations(_file(path, tls, "client_ca_file"))
        elif auth in ("RequestClientCert", "RequireAnyClientCert"):
            raise _fail(
                path,
                "tls_server_config.client_auth_type",
                f"{auth} (client certificates not verified) is not supported; use "
                "RequireAndVerifyClientCert with a client_ca_file",
            )
        ctx.verify_mode = _CLIENT_AUTH[auth]
    return ctx


def _users(path: Path, users: object) -> dict[str, bytes]:
    if users is None:
        return {}
    if not isinstance(users, dict):
        raise _fail(path, "basic_auth_users", "must be a mapping of user names to bcrypt hashes")
    out = {}
    for name, hashed in users.items():
        where = f"basic_auth_users.{name}"
        if not isinstance(name, str) or not name or ":" in name:
            raise _fail(path, "basic_auth_users", "user names are non-empty, without ':'")
        if not isinstance(hashed, str) or not hashed.startswith(("$2a$", "$2b$", "$2y$")):
            raise _fail(path, where, "not a bcrypt hash (htpasswd -nBC 10 USER)")
        value = hashed.encode()
        try:
            bcrypt.checkpw(b"", value)  # validates the hash's format
        except ValueError:
            raise _fail(path, where, "not a valid bcrypt hash") from None
        out[name] = value
    return out


def load_web_config(path: str | Path) -> WebConfig:
    """Read and check a web config file.

    Raises
    ------
    WebConfigError
        Naming the file and the key at fault.
    """
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except OSError as exc:
        raise WebConfigError(f"web config {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise WebConfigError(f"web config {path}: invalid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise WebConfigError(f"web config {path}: must be a YAML mapping")
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise _fail(path, unknown[0], "unknown key")
    tls = _tls_context(path, data["tls_server_config"]) if data.get("tls_server_config") else None
    users = _users(path, data.get("basic_auth_users"))
    if users and tls is None and not data.get("allow_plaintext_basic_auth", False):
        raise _fail(
            path,
            "basic_auth_users",
            "basic auth without tls_server_config sends passwords in clear; add TLS (or set "
            "allow_plaintext_basic_auth: true, e.g. behind a TLS-terminating proxy)",
        )
    http = data.get("http_server_config") or {}
    if not isinstance(http, dict) or set(http) - {"headers"}:
        raise _fail(path, "http_server_config", "only 'headers' is supported")
    headers = http.get("headers") or {}
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise _fail(path, "http_server_config.headers", "a mapping of strings to strings")
    return WebConfig(path, tls, users, dict(headers))


class BasicAuth:
    """Checks ``Authorization: Basic`` headers against bcrypt hashes.

    bcrypt is slow on purpose (~50-250 ms a check at cost 10-12); a scrape every few seconds
    would pay that each time, so successful checks are remembered (by a salted sha256 of the
    credentials, in a small bounded cache), as the exporter-toolkit does. Failures are not
    cached, and an unknown user costs a bcrypt check too (no user enumeration by timing).
    """

    def __init__(self, users: dict[str, bytes], cache_size: int = 64) -> None:
        self.users = dict(users)
        self._cache: OrderedDict[bytes, str] = OrderedDict()
        self._cache_size = cache_size
        self._salt = bcrypt.gensalt()
        self._dummy = bcrypt.hashpw(b"streammkl-dummy", bcrypt.gensalt(rounds=10))
        self._lock = threading.Lock()

    def check(self, header: str | None) -> str | None:
        """The authenticated user name, or ``None``."""
        if not header or not header.startswith("Basic "):
            return None
        try:
            decoded = base64.b64decode(header[6:].strip(), validate=True)
        except (binascii.Error, ValueError):
            return None
        user_b, sep, password = decoded.partition(b":")
        if not sep:
            return None
        key = hashlib.sha256(self._salt + decoded).digest()
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        user = user_b.decode(errors="replace")
        hashed = self.users.get(user)
        ok = bcrypt.checkpw(password, hashed if hashed is not None else self._dummy)
        if not ok or hashed is None:
            return None
        with self._lock:
            self._cache[key] = user
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return user
