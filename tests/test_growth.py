"""Inputs that keep arriving: the layout grows in place within its capacity and doubles beyond
it (a new input writes only its own columns), with the same numbers as a model laid out on
every input at once; sparse records featurise their non-zeros only; the cost estimate."""

from __future__ import annotations

import numpy as np
import pytest

from streammkl.core import OnlineMKL, kernels, losses, regularizers, schedules
from streammkl.core import _numba as nb
from streammkl.core import layout as layout_mod
from streammkl.core.layout import build_layout, forget_built_layouts, grown

D_IN = 12


def _bank():
    return (
        kernels.Linear(),
        kernels.AdditiveRBF(1.0, 8),
        kernels.RBF(0.3, n_components=32),
        kernels.Polynomial(degree=2, explicit=True, max_inputs=5),
    )


def _model():
    return OnlineMKL(
        kernels=_bank(),
        loss=losses.Softmax(),
        regularizer=regularizers.GroupLasso(1e-3),
        schedule=schedules.FTRL(1.0),
        seed=3,
        fit_intercept=True,
        averages=(10, 100),
    )


def _stream(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, D_IN)) * (rng.random(size=(n, D_IN)) < 0.3)  # mostly zeros
    Y = (X[:, 0] + X[:, 3] * X[:, 4] - np.abs(X[:, 7]) > 0).astype(int)
    return X, Y


def test_inputs_one_at_a_time_give_the_numbers_of_all_at_once():
    keys = [f"f{j}" for j in range(D_IN)]
    at_once, one_by_one = _model(), _model()
    at_once.declare_features(keys)
    capacities = []
    for k in keys:
        one_by_one.declare_features([k])
        capacities.append(one_by_one.layout.capacity)
    assert capacities == [1, 2, 4, 4, 8, 8, 8, 8, 16, 16, 16, 16]  # doubled, else in place
    assert at_once.layout.capacity == D_IN
    X, Y = _stream()
    for x, y in zip(X, Y, strict=True):
        a = at_once.learn_predict(x, int(y))
        b = one_by_one.learn_predict(x, int(y))
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(at_once.block_norms, one_by_one.block_norms, rtol=1e-9)
    _, arrays_a = at_once.to_state()
    meta_b, arrays_b = one_by_one.to_state()
    assert arrays_a.keys() == arrays_b.keys()
    for name in arrays_a:  # the saved state does not depend on the room kept for inputs
        np.testing.assert_allclose(arrays_a[name], arrays_b[name], rtol=1e-9, atol=1e-12)
    back = OnlineMKL.from_state(meta_b, arrays_b)
    np.testing.assert_allclose(back.decision(X[0]), one_by_one.decision(X[0]), rtol=1e-12)


def test_growth_within_capacity_keeps_the_arrays_and_their_columns():
    bank = _bank()
    keys = [f"f{j}" for j in range(6)]
    layout = build_layout(bank, 3, seed=1, keys=keys, capacity=8)
    src, rff, used_before = layout.phi_src.copy(), layout.rff_wt.copy(), layout.ex_used.copy()
    same = grown(layout, bank, keys, seed=1)
    assert same is layout and layout.n_inputs == 6 and layout.capacity == 8
    changed = np.flatnonzero(np.any(layout.phi_src != src, axis=0))
    ref = build_layout(bank, 6, seed=1, keys=keys)  # laid out at once, no room to spare
    fresh = np.zeros(layout.width, dtype=bool)  # the columns of the new inputs, block by block
    for m in range(len(bank)):
        a = layout.ex_off[m]
        used = int(layout.ex_used[m])
        assert used == int(ref.ex_used[m])
        ra = ref.ex_off[m]
        np.testing.assert_array_equal(
            layout.phi_src[:3, a : a + used], ref.phi_src[:3, ra : ra + used]
        )
        fresh[a + int(used_before[m]) : a + used] = True
    assert changed.size and np.all(fresh[changed])  # nothing else was written
    assert np.all(rff[:3] == layout.rff_wt[:3]) and np.any(layout.rff_wt[3:6] != 0)
    np.testing.assert_array_equal(layout.rff_wt[:6], ref.rff_wt)
    bigger = grown(layout, bank, [*keys, "g0", "g1", "g2"], seed=1)
    assert bigger is not layout and bigger.capacity == 16 and bigger.n_inputs == 9


