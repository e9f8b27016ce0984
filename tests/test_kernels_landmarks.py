"""``LandmarkRBF`` (local memory as an explicit block): its compiled map against a brute-force
reference, its landmarks as fitted state (taken at the warm-up, saved, restored, merged), and a
learner on it under FTRL and AdaGrad with the group lasso."""

from __future__ import annotations

import math

import numpy as np
import pytest

from streammkl.core import OnlineMKL, bandwidth, regularizers, schedules
from streammkl.core import _numba as nb
from streammkl.core import kernels as Kmod
from streammkl.core import losses as Lmod


def _brute_profile(x: np.ndarray, Z: np.ndarray, gamma: float) -> np.ndarray:
    """k(x, z_j) / ||k(x, Z)||, one landmark at a time (math.exp, no shift)."""
    k = [math.exp(-gamma * sum((a - b) ** 2 for a, b in zip(x, z, strict=True))) for z in Z]
    norm = math.sqrt(sum(v * v for v in k))
    return np.array([v / norm for v in k])


def _phi(model: OnlineMKL, x: np.ndarray) -> np.ndarray:
    L = model.layout
    assert L is not None
    out = np.zeros(L.width)
    nb.explicit_phi(x, L.ex_blocks, L.ex_off, L.ex_kind, L.ex_norm, L.phi_src, L.rff_wt,
                    L.rff_b, out)  # fmt: skip
    return out


def _warmed(kernel: Kmod.Kernel, X: np.ndarray, seed: int = 0) -> OnlineMKL:
    model = OnlineMKL(kernels=(kernel,), seed=seed)
    for x in X[: bandwidth.WARMUP]:
        model.learn(x, 1.0 if x[0] > 0 else -1.0)
    return model


