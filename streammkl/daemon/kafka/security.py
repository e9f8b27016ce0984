"""Kafka security for each client library: TLS and SASL options, secrets kept out of the logs.

The ``[kafka]`` settings carry ``security_protocol`` (``PLAINTEXT``, ``SSL``,
``SASL_PLAINTEXT``, ``SASL_SSL``), the SASL mechanism (``PLAIN``, ``SCRAM-SHA-256``,
``SCRAM-SHA-512``) and credentials, and the CA / client certificate / key files
(:class:`~streammkl.daemon.config.security.KafkaSecurity`). :func:`kafka_python_options` and
:func:`librdkafka_options` translate them for each client library; every client the daemon
creates (both consumers, both producers, the admin client, the mix topic's clients) takes its
options from them, and nothing else. :class:`RedactSecrets` masks the secrets in every log line.
"""

from __future__ import annotations

import logging

from streammkl.daemon.config.security import KafkaSecurity, secret

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


def _options(s: KafkaSecurity, names: dict[str, str], hostname: bool | str) -> dict[str, object]:
    """The settings under a client's option ``names``; ``hostname`` is that client's value
    for "verify the broker's host name" (``ssl_check_hostname``)."""
    if s.security_protocol == "PLAINTEXT":
        return {}
    out: dict[str, object] = {names["protocol"]: s.security_protocol}
    if s.security_protocol.startswith("SASL_"):
        out[names["mechanism"]] = s.sasl_mechanism
        out[names["username"]] = s.sasl_username
        out[names["password"]] = secret(s.sasl_password, s.sasl_password_file)
    if s.security_protocol.endswith("SSL"):
        out[names["hostname"]] = hostname
        for key, path in (("cafile", s.ssl_cafile), ("certfile", s.ssl_certfile),
                          ("keyfile", s.ssl_keyfile)):  # fmt: skip
            if path is not None:
                out[names[key]] = str(path)
        password = secret(s.ssl_key_password, s.ssl_key_password_file)
        if password is not None:
            out[names["key_password"]] = password
    return out


def kafka_python_options(s: KafkaSecurity) -> dict[str, object]:
    """kafka-python options (consumer, producer, admin client); none for PLAINTEXT."""
    return _options(s, _KAFKA_PYTHON, s.ssl_check_hostname)


def librdkafka_options(s: KafkaSecurity) -> dict[str, object]:
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