@pytest.mark.parametrize("density", [0.05, 0.9])
def test_the_additive_map_is_anchored_at_zero_sparse_or_dense(density):
    rng = np.random.default_rng(4)
    bank = (kernels.AdditiveRBF(0.7, 6),)
    d = 40
    layout = build_layout(bank, d, seed=2, keys=[f"k{j}" for j in range(d)])
    x = rng.normal(size=d) * (rng.random(size=d) < density)
    phi = np.zeros(layout.width)
    nb.explicit_phi(x, layout.ex_blocks, layout.ex_off, layout.ex_kind, layout.ex_norm,
                    layout.phi_src, layout.rff_wt, layout.rff_b, phi)  # fmt: skip
    i = layout.phi_src[0].astype(np.int64)
    b, w = layout.phi_src[1], layout.phi_src[2]
    c = np.sqrt(2.0 / layout.width)
    want = np.where(x[i] != 0.0, c * (np.cos(b + w * x[i]) - np.cos(b)), 0.0)
    np.testing.assert_allclose(phi, want, rtol=1e-12, atol=1e-14)
    if density < 0.25:  # exactly 0 on a sparse record: its map is sparse
        assert np.all(phi[x[i] == 0.0] == 0.0) and np.count_nonzero(phi) <= 6 * np.count_nonzero(x)


def test_cost_estimate_counts_the_new_inputs_columns():
    m = _model()
    assert m.cost(5) == (0, 0)
    m.declare_features([f"f{j}" for j in range(4)])
    round_entries, growth = m.cost(0)
    K, E = m.n_outputs, 2
    assert growth == 0
    assert round_entries == m.layout.width * (1 + 2 * K * (1 + E))
    _, one = m.cost(1)  # within nothing: the capacity is full, so the doubling's copy counts
    m.declare_features(["f4"])
    assert m.layout.capacity == 8
    _, next_one = m.cost(1)  # in place: its own columns only (the quadratic map is full)
    assert next_one == (1 + 8 + 32) * K * (1 + E)  # linear, additive, its Fourier row
    assert one > next_one
    _, three = m.cost(3)
    assert three == 3 * next_one
    fresh = _model()
    fresh.declare_features(["a"])
    fresh.declare_features(["b"])  # capacity 2, full
    _, third = fresh.cost(1)
    fresh.declare_features(["c"])  # capacity 4
    _, fourth = fresh.cost(1)  # the 4th input's group in the quadratic map: 1 + 3 + 1 columns
    assert fourth == (1 + 8 + 32 + 5) * K * (1 + E) and third > fourth


def _selecting_model():
    return OnlineMKL(
        kernels=(
            kernels.Linear(features=["c", "a"]),
            kernels.AdditiveRBF(1.0, 4, features=["c", "b", "a"]),
            kernels.Polynomial(degree=2, explicit=True, features=["c", "a", "b"]),
        ),
        loss=losses.Logistic(),
        schedule=schedules.FTRL(1.0),
        seed=5,
    )


