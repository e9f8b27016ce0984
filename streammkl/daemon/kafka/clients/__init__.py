"""Kafka client libraries behind one small adapter each (:mod:`.protocol` declares what they do).

``kafka.consumer_client`` / ``kafka.producer_client`` name the library; :data:`CONSUMERS` and
:data:`PRODUCERS` map each name to its adapter class, :data:`MIX_READERS` and
:data:`MIX_WRITERS` to its mix log reader and writer (a mixing group's mix topic follows the same
two settings: the reader the consumer's, the writer the producer's).
"""

from __future__ import annotations

from streammkl.daemon.config import KafkaSettings
from streammkl.daemon.kafka.clients.confluent import (
    ConfluentConsumer,
    ConfluentMixReader,
    ConfluentMixWriter,
    ConfluentProducer,
)
from streammkl.daemon.kafka.clients.kafka_python import (
    KafkaPythonConsumer,
    KafkaPythonMixReader,
    KafkaPythonMixWriter,
    KafkaPythonProducer,
)
from streammkl.daemon.kafka.clients.protocol import (
    Acknowledgement,
    ClientRefused,
    ClientUnavailable,
    ConsumerClient,
    ConsumerFactory,
    Message,
    MixLogReader,
    MixLogReaderFactory,
    MixLogWriter,
    MixLogWriterFactory,
    OffsetsOutOfRange,
    Output,
    Partition,
    ProducerClient,
    ProducerFactory,
    SendFailed,
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

#: The mix log reader adapter for each ``kafka.consumer_client``.
MIX_READERS: dict[str, MixLogReaderFactory] = {
    "librdkafka": ConfluentMixReader,
    "kafka-python": KafkaPythonMixReader,
}
#: The mix log writer adapter for each ``kafka.producer_client``.
MIX_WRITERS: dict[str, MixLogWriterFactory] = {
    "librdkafka": ConfluentMixWriter,
    "kafka-python": KafkaPythonMixWriter,
}


def consumer_for(kafka: KafkaSettings) -> ConsumerFactory:
    """The consumer adapter ``kafka.consumer_client`` names (``kafka``: the ``[kafka]``
    settings), in a mixing group as for one daemon."""
    return CONSUMERS[kafka.consumer_client]


__all__ = [
    "CONSUMERS",
    "MIX_READERS",
    "MIX_WRITERS",
    "PRODUCERS",
    "Acknowledgement",
    "ClientRefused",
    "ClientUnavailable",
    "ConfluentConsumer",
    "ConfluentMixReader",
    "ConfluentMixWriter",
    "ConfluentProducer",
    "ConsumerClient",
    "ConsumerFactory",
    "KafkaPythonConsumer",
    "KafkaPythonMixReader",
    "KafkaPythonMixWriter",
    "KafkaPythonProducer",
    "Message",
    "MixLogReader",
    "MixLogReaderFactory",
    "MixLogWriter",
    "MixLogWriterFactory",
    "OffsetsOutOfRange",
    "Output",
    "Partition",
    "ProducerClient",
    "ProducerFactory",
    "SendFailed",
    "consumer_for",
]
