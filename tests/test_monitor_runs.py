"""The monitor on compiled runs: a chunk of rounds observed at once is the same as its rounds
observed one by one, and restarts wait for the multiples of the stride, so the model and the
monitor do not depend on how the stream is cut (nor on a checkpoint between a detection and its
boundary)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from streammkl.core import OnlineMKL, kernels, regularizers, schedules
from streammkl.core.regularizers import _TYPES as REGULARIZERS
from streammkl.daemon.learning.history import History
from streammkl.monitor import Monitor, MonitoredLoop
from streammkl.monitor.drift import LossDriftDetector
from streammkl.monitor.hindsight import EpochComparator
from streammkl.monitor.objective import OnlineObjective
from streammkl.monitor.regret import WindowedRegret
from streammkl.monitor.theory import FeatureNorms
from streammkl.monitor.window import ExampleWindow

NORM_ONLY = {
    "L2": regularizers.L2(0.3),
    "GroupLasso": regularizers.GroupLasso(0.2),
    "SquaredGroupLasso": regularizers.SquaredGroupLasso(0.7),
    "GroupLq": regularizers.GroupLq(0.5, q=1.5),
    "ElasticNetMKL": regularizers.ElasticNetMKL(0.4, sigma=0.3),
    "OverlappingGroupLasso": regularizers.OverlappingGroupLasso(
        [[0, 1], ["c", 4], [2]], [0.1, 2, 0.5]
    ),
    "Ball": regularizers.Ball(2.5),
    "GroupL1Ball": regularizers.GroupL1Ball(4.0),
}
NAMES = ("a", "b", "c", "d", "e")


def test_every_norm_only_regularizer_is_covered() -> None:
    norm_only = {name for name, cls in REGULARIZERS.items() if cls.norm_only}
    assert norm_only == set(NORM_ONLY)


@pytest.mark.parametrize("name", NORM_ONLY)
def test_values_norms_is_value_norms_of_each_row(name: str) -> None:
    reg = NORM_ONLY[name]
    rng = np.random.default_rng(3)
    B = np.abs(rng.normal(size=(300, 5))) * rng.choice([0.0, 0.1, 1.0, 3.0], size=(300, 5))
    got = reg.values_norms(B, NAMES)
    assert got.shape == (300,)
    for row, value in zip(B, got, strict=True):
        want = reg.value_norms(row, NAMES) if name == "OverlappingGroupLasso" else reg.value(row)
        assert value == want or math.isclose(value, want, rel_tol=4e-16, abs_tol=0.0), row
    if name.endswith("Ball"):  # both sides of the constraint occur
        assert np.isinf(got).any() and (got == 0).any()
    # a row's value does not depend on the other rows: cut anywhere, the same digits
    for lo, hi in [(0, 1), (7, 8), (3, 50), (299, 300), (11, 300)]:
        np.testing.assert_array_equal(reg.values_norms(B[lo:hi], NAMES), got[lo:hi])


@pytest.mark.parametrize("name", NORM_ONLY)
def test_kernel_weights_of_rows_are_those_of_each_row_bit_for_bit(name: str) -> None:
    regs = [NORM_ONLY[name], regularizers.GroupLq(0.5, q=1.3)]  # a ball's β: the GroupLq's
    rng = np.random.default_rng(5)
    for m in (*range(1, 20), 64, 129):  # a row of 8 or more is summed pairwise
        B = np.abs(rng.normal(size=(6, m))) * 10.0 ** rng.uniform(-8, 3, size=(6, m))
        B[rng.random((6, m)) < 0.3] = 0.0
        B[2] = 0.0  # every block 0: all zeros
        got = regularizers.kernel_weights(regs, B)
        for row, weights in zip(B, got, strict=True):
            want = regularizers.kernel_weights(regs, row)
            assert weights.tobytes() == want.tobytes(), (m, row)
        assert not got[2].any()


def test_coordinate_regularizers_refuse_runs_of_norms() -> None:
    for reg in (regularizers.L1(0.1), regularizers.SparseGroupLasso(0.1)):
        with pytest.raises(TypeError, match="block norms alone"):
            reg.values_norms(np.ones((2, 3)))
    model = OnlineMKL(kernels=(kernels.Linear(),), regularizer=regularizers.L1(0.1))
    assert not model.norm_only
    with pytest.raises(TypeError, match=r"\|\|theta\|\|_1"):
        model.regularization_values(np.ones((2, 1)))


def _model(**over) -> OnlineMKL:
    base = dict(
        kernels=(kernels.Linear(), kernels.RBF(0.5, n_components=16), kernels.Polynomial(2)),
        regularizer=(regularizers.SquaredGroupLasso(0.01), regularizers.L2(1e-3)),
        schedule=schedules.InvSqrt(1.0),
        radius="auto",
    )
    return OnlineMKL(**{**base, **over})


def _drifting(n: int = 2400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A linear concept whose labels flip at n/3 and flip back at 2n/3: two rises of the loss."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    Y = np.sign(X @ np.array([1.0, -1.0, 0.5]))
    Y[n // 3 : 2 * n // 3] *= -1
    return X, Y


def test_learn_many_records_the_block_norms_before_each_round() -> None:
    X, Y = _drifting(300)
    one, many = _model(), _model()
    norms, regs = [], []
    for x, y in zip(X, Y, strict=True):
        norms.append(one.block_norms)
        regs.append(one.regularization_value())
        one.learn(x, y)
    B = np.empty((300, 3))
    many.learn_many(X[:100], Y[:100], block_norms=B[:100])
    many.learn_many_prepared(X[100:], Y[100:], B[100:])
    assert many.digest() == one.digest()
    np.testing.assert_array_equal(B, np.array(norms))
    np.testing.assert_array_equal(many.regularization_values(B), np.array(regs))
    with pytest.raises(ValueError, match="block_norms"):
        many.learn_many(X[:5], Y[:5], block_norms=np.empty((5, 2)))


def test_schedule_etas_are_eta_of_each_round() -> None:
    t = np.arange(1, 5001)
    for sched in (schedules.Constant(0.3), schedules.InvSqrt(0.37), schedules.InvT(1e-3)):
        np.testing.assert_array_equal(sched.etas(1, 5000), [sched.eta(int(i)) for i in t])
        assert sched.etas(40, 3).tolist() == [sched.eta(40), sched.eta(41), sched.eta(42)]


def test_objective_update_many_is_update_of_each_pair() -> None:
    rng = np.random.default_rng(0)
    losses, regs = rng.exponential(size=200), rng.exponential(size=200) * 1e-3
    losses[17], regs[90], losses[150] = math.nan, math.inf, 1e308  # counted, not added
    regs[151] = 1e308
    one, many = OnlineObjective(), OnlineObjective()
    for v, r in zip(losses, regs, strict=True):
        one.update(v, r)
    for lo, hi in [(0, 10), (10, 11), (11, 120), (120, 150), (150, 200)]:
        many.update_many(losses[lo:hi], regs[lo:hi])
    assert many.to_state() == one.to_state() and one.n_nonfinite == 2


def test_feature_norms_of_many_rows_are_those_of_each_row() -> None:
    model = _model(
        kernels=(
            kernels.Linear(features=(0, 2)),
            kernels.Polynomial(3, coef0=0.5, normalize=False),
            kernels.RBF(0.5, n_components=8),
            kernels.Linear(normalize=True, name="unit"),
        ),
        radius=None,
    )
    model.declare_features(["x0", "x1", "x2", "x3", "x4"])
    rng = np.random.default_rng(1)
    X = rng.normal(size=(257, 5)) * rng.choice([0.0, 1.0, 7.0], size=(257, 1))
    one, many = FeatureNorms(), FeatureNorms()
    rows = [one.update(model, x) for x in X]
    cuts = [(0, 1), (1, 64), (64, 257)]
    got = np.concatenate([many.update_many(model, X[lo:hi]) for lo, hi in cuts])
    np.testing.assert_array_equal(got, rows)
    assert many.max_sq == one.max_sq == max(rows)
    x = X[3]
    want = x[[0, 2]] @ x[[0, 2]] + (x @ x + 0.5) ** 3 + 2.0 + float(x @ x > 0)
    assert rows[3] == pytest.approx(want, rel=1e-12)


def test_window_append_many_freezes_and_cuts_as_row_appends() -> None:
    rng = np.random.default_rng(2)
    X, Y, terms = rng.normal(size=(230, 4)), rng.normal(size=230), rng.normal(size=(230, 4))
    X[:40, 3] = 0.0  # the first rows are narrower (a feature appeared later)
    one, many = ExampleWindow(100, 30), ExampleWindow(100, 30)
    cuts_one = [one.n_seen for i in range(40) if one.append(X[i, :3], Y[i], tuple(terms[i]))]
    cuts_one += [one.n_seen for i in range(40, 230) if one.append(X[i], Y[i], tuple(terms[i]))]
    cuts_many = []
    for lo, hi in [(0, 1), (1, 40)]:
        cuts_many += many.append_many(X[lo:hi, :3], Y[lo:hi], terms[lo:hi])
    for lo, hi in [(40, 41), (41, 95), (95, 96), (96, 230)]:
        cuts_many += many.append_many(X[lo:hi], Y[lo:hi], terms[lo:hi])
    assert [end for _, end in cuts_many] == cuts_one == [30, 60, 90, 120, 150, 180, 210]
    assert [len(chunks) for chunks, _ in cuts_many] == [1, 2, 3, 4, 4, 4, 4]
    a, b = one.cut(), many.cut()
    assert a.end == b.end == 210 and a.n == b.n == 100
    for field in ("X", "Y", "terms"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert many.n_seen == 230 and many._current is not None and many._current.n == 20


def test_windowed_regret_requests_the_same_fits_row_by_row_or_by_chunks() -> None:
    class Recording:
        method, exact = "recording", False

        def __init__(self) -> None:
            self.fits: list[tuple[int, np.ndarray]] = []

        def fit(self, config, keys, X, Y):
            self.fits.append((X.shape[0], Y.copy()))
            return type("R", (), {"objective": 0.0, "epochs": 1})()

    model = _model()
    X, Y = _drifting(250)
    one = WindowedRegret(model, 100, 40, Recording(), background=False)
    many = WindowedRegret(model, 100, 40, Recording(), background=False)
    ones = np.ones(250)
    for i in range(250):
        one.observe(X[i], Y[i], 1.0, 0.5, 0.1, 2.0)
    for lo, hi in [(0, 39), (39, 41), (41, 200), (200, 250)]:
        n = hi - lo
        many.observe_many(X[lo:hi], Y[lo:hi], ones[:n], ones[:n] / 2, ones[:n] / 10, ones[:n] * 2)
    ends = [e.end for e in one.history]
    assert [e.end for e in many.history] == ends == [40, 80, 120, 160, 200, 240]
    for (n1, y1), (n2, y2) in zip(one.comparator.fits, many.comparator.fits, strict=True):
        assert n1 == n2 and np.array_equal(y1, y2)


def test_history_rows_are_due_when_a_chunk_crosses_their_multiple() -> None:
    h = History("/nonexistent", every=100, max_rows=10)
    assert h.due(100) and not h.due(150)
    assert h.due(100, 50) and h.due(120, 99) and not h.due(199, 100) and h.due(250, 150)
    ends = [0, 37, 50, 100, 163, 200, 201, 399, 400, 1000]
    assert [t for s, t in itertools.pairwise(ends) if h.due(t, s)] == [100, 200, 399, 400, 1000]
    h.stride = 2
    assert not h.due(399, 200) and h.due(400, 399) and h.due(300, 100)


def test_detector_update_many_is_update_of_each_value() -> None:
    rng = np.random.default_rng(4)
    values = np.concatenate([0.2 + 0.05 * rng.normal(size=900), 0.8 + 0.05 * rng.normal(size=900)])
    values[[5, 700]] = math.nan, math.inf  # skipped
    one = LossDriftDetector("adwin", memory=400)
    many = LossDriftDetector("adwin", memory=400)
    rises = [i for i, v in enumerate(values) if one.update(v, i)]
    got: list[int] = []
    for lo, hi in [(0, 1), (1, 333), (333, 1200), (1200, 1800)]:
        got += many.update_many(values[lo:hi].tolist(), lo)
    assert got == rises and len(rises) == 1 and 900 <= rises[0] < 1000
    assert (many.n_restarts, many.n_ignored, many.last_restart) == (
        one.n_restarts, one.n_ignored, one.last_restart
    )  # fmt: skip
    assert many.inputs == one.inputs and 0 < len(one.inputs) < 400
    assert (many.detector.width, many.detector.total) == (one.detector.width, one.detector.total)


def _loop(model: OnlineMKL, shadows: bool = True, **over) -> MonitoredLoop:
    settings = dict(
        window=300, every=100, comparator=EpochComparator(max_epochs=3), background=False,
        stride=50, detector_memory=500,
    )  # fmt: skip
    return MonitoredLoop(model, Monitor(model, **{**settings, **over}), shadows=shadows)


def _monitor(model: OnlineMKL, **over) -> Monitor:
    return _loop(model, shadows=False, **over).monitor


def _same(a: MonitoredLoop, b: MonitoredLoop) -> None:
    assert a.model.digest() == b.model.digest()
    ma, mb = a.monitor, b.monitor
    assert ma.to_state() == mb.to_state()
    sa, sb = a.snapshot(), b.snapshot()
    for key in sa:
        assert sa[key] == sb[key] or (math.isnan(sa[key]) and math.isnan(sb[key])), key
    assert ma.detector.inputs == mb.detector.inputs
    assert (ma.detector.detector.width, ma.detector.detector.total) == (
        mb.detector.detector.width, mb.detector.detector.total
    )  # fmt: skip
    assert [e.end for e in ma.regret.history] == [e.end for e in mb.regret.history]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_chunks_cut_anywhere_give_the_row_by_row_model_and_monitor(seed: int) -> None:
    """The key property: restarts land at multiples of the stride, so a stream learned row by
    row and the same stream learned in compiled chunks (batches of any size, some of one row,
    ending on and off the boundaries, with a checkpoint of model + monitor between a detection
    and its boundary) end identical."""
    X, Y = _drifting()
    model = _model()
    ref = _loop(model)
    events: list[tuple[int, int]] = []  # (detection index, schedule restart after example)
    for i, (x, y) in enumerate(zip(X, Y, strict=True)):
        before = ref.monitor.detector.n_restarts
        ref.learn_one(x, y)
        if ref.monitor.detector.n_restarts != before:
            events.append((i, -1))
        if model.schedule.t == 0:
            events.append((-1, i))
    detections = [i for i, j in events if j == -1]
    restarts = [j for i, j in events if i == -1]
    assert len(detections) == 2 and len(restarts) == 2  # two rises, each restarts once ...
    for d, r in zip(detections, restarts, strict=True):  # ... at the next multiple of 50
        assert r + 1 == 50 * (d // 50 + 1)
    assert model.schedule.t == len(X) - restarts[-1] - 1

    rng = np.random.default_rng(seed)
    ends = set(np.cumsum(rng.choice([1, 1, 2, 49, 50, 51, 97, 150, 333], size=100)).tolist())
    ends |= {detections[0] + 1 + seed, len(X)}  # a batch ends before the first restart
    live = _model()
    loop = _loop(live)
    checkpointed = False
    i = 0
    for end in sorted(e for e in ends if e <= len(X)):
        loop.learn_many(X[i:end], Y[i:end])
        i = end
        mon = loop.monitor
        if not checkpointed and mon.restart_pending:  # between a detection and its boundary
            checkpointed = True
            state, inputs = mon.to_state(), list(mon.detector.inputs)
            assert state["restart_pending"] and mon.n % 50
            live = OnlineMKL.from_state(*live.to_state())
            restored = _loop(live)
            restored.monitor.restore(state)
            for j, v in enumerate(inputs):  # the daemon's replay of the detector's log
                restored.monitor.detector.update(v, mon.n - len(inputs) + j)
            restored.shadows, restored.monitor.regret = loop.shadows, mon.regret  # metrics only
            restored.shadows.model = restored.monitor.regret.model = live  # type: ignore[union-attr]
            loop = restored
    assert checkpointed
    _same(ref, loop)


def test_a_run_observed_with_its_terms_keeps_the_monitor_observe_run_keeps() -> None:
    """observe_run with the run's terms (run_terms once for the run, the window fed by one
    observe_window call) keeps the monitor observe_run keeps piece by piece without them:
    objective, feature norms, β samples and β after each piece, and the window's fits (their
    objectives and bounds: the rows' losses, regularizer values, step sizes, feature norms)."""
    X, Y = _drifting(700)
    pieces = ((0, 130), (130, 400), (400, 401), (401, 700))
    kept = []
    for with_terms in (False, True):
        model = _model()
        mon = _monitor(model, detector=None)
        norms = np.empty((701, len(model.kernels)))
        losses, scores = model.learn_many(X, Y, block_norms=norms[:700])
        norms[700] = model.block_norms
        regs = model.regularization_values(norms[:700])
        terms = mon.run_terms(X, norms) if with_terms else None
        betas = []
        for a, b in pieces:
            seen = mon.observe_run(X[a:b], Y[a:b], losses[a:b], regs[a:b], scores[a:b],
                                   norms[a : b + 1], ahead=700 - b, terms=terms)  # fmt: skip
            assert seen.kept == b - a and not seen.restart
            betas.append(mon.kernel_weights().tolist())
        if terms is not None:
            assert mon.regret is not None and mon.regret.n_requested == 0  # fed apart
            mon.observe_window(X, Y, losses, regs, terms)
        kept.append((mon, betas))
    (plain, plain_betas), (termed, termed_betas) = kept
    assert termed_betas == plain_betas
    assert termed.to_state() == plain.to_state() and termed.beta.to_state()["samples"]
    a, b = plain.snapshot(), termed.snapshot()
    assert all(a[k] == b[k] or (math.isnan(a[k]) and math.isnan(b[k])) for k in a), (a, b)
    assert plain.regret is not None and termed.regret is not None
    assert len(plain.regret.history) >= 3 and termed.regret.history == plain.regret.history


