"""Laying out a record's new inputs in every block of a bank at once: ``place_inputs``.

``core.layout.Layout.extend`` writes each new input's own columns (its random Fourier row, its
additive components, its linear column, its mask entries). Block by block in Python that cost
3-7 µs per block per record whatever the number of new inputs (a bag-of-words document brings
new words in most records); here one compiled call writes them all, drawing each input's random
numbers where they go (``draws.draw_row``, the same function ``draw_rows`` uses, so the same
numbers bit for bit) and hashing its name into each kernel's draw keys (``draws.crc32``
continued from the kernel's name, as ``kernel_base.draw_keys`` does).

What each block does is a *place kind* (below), fixed by its kernel; the Python caller keeps
the cases this does not cover (a block over a subset of the inputs, the quadratic map while it
has room, landmarks over the new inputs, an odd quadrature, numpy's per-input generators).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from streammkl.core._jit import JIT
from streammkl.core._numba.draws import crc32, draw_row
from streammkl.core._numba.features import map_cos

# What ``place_inputs`` writes for a block's new inputs
PLACE_NONE = 0  # nothing (the caller lays the block out, or it takes no more inputs)
PLACE_MASK = 1  # an implicit block: its view's mask entries
PLACE_RFF = 2  # a random Fourier block: the inputs' rows of frequencies, drawn
PLACE_ZERO = 3  # a landmark block whose landmarks have no value of the new inputs: rows of 0
PLACE_LINEAR = 4  # a linear block: a column per input
PLACE_STUMPS = 5  # additive stumps: R columns per input at the block's thresholds
PLACE_QUADRATURE = 6  # the additive Gaussian's quadrature (even R): R/2 uniforms per input
PLACE_ADDITIVE = 7  # the additive Gaussian's random draws: R normals and R uniforms per input

_NORMALS = np.uint64(0)  # the draws' streams (``kernel_base``'s)
_UNIFORMS = np.uint64(1)
_TWO_PI = 2.0 * np.pi
_HALF_PI = 0.5 * np.pi


def _place_inputs(
    new, kbytes, koff, start, kinds, comps, scales, crc0, sbytes, soff, vals, voff,
    view_of, ex_off, phi_src, rff_wt, masks, in_pos, blk_inputs, ex_used,
):  # fmt: skip
    """Write the columns of the new inputs ``new`` (ascending input indices) in every block.

    The inputs' names are UTF-8 bytes ``kbytes[koff[j]:koff[j + 1]]``; ``start`` is the CRC-32
    of the seed's 8 bytes. Per block ``m``: its place kind ``kinds[m]``, components per input
    ``comps[m]`` (D of a Fourier block, R of an additive one), the draws' scale ``scales[m]``
    (``sqrt(2 gamma)``), ``crc0[m]`` the CRC-32 of its draw name and ``\\x1f``, and
    ``sbytes[soff[m]:soff[m + 1]]`` the bytes ``\\x1f`` + its draw name (an input's draw key is
    ``crc32(name \\x1f key)``, ``crc32(key \\x1f name)`` from ``start``:
    ``kernel_base.draw_keys``); ``vals[voff[m]:voff[m + 1]]`` its per-component constants
    (a quadrature's frequencies, the stumps' thresholds). The layout's arrays (``Layout``'s
    fields of these names) are written in place, as ``Layout._place`` does block by block."""
    n = new.shape[0]
    M = kinds.shape[0]
    width = 1
    for m in range(M):
        width = max(width, comps[m])
    u = np.empty((width + 1) // 2)
    v = np.empty((width + 1) // 2)
    row = np.empty(width)  # the frequencies drawn (a Fourier row, an additive block's)
    row2 = np.empty(width)  # the offsets drawn (an additive block's)
    k1s = np.empty(n, dtype=np.uint64)
    for j in range(n):  # crc32(key, start): each input's share of its second key word
        k1s[j] = crc32(start, kbytes, koff[j], koff[j + 1])
    for m in range(M):
        kind = kinds[m]
        if kind == PLACE_NONE:
            continue
        if kind == PLACE_MASK:
            for j in range(n):
                masks[view_of[m], new[j]] = 1.0
            continue
        a = ex_off[m]
        R = comps[m]
        p0 = blk_inputs[m]
        c = voff[m]
        fourier = kind == PLACE_RFF or kind == PLACE_ZERO  # every input a row of frequencies
        r0 = int(phi_src[0, a]) if fourier else 0
        for j in range(n):
            i = new[j]
            in_pos[m, i] = i if fourier else p0 + j
            lo = a + R * (p0 + j)
            if kind == PLACE_ZERO:
                for r in range(R):
                    rff_wt[i, r0 + r] = 0.0
                continue
            if kind == PLACE_LINEAR:
                phi_src[0, lo] = i
                phi_src[2, lo] = 1.0
                continue
            if kind == PLACE_STUMPS:
                for r in range(R):
                    phi_src[0, lo + r] = i
                    phi_src[1, lo + r] = vals[c + r]
                continue
            k0 = np.uint64(crc32(crc0[m], kbytes, koff[j], koff[j + 1]))
            k1 = np.uint64(crc32(k1s[j], sbytes, soff[m], soff[m + 1]))
            # the draws, one call site: a Fourier row's normals; a quadrature's R/2 offsets;
            # an i.i.d. additive block's R normals, then its R offsets
            for step in range(2 if kind == PLACE_ADDITIVE else 1):
                uniform = kind == PLACE_QUADRATURE or step == 1
                size = R // 2 if kind == PLACE_QUADRATURE else R
                out = row2 if uniform else row
                draw_row(k0, k1, _UNIFORMS if uniform else _NORMALS, not uniform,
                         0.0 if uniform else scales[m], _TWO_PI if uniform else 0.0,
                         out[:size], u, v)  # fmt: skip
            if kind == PLACE_RFF:  # (element by element: a slice copy compiles a shape check)
                for r in range(R):
                    rff_wt[i, r0 + r] = row[r]
                continue
            if kind == PLACE_QUADRATURE:  # offsets b_i and b_i + pi/2 at the strata's frequencies
                for r in range(R // 2 - 1, -1, -1):  # (in place, from the end)
                    row2[2 * r + 1] = row2[r] + _HALF_PI
                    row2[2 * r] = row2[r]
                for r in range(R):
                    row[r] = vals[c + r]
            for r in range(R):  # an additive block: input, offset, frequency, anchor
                phi_src[0, lo + r] = i
                phi_src[1, lo + r] = row2[r]
                phi_src[2, lo + r] = row[r]
                phi_src[3, lo + r] = map_cos(row2[r])
        blk_inputs[m] = p0 + n
        if not fourier:
            ex_used[m] = R * (p0 + n)


place_inputs = njit(**JIT)(_place_inputs)