def test_grown_selections_save_and_load_in_place_and_a_version_4_state_keeps_its_predictions():
    """Inputs that arrive one by one in another order than kernels list them: the state saved
    from the grown layout loads onto the same columns; a version-4 state (its additive map
    not anchored at 0) loads predicting what it did."""
    rng = np.random.default_rng(6)
    model = _selecting_model()
    for k in ("a", "b", "c"):
        model.declare_features([k])
    X = rng.normal(size=(80, 3))
    for x in X:
        model.learn(x, 1.0 if x[0] - x[2] > 0 else -1.0)
    meta, arrays = model.to_state()
    back = OnlineMKL.from_state(meta, arrays)
    probe = rng.normal(size=(10, 3))
    want = [model.decision(p) for p in probe]
    np.testing.assert_allclose([back.decision(p) for p in probe], want, rtol=1e-12)
    # a version-4 state: the same columns, its additive map not anchored
    old = dict(arrays)
    v4 = OnlineMKL.from_state({**meta, "version": 4}, old)
    np.testing.assert_array_equal(v4.state.w, back.state.w)  # on the same columns
    # v4's additive map was not anchored: c cos(w x + b), not minus c cos(b); the loaded model
    # predicts what that map gave, its constant moved into the bias
    L = back.layout
    m = 1
    a, used = int(L.ex_off[m]), int(L.ex_used[m])
    const = back.state.scale[m] * (
        back.state.w[0, a : a + used] @ (np.sqrt(2.0 / used) * np.cos(L.phi_src[1, a : a + used]))
    )
    assert abs(const) > 1e-6
    np.testing.assert_allclose([v4.decision(p) for p in probe], np.array(want) + const, rtol=1e-9)


def test_the_seam_prices_a_record_by_its_new_inputs():
    from streammkl.river import MKLClassifier

    learner = MKLClassifier()
    seam = learner.rounds()
    assert seam.cost({"a": 1.0}) == (0, 0)  # before the first round
    learner.learn_one({"a": 1.0, "b": 2.0}, True)
    round_entries, growth = seam.cost({"a": 3.0})
    assert round_entries == seam.model.cost(0)[0] > 0 and growth == 0  # known inputs only
    _, one = seam.cost({"a": 1.0, "c": 1.0})
    _, two = seam.cost({"c": 1.0, "d": 1.0})
    assert 0 < one < two
    assert seam.cost({"a": 1.0, "c": 1.0}) == (round_entries, one)  # it changed nothing


def test_a_layout_built_again_is_a_fresh_copy_whatever_its_earlier_copies_went_through():
    """build_layout keeps the layouts it built lately (a group member loads the same one every
    round) and hands out copies: growing one in place changes none built after it."""
    bank = (kernels.Linear(), kernels.AdditiveRBF(1.0, 8), kernels.RBF(0.3, n_components=32))
    first = build_layout(bank, 2, 7, keys=["a", "b"], capacity=4)
    again = build_layout(bank, 2, 7, keys=["a", "b"], capacity=4)
    assert again is not first
    assert grown(first, bank, ["a", "b", "c"], 7) is first  # in place: within the capacity
    assert first.n_inputs == 3
    later = build_layout(bank, 2, 7, keys=["a", "b"], capacity=4)
    assert later.n_inputs == 2
    for name in ("phi_src", "rff_wt", "rff_b", "in_pos", "ex_used", "masks"):
        np.testing.assert_array_equal(getattr(later, name), getattr(again, name))
    assert not np.array_equal(first.ex_used, later.ex_used)
    other = build_layout(bank, 2, 8, keys=["a", "b"], capacity=4)  # another seed: other draws
    assert not np.array_equal(other.rff_wt, later.rff_wt)


def test_forgotten_layouts_are_built_again_not_copied(monkeypatch):
    """forget_built_layouts: the next build_layout of the same bank and inputs makes its
    layout (what a learner pays on a stream the process has not met), with the same numbers."""
    bank = (kernels.Linear(), kernels.RBF(0.3, n_components=16))
    made = []
    empty = layout_mod._empty

    def counted(*args, **kw):
        made.append(1)
        return empty(*args, **kw)

    monkeypatch.setattr(layout_mod, "_empty", counted)
    first = build_layout(bank, 2, 11, keys=["a", "b"], capacity=4)
    build_layout(bank, 2, 11, keys=["a", "b"], capacity=4)
    assert len(made) == 1  # the second a copy of the first
    forget_built_layouts()
    again = build_layout(bank, 2, 11, keys=["a", "b"], capacity=4)
    assert len(made) == 2  # made anew
    np.testing.assert_array_equal(again.rff_wt, first.rff_wt)


