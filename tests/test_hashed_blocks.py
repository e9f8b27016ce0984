"""The sparse path of explicit blocks (core.hashed, core._numba.sparse) against dense rounds."""

from __future__ import annotations

import numpy as np
import pytest

from streammkl.core import _numba as nb
from streammkl.core import regularizers as R
from streammkl.core.hashed import HashedBlocks

SIZES = [8, 4, 16, 2]


def _dense_round(theta, off, regs, radius, idx, val, eta):
    """Alg. 1 on a dense theta: gradient step, prox of each regularizer on the block norms
    (Prop. 1: rescale every block, 0/0 := 0), projection."""
    theta = theta.copy()
    np.add.at(theta, idx, eta * val)
    M = len(off) - 1
    b = np.array([np.linalg.norm(theta[off[m] : off[m + 1]]) for m in range(M)])
    new = b.copy()
    for reg in regs:
        new = reg.prox_norms(new, eta)
    if radius is not None:
        new = R.Ball(radius).prox_norms(new, eta)
    for m in range(M):
        block = theta[off[m] : off[m + 1]]
        block *= new[m] / b[m] if b[m] > 0 and new[m] > 0 else 0.0
    return theta


def _random_direction(rng, blocks, n_max=7, only=None):
    n = int(rng.integers(0, n_max))
    blk = rng.choice(only if only is not None else len(SIZES), size=n).astype(np.int64)
    idx = np.array([blocks.off[b] + rng.integers(0, SIZES[b]) for b in blk], dtype=np.int64)
    return idx, blk, rng.normal(size=n)


@pytest.mark.parametrize(
    ("regs", "radius"),
    [
        ((R.SquaredGroupLasso(0.3),), None),
        ((R.L2(0.2),), 1.5),
        ((R.GroupLasso(0.4),), None),
        ((R.ElasticNetMKL(0.3, 0.5),), None),
        ((R.GroupLq(0.2, 1.5), R.SquaredGroupLasso(0.05)), 2.0),
    ],
)
def test_sparse_rounds_equal_dense_rounds_and_norms_stay_exact(regs, radius):
    rng = np.random.default_rng(0)
    blocks = HashedBlocks(SIZES, regs, radius=radius, average=True)
    theta = np.zeros(blocks.off[-1])
    iterates = []
    zeroed = 0
    for t in range(1, 400):
        only = [0] if t % 50 < 10 else None  # some rounds leave blocks untouched
        idx, blk, val = _random_direction(rng, blocks, only=only)
        eta = 1.0 / np.sqrt(t)
        before = blocks.norms > 0
        blocks.step(idx, blk, val, idx.size, eta)
        theta = _dense_round(theta, blocks.off, regs, radius, idx, val, eta)
        zeroed += int(np.sum(before & (blocks.norms == 0)))
        np.testing.assert_allclose(blocks.weights(), theta, atol=1e-10)
        dense_norms = [np.linalg.norm(theta[blocks.off[m] : blocks.off[m + 1]]) for m in range(4)]
        np.testing.assert_allclose(blocks.norms, dense_norms, rtol=1e-9, atol=1e-12)
        assert np.all((blocks.norms == 0) == [not theta[blocks.off[m] : blocks.off[m + 1]].any()
                                              for m in range(4)])  # fmt: skip
        iterates.append(theta.copy())
    np.testing.assert_allclose(blocks.averaged_weights(), np.mean(iterates, axis=0), atol=1e-9)
    if isinstance(regs[0], R.SquaredGroupLasso | R.GroupLasso):
        assert zeroed > 0  # the sparse zeroing path ran


def test_a_block_that_was_zero_is_cleared_sparsely_and_a_live_one_whole():
    blocks = HashedBlocks([1 << 16, 4], (R.GroupLasso(10.0),))
    # one write on a zero block: the prox zeroes it again; only that coordinate was written
    blocks.step(np.array([5]), np.array([0]), np.array([1.0]), 1, 1.0)
    assert blocks.norms[0] == 0.0 and not blocks.w.any()
    # a live block (norm > threshold), then one large shrink to zero
    blocks.regularizers = (R.GroupLasso(0.0),)
    blocks.step(np.array([7, 9]), np.array([0, 0]), np.array([3.0, 4.0]), 2, 1.0)
    assert blocks.norms[0] == pytest.approx(5.0)
    blocks.regularizers = (R.GroupLasso(100.0),)
    blocks.step(np.array([11]), np.array([0]), np.array([1.0]), 1, 1.0)
    assert blocks.norms[0] == 0.0 and not blocks.w.any() and blocks.scale[0] == 1.0


