"""One Gaussian bandwidth for a mixing group: the median heuristic over the group's inputs.

A ``MedianRBF`` fits its bandwidth to the inputs its learner saw (``core.bandwidth``); the
members of a group see different inputs, and a random Fourier block's frequencies scale with its
bandwidth, so members that fitted their own bandwidths would hold weights over different
feature maps that cannot be averaged. In a group the bandwidths are therefore
part of the merged base, decided by the merge alone:

- every member learns with ``OnlineMKL.hold_bandwidths`` set: it keeps its warm-up inputs (the
  base's reservoir followed by its own first inputs) but never changes a bandwidth itself, so
  every delta of a round is learned over the base's feature maps and merges coordinate by
  coordinate (:func:`align` only has to settle round 0, whose base holds kernels without a
  bandwidth: the members fitted them provisionally at their first input);
- after the merge, :func:`decide` makes the single learner's decision on the group's data: the
  provisional bandwidths are rescaled when the number of inputs has grown by a quarter, and once
  the group's reservoir (the base's rows, then the members' new rows taken in turn, member by
  member in name order) holds ``WARMUP`` inputs, every provisional bandwidth becomes
  ``scale / median`` over it. A block whose bandwidth changes restarts at zero, exactly as the
  single learner's block does (its weights were over other random features); the others keep
  their merged weights.

The result depends only on the base and the members' states (every reader computes the same).
Kernels are matched by their names, which never change; their bandwidths are state
(``MedianRBF.fit``) that travels with the members' states.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from streammkl.core import bandwidth
from streammkl.core import kernels as kernels_mod
from streammkl.core.kernels import Kernel, MedianRBF
from streammkl.core.model import OnlineMKL

__all__ = ["align", "decide", "keep", "median_bank"]

StateT = tuple[Mapping[str, Any], Mapping[str, np.ndarray]]


def median_bank(kernels: Sequence[Kernel]) -> bool:
    """Whether a bank has a bandwidth from the median heuristic (fitted or not yet)."""
    return any(isinstance(k, MedianRBF) for k in kernels)


def _unfitted(k: Kernel) -> bool:
    return isinstance(k, MedianRBF) and k.fit is None


def _model(state: StateT) -> OnlineMKL:
    model = OnlineMKL.from_state(dict(state[0]), dict(state[1]))
    model.hold_bandwidths = True
    return model


def align(
    base: StateT,
    members: Sequence[tuple[str, int, StateT, StateT | None]],
    kernels: Sequence[Kernel] | None = None,
) -> tuple[StateT, list[StateT], list[StateT | None], np.ndarray, list[str]]:
    """Put the base and every member on one bank before the merge, and pool the reservoirs.

    ``members``: (name, examples, state, since) of every delta (``since``: the older base of a
    stale one). Returns the base's and the members' states (and their ``since``) on the bank
    the merge uses (the base's), the group's reservoir rows (at most ``WARMUP``) and the input
    names of their columns. Round 0's base holds ``MedianRBF`` kernels without a bandwidth,
    which take the provisional one of the member that learned the most examples (ties: the
    first name); a member that fitted another (it met another number of inputs first), or a
    late member whose delta was learned on a bandwidth the group has changed since, restarts
    that block at zero: its delta for that block is dropped.

    ``kernels``: the base's bank, if the caller has the base's model (its kernels are what
    the meta says: not built again from it, which cost a group member 5 % of its CPU)."""
    kernels = _bank(base) if kernels is None else tuple(kernels)
    if not median_bank(kernels):  # fixed bandwidths: nothing to agree on
        states = [s for _, _, s, _ in members]
        return base, states, [s for *_, s in members], np.zeros((0, 0)), []
    if _settled(kernels, base, members):  # a settled group's every round: nothing to align
        keys = list(base[0]["feature_keys"])
        states = [s for _, _, s, _ in members]
        return base, states, [s for *_, s in members], np.zeros((0, len(keys))), keys
    b = _model(base)
    models = [_model(s) for _, _, s, _ in members]
    olds = [None if since is None else _model(since) for _, _, _, since in members]
    bank = list(b.kernels)
    order = sorted(range(len(members)), key=lambda i: (-members[i][1], members[i][0]))
    for m, k in enumerate(bank):
        if _unfitted(k):
            for i in order:
                cand = models[i].kernels[m] if len(models[i].kernels) == len(bank) else k
                if not _unfitted(cand):
                    bank[m] = cand
                    break
    key = bandwidth.bank_key(bank)
    changed = False
    for model in [b, *models, *(o for o in olds if o is not None)]:
        if len(model.kernels) == len(bank) and bandwidth.bank_key(model.kernels) != key:
            # round 0's templates, or a late delta learned before the group's warm-up ended:
            # blocks of another bandwidth restart (dropped), the others keep their weights
            model.replace_kernels(tuple(bank))
            changed = True
    keys = list(b.feature_keys)
    keys += sorted({k for m in models + olds if m is not None for k in m.feature_keys} - set(keys))
    rows = _pool(b, models, olds, [name for name, *_ in members], keys)
    if not changed:
        return base, [s for _, _, s, _ in members], [s for *_, s in members], rows, keys
    states = [m.to_state() for m in models]
    return b.to_state(), states, [None if o is None else o.to_state() for o in olds], rows, keys


def _bank(state: StateT) -> tuple[Kernel, ...]:
    """A state's kernels with their fitted bandwidths, from its meta (no layout is built)."""
    meta = state[0]
    if int(meta.get("version", 0)) < 4:  # (older banks are converted when the model is built)
        return _model(state).kernels
    specs = meta["config"]["kernels"]
    return bandwidth.restored(
        tuple(kernels_mod.from_spec(k) for k in specs), dict(meta.get("bandwidths", {}))
    )


def _settled(
    kernels: Sequence[Kernel],
    base: StateT,
    members: Sequence[tuple[str, int, StateT, StateT | None]],
) -> bool:
    """Whether the base's bandwidths are all final and every state (its ``since`` too) has the
    base's configuration, bandwidths and inputs and no reservoir: :func:`align` would then
    change nothing and pool no rows (so no model is built per state)."""
    if bandwidth.has_pending(kernels) or "warmup_inputs" in base[1]:
        return False
    meta = base[0]
    states = [s for _, _, s, _ in members] + [s for *_, s in members if s is not None]
    return all(
        s[0].get("config") == meta.get("config")
        and s[0].get("bandwidths") == meta.get("bandwidths")
        and s[0].get("feature_keys") == meta.get("feature_keys")
        and "warmup_inputs" not in s[1]
        for s in states
    )


def _on(model: OnlineMKL, rows: np.ndarray, keys: list[str]) -> np.ndarray:
    """Rows over ``model``'s inputs as rows over ``keys`` (absent inputs: 0)."""
    out = np.zeros((rows.shape[0], len(keys)))
    where = {k: j for j, k in enumerate(keys)}
    for j, key in enumerate(model.feature_keys[: rows.shape[1]]):
        out[:, where[key]] = rows[:, j]
    return out


def _pool(
    base: OnlineMKL,
    models: Sequence[OnlineMKL],
    olds: Sequence[OnlineMKL | None],
    names: Sequence[str],
    keys: list[str],
) -> np.ndarray:
    """The group's reservoir: the base's rows, then every member's rows beyond its own base's,
    one member at a time in name order, at most the bank's warm-up (``bandwidth.warmup``)."""
    size = bandwidth.warmup(base.kernels)
    pooled = [_on(base, base.warmup_rows, keys)]
    own: list[np.ndarray] = []
    for i in sorted(range(len(models)), key=lambda i: names[i]):
        old = olds[i]
        start = (old if old is not None else base).warmup_rows.shape[0]
        own.append(_on(models[i], models[i].warmup_rows[start:], keys))
    turn = 0
    while sum(p.shape[0] for p in pooled) < size and any(o.shape[0] > turn for o in own):
        pooled += [o[turn : turn + 1] for o in own if o.shape[0] > turn]
        turn += 1
    return np.concatenate(pooled)[:size]


def decide(merged: OnlineMKL, rows: np.ndarray, keys: Sequence[str]) -> None:
    """The group's bandwidths for the merged model, in place (see the module docstring): the
    single learner's rescale for the number of inputs, then, with ``WARMUP`` pooled rows, the
    median heuristic; the reservoir (``rows`` over the inputs ``keys``) kept while a bandwidth
    is still provisional."""
    if not median_bank(merged.kernels) or not merged.feature_keys:
        return
    if list(keys) != merged.feature_keys:  # the merge's inputs, in its order
        where = {k: j for j, k in enumerate(keys)}
        rows = rows[:, [where[k] for k in merged.feature_keys]]
    bank = bandwidth.for_inputs(merged.kernels, len(merged.feature_keys))
    if bandwidth.has_pending(bank) and rows.shape[0] >= bandwidth.warmup(bank):
        bank = bandwidth.after_warmup(bank, rows, merged.feature_keys)
    if bandwidth.bank_key(bank) != bandwidth.bank_key(merged.kernels):
        merged.hold_bandwidths = True
        merged.replace_kernels(tuple(bank))
    merged.keep_warmup(rows if bandwidth.has_pending(merged.kernels) else None)


def holds(kernels: Sequence[Kernel], n_inputs: int) -> bool:
    """Whether :func:`decide` and :func:`keep` leave a merged model of this bank on
    ``n_inputs`` inputs as the merge made it (no bandwidth decided, no reservoir kept): fixed
    bandwidths, or final ones for that number of inputs (a settled group's every round)."""
    if not median_bank(kernels) or not n_inputs:
        return True
    if bandwidth.has_pending(kernels):
        return False
    return bandwidth.bank_key(bandwidth.for_inputs(kernels, n_inputs)) == bandwidth.bank_key(
        kernels
    )


def keep(merged: OnlineMKL, rows: np.ndarray, keys: Sequence[str]) -> None:
    """A rebase's reservoir (:func:`streammkl.core.mixing.merge` with ``prox=False``): the
    pooled rows, kept while a bandwidth is provisional, and no bandwidth decided (the group's
    merges decide them; a member holds them)."""
    merged.hold_bandwidths = True
    if not median_bank(merged.kernels) or not merged.feature_keys:
        return
    if list(keys) != merged.feature_keys:
        where = {k: j for j, k in enumerate(keys)}
        rows = rows[:, [where[k] for k in merged.feature_keys]]
    merged.keep_warmup(rows if bandwidth.has_pending(merged.kernels) else None)
