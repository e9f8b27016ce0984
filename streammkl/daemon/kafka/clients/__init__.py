"""Kafka client libraries behind one small adapter each (:mod:`.protocol` declares what they do).

``kafka.consumer_client`` / ``kafka.producer_client`` name the library; :data:`CONSUMERS` and
:data:`PRODUCERS` map each name to its adapter class.
"""

from __future__ import annotations

import logging

from streammkl.daemon.config import KafkaSettings
from streammkl.daemon.kafka.clients.confluent import ConfluentConsumer, ConfluentProducer
from streammkl.daemon.kafka.clients.kafka_python import KafkaPythonConsumer, KafkaPythonProducer
from streammkl.daemon.kafka.clients.protocol import (
    ClientRefused,
    ClientUnavailable,
    ConsumerClient,
    ConsumerFactory,
    OffsetsOutOfRange,
    Output,
    Partition,
    ProducerClient,
    ProducerFactory,
)

log = logging.getLogger(__name__)

#: The consumer adapter for each ``kafka.consumer_client``.
CONSUMERS: dict[str, ConsumerFactory] = {
    "librdkafka": ConfluentConsumer,
    "kafka-python": KafkaPythonConsumer,
}
#: The producer adapter for each ``kafka.producer_client``.
PRODUCERS: dict[str, ProducerFactory] = {
    "librdkafka": ConfluentProducer,
    "kafka-python": KafkaPythonProducer,
}


def consumer_for(kafka: KafkaSettings, mixing: bool = False) -> ConsumerFactory:
    """The consumer adapter ``kafka.consumer_client`` names (``kafka``: the ``[kafka]``
    settings); always kafka-python's in a mixing group (``mixing``): a member blocks in its
    rounds and reads the mix topic inside rebalance callbacks, and measured, librdkafka then
    left reassigned partitions unconsumed after repeated kill -9 of a member (35k of 60k
    learned); kafka-python's consumer did not. The substitution is logged (a warning) when the
    settings named another client."""
    if mixing and CONSUMERS[kafka.consumer_client] is not KafkaPythonConsumer:
        log.warning(
            "kafka.consumer_client = %r is overridden: a mixing group consumes with kafka-python",
            kafka.consumer_client,
        )
        return KafkaPythonConsumer
    return KafkaPythonConsumer if mixing else CONSUMERS[kafka.consumer_client]


__all__ = [
    "CONSUMERS",
    "PRODUCERS",
    "ClientRefused",
    "ClientUnavailable",
    "ConfluentConsumer",
    "ConfluentProducer",
    "ConsumerClient",
    "ConsumerFactory",
    "KafkaPythonConsumer",
    "KafkaPythonProducer",
    "OffsetsOutOfRange",
    "Output",
    "Partition",
    "ProducerClient",
    "ProducerFactory",
    "consumer_for",
]
