"""Prometheus metrics of the daemon, declared once on an injected registry.

Process counters and histograms are updated by the loop. Model internals (kernel weights, block
norms, support size), model-lifetime totals (restored from the checkpoint) and consumer lag are
read at scrape time by :class:`SnapshotCollector` from an immutable snapshot the loop publishes
after each batch, so a scrape never touches live learner arrays.
"""

from __future__ import annotations

import platform
import time
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

import streammkl
from streammkl.daemon.checkpoints.inflight import REJECT_REASONS as INFLIGHT_REJECT_REASONS
from streammkl.daemon.checkpoints.store import SKIP_REASONS
from streammkl.daemon.mixing.metrics import MixMetrics

__all__ = ["DaemonMetrics", "Snapshot"]

#: 1 µs .. 1 s, for per-record learn/predict/decode durations.
MICRO_BUCKETS = (
    1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 0.1, 1.0,
)  # fmt: skip
#: 1 ms .. 10 min, for end-to-end latency (event time -> prediction sent) and checkpoints.
LATENCY_BUCKETS = (1e-3, 5e-3, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 600.0)


class BatchHistogram(Collector):
    """A histogram fed by the loop cheaply: ``observe`` appends to a list, :meth:`flush` (once per
    batch) folds the values into the bucket counts with numpy; scrapes read the folded counts.

    ``prometheus_client.Histogram.observe`` takes a lock and walks the buckets on every call; at
    tens of thousands of records per second and four histograms per record that is measurable.
    """

    def __init__(
        self, name: str, documentation: str, buckets: tuple[float, ...], registry: CollectorRegistry
    ) -> None:
        self.name, self.documentation = name, documentation
        self.bounds = np.asarray(buckets, dtype=float)
        self._bounds = [float(b) for b in self.bounds]  # (for one value: bisect, not numpy)
        self.pending: list[float] = []
        self.observe = self.pending.append
        #: ``(value, times)`` pairs: one value observed many times (:meth:`observe_repeated`).
        self.repeated: list[tuple[float, int]] = []
        self._state: tuple[np.ndarray, float] = (np.zeros(len(buckets) + 1, dtype=np.int64), 0.0)
        registry.register(self)

    def observe_repeated(self, value: float, times: int) -> None:
        """Observe ``value`` ``times`` times (a batch's mean per record, once per record) in
        O(1): the same counts and sum as ``times`` calls of ``observe`` (measured: extending
        ``pending`` by a batch of 2,000 copies, then folding them, took ~7 % of the loop
        thread's time in the daemon's default run)."""
        if times > 0:
            self.repeated.append((value, times))

    def observe_array(self, values: np.ndarray) -> None:
        """Observe each of ``values`` now (a batch's, as an array: the same counts and sum as
        ``observe`` of each, then :meth:`flush`, without a list of floats in between)."""
        if values.size:
            counts, total = self._state
            idx = np.searchsorted(self.bounds, values, side="left")
            counts = counts + np.bincount(idx, minlength=counts.size)
            self._state = (counts, total + float(values.sum()))

    def flush(self) -> None:
        """Fold the pending observations into the counts (replaced atomically for scrapes)."""
        if not self.pending and not self.repeated:
            return
        counts, total = self._state
        if self.pending:
            values = np.asarray(self.pending, dtype=float)
            self.pending.clear()
            idx = np.searchsorted(
                self.bounds, values, side="left"
            )  # bucket i: bounds[i-1] < v <= bounds[i]
            counts = counts + np.bincount(idx, minlength=counts.size)
            total += float(values.sum())
        if self.repeated:
            counts = counts.copy() if counts is self._state[0] else counts
            bounds, last = self._bounds, len(self._bounds)
            for value, times in self.repeated:
                # np.searchsorted(bounds, value, side="left") of one value (NaN: past the last
                # bound, as numpy sorts it), without numpy's call on a scalar: ~3 us less per
                # histogram and batch, paid at every batch (a group member's are short)
                counts[bisect_left(bounds, value) if value == value else last] += times
                total += value * times
            self.repeated.clear()
        self._state = (counts, total)

    @property
    def count(self) -> int:
        """Observations folded so far."""
        return int(self._state[0].sum())

    def collect(self) -> Iterator[Any]:
        counts, total = self._state
        cumulative = np.cumsum(counts)
        buckets = [
            (floatToGoString(b), int(c)) for b, c in zip(self.bounds, cumulative, strict=False)
        ]
        buckets.append(("+Inf", int(cumulative[-1])))
        yield HistogramMetricFamily(self.name, self.documentation, buckets=buckets, sum_value=total)


