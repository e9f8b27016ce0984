"""A mixing group agrees on its Gaussian bandwidths and its input scale (core.mixing_bandwidth,
river.pooling), folded from mix records built in memory (the daemons end to end:
tests/test_daemon_group.py)."""

from __future__ import annotations

import numpy as np
import pytest

from streammkl.core import bandwidth, kernels
from streammkl.core.mixing_bandwidth import align, decide
from streammkl.core.model import OnlineMKL
from streammkl.daemon.mixing.log import MixLog, learner_digest
from streammkl.daemon.mixing.topic import MixRecord, decode, encode
from streammkl.river import MKLClassifier
from streammkl.river.pooling import pool_scalers


def _stream(n: int, seed: int, d: int = 3, spread: float = 100.0) -> tuple[list[dict], list[int]]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * np.geomspace(1.0, spread, d)  # inputs of different scales
    Y = (X[:, 0] * X[:, 1] / 10 + 0.003 * X[:, -1] > 0).astype(int)
    return [{f"x{j}": float(v) for j, v in enumerate(row)} for row in X], [int(y) for y in Y]


def _base(**params) -> tuple:
    learner = MKLClassifier(**params)
    learner.rounds().declare_classes([0, 1])
    learner.rounds().declare_features([])
    return learner.to_state()


def _member(base: tuple, **params) -> MKLClassifier:
    learner = MKLClassifier(**params)
    learner.rounds().load_state(*base)
    learner.rounds().model.hold_bandwidths = True  # what MixingMember does on every adopted base
    return learner


def _delta(base: tuple, round_: int, name: str, xs, ys, **params) -> MixRecord:
    learner = _member(base, **params)
    start = learner.rounds().n_learned
    for x, y in zip(xs, ys, strict=True):
        learner.learn_one(x, y)
    rec = MixRecord(
        "delta", round_, name, examples=learner.rounds().n_learned - start,
        state=learner.to_state(),
        base_digest=learner_digest(base),
    )  # fmt: skip
    return decode(encode(rec)[1])


def _log(base: tuple, members=("a", "b")) -> MixLog:
    log = MixLog()
    log.apply(MixRecord("base", 0, members[0], state=base))
    for m in members:
        log.apply(MixRecord("hello", 0, m))
    return log


def _medians(learner: MKLClassifier) -> list:
    return [k for k in learner.rounds().model.kernels if isinstance(k, kernels.MedianRBF)]


def test_a_held_member_keeps_the_base_bandwidths_and_every_warmup_input():
    xs, ys = _stream(300, 0)
    learner = _member(_base())
    # compiled runs across the full reservoir
    learner.rounds().learn_predict_many(xs[:120], ys[:120])
    for x, y in zip(xs[120:], ys[120:], strict=True):
        learner.learn_one(x, y)
    assert learner.rounds().n_learned == 300
    medians = _medians(learner)
    assert len(medians) == 4 and not any(k.fit.final for k in medians)  # 3 RFF + landmarks
    assert learner.rounds().model.warmup_left == 0  # 50 inputs kept (for the group), none resolved
    assert learner.to_state()[1]["warmup_inputs"].shape == (bandwidth.WARMUP, 3)
    alone = MKLClassifier()  # the single learner resolves at 50 inputs, as before
    for x, y in zip(xs, ys, strict=True):
        alone.learn_one(x, y)
    assert all(k.fit.final for k in _medians(alone))


def test_the_group_measures_one_bandwidth_from_its_pooled_inputs_and_all_agree():
    xs, ys = _stream(400, 1)
    base = _base()
    log, other = _log(base), _log(base)
    da = _delta(base, 0, "a", xs[:50], ys[:50])
    db = _delta(base, 0, "b", xs[50:100], ys[50:100])
    for rec in (da, db):
        log.apply(rec)
        other.apply(rec)
    assert log.round == 1 and log.digest == other.digest and log.examples == 100
    merged = MKLClassifier.from_state(*log.base)
    # the pooled reservoir: one input of a, one of b, ... (50 in all)
    rows_a, rows_b = (
        MKLClassifier.from_state(*d.state).to_state()[1]["warmup_inputs"] for d in (da, db)
    )
    pooled = np.stack([r for pair in zip(rows_a, rows_b, strict=True) for r in pair])[:50]
    median = bandwidth.median_sq_distance(pooled)
    for k in _medians(merged):
        assert k.fit.final and k.fit.inputs == 3
        want = k.scale / median
        provisional = k.scale / 6.0  # m = 2 d
        kept = max(want, provisional) / min(want, provisional) <= bandwidth.TOLERANCE
        assert k.gamma == pytest.approx(provisional if kept else want)
    assert merged.rounds().model.warmup_left == 0 and "warmup_inputs" not in log.base[1]
    # the next round learns on the agreed bandwidths: nothing more to decide, digests agree
    base1 = log.base
    for name, lo in (("a", 100), ("b", 250)):
        rec = _delta(base1, 1, name, xs[lo : lo + 150], ys[lo : lo + 150])
        log.apply(rec)
        other.apply(rec)
    assert log.round == 2 and log.digest == other.digest and log.examples == 400
    assert [k.name for k in MKLClassifier.from_state(*log.base).rounds().model.kernels] == [
        k.name for k in merged.rounds().model.kernels
    ]


