"""The daemon's batch histograms: a value observed many times at once counts as many
observations (what the loop does with a batch's mean duration per record)."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from streammkl.daemon.http.metrics import MICRO_BUCKETS, BatchHistogram


def _samples(registry: CollectorRegistry) -> dict[tuple[str, str], float]:
    text = generate_latest(registry).decode()
    return {
        (s.name, s.labels.get("le", "")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_a_repeated_observation_counts_as_that_many_observations() -> None:
    one_by_one, at_once = CollectorRegistry(), CollectorRegistry()
    a = BatchHistogram("d", "durations", MICRO_BUCKETS, one_by_one)
    b = BatchHistogram("d", "durations", MICRO_BUCKETS, at_once)
    batches = [(3e-6, 2000), (2.5e-6, 7), (0.2, 1), (5.0, 3), (4e-6, 0)]  # 2.5e-6: on a bound
    for value, times in batches:
        for _ in range(times):
            a.observe(value)
        a.observe(1e-3)  # single observations mix with the repeated ones
        b.observe_repeated(value, times)
        b.observe(1e-3)
        a.flush()
        b.flush()
    got, want = _samples(at_once), _samples(one_by_one)
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-12), key
    assert b.count == a.count == 2011 + len(batches)
    assert not b.repeated and not b.pending  # folded


def test_an_array_observed_at_once_counts_and_sums_as_each_value_observed() -> None:
    import numpy as np

    one_by_one, at_once = CollectorRegistry(), CollectorRegistry()
    a = BatchHistogram("l", "latencies", (1e-3, 0.01, 0.1, 1.0), one_by_one)
    b = BatchHistogram("l", "latencies", (1e-3, 0.01, 0.1, 1.0), at_once)
    rng = np.random.default_rng(3)
    for values in (rng.exponential(0.05, 500), np.array([0.0, 1e-3, 0.01, 7.5]), np.array([])):
        for v in values.tolist():
            a.observe(v)
        a.flush()
        b.observe_array(values)
    assert _samples(at_once) == _samples(one_by_one)  # the same sums, bit for bit
    assert b.count == a.count == 504 and not b.pending