@dataclass(frozen=True)
class Snapshot:
    """What the loop publishes after each batch (plain values, never shared with the loop)."""

    kernel_weights: dict[str, float] = field(default_factory=dict)
    block_norms: dict[str, float] = field(default_factory=dict)
    kernel_bandwidths: dict[str, float] = field(default_factory=dict)
    active_kernels: int = 0
    support_vectors: int = 0
    #: A memory preset's Hedge weight on its vote (``learner.memory_window``); None: none.
    memory_weight: float | None = None
    examples_learned: int = 0
    labelled_predictions: int = 0
    correct_predictions: int = 0
    online_loss: float = 0.0
    lag: dict[tuple[str, int], int] = field(default_factory=dict)
    checkpoint_time: float | None = None  # wall clock of the last checkpoint
    checkpoint_size_bytes: int = 0
    ready: bool = False

    @property
    def accuracy(self) -> float | None:
        """Prequential accuracy over the model's lifetime (``None`` before any label)."""
        if not self.labelled_predictions:
            return None
        return self.correct_predictions / self.labelled_predictions


class SnapshotCollector(Collector):
    """Yields the model and lag metrics from the latest published :class:`Snapshot`."""

    def __init__(self) -> None:
        self.snapshot = Snapshot()

    def collect(self) -> Iterator[Any]:
        s = self.snapshot  # one atomic read of the reference
        weight = GaugeMetricFamily(
            "streammkl_kernel_weight",
            "Kernel weight beta (sums to 1 over kernels)",
            labels=["kernel"],
        )
        norm = GaugeMetricFamily(
            "streammkl_block_norm", "Norm of the kernel's block of the predictor", labels=["kernel"]
        )
        bandwidth = GaugeMetricFamily(
            "streammkl_kernel_bandwidth",
            "Bandwidth gamma a Gaussian kernel fitted to the data (MedianRBF); it changes at "
            "the warm-up and when the inputs grow, the kernel label does not",
            labels=["kernel"],
        )
        for name, value in sorted(s.kernel_weights.items()):
            weight.add_metric([name], value)
        for name, value in sorted(s.block_norms.items()):
            norm.add_metric([name], value)
        for name, value in sorted(s.kernel_bandwidths.items()):
            bandwidth.add_metric([name], value)
        yield weight
        yield norm
        yield bandwidth
        yield GaugeMetricFamily(
            "streammkl_active_kernels", "Kernels with a non-zero block", value=s.active_kernels
        )
        yield GaugeMetricFamily(
            "streammkl_support_vectors", "Stored support vectors", value=s.support_vectors
        )
        if s.memory_weight is not None:
            yield GaugeMetricFamily(
                "streammkl_memory_weight",
                "Weight w of the memory's vote in the prediction (1 - w) learner + w vote "
                "(learner.memory_window; the fixed-share Hedge's: a classifier's Parzen vote "
                "from the log-losses, 0 once the memory is dropped for too many inputs; a "
                "regressor's residual-corrected prediction from the absolute errors)",
                value=s.memory_weight,
            )
        yield GaugeMetricFamily(
            "streammkl_model_version",
            "Model version = examples learned by the model over its lifetime",
            value=s.examples_learned,
        )
        yield CounterMetricFamily(
            "streammkl_model_examples_learned",
            "Examples learned by the model over its lifetime (restored from checkpoints)",
            value=s.examples_learned,
        )
        yield CounterMetricFamily(
            "streammkl_online_loss",
            "Cumulative prequential loss (log-loss of the true class, squared error, or for "
            "sequence labelling the number of wrong labels)",
            value=s.online_loss,
        )
        yield CounterMetricFamily(
            "streammkl_prequential_correct",
            "Labelled records predicted correctly before being learned (model lifetime; for "
            "sequence labelling, labels)",
            value=s.correct_predictions,
        )
        yield CounterMetricFamily(
            "streammkl_prequential_labelled",
            "Labelled records predicted before being learned (model lifetime; for sequence "
            "labelling, labels)",
            value=s.labelled_predictions,
        )
        lag = GaugeMetricFamily(
            "streammkl_consumer_lag_records",
            "Highwater minus next offset to process",
            labels=["topic", "partition"],
        )
        for (topic, part), value in sorted(s.lag.items()):
            lag.add_metric([topic, str(part)], value)
        yield lag
        age = -1.0 if s.checkpoint_time is None else max(0.0, time.time() - s.checkpoint_time)
        yield GaugeMetricFamily(
            "streammkl_checkpoint_age_seconds",
            "Seconds since the last checkpoint written or restored; -1 means never "
            "checkpointed (no checkpoint yet: a fresh model before its first commit)",
            value=age,
        )
        yield GaugeMetricFamily(
            "streammkl_checkpoint_size_bytes",
            "Size of the last checkpoint",
            value=s.checkpoint_size_bytes,
        )
        yield GaugeMetricFamily("streammkl_ready", "1 when ready to serve", value=float(s.ready))