def test_a_changed_bandwidth_restarts_its_block_and_keeps_the_others():
    """decide() on a model whose provisional bandwidth is far from the pooled median: that
    block restarts at zero (its random features change), the others keep their weights."""
    rng = np.random.default_rng(2)
    bank = (kernels.Linear(), kernels.MedianRBF(1.0, 32))
    model = OnlineMKL(kernels=bank)
    model.hold_bandwidths = True
    X = rng.normal(size=(80, 4)) * 30.0  # far from unit scale: the median is ~ 2 d * 900
    for x in X:
        model.learn(x, 1.0 if x[0] > 0 else -1.0)
    norms = model.block_norms.copy()
    assert norms[0] > 0 and norms[1] > 0
    rows = X[: bandwidth.WARMUP]
    decide(model, rows, model.feature_keys)
    rbf = model.kernels[1]
    assert rbf.fit.final
    assert rbf.gamma == pytest.approx(1.0 / bandwidth.median_sq_distance(rows))
    assert model.block_norms[0] == norms[0] and model.block_norms[1] == 0.0
    assert model.warmup_left == 0


def test_more_inputs_rescale_the_bandwidth_at_the_merge_not_in_a_member():
    """d grows by a quarter: a held member keeps the base's kernel (its delta merges), and the
    merge rescales gamma by d_old / d_new, as the single learner does."""
    xs, ys = _stream(400, 3)
    base = _base()
    log = _log(base, ("a",))
    log.apply(_delta(base, 0, "a", xs[:60], ys[:60]))
    gammas = [k.gamma for k in _medians(MKLClassifier.from_state(*log.base))]
    wide = [{**x, "x3": 1.0, "x4": -1.0} for x in xs[60:200]]  # 5 inputs >= 1.25 * 3
    rec = _delta(log.base, 1, "a", wide, ys[60:200])
    held = MKLClassifier.from_state(*rec.state)
    assert [k.gamma for k in _medians(held)] == gammas  # the member did not rescale
    log.apply(rec)
    merged = MKLClassifier.from_state(*log.base)
    assert [k.gamma for k in _medians(merged)] == pytest.approx([g * 3 / 5 for g in gammas])
    assert all(k.fit.inputs == 5 for k in _medians(merged))


def test_round_zero_members_that_resolved_at_other_input_counts_still_merge():
    """Round 0's base holds kernels without bandwidths; a member that met 2 inputs first fitted
    them at d = 2, one that met 3 at d = 3: the merge keeps the provisional bandwidths of the
    member with the most examples and restarts the other's blocks (their delta is dropped),
    never an error."""
    xs, ys = _stream(200, 4)
    base = _base()
    log = _log(base)
    narrow = [{"x0": x["x0"], "x1": x["x1"]} for x in xs[:10]]
    da = _delta(base, 0, "a", narrow + xs[10:30], ys[:30])
    db = _delta(base, 0, "b", xs[30:70], ys[30:70])
    a, b = (MKLClassifier.from_state(*d.state).rounds().model for d in (da, db))
    assert a.names == b.names and a.kernel_bandwidths != b.kernel_bandwidths
    res = log.apply(db) or log.apply(da)
    assert res is not None and log.examples == 70 and log.mismatches == []
    merged = MKLClassifier.from_state(*log.base)
    assert merged.rounds().n_features == 3


def test_align_leaves_fixed_banks_alone():
    learner = MKLClassifier(kernels=(kernels.Linear(), kernels.RBF(0.5, n_components=16)))
    learner.rounds().declare_classes([0, 1])
    learner.learn_one({"a": 1.0}, 1)
    meta, arrays = learner.to_state()
    state = (meta["core"], arrays)
    out = align(state, [("a", 1, state, None)])
    assert out[0] is state and out[1] == [state] and out[3].size == 0


