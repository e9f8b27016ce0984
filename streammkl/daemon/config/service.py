"""The ``[checkpoint]``, ``[metrics]`` and ``[run]`` sections: how the process keeps its state,
shows itself and runs."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from streammkl.daemon.config.section import Section


class CheckpointSettings(Section):
    """Where and how often the model and offsets are checkpointed."""

    dir: Path = Path("checkpoints")
    #: A checkpoint every this many records or ``every_seconds``, whichever comes first. A crash
    #: replays at most that many records (about a second of a fast stream). Each checkpoint
    #: waits for the batch being learned and for the broker to acknowledge every prediction
    #: sent (~20-30 ms); every 10,000 records, that stall cost ~10 % of the throughput at
    #: 60,000 records/s (measured), hence the larger default.
    every_records: int = Field(default=100_000, ge=1)
    every_seconds: float = Field(default=30.0, gt=0)
    keep: int = Field(default=3, ge=1)
    #: A file holding a secret key: every checkpoint is signed (HMAC-SHA256) and only signed
    #: checkpoints are loaded, so whoever can write the directory but not read the key cannot
    #: plant a model; the in-flight marker is signed too (nor can they condemn records).
    hmac_key_file: Path | None = None


class MetricsSettings(Section):
    """The HTTP endpoint serving ``/metrics``, ``/healthz``, ``/readyz`` and ``/startupz`` (and
    ``POST /predict`` with ``predict = true``).

    It exposes the model (kernel weights, block norms, regret) and topic names: it listens on
    the loopback interface unless told otherwise, and ``web_config_file`` adds TLS and basic
    authentication (Prometheus exporter-toolkit format, :mod:`streammkl.daemon.http.webconfig`).
    """

    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(default=9108, ge=0, le=65535)  # 0 = any free port
    #: A YAML file with ``tls_server_config`` and/or ``basic_auth_users`` (bcrypt hashes).
    web_config_file: Path | None = None
    #: ``/healthz`` fails when the loop has not ticked for this long.
    stall_seconds: float = Field(default=120.0, gt=0)
    #: ``/readyz`` fails while one piece of work (a record, a batch) has run this long.
    slow_record_seconds: float = Field(default=30.0, gt=0)
    #: ``/readyz`` fails when records are known to wait and none was taken for this long, or
    #: when the broker has not answered the consumer for this long (a frozen or hung broker
    #: keeps its connections: they alone do not say it works).
    progress_seconds: float = Field(default=10.0, gt=0)
    #: A connection must send its request head (and finish its TLS handshake) within this time;
    #: meanwhile it holds no worker.
    header_timeout_seconds: float = Field(default=2.0, gt=0)
    #: A request must be answered within this time once its head has arrived (body, response).
    request_timeout_seconds: float = Field(default=10.0, gt=0)
    #: Requests to ``/metrics`` served at once (a bounded pool; the probes have workers of
    #: their own); further requests wait in a short queue, then get 503.
    max_connections: int = Field(default=8, ge=1, le=256)
    #: Connections one client address may hold at once; a new one beyond closes the client's
    #: oldest connection still sending its head.
    max_connections_per_client: int = Field(default=8, ge=1, le=256)
    #: Serve ``POST /predict`` (one record in, the model's prediction out) from a snapshot of
    #: the model published at each checkpoint, behind the same TLS and authentication.
    predict: bool = False


class RunSettings(Section):
    """Process behaviour."""

    #: Checkpoint and exit once no record arrived for this many seconds, and for the last 10
    #: fetches in a row (a loop slow to poll has not reached the end): 0 when nothing is left to
    #: read (every owned partition's backlog known and zero; while it is unknown or > 0 the loop
    #: waits 10 times longer, then exits 7), 4-6 when the broker was never reached, refused the
    #: credentials, or an input topic is missing (None = run forever).
    exit_when_idle: float | None = Field(default=None, gt=0)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    #: One INFO progress line every this many seconds: records/s, lag, the prequential accuracy
    #: (or loss), dead letters, checkpoint age (0 = none).
    progress_seconds: float = Field(default=10.0, ge=0)
    #: A log line repeated from one place (an unreachable broker's retries) is shown at most
    #: once per this many seconds, with the count of those held back (0 = every line).
    log_repeat_seconds: float = Field(default=10.0, ge=0)
    #: Python's cyclic garbage collector, tuned for the loop (``gc.freeze`` after start-up and a
    #: first-generation threshold of this many allocations; 0 = Python's defaults). Every record
    #: allocates a few containers, and with the default threshold (700) the collector ran
    #: every ~100 records and scanned the whole heap often: ~30% of the loop's time (measured).
    gc_threshold: int = Field(default=100_000, ge=0)
