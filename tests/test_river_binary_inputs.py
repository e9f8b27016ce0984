"""The input standardisation leaves 0/1 inputs at 0/1 (``river._scaling``: an input is binary
while every value counted for it was 0 or 1; its first other value standardises it for good):
the rule on rows, the two routes (one compiled call, the general path) giving the same numbers,
dense streams standardised bit for bit as before, a one-hot record kept sparse, the flags saved,
loaded (an older state: none binary) and pooled by a mixing group."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from river import datasets
from river.datasets import synth

from streammkl.river import MKLClassifier, MKLRegressor
from streammkl.river._scaling import InputScaler
from streammkl.river.pooling import SCALER_PREFIX, pool_scalers

BINARY = SCALER_PREFIX + "binary"


def _one_hot_agrawal(n: int, seed: int = 42) -> list[tuple[dict, bool]]:
    """``synth.Agrawal`` with elevel, car and zipcode one-hot (as ``benchmarks/river_speed``)."""
    out = []
    for x, y in synth.Agrawal(seed=seed, classification_function=0).take(n):
        row = {k: float(v) for k, v in x.items() if k not in ("elevel", "car", "zipcode")}
        for k in ("elevel", "car", "zipcode"):
            row[f"{k}={x[k]}"] = 1.0
        out.append((row, bool(y)))
    return out


def _general(x: dict) -> dict:
    """The record with numpy float values: the learner's general path (never the one-call
    route, which takes plain ``float`` and ``int`` values only)."""
    return {k: np.float64(v) for k, v in x.items()}


def _welford(column: np.ndarray) -> np.ndarray:
    """Each value standardised with the population statistics of the values up to it (the
    rule's arithmetic, written out: the numbers before the 0/1 rule)."""
    out = np.empty_like(column)
    n = mean = m2 = 0.0
    for i, v in enumerate(column):
        n += 1.0
        delta = v - mean
        mean += delta / n
        m2 += delta * (v - mean)
        var = m2 / n
        out[i] = (v - mean) / math.sqrt(var) if var > 1e-24 else v - mean
    return out


def test_an_input_stays_at_0_1_until_its_first_other_value_then_is_standardised_for_good():
    flags = np.array([0, 1, 1, 0, 1, 0, 2, 1, 0, 1, 0.5, 0], dtype=float)
    dense = np.linspace(-1.0, 3.0, flags.shape[0])
    X = np.column_stack([flags, dense, np.zeros_like(dense)])
    scaler = InputScaler()
    out = scaler.rows(X, learn=True)
    np.testing.assert_array_equal(out[:6, 0], flags[:6])  # binary so far: left as it is
    np.testing.assert_array_equal(out[6:, 0], _welford(flags)[6:])  # the 2, then for good
    np.testing.assert_array_equal(out[:, 1], _welford(dense))  # a dense input: as before
    np.testing.assert_array_equal(out[:, 2], 0.0)
    np.testing.assert_array_equal(scaler.binary, [0.0, 0.0, 1.0])
    # one row at a time, counted or not, gives the numbers of the run
    again = InputScaler()
    for i, row in enumerate(X):
        np.testing.assert_array_equal(again.transform(row), out[i])
        np.testing.assert_array_equal(again.learn_transform(row), out[i])
    # a prediction on another value standardises it (as its round will) and clears nothing
    fresh = InputScaler()
    fresh.rows(X[:6], learn=True)
    seen = fresh.transform(np.array([0.5, 0.0, 0.0]))
    assert seen[0] != 0.5 and fresh.binary[0] == 1.0
    np.testing.assert_array_equal(seen[0], fresh.learn_transform(np.array([0.5, 0.0, 0.0]))[0])
    assert fresh.binary[0] == 0.0


def test_a_frequent_0_1_input_is_standardised_from_its_64th_count_a_rare_one_stays():
    rng = np.random.default_rng(1)
    frequent = (rng.random(300) < 0.5).astype(float)
    rare = (rng.random(300) < 0.1).astype(float)
    scaler = InputScaler()
    out = scaler.rows(np.column_stack([frequent, rare]), learn=True)
    np.testing.assert_array_equal(out[:63, 0], frequent[:63])  # fewer than 64 counts: 0/1
    np.testing.assert_array_equal(out[63:, 0], _welford(frequent)[63:])  # then for good
    np.testing.assert_array_equal(out[:, 1], rare)
    np.testing.assert_array_equal(scaler.binary, [0.0, 1.0])
    # LEDDrift's segments (on in 40 to 90 % of the records) end standardised as before the rule
    stream = synth.LEDDrift(seed=42, noise_percentage=0.1, irrelevant_features=True)
    led = list(itertools.islice(stream, 2000))
    model = MKLClassifier(standardize=True)
    for x, y in led:
        model.learn_one(x, y)
    assert not model.rounds().scaler.binary.any()


@pytest.mark.parametrize("stream", ["Bananas", "Hyperplane"])
def test_dense_streams_are_standardised_bit_for_bit_as_before(stream):
    """No input of these streams is ever exactly 0 or 1: every round's input vector is the
    plain running standardisation of the raw record, and no input is binary."""
    if stream == "Bananas":
        data = list(datasets.Bananas())[:800]
    else:
        data = list(synth.Hyperplane(seed=42, n_features=10).take(800))
    model = MKLClassifier(standardize=True)
    seen = []
    names: list = []
    for x, y in data:
        model.learn_one(x, y)
        names = names or list(x)
        seen.append(model.rounds().last_input.copy())
    raw = np.array([[x[k] for k in names] for x, _ in data])
    want = np.column_stack([_welford(raw[:, j]) for j in range(raw.shape[1])])
    np.testing.assert_array_equal(np.array(seen), want)
    assert not model.rounds().scaler.binary.any()


def test_one_hot_categories_stay_sparse_and_both_routes_give_the_same_numbers():
    data = _one_hot_agrawal(700)
    fused, general = MKLClassifier(standardize=True), MKLClassifier(standardize=True)
    for x, y in data:
        assert fused.predict_proba_one(x) == general.predict_proba_one(_general(x))
        assert fused.learn_predict_one(x, y) == general.learn_predict_one(_general(x), y)
        vec = fused.rounds().last_input
        names = fused.rounds().feature_names
        hot = [j for j, n in enumerate(names) if "=" in n]
        assert set(vec[hot]) <= {0.0, 1.0}  # absent categories stay 0, present ones 1
        assert int(np.count_nonzero(vec[hot])) == 3
    assert fused.rounds().digest() == general.rounds().digest()
    rounds = fused.rounds()
    flags = dict(zip(rounds.feature_names, rounds.scaler.binary, strict=True))
    assert all(flags[n] == 1.0 for n in flags if "=" in n)
    assert all(flags[n] == 0.0 for n in flags if "=" not in n)  # salary, age, ...: standardised
    # the record is sparse: 6 standardised inputs and its 3 categories of about 40 inputs
    x = data[-1][0]
    assert rounds._nonzeros(x) == 9 < len(flags) / 4 + 1


def test_the_flags_are_saved_and_a_state_without_them_loads_with_no_input_binary():
    data = _one_hot_agrawal(400)
    model = MKLClassifier(standardize=True)
    for x, y in data[:300]:
        model.learn_one(x, y)
    meta, arrays = model.to_state()
    assert BINARY in arrays and arrays[BINARY].any()
    twin = MKLClassifier.from_state(meta, arrays)
    old = MKLClassifier.from_state(meta, {k: v for k, v in arrays.items() if k != BINARY})
    assert not old.rounds().scaler.binary.any()
    for x, y in data[300:]:
        assert model.learn_predict_one(x, y) == twin.learn_predict_one(x, y)
        old.learn_one(x, y)
    assert model.rounds().digest() == twin.rounds().digest()
    # the older state centres its categories as before the rule: an absent one is -mean/std
    names = old.rounds().feature_names
    absent = [j for j, n in enumerate(names) if "=" in n and n not in data[-1][0]]
    assert absent and all(old.rounds().last_input[j] < 0.0 for j in absent)
    assert all(model.rounds().last_input[j] == 0.0 for j in absent)


def _values(rows: list[dict], keys: list[str]) -> np.ndarray:
    return np.array([[r.get(k, 0.0) for k in keys] for r in rows])


def test_a_group_pools_the_flags_as_one_learner_that_saw_every_value():
    """Base, then two members each counting their own rows on top: the pooled flags (and the
    statistics) are those of one scaler that counted every row; a state without flags pools as
    none binary."""
    keys = ["flag", "count", "late", "num"]
    rng = np.random.default_rng(0)
    base_rows = [{"flag": float(rng.integers(2)), "count": 1.0, "num": rng.normal()}
                 for _ in range(20)]  # fmt: skip
    one = [{"flag": float(rng.integers(2)), "count": 2.0, "num": rng.normal()} for _ in range(15)]
    two = [{"flag": 1.0, "late": 1.0, "count": 0.0, "num": rng.normal()} for _ in range(10)]

    def state(rows_list: list[list[dict]]) -> tuple[list[str], dict[str, np.ndarray]]:
        scaler = InputScaler(len(keys))
        for rows in rows_list:
            scaler.rows(_values(rows, keys), learn=True)
        return keys, scaler.to_arrays(SCALER_PREFIX)

    base = state([base_rows])
    pooled = pool_scalers(
        base, [(state([base_rows, one]), None), (state([base_rows, two]), None)], keys
    )
    alone = state([base_rows, one, two])[1]
    np.testing.assert_array_equal(pooled[BINARY], [1.0, 0.0, 1.0, 0.0])
    np.testing.assert_array_equal(pooled[BINARY], alone[BINARY])
    for field in ("count", "mean", "m2"):
        np.testing.assert_allclose(pooled[SCALER_PREFIX + field], alone[SCALER_PREFIX + field])
    # a member's flag only clears: an input unknown to the base is binary where a member is
    short = (keys[:2], {k: v[:2] for k, v in base[1].items()})
    assert pool_scalers(short, [(state([base_rows, two]), short)], keys)[BINARY][2] == 1.0
    # a state saved before the rule (no flags): its counted inputs are not binary
    older = (keys, {k: v for k, v in base[1].items() if k != BINARY})
    np.testing.assert_array_equal(pool_scalers(older, [], keys)[BINARY], 0.0)


def test_a_regressor_with_0_1_inputs_takes_the_rule_on_both_routes():
    data = list(itertools.islice(datasets.ChickWeights(), 300))
    fused, general = MKLRegressor(standardize=True), MKLRegressor(standardize=True)
    for x, y in data:
        assert fused.learn_predict_one(x, y) == general.learn_predict_one(_general(x), y)
    assert fused.rounds().digest() == general.rounds().digest()
