"""Daemon settings: a TOML file, overridden by ``STREAMMKL_*`` variables, overridden by flags.

The result is one frozen :class:`Settings`, validated at start; every error names the field and
where its value came from. Environment variables spell the path with ``__``:
``STREAMMKL_KAFKA__BOOTSTRAP_SERVERS=host:9092``, ``STREAMMKL_LEARNER__BUDGET=500``; lists are
comma-separated or JSON (``STREAMMKL_RECORDS__CLASSES='["a","b"]'``). ``STREAMMKL_CONFIG`` names
the file when ``--config`` is not given.

Example file::

    [kafka]
    bootstrap_servers = "127.0.0.1:9092"
    topics = ["streammkl.examples"]
    group_id = "streammkl"

    [checkpoint]
    dir = "/var/lib/streammkl"
    every_records = 10000

    [learner]
    task = "classification"
    kernels = [{type = "Linear"}, {type = "RBF", gamma = 0.5}, {type = "Polynomial", degree = 2}]
    regularizer = {type = "SquaredGroupLasso", lam = 0.001}
    schedule = {type = "InvSqrt", eta0 = 1.0}
    budget = 500

The sections live in modules named for what they hold (``kafka`` with its TLS / SASL part
``security``, ``records``, ``service``, ``learning``), :class:`Settings` gathers them
(``settings``), :func:`load_settings` layers the sources and explains errors (``loading``);
import them from here.

*Wing of the daemon.* In: a TOML file, ``STREAMMKL_*`` variables, command-line overrides. Out:
one frozen :class:`Settings`, or a :class:`ConfigError` naming the field. It imports nothing
else of the daemon: every other wing reads its sections.
"""

from __future__ import annotations

from streammkl.daemon.config.kafka import KafkaSettings
from streammkl.daemon.config.learning import (
    LearnerSpec,
    MixingSettings,
    MonitorSettings,
    ReloadSettings,
)
from streammkl.daemon.config.loading import ENV_PREFIX, ConfigError, load_settings
from streammkl.daemon.config.records import LimitSettings, RecordSettings
from streammkl.daemon.config.service import CheckpointSettings, MetricsSettings, RunSettings
from streammkl.daemon.config.settings import Settings, reloaded_settings

__all__ = [
    "ENV_PREFIX",
    "CheckpointSettings",
    "ConfigError",
    "KafkaSettings",
    "LearnerSpec",
    "LimitSettings",
    "MetricsSettings",
    "MixingSettings",
    "MonitorSettings",
    "RecordSettings",
    "ReloadSettings",
    "RunSettings",
    "Settings",
    "load_settings",
    "reloaded_settings",
]