def _every_place_kind(keys):
    """A bank with a block of every kind a new input is laid out in (fitted where the kernel
    needs it; landmarks over some of ``keys``)."""
    rows = np.random.default_rng(1).normal(size=(6, 5))
    landmark = kernels.LandmarkRBF(4.0, 6).fitted(0.3, 5, final=True)
    return (
        kernels.Linear(),
        kernels.AdditiveRBF(0.5, 6),  # random draws
        kernels.AdditiveRBF(0.7, 8, draws="quadrature"),
        kernels.AdditiveRBF(0.7, 7, draws="quadrature"),  # odd: block by block
        kernels.AdditiveStumps(5),
        kernels.RBF(0.3, n_components=16),
        kernels.MedianRBF(2.0, 12).fitted(0.4, 5, final=True),
        landmark.with_landmarks(rows, [keys[3], keys[40], "never", keys[0], keys[77]]),
        kernels.LandmarkRBF(4.0, 3).fitted(0.2, 5, final=False),  # no landmarks yet: 0
        kernels.Polynomial(degree=2, explicit=True, max_inputs=9),
        kernels.RBF(0.2),  # implicit: a mask
        kernels.Linear(features=[keys[2], keys[50], keys[120]]),  # a subset: block by block
        kernels.RandomBinning(4, 4.0, 5).fitted(0.3, 5, final=True),  # grids: block by block
    )


def test_new_inputs_laid_out_in_one_compiled_call_are_the_block_by_block_layout(monkeypatch):
    """``Layout.extend`` lays out a record's new inputs in every block in one compiled call
    (``place_inputs``: the draws made where they go, the draw keys hashed there): bit for bit
    the layout written block by block from the kernels' own draws (``Layout._place``), in
    chunks of any size, across doublings, for names of any characters."""
    import streammkl.core.layout as layout_mod

    keys = [f"w{j}" for j in range(150)] + ["é", "", "a\x1fb", "日本", "0"]
    bank = _every_place_kind(keys)

    def grow(rng):
        layout = build_layout(bank, 0, 11, keys=[], capacity=1)
        d = 0
        while d < len(keys):
            d = min(d + int(rng.integers(1, 12)), len(keys))
            layout = grown(layout, bank, keys[:d], 11)
        return layout

    compiled = grow(np.random.default_rng(5))
    monkeypatch.setattr(layout_mod, "_placer", lambda *args: None)  # block by block
    reference = grow(np.random.default_rng(5))
    assert compiled.capacity == reference.capacity > 128  # (doubled on the way)
    for name in ("phi_src", "rff_wt", "rff_b", "in_pos", "blk_inputs", "ex_used", "masks"):
        np.testing.assert_array_equal(getattr(compiled, name), getattr(reference, name))
    landmarks = compiled.rff_wt[:, int(compiled.phi_src[0, compiled.ex_off[7]]) :][:, :6]
    assert np.count_nonzero(np.any(landmarks != 0.0, axis=1)) == 4  # its four inputs' rows


def test_the_quadrature_frequencies_are_every_inputs_own():
    """``AdditiveRBF.quadrature_frequencies`` (what the compiled layout writes for every new
    input) is each input's frequencies as ``components`` draws them, bit for bit."""
    kernel = kernels.AdditiveRBF(0.7, 8, draws="quadrature")
    freqs, _ = kernel.components(["a", "é", "w42"], 3)
    np.testing.assert_array_equal(freqs, np.tile(kernel.quadrature_frequencies(), 3))
    with pytest.raises(ValueError, match="even quadrature"):
        kernels.AdditiveRBF(0.7, 7, draws="quadrature").quadrature_frequencies()


class _NewExplicitKind(kernels.Kernel):
    """An explicit kernel kind the compiled placer does not know (as a new feature map would
    be before it gets a place kind): its columns are the linear map's, as ``Layout._place``
    lays out any kind it has no branch for."""

    kind = nb.K_LINEAR

    @property
    def implicit(self) -> bool:
        return False

    def _default_name(self) -> str:
        return "new-kind"

    def code_params(self) -> tuple[float, float, bool]:
        return 0.0, 0.0, False


