"""Kafka security: TLS and SASL for the consumer, the producer and the admin client.

The ``[kafka]`` settings carry ``security_protocol`` (``PLAINTEXT``, ``SSL``,
``SASL_PLAINTEXT``, ``SASL_SSL``), the SASL mechanism (``PLAIN``, ``SCRAM-SHA-256``,
``SCRAM-SHA-512``) and credentials, and the CA / client certificate / key files. Secrets come
from the settings (best from the environment: ``STREAMMKL_KAFKA__SASL_PASSWORD``) or from files
(``sasl_password_file``, ``ssl_key_password_file``, e.g. mounted Kubernetes secrets); they are
:class:`pydantic.SecretStr` (``**********`` in every repr), never echoed by a validation error,
and :class:`RedactSecrets` masks them in every log line.

:func:`kafka_python_options` and :func:`librdkafka_options` translate the settings for each
client library; every client the daemon creates (both consumers, both producers, the admin
client) takes its options from them, and nothing else.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, SecretStr, model_validator

Protocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
Mechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]

#: Settings whose values are secrets (redacted in validation errors and logs).
SECRET_FIELDS = frozenset({"sasl_password", "ssl_key_password"})


class KafkaSecurity(BaseModel):
    """The security part of the ``[kafka]`` settings (a base of ``KafkaSettings``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    security_protocol: Protocol = "PLAINTEXT"
    sasl_mechanism: Mechanism | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    #: A file holding the SASL password (instead of ``sasl_password``).
    sasl_password_file: Path | None = None
    #: CA bundle that signed the brokers' certificates (default: the system's).
    ssl_cafile: Path | None = None
    #: Client certificate and key (mutual TLS).
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None
    ssl_key_password: SecretStr | None = None
    ssl_key_password_file: Path | None = None
    #: Verify that the broker's certificate names the host connected to.
    ssl_check_hostname: bool = True

    @model_validator(mode="after")
    def _consistent(self) -> KafkaSecurity:
        sasl = self.security_protocol.startswith("SASL_")
        tls = self.security_protocol.endswith("SSL")
        if sasl:
            if self.sasl_mechanism is None or not self.sasl_username:
                raise ValueError(
                    f"security_protocol {self.security_protocol} needs sasl_mechanism and "
                    "sasl_username"
                )
            if (self.sasl_password is None) == (self.sasl_password_file is None):
                raise ValueError("give exactly one of sasl_password and sasl_password_file")
        elif self.sasl_mechanism or self.sasl_username or self.sasl_password:
            raise ValueError(
                f"SASL settings are given but security_protocol is {self.security_protocol} "
                "(SASL_PLAINTEXT or SASL_SSL uses them)"
            )
        files = (self.ssl_cafile, self.ssl_certfile, self.ssl_keyfile)
        if not tls and any(f is not None for f in files):
            raise ValueError(
                f"ssl_* files are given but security_protocol is {self.security_protocol} "
                "(SSL or SASL_SSL uses them)"
            )
        if (self.ssl_certfile is None) != (self.ssl_keyfile is None):
            raise ValueError("ssl_certfile and ssl_keyfile go together (mutual TLS)")
        if self.ssl_key_password is not None and self.ssl_key_password_file is not None:
            raise ValueError("give at most one of ssl_key_password and ssl_key_password_file")
        for name in ("sasl_password_file", "ssl_cafile", "ssl_certfile", "ssl_keyfile",
                     "ssl_key_password_file"):  # fmt: skip
            path = getattr(self, name)
            if path is not None and not Path(path).is_file():
                raise ValueError(f"{name}: no such file {path}")
        return self

    def secret_values(self) -> list[str]:
        """The secrets in force (for :class:`RedactSecrets`)."""
        found = (
            _secret(self.sasl_password, self.sasl_password_file),
            _secret(self.ssl_key_password, self.ssl_key_password_file),
        )
        return [s for s in found if s]


def _secret(value: SecretStr | None, path: Path | None) -> str | None:
    """A secret's value: given in the settings, or read from its file (None: neither)."""
    if value is not None:
        return value.get_secret_value()
    if path is not None:
        return Path(path).read_text().strip()
    return None


#: Each client library's option names for the settings (canonical name -> option).
_KAFKA_PYTHON = {
    "protocol": "security_protocol", "mechanism": "sasl_mechanism",
    "username": "sasl_plain_username", "password": "sasl_plain_password",
    "hostname": "ssl_check_hostname", "cafile": "ssl_cafile", "certfile": "ssl_certfile",
    "keyfile": "ssl_keyfile", "key_password": "ssl_password",
}  # fmt: skip
_LIBRDKAFKA = {
    "protocol": "security.protocol", "mechanism": "sasl.mechanism",
    "username": "sasl.username", "password": "sasl.password",
    "hostname": "ssl.endpoint.identification.algorithm", "cafile": "ssl.ca.location",
    "certfile": "ssl.certificate.location", "keyfile": "ssl.key.location",
    "key_password": "ssl.key.password",
}  # fmt: skip


def _options(s: KafkaSecurity, names: dict[str, str], hostname: Any) -> dict[str, Any]:
    """The settings under a client's option ``names``; ``hostname`` is that client's value
    for "verify the broker's host name" (``ssl_check_hostname``)."""
    if s.security_protocol == "PLAINTEXT":
        return {}
    out: dict[str, Any] = {names["protocol"]: s.security_protocol}
    if s.security_protocol.startswith("SASL_"):
        out[names["mechanism"]] = s.sasl_mechanism
        out[names["username"]] = s.sasl_username
        out[names["password"]] = _secret(s.sasl_password, s.sasl_password_file)
    if s.security_protocol.endswith("SSL"):
        out[names["hostname"]] = hostname
        for key, path in (("cafile", s.ssl_cafile), ("certfile", s.ssl_certfile),
                          ("keyfile", s.ssl_keyfile)):  # fmt: skip
            if path is not None:
                out[names[key]] = str(path)
        password = _secret(s.ssl_key_password, s.ssl_key_password_file)
        if password is not None:
            out[names["key_password"]] = password
    return out


def kafka_python_options(s: KafkaSecurity) -> dict[str, Any]:
    """kafka-python options (consumer, producer, admin client); none for PLAINTEXT."""
    return _options(s, _KAFKA_PYTHON, s.ssl_check_hostname)


def librdkafka_options(s: KafkaSecurity) -> dict[str, Any]:
    """librdkafka (confluent-kafka) options; none for PLAINTEXT."""
    return _options(s, _LIBRDKAFKA, "https" if s.ssl_check_hostname else "none")


class RedactSecrets(logging.Filter):
    """Masks the given secrets in every log record passing through a handler (a client
    library's error message could quote its configuration)."""

    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if len(s) >= 3]

    def filter(self, record: logging.LogRecord) -> bool:
        if self.secrets:
            message = record.getMessage()
            masked = message
            for secret in self.secrets:
                masked = masked.replace(secret, "***")
            if masked != message:
                record.msg, record.args = masked, None
            if record.exc_info and record.exc_info[1] is not None:
                text = logging.Formatter().formatException(record.exc_info)
                for secret in self.secrets:
                    text = text.replace(secret, "***")
                record.exc_text, record.exc_info = text, None
        return True


def install_redaction(secrets: list[str]) -> None:
    """Attach :class:`RedactSecrets` to every handler of the root logger."""
    if not secrets:
        return
    redact = RedactSecrets(secrets)
    for handler in logging.getLogger().handlers:
        handler.addFilter(redact)
