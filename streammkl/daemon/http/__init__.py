"""What the daemon serves over HTTP: ``/metrics``, ``/healthz`` and ``/readyz``.

In: the metrics' snapshot and the health status the loop publishes, the ``[metrics]`` settings
and an optional web config (TLS, basic auth: :mod:`.webconfig`). Out: the Prometheus metrics
declared once on an injected registry (:mod:`.metrics`), served with the health endpoints
(:mod:`.health`) by a server a hostile client cannot exhaust (:mod:`.webserver`). A scrape
never touches a live learner.
"""
