"""A kernel's identity is its configuration: its name (the kernel weights' key, the metrics'
``kernel`` label, what reloads, restarts and group merges match) never changes while it learns.
A ``MedianRBF`` fits its bandwidth as state, saved and restored with the model; a restart or a
reload with unchanged settings leaves the model exactly as it was, through the bandwidth warm-up
and a rescale (the inputs grown by more than a quarter)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from streammkl.core import OnlineMKL, bandwidth, kernels
from streammkl.core.kernel_base import stable_seed
from streammkl.daemon.learning.building import LearnerConfigError
from streammkl.daemon.loop.runner import Runner
from streammkl.river import MKLClassifier, defaults
from tests.daemon_fakes import FakeCluster, bananas_like
from tests.test_daemon_runner import make_settings

DATA = Path(__file__).parent / "data" / "v3_states"
LINEAR = {"type": "Linear"}

#: One of every kind of kernel (a kernelized Polynomial is named apart from the explicit one).
EVERY_KERNEL: dict[str, dict[str, Any]] = {
    "linear": LINEAR,
    "poly-explicit": {"type": "Polynomial", "explicit": True},
    "poly-kernelized": {"type": "Polynomial", "name": "poly2-kernelized"},
    "rbf-exact": {"type": "RBF", "gamma": 0.5},
    "rbf-fourier": {"type": "RBF", "gamma": 0.5, "n_components": 32},
    "additive": {"type": "AdditiveRBF", "n_components": 8},
    "median-exact": {"type": "MedianRBF", "scale": 2.0, "n_components": None},
    "median-fourier": {"type": "MedianRBF", "scale": 1.0},
    "b1spline": {"type": "B1Spline", "h": 2.0},
}


def records(n: int, start: int = 0) -> list[dict[str, Any]]:
    """Bananas-like records whose inputs grow: x1, x2 first (the warm-up ends at 50), then x3
    from record 120 (3 >= 1.25 x 2: a rescale), then x4 from record 240 (4 >= 1.25 x 3)."""
    out = []
    for i, rec in enumerate(bananas_like(start + n, seed=5)[start:], start):
        x = dict(rec["x"])
        if i >= 120:
            x["x3"] = round(x["x1"] * x["x2"], 6)
        if i >= 240:
            x["x4"] = round(x["x1"] - x["x2"], 6)
        out.append({**rec, "x": x})
    return out


def fill(cluster: FakeCluster, recs: list[dict[str, Any]], first: int = 0) -> None:
    for i, rec in enumerate(recs, first):
        cluster.append("in", json.dumps(rec).encode(), 0, None, i)


def runner(tmp_path: Path, cluster: FakeCluster, over: dict[str, Any]) -> Runner:
    return Runner(
        make_settings(tmp_path, **over),
        registry=CollectorRegistry(),
        consumer_client=cluster.consumer(),
        producer_client=cluster.producer(),
        reload_settings=lambda: make_settings(tmp_path, **over),
    )


def banks() -> list[Any]:
    single = [
        pytest.param([spec] if name == "linear" else [LINEAR, spec], id=name)
        for name, spec in EVERY_KERNEL.items()
    ]
    return [
        *single,
        pytest.param(None, id="default-bank"),
        pytest.param(list(EVERY_KERNEL.values()), id="every-kernel"),
    ]


@pytest.mark.parametrize("bank", banks())
def test_restart_and_reload_with_unchanged_settings_keep_the_model_bit_for_bit(
    tmp_path: Path, bank: list[dict[str, Any]] | None, caplog: pytest.LogCaptureFixture
) -> None:
    """240 records (warm-up, then a rescale at 3 inputs), a reload and a restart with the same
    settings, 60 more records (another rescale at 4 inputs): the same model as one uninterrupted
    run, the same names all along, nothing added or removed."""
    over = {} if bank is None else {"learner.kernels": bank}
    recs = records(300)
    caplog.set_level(logging.INFO, logger="streammkl.daemon.learning.bank")

    cluster = FakeCluster()
    cluster.create("in", 1)
    fill(cluster, recs[:240])
    first = runner(tmp_path / "a", cluster, over)
    first.run()
    names = first.learner.rounds().kernel_names
    configured = [kernels.from_spec(k).name for k in bank] if bank is not None else None
    assert configured is None or names == configured
    digest = first.learner.rounds().digest()
    fitted = first.learner.rounds().kernel_bandwidths
    assert first.reload() is False  # the same settings: nothing to change
    assert (
        first.learner.rounds().digest() == digest and first.learner.rounds().kernel_names == names
    )

    fill(cluster, recs[240:], 240)
    again = runner(tmp_path / "a", cluster, over)
    again.start()
    assert again.learner.rounds().digest() == digest  # restored as it was, nothing applied
    assert again.learner.rounds().kernel_bandwidths == fitted
    assert again.checkpoints.last is not None and again.checkpoints.last.meta["reason"] != "reload"
    again.run()
    assert again.learner.rounds().kernel_names == names

    cluster_b = FakeCluster()
    cluster_b.create("in", 1)
    fill(cluster_b, recs)
    alone = runner(tmp_path / "b", cluster_b, over)
    alone.run()
    assert again.learner.rounds().digest() == alone.learner.rounds().digest()
    assert not [r for r in caplog.records if "kernels added" in r.getMessage()]


@pytest.mark.parametrize("spec", [EVERY_KERNEL["median-exact"], EVERY_KERNEL["median-fourier"]])
def test_a_fitted_bandwidth_is_state_beside_a_name_that_never_changes(spec: dict) -> None:
    template = kernels.from_spec(spec)
    model = OnlineMKL(kernels=(kernels.Linear(), template), seed=4)
    seen = []
    for rec in records(300):
        x = np.array(list(rec["x"].values()))
        model.learn(x, 1.0 if rec["y"] else -1.0)
        seen.append(model.kernel_bandwidths[template.name])
        assert model.names == ["linear", template.name]
        assert model.config()["kernels"][1] == template.to_spec()  # the configuration alone
    # provisional at d = 2, measured after 50 inputs, rescaled at d = 3 and at d = 4
    changes = [i for i in range(1, len(seen)) if seen[i] != seen[i - 1]]
    assert seen[0] == template.scale / 4.0 and changes[-2:] == [120, 240]
    assert changes[:-2] in ([bandwidth.WARMUP - 1], [])  # measured (or the guess was kept)
    assert seen[240] == pytest.approx(seen[239] * 3 / 4) and seen[120] == pytest.approx(
        seen[119] * 2 / 3
    )
    meta, arrays = model.to_state()
    assert meta["bandwidths"] == {
        template.name: {"gamma": seen[-1], "inputs": 4, "final": True}
    }  # fmt: skip
    restored = OnlineMKL.from_state(meta, arrays)
    assert restored.digest() == model.digest() and restored.kernels[1].fit == model.kernels[1].fit


def test_fourier_draws_come_from_seed_name_and_input_not_from_the_bandwidth() -> None:
    """A fixed RBF's frequencies are the N(0, 2 gamma) draws they always were; a MedianRBF's are
    the same standard normals at every bandwidth, scaled by sqrt(2 gamma) (a rescale does not
    redraw them)."""
    from streammkl.core.kernel_base import DRAWS, NUMPY_DRAWS, normals

    rbf = kernels.RBF(0.5, n_components=8)
    rng = np.random.default_rng(stable_seed(3, rbf.name, "x1"))
    old = rbf.fourier_columns(["x1"], 3, NUMPY_DRAWS)[:, 0]  # a model saved before version 6
    np.testing.assert_array_equal(old, rng.normal(0.0, 1.0, 8))
    np.testing.assert_array_equal(
        rbf.fourier_columns(["x1"], 3)[:, 0], normals(3, rbf.name, ["x1"], 8)[0]
    )
    for draws in (DRAWS, NUMPY_DRAWS):
        median = kernels.MedianRBF(1.0, 8)
        a, b = median.fitted(0.2, 2, False), median.fitted(0.8, 3, True)
        cols_a = a.fourier_columns(["x1", "x2"], 3, draws)
        cols_b = b.fourier_columns(["x1", "x2"], 3, draws)
        np.testing.assert_allclose(cols_b, 2.0 * cols_a, rtol=1e-15)
        np.testing.assert_array_equal(a.fourier_offsets(3), b.fourier_offsets(3))
        z = normals(3, "rff(gamma=1/median,D=8)", ["x2"], 8, draws)[0]
        np.testing.assert_allclose(cols_a[:, 1], np.sqrt(0.4) * z, rtol=1e-15)
    z = np.random.default_rng(stable_seed(3, "rff(gamma=1/median,D=8)", "x2")).standard_normal(8)
    np.testing.assert_array_equal(
        normals(3, "rff(gamma=1/median,D=8)", ["x2"], 8, NUMPY_DRAWS)[0], z
    )


def test_a_refitted_bandwidth_restarts_its_block_and_only_that_block() -> None:
    X = np.random.default_rng(0).normal(size=(80, 3)) * 4.0
    Y = np.where(X[:, 0] > 0, 1.0, -1.0)
    model = OnlineMKL(kernels=(kernels.Linear(), kernels.MedianRBF(1.0, 16), kernels.RBF(0.1, 16)))
    model.learn_many(X[:49], Y[:49])
    before = model.block_norms.copy()
    assert np.all(before > 0)
    model.learn_many(X[49:50], Y[49:50])  # the warm-up ends: far from the provisional guess
    after = model.block_norms
    assert after[1] == 0.0 and after[0] != 0.0 and after[2] != 0.0
    assert model.names == ["linear", "rff(gamma=1/median,D=16)", "rff(gamma=0.1,D=16)"]


@pytest.mark.parametrize("case", ["warm", "pending", "rescaled"])
def test_a_version_3_state_loads_as_the_template_and_its_bandwidth(case: str) -> None:
    """Saved by streammkl 840b214, where a fitted MedianRBF was an RBF named after its
    bandwidth: it loads as the configured kernel plus its bandwidth, predicts exactly as it
    did (its random features are still drawn under the old name), and learns on exactly as it
    would have until its bandwidth next changes (then its block restarts, as it did)."""
    truth = json.loads((DATA / "truth.json").read_text())[case]
    probe = np.load(DATA / "probe.npy")
    model = OnlineMKL.load(DATA / f"{case}.smkl")
    assert model.names == ["linear", "rff(gamma=1/median,D=16)", "rbf(gamma=4/median)"]
    old = {s["median_from"]["scale"]: s for s in truth["specs"] if "median_from" in s}
    fitted = [k.fit for k in model.kernels[1:]]
    assert [f.gamma for f in fitted] == [old[1.0]["gamma"], old[4.0]["gamma"]]
    assert [f.final for f in fitted] == [old[1.0]["median_from"]["final"]] * 2
    assert fitted[0].drawn_as == truth["names"][1] and fitted[1].drawn_as is None  # (exact)
    d = len(model.feature_keys)
    decisions = [float(np.ravel(model.decision(p[:d]))[0]) for p in probe]
    np.testing.assert_allclose(decisions, truth["decisions"], rtol=1e-12, atol=1e-12)
    again = OnlineMKL.from_state(*model.to_state())
    assert again.digest() == model.digest()
    rng = np.random.default_rng(7)  # the stream gen_v3.py drew
    X = rng.normal(size=(260, 4)) * 2.0
    Y = np.where(X[:, 0] * X[:, 1] > 0, 1.0, -1.0)
    start = {"warm": 120, "pending": 20, "rescaled": 120}[case]
    model.learn_many(X[start : start + 40, :d], Y[start : start + 40])
    if case == "pending":  # the warm-up ended on the restored reservoir: the same median
        # (the old names state it), the blocks restarted (the Fourier one over new draws)
        assert all(k.fit.final and k.fit.drawn_as is None for k in model.kernels[1:])
        gammas = [f"{k.gamma:g}" for k in model.kernels[1:]]
        assert gammas == [
            n.split("=")[1].split(",")[0].rstrip(")") for n in truth["names_after_40"][1:]
        ]
    else:  # no bandwidth changed: the same rounds, over the same features
        np.testing.assert_allclose(model.block_norms, truth["norms_after_40"], rtol=1e-9)


def test_a_version_3_river_learner_and_daemon_checkpoint_keep_their_blocks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The default bank's river learner saved by 840b214 predicts as it did; a daemon restarted
    on an 840b214 checkpoint with the same settings adds and removes nothing (before: the
    learned Gaussian block, named after its bandwidth, was dropped for an empty one)."""
    truth = json.loads((DATA / "truth.json").read_text())["river_default"]
    clf = MKLClassifier.load(DATA / "river_default.smkl")
    # 840b214's default bank, in today's names (today's default draws its additive block by
    # quadrature: a kernel of another name; the saved one keeps its i.i.d. draws; and has a
    # landmark block since)
    then = [
        kernels.AdditiveRBF(k.gamma, k.n_components or 0).name
        if isinstance(k, kernels.AdditiveRBF)
        else k.name
        for k in defaults.kernel_bank()
        if not isinstance(k, kernels.LandmarkRBF)
    ]
    assert clf.rounds().kernel_names == then
    probe = np.load(DATA / "probe.npy")
    proba = [clf.predict_proba_one({f"x{j}": float(v) for j, v in enumerate(p[:3])})[1]
             for p in probe]  # fmt: skip
    np.testing.assert_allclose(proba, truth["proba"], rtol=1e-12)
    assert list(clf.kernel_weights.values()) == [truth["weights"][n] for n in truth["names"]]

    import shutil

    shutil.copytree(DATA / "checkpoint", tmp_path / "ck")
    caplog.set_level(logging.INFO, logger="streammkl.daemon.learning.bank")
    cluster = FakeCluster()
    cluster.create("in", 1)
    fill(cluster, bananas_like(300, seed=2))
    over = {"learner.kernels": [LINEAR, {"type": "MedianRBF", "scale": 1.0}]}
    r = runner(tmp_path, cluster, over)
    r.start()
    assert r.counters["examples_learned"] == 300
    norms = r.learner.rounds().block_norms
    assert list(norms) == ["linear", "rff(gamma=1/median,D=256)"]
    assert norms["rff(gamma=1/median,D=256)"] == pytest.approx(1.2200924031930573, rel=1e-12)
    assert r.learner.rounds().kernel_bandwidths == {
        "rff(gamma=1/median,D=256)": pytest.approx(0.3653093)
    }
    assert not [rec for rec in caplog.records if "kernels added" in rec.getMessage()]


