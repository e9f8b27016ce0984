"""MemoryRegressor (issue 27's residual Parzen vote in the library): its residual mean and eta^2
against brute-force numpy, its predictions against the study's head
(``benchmarks/regression_votes.py``), its saved, loaded and pickled copies continuing the same,
and its parameter checks."""

from __future__ import annotations

import itertools
import math
import pickle
import sys
from pathlib import Path

import numpy as np
import pytest
from river import linear_model, preprocessing

from streammkl import statefile
from streammkl.core.residual_memory import ResidualMemory, correlation_ratio
from streammkl.river import MemoryRegressor, MKLRegressor

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import regression_votes as rv

HEAD_VOTE = "residual parzen 16/median W=1000 eta2"
HEAD_MIX = "hedge abs eta 4 share 0.002"


def _stream(n: int, seed: int = 0, trend: bool = True) -> list[tuple[dict, float]]:
    """Three inputs, the target reads the first two (the second non-monotonically); the third
    trends, as TrumpApproval's ordinal_date."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    if trend:
        X[:, 2] = 1000.0 + np.arange(n)
    y = 3.0 * X[:, 0] + 2.0 * X[:, 1] ** 2 + 0.1 * rng.normal(size=n) + 5.0
    return [({f"x{j}": float(v) for j, v in enumerate(row)}, float(t)) for row, t in zip(X, y)]


def _eta2(x: np.ndarray, y: np.ndarray) -> tuple[float, int]:
    """The correlation ratio by its definition, 1 - within / total, over 8 bins at -2..2."""
    bins = np.searchsorted(np.linspace(-2.0, 2.0, 7), x)
    within = sum(((y[bins == b] - y[bins == b].mean()) ** 2).sum() for b in np.unique(bins))
    return 1.0 - within / ((y - y.mean()) ** 2).sum(), len(np.unique(bins))


def test_correlation_ratio_is_eta2_less_its_bias_scaled_to_mean_one() -> None:
    rng = np.random.default_rng(1)
    Z = rng.normal(size=(400, 3))
    y = np.sin(2 * Z[:, 0]) + Z[:, 1] ** 2 + 0.05 * rng.normal(size=400)
    want = []
    for j in range(3):
        e, used = _eta2(Z[:, j], y)
        want.append(max(e - (used - 1) / 399, 0.0))
    want_arr = np.array(want)
    np.testing.assert_allclose(correlation_ratio(Z, y), want_arr * 3 / want_arr.sum(), rtol=1e-9)
    assert correlation_ratio(Z, y)[2] < 0.05  # the noise input barely counts
    np.testing.assert_array_equal(correlation_ratio(Z, np.ones(400)), np.ones(3))


def test_residual_mean_is_the_brute_force_mean_of_the_past_window() -> None:
    data = _stream(700)
    memory = ResidualMemory(window=300, scale=16.0, period=100)
    past: list[tuple[np.ndarray, float, float]] = []
    rng = np.random.default_rng(2)
    for t, (x, y) in enumerate(data):
        row = np.array(list(x.values()))
        got = memory.residual_mean(row)
        if not past:
            assert math.isnan(got)
        elif t % 7 == 0:
            window = past[-300:]
            allx = np.array([p[0] for p in past])
            var = allx.var(axis=0)
            scale = memory.relevance / np.where(var > 0, var, 1.0) if len(past) > 1 else 1.0
            d2 = np.array([float(((p[0] - row) ** 2) @ scale) for p in window])
            gamma = memory.gamma if t >= 100 else 16.0 / 6.0
            g = np.exp(-gamma * (d2 - d2.min()))
            want = float(g @ np.array([p[2] for p in window]) / g.sum())
            assert math.isclose(got, want, rel_tol=1e-8, abs_tol=1e-12), t
        residual = float(rng.normal())
        memory.add(row, y, residual)
        past.append((row, y, residual))
        if len(past) % 100 == 0:  # the refresh: eta^2 of the window standardised by all inputs
            allx = np.array([p[0] for p in past])
            Z = (allx[-300:] - allx.mean(axis=0)) / allx.std(axis=0)
            want_r = correlation_ratio(Z, np.array([p[1] for p in past[-300:]]))
            np.testing.assert_allclose(memory.relevance, want_r, rtol=1e-9)
    assert memory.relevance[0] > memory.relevance[2]  # x0 informs the target, the trend not


def _study_head(data: list, seed: int) -> list[float]:
    """The study's head, prediction by prediction, from the study's own parts (its
    ``NeighbourMean``, its combiner and losses), around river's pipeline of the default."""
    learner = preprocessing.StandardScaler() | MKLRegressor(seed=seed)
    nm, mixer = rv.NeighbourMean(rv.VOTES[HEAD_VOTE]), rv.combiner(HEAD_MIX)
    names, out, y_mean, y_m2 = list(data[0][0]), [], 0.0, 0.0
    for t, (x, y) in enumerate(data):
        yb = float(learner.predict_one(x))
        raw = np.array([float(x.get(k, 0.0)) for k in names])
        sd = math.sqrt(y_m2 / t) if t > 1 else 1.0
        sd = sd if sd > 0 else 1.0
        mean = nm.mean(raw)
        yv = yb + (0.0 if math.isnan(mean) else mean)
        w = mixer.weights()
        out.append(float(w[0] * yb + w[1] * yv))
        mixer.update(rv.losses(np.array([(y - yb) / sd, (y - yv) / sd]), "abs"))
        delta = y - y_mean
        y_mean += delta / (t + 1)
        y_m2 += delta * (y - y_mean)
        learner.learn_one(x, y)
        nm.learn(raw, float(y), float(y - yb))
    return out


