"""The sparse round of wide records (``core._numba.wide``) against the dense round: the same
predictions, losses, weights, norms and averaged iterates (and so the same leader) up to
rounding, on sparse records, dense ones and a mix; with two mirrored rows, three classes and
one logistic row; with blocks the group lasso drops and regrows; through growth, a saved and
loaded state, a pickle, a merge of a group and river's bag of words."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from streammkl.core import OnlineMKL, kernels, losses, regularizers, schedules
from streammkl.core import update as update_mod
from streammkl.core.mixing import MemberRound, merge

RTOL = 1e-9


def _bank():
    return (kernels.Linear(), kernels.AdditiveRBF(1.0, 8, draws="quadrature"),
            kernels.RBF(0.05, n_components=32), kernels.Polynomial(2, explicit=True),
            kernels.LandmarkRBF(16.0, 8))  # fmt: skip


def _model(loss=None, lam=1e-2, averages=(5.0, 50.0), every=1, bank=None) -> OnlineMKL:
    return OnlineMKL(kernels=bank or _bank(), loss=loss or losses.Softmax(),
                     regularizer=regularizers.GroupLasso(lam), schedule=schedules.FTRL(1.0),
                     fit_intercept=True, averages=averages, average_every=every)  # fmt: skip


def _records(n: int, d: int, nnz: int, classes: int, seed: int = 0, dense_every: int = 0):
    """Bag-of-words-like records (``nnz`` counts among ``d`` inputs); every ``dense_every``-th
    record dense (every input non-zero) when given."""
    rng = np.random.default_rng(seed)
    X = np.zeros((n, d))
    wt = rng.normal(size=(max(classes, 2), d))
    for i in range(n):
        if dense_every and i % dense_every == 0:
            X[i] = rng.normal(size=d)
        else:
            idx = rng.choice(d, nnz, replace=False)
            X[i, idx] = rng.poisson(1.0, nnz) + 1.0
    score = X @ wt.T + rng.normal(size=(n, wt.shape[0]))
    Y = np.argmax(score, axis=1).astype(float)
    if classes == 1:  # one logistic row: labels +-1
        Y = 2.0 * Y - 1.0
    return X, Y


def _dense(monkeypatch) -> None:
    monkeypatch.setattr(update_mod, "wide_round", lambda *a: False)


def _run(model: OnlineMKL, X, Y):
    preds, norms = [], []
    for x, y in zip(X, Y, strict=True):
        preds.append(model.learn_predict(x, y).copy())
        norms.append(model.block_norms.copy())
    width = max(p.shape[0] for p in preds)  # classes arrive over the stream
    return np.array([np.pad(p, (0, width - p.shape[0])) for p in preds]), np.array(norms)


def _same_state(a: OnlineMKL, b: OnlineMKL, rtol: float = RTOL) -> None:
    sa, sb = a.to_state()[1], b.to_state()[1]
    assert sa.keys() == sb.keys()
    for key, arr in sa.items():
        scale = max(float(np.max(np.abs(sb[key]), initial=0.0)), 1e-12)
        np.testing.assert_allclose(arr, sb[key], rtol=0, atol=rtol * scale, err_msg=key)


# (loss, classes): two mirrored rows, three classes, the mirrored hinge, one logistic row
CASES = [
    (losses.Softmax(), 2), (losses.Softmax(), 3), (losses.MulticlassHinge(), 2),
    (losses.Logistic(), 1),
]  # fmt: skip


@pytest.mark.parametrize("loss,classes", CASES)
@pytest.mark.parametrize("every", [1, 3])
def test_sparse_records_give_the_dense_rounds_numbers(monkeypatch, loss, classes, every):
    X, Y = _records(400, 300, 5, classes)
    wide = _model(loss, every=every)
    wide_pred, wide_norms = _run(wide, X, Y)
    assert wide._args is not None and wide._args.wide
    assert wide._args.mirror == (classes == 2)
    lazy = wide._state.lazy  # the factors moved: the sparse round ran
    assert np.any(lazy[0] != 1.0) and np.any(lazy[4:] != 0.0)
    _dense(monkeypatch)
    dense = _model(loss, every=every)
    dense_pred, dense_norms = _run(dense, X, Y)
    assert dense._args is not None and not dense._args.wide
    np.testing.assert_allclose(wide_pred, dense_pred, rtol=RTOL, atol=1e-12)
    np.testing.assert_allclose(wide_norms, dense_norms, rtol=RTOL, atol=1e-12)
    np.testing.assert_array_equal(wide_norms > 0, dense_norms > 0)
    _same_state(wide, dense)
    for x in X[:20]:  # predictions without learning: the leader's scores, sparse and settled
        np.testing.assert_allclose(wide.decision(x), dense.decision(x), rtol=RTOL, atol=1e-12)


def test_a_mix_of_dense_and_sparse_records_switches_routes_with_the_same_numbers(monkeypatch):
    X, Y = _records(400, 200, 4, 3, seed=1, dense_every=7)
    wide = _model()
    wide_pred, _ = _run(wide, X, Y)
    _dense(monkeypatch)
    dense = _model()
    dense_pred, _ = _run(dense, X, Y)
    np.testing.assert_allclose(wide_pred, dense_pred, rtol=RTOL, atol=1e-12)
    _same_state(wide, dense)


def test_blocks_the_group_lasso_drops_and_regrows_keep_the_dense_numbers(monkeypatch):
    X, Y = _records(600, 300, 5, 2, seed=2)
    Y[300:] = 1.0 - Y[300:]  # the concept flips: blocks that were dropped come back
    wide = _model(lam=0.3)
    wide_pred, norms = _run(wide, X, Y)
    dropped = (norms[:-1] > 0) & (norms[1:] == 0)
    regrown = (norms[:-1] == 0) & (norms[1:] > 0)
    assert dropped.any() and regrown.any()
    _dense(monkeypatch)
    dense = _model(lam=0.3)
    dense_pred, dense_norms = _run(dense, X, Y)
    np.testing.assert_allclose(wide_pred, dense_pred, rtol=RTOL, atol=1e-12)
    np.testing.assert_array_equal(norms > 0, dense_norms > 0)
    _same_state(wide, dense)


def test_a_saved_state_is_settled_and_resumes_as_the_learner_itself(monkeypatch):
    X, Y = _records(500, 300, 5, 2, seed=3)
    wide = _model()
    _run(wide, X[:250], Y[:250])
    assert np.any(wide._state.lazy[0] != 1.0)
    meta, arrays = wide.to_state()
    assert "lazy" not in arrays
    restored = OnlineMKL.from_state(meta, arrays)
    copied = pickle.loads(pickle.dumps(wide))
    tail_wide, _ = _run(wide, X[250:], Y[250:])
    tail_restored, _ = _run(restored, X[250:], Y[250:])
    tail_copied, _ = _run(copied, X[250:], Y[250:])
    np.testing.assert_array_equal(tail_restored, tail_wide)  # the same bits: settled at save
    np.testing.assert_array_equal(tail_copied, tail_wide)
    assert wide.digest() == restored.digest() == copied.digest()
    _dense(monkeypatch)
    dense = _model()
    dense_pred, _ = _run(dense, X, Y)
    np.testing.assert_allclose(tail_wide, dense_pred[250:], rtol=RTOL, atol=1e-12)
    _same_state(wide, dense)


def test_the_state_a_reader_gets_is_settled():
    X, Y = _records(200, 300, 5, 2, seed=4)
    wide = _model()
    _run(wide, X, Y)
    before = wide.decision(X[0]).copy()
    S = wide.state  # settled for the reader: identity factors, the model unchanged
    assert S is not None
    np.testing.assert_array_equal(S.lazy[0], 1.0)
    np.testing.assert_array_equal(S.lazy[2:4], 1.0)
    np.testing.assert_array_equal(S.lazy[4:], 0.0)
    np.testing.assert_allclose(wide.decision(X[0]), before, rtol=1e-12)
    L = wide.layout
    assert L is not None
    for m in L.ex_blocks:  # stored norms are the norms of the settled weights
        a, e = L.ex_off[m], L.ex_off[m + 1]
        np.testing.assert_allclose(
            S.stored_norms[m], np.linalg.norm(S.w[:, a:e]), rtol=1e-12, atol=1e-300
        )


def test_a_group_merge_of_wide_members_is_the_merge_of_dense_ones(monkeypatch):
    X, Y = _records(300, 300, 5, 2, seed=5)

    def rounds(base: OnlineMKL) -> OnlineMKL:
        members = []
        for name, lo, hi in (("a", 100, 200), ("b", 200, 300)):
            member = OnlineMKL.from_state(*base.to_state())
            _run(member, X[lo:hi], Y[lo:hi])
            members.append(MemberRound(name, hi - lo, *member.to_state()))
        return merge(*base.to_state(), members)

    base = _model()
    _run(base, X[:100], Y[:100])
    merged_wide = rounds(base)
    _dense(monkeypatch)
    base = _model()
    _run(base, X[:100], Y[:100])
    merged_dense = rounds(base)
    np.testing.assert_allclose(
        merged_wide.decision_many(X), merged_dense.decision_many(X), rtol=RTOL, atol=1e-12
    )
    _same_state(merged_wide, merged_dense)


def test_bag_of_words_through_river_gives_the_dense_rounds_numbers(monkeypatch):
    from river import feature_extraction

    from streammkl.river import MKLClassifier

    rng = np.random.default_rng(6)
    vocab = [f"w{i}" for i in range(600)]
    probs = 1.0 / np.arange(1, 601)
    probs /= probs.sum()
    docs = []
    for _ in range(300):
        words = rng.choice(vocab, size=12, p=probs)
        label = "a" if sum(int(w[1:]) % 3 == 0 for w in words) > 3 else "b"
        docs.append((" ".join(words), label))

    def run() -> list[dict]:
        model = feature_extraction.BagOfWords() | MKLClassifier()
        out = []
        for text, y in docs:
            out.append(model.predict_proba_one(text))
            model.learn_one(text, y)
        return out

    wide = run()
    _dense(monkeypatch)
    dense = run()
    for p, q in zip(wide, dense, strict=True):
        assert p.keys() == q.keys()
        for k in p:
            assert p[k] == pytest.approx(q[k], rel=RTOL, abs=1e-12)


def test_a_save_point_taken_mid_sparse_run_restores_the_lazy_model_bit_for_bit():
    X, Y = _records(400, 300, 5, 2, seed=7)
    model = _model()
    _run(model, X[:200], Y[:200])
    assert np.any(model._state.lazy[0] != 1.0)  # mid-run: factors not folded
    point = model.save_point()
    detour, _ = _run(model, X[200:300], Y[200:300])
    model.restore_point(point)
    again, _ = _run(model, X[200:300], Y[200:300])
    np.testing.assert_array_equal(again, detour)


def test_a_sparse_records_cost_is_the_columns_the_sparse_round_touches():
    """``OnlineMKL.cost`` / ``Rounds.cost`` price a record the sparse round takes by the
    columns it touches (``update.wide_columns``, which agrees with the compiled route's own
    plan, ``nb.wide_plan``), not by every column; a dense record, no record, or a model whose
    rounds never take the sparse route keep the dense price."""
    from river import feature_extraction

    from streammkl.core import _numba as nb
    from streammkl.river import MKLClassifier

    X, Y = _records(300, 300, 5, 2, seed=8)
    model = _model()
    _run(model, X, Y)
    layout = model.layout
    K, E = model.n_outputs, 2
    dense_entries = model.cost(0)[0]
    assert dense_entries == layout.width * (1 + 2 * K * (1 + E))
    assert model.cost(0, None) == model.cost(0)
    for x in (X[-1], X[-2], np.ones(300), np.zeros(300)):
        nnz = int(np.count_nonzero(x))
        n, touched, sparse = nb.wide_plan(x, np.zeros(300, dtype=np.int64), layout.ex_blocks,
                                          layout.ex_off, layout.ex_kind, layout.ex_used,
                                          layout.blk_inputs)  # fmt: skip
        assert n == nnz and sparse == (nnz < 300)  # the all-ones record takes the dense round
        want = touched if sparse else layout.width
        assert update_mod.wide_columns(layout, nnz) == (touched if sparse else None)
        assert model.cost(0, nnz)[0] == want * (1 + 2 * K * (1 + E))
    assert model.cost(0, 5)[0] < dense_entries / 4
    narrow = _model()  # 10 inputs: its blocks span too few columns for the sparse route
    Xn, Yn = _records(50, 10, 1, 2, seed=8)
    _run(narrow, Xn, Yn)
    assert narrow.cost(0, 1) == narrow.cost(0) and narrow.cost(0)[0] > 0

    # through river: a bag of words learned far enough that its rounds take the sparse route
    pipe = feature_extraction.BagOfWords() | MKLClassifier()
    rng = np.random.default_rng(9)
    for _ in range(300):
        words = [f"w{int(i)}" for i in rng.integers(0, 400, size=8)]
        pipe.learn_one(" ".join(words), bool(rng.random() < 0.5))
    seam = pipe["MKLClassifier"].rounds()
    x = {"w1": 2.0, "w2": 1.0, "w3": 1.0}
    entries, growth = seam.cost(x)
    assert growth == 0 and entries == seam.model.cost(0, 3)[0] < seam.model.cost(0)[0] / 4
    assert seam.cost(None)[0] == seam.model.cost(0)[0]  # no record: every column


def test_a_prediction_lends_its_features_to_the_round_on_the_same_record_only():
    """The sparse round reuses the features of the prediction just before it when the record
    is the same (its non-zeros and their values, found in O(nnz)): a round after a prediction
    of another record (one value changed, a non-zero moved, the same with a zero of the other
    sign) learns exactly what a round with no prediction before it learns."""
    X, Y = _records(40, 300, 6, 3, seed=4)
    alone, after = _model(), _model()
    for i, (x, y) in enumerate(zip(X, Y, strict=True)):
        seen = x.copy()
        nz = np.flatnonzero(x)
        if i % 4 == 1:
            seen[nz[0]] += 1.0  # a value changed
        elif i % 4 == 2:
            seen[nz[0]], seen[(nz[0] + 1) % x.size] = 0.0, seen[nz[0]]  # a non-zero moved
        elif i % 4 == 3:
            seen[np.flatnonzero(x == 0.0)[:5]] = -0.0  # the same record: zeros of either sign
        if after.built:
            after.decision_prepared(seen)
        alone.learn_predict(x, y)
        np.testing.assert_array_equal(after.learn_predict(x, y), alone.last_scores)
    assert alone._args is not None and alone._args.wide  # (the rounds took the sparse route)
    assert after.digest() == alone.digest()


def test_projection_rows_four_at_a_time_are_one_row_at_a_time_bit_for_bit():
    """``project_rows`` (a projection block's rows of the record's non-zeros, four per sweep)
    gives every entry the same additions in the same order as the one-row loop it replaced,
    compiled with the same flags: equal bit for bit for 0 to 11 non-zeros (every remainder of
    four), the rows past the frequencies' last skipped, a block offset into a wider ``phi``."""
    from numba import njit

    from streammkl.core import _numba as nb
    from streammkl.core._jit import JIT

    @njit(**JIT)
    def one_row_at_a_time(phi, ua, un, rff_wt, r0, x, nz, nnz):
        for q in range(nnz):
            i = nz[q]
            if i >= rff_wt.shape[0]:
                break
            xi = x[i]
            ui = np.uint64(i)
            for j in range(un):
                phi[ua + j] += rff_wt[ui, r0 + j] * xi

    rng = np.random.default_rng(11)
    rows, width, d = 40, 37, 50
    rff_wt = rng.normal(size=(rows, width)) * rng.uniform(0.1, 30.0, size=width)
    for nnz in range(12):
        for past in (0, 2):  # non-zeros beyond the frequencies' rows (inputs laid out later)
            nz = np.sort(rng.choice(rows, nnz - min(past, nnz), replace=False))
            nz = np.concatenate([nz, rows + np.arange(min(past, nnz))]).astype(np.int64)
            x = np.zeros(d)
            x[nz] = rng.normal(size=nz.size) * rng.choice([1.0, 1e3, 1e-3], size=nz.size)
            phi = rng.normal(size=60)
            want = phi.copy()
            ua, un, r0 = np.uint64(5), np.uint64(29), np.uint64(6)
            one_row_at_a_time(want, ua, un, rff_wt, r0, x, nz, nz.size)
            got = phi.copy()
            nb.project_rows(got, ua, un, rff_wt, r0, x, nz, nz.size)
            assert got.tobytes() == want.tobytes(), nnz
            if nnz - min(past, nnz) >= 4:
                assert not np.array_equal(got, phi)  # (the rows were added)