def test_a_version_5_checkpoint_with_landmarks_restarts_and_exports(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A checkpoint of the default learner saved with its landmarks as lists of numbers
    (state version 5, commit 3e1a5e7) restarts the daemon with every block as it was (logged
    as upgraded: its digest changes with the format, the model does not), and
    ``streammkl export`` writes it."""
    import shutil

    from streammkl.daemon.checkpoints.export import export_model

    v5 = Path(__file__).parent / "data" / "v5_checkpoint"
    truth = json.loads((v5 / "truth.json").read_text())
    shutil.copytree(v5 / "checkpoint", tmp_path / "ck")
    caplog.set_level(logging.INFO, logger="streammkl.daemon.checkpoints.committer")
    cluster = FakeCluster()
    cluster.create("in", 1)
    fill(cluster, bananas_like(300, seed=2))
    r = runner(tmp_path, cluster, {})
    r.start()
    assert r.counters["examples_learned"] == truth["examples"]
    rounds = r.learner.rounds()
    assert rounds.block_norms == pytest.approx(truth["norms"], rel=1e-12)
    assert rounds.kernel_bandwidths == pytest.approx(truth["bandwidths"], rel=1e-12)
    assert any("OnlineMKL version 5 -> 6" in rec.getMessage() for rec in caplog.records)
    done = export_model(v5 / "checkpoint", tmp_path / "model.smkl")
    model = MKLClassifier.load(done.path)
    assert model.rounds().block_norms == pytest.approx(truth["norms"], rel=1e-12)


def test_a_reload_guard_counts_the_blocks_a_change_really_drops(tmp_path: Path) -> None:
    """The guard makes the change on a copy and counts every learned block that loses its
    state there; a duplicate name is refused as such (it used to read "drops 2 of the 2
    learned blocks")."""
    from streammkl.daemon.learning.bank import configured_kernels, kernel_change_risks

    cluster = FakeCluster()
    cluster.create("in", 1)
    fill(cluster, records(200))
    bank = [LINEAR, EVERY_KERNEL["median-fourier"], {"type": "RBF", "gamma": 2.0}]
    r = runner(tmp_path, cluster, {"learner.kernels": bank})
    r.run()
    assert all(v > 0 for v in r.learner.rounds().block_norms.values())
    spec = make_settings(tmp_path, **{"learner.kernels": bank}).learner
    assert kernel_change_risks(r.learner, configured_kernels(spec), 0.0) == []  # keeps all
    spec = make_settings(tmp_path, **{"learner.kernels": bank[1:]}).learner
    risks = kernel_change_risks(r.learner, configured_kernels(spec), 0.2)
    assert risks == [
        "it drops 1 of the 3 learned blocks (linear), more than reload.max_dropped_fraction = 0.2"
    ]
    twice = make_settings(tmp_path, **{"learner.kernels": [*bank, LINEAR]})
    with pytest.raises(LearnerConfigError, match=r"learner.kernels\[3\]: a second kernel named "
                       r"'linear' \(the name of learner.kernels\[0\]\)"):  # fmt: skip
        configured_kernels(twice.learner)
    digest = r.learner.rounds().digest()
    r.reload_settings = lambda: twice
    assert r.reload() is False and r.learner.rounds().digest() == digest
    reg = r.metrics.registry
    assert reg.get_sample_value("streammkl_config_reloads_total", {"result": "failed"}) == 1


def test_the_fitted_bandwidth_is_shown_apart_from_the_name(tmp_path: Path) -> None:
    """Metrics (``streammkl_kernel_bandwidth`` under the stable ``kernel`` label), ``inspect``,
    the history (an event per change) and the report's legend show the bandwidth; the kernel
    label of every metric is the configured name all along."""
    from streammkl.daemon.checkpoints.inspection import inspect_checkpoint
    from streammkl.daemon.commands.report import legend_labels
    from streammkl.daemon.learning import history

    cluster = FakeCluster()
    cluster.create("in", 1)
    fill(cluster, records(300))
    name = "rff(gamma=1/median,D=256)"
    r = runner(tmp_path, cluster, {"learner.kernels": [LINEAR, EVERY_KERNEL["median-fourier"]],
                                   "monitor.history_every": 10})  # fmt: skip
    r.run()
    gamma = r.learner.rounds().kernel_bandwidths[name]
    samples = {
        (fam.name, s.labels["kernel"]): s.value
        for fam in r.metrics.registry.collect()
        if fam.name.startswith("streammkl_kernel_")
        for s in fam.samples
    }
    assert samples[("streammkl_kernel_bandwidth", name)] == gamma
    assert {k for _, k in samples} == {"linear", name}
    assert inspect_checkpoint(tmp_path / "ck")["kernel_bandwidths"] == {name: gamma}
    entries = history.read(tmp_path / "ck")
    events = [e for e in entries if e.get("event") == "bandwidth"]
    fitted = [e["bandwidths"][name] for e in events]
    assert fitted[-1] == gamma and len(fitted) == len(set(fitted)) >= 3  # warm-up, 2 rescales
    assert fitted[-1] == pytest.approx(fitted[-2] * 3 / 4)  # 4 inputs after 3
    assert {k for e in entries if "beta" in e for k in e["beta"]} == {"linear", name}
    labels = legend_labels(["linear", name], entries)
    assert labels[0] == "linear"
    assert labels[1] == name + ": γ " + " → ".join(f"{g:.3g}" for g in fitted[-3:])


def test_a_median_kernel_added_at_run_time_measures_its_bandwidth_on_the_next_inputs() -> None:
    """(It used to keep its provisional bandwidth for good: the warm-up reservoir existed only
    for a bank that started with a MedianRBF.)"""
    X = np.random.default_rng(1).normal(size=(200, 3)) * 3.0
    Y = np.where(X[:, 0] * X[:, 1] > 0, 1.0, -1.0)
    model = OnlineMKL(kernels=(kernels.Linear(),))
    model.learn_many(X[:100], Y[:100])
    model.add_kernel(kernels.MedianRBF(1.0, 16))
    assert model.kernels[1].fit == kernels.Bandwidth(1.0 / 6.0, 3, False)  # provisional
    assert model.warmup_left == bandwidth.WARMUP
    model.learn_many(X[100:149], Y[100:149])
    assert not model.kernels[1].fit.final
    model.learn(X[149], Y[149])
    median = bandwidth.median_sq_distance(X[100:150])
    assert model.kernels[1].fit == kernels.Bandwidth(1.0 / median, 3, True)
    assert model.warmup_left == 0 and model.names == ["linear", "rff(gamma=1/median,D=16)"]


def test_the_fast_seeding_draws_what_numpys_default_generator_draws(monkeypatch) -> None:
    """``generator_for``: numpy's ``default_rng(stable_seed(...))`` draws bit for bit (its
    ``SeedSequence`` words compiled by ``nb.seed_state``, the Python original too), for seeds
    of one and two 32-bit words."""
    from streammkl.core import _numba as nb
    from streammkl.core.kernel_base import generator_for

    rng = np.random.default_rng(0)
    entropies = [0, 1, 2**32 - 1, 2**32, 2**48 - 1, *rng.integers(0, 2**48, 300).tolist()]
    for entropy in entropies:
        want = np.random.SeedSequence(entropy).generate_state(4, np.uint64)
        for fn in (nb.seed_state, nb.seed_state.py_func):
            got = np.zeros(4, dtype=np.uint64)
            fn(np.uint64(entropy), got)
            np.testing.assert_array_equal(got, want)
    from streammkl.core import kernel_base

    monkeypatch.setattr(kernel_base, "_COMPILED_AFTER", 0)  # the compiled words from the first
    for seed, name, key in [(0, "rff(gamma=1)", "w1"), (7, "additive", "x\x1fy"), (3, "a", "")]:
        ref = np.random.default_rng(stable_seed(seed, name, key))
        gen = generator_for(seed, name, key)
        np.testing.assert_array_equal(gen.standard_normal(300), ref.standard_normal(300))
        np.testing.assert_array_equal(gen.uniform(0.0, 2.0, size=7), ref.uniform(0.0, 2.0, size=7))


V5 = Path(__file__).parent / "data" / "v5_states"


def test_a_version_5_state_keeps_numpys_draws_for_its_inputs_and_its_new_ones() -> None:
    """Saved by streammkl 0ec92e6 (``gen_v5.py`` there), before the counter-based draws: it
    loads with numpy's generator per input (``NUMPY_DRAWS``), predicts exactly as it did,
    keeps those draws through a save and for an input that arrives after the load (the
    same rounds as the old code), and a new model draws with the counter-based generator."""
    from streammkl.core.kernel_base import DRAWS, NUMPY_DRAWS

    truth = json.loads((V5 / "truth.json").read_text())
    assert truth["version"] == 5
    model = OnlineMKL.load(V5 / "model.smkl")
    assert model.draws == NUMPY_DRAWS and model.layout.draws == NUMPY_DRAWS
    decisions = [float(np.ravel(model.decision(p))[0]) for p in np.load(V5 / "probe.npy")]
    np.testing.assert_allclose(decisions, truth["decisions"], rtol=1e-12, atol=1e-12)
    meta, arrays = model.to_state()
    assert meta["version"] == 6 and meta["draws"] == NUMPY_DRAWS
    again = OnlineMKL.from_state(json.loads(json.dumps(meta)), arrays)
    assert again.digest() == model.digest() and again.draws == NUMPY_DRAWS
    rng = np.random.default_rng(5)  # the stream gen_v5.py drew
    X = rng.normal(size=(200, 5))
    Y = np.where(X[:, 0] * X[:, 1] + X[:, 4] > 0, 1.0, -1.0)
    again.declare_features(["e"])
    again.learn_many(X[120:160], Y[120:160])
    np.testing.assert_allclose(again.block_norms, truth["norms_after_40"], rtol=1e-9)
    assert float(np.ravel(again.decision(X[199]))[0]) == pytest.approx(
        truth["decision_after_40"], rel=1e-9
    )
    fresh = OnlineMKL(kernels=[k.to_spec() for k in model.kernels], seed=model.seed)
    fresh.learn_many(X[:5, :4], Y[:5])
    assert fresh.draws == DRAWS and fresh.layout.draws == DRAWS
    assert "_columns" not in vars(fresh.kernels[3])  # nothing kept per input to redraw
    assert OnlineMKL.from_state(*fresh.to_state()).digest() == fresh.digest()
    meta, arrays = fresh.to_state()
    with pytest.raises(ValueError, match="draws"):
        OnlineMKL.from_state({**meta, "draws": 7}, arrays)


def test_the_counter_based_generator_is_philox4x32_10_and_draws_standard_normals() -> None:
    """``nb.philox`` gives Random123's known answers for Philox4x32-10 (compiled and in
    Python); an input's draws depend on (seed, name, key) alone, are standard normal and
    uniform (Kolmogorov-Smirnov over 10^6 draws), and are uncorrelated across inputs and
    across the indices of one input."""
    from scipy import stats

    from streammkl.core import _numba as nb
    from streammkl.core.kernel_base import normals, uniforms

    u = np.uint64
    known = [  # (counter, key, answer): Random123's kat_vectors for philox4x32_10
        ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
        ((2**32 - 1,) * 4, (2**32 - 1,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
        ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
         (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
    ]  # fmt: skip
    for counter, key, answer in known:
        for fn in (nb.philox, nb.philox.py_func):
            out = fn(*(u(c) for c in counter), *(u(k) for k in key))
            assert [int(w) for w in out] == list(answer)
    keys = [f"w{i}" for i in range(4000)]
    Z = normals(3, "rff(gamma=1/median,D=256)", keys, 256)
    np.testing.assert_array_equal(Z[7], normals(3, "rff(gamma=1/median,D=256)", ["w7"], 256)[0])
    assert not np.allclose(Z[7], normals(4, "rff(gamma=1/median,D=256)", ["w7"], 256)[0])
    assert not np.allclose(Z[7], normals(3, "rff(gamma=4/median,D=256)", ["w7"], 256)[0])
    assert stats.kstest(Z.ravel()[:1_000_000], "norm").pvalue > 1e-3
    assert abs(Z.mean()) < 5e-3 and abs(Z.var() - 1.0) < 5e-3
    C = np.corrcoef(Z[:, :32].T)  # across indices (Box-Muller's pairs among them)
    assert np.abs(C - np.eye(32)).max() < 0.08  # 4,000 inputs: sd ~0.016
    C = np.corrcoef(Z[:64])  # across inputs
    assert np.abs(C - np.eye(64)).max() < 0.3  # 256 draws: sd ~0.06
    U = uniforms(3, "additive", keys[:1000], 512, 0.0, 2.0 * np.pi)
    assert U.min() >= 0.0 and U.max() < 2.0 * np.pi
    assert stats.kstest(U.ravel() / (2.0 * np.pi), "uniform").pvalue > 1e-3