def test_landmark_map_matches_its_brute_force_kernel_with_exact_norms() -> None:
    rng = np.random.default_rng(11)
    X = rng.normal(size=(80, 3))
    k = Kmod.LandmarkRBF(16.0, 20)
    assert k.name == "landmarks(gamma=16/median,m=20)" and not k.implicit
    assert k.n_landmarks == 20 and k.n_components == 20
    assert Kmod.from_spec(k.to_spec()).name == k.name
    assert k.to_spec() == {"type": "LandmarkRBF", "scale": 16.0, "n_landmarks": 20,
                           "features": None}  # fmt: skip
    model = _warmed(k, X)
    fitted = model.kernels[0]
    assert isinstance(fitted, Kmod.LandmarkRBF) and isinstance(fitted.fit, Kmod.Landmarks)
    assert fitted.name == k.name  # the name is the configuration, the landmarks are state
    gamma = 16.0 / bandwidth.median_sq_distance(X[: bandwidth.WARMUP])
    assert fitted.fit.gamma == pytest.approx(gamma, rel=1e-12) and fitted.fit.final
    Z = X[:20]  # the first 20 warm-up inputs are the landmarks
    np.testing.assert_array_equal(np.array(fitted.fit.points), Z)
    assert fitted.fit.keys == ("0", "1", "2")
    want = np.array([_brute_profile(x, Z, fitted.fit.gamma) for x in X[50:]])
    got = np.array([_phi(model, x) for x in X[50:]])
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, rtol=1e-12)  # exact norms
    np.testing.assert_allclose(fitted.gram(X[50:]), want @ want.T, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(fitted.profiles(X[50:]), want, rtol=1e-12, atol=1e-15)
    G = fitted.gram(X)
    assert np.min(np.linalg.eigvalsh(G)) > -1e-9  # positive semi-definite
    # far from every landmark: the nearest one's indicator, never zeros or NaN (no underflow)
    far = np.array([40.0, 0.0, 0.0])
    p = _phi(model, far)
    assert np.isfinite(p).all() and p.max() == pytest.approx(1.0)
    assert int(np.argmax(p)) == int(np.argmin(((Z - far) ** 2).sum(axis=1)))


def test_before_its_landmarks_the_block_is_zero_and_more_landmarks_lengthen_the_warm_up() -> None:
    rng = np.random.default_rng(12)
    X = rng.normal(size=(200, 2))
    bank = (Kmod.MedianRBF(1.0, 16), Kmod.LandmarkRBF(4.0, 80))
    assert bandwidth.warmup(bank[:1]) == bandwidth.WARMUP and bandwidth.warmup(bank) == 80
    model = OnlineMKL(kernels=bank, seed=0)
    model.learn(X[0], 1.0)
    assert bandwidth.has_pending(model.kernels) and model.warmup_left == 79
    assert not _phi(model, X[1])[16:].any()  # no landmarks yet: the map is 0
    np.testing.assert_array_equal(model.kernels[1].gram(X[:3]), 0.0)
    model.learn_many(X[1:100], np.ones(99))  # crosses the warm-up's end: cut there
    assert not bandwidth.has_pending(model.kernels) and model.warmup_left == 0
    fit = model.kernels[1].fit
    assert isinstance(fit, Kmod.Landmarks) and len(fit.points) == 80
    np.testing.assert_array_equal(np.array(fit.points), X[:80])
    median = bandwidth.median_sq_distance(X[:80])  # the Fourier block's median: 80 rows too
    assert model.kernels[0].fit.gamma == pytest.approx(1.0 / median, rel=0.25)
    assert fit.gamma == pytest.approx(4.0 / median, rel=1e-12)
    np.testing.assert_allclose(np.linalg.norm(_phi(model, X[150])[16:]), 1.0, rtol=1e-12)


def test_fewer_warm_up_rows_than_landmarks_put_the_rest_at_zero_and_features_select() -> None:
    rng = np.random.default_rng(13)
    rows = rng.normal(size=(3, 5))
    rows[:, 4] = 0.0  # an input at 0 in every landmark is not kept (it reads as 0 anyway)
    k = Kmod.LandmarkRBF(1.0, 5, features=("b", "d", "e")).fitted(0.5, 4, final=True)
    k = k.with_landmarks(rows, ["a", "b", "c", "d", "e"])
    assert k.fit.keys == ("b", "d")
    np.testing.assert_array_equal(
        np.array(k.fit.points), np.vstack([rows[:, [1, 3]], np.zeros((2, 2))])
    )
    np.testing.assert_array_equal(k.landmark_matrix(["e", "b"])[:3], rows[:, [4, 1]])
    # a later input (e) counts as 0 in every landmark
    np.testing.assert_array_equal(k.landmark_matrix(["d", "e"])[:, 1], 0.0)
    with pytest.raises(ValueError, match="positive integer"):
        Kmod.LandmarkRBF(1.0, 0)
    with pytest.raises(TypeError, match="bandwidth first"):
        Kmod.LandmarkRBF(1.0, 3).with_landmarks(rows, ["a", "b", "c", "d"])


def test_landmarks_are_saved_restored_and_agree_for_a_merge(tmp_path) -> None:
    from streammkl.core import mixing

    rng = np.random.default_rng(14)
    X = rng.normal(size=(120, 3))
    bank = (Kmod.Linear(), Kmod.LandmarkRBF(16.0, 10))
    model = OnlineMKL(kernels=bank, seed=2)
    for x in X:
        model.learn(x, 1.0 if x[0] * x[1] > 0 else -1.0)
    again = OnlineMKL.load(model.save(tmp_path / "m.smkl"))
    assert again.kernels[1].fit == model.kernels[1].fit
    for x in X[:10]:
        np.testing.assert_array_equal(again.decision(x), model.decision(x))
    # members over the base's landmarks merge (the columns are the landmarks, one by one)
    rounds = []
    for i in range(2):
        member = OnlineMKL.from_state(*model.to_state())
        for x in X[i::2]:
            member.learn(x, 1.0 if x[0] > 0 else -1.0)
        rounds.append(mixing.MemberRound(f"m{i}", 60, *member.to_state()))
    merged = mixing.merge(*model.to_state(), rounds)
    assert merged.kernels[1].fit == model.kernels[1].fit
    assert np.isfinite(merged.decision(X[0])).all()
    # a member that took other landmarks cannot be merged exactly: refused, named
    other = OnlineMKL(kernels=bank, seed=2)
    for x in X[::-1]:
        other.learn(x, 1.0)
    assert other.kernels[1].fit != model.kernels[1].fit
    with pytest.raises(ValueError, match="other fitted bandwidths"):
        mixing.merge(*model.to_state(), [mixing.MemberRound("other", 120, *other.to_state())])


def test_landmarks_are_saved_as_exact_bytes_and_the_older_lists_still_load() -> None:
    """The landmarks go into a state's JSON as float64 bytes (base64): bit for bit, whatever
    the values; a state saved with them as lists of numbers (state version 5) loads the same,
    and a damaged field is a clear error."""
    import json

    rng = np.random.default_rng(3)
    keys = ("a", "b", "c")
    points = tuple(tuple(float(v) for v in row) for row in rng.normal(size=(7, 3)) * 1e-300)
    points = ((math.pi, -0.0, 5e-324), *points[1:])  # a subnormal and a signed zero as well
    fit = Kmod.Landmarks(0.25, 3, True, None, keys, points)
    d = json.loads(json.dumps(fit.to_dict()))
    assert "points" not in d and isinstance(d["points_f64"], str)
    back = Kmod.Landmarks.from_dict(d)
    assert back == fit and all(
        np.array_equal(np.array(p).view(np.int64), np.array(q).view(np.int64))
        for p, q in zip(back.points, fit.points, strict=True)
    )  # bit for bit (-0.0 included)
    old = {k: v for k, v in d.items() if k != "points_f64"} | {"points": [list(p) for p in points]}
    assert Kmod.Landmarks.from_dict(old) == fit
    empty = Kmod.Landmarks(0.25, 3, False, None, keys, ())
    assert Kmod.Landmarks.from_dict(json.loads(json.dumps(empty.to_dict()))) == empty
    with pytest.raises(ValueError):
        Kmod.Landmarks.from_dict({**d, "points_f64": d["points_f64"][:-8]})  # not rows of 3
    with pytest.raises(ValueError):
        Kmod.Landmarks.from_dict({**d, "points_f64": "not base64!"})


def test_a_landmark_block_learns_local_structure_with_ftrl_and_adagrad() -> None:
    rng = np.random.default_rng(15)
    X = rng.normal(size=(3000, 2))
    y = np.where(np.hypot(X[:, 0] - 0.5, X[:, 1]) < 0.6, 1.0, -1.0)  # a small disc
    for schedule in (schedules.FTRL(1.0), schedules.AdaGrad(1.0)):
        model = OnlineMKL(kernels=(Kmod.Linear(), Kmod.LandmarkRBF(16.0, 50)),
                          loss=Lmod.Logistic(), schedule=schedule,
                          regularizer=regularizers.GroupLasso(1e-3), seed=0)  # fmt: skip
        hits = 0
        for i, (x, t) in enumerate(zip(X, y, strict=True)):
            if i >= 2000:
                hits += np.sign(np.ravel(model.decision(x))[0]) == t
            model.learn(x, t)
        assert hits / 1000 > 0.85, schedule  # the linear block alone: the majority, ~0.83
        norms = model.block_norms
        assert norms[1] == max(norms)  # the landmarks carry the disc


def test_landmarks_written_again_give_the_same_text_and_new_landmarks_their_own():
    """The landmarks' text is written once per landmark set (kept by the points' identity):
    the same as writing the float64 bytes out, again and again, and a set built after it (or
    a list, which could change in place) gets its own."""
    import base64

    from streammkl.core.kernels import Landmarks

    def written(points, keys):
        array = np.asarray(points, dtype="<f8").reshape(len(points), len(keys))
        return base64.b64encode(array.tobytes()).decode("ascii")

    keys = ("a", "b")
    first = Landmarks(0.5, 2, True, None, keys, ((1.0, 2.0), (3.0, -4.5)))
    assert first.to_dict()["points_f64"] == written(first.points, keys)
    assert first.to_dict()["points_f64"] == written(first.points, keys)  # (kept)
    second = Landmarks(0.5, 2, True, None, keys, ((1.0, 2.0), (3.0, 4.5)))
    assert second.to_dict()["points_f64"] == written(second.points, keys)
    assert Landmarks.from_dict(second.to_dict()) == second
    rows = [[1.0, 2.0]]
    listed = Landmarks(0.5, 2, True, None, keys, rows)  # type: ignore[arg-type]
    assert listed.to_dict()["points_f64"] == written(rows, keys)
    rows[0][0] = 7.0
    assert listed.to_dict()["points_f64"] == written(rows, keys)


def test_a_fits_hash_is_its_fields_kept_once_and_never_pickled() -> None:
    """``Landmarks.__hash__``: the hash of its fields (equal fits, equal hashes; other
    landmarks, another), computed once and kept, but neither pickled nor copied (a string's
    hash differs from process to process): a fit pickles to the bytes it had before its hash."""
    import copy
    import pickle

    def fit(v: float) -> Kmod.Landmarks:
        return Kmod.Landmarks(0.5, 3, True, None, ("a", "b"), ((1.0, v), (0.0, 2.0)))

    a, b = fit(2.0), fit(2.0)
    raw = pickle.dumps(a)
    fields = (a.gamma, a.inputs, a.final, a.drawn_as, a.keys, a.points)
    assert hash(a) == hash(b) == hash(fields) and a == b
    assert hash(fit(3.0)) != hash(a) and fit(3.0) != a
    assert pickle.dumps(a) == raw
    assert "_hash" not in vars(copy.deepcopy(a)) and "_hash" not in vars(copy.copy(a))
    assert pickle.loads(raw) == a and hash(pickle.loads(raw)) == hash(a)


def test_landmarks_taken_from_rows_give_the_numbers_of_the_fit_read_back() -> None:
    """``with_landmarks`` keeps the numbers of its fit from the rows themselves: the landmarks'
    matrix, the projection's columns and offsets, distances and reach are those of the same
    kernel unpickled (its numbers read back from the fit's points), bit for bit; a new
    bandwidth on the same landmarks keeps them too (``fitted``), its reach its own."""
    import pickle

    rows = np.random.default_rng(5).normal(size=(4, 6))
    keys = [f"w{j}" for j in range(6)]
    kernel = Kmod.LandmarkRBF(2.0, 3).fitted(0.7, 6, final=True).with_landmarks(rows, keys)
    for k in (kernel, kernel.fitted(1.9, 6, final=True)):
        again = pickle.loads(pickle.dumps(k))
        assert again._fit_cache is None
        some = [*keys[::-1], "x"]
        np.testing.assert_array_equal(k.landmark_matrix(some), again.landmark_matrix(some))
        np.testing.assert_array_equal(k.fourier_columns(some, 3), again.fourier_columns(some, 3))
        np.testing.assert_array_equal(k.fourier_offsets(3), again.fourier_offsets(3))
        np.testing.assert_array_equal(k._distances(), again._distances())
        assert k.reach() == again.reach()
    assert kernel.reach() != kernel.fitted(1.9, 6, final=True).reach()
