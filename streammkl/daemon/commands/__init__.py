"""The ``streammkl`` command: ``run``, ``inspect``, ``report``, ``broker``, ``simulate``, ``demo``.

In: the command line (and the settings file and environment it names). Out: a running daemon
(:mod:`.cli` owns the signals), a checkpoint's summary, the run's figures (:mod:`.report`), the
embedded Tansu broker (:mod:`.broker`), the live demo (:mod:`.demo`) -- and an exit code.
"""
