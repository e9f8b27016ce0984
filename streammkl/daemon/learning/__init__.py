"""What the daemon's loop asks of a learner, and nothing about Kafka.

In: the ``[learner]``, ``[limits]``, ``[monitor]`` and ``[reload]`` settings, decoded records'
inputs and labels. Out: a learner built from the settings (:mod:`.building`), its prequential
outcomes through a driver (:mod:`.drivers`: compiled runs planned and learned, or one round per
record), what the model may admit (:mod:`.admission`), bank changes (:mod:`.bank`), a view of
its kernels (:mod:`.learner`), and the regret/drift monitor that watches its rounds
(:mod:`.stream_monitor`) with its run history (:mod:`.history`).
"""
