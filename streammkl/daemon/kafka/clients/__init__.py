"""Kafka client libraries behind one small adapter each (:mod:`.protocol` declares what they do).

``kafka.consumer_client`` / ``kafka.producer_client`` name the library. :data:`LIBRARIES` maps
each name to its :class:`ClientLibrary`: the four adapters one library provides, so a library is
added whole or not at all. :func:`consumer_for` and :func:`mix_reader_for` take the library
``kafka.consumer_client`` names, :func:`producer_for` and :func:`mix_writer_for` the one
``kafka.producer_client`` names (a mixing group's mix topic follows the same two settings as its
input and output: the reader the consumer's, the writer the producer's).
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True, slots=True)
class ClientLibrary:
    """The adapters of one Kafka client library.

    Parameters
    ----------
    consumer, producer
        The input consumer and the output producer.
    mix_reader, mix_writer
        A mixing group's mix log reader and writer.
    """

    consumer: ConsumerFactory
    producer: ProducerFactory
    mix_reader: MixLogReaderFactory
    mix_writer: MixLogWriterFactory


#: The adapters of each library ``kafka.consumer_client`` / ``kafka.producer_client`` can name.
LIBRARIES: dict[str, ClientLibrary] = {
    "librdkafka": ClientLibrary(
        ConfluentConsumer, ConfluentProducer, ConfluentMixReader, ConfluentMixWriter
    ),
    "kafka-python": ClientLibrary(
        KafkaPythonConsumer, KafkaPythonProducer, KafkaPythonMixReader, KafkaPythonMixWriter
    ),
}


def consumer_for(kafka: KafkaSettings) -> ConsumerFactory:
    """The consumer adapter ``kafka.consumer_client`` names (``kafka``: the ``[kafka]``
    settings), in a mixing group as for one daemon."""
    return LIBRARIES[kafka.consumer_client].consumer


def producer_for(kafka: KafkaSettings) -> ProducerFactory:
    """The producer adapter ``kafka.producer_client`` names."""
    return LIBRARIES[kafka.producer_client].producer


def mix_reader_for(kafka: KafkaSettings) -> MixLogReaderFactory:
    """The mix log reader of the library ``kafka.consumer_client`` names."""
    return LIBRARIES[kafka.consumer_client].mix_reader


def mix_writer_for(kafka: KafkaSettings) -> MixLogWriterFactory:
    """The mix log writer of the library ``kafka.producer_client`` names."""
    return LIBRARIES[kafka.producer_client].mix_writer


__all__ = [
    "LIBRARIES",
    "Acknowledgement",
    "ClientLibrary",
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
    "mix_reader_for",
    "mix_writer_for",
    "producer_for",
]