def test_a_run_observed_without_its_block_norms_may_not_cross_a_beta_sample() -> None:
    model = _model()
    loop = _loop(model, shadows=False, window=None, beta_stride=50)
    mon = loop.monitor
    X, Y = _drifting(100)
    loop.learn_many(X[:30], Y[:30])
    assert mon.rows_to_boundary() == 20
    norms = np.empty((21, 3))
    losses, scores = model.learn_many(X[30:51], Y[30:51], block_norms=norms)
    with pytest.raises(ValueError, match="block norms are needed"):
        mon.observe_run(X[30:51], Y[30:51], losses, model.regularization_values(norms), scores)
    with pytest.raises(ValueError, match="22 rows"):
        mon.observe_run(X[30:51], Y[30:51], losses, model.regularization_values(norms), scores,
                        norms=norms)  # fmt: skip


def test_the_monitor_never_changes_the_model() -> None:
    """It asks for restarts (observe returns True, observe_run's ``restart``); the model's
    schedule restarts only when the caller restarts it."""
    X, Y = _drifting()
    model = _model()
    mon = _monitor(model, stride=1, window=None)
    asked = []
    for i, (x, y) in enumerate(zip(X, Y, strict=True)):
        digest = model.digest()
        reg = model.regularization_value()
        loss = model.learn(x, y)
        learned = model.digest()
        if mon.observe(x, y, loss, reg):
            asked.append(i)
        assert model.digest() == learned != digest  # observing changed nothing
    assert len(asked) == 2 and model.schedule.t == len(X)  # asked twice, never restarted


