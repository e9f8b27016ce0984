"""Kafka client libraries behind one small adapter each (:mod:`.protocol` declares what they do).

``kafka.consumer_client`` / ``kafka.producer_client`` name the library; :data:`CONSUMERS` and
:data:`PRODUCERS` map each name to its adapter class.
"""

from __future__ import annotations

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


def consumer_for(kafka: KafkaSettings) -> ConsumerFactory:
    """The consumer adapter ``kafka.consumer_client`` names (``kafka``: the ``[kafka]``
    settings), in a mixing group as for one daemon."""
    return CONSUMERS[kafka.consumer_client]


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
