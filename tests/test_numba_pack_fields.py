"""``core._numba.pack.field``: a structref's fields read without taking references (for the
functions compiled without reference counting, ``JIT_NORC``), the same arrays as numba's own
attribute reads, and in a function that counts references, one taken and dropped as there."""

from __future__ import annotations

import sys

import numpy as np
from numba import njit

from streammkl.core import OnlineMKL, kernels, regularizers, schedules
from streammkl.core import _numba as nb
from streammkl.core._jit import JIT, JIT_NORC


def _probe(f, w_avg, average, out):
    """Numbers read through an explicit round's view ``f`` and two more fields."""
    out[0] = f.w[0, 1]
    out[1] = f.phi.shape[0]
    out[2] = f.ex_off[f.ex_off.shape[0] - 1]
    out[3] = f.rho
    out[4] = f.loss_code
    out[5] = f.avg_w.shape[0]
    out[6] = w_avg.shape[1]
    out[7] = 1.0 if average else 0.0
    out[8] = f.scale[0]


_probe_inline = njit(inline="always", **JIT)(_probe)


@njit(**JIT_NORC)
def _borrowed(p, out):
    """``_probe`` on borrowed fields, without reference counting."""
    f = nb.borrowed_view(p)
    _probe_inline(f, nb.field(p, "w_avg"), nb.field(p, "average"), out)


@njit(**JIT)
def _borrowed_counted(p, out):
    """``_probe`` on ``field`` reads in a function that counts references."""
    f = nb.borrowed_view(p)
    _probe_inline(f, nb.field(p, "w_avg"), nb.field(p, "average"), out)


@njit(**JIT)
def _owned(p, out):
    """``_probe`` on numba's own attribute reads."""
    _probe_inline(nb.explicit_view(p), p.w_avg, p.average, out)


@njit(**JIT_NORC)
def _write_bias(p, value):
    """Writes through a borrowed field: into the pack's own array."""
    nb.field(p, "bias")[0] = value


def _model() -> OnlineMKL:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 3))
    model = OnlineMKL(kernels=(kernels.Linear(), kernels.RBF(0.5, n_components=8)),
                      regularizer=regularizers.GroupLasso(0.01), schedule=schedules.FTRL(),
                      averages=(10, 100), average=True)  # fmt: skip
    model.learn_many(X, np.sign(X[:, 0]))
    assert model._args.fast  # (the explicit round: ``learn_predict_explicit``)
    return model


def test_borrowed_fields_are_the_packs_own():
    model = _model()
    pack = model._args.pack  # (the round's pack: what the compiled rounds take)
    want, got, counted = np.zeros(9), np.full(9, -1.0), np.full(9, -2.0)
    _owned(pack, want)
    _borrowed(pack, got)
    _borrowed_counted(pack, counted)
    state = model.state
    assert want[0] == state.w[0, 1] and want[5] == state.avg_w.shape[0] and want[7] == 1.0
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(counted, want)
    _write_bias(pack, 7.5)
    assert state.bias[0] == 7.5  # the state's array itself, not a copy


def test_borrowed_reads_take_and_drop_no_reference():
    """A read that dropped a reference it did not take would free the pack's arrays (numba's
    meminfo releases its numpy array: the Python count falls); one that kept a reference,
    the other way round."""
    model = _model()
    pack = model._args.pack
    state = model.state
    arrays = [state.w, state.avg_w, state.w_avg, state.scale, state.bias]
    before = [sys.getrefcount(a) for a in arrays]
    out = np.zeros(9)
    for _ in range(500):
        _borrowed(pack, out)
        _borrowed_counted(pack, out)
    assert [sys.getrefcount(a) for a in arrays] == before
    held = pack._meminfo.refcount
    rng = np.random.default_rng(4)
    for x in rng.normal(size=(300, 3)):
        model.learn(x, 1.0 if x[0] > 0 else -1.0)  # (learn_predict_explicit: borrowed fields)
    assert model._args.pack is pack
    assert [sys.getrefcount(a) for a in arrays] == before
    assert pack._meminfo.refcount == held  # (the pack is freed once its model drops it)
