"""The TLS / SASL part of the ``[kafka]`` settings: protocol, mechanism, credentials, files.

Secrets come from the settings (best from the environment: ``STREAMMKL_KAFKA__SASL_PASSWORD``) or
from files (``sasl_password_file``, ``ssl_key_password_file``, e.g. mounted Kubernetes secrets);
they are :class:`pydantic.SecretStr` (``**********`` in every repr) and never echoed by a
validation error. :mod:`streammkl.daemon.kafka.security` translates them for each client library.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

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
        """The secrets in force (what :class:`streammkl.daemon.kafka.security.RedactSecrets`
        masks in the logs)."""
        found = (
            secret(self.sasl_password, self.sasl_password_file),
            secret(self.ssl_key_password, self.ssl_key_password_file),
        )
        return [s for s in found if s]


def secret(value: SecretStr | None, path: Path | None) -> str | None:
    """A secret's value: given in the settings, or read from its file (None: neither)."""
    if value is not None:
        return value.get_secret_value()
    if path is not None:
        return Path(path).read_text().strip()
    return None