def test_a_decaying_scale_is_folded_and_the_average_keeps_its_digits():
    rng = np.random.default_rng(1)
    blocks = HashedBlocks([32], (R.L2(50.0),), average=True)
    theta = np.zeros(32)
    iterates = []
    for _ in range(300):  # each round shrinks by 1/(1 + 0.5 * 50): the scale underflows fast
        idx = rng.integers(0, 32, size=3)
        val = rng.normal(size=3)
        blocks.step(idx, np.zeros(3, dtype=np.int64), val, 3, 0.5)
        theta = _dense_round(theta, blocks.off, (R.L2(50.0),), None, idx, val, 0.5)
        iterates.append(theta.copy())
        assert blocks.scale[0] >= nb.AVERAGE_FLOOR
    np.testing.assert_allclose(blocks.weights(), theta, rtol=1e-9, atol=1e-14)
    np.testing.assert_allclose(blocks.averaged_weights(), np.mean(iterates, axis=0), rtol=1e-7)


def test_state_round_trip_keeps_tracked_norms_and_refuses_bad_arrays():
    rng = np.random.default_rng(2)
    blocks = HashedBlocks(SIZES, (R.SquaredGroupLasso(0.1),), average=True)
    for t in range(1, 60):
        blocks.step(*_random_direction(rng, blocks)[:2], rng.normal(size=0), 0, 1.0 / t)
        idx, blk, val = _random_direction(rng, blocks)
        blocks.step(idx, blk, val, idx.size, 1.0 / np.sqrt(t))
    arrays = blocks.to_arrays()
    assert arrays["w_index"].size == blocks.n_nonzero < blocks.off[-1]
    twin = HashedBlocks(SIZES, (R.SquaredGroupLasso(0.1),), average=True)
    twin.load_arrays(arrays)
    for name in ("w", "scale", "norms", "u", "cum", "since_exact", "ever"):
        np.testing.assert_array_equal(getattr(twin, name), getattr(blocks, name))
    bad = dict(arrays, norms=arrays["norms"] * 2 + 1)
    with pytest.raises(ValueError, match="norms"):
        twin.load_arrays(bad)
    bad = dict(arrays, w_index=arrays["w_index"] + 1000)
    with pytest.raises(ValueError, match="outside"):
        twin.load_arrays(bad)


def test_coordinate_regularizers_are_refused():
    with pytest.raises(ValueError, match="single coordinates"):
        HashedBlocks(SIZES, (R.L1(0.1),))
    with pytest.raises(ValueError, match="single coordinates"):
        HashedBlocks(SIZES, (R.SparseGroupLasso(0.1),))


def test_compiled_sparse_loops_match_python():
    rng = np.random.default_rng(3)
    off = np.array([0, 8, 12, 28, 30], dtype=np.int64)
    for averaging in (False, True):
        P = int(off[-1])
        w = rng.normal(size=P) * (rng.random(P) < 0.5)
        scale = rng.uniform(0.5, 2.0, size=4)
        norms = np.array([scale[m] * np.linalg.norm(w[off[m] : off[m + 1]]) for m in range(4)])
        u = rng.normal(size=P) if averaging else np.zeros(0)
        cum = rng.uniform(1, 3, size=4) if averaging else np.zeros(0)
        idx = rng.integers(0, P, size=9)
        blk = np.searchsorted(off, idx, side="right") - 1
        val = rng.normal(size=9)
        since = np.array([0, 3, 100, 1], dtype=np.int64)
        args = (idx, blk, val, 9, 0.7, w, scale, norms, off, since, u, cum)
        ca = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        pa = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        nb.sparse_step(*ca)
        nb.sparse_step.py_func(*pa)
        for a, b in zip(ca, pa, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-12)
        new = ca[7] * np.array([0.5, 0.0, 1e-120, 1.0])
        was_zero = np.array([False, False, True, False])
        ra = (new, idx, blk, 9, was_zero, ca[5], ca[6], ca[7], off, ca[10], ca[11])
        rb = (new, idx, blk, 9, was_zero, pa[5], pa[6], pa[7], off, pa[10], pa[11])
        nb.sparse_rescale(*ra)
        nb.sparse_rescale.py_func(*rb)
        for a, b in zip(ra, rb, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-12)
        out_c, out_p = np.zeros(4), np.zeros(4)
        nb.exact_norms(ca[5], ca[6], off, out_c)
        nb.exact_norms.py_func(pa[5], pa[6], off, out_p)
        np.testing.assert_allclose(out_c, out_p, rtol=1e-12)
        assert nb.block_sqnorm(w, 0, 8) == pytest.approx(nb.block_sqnorm.py_func(w, 0, 8))
        wc, wp = w.copy(), w.copy()
        uc, up = u.copy(), u.copy()
        nb.zero_entries(wc, 3, uc, 2.0)
        nb.zero_entries.py_func(wp, 3, up, 2.0)
        np.testing.assert_array_equal(wc, wp)
        np.testing.assert_array_equal(uc, up)
