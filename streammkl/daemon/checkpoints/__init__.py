"""What survives the process: the checkpoint (model and offsets together) and the in-flight marker.

In: the learner, the monitor, the next offsets, the counters and the sink's unacknowledged
outbox. Out: one atomic, checksummed (optionally signed) checkpoint (:mod:`.committer` commits,
:mod:`.store` writes, verifies and reads back), its summary for ``streammkl inspect``
(:mod:`.inspection`), and the in-flight marker (:mod:`.inflight`) that tells a restart which
record was being learned when the process died.
"""
