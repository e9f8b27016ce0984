"""``LandmarkRBF(refresh=N)``: landmarks that move with the stream. Checked against brute-force
references: the replaced landmark is the one whose weight columns have the smallest norm
(among near-duplicates first), its columns (and their averages) restart at zero, the block norm
stays exact under FTRL and AdaGrad with the group lasso, the layout is the one a fresh build of
the refreshed bank gives, and a refreshed model saves, restores, rolls back and learns in runs
bit for bit as one round at a time does; behind river's scaler the near-duplicate first
landmarks are replaced."""

from __future__ import annotations

import copy
import itertools
import math

import numpy as np
import pytest

from streammkl.core import OnlineMKL, regularizers, schedules
from streammkl.core import _numba as nb
from streammkl.core import kernels as Kmod
from streammkl.core.state import build_layout

SCHEDULES = {"ftrl": lambda: schedules.FTRL(1.0), "adagrad": lambda: schedules.AdaGrad(1.0)}


def _stream(n: int = 1500, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """A stream whose classes move: the second half is shifted away from the first and drifts
    on, the classes with it, so inputs out of reach of the first landmarks (and then of the
    new ones) keep arriving."""
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, 3))
    y = np.where(np.sin(2.0 * Z[:, 0]) + Z[:, 1] * Z[:, 2] > 0.0, 1.0, -1.0)
    X = Z.copy()
    X[n // 2 :] += 4.0 + np.linspace(0.0, 8.0, n - n // 2)[:, None]
    return X, y


def _model(schedule: str, refresh: int = 40, averages: tuple = (100,)) -> OnlineMKL:
    return OnlineMKL(
        kernels=(Kmod.Linear(), Kmod.LandmarkRBF(16.0, 12, refresh=refresh)),
        regularizer=regularizers.GroupLasso(1e-2),
        schedule=SCHEDULES[schedule](),
        averages=averages,
        seed=0,
    )


def _block(model: OnlineMKL) -> tuple[int, int, int]:
    m = next(i for i, k in enumerate(model.kernels) if isinstance(k, Kmod.LandmarkRBF))
    L = model.layout
    assert L is not None
    return m, int(L.ex_off[m]), int(L.ex_off[m + 1])


def _brute_profile(x: np.ndarray, Z: np.ndarray, gamma: float) -> np.ndarray:
    k = [math.exp(-gamma * sum((a - b) ** 2 for a, b in zip(x, z, strict=True))) for z in Z]
    norm = math.sqrt(sum(v * v for v in k))
    return np.array([v / norm for v in k])


def test_the_name_and_spec_carry_the_refresh_and_bad_periods_are_refused() -> None:
    k = Kmod.LandmarkRBF(16.0, 50, refresh=100)
    assert k.name == "landmarks(gamma=16/median,m=50,refresh=100)"
    assert k.to_spec()["refresh"] == 100
    assert Kmod.from_spec(k.to_spec()).refresh == 100
    plain = Kmod.LandmarkRBF(16.0, 50)  # without a refresh: the name and spec of before
    assert plain.name == "landmarks(gamma=16/median,m=50)" and "refresh" not in plain.to_spec()
    for bad in (-1, 2.5, True, "10"):
        with pytest.raises(ValueError, match="refresh"):
            Kmod.LandmarkRBF(16.0, 50, refresh=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
def test_a_refresh_replaces_the_least_weighted_landmark_with_exact_norms(schedule: str) -> None:
    """(Among the crowded landmarks first: ``LandmarkRBF.to_replace``.)"""
    X, y = _stream()
    model = _model(schedule, refresh=400)  # no refresh before round 400: taken by hand below
    for x, t in zip(X[:399], y[:399], strict=True):
        model.learn(x, t)
    m, a, e = _block(model)
    S = model.state
    assert S is not None
    before_kernel = model.kernels[m]
    assert isinstance(before_kernel, Kmod.LandmarkRBF)
    Z_before = np.array(before_kernel.fit.points)  # type: ignore[union-attr]
    w_before, avg_before = S.w.copy(), S.avg_w.copy()
    col_norms = [math.sqrt(sum(float(v) ** 2 for v in S.w[:, a + j])) for j in range(e - a)]
    gamma = before_kernel.gamma
    crowded = [
        j for j, z in enumerate(Z_before)
        if any(gamma * sum((p - q) ** 2 for p, q in zip(z, o, strict=True))
               <= Kmod.LandmarkRBF.CROWD for i, o in enumerate(Z_before) if i != j)
    ]  # fmt: skip
    pool = crowded or list(range(e - a))  # near-duplicates first, else every landmark
    want_j = min(pool, key=lambda j: (col_norms[j], j))  # the first of the smallest
    x_new = X[-1]  # far from the first landmarks (the shifted half)
    assert not before_kernel.within_reach(x_new, model.feature_keys)
    model._refresh_landmarks(x_new, 400)  # (the hook a round t = 400 with a loss calls)
    after = model.kernels[m]
    assert isinstance(after, Kmod.LandmarkRBF) and after.fit is not None
    Z_after = np.array(after.fit.points)
    np.testing.assert_array_equal(Z_after[want_j], x_new)
    keep = [j for j in range(e - a) if j != want_j]
    np.testing.assert_array_equal(Z_after[keep], Z_before[keep])
    # the replaced landmark's columns restart at zero, in the weights and their averages
    S = model.state
    assert S is not None
    assert not S.w[:, a + want_j].any() and not S.avg_w[:, :, a + want_j].any()
    others = [c for c in range(S.w.shape[1]) if c != a + want_j]
    np.testing.assert_array_equal(S.w[:, others], w_before[:, others])
    np.testing.assert_array_equal(S.avg_w[:, :, others], avg_before[:, :, others])
    # exact block norm: ||theta_m|| = scale_m ||w_m|| summed entry by entry
    brute = math.sqrt(sum(float(v) ** 2 for v in S.w[:, a:e].ravel()))
    assert S.norms[m] == pytest.approx(S.scale[m] * brute, rel=1e-14)
    if schedule == "ftrl":
        assert S.stored_norms[m] == pytest.approx(brute, rel=1e-14)
    # the layout is the one a fresh build of the refreshed bank gives, bit for bit
    L = model.layout
    assert L is not None
    fresh = build_layout(model.kernels, len(model.feature_keys), model.seed,
                         keys=model.feature_keys, capacity=L.capacity, draws=L.draws)  # fmt: skip
    for name in ("rff_wt", "rff_b", "phi_src"):
        np.testing.assert_array_equal(getattr(L, name), getattr(fresh, name), err_msg=name)
    # and its map is the brute-force profile over the new landmarks
    phi = np.zeros(L.width)
    for x in X[1000:1010]:
        nb.explicit_phi(x, L.ex_blocks, L.ex_off, L.ex_kind, L.ex_norm, L.phi_src, L.rff_wt,
                        L.rff_b, phi)  # fmt: skip
        np.testing.assert_allclose(phi[a:e], _brute_profile(x, Z_after, after.gamma), atol=1e-12)


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
def test_runs_round_trips_and_rollbacks_agree_with_rounds_one_at_a_time(schedule: str) -> None:
    X, y = _stream()
    one = _model(schedule)
    losses = np.array([one.learn(x, t) for x, t in zip(X, y, strict=True)])
    m, _, _ = _block(one)
    kernel = one.kernels[m]
    assert isinstance(kernel, Kmod.LandmarkRBF) and kernel.fit is not None
    moved = np.array(kernel.fit.points) != X[:12]  # (the first landmarks: the first inputs)
    assert moved.any(axis=1).sum() >= 2  # the landmarks moved with the stream ...
    for z in np.array(kernel.fit.points)[moved.any(axis=1)]:  # ... each an input of a round
        rounds = [i + 1 for i in range(len(X)) if np.array_equal(X[i], z)]  # t a multiple of
        assert len(rounds) == 1 and rounds[0] % 40 == 0 and rounds[0] > 50  # 40, after warm-up
    runs = _model(schedule)
    got = []
    for lo, hi in itertools.pairwise((0, 7, 333, 800, 801, 1111, len(X))):
        got.append(runs.learn_many(X[lo:hi], y[lo:hi])[0])
    np.testing.assert_array_equal(np.concatenate(got), losses)
    assert runs.digest() == one.digest()
    # saved and restored: the same model, and it learns on as the original does
    back = OnlineMKL.from_state(*one.to_state())
    assert back.digest() == one.digest()
    assert back.kernels[m].fit == one.kernels[m].fit
    X2, y2 = _stream(600, seed=9)
    X2 += 8.0  # further out: more refreshes after the restore
    point = one.save_point()
    a = one.learn_many(X2, y2)[0]
    b = np.array([back.learn(x, t) for x, t in zip(X2, y2, strict=True)])
    np.testing.assert_array_equal(a, b)
    assert back.digest() == one.digest()
    one.restore_point(point)  # the rounds (and their refreshes) taken back
    assert one.digest() == OnlineMKL.from_state(*one.to_state()).digest()
    np.testing.assert_array_equal(one.learn_many(X2, y2)[0], a)


def test_inputs_within_reach_and_held_bandwidths_refresh_nothing() -> None:
    X, y = _stream()
    model = _model("ftrl", refresh=1)
    for x, t in zip(X[:300], y[:300], strict=True):
        model.learn(x, t)
    m, _, _ = _block(model)
    kernel = model.kernels[m]
    assert isinstance(kernel, Kmod.LandmarkRBF) and kernel.fit is not None
    z = np.array(kernel.fit.points[0])
    assert kernel.within_reach(z, model.feature_keys)  # a landmark itself is within reach
    assert kernel.keeps(z, model.feature_keys)  # so its check keeps the landmarks
    assert not kernel.keeps(X[-1] + 10.0, model.feature_keys)
    digest = model.digest()
    model._refresh_landmarks(z, model.t)
    assert model.kernels[m] is kernel and model.digest() == digest
    model.hold_bandwidths = True  # a mixing group's member: the group decides the landmarks
    far = X[-1] + 10.0
    model._refresh_landmarks(far, model.t)
    assert model.kernels[m] is kernel and model.digest() == digest


def test_a_model_saved_without_refresh_loads_and_learns_as_before() -> None:
    """A bank without ``refresh`` keeps its spec (no new key), so states saved before the
    refresh existed load unchanged and never refresh."""
    X, y = _stream()
    model = OnlineMKL(kernels=(Kmod.LandmarkRBF(16.0, 12),), seed=0)
    for x, t in zip(X, y, strict=True):
        model.learn(x, t)
    meta, arrays = model.to_state()
    assert "refresh" not in meta["config"]["kernels"][0]
    kernel = model.kernels[0]
    assert isinstance(kernel, Kmod.LandmarkRBF) and kernel.fit is not None
    np.testing.assert_array_equal(np.array(kernel.fit.points), X[:12])  # never moved
    assert OnlineMKL.from_state(meta, arrays).digest() == model.digest()


def _crowded_pairs(kernel: Kmod.Kernel) -> int:
    """Pairs of landmarks within ``REACH`` of each other (near-duplicates), by brute force."""
    assert isinstance(kernel, Kmod.LandmarkRBF) and kernel.fit is not None
    Z = [list(p) for p in kernel.fit.points]
    return sum(
        kernel.gamma * sum((a - b) ** 2 for a, b in zip(Z[i], Z[j], strict=True))
        <= Kmod.LandmarkRBF.CROWD
        for i in range(len(Z)) for j in range(i + 1, len(Z))
    )  # fmt: skip


def test_behind_rivers_scaler_the_near_duplicate_first_landmarks_are_replaced() -> None:
    """``StandardScaler() | MKLClassifier()``: the scaler maps the first example to zeros and
    the next few to about +-1, so the first landmarks crowd together; a refresh gives up
    crowded landmarks first, fixed landmarks keep them."""
    from river import datasets, preprocessing

    from streammkl.river import MKLClassifier

    stream = datasets.synth.RandomRBFDrift(
        seed_model=1, seed_sample=2, n_classes=2, n_features=4, n_centroids=20,
        change_speed=0.01, n_drift_centroids=20,
    )  # fmt: skip
    data = list(itertools.islice(stream, 1000))
    crowded = {}
    for refresh in (0, 100):
        bank = (Kmod.Linear(), Kmod.LandmarkRBF(16.0, 20, refresh=refresh))
        pipe = preprocessing.StandardScaler() | MKLClassifier(kernels=bank, seed=0)
        for x, y in data:
            pipe.learn_one(x, y)
        model = pipe["MKLClassifier"].rounds().model
        crowded[refresh] = _crowded_pairs(model.kernels[1])
    assert crowded[0] >= 4  # the scaler's first outputs, kept
    assert crowded[100] == 0


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
def test_a_refresh_writes_the_layout_in_place_with_the_numbers_of_a_copy(schedule: str) -> None:
    """A refresh rewrites the model's own layout in place (the same arrays, the same round
    arguments: no copy, no re-binding), and gives bit for bit the model whose every refresh
    copies the layout (a save point holds it: copy on write), rounds, states and layouts."""
    X, y = _stream()
    inplace, copying = _model(schedule), _model(schedule)
    for x, t in zip(X[:200], y[:200], strict=True):
        inplace.learn(x, t)
        copying.learn(x, t)
    layout, args = inplace.layout, inplace._args
    points = [(copying.t, copying.save_point())]
    refreshed = 0
    for x, t in zip(X[200:], y[200:], strict=True):
        kernels = inplace.kernels
        assert inplace.learn(x, t) == copying.learn(x, t)
        if inplace.kernels is not kernels:  # a refresh: in place here, a copy there
            refreshed += 1
            assert inplace.layout is layout and inplace._args is args
            assert copying.layout is not points[-1][1][3]  # (the point keeps its layout)
            points.append((copying.t, copying.save_point()))
    assert refreshed >= 2
    assert inplace.digest() == copying.digest()
    for name in ("rff_wt", "rff_b", "phi_src"):
        np.testing.assert_array_equal(
            getattr(inplace.layout, name), getattr(copying.layout, name), err_msg=name
        )
    # the landmarks' distances kept with each refreshed kernel (one row computed anew per
    # refresh) are those computed from scratch, bit for bit
    m, _, _ = _block(inplace)
    kernel = inplace.kernels[m]
    assert isinstance(kernel, Kmod.LandmarkRBF)
    np.testing.assert_array_equal(kernel._distances(), copy.deepcopy(kernel)._distances())
    # a save point holds the layout of its time: taken back, the rounds since come again
    t0, point = points[1]
    copying.restore_point(point)
    copying.learn_many(X[t0:], y[t0:])
    assert copying.digest() == inplace.digest()


def test_the_reach_is_relative_to_the_landmarks_spacing_by_brute_force() -> None:
    """``within_reach``: ``gamma min_j ||x - z_j||^2 <= REACH * spacing`` (the median over the
    landmarks of ``gamma`` times the squared distance to the nearest other one), or within
    ``CROWD`` if that is less while some landmarks are crowded; ``REACH`` itself with
    ``reach_rule="absolute"``. Checked against sums written out, on spread and on crowded
    landmarks."""
    rng = np.random.default_rng(5)
    keys = ["a", "b", "c", "d"]
    base = Kmod.LandmarkRBF(16.0, 8)
    fitted = base.fitted(0.3, 4, True)
    for rows in (
        rng.normal(size=(8, 4)),
        np.vstack([10.0 * rng.normal(size=(5, 4)), 1e-3 * rng.normal(size=(3, 4))]),
    ):
        kernel = fitted.with_landmarks(rows, keys)
        Z = [list(r) for r in rows]
        g = kernel.gamma

        def d2(p: list, q: list) -> float:
            return sum((u - v) ** 2 for u, v in zip(p, q, strict=True))

        nearest = [g * min(d2(z, o) for i, o in enumerate(Z) if i != j) for j, z in enumerate(Z)]
        reach = Kmod.LandmarkRBF.REACH * float(np.median(nearest))
        if min(nearest) <= Kmod.LandmarkRBF.CROWD:
            reach = min(reach, Kmod.LandmarkRBF.CROWD)
        assert kernel.spacing() == pytest.approx(float(np.median(nearest)), rel=1e-12)
        assert kernel.reach() == pytest.approx(reach, rel=1e-12)
        for x in rng.normal(size=(200, 4)) * 1.5:
            near = g * min(d2(list(x), z) for z in Z)
            if abs(near - reach) > 1e-9 * reach:  # (not on the edge itself)
                assert kernel.within_reach(x, keys) == (near <= reach)
        absolute = Kmod.LandmarkRBF(16.0, 8, reach_rule="absolute").fitted(0.3, 4, True)
        fresh = absolute.with_landmarks(rows, keys)
        assert fresh.reach() == Kmod.LandmarkRBF.REACH
        for x in rng.normal(size=(50, 4)):
            near = g * min(d2(list(x), z) for z in Z)
            assert fresh.within_reach(x, keys) == (near <= Kmod.LandmarkRBF.REACH)


def test_a_pickled_model_refreshes_on_as_the_original_even_one_pickled_before() -> None:
    """Pickled and loaded, a refreshing model learns on bit for bit as the original (its own
    layout stays its own); one pickled before the in-place refresh (no record of owning its
    layout) copies its layout at its first refresh, with the same numbers."""
    import pickle

    X, y = _stream()
    model = _model("ftrl")
    model.learn_many(X[:900], y[:900])
    back = pickle.loads(pickle.dumps(model))
    state = model.__getstate__()
    del state["_own_layout"]  # (what a pickle made before it had)
    older = OnlineMKL.__new__(OnlineMKL)
    older.__setstate__(copy.deepcopy(state))
    m, _, _ = _block(model)
    before = model.kernels[m]
    a = model.learn_many(X[900:], y[900:])[0]
    assert model.kernels[m] is not before  # (refreshes happened on the way)
    for other in (back, older):
        np.testing.assert_array_equal(other.learn_many(X[900:], y[900:])[0], a)
        assert other.digest() == model.digest()


def test_the_reach_rule_is_a_stable_constructor_argument() -> None:
    """``reach_rule`` is configuration: the default ("spacing") leaves the name and the spec as
    they were; "absolute" names itself and survives the spec round trip; anything else is
    refused."""
    default = Kmod.LandmarkRBF(16.0, 50, refresh=100)
    assert default.name == "landmarks(gamma=16/median,m=50,refresh=100)"
    assert "reach_rule" not in default.to_spec()
    absolute = Kmod.LandmarkRBF(16.0, 50, refresh=100, reach_rule="absolute")
    assert absolute.name == "landmarks(gamma=16/median,m=50,refresh=100,reach=absolute)"
    again = Kmod.from_spec(absolute.to_spec())
    assert again == absolute and again.reach_rule == "absolute"
    with pytest.raises(ValueError, match="reach_rule"):
        Kmod.LandmarkRBF(16.0, 50, reach_rule="relative")


def test_the_kept_numbers_follow_the_fit() -> None:
    """What the kernel keeps for its landmarks (their array, distances, reach) belongs to one
    fit: after a landmark is replaced the copy's numbers are those of a kernel built afresh
    with the same landmarks, and the original's are unchanged."""
    rng = np.random.default_rng(11)
    keys = ["a", "b", "c"]
    rows = rng.normal(size=(6, 3))
    kernel = Kmod.LandmarkRBF(4.0, 6).fitted(0.5, 3, True).with_landmarks(rows, keys)
    before = (kernel.spacing(), kernel.reach(), kernel.landmark_matrix(keys).copy())
    new = rng.normal(size=3)
    moved = kernel.with_landmark(2, new, keys)
    rows2 = rows.copy()
    rows2[2] = new
    fresh = Kmod.LandmarkRBF(4.0, 6).fitted(0.5, 3, True).with_landmarks(rows2, keys)
    assert np.array_equal(moved.landmark_matrix(keys), fresh.landmark_matrix(keys))
    assert moved.spacing() == pytest.approx(fresh.spacing(), rel=1e-12)
    assert moved.reach() == pytest.approx(fresh.reach(), rel=1e-12)
    assert (kernel.spacing(), kernel.reach()) == before[:2]
    assert np.array_equal(kernel.landmark_matrix(keys), before[2])
    for x in rng.normal(size=(40, 3)):
        assert moved.within_reach(x, keys) == fresh.within_reach(x, keys)
