"""Create Kafka topics if they are missing (kafka-python admin client)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError

from streammkl.daemon.config import KafkaSettings
from streammkl.daemon.kafka.security import kafka_python_options

log = logging.getLogger(__name__)


def ensure_topics(
    bootstrap_servers: str,
    topics: Mapping[str, int],
    timeout_ms: int = 10_000,
    security: Mapping[str, Any] | None = None,
    admin_factory: Callable[..., Any] = KafkaAdminClient,
    configs: Mapping[str, Mapping[str, str]] | None = None,
) -> None:
    """Create each missing topic with the given number of partitions (replication 1).

    Parameters
    ----------
    bootstrap_servers
        ``host:port[,host:port...]``.
    topics
        Topic name -> partitions. Existing topics are left as they are.
    timeout_ms
        Bound on connecting and on each request.
    security
        kafka-python TLS / SASL options
        (:func:`streammkl.daemon.kafka.security.kafka_python_options`).
    admin_factory
        Builds the admin client from keyword options (tests inject fakes).
    configs
        Topic name -> its topic configs at creation (e.g. ``{"cleanup.policy": "compact"}``).

    Raises
    ------
    kafka.errors.KafkaError
        If the broker is unreachable or refuses to create a topic.
    """
    admin = admin_factory(
        bootstrap_servers=bootstrap_servers.split(","),
        request_timeout_ms=timeout_ms,
        bootstrap_timeout_ms=timeout_ms,
        **(security or {}),
    )
    try:
        existing = set(admin.list_topics())
        missing = [
            NewTopic(name, partitions, 1, topic_configs=dict((configs or {}).get(name, {})))
            for name, partitions in topics.items()
            if name not in existing
        ]
        if missing:
            try:
                admin.create_topics(missing)
            except TopicAlreadyExistsError:  # raced with another creator
                pass
            log.info("created topics %s", [t.name for t in missing])
    finally:
        try:
            admin.close()
        except KafkaError:
            pass


def ensure_output_topics(k: KafkaSettings) -> None:
    """Create the predictions and dead-letter topics (``k``: the ``[kafka]`` settings) if
    ``kafka.create_topics`` and they are missing; an unreachable broker is logged, not raised
    (sends are retried later anyway)."""
    outputs = [t for t in (k.predictions_topic, k.dead_letter_topic) if t]
    if not (k.create_topics and outputs):
        return
    try:
        ensure_topics(
            k.bootstrap_servers,
            dict.fromkeys(outputs, 1),
            k.bootstrap_timeout_ms,
            security=kafka_python_options(k),
        )
    except Exception as exc:
        log.warning("could not check/create the output topics %s: %s", outputs, exc)
