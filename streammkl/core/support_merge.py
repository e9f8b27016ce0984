"""Merging the kernelized blocks of a mixing group (:func:`streammkl.core.mixing.merge`): the
members' support sets united, weighted, then cut back to the budget by the model's own policy.

A kernelized block is a function ``f_m = sum_s a_ms k_m(x_s, .) v_s`` over the support pairs
``(x_s, v_s)`` shared by the implicit blocks (``a_ms = scale_m coef[m, s]``). A member starts a
round from the base's pairs and ends it with some of them (their coefficients changed by its
prox steps; some merged, projected or removed by its budget) plus the pairs it added. The merged
function is, exactly as for explicit weights,

    f = f_base + sum_i (n_i / N) (f_i - f_ref_i)

(``ref_i`` the base member i learned from: the merge's base, or an older one for a stale
member). Every term is a sum over pairs, so the merged function is a sum over the **union** of
the pairs, each pair's coefficient the weighted sum of its coefficients in every term (0 where a
term lacks it): the base's own weight ``1 - sum_fresh n_i / N`` is computed from integers, so
that a base pair every fresh member dropped gets exactly 0 and leaves the set.

Pairs are matched by identity, not by value: the key of a pair is its insertion stamp (``age``,
kept by learning and by merges for the base's pairs; a budget merge of two pairs stamps the new
one) together with the exact bytes of its input (on the merged model's input columns) and of its
output direction. A base pair a member kept has the same key in both; a pair a member's budget
merged is a new pair (a new stamp) and the base's originals are missing from that member, so
their coefficients fall by that member's weight — the function is the weighted one whatever the
members' budgets did. Pairs new to the group are stamped in the union's order (base first, then
the members sorted by name): every member computes the same set, bit for bit.

The union then holds up to ``|S_base| + sum_i |new_i|`` pairs; the model's budget policy
(``merge``, ``project``, ``smallest`` or ``oldest``: ``core.budget``) takes budget steps until it
fits, exactly the steps a learner takes when its set is full (``_numba.shrink_support``). The
block norms are then recomputed exactly from the Gram quadratic form (not carried through the
steps), before the regularizer's prox (in ``core.mixing``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from streammkl.core import _numba as nb
from streammkl.core import budget as budgets
from streammkl.core.model import OnlineMKL
from streammkl.core.state import BlockState, Layout

__all__ = ["Pairs", "merge_support", "pairs_of", "support_norms", "unite"]

Key = tuple[int, bytes, bytes]


@dataclass(frozen=True)
class Pairs:
    """Support pairs on the merged model's inputs, outputs and bank: identity keys, inputs
    ``sx`` (n, d), output directions ``sv`` (n, K), scaled coefficients ``coef`` (M, n) (the
    model's ``scale_m coef[m, s]``) and insertion stamps ``age`` (n,)."""

    keys: tuple[Key, ...]
    sx: np.ndarray
    sv: np.ndarray
    coef: np.ndarray
    age: np.ndarray

    def __len__(self) -> int:
        return len(self.keys)


def _keyed(age: np.ndarray, sx: np.ndarray, sv: np.ndarray) -> tuple[Key, ...]:
    return tuple((int(a), x.tobytes(), v.tobytes()) for a, x, v in zip(age, sx, sv, strict=True))


def pairs_of(model: OnlineMKL, keys: Sequence[str], layout: Layout, n_outputs: int) -> Pairs:
    """``model``'s support pairs on the merged layout: its input columns placed by input name
    (``keys``: the merged model's inputs; inputs it never met are 0, as in its own pairs for
    inputs added after them), its outputs padded to ``n_outputs``."""
    S = model.state
    M = layout.kinds.shape[0]
    n = 0 if S is None else S.n_support
    sx = np.zeros((n, len(keys)))
    sv = np.zeros((n, n_outputs))
    coef = np.zeros((M, n))
    age = np.zeros(n, dtype=np.int64)
    if S is not None and n:
        where = {k: j for j, k in enumerate(keys)}
        own = model.feature_keys[: S.sx.shape[1]]
        sx[:, [where[k] for k in own]] = S.sx[:n, : len(own)]
        sv[:, : S.sv.shape[1]] = S.sv[:n]
        own_layout = model.layout
        implicit = ~own_layout.is_explicit if own_layout is not None else np.zeros(M, bool)
        coef[:] = S.coef[:, :n] * (S.scale * implicit)[:, None]
        age[:] = S.age[:n]
    return Pairs(_keyed(age, sx, sv), sx, sv, coef, age)


def unite(terms: Sequence[tuple[float, Pairs]], next_age: int) -> tuple[Pairs, int]:
    """The weighted sum ``sum_j w_j f_j`` of the terms as one set of pairs, and the next stamp.

    Pairs with the same key are one pair; the first term's pairs keep their stamps, the others'
    are stamped ``next_age, next_age + 1, ...`` in order of appearance; pairs whose coefficients
    are all zero are left out. The result depends on the order of ``terms`` (which the caller
    fixes: base first, members by name)."""
    index: dict[Key, int] = {}
    src: list[tuple[int, int]] = []
    for j, (_, p) in enumerate(terms):
        for s, key in enumerate(p.keys):
            if key not in index:
                index[key] = len(src)
                src.append((j, s))
    n = len(src)
    M = terms[0][1].coef.shape[0] if terms else 0
    d = terms[0][1].sx.shape[1] if terms else 0
    K = terms[0][1].sv.shape[1] if terms else 0
    coef = np.zeros((M, n))
    for w, p in terms:
        if w != 0.0 and len(p):
            np.add.at(coef.T, [index[k] for k in p.keys], w * p.coef.T)
    keep = np.flatnonzero(np.any(coef != 0.0, axis=0))
    sx, sv = np.zeros((keep.size, d)), np.zeros((keep.size, K))
    age = np.zeros(keep.size, dtype=np.int64)
    for row, u in enumerate(keep):
        j, s = src[u]
        p = terms[j][1]
        sx[row], sv[row] = p.sx[s], p.sv[s]
        if j == 0:
            age[row] = p.age[s]
        else:
            age[row] = next_age
            next_age += 1
    return Pairs(_keyed(age, sx, sv), sx, sv, np.ascontiguousarray(coef[:, keep]), age), next_age


def support_norms(layout: Layout, sx: np.ndarray, sv: np.ndarray, coef: np.ndarray) -> np.ndarray:
    """The exact block norms ``||sum_s coef[m, s] phi_m(x_s) (x) v_s||`` (Gram quadratic form,
    O(n^2) kernel values per implicit block; 0 for explicit blocks)."""
    n = sx.shape[0]
    M = layout.kinds.shape[0]
    ssq = np.zeros((n, layout.n_views))
    kself = np.zeros((n, M))
    nb.pair_views(n, layout.im_blocks, layout.view_of, layout.masks, layout.view_full,
                  layout.kinds, layout.kp, sx, ssq, kself)  # fmt: skip
    out = np.zeros(M)
    nb.support_sqnorms(n, layout.im_blocks, layout.view_of, layout.masks, layout.view_full,
                       layout.kinds, layout.kp, sx, ssq, sv, coef, out)  # fmt: skip
    return np.sqrt(np.maximum(out, 0.0))


def merge_support(
    state: BlockState,
    layout: Layout,
    keys: Sequence[str],
    base: OnlineMKL,
    members: Sequence[tuple[int, OnlineMKL, OnlineMKL | None]],
    stats: dict[str, float] | None = None,
) -> None:
    """Fill ``state``'s support set (unit scales) with the members' merged kernelized blocks
    and its implicit block norms, exactly (see the module docstring).

    ``members``: (n_i, model_i, ref_i) sorted by member name; ``ref_i`` the older base of a
    stale member, None for a fresh one. ``stats`` (if given) receives ``support_union`` (pairs
    in the union), ``support_pairs`` (after the budget), ``budget_steps``, ``support_seconds``
    and ``delta_sqnorm`` (the squared norm of the kernelized blocks' weighted change)."""
    t0 = time.perf_counter()
    K = state.sv.shape[1]
    N = sum(n for n, _, _ in members)
    fresh = sum(n for n, _, ref in members if ref is None)
    changes: list[tuple[float, Pairs]] = []
    for n, model, ref in members:
        w = n / N if N > 0 else 0.0
        changes.append((w, pairs_of(model, keys, layout, K)))
        if ref is not None:
            changes.append((-w, pairs_of(ref, keys, layout, K)))
    own = pairs_of(base, keys, layout, K)
    next_age = int(base.state.counters[1]) if base.state is not None else 0
    base_weight = (N - fresh) / N if N > 0 else 1.0  # 0 exactly when every member is fresh
    union, next_age = unite([(base_weight, own), *changes], next_age)
    n = len(union)
    M = layout.kinds.shape[0]
    state.sx, state.sv, state.age = union.sx.copy(), union.sv.copy(), union.age.copy()
    state.coef = np.zeros((M, n))
    state.coef[:] = union.coef
    state.ssq, state.kself = np.zeros((n, layout.n_views)), np.zeros((n, M))
    nb.pair_views(n, layout.im_blocks, layout.view_of, layout.masks, layout.view_full,
                  layout.kinds, layout.kp, state.sx, state.ssq, state.kself)  # fmt: skip
    state.counters[:] = (n, next_age)
    state.scale[layout.im_blocks] = 1.0
    state.gram = np.zeros((layout.im_blocks.size, 2, 0, 0))
    state.sync_gram(layout, budgets.keeps_gram(base.budget, base.budget_policy))
    steps = 0
    # the budget steps choose their pairs without the norms (they only update them): the exact
    # norms are computed once, on the set that stays
    state.norms[layout.im_blocks] = 0.0
    if base.budget is not None and n > base.budget:
        steps = int(
            nb.shrink_support(
                budgets.policy_code(base.budget_policy), base.budget, layout.im_blocks,
                layout.view_of, layout.masks, layout.view_full, layout.kinds, layout.kp,
                state.sx, state.ssq, state.sv, state.coef, state.kself, state.age,
                state.counters, state.scale, state.norms, state.gram,
            )
        )  # fmt: skip
    kept = state.n_support
    exact = support_norms(layout, state.sx[:kept], state.sv[:kept], state.coef[:, :kept])
    state.norms[layout.im_blocks] = exact[layout.im_blocks]
    state.resize_support(
        budgets.initial_capacity(base.budget)
        if base.budget is not None
        else max(budgets.INITIAL_CAPACITY, state.n_support)
    )
    if stats is not None:
        delta, _ = unite([(-fresh / N if N > 0 else 0.0, own), *changes], 0)
        stats["delta_sqnorm"] = float(np.sum(support_norms(layout, delta.sx, delta.sv,
                                                           delta.coef) ** 2))  # fmt: skip
        stats["support_union"] = float(n)
        stats["support_pairs"] = float(state.n_support)
        stats["budget_steps"] = float(steps)
        stats["support_seconds"] = time.perf_counter() - t0