def test_stride_one_restarts_right_after_the_detection_and_validation() -> None:
    X, Y = _drifting()
    model = _model()
    loop = _loop(model, shadows=False, stride=1, window=None)
    restarted, detected = [], []
    for i, (x, y) in enumerate(zip(X, Y, strict=True)):
        before = loop.monitor.detector.n_restarts
        reg = model.regularization_value()
        if loop.observe(x, y, model.learn(x, y), reg):
            restarted.append(i)
        if loop.monitor.detector.n_restarts != before:
            detected.append(i)
    assert restarted == detected and len(restarted) == 2  # right after the detecting example
    assert loop.monitor.beta.stride == 20  # lag 1000 / 50
    assert _monitor(_model(), stride=30).beta.stride == 30
    assert _monitor(_model(), stride=7, beta_lag=1000).beta.stride == 21
    with pytest.raises(ValueError, match="multiple of stride"):
        _monitor(_model(), stride=50, beta_stride=20)
    with pytest.raises(ValueError, match="at least the stride"):
        _monitor(_model(), stride=50, beta_lag=40)
    with pytest.raises(ValueError, match="stride"):
        _monitor(_model(), stride=0)
    with pytest.raises(ValueError, match="another model"):
        MonitoredLoop(_model(), loop.monitor)


