"""Hashed feature templates of arc-factored dependency parsing: arc scores and arc features.

A sentence is a table ``tok`` (n + 1 + 2 PAD, A) of 64-bit hashes of token attributes: row
``p + PAD`` holds position ``p`` (0 = the root, 1..n the tokens, the PAD rows on either side the
sentence boundaries), column ``a`` one attribute (form, POS, a morphological feature, ...).
Template ``t`` is a conjunction of ``n_atoms[t]`` atoms ``atoms[t, j] = (kind, offset, column)``:
an attribute of the head, of the modifier (at an offset), of each token between them (one feature
per in-between token), the direction or the bucketed distance of the arc; head atoms come first
(``n_head[t]`` of them, hashed once per head). A feature's 64-bit key mixes the template's seed
with its atom values; its coordinate in the weights is ``off[t] + (key & mask[t])``, i.e. a
hashed block of ``mask[t] + 1`` (a power of two) coordinates per template, one MKL group each.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from streammkl.core._jit import JIT, JIT_INLINE

A_HEAD, A_MOD, A_BETWEEN, A_DIR, A_DIST = 0, 1, 2, 3, 4  # atom kinds
PAD = 2  # boundary rows on either side of a sentence: offsets -2..+2 stay inside the table

_K1 = np.uint64(0x9E3779B97F4A7C15)
_F1 = np.uint64(0xFF51AFD7ED558CCD)
_F2 = np.uint64(0xC4CEB9FE1A85EC53)
_S29 = np.uint64(29)
_S33 = np.uint64(33)


def _mix(h, v):
    """Fold one 64-bit value into a running hash (multiply-xorshift)."""
    h = (h ^ v) * _K1
    return h ^ (h >> _S29)


mix = njit(**JIT_INLINE)(_mix)


def _finish(h):
    """MurmurHash3's 64-bit finaliser: every output bit depends on every input bit."""
    h ^= h >> _S33
    h *= _F1
    h ^= h >> _S33
    h *= _F2
    return h ^ (h >> _S33)


finish = njit(**JIT_INLINE)(_finish)


def _distance_bucket(d):
    """1, 2, 3, 4, 5, 6-10, 11+ (McDonald et al. 2005) as 1..7."""
    if d <= 5:
        return d
    return 6 if d <= 10 else 7


distance_bucket = njit(**JIT_INLINE)(_distance_bucket)


def _atom_value(kind, offset, col, h, m, b, tok, n):
    """The 64-bit value of one atom for the arc h -> m (b: the in-between token, if any)."""
    if kind == A_DIR:
        return np.uint64(1) if h < m else np.uint64(2)
    if kind == A_DIST:
        return np.uint64(distance_bucket(abs(h - m)))
    if kind == A_HEAD:
        p = h + offset
    elif kind == A_MOD:
        p = m + offset
    else:
        p = b + offset
    p = min(max(p, -PAD), n + PAD)
    return tok[p + PAD, col]


atom_value = njit(**JIT_INLINE)(_atom_value)


def _arc_key(t, prefix, h, m, b, tok, n, atoms, n_atoms, n_head):
    """The finished key of template t at the arc h -> m given the hash of its head atoms."""
    key = prefix
    for j in range(n_head[t], n_atoms[t]):
        key = mix(key, atom_value(atoms[t, j, 0], atoms[t, j, 1], atoms[t, j, 2], h, m, b, tok, n))
    return finish(key)


arc_key = njit(**JIT_INLINE)(_arc_key)


def _head_prefix(t, h, tok, n, seed, atoms, n_head):
    key = seed[t]
    for j in range(n_head[t]):
        key = mix(key, atom_value(atoms[t, j, 0], atoms[t, j, 1], atoms[t, j, 2], h, 0, 0, tok, n))
    return key


head_prefix = njit(**JIT_INLINE)(_head_prefix)


def _arc_scores(
    tok, n, seed, off, mask, atoms, n_atoms, n_head, between, live, coef, w, u, out,
):  # fmt: skip
    """``out[h, m] = sum_t coef[t] sum_{features f of t at h -> m} w[f]`` (minus ``u[f]`` when
    ``u`` is not empty: the running average's numerator ``cum w - u``), over the ``live``
    templates only (a zero block adds nothing: sparse MKL's pruned templates cost nothing).
    ``between[t]`` is the index of the template's in-between atom, or -1. Column 0 and the
    diagonal are 0 (no arc enters the root; no self-arcs).
    """
    n1 = n + 1
    for h in range(n1):
        for m in range(n1):
            out[h, m] = 0.0
    use_u = u.shape[0] > 0
    row = np.empty(n1, dtype=np.int64)  # the row's coordinates first, then one gather loop:
    for t in range(seed.shape[0]):  # the loads of a row are independent and overlap in memory
        if not live[t]:
            continue
        a = off[t]
        mk = mask[t]
        c = coef[t]
        for h in range(n1):
            # np.uint64: the prefix stays a uint64 when the Python original runs
            prefix = np.uint64(head_prefix(t, h, tok, n, seed, atoms, n_head))
            if between[t] < 0:
                for m in range(1, n1):
                    key = arc_key(t, prefix, h, m, 0, tok, n, atoms, n_atoms, n_head)
                    row[m] = a + np.int64(key & mk)
                if use_u:
                    for m in range(1, n1):
                        out[h, m] += c * w[row[m]] - u[row[m]]
                else:
                    for m in range(1, n1):
                        out[h, m] += c * w[row[m]]
                continue
            for m in range(1, n1):
                if m == h:
                    continue
                s = 0.0
                for b in range(min(h, m) + 1, max(h, m)):
                    key = arc_key(t, prefix, h, m, b, tok, n, atoms, n_atoms, n_head)
                    j = a + np.int64(key & mk)
                    s += c * w[j] - u[j] if use_u else c * w[j]
                out[h, m] += s
    for h in range(n1):  # self-arcs (scored above to keep the row loops branch-free) do not exist
        out[h, h] = 0.0


arc_scores = njit(**JIT)(_arc_scores)


def _arc_features(
    tok, n, heads, mods, signs, seed, off, mask, atoms, n_atoms, n_head, between,
    keys, idx, blk, val,
):  # fmt: skip
    """Every feature of the arcs ``heads[i] -> mods[i]`` with value ``signs[i]``: its key, its
    coordinate, its template; returns the count (the outputs must hold
    ``len(heads) * sum_t (n if between[t] >= 0 else 1)`` entries)."""
    count = 0
    for i in range(heads.shape[0]):
        h = heads[i]
        m = mods[i]
        for t in range(seed.shape[0]):
            # np.uint64: the prefix stays a uint64 when the Python original runs
            prefix = np.uint64(head_prefix(t, h, tok, n, seed, atoms, n_head))
            lo = 0
            hi = 1
            if between[t] >= 0:
                lo = min(h, m) + 1
                hi = max(h, m)
            for b in range(lo, hi):
                key = arc_key(t, prefix, h, m, b, tok, n, atoms, n_atoms, n_head)
                keys[count] = key
                idx[count] = off[t] + np.int64(key & mask[t])
                blk[count] = t
                val[count] = signs[i]
                count += 1
    return count


arc_features = njit(**JIT)(_arc_features)