class MonitorCollector(Collector):
    """Yields the regret/drift monitor's values (``streammkl.monitor.METRICS``: names, types and
    help texts) from the latest snapshot the loop published; nothing while there is none.

    A monitor name that a daemon metric already uses (``streammkl_online_loss``: the daemon's
    counter is the log-loss of the predicted probabilities, the monitor's the learner's own loss)
    is exported with the prefix ``streammkl_monitor_`` instead, so the exposition never holds two
    families of one name. A counter that replaced a gauge (``MetricSpec.deprecated``) is also
    exported under the gauge's former name for one release, its help text saying so (in the
    text exposition the counter's samples and type line carry ``_total``: the names differ).
    """

    def __init__(self, taken: set[str]) -> None:
        from streammkl.monitor import METRICS
        from streammkl.monitor.metrics import DEPRECATED_HELP

        self.values: dict[str, float] = {}
        self.specs = {}
        self.deprecated: dict[str, tuple[str, str]] = {}  # key -> (old gauge name, help)
        for key, spec in METRICS.items():
            name = spec.name
            if _family(name, spec.type) in taken:
                name = "streammkl_monitor_" + name.removeprefix("streammkl_")
            self.specs[key] = (name, spec.type, spec.help)
            if spec.deprecated:
                text = DEPRECATED_HELP.format(name=name, help=spec.help)
                self.deprecated[key] = (spec.deprecated, text)

    def collect(self) -> Iterator[Any]:
        values = self.values  # one atomic read of the reference
        for key, (name, kind, text) in self.specs.items():
            if key not in values:
                continue
            family = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
            yield family(name, text, value=values[key])
            old = self.deprecated.get(key)
            if old is not None:  # the counter's former gauge, for one release
                yield GaugeMetricFamily(old[0], old[1], value=values[key])


def _family(name: str, kind: str) -> str:
    return name.removesuffix("_total") if kind == "counter" else name


