"""The daemon's one loop: fetch a batch, predict then learn, emit, account, checkpoint, publish.

In: the settings and a learner. Out: a prediction per record and a dead letter per bad one
(through the sink), checkpoints, the metrics' snapshot and health status, an exit code.
:mod:`.runner` owns the loop and its threads; :mod:`.prequential` handles a batch (decode,
learn guarded against poison records, emit, account); :mod:`.predictions` writes the prediction
message; :mod:`.publishing` publishes what the outside sees; :mod:`.idle` decides idle ends.
"""