@pytest.mark.parametrize(("key", "n"), [("friedman", 600), ("trump-approval", 400)])
def test_predictions_equal_the_studys_head(key: str, n: int) -> None:
    import river_suite as rs

    data = list(itertools.islice(rs.DATASETS[key].load(), n))
    want = _study_head(data, seed=1)
    model = MemoryRegressor(
        preprocessing.StandardScaler() | MKLRegressor(seed=1)
    )  # (the default's bank, seeded)
    got = []
    for t, (x, y) in enumerate(data):
        if t % 2:
            got.append(model.learn_predict_one(x, y))
        else:
            got.append(model.predict_one(x))
            model.learn_one(x, y)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    ref = rv.run(data, 1, [HEAD_VOTE])  # and the study's MAE of its head
    assert math.isclose(
        float(np.mean(np.abs(np.array(got) - [y for _, y in data]))),
        ref[f"{HEAD_MIX} {HEAD_VOTE}"],
        rel_tol=1e-12,
    )
    assert model.memory_weight > 0.5  # the residual vote earns its weight on both


@pytest.mark.parametrize("learner", ["pipeline", "mkl"])
def test_saved_loaded_and_pickled_copies_continue_the_same(tmp_path, learner: str) -> None:
    data = _stream(700, seed=3)
    regressor = None if learner == "pipeline" else MKLRegressor(seed=2, standardize=True)
    model = MemoryRegressor(regressor, window=200, relevance_every=50)
    for x, y in data[:350]:
        model.learn_one(x, y)
    loaded = MemoryRegressor.load(model.save(tmp_path / "m.smkl"))
    pickled = pickle.loads(pickle.dumps(model))
    assert loaded.memory_weight == model.memory_weight
    for x, y in data[350:]:
        want = model.learn_predict_one(x, y)
        for copy in (loaded, pickled):
            assert copy.learn_predict_one(x, y) == want
    assert loaded.regressor is None if learner == "pipeline" else loaded.regressor is not None