def test_an_explicit_kind_the_placer_does_not_know_is_laid_out_by_its_own_branch(monkeypatch):
    """A new explicit kind is never laid out as a linear block by the compiled placer: it
    goes block by block (``Layout._place``), whatever that does for it."""
    import streammkl.core.layout as layout_mod

    placed = []
    place = layout_mod.Layout._place

    def spy(self, m, kernel, new, keys, seed):
        placed.append((m, new.size))
        return place(self, m, kernel, new, keys, seed)

    monkeypatch.setattr(layout_mod.Layout, "_place", spy)
    bank = (kernels.Linear(), _NewExplicitKind(), kernels.RBF(0.3, n_components=8))
    layout = build_layout(bank, 0, 3, keys=[], capacity=1)
    for d in (2, 5, 9):
        layout = grown(layout, bank, [f"k{j}" for j in range(d)], 3)
    assert placed == [(1, 2), (1, 3), (1, 4)]  # block 1 alone, each record's new inputs
    a = int(layout.ex_off[1])
    np.testing.assert_array_equal(layout.phi_src[0, a : a + 9], np.arange(9.0))


class _OwnDraws(kernels.RBF):
    """A Gaussian block that draws its own rows (as ``RandomBinning`` does, or a user's
    subclass): every frequency 0.25."""

    def fourier_columns(self, keys, seed, draws=kernels.RBF.fourier_columns.__defaults__[0]):
        return np.full((self.n_components or 0, len(keys)), 0.25)


def test_a_subclass_that_draws_its_own_rows_is_not_laid_out_as_its_parent():
    """The compiled placer writes the draws of the kinds it knows, by exact type: a subclass
    of one (its ``fourier_columns`` overridden) goes block by block, its rows its own (the
    crash-loop test's poison kernel dies there; a RandomBinning block's rows are grids)."""
    bank = (kernels.Linear(), _OwnDraws(0.3, n_components=4), kernels.RBF(0.3, n_components=4))
    layout = build_layout(bank, 0, 3, keys=[], capacity=1)
    for d in (2, 5):
        layout = grown(layout, bank, [f"k{j}" for j in range(d)], 3)
    own = int(layout.phi_src[0, layout.ex_off[1]])
    np.testing.assert_array_equal(layout.rff_wt[:5, own : own + 4], 0.25)
    plain = int(layout.phi_src[0, layout.ex_off[2]])
    assert not np.any(layout.rff_wt[:5, plain : plain + 4] == 0.25)


def test_a_doubling_of_a_layout_no_one_else_holds_keeps_its_frequencies_array(monkeypatch):
    """``grown(owned=True)``: a doubling keeps the old Fourier frequencies' array when it has
    rows for the new capacity (``RFF_ROOM``: a doubling allocates rows for twice its capacity,
    from ``ROOM_BYTES`` on),
    with the numbers of copying; a save point holds the layout, so the next doubling copies and
    the point restores bit for bit; a pickle or deep copy drops the rows past the capacity."""
    import copy
    import pickle

    from streammkl.core import layout as layout_mod

    keys = [f"w{j}" for j in range(40)]
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 40)) * (rng.random(size=(200, 40)) < 0.2)
    Y = (X[:, 0] - X[:, 5] + X[:, 30] > 0).astype(int)

    monkeypatch.setattr(layout_mod, "ROOM_BYTES", 0)  # room at any size (32 MB by default)

    def run(room):
        monkeypatch.setattr(layout_mod, "RFF_ROOM", room)
        model, kept = _model(), 0
        for j, k in enumerate(keys):
            before = model.layout
            model.declare_features([k])
            after = model.layout
            if before is not None and after is not before:  # a doubling
                kept += after.rff_wt is before.rff_wt
            assert after.rff_wt.shape[0] >= after.capacity
            assert not after.rff_wt[j + 1 :].any()  # the rows past the inputs stay zeros
            for x, y in zip(X[5 * j : 5 * j + 5], Y[5 * j : 5 * j + 5], strict=True):
                model.learn_predict(x[: j + 1], int(y))
        return model, kept

    copying, kept_none = run(1)  # rows for the capacity only: every doubling copies
    keeping, kept = run(2)
    assert kept_none == 0 and kept >= 2  # (capacities 1, 2, 4, ..., 64: every other one kept)
    assert copying.layout.rff_wt.shape[0] == copying.layout.capacity
    np.testing.assert_array_equal(keeping.layout.rff_wt[:40], copying.layout.rff_wt[:40])
    for x in X[:20]:
        np.testing.assert_array_equal(keeping.decision(x), copying.decision(x))
    a, b = keeping.to_state()[1], copying.to_state()[1]
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)

    for twin in (copy.deepcopy(keeping), pickle.loads(pickle.dumps(keeping))):
        assert twin.layout.rff_wt.shape[0] == twin.layout.capacity
        np.testing.assert_array_equal(twin.decision(X[0]), keeping.decision(X[0]))

    # a save point holds the layout: the next doubling copies, the point is left as it was
    model = _model()
    model.declare_features(keys[:3])  # capacity 3, rows 3
    model.declare_features(keys[3:4])  # doubled (owned): capacity 6, rows 12
    point = model.save_point()
    held = model.layout
    rows_before = held.rff_wt.copy()
    model.declare_features(keys[4:7])  # capacity 12: the point's layout is not the caller's
    assert model.layout.rff_wt is not held.rff_wt
    np.testing.assert_array_equal(held.rff_wt, rows_before)
    model.restore_point(point)
    assert model.layout is held and len(model.feature_keys) == 4


