"""The daemon's Kafka edge: records in, outputs out, and nothing about learning.

In: the ``[kafka]`` settings and a client library (:mod:`.clients`: one adapter each for
librdkafka and kafka-python, behind the protocol :mod:`.clients.protocol` declares). Out: batches
of consumed messages in a deterministic order with the daemon's own offsets (:mod:`.source`),
outputs produced and tracked until acknowledged (:mod:`.sink`), topics created (:mod:`.topics`),
TLS / SASL options for every client (:mod:`.security`). The source and the sink know no client
library; only the adapters (and the admin client of :mod:`.topics`) do.
"""
