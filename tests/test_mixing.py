"""Iterative parameter mixing of OnlineMKL models (core.mixing)."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from streammkl.core import OnlineMKL, kernels, losses, mixing, regularizers, schedules
from streammkl.core.mixing import MemberRound, merge
from streammkl.statefile import state_digest

BANK = (
    kernels.Linear(),
    kernels.AdditiveRBF(1.0, 4),
    kernels.RBF(0.5, n_components=16),
    kernels.Polynomial(2, explicit=True),
)


def _stream(n, seed, d=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, np.where(X[:, 0] + 0.5 * X[:, 1] * X[:, 2] > 0, 1.0, -1.0)


def _rounds(base, parts):
    """Each member: the base, then its part of the stream."""
    out = []
    for i, (X, Y) in enumerate(parts):
        member = OnlineMKL.from_state(*base.to_state())
        member.learn_many(X, Y)
        out.append(MemberRound(f"m{i}", len(X), *member.to_state()))
    return out


CONFIGS = {
    "adagrad": dict(schedule=schedules.AdaGrad(0.5), regularizer=regularizers.GroupLasso(0.01)),
    "ftrl": dict(schedule=schedules.FTRL(0.5), regularizer=regularizers.GroupLasso(0.01)),
    "invsqrt": dict(schedule=schedules.InvSqrt(1.0), averages=(10.0, 100.0)),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_member_gets_the_same_merged_model_whatever_the_order(name):
    base = OnlineMKL(kernels=BANK, loss=losses.Logistic(), fit_intercept=True, **CONFIGS[name])
    X, Y = _stream(300, 0)
    base.learn_many(X[:100], Y[:100])
    rounds = _rounds(base, [(X[100:180], Y[100:180]), (X[180:300], Y[180:300])])
    a = merge(*base.to_state(), rounds)
    b = merge(*base.to_state(), list(reversed(rounds)))
    assert a.digest() == b.digest()
    assert a.t == base.t + 200
    assert a.schedule.t == base.schedule.t + 200
    c = OnlineMKL.from_state(*a.to_state())  # a merged model learns on as any other
    Xn, Yn = _stream(50, 9)
    a.learn_many(Xn, Yn)
    c.learn_many(Xn, Yn)
    assert a.digest() == c.digest()


def test_ftrl_merge_adds_the_members_increments_and_keeps_one_member_exactly():
    cfg = dict(kernels=BANK, loss=losses.Logistic(), **CONFIGS["ftrl"])
    base = OnlineMKL(**cfg)
    X, Y = _stream(200, 1)
    base.learn_many(X[:50], Y[:50])
    (one,) = _rounds(base, [(X[50:], Y[50:])])
    merged = merge(*base.to_state(), [one])
    member = OnlineMKL.from_state(one.meta, one.arrays)
    np.testing.assert_allclose(merged.decision_many(X), member.decision_many(X), rtol=1e-9)
    np.testing.assert_array_equal(merged.block_norms > 0, member.block_norms > 0)
    two = _rounds(base, [(X[50:120], Y[50:120]), (X[120:], Y[120:])])
    merged = merge(*base.to_state(), two)
    acc = [OnlineMKL.from_state(r.meta, r.arrays).gradient_sq_sums for r in two]
    np.testing.assert_allclose(
        merged.gradient_sq_sums, acc[0] + acc[1] - base.gradient_sq_sums, rtol=1e-12
    )


def test_mirror_descent_merge_is_the_weighted_delta_then_the_prox():
    cfg = dict(kernels=(kernels.Linear(),), loss=losses.Logistic(),
               schedule=schedules.Constant(0.1), regularizer=regularizers.L2(0.5))  # fmt: skip
    base = OnlineMKL(**cfg)
    X, Y = _stream(120, 2)
    base.learn_many(X[:20], Y[:20])
    rounds = _rounds(base, [(X[20:50], Y[20:50]), (X[50:120], Y[50:120])])
    merged = merge(*base.to_state(), rounds)

    def theta(meta, arrays):
        m = OnlineMKL.from_state(dict(meta), dict(arrays))
        return m._state.scale[0] * m._state.w[0]

    t0 = theta(*base.to_state())
    want = t0 + 0.3 * (theta(rounds[0].meta, rounds[0].arrays) - t0)
    want += 0.7 * (theta(rounds[1].meta, rounds[1].arrays) - t0)
    want /= 1.0 + 0.1 * 0.5  # L2's prox at the constant step
    np.testing.assert_allclose(merged._state.scale[0] * merged._state.w[0], want, rtol=1e-12)


def test_members_that_met_different_new_inputs_add_up_by_input_name():
    quadratic = kernels.Polynomial(2, explicit=True, normalize=False)  # a linear map of theta
    cfg = dict(kernels=(kernels.Linear(), quadratic),
               loss=losses.Logistic(), schedule=schedules.Constant(0.1),
               regularizer=regularizers.L2(0.0))  # fmt: skip
    base = OnlineMKL(**cfg)
    base.declare_features(["a", "b"])
    base.learn(np.array([1.0, -1.0]), 1.0)
    left = OnlineMKL.from_state(*base.to_state())
    left.declare_features(["x"])
    left.learn(np.array([0.5, 0.0, 2.0]), 1.0)
    right = OnlineMKL.from_state(*base.to_state())
    right.declare_features(["w", "y"])  # "w" sorts before "x": columns move in the merged model
    right.learn(np.array([0.0, 1.0, 3.0, -1.0]), -1.0)
    rounds = [MemberRound("L", 1, *left.to_state()), MemberRound("R", 1, *right.to_state())]
    merged = merge(*base.to_state(), rounds)
    assert merged.feature_keys == ["a", "b", "w", "x", "y"]
    x = {"a": 0.3, "b": -0.2, "w": 1.5, "x": 0.7, "y": -2.0}

    def score(model):
        return float(model.decision(np.array([x[k] for k in model.feature_keys])))

    # the merged linear function is the base's plus half of each member's change
    base_f, left_f, right_f = score(base), score(left), score(right)
    assert score(merged) == pytest.approx(
        base_f + 0.5 * (left_f - base_f) + 0.5 * (right_f - base_f)
    )


def test_mismatched_members_are_refused():
    base = OnlineMKL(kernels=(kernels.Linear(),))
    other = OnlineMKL(kernels=(kernels.Linear(),), seed=3)
    other.learn(np.ones(2), 1.0)
    with pytest.raises(ValueError, match="another configuration"):
        merge(*base.to_state(), [MemberRound("x", 1, *other.to_state())])


def test_members_over_other_random_draws_are_refused():
    """A member resumed from a state saved before the counter-based draws (its random features
    drawn with numpy's generator: meta without ``draws``) learns over other features than a
    base made since: refused, not averaged column by column."""
    base = OnlineMKL(kernels=BANK)
    base.learn(np.ones(3), 1.0)
    meta, arrays = base.to_state()
    old_meta = {k: v for k, v in meta.items() if k != "draws"}  # what version 5 wrote
    member = OnlineMKL.from_state(old_meta, arrays)
    member.learn(np.ones(3), -1.0)
    assert member.names == base.names and member.draws != base.draws
    with pytest.raises(ValueError, match="another configuration"):
        merge(meta, arrays, [MemberRound("x", 1, *member.to_state())])


def test_members_over_other_fitted_bandwidths_are_refused():
    """Kernel names never change with a bandwidth, so a merge compares the fitted bandwidths
    too (the group aligns them before it merges: core.mixing_bandwidth)."""
    base = OnlineMKL(kernels=(kernels.Linear(), kernels.MedianRBF(1.0, 8)))
    base.learn(np.ones(3), 1.0)
    member = OnlineMKL.from_state(*base.to_state())
    member.learn(np.ones(4), -1.0)  # 4 inputs >= 1.25 x 3: rescaled, same name
    assert member.names == base.names and member.kernel_bandwidths != base.kernel_bandwidths
    with pytest.raises(ValueError, match="other fitted bandwidths"):
        merge(*base.to_state(), [MemberRound("x", 1, *member.to_state())])


def test_mixing_two_halves_comes_close_to_one_model_and_keeps_its_sparsity():
    X, Y = _stream(6000, 4, d=4)
    X[:, 3] = np.random.default_rng(5).normal(size=6000)  # pure noise: its blocks should drop
    bank = (kernels.Linear(features=(0, 1, 2)), kernels.Linear(features=(3,)),
            kernels.RBF(0.5, n_components=32, features=(0, 1, 2)))  # fmt: skip
    cfg = dict(kernels=bank, loss=losses.Logistic(), fit_intercept=True,
               schedule=schedules.FTRL(1.0), regularizer=regularizers.GroupLasso(0.02))  # fmt: skip
    single = OnlineMKL(**cfg)
    _, p_single = single.learn_many(X, Y)
    base = OnlineMKL(**cfg)
    hits, K = [], 500
    for start in range(0, 6000, 2 * K):
        parts = [(X[start : start + K], Y[start : start + K]),
                 (X[start + K : start + 2 * K], Y[start + K : start + 2 * K])]  # fmt: skip
        rounds = []
        for i, (Xp, Yp) in enumerate(parts):
            member = OnlineMKL.from_state(*base.to_state())
            _, p = member.learn_many(Xp, Yp)
            hits.append(np.sign(p[:, 0]) == Yp)
            rounds.append(MemberRound(f"m{i}", len(Xp), *member.to_state()))
        base = merge(*base.to_state(), rounds)
    acc_single = np.mean(np.sign(p_single[:, 0]) == Y)
    acc_mixed = np.mean(np.concatenate(hits))
    assert acc_mixed > acc_single - 0.02
    assert single.block_norms[1] == 0.0 and base.block_norms[1] == 0.0  # the noise block


def test_a_stale_round_adds_its_delta_from_its_own_base():
    cfg = dict(kernels=(kernels.Linear(),), loss=losses.Logistic(),
               schedule=schedules.Constant(0.1), regularizer=regularizers.L2(0.0))  # fmt: skip
    base0 = OnlineMKL(**cfg)
    X, Y = _stream(200, 6)
    base0.learn_many(X[:20], Y[:20])
    late, on_time = _rounds(base0, [(X[20:60], Y[20:60]), (X[60:100], Y[60:100])])
    base1 = merge(*base0.to_state(), [on_time])  # round 0 closed without the late member
    (fresh,) = _rounds(base1, [(X[100:140], Y[100:140])])
    stale = MemberRound("late", late.examples, late.meta, late.arrays, since=base0.to_state())
    merged = merge(*base1.to_state(), [fresh, stale])
    assert merged.t == base0.t + 120  # every example counted once

    def theta(model):
        return model._state.scale[0] * model._state.w[0]

    def state(r):
        return OnlineMKL.from_state(dict(r.meta), dict(r.arrays))

    want = theta(base1) + 0.5 * (theta(state(fresh)) - theta(base1))
    want += 0.5 * (theta(state(late)) - theta(base0))
    np.testing.assert_allclose(theta(merged), want, rtol=1e-12)


def test_dual_mean_averages_the_increments_instead_of_adding_them():
    cfg = dict(kernels=BANK, loss=losses.Logistic(), **CONFIGS["ftrl"])
    base = OnlineMKL(**cfg)
    X, Y = _stream(200, 7)
    base.learn_many(X[:50], Y[:50])
    two = _rounds(base, [(X[50:110], Y[50:110]), (X[110:], Y[110:])])
    merged = merge(*base.to_state(), two, dual="mean")
    acc = [OnlineMKL.from_state(r.meta, r.arrays).gradient_sq_sums for r in two]
    g0 = base.gradient_sq_sums
    want = g0 + 0.4 * (acc[0] - g0) + 0.6 * (acc[1] - g0)
    np.testing.assert_allclose(merged.gradient_sq_sums, want, rtol=1e-12)
    assert merged.t == base.t + 150  # examples still count once each
    assert merged.schedule.t == base.schedule.t + 78  # 0.4 * 60 + 0.6 * 90


def _grown(cfg, X, Y):
    """A model whose inputs arrived in two steps (its layout keeps room for more)."""
    model = OnlineMKL(**cfg)
    model.declare_features(["a", "b"])
    model.learn_many(X[:30, :2], Y[:30])
    model.declare_features(["c"])
    model.learn_many(X[30:60], Y[30:60])
    return model


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("prox", [True, False])
def test_the_fast_merge_of_a_settled_group_is_the_general_merge_bit_for_bit(
    name, prox, monkeypatch
):
    """Members on the base's layout (a settled group's every round): their arrays are merged as
    they are; the result must be the general path's (column keys, models per state), bit for
    bit, stale members and unequal weights included."""
    cfg = dict(kernels=BANK, loss=losses.Logistic(), fit_intercept=True, **CONFIGS[name])
    X, Y = _stream(400, 5)
    old = _grown(cfg, X, Y)
    assert old.layout.capacity > len(old.feature_keys)  # the saved arrays skip the room
    rounds = _rounds(old, [(X[60:100], Y[60:100])])
    base = merge(*old.to_state(), rounds, fast=False)
    late = OnlineMKL.from_state(*old.to_state())  # learned from the older base: stale
    late.learn_many(X[100:130], Y[100:130])
    stale = MemberRound("late", 30, *late.to_state(), since=old.to_state())
    fresh = _rounds(base, [(X[130:200], Y[130:200]), (X[200:230], Y[200:230])])
    general_keys = mixing.column_keys

    def no_keys(*args):
        raise AssertionError("the fast path matches no columns by key")

    for parts in (fresh, [*fresh, stale], fresh[:1]):
        stats_fast: dict = {}
        stats_general: dict = {}
        monkeypatch.setattr(mixing, "column_keys", no_keys)
        fast = merge(*base.to_state(), parts, stats_fast, prox=prox)
        monkeypatch.setattr(mixing, "column_keys", general_keys)
        general = merge(*base.to_state(), parts, stats_general, prox=prox, fast=False)
        assert fast.digest() == general.digest()
        assert stats_fast == stats_general
        # the base's model built by the caller (a group's rebase and next close share it):
        # read, not changed, and the same merge
        given = OnlineMKL.from_state(*base.to_state())
        before = given.digest()
        assert merge(*base.to_state(), parts, prox=prox, base_model=given).digest() == (
            general.digest()
        )
        assert given.digest() == before
        Xn, Yn = _stream(40, 11)
        fast.learn_many(Xn, Yn)  # and it learns on alike
        general.learn_many(Xn, Yn)
        assert fast.digest() == general.digest()


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("prox", [True, False])
@pytest.mark.parametrize("dual", ["sum", "mean"])
def test_the_flat_merge_saves_what_the_merged_model_saves_bit_for_bit(name, prox, dual):
    """merge_saved (a settled group's close on flat vectors, no merged model built) gives
    the saved state of merge's merged model, bit for bit, stats included, stale members and
    unequal weights too; its shape model is read for its layout only (its own counts and
    arrays differ from the base's); a base whose layout keeps room is left to merge (None)."""
    cfg = dict(kernels=BANK, loss=losses.Logistic(), fit_intercept=True, **CONFIGS[name])
    X, Y = _stream(400, 5)
    old = _grown(cfg, X, Y)
    rounds = _rounds(old, [(X[60:100], Y[60:100])])
    assert mixing.merge_saved(*old.to_state(), rounds, old) is None  # (room for inputs)
    base = merge(*old.to_state(), rounds, fast=False)
    published = OnlineMKL.from_state(*base.to_state())  # a member's previous delta ...
    published.learn_many(X[100:115], Y[100:115])
    late = OnlineMKL.from_state(*published.to_state())  # ... and its next, measured from it
    late.learn_many(X[115:130], Y[115:130])
    stale = MemberRound("late", 15, *late.to_state(), since=published.to_state())
    fresh = _rounds(base, [(X[130:200], Y[130:200]), (X[200:230], Y[200:230])])
    shape = OnlineMKL.from_state(*base.to_state())
    shape.learn_many(X[230:260], Y[230:260])  # other counts and arrays, the same layout
    for parts in (fresh, [*fresh, stale], fresh[:1], [MemberRound("idle", 0, *base.to_state())]):
        stats_flat: dict = {}
        stats_model: dict = {}
        saved = mixing.merge_saved(*base.to_state(), parts, shape, stats_flat, dual, prox)
        assert saved is not None
        model = merge(*base.to_state(), parts, stats_model, dual=dual, prox=prox, fast=False)
        assert state_digest(*saved) == state_digest(*model.to_state())
        assert stats_flat == stats_model
        assert saved[0] == model.to_state()[0]


def test_the_flat_merge_does_not_keep_its_shape_model_alive():
    """The flat layout a merge made for a model lives as long as that model and no longer: a
    group's members and readers merge on many models over a run (each round's base), and none
    may stay in memory because a layout was once made for it."""
    cfg = dict(kernels=BANK, loss=losses.Logistic(), fit_intercept=True, **CONFIGS["ftrl"])
    X, Y = _stream(300, 3)
    base = merge(*_grown(cfg, X, Y).to_state(), [], fast=False)
    shape = OnlineMKL.from_state(*base.to_state())
    rounds = _rounds(base, [(X[100:150], Y[100:150])])
    assert mixing.merge_saved(*base.to_state(), rounds, shape) is not None  # (the flat path)
    alive = weakref.ref(shape)
    del shape
    gc.collect()
    assert alive() is None


def test_per_block_schedules_are_refused_clearly_and_the_member_is_unchanged():
    """FTRL over a bank with kernelized blocks (FTRL on the explicit blocks, AdaGrad on the
    kernelized ones) is not merged: the group says so before it merges anything."""
    cfg = dict(kernels=(kernels.Linear(), kernels.RBF(0.5)), schedule=schedules.FTRL(0.5),
               regularizer=regularizers.GroupLasso(0.01), budget=20)  # fmt: skip
    base = OnlineMKL(**cfg)
    X, Y = _stream(30, seed=1)
    base.learn_many(X[:10], Y[:10])
    rounds = _rounds(base, [(X[10:20], Y[10:20]), (X[20:], Y[20:])])
    digest = base.digest()
    with pytest.raises(ValueError, match=r"per-block schedules .* not merged"):
        merge(*base.to_state(), rounds)
    with pytest.raises(ValueError, match="per-block schedules"):
        mixing.check_mixable(base)
    assert base.digest() == digest


def _settled(cfg, X, Y):
    """A group's merged base, a member's published delta from it and that member's state
    after ``n`` more examples: all three on one layout (the same inputs, no room)."""
    start = OnlineMKL(**cfg)
    start.learn_many(X[:40], Y[:40])
    base = merge(*start.to_state(), _rounds(start, [(X[40:70], Y[40:70]), (X[70:90], Y[70:90])]))
    member = OnlineMKL.from_state(*base.to_state())
    member.learn_many(X[90:120], Y[90:120])
    published = member.to_state()
    merged = merge(*base.to_state(), [MemberRound("m0", 30, *published),
                                      *_rounds(base, [(X[120:160], Y[120:160])])])  # fmt: skip
    return member, published, merged


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("since", [0, 25])
def test_the_in_place_rebase_is_the_merged_rebase_bit_for_bit(name, since):
    """``rebase_onto`` moves a member's progress since its publish onto the merged model on
    its own arrays: the same digest as today's rebase (``merge(..., prox=False)`` of the one
    member, saved and loaded), and it learns on alike; nothing learned since included."""
    cfg = dict(kernels=BANK, loss=losses.Logistic(), fit_intercept=True, **CONFIGS[name])
    X, Y = _stream(400, 7)
    member, published, merged = _settled(cfg, X, Y)
    member.learn_many(X[160 : 160 + since], Y[160 : 160 + since])
    assert member.layout.capacity == len(member.feature_keys)
    loaded = OnlineMKL.from_state(*merged.to_state())
    rebase = MemberRound("", since, *member.to_state(), since=published)
    today = merge(*loaded.to_state(), [rebase], prox=False)
    today = OnlineMKL.from_state(*today.to_state())
    assert mixing.rebase_onto(member, loaded.to_state(), published, since)
    assert member.digest() == today.digest()
    Xn, Yn = _stream(40, 13)
    member.learn_many(Xn, Yn)
    today.learn_many(Xn, Yn)
    assert member.digest() == today.digest()


def test_the_in_place_rebase_leaves_other_layouts_to_the_general_path():
    """New inputs since the publish, a layout with room, a kernelized block (support sets), a
    bandwidth the group has not settled: ``rebase_onto`` says no and changes nothing."""
    cfg = dict(kernels=BANK, loss=losses.Logistic(), fit_intercept=True, **CONFIGS["adagrad"])
    X, Y = _stream(400, 8, d=4)
    member, published, merged = _settled(cfg, X[:, :3], Y)
    grown = OnlineMKL.from_state(*member.to_state())
    grown.declare_features(["x"])  # a new input: other columns, room
    grown.learn_many(X[160:170], Y[160:170])
    kernelized = dict(cfg, kernels=(kernels.Linear(), kernels.RBF(0.5)), budget=30)
    pending = dict(cfg, kernels=(kernels.Linear(), kernels.MedianRBF(1.0, n_components=8)))
    cases = [(grown, published, merged.to_state())]
    m, p, g = _settled(kernelized, X[:, :3], Y)
    cases.append((m, p, g.to_state()))
    waiting = OnlineMKL(**pending)
    waiting.learn_many(X[:10, :3], Y[:10])
    assert waiting.warmup_rows.shape[0] > 0  # (its bandwidth still waits for inputs)
    start = waiting.to_state()
    waiting.learn_many(X[10:20, :3], Y[10:20])
    cases.append((waiting, start, start))
    for model, since, base in cases:
        digest = model.digest()
        assert not mixing.rebase_onto(model, base, since, 10)
        assert model.digest() == digest
    # and a state of another model's layout is not taken in place either
    digest = grown.digest()
    assert not grown.take_state(*merged.to_state())
    assert grown.digest() == digest


@pytest.mark.parametrize("name", list(CONFIGS))
def test_a_model_takes_a_state_of_its_layout_in_place_as_from_state_builds_it(name):
    """``take_state``: the state loaded on the model's own layout, bit for bit what
    ``from_state`` builds (and it learns on alike)."""
    cfg = dict(kernels=BANK, loss=losses.Logistic(), fit_intercept=True, **CONFIGS[name])
    X, Y = _stream(400, 9)
    member, _, merged = _settled(cfg, X, Y)
    loaded = OnlineMKL.from_state(*merged.to_state())
    saved = merged.to_state()
    before = state_digest(*saved)
    assert member.take_state(*saved)
    assert member.digest() == loaded.digest() == merged.digest()
    member.learn_many(X[200:260], Y[200:260])
    loaded.learn_many(X[200:260], Y[200:260])
    assert member.digest() == loaded.digest()
    # the saved arrays are read where they are, never learned on (a group's base is taken
    # by every member and merged onto again)
    assert state_digest(*saved) == before
    assert all(not np.shares_memory(a, getattr(member.state, n)) for n, a in saved[1].items())


@pytest.mark.parametrize("name", list(CONFIGS))
def test_a_state_taken_in_place_keeps_the_round_arguments_and_their_numbers(name):
    """``take_state`` on the model's own layout copies the state into the arrays its round
    arguments are bound to (``RoundArgs.refill``: the same pack, no new compiled calls), and
    the model then predicts and learns what ``from_state`` builds, bit for bit: right after
    the take on the input it predicted last (the pack's cached features and prediction start
    afresh) and over the rounds after."""
    cfg = dict(kernels=BANK, loss=losses.Logistic(), fit_intercept=True, **CONFIGS[name])
    X, Y = _stream(400, 11)
    member, _, merged = _settled(cfg, X, Y)
    member.decision(X[200])
    args, w = member._args, member.state.w
    loaded = OnlineMKL.from_state(*merged.to_state())
    assert member.take_state(*merged.to_state())
    assert member._args is args and member.state.w is w  # (refilled, not rebuilt)
    assert member.decision(X[200]) == loaded.decision(X[200])
    assert np.array_equal(member.last_scores, loaded.last_scores)
    for x, y in zip(X[200:260], Y[200:260], strict=True):
        assert np.array_equal(member.learn_predict(x, y), loaded.learn_predict(x, y))
    assert member.digest() == loaded.digest()


def test_the_river_learner_takes_a_state_in_place_with_its_compiled_records_bound():
    """A river learner (two classes: mirrored score rows, standardised inputs) taking a state
    of its layout keeps its round arguments and input statistics' arrays (the compiled
    record calls stay bound) and predicts and learns as the learner loaded from that state."""
    from streammkl.river import MKLClassifier

    X, Y = _stream(600, 12, d=4)
    rows = [({f"x{j}": float(v) for j, v in enumerate(x)}, bool(y > 0)) for x, y in zip(X, Y)]
    member = MKLClassifier()
    for x, y in rows[:200]:
        member.learn_one(x, y)
    other = MKLClassifier.from_state(*member.to_state())
    for x, y in rows[200:350]:
        other.learn_one(x, y)
    rounds = member.rounds()
    assert rounds.take_state(*other.to_state())  # (the first: a loaded state's support room)
    for x, y in rows[350:400]:
        other.learn_one(x, y)
        member.learn_one(x, y)
    member.predict_proba_one(rows[350][0])
    args, count = rounds.model._args, rounds.scaler.count
    loaded = MKLClassifier.from_state(*other.to_state())
    assert rounds.take_state(*other.to_state())
    assert rounds.model._args is args and rounds.scaler.count is count
    for x, y in rows[350:500]:  # (the first, the input it predicted last)
        assert member.predict_proba_one(x) == loaded.predict_proba_one(x)
        member.learn_one(x, y)
        loaded.learn_one(x, y)
    assert member.rounds().digest() == loaded.rounds().digest()


def test_a_saved_state_holds_c_ordered_copies():
    """``to_state`` gives C-ordered arrays that are the model's no more (the compiled rounds
    take C-ordered arrays only; a group member publishes them and learns on)."""
    X, Y = _stream(100, 14)
    model = OnlineMKL(kernels=BANK, **CONFIGS["invsqrt"])
    model.learn_many(X, Y)
    _, arrays = model.to_state()
    assert all(a.flags.c_contiguous and a.flags.owndata for a in arrays.values())
    before = {k: a.copy() for k, a in arrays.items()}
    model.learn_many(X[:10], Y[:10])
    assert all(np.array_equal(arrays[k], before[k]) for k in arrays)