def test_the_placer_of_the_last_bank_is_the_one_built_for_it():
    """``_placer`` answers a bank asked for again (the model's growth, record after record)
    from the last one it answered, without the cache's key and lock: the same placer while
    the kernels (by identity) and the seed are the same, another for another bank or seed,
    and each equal to one built afresh."""
    import streammkl.core.layout as layout_mod

    bank = (kernels.Linear(), kernels.RBF(0.5, 8))
    other = (kernels.Linear(), kernels.RBF(0.5, 8))  # equal kernels, other objects
    placer = layout_mod._placer(bank, 3, layout_mod.DRAWS)
    assert layout_mod._placer(bank, 3, layout_mod.DRAWS) is placer
    assert layout_mod._placer(list(bank), 3, layout_mod.DRAWS) is placer
    assert layout_mod._placer(bank, 4, layout_mod.DRAWS) is not placer
    assert layout_mod._placer(other, 3, layout_mod.DRAWS).kernels == other
    assert layout_mod._placer(bank, 3, layout_mod.DRAWS) is placer  # (the cache's, still)
    layout_mod._PLACERS.clear()
    layout_mod._LAST_PLACER = None
    fresh = layout_mod._placer(bank, 3, layout_mod.DRAWS)
    assert fresh is not placer
    for name in ("kinds", "comps", "scales", "crc0", "sbytes", "soff", "vals", "voff"):
        np.testing.assert_array_equal(getattr(fresh, name), getattr(placer, name))
    assert (fresh.start, fresh.python, fresh.quadratic) == (
        placer.start,
        placer.python,
        placer.quadratic,
    )


def _same_layout(a, b):
    """Every field of two layouts equal (arrays: dtype, shape and bytes)."""
    assert vars(a).keys() == vars(b).keys()
    for name, value in vars(a).items():
        other = getattr(b, name)
        if isinstance(value, np.ndarray):
            assert value.dtype == other.dtype and value.shape == other.shape, name
            assert value.tobytes() == other.tobytes(), name
        else:
            assert value == other, name


def _partly_changed_banks(keys):
    """A bank of every place kind and the same bank partly changed: a refitted bandwidth,
    landmarks now, and a kernel equal to the old one but another object (drawn again)."""
    old = _every_place_kind(keys)
    rows = np.random.default_rng(2).normal(size=(6, 5))
    new = list(old)
    new[6] = kernels.MedianRBF(2.0, 12).fitted(0.9, 5, final=True)  # another bandwidth
    new[8] = (
        kernels.LandmarkRBF(4.0, 3)
        .fitted(0.2, 5, final=True)
        .with_landmarks(rows[:3], [keys[1], keys[7], keys[9], "x", keys[2]])
    )  # landmarks now
    new[1] = kernels.AdditiveRBF(0.5, 6)  # equal to the old kernel, another object: drawn
    return old, tuple(new)