def test_state_refuses_other_learners_and_files() -> None:
    model = MemoryRegressor(linear_model.LinearRegression())
    model.learn_one({"a": 1.0}, 2.0)
    with pytest.raises(TypeError, match="pickle the model instead"):
        model.to_state()
    meta, arrays = MemoryRegressor().to_state()
    with pytest.raises(statefile.StateError):
        MemoryRegressor.from_state({**meta, "class": "Other"}, arrays)


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"regressor": preprocessing.StandardScaler()}, TypeError),
        ({"window": 1}, ValueError),
        ({"window": 10.0}, TypeError),
        ({"bandwidth": 0.0}, ValueError),
        ({"bandwidth": math.inf}, ValueError),
        ({"relevance_every": 0}, ValueError),
        ({"eta": -1.0}, ValueError),
        ({"eta": "4"}, TypeError),
        ({"share": 1.0}, ValueError),
        ({"share": -0.1}, ValueError),
        ({"error_clip": 0}, ValueError),
        ({"relevance_every": True}, TypeError),
    ],
)
def test_bad_parameters_raise(params: dict, error: type) -> None:
    with pytest.raises(error):
        MemoryRegressor(**params)


def test_a_non_finite_target_is_refused() -> None:
    with pytest.raises(ValueError, match="finite"):
        MemoryRegressor().learn_one({"a": 1.0}, math.nan)


def test_the_compiled_mean_is_its_python_function_and_numpy() -> None:
    from streammkl.core._numba import residual

    rng = np.random.default_rng(4)
    rows, values = rng.normal(size=(50, 4)), rng.normal(size=(50, 2))
    z, w = rng.normal(size=4), rng.uniform(0.1, 2.0, size=4)
    for m in (1, 17, 50):
        got = residual.nw_mean(rows, values[:, 1], m, z, w, 0.7, np.zeros(50))
        py = residual.nw_mean.py_func(rows, values[:, 1], m, z, w, 0.7, np.zeros(50))
        s = -0.7 * (((rows[:m] - z) ** 2) @ w)
        g = np.exp(s - s.max())
        assert got == py
        assert math.isclose(got, float(g @ values[:m, 1] / g.sum()), rel_tol=1e-12)


def test_the_compiled_store_and_weighted_mean_are_their_numpy_forms() -> None:
    """``residual.store`` (a triple and the Welford step, in place) and ``nw_mean_at`` (the
    distance weights computed in the call) against the numpy operations they replaced, bit for
    bit, and their Python functions."""
    from streammkl.core._numba import residual

    rng = np.random.default_rng(5)
    w, d = 30, 4
    rows, values = np.zeros((w, d)), np.zeros((w, 2))
    means, sq_dev = np.zeros(d), np.zeros(d)
    want_rows, want_values = rows.copy(), values.copy()
    want_means, want_sq = means.copy(), sq_dev.copy()
    py = [a.copy() for a in (rows, values, means, sq_dev)]
    relevance = rng.uniform(0.2, 2.0, size=d)
    for count in range(1, 80):
        row, target, res = rng.normal(size=d), float(rng.normal()), float(rng.normal())
        row[0] = 3.0  # (a constant input: its variance stays 0, its weight the relevance)
        at = (count - 1) % w
        residual.store(rows, values, at, row, target, res, means, sq_dev, count)
        residual.store.py_func(py[0], py[1], at, row, target, res, py[2], py[3], count)
        want_rows[at], want_values[at] = row, (target, res)
        delta = row - want_means
        want_means = want_means + delta / count
        want_sq = want_sq + delta * (row - want_means)
        for got in (rows, py[0]):
            assert got.tobytes() == want_rows.tobytes()
        for got, want in ((values, want_values), (means, want_means), (sq_dev, want_sq)):
            assert got.tobytes() == want.tobytes()
        z, m = rng.normal(size=d), min(count, w)
        var = want_sq / count
        weights = relevance if count < 2 else relevance / np.where(var > 0, var, 1.0)
        want = residual.nw_mean(rows, values[:, 1], m, z, weights, 0.3, np.zeros(w))
        got = residual.nw_mean_at(
            rows, values, m, z, relevance, sq_dev, count, 0.3, np.zeros(w), np.zeros(d)
        )
        assert got == want
