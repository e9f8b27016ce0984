"""The streammkl daemon: consume labelled records from Kafka, predict, learn, checkpoint, serve.

Wings by concern, layered (an arrow only points down; ``pyproject.toml``'s import contracts
check it):

- :mod:`~streammkl.daemon.commands` -- the ``streammkl`` command: ``run``, ``inspect``,
  ``report``, ``broker``, ``simulate``, ``demo`` (``python -m streammkl.daemon``);
- :mod:`~streammkl.daemon.loop` -- the one loop: the runner, the prequential handling of a
  batch, the prediction message, what is published to metrics and health, idle ends;
- :mod:`~streammkl.daemon.http` -- ``/metrics``, ``/healthz``, ``/readyz``: the metrics
  declared once, the bounded web server and its TLS / basic-auth config;
- :mod:`~streammkl.daemon.mixing` -- scale-out: the members of a consumer group train one
  model by iterative parameter mixing over a mix topic;
- :mod:`~streammkl.daemon.checkpoints` -- the commit (model + offsets together), the
  checkpoint store, the in-flight marker, inspection;
- :mod:`~streammkl.daemon.learning` -- what the loop asks of a learner: building it, driving
  its rounds, admitting growth, changing its kernel bank, the regret/drift monitor and its
  history;
- :mod:`~streammkl.daemon.kafka` -- the source, the sink, topics, security, and one adapter
  per client library;
- :mod:`~streammkl.daemon.config` -- the settings.

``docs/architecture.md`` follows a record through them, hop by hop.
"""