@pytest.mark.parametrize("numpy_draws", [False, True])
def test_a_layout_relaid_for_a_new_bank_is_the_layout_built_for_it(numpy_draws):
    """``relaid``: the layout of a bank whose kernels partly changed (refitted bandwidths, new
    landmarks, a block of another kind at the same width), drawn only where a kernel changed,
    is ``build_layout``'s for the new bank bit for bit, with inputs named since laid out too;
    a kept block's columns are the old layout's; the old layout is untouched; banks whose
    blocks do not line up, or inputs beyond the capacity, get None."""
    from streammkl.core.kernel_base import DRAWS, NUMPY_DRAWS
    from streammkl.core.layout import relaid

    draws = NUMPY_DRAWS if numpy_draws else DRAWS
    keys = [f"w{j}" for j in range(150)]
    old, new = _partly_changed_banks(keys)
    layout = build_layout(old, 120, 11, keys=keys, capacity=160, draws=draws)
    before = build_layout(old, 120, 11, keys=keys, capacity=160, draws=draws)
    for bank in (new, old, tuple(reversed(new))):
        for d in (120, 131, 160):
            out = relaid(layout, old, bank, keys[:d], 11)
            if bank[0] is new[-1]:  # (reversed: the blocks do not line up)
                assert out is None
                continue
            _same_layout(out, build_layout(bank, d, 11, keys=keys, capacity=160, draws=draws))
    _same_layout(layout, before)
    assert relaid(layout, old, new, keys + ["more"] * 20, 11) is None  # beyond the capacity
    wider = (*old[:5], kernels.RBF(0.3, n_components=8), *old[6:])
    assert relaid(layout, old, wider, keys[:120], 11) is None


@pytest.mark.parametrize("numpy_draws", [False, True])
def test_a_relaid_layout_that_owns_the_old_one_takes_its_frequencies_with_the_numbers_of_a_build(
    numpy_draws,
):
    """``relaid(owned=True)`` (the caller drops the old layout): the result takes the old
    layout's Fourier frequencies, the same array, its changed blocks' columns drawn again in
    place (a refitted bandwidth, landmarks now, the same kernel as another object), and is
    ``build_layout``'s for the new bank bit for bit, with inputs named since laid out too;
    banks whose blocks do not line up get None and leave the old layout as it was."""
    from streammkl.core.kernel_base import DRAWS, NUMPY_DRAWS
    from streammkl.core.layout import relaid

    draws = NUMPY_DRAWS if numpy_draws else DRAWS
    keys = [f"w{j}" for j in range(150)]
    old, new = _partly_changed_banks(keys)
    for d in (120, 131, 160):
        layout = build_layout(old, 120, 11, keys=keys, capacity=160, draws=draws)
        frequencies, columns = layout.rff_wt, layout.phi_src
        out = relaid(layout, old, new, keys[:d], 11, owned=True)
        assert out is not None and out.rff_wt is frequencies and out.phi_src is columns
        _same_layout(out, build_layout(new, d, 11, keys=keys, capacity=160, draws=draws))
    layout = build_layout(old, 120, 11, keys=keys, capacity=160, draws=draws)
    before = build_layout(old, 120, 11, keys=keys, capacity=160, draws=draws)
    assert relaid(layout, old, tuple(reversed(new)), keys[:120], 11, owned=True) is None
    _same_layout(layout, before)


def test_a_relaid_layout_in_place_clears_the_rows_a_changed_block_no_longer_reads():
    """In place (``owned``), a changed block that reads other inputs than before (a Fourier
    block over another subset, the same width) has zeros at the rows of the inputs it no
    longer reads, as a build gives."""
    from streammkl.core.layout import relaid

    keys = [f"w{j}" for j in range(12)]
    old = (kernels.Linear(), kernels.RBF(0.3, n_components=8, features=[keys[1], keys[5]]))
    new = (old[0], kernels.RBF(0.3, n_components=8, features=[keys[5], keys[9]]))
    layout = build_layout(old, 12, 11, keys=keys, capacity=16)
    out = relaid(layout, old, new, keys, 11, owned=True)
    assert out is not None
    _same_layout(out, build_layout(new, 12, 11, keys=keys, capacity=16))


