"""numpy's seeding of a generator, compiled: ``SeedSequence(entropy).generate_state(4,
np.uint64)``, the words ``np.random.default_rng(entropy)`` seeds its PCG64 with, bit for bit
(numpy's algorithm: the entropy's 32-bit words hashed into a pool of four, mixed, then hashed
out). A model draws every input's random features from its own (seed, name, input) seed
(``kernel_base.generator_for``): computed here, a new input's seeding costs well under a
microsecond instead of numpy's ~10 (``tests/test_kernel_identity.py`` checks the words against
numpy's for many seeds)."""

from __future__ import annotations

import numpy as np
from numba import njit

from streammkl.core._jit import JIT

# SeedSequence's constants (numpy/random/bit_generator.pyx); every product below is of two
# 32-bit values, so it fits in 64 bits (no overflow, the same in Python and compiled)
_INIT_A = np.uint64(0x43B0D7E5)
_MULT_A = np.uint64(0x931E8875)
_INIT_B = np.uint64(0x8B51F9DD)
_MULT_B = np.uint64(0x58F38DED)
_MIX_L = np.uint64(0xCA01F9DD)
_MIX_R = np.uint64(0x4973F715)
_M32 = np.uint64(0xFFFFFFFF)
_T32 = np.uint64(0x100000000)
_S16 = np.uint64(16)
_S32 = np.uint64(32)
_U0 = np.uint64(0)


def _seed_state(entropy, out):
    """``SeedSequence(entropy).generate_state(4, np.uint64)`` into ``out`` (4,) uint64 for an
    ``entropy`` (uint64) below 2**64 and no spawn key."""
    ent = np.empty(4, dtype=np.uint64)
    ent[0] = entropy & _M32
    ent[1] = entropy >> _S32
    ent[2] = _U0
    ent[3] = _U0
    mixer = np.empty(4, dtype=np.uint64)
    h = _INIT_A
    for i in range(4):  # hashmix of each word (a missing word hashes as 0)
        v = ent[i] ^ h
        h = (h * _MULT_A) & _M32
        v = (v * h) & _M32
        mixer[i] = v ^ (v >> _S16)
    for s in range(4):
        for d in range(4):
            if s != d:
                v = mixer[s] ^ h
                h = (h * _MULT_A) & _M32
                v = (v * h) & _M32
                v = v ^ (v >> _S16)
                r = (((_MIX_L * mixer[d]) & _M32) + _T32 - ((_MIX_R * v) & _M32)) & _M32
                mixer[d] = r ^ (r >> _S16)
    h = _INIT_B
    for k in range(4):  # eight 32-bit words, paired little-endian into four 64-bit ones
        lo = mixer[(2 * k) % 4] ^ h
        h = (h * _MULT_B) & _M32
        lo = (lo * h) & _M32
        lo = lo ^ (lo >> _S16)
        hi = mixer[(2 * k + 1) % 4] ^ h
        h = (h * _MULT_B) & _M32
        hi = (hi * h) & _M32
        hi = hi ^ (hi >> _S16)
        out[k] = lo | (hi << _S32)


seed_state = njit(**JIT)(_seed_state)