def test_pooled_input_statistics_are_those_of_one_learner_that_saw_everything():
    xs, ys = _stream(900, 5)
    std = {"standardize": True}
    base = _base(**std)
    log = _log(base)
    log.apply(_delta(base, 0, "a", xs[:50], ys[:50], **std))
    log.apply(_delta(base, 0, "b", xs[50:100], ys[50:100], **std))
    b1 = log.base
    log.apply(_delta(b1, 1, "a", xs[100:400], ys[100:400], **std))
    log.apply(MixRecord("close", 1, "a", late=("b",)))  # b is late: merged next round
    late = _delta(b1, 1, "b", xs[400:600], ys[400:600], **std)  # from base 1: stale
    log.apply(late)
    log.apply(_delta(log.base, 2, "a", xs[600:900], ys[600:900], **std))
    log.apply(MixRecord("close", 2, "a", late=("b",)))  # b's stale delta merges here
    assert log.round == 3 and log.examples == 900 and log.results[-1].stale == (("b", 1),)
    one = MKLClassifier(**std)
    for x, y in zip(xs, ys, strict=True):
        one.learn_one(x, y)
    want = one.to_state()[1]
    got = log.base[1]
    for field in ("count", "mean", "m2"):
        np.testing.assert_allclose(got[f"inputs.{field}"], want[f"inputs.{field}"], rtol=1e-9)


def test_pooling_handles_inputs_met_by_one_member_only():
    def stats(names, rows):
        learner = MKLClassifier(standardize=True)
        for row in rows:
            learner.learn_one(dict(zip(names, row, strict=True)), 1)
        arrays = learner.to_state()[1]
        return learner.rounds().feature_names, arrays

    empty = ([], {})
    a = stats(["u", "v"], [[1.0, 2.0], [3.0, 4.0]])
    b = stats(["w"], [[10.0], [20.0], [30.0]])
    out = pool_scalers(empty, [(a, None), (b, None)], ["u", "v", "w"])
    assert out["inputs.count"].tolist() == [2.0, 2.0, 3.0]
    assert out["inputs.mean"].tolist() == [2.0, 3.0, 20.0]
    assert out["inputs.m2"].tolist() == [2.0, 2.0, 200.0]


def test_pooling_states_over_the_keys_reads_them_as_they_are_with_the_same_numbers():
    """Every state over exactly the keys, in their order (a settled group's rounds): the arrays
    are read as they are; the numbers are those of the input-by-input route, which the same
    states take when the keys hold one more input (its part at zero), bit for bit."""

    def stats(rows):
        learner = MKLClassifier(standardize=True)
        for row in rows:
            learner.learn_one(dict(zip(["u", "v"], row, strict=True)), 1)
        return learner.rounds().feature_names, learner.to_state()[1]

    rng = np.random.default_rng(3)
    rows = rng.normal(size=(60, 2)).tolist()
    rows[5][1] = 1.0
    base, a, b = stats(rows[:20]), stats(rows[:40]), stats(rows[:20] + rows[40:])
    members = [(a, None), (b, base)]
    fast = pool_scalers(base, members, ["u", "v"])
    general = pool_scalers(base, members, ["u", "v", "z"])
    for name, values in fast.items():
        assert values.tobytes() == general[name][:2].tobytes(), name
    assert fast["inputs.count"].tolist() == [60.0, 60.0]  # 20 + 20 + 20


@pytest.mark.parametrize("spread", [100.0, 1.0], ids=["bandwidths-changed", "guesses-kept"])
def test_a_late_delta_learned_before_the_group_fixed_its_bandwidths_still_merges(spread):
    """b is late in round 0 (over the provisional bandwidths); the group fixed them without it
    (changed, or kept the provisional guesses: same names, now final). Its stale delta merges
    next round: blocks whose bandwidth changed are dropped, the others (and its examples'
    count) are kept; never an error."""
    xs, ys = _stream(400, 9, spread=spread)
    base = _base()
    log = _log(base)
    log.apply(_delta(base, 0, "a", xs[:60], ys[:60]))
    late = _delta(base, 0, "b", xs[60:120], ys[60:120])  # learned over the provisional maps
    log.apply(MixRecord("close", 0, "a", late=("b",)))
    fixed = _medians(MKLClassifier.from_state(*log.base))
    assert all(k.fit.final for k in fixed)
    before = _medians(MKLClassifier.from_state(*late.state))
    assert [k.name for k in fixed] == [k.name for k in before]  # the names never change
    kept = [k.gamma for k in fixed] == [k.gamma for k in before]
    assert kept == (spread == 1.0)
    log.apply(late)  # stale: merged with round 1
    log.apply(_delta(log.base, 1, "a", xs[120:300], ys[120:300]))
    log.apply(MixRecord("close", 1, "a"))
    assert log.round == 2 and log.examples == 300 and log.results[-1].stale == (("b", 1),)
    assert log.dropped == [] and log.mismatches == []