def test_a_relaid_layout_draws_only_the_changed_blocks(monkeypatch):
    """The blocks ``relaid`` lays out: the changed kernels' only (``place_inputs`` gets no
    place kind for a kept block), then every block for inputs named since."""
    import streammkl.core.layout as layout_mod

    keys = [f"w{j}" for j in range(150)]
    old = _every_place_kind(keys)
    new = (*old[:5], kernels.RBF(0.7, n_components=16), *old[6:])
    layout = build_layout(old, 30, 11, keys=keys, capacity=64)
    calls = []
    real = layout_mod._place_inputs
    monkeypatch.setattr(
        layout_mod, "_place_inputs", lambda *a: calls.append((a[0].copy(), a[4].copy())) or real(*a)
    )
    layout_mod.relaid(layout, old, new, keys[:35], 11)
    (first, kinds), (since, every) = calls
    np.testing.assert_array_equal(first, np.arange(30))
    assert np.flatnonzero(kinds != nb.PLACE_NONE).tolist() == [5]
    np.testing.assert_array_equal(since, np.arange(30, 35))
    assert np.count_nonzero(every != nb.PLACE_NONE) > 5


def test_the_bandwidth_warm_up_relays_its_bank_with_the_numbers_of_a_build(monkeypatch):
    """The warm-up's bank change goes through ``relaid`` (``build_layout``'s ``like``: the
    model's layout and bank) and learns the numbers a model whose every rebuild is drawn
    afresh learns, bit for bit."""
    import streammkl.core.layout as layout_mod

    def run():
        model = OnlineMKL(
            kernels=(
                kernels.Linear(),
                kernels.AdditiveRBF(1.0, 8),
                kernels.MedianRBF(1.0, 32),
                kernels.MedianRBF(8.0, 32),
                kernels.Polynomial(degree=2, explicit=True, max_inputs=5),
            ),
            loss=losses.Softmax(),
            seed=3,
        )
        X, Y = _stream(120)
        out = [model.learn(x, y) for x, y in zip(X, Y, strict=True)]
        assert model.warmup_left == 0  # (the bandwidths are fitted)
        return out, model.digest(), model.kernel_bandwidths

    taken = []
    real = layout_mod.relaid
    monkeypatch.setattr(layout_mod, "relaid", lambda *a: taken.append(real(*a)) or taken[-1])
    layout_mod._BUILT.clear()  # (a layout built before would be a copy of the kept one)
    relaid_run = run()
    assert any(layout is not None for layout in taken)  # (the warm-up's among them)
    monkeypatch.setattr(layout_mod, "relaid", lambda *a: None)
    layout_mod._BUILT.clear()
    assert run() == relaid_run


def test_the_kept_fourier_offsets_are_each_kernels_own_and_a_fresh_array_each_time():
    """``_fourier_offsets``: a Gaussian block's offsets, kept by (type, seed, the name its
    features are drawn under, D), are ``fourier_offsets``' numbers at any bandwidth, a new
    array each call (writing one changes no later answer), and forgotten with the layouts."""
    forget_built_layouts()
    for kernel in (
        kernels.RBF(0.3, n_components=16),
        kernels.MedianRBF(2.0, 16).fitted(0.9, 5, final=True),
        kernels.MedianRBF(2.0, 16).fitted(7.0, 5, final=False),
        kernels.MedianRBF(2.0, 8).fitted(7.0, 5, final=False),
    ):
        for seed in (3, 4):
            first = layout_mod._fourier_offsets(kernel, seed)
            np.testing.assert_array_equal(first, kernel.fourier_offsets(seed))
            first[:] = -1.0
            np.testing.assert_array_equal(
                layout_mod._fourier_offsets(kernel, seed), kernel.fourier_offsets(seed)
            )
    assert layout_mod._OFFSETS
    forget_built_layouts()
    assert not layout_mod._OFFSETS
