"""The draws of an input's random features, compiled.

- ``philox`` / ``draw_rows``: a counter-based generator, the draws of
  models made since state version 6 (``kernel_base.DRAWS``). The ``i``-th number an input
  draws is a pure function of (the input's key, its stream, ``i``): Philox4x32-10 (Salmon,
  Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC 2011; the
  generator of Random123, cuRAND, JAX and TensorFlow, which passes TestU01's BigCrush for
  every key) maps the 128-bit counter ``(i, stream, 0, 0)`` under the 64-bit key to four
  32-bit words, two 53-bit uniforms; Box-Muller turns each pair of uniforms into a pair of
  standard normals. So an input's draws need no generator object and no seeding: a new
  input's ``D`` normals cost ``D/2`` Philox calls in one compiled loop. Every product is of two
  32-bit values (fits in 64 bits: the same numbers compiled and in Python).
- ``seed_state``: numpy's seeding of a generator, ``SeedSequence(entropy).generate_state(4,
  np.uint64)``, the words ``np.random.default_rng(entropy)`` seeds its PCG64 with, bit for bit
  (numpy's algorithm: the entropy's 32-bit words hashed into a pool of four, mixed, then hashed
  out): the draws of models saved before state version 6, which are drawn again as they were
  when such a model is loaded (``kernel_base.generator_for``: a new input's seeding well under
  a microsecond instead of numpy's ~10; ``tests/test_kernel_identity.py`` checks the words
  against numpy's for many seeds)."""

from __future__ import annotations

import numpy as np
from numba import njit

from streammkl.core._jit import JIT, JIT_INLINE
from streammkl.core._numba.features import fast_cos

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


# Philox4x32's constants (Random123): round multipliers and the key's Weyl increments
_PM0 = np.uint64(0xD2511F53)
_PM1 = np.uint64(0xCD9E8D57)
_PW0 = np.uint64(0x9E3779B9)
_PW1 = np.uint64(0xBB67AE85)
_S11 = np.uint64(11)
_TWO53 = 1.0 / 9007199254740992.0  # 2**-53
_TAU = 2.0 * np.pi
_HALF_PI = 0.5 * np.pi
_S8 = np.uint64(8)
_U255 = np.uint64(0xFF)


def _crc_table() -> np.ndarray:
    """The 256 entries of the reflected CRC-32 table (polynomial 0xEDB88320: zlib's)."""
    out = np.empty(256, dtype=np.uint64)
    for n in range(256):
        c = n
        for _ in range(8):
            c = (0xEDB88320 ^ (c >> 1)) if c & 1 else c >> 1
        out[n] = c
    return out


_CRC_TABLE = _crc_table()


def _philox(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 of the counter ``(c0, c1, c2, c3)`` under the key ``(k0, k1)`` (each a
    uint64 below 2**32): four uint64, each below 2**32. Returned, not written to an array, so
    a loop over counters vectorises (each lane's 32-bit products in one instruction: ~8x
    faster than through a scratch array, the same numbers)."""
    for r in range(10):
        if r:
            k0 = (k0 + _PW0) & _M32
            k1 = (k1 + _PW1) & _M32
        p0 = _PM0 * c0  # two 32-bit values: below 2**64
        p1 = _PM1 * c2
        c0, c1, c2, c3 = (p1 >> _S32) ^ c1 ^ k0, p1 & _M32, (p0 >> _S32) ^ c3 ^ k1, p0 & _M32
    return c0, c1, c2, c3


def _unit_pair(i, stream, k0, k1):
    """The two uniforms in [0, 1) of counter ``i`` of ``stream`` (53 bits each, numpy's
    ``(u64 >> 11) * 2**-53``)."""
    w0, w1, w2, w3 = philox(np.uint64(i), stream, _U0, _U0, k0, k1)
    a = ((w0 << _S32) | w1) >> _S11
    b = ((w2 << _S32) | w3) >> _S11
    return float(a) * _TWO53, float(b) * _TWO53


def _draw_row(k0, k1, stream, normal, a, b, out, u, v):
    """``out[:]``: the draws of the input keyed ``(k0, k1)`` on ``stream``, two per counter
    ``i`` from its uniforms ``(u, v)`` (``out[2i]``, ``out[2i + 1]``); ``u``, ``v`` (at least
    ``(len(out) + 1) // 2``) are scratch.

    ``normal``: ``a`` times standard normals, Box-Muller's pair ``sqrt(-2 log(1 - u))`` times
    the cosine and the sine of ``2 pi v`` (``1 - u`` in (0, 1]: no log of 0; ``fast_cos``,
    within 2 ulp of the library's, the sine as ``cos(2 pi v - pi/2)``); else uniforms in
    ``[a, b)``, ``a + (b - a) u`` and ``a + (b - a) v``. The uniforms first, then one loop of
    logs and cosines (it vectorises but for the log)."""
    n = out.shape[0]
    half = (n + 1) // 2
    width = b - a
    for i in range(half):
        u[i], v[i] = unit_pair(i, stream, k0, k1)
    if not normal:
        for i in range(n // 2):
            out[2 * i] = a + width * u[i]
            out[2 * i + 1] = a + width * v[i]
        if n % 2:
            out[n - 1] = a + width * u[half - 1]
        return
    for i in range(n // 2):
        r = a * np.sqrt(-2.0 * np.log(1.0 - u[i]))
        t = _TAU * v[i]
        out[2 * i] = r * fast_cos(t)
        out[2 * i + 1] = r * fast_cos(t - _HALF_PI)
    if n % 2:
        r = a * np.sqrt(-2.0 * np.log(1.0 - u[half - 1]))
        out[n - 1] = r * fast_cos(_TAU * v[half - 1])


def _draw_rows(k0s, k1s, stream, normal, a, b, out):
    """``out[j, :]``: the draws of the input keyed ``(k0s[j], k1s[j])`` on ``stream``
    (:func:`draw_row`'s, row by row). One function for normals and uniforms (one compilation
    on a fresh checkout)."""
    half = (out.shape[1] + 1) // 2
    u = np.empty(half)
    v = np.empty(half)
    for j in range(k0s.shape[0]):
        draw_row(k0s[j], k1s[j], stream, normal, a, b, out[j], u, v)


def _crc32(crc, data, lo, hi):
    """``zlib.crc32(bytes(data[lo:hi]), crc)``: the CRC-32 of the bytes continued from ``crc``
    (a uint64 below 2**32, 0 to start), as the draws' keys are made (``kernel_base.draw_keys``;
    ``crc32(a + b) == crc32(b, crc32(a))``, so a kernel's name is hashed once and only the
    input's bytes per input)."""
    c = crc ^ _M32
    for i in range(lo, hi):
        c = _CRC_TABLE[(c ^ np.uint64(data[i])) & _U255] ^ (c >> _S8)
    return c ^ _M32


philox = njit(**JIT_INLINE)(_philox)
unit_pair = njit(**JIT_INLINE)(_unit_pair)
# ``draw_row`` and ``crc32`` are called, not inlined: one compilation each serves ``draw_rows``
# and every call site of ``place._place_inputs`` (inlined there, a fresh checkout's first
# ``learn_one`` compiled ~4 s longer)
draw_row = njit(**JIT)(_draw_row)
draw_rows = njit(**JIT)(_draw_rows)
crc32 = njit(**JIT)(_crc32)