def test_save_point_takes_a_run_back_bit_for_bit() -> None:
    X, Y = _drifting(600)
    model = _model()
    model.learn_many(X[:100], Y[:100])
    point = model.save_point()
    before = model.digest()
    model.learn_many(X[100:400], Y[100:400])
    assert model.digest() != before
    model.restore_point(point)
    assert model.digest() == before
    again = _model()
    again.learn_many(X[:100], Y[:100])
    for m in (model, again):
        m.learn_many(X[100:600], Y[100:600])
    assert model.digest() == again.digest()  # the restored model learns on identically


@pytest.mark.parametrize("detector_input", ["loss", "error"])
def test_one_run_over_the_whole_stream_is_row_by_row(detector_input: str) -> None:
    """runs() learns the stream in one compiled loop per run; a rise whose restart falls
    inside the run takes the model back and learns the rounds up to the restart again: the
    model, monitor and drift events are row by row's, and segments end on the multiples of
    ``cut`` with β (and the bound's round count) as of their end."""
    X, Y = _drifting()
    ref = _loop(_model(), detector_input=detector_input)
    beta_at, rounds_at, rises_ref = {}, {}, []
    for i, (x, y) in enumerate(zip(X, Y, strict=True)):
        reg = ref.model.regularization_value()
        scores = np.atleast_1d(ref.model.decision(x))
        before = ref.monitor.detector.n_restarts
        ref.observe(x, y, ref.model.learn(x, y), reg, scores)
        if ref.monitor.detector.n_restarts != before:
            rises_ref.append(i)
        if (i + 1) % 100 == 0:
            beta_at[i + 1] = ref.model.kernel_weights.tolist()
            rounds_at[i + 1] = ref.snapshot()["regret_bound_rounds"]
    assert len(rises_ref) == 2

    loop = _loop(_model(), detector_input=detector_input)
    ends, rises = [], []
    for seg in loop.runs(X, Y, cut=100):
        ends.append(seg.stop)
        rises += seg.rises
        assert all(seg.start <= r < seg.stop for r in seg.rises)
        if seg.stop % 100 == 0:
            assert loop.monitor.kernel_weights().tolist() == beta_at[seg.stop], seg.stop
            assert loop.snapshot()["regret_bound_rounds"] == rounds_at[seg.stop], seg.stop
    assert rises == rises_ref
    # segments end on every multiple of cut, and runs on the restarts (multiples of the stride)
    assert set(range(100, len(X) + 1, 100)) <= set(ends) and ends[-1] == len(X)
    assert all(e % 50 == 0 for e in ends) and len(ends) > len(X) // 100
    assert 0 < loop.n_relearned < len(X)  # two restarts fell inside runs: rounds learned again
    _same(ref, loop)


def test_without_restarts_nothing_is_learned_twice() -> None:
    X, Y = _drifting()
    for over in ({"restart_on_drift": False}, {"detector": None}):
        loop = _loop(_model(), **over)
        segments = list(loop.runs(X, Y))
        assert [(s.start, s.stop) for s in segments] == [(0, len(X))]
        assert loop.n_relearned == 0 and loop.model.t == len(X)