class DaemonMetrics:
    """Every metric of the daemon (names per STYLE.md, prefix ``streammkl_``).

    Parameters
    ----------
    registry
        Where to register; tests pass a fresh :class:`~prometheus_client.CollectorRegistry`.
    mixing
        Whether the daemon mixes (``mixing.enabled``): the ``streammkl_mix_*`` metrics are
        exported only then (declared on a registry nobody scrapes otherwise).
    """

    def __init__(self, registry: CollectorRegistry | None = None, mixing: bool = False) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.consumed = Counter(
            "streammkl_records_consumed", "Records read from Kafka", ["topic"], registry=r
        )
        self.learned = Counter("streammkl_records_learned", "Records learned", registry=r)
        self.predicted = Counter(
            "streammkl_records_predicted", "Records given a prequential prediction", registry=r
        )
        self.rejected = Counter(
            "streammkl_records_rejected", "Records rejected, by reason", ["reason"], registry=r
        )
        self.dead_letters = Counter(
            "streammkl_dead_letters", "Records sent to the dead-letter topic", registry=r
        )
        self.outputs_acknowledged = Counter(
            "streammkl_outputs_acknowledged",
            "Predictions and dead letters acknowledged by the broker",
            registry=r,
        )
        self.sink_errors = Counter(
            "streammkl_sink_errors", "Failed sends (each is retried, never dropped)", registry=r
        )
        self.producer_restarts = Counter(
            "streammkl_producer_restarts", "Producers recreated after a fatal error", registry=r
        )
        self.offset_resets = Counter(
            "streammkl_offset_resets",
            "Checkpointed offsets found beyond the log (restarted from the earliest offset)",
            ["topic", "partition"],
            registry=r,
        )
        self.checkpoints = Counter("streammkl_checkpoints", "Checkpoints written", registry=r)
        self.checkpoint_failures = Counter(
            "streammkl_checkpoint_failures",
            "Checkpoint (or history) writes that failed, by reason: no_space (ENOSPC, EDQUOT), "
            "read_only (EROFS, EACCES, EPERM), io (any other OSError); the loop pauses, not "
            "ready, and retries with a backoff",
            ["reason"],
            registry=r,
        )
        for why in ("no_space", "read_only", "io"):
            self.checkpoint_failures.labels(why)
        self.warm_up_seconds = Gauge(
            "streammkl_warm_up_seconds",
            "How long the start's compilation of the learner's loops took (numba warm-up)",
            registry=r,
        )
        self.checkpoint_fallbacks = Counter(
            "streammkl_checkpoint_fallbacks",
            "Checkpoints skipped at start (fell back to an older one), by why: corrupt "
            "(checksum, unreadable), malformed (valid checksums, wrong content), unsigned "
            "(missing or wrong HMAC with a key), unloadable (the model does not load)",
            ["reason"],
            registry=r,
        )
        for why in SKIP_REASONS:
            self.checkpoint_fallbacks.labels(why)
        self.inflight_rejected = Counter(
            "streammkl_inflight_rejected",
            "Parts of the in-flight marker ignored at start for want of a valid signature (with "
            "checkpoint.hmac_key_file), by part (slot, journal) and reason: unsigned (written "
            "without the key), forged (a wrong signature)",
            ["part", "reason"],
            registry=r,
        )
        for part in ("slot", "journal"):
            for why in INFLIGHT_REJECT_REASONS:
                self.inflight_rejected.labels(part, why)
        self.reloads = Counter(
            "streammkl_config_reloads",
            "Settings re-read on SIGHUP, by result (applied: the kernel list changed; unchanged; "
            "failed: invalid settings or a refused change, nothing applied)",
            ["result"],
            registry=r,
        )
        for result in ("applied", "unchanged", "failed"):
            self.reloads.labels(result)
        self.rebalances = Counter(
            "streammkl_rebalances", "Partition assignments received", registry=r
        )
        self.mix = MixMetrics(r if mixing else CollectorRegistry())
        self.learn_seconds = BatchHistogram(
            "streammkl_learn_duration_seconds",
            "Duration of learning one example (for streammkl learners one fused round, which also "
            "yields the example's prequential prediction)",
            MICRO_BUCKETS,
            r,
        )
        self.predict_seconds = BatchHistogram(
            "streammkl_predict_duration_seconds",
            "Duration of a prediction computed on its own (predict-only records, learners without "
            "fused rounds, and records a fused round cannot predict, e.g. with a new class)",
            MICRO_BUCKETS,
            r,
        )
        self.decode_seconds = BatchHistogram(
            "streammkl_decode_duration_seconds", "wire.decode duration", MICRO_BUCKETS, r
        )
        self.latency_seconds = BatchHistogram(
            "streammkl_end_to_end_latency_seconds",
            "Kafka record timestamp (else the record's ts) to its prediction being sent",
            LATENCY_BUCKETS,
            r,
        )
        self.checkpoint_seconds = Histogram(
            "streammkl_checkpoint_duration_seconds",
            "Checkpoint write duration",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.up = Gauge("streammkl_up", "1 while the daemon process runs", registry=r)
        self.up.set(1)
        self.build = Info("streammkl_build", "Build information", registry=r)
        self.build.info({"version": streammkl.__version__, "python": platform.python_version()})
        self.snapshots = SnapshotCollector()
        r.register(self.snapshots)
        self.monitor = MonitorCollector({fam.name for fam in r.collect()})
        r.register(self.monitor)

    def flush(self) -> None:
        """Fold the per-record histogram observations of the last batch."""
        for hist in (
            self.learn_seconds,
            self.predict_seconds,
            self.decode_seconds,
            self.latency_seconds,
        ):
            hist.flush()

    def publish(self, snapshot: Snapshot, monitor: dict[str, float] | None = None) -> None:
        """Make ``snapshot`` (and the monitor's values, if given) what the next scrape reports."""
        self.snapshots.snapshot = snapshot
        if monitor is not None:
            self.monitor.values = dict(monitor)
