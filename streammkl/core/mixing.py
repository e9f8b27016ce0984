"""Iterative parameter mixing: one ``OnlineMKL`` for a group of learners.

Every member starts a round from the same merged *base*, learns its own examples, and ends the
round with its state and the number of examples it learned, n_i. :func:`merge` turns the base and
the members' states into the next base, the same on every member (the same inputs in the same
order give the same bits: members are sorted by name), as if one model had learned the round's
examples:

- weights of a mirror-descent schedule (``InvSqrt``, ``Constant``, ``InvT``, ``AdaGrad``):
  ``theta = theta_base + sum_i (n_i / N) (theta_i - theta_base)`` (the example-weighted delta
  merge of Vowpal Wabbit's spanning-tree mode), then **the regularizer's prox at the current step**
  on the merged block norms, so that averaging does not undo the sparsity (Yuan, Zaheer & Reddi,
  *Federated Composite Optimization*, ICML 2021, call this the curse of primal averaging);
- ``FTRL`` keeps a dual state (accumulated gradients u): the members' increments are *added*
  (``u = u_base + sum_i (u_i - u_base)``: every example's gradient counted once) and theta comes
  from the prox of the merged dual with the merged round count — dual averaging, the principled
  alternative of the same paper, which keeps the sparsity by construction;
- AdaGrad's squared-gradient sums are added, the round counts add up (``t = t_base + N``), biases
  and averaged iterates are merged like the weights.

Members may have met different new inputs during a round: the merged model's inputs are the
base's followed by the new ones in sorted order, and every explicit column is matched by what it
reads (the input names of a product map, the input and component of an additive map, the
component of a Fourier map), so members' weights add up coordinate by coordinate. Every member
must use the same kernel bank, loss, regularizer, schedule and seed (checked: the feature maps
are then the same). Kernelized blocks merge their support sets: the union of the members' pairs
(matched by identity), each coefficient the same example-weighted delta, cut back to the budget
by the model's budget policy, with exact block norms, before the prox
(:mod:`streammkl.core.support_merge`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from streammkl.core import _numba as nb
from streammkl.core import bandwidth
from streammkl.core import budget as budgets
from streammkl.core import schedules as schedules_mod
from streammkl.core.flat_state import FlatLayout
from streammkl.core.kernel_base import DRAWS
from streammkl.core.kernels import AdditiveRBF, AdditiveStumps, Kernel, MedianRBF
from streammkl.core.model import FORMAT, STATE_VERSION, OnlineMKL
from streammkl.core.state import BlockState, Layout, build_layout
from streammkl.core.support_merge import merge_support
from streammkl.statefile import same_meta

__all__ = [
    "ForeignDelta", "MemberRound", "check_mixable", "merge", "merge_saved", "rebase_onto",
]  # fmt: skip


class ForeignDelta(ValueError):
    """A member's state learned with another configuration or kernel bank than the base: it
    cannot be merged (its feature maps are not the base's)."""


@dataclass(frozen=True)
class MemberRound:
    """One member's end of a round: its name, the examples it learned since the base, and its
    state (``OnlineMKL.to_state()``).

    ``since`` is the (meta, arrays) of the older base the member learned from when its round is
    *stale* (it was late: the group merged that base's round without it); its delta
    ``state - since`` is then added to the current base like the others' (bounded staleness).
    ``None``: the member learned from the merge's base."""

    member: str
    examples: int
    meta: Mapping[str, Any]
    arrays: Mapping[str, np.ndarray]
    since: tuple[Mapping[str, Any], Mapping[str, np.ndarray]] | None = None


def check_mixable(model: OnlineMKL) -> None:
    """Raise a clear ValueError if ``model`` cannot take part in parameter mixing."""
    if model.average:
        raise ValueError(
            "average=True (the running mean of every iterate since the start) is not merged; "
            "use averages=(...) (exponential averages, merged like the weights)"
        )
    implicit = [k.name for k in model.kernels if k.implicit]
    if implicit and isinstance(model.schedule, schedules_mod.FTRL):
        raise ValueError(
            f"per-block schedules (FTRL on the explicit blocks, AdaGrad on the kernelized "
            f"ones: {', '.join(implicit)}) are not merged yet: the dual of the one and the "
            "support sets of the other would need one merge each; give the group AdaGrad, or "
            "a bank of explicit blocks under FTRL"
        )
    fitted = [k.name for k in model.kernels if k.implicit and isinstance(k, MedianRBF)]
    if fitted:
        raise ValueError(
            f"a kernelized MedianRBF ({', '.join(fitted)}: n_components unset) is not merged: "
            "its support vectors would be weighted under bandwidths the group changes; use "
            "MedianRBF(scale, n_components=D) (the default bank's Fourier maps, whose bandwidth "
            "the group agrees on) or a kernelized RBF(gamma)"
        )


def _config_key(meta: Mapping[str, Any]) -> Any:
    """What every member must share (the schedule without its round count)."""
    config = dict(meta["config"])
    return repr(sorted((k, repr(v)) for k, v in config.items()))


def column_keys(kernels: Sequence[Kernel], keys: Sequence[str], layout: Layout) -> list[tuple]:
    """For every explicit column: what it reads, independent of the order inputs arrived in."""
    out: list[tuple] = [()] * layout.width
    for m, kernel in enumerate(kernels):
        a, e = int(layout.ex_off[m]), int(layout.ex_off[m + 1])
        kind = int(layout.ex_kind[m])
        used = a + int(layout.ex_used[m])  # the free columns of the layout's room read nothing
        name = kernel.name  # (computed, not stored: once per kernel)
        per_input = (nb.MAP_ADDITIVE, nb.MAP_STUMPS)
        if kind in per_input and isinstance(kernel, AdditiveRBF | AdditiveStumps):
            R = kernel.n_components or 0
            src = layout.phi_src[0, a:used].astype(np.int64).tolist()
            out[a:used] = [(name, keys[f], i % R) for i, f in enumerate(src)]
        elif kind in (nb.MAP_RFF, nb.MAP_LANDMARK, nb.MAP_BINNING):  # column j: component j
            out[a:e] = [(name, j) for j in range(e - a)]
        else:
            src = layout.phi_src[:, a:used].astype(np.int64).tolist()
            out[a:used] = [
                (name, keys[f] if f >= 0 else None, keys[g] if g >= 0 else None)
                for f, g in zip(src[0], src[1], strict=True)
            ]
    return out


class _Aligned:
    """A member's (or the base's) state on the merged layout: theta, u, averages and the
    per-block schedule state, with zeros where it had no such column."""

    def __init__(self, model: OnlineMKL, target: Any):
        S, L = model.state, model.layout
        K = target.n_outputs
        P = target.layout.width
        self.t = model.t
        self.schedule_t = model.schedule.t
        self.theta = np.zeros((K, P))
        self.stored = np.zeros((K, P))
        self.avg_w = np.zeros((target.n_averages, K, P))
        self.bias = np.zeros(K)
        self.avg_bias = np.zeros((target.n_averages, K))
        self.avg_loss = np.zeros(target.n_averages + 1)
        self.acc = np.zeros(len(target.kernels) + 1)
        if S is None or L is None:
            return
        k = S.w.shape[0]
        where = target.column_index
        cols = column_keys(model.kernels, model.feature_keys, L)
        src = np.array([j for j, key in enumerate(cols) if key in where], dtype=np.int64)
        dst = np.array([where[cols[j]] for j in src], dtype=np.int64)
        block = np.zeros(L.width)
        for m in range(len(model.kernels)):
            block[L.ex_off[m] : L.ex_off[m + 1]] = S.scale[m]
        self.theta[:k, dst] = (S.w * block)[:, src]
        self.stored[:k, dst] = S.w[:, src]
        self.avg_w[:, :k, dst] = S.avg_w[:, :, src]
        self.bias[:k] = S.bias
        self.avg_bias[:, :k] = S.avg_bias
        self.avg_loss[:] = S.avg_loss
        names = [kk.name for kk in model.kernels]
        for m, name in enumerate(target.names):
            if name in names:
                self.acc[m] = S.step_acc[names.index(name)]
        self.acc[-1] = S.step_acc[-1]

    @classmethod
    def of_arrays(
        cls, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray], target: Any
    ) -> _Aligned:
        """The same from a state whose layout is the target's (:func:`_same_layout`): its saved
        arrays are already on the target's columns, so no model, layout or column keys are
        built (what every round of a settled group merges)."""
        self = cls.__new__(cls)
        K, L = target.n_outputs, target.layout
        self.t = int(meta["t"])
        self.schedule_t = int(meta["schedule_t"])
        w, scale = np.asarray(arrays["w"]), np.asarray(arrays["scale"])
        block = np.zeros(L.width)
        for m in range(len(target.kernels)):
            block[L.ex_off[m] : L.ex_off[m + 1]] = scale[m]
        k = w.shape[0]
        self.theta = np.zeros((K, L.width))
        self.stored = np.zeros((K, L.width))
        self.avg_w = np.zeros((target.n_averages, K, L.width))
        self.avg_bias = np.zeros((target.n_averages, K))
        self.bias = np.zeros(K)
        self.theta[:k] = w * block
        self.stored[:k] = w
        self.avg_w[:, :k] = arrays["avg_w"]
        self.bias[:k] = arrays["bias"]
        self.avg_bias[:, :k] = arrays["avg_bias"]
        self.avg_loss = np.array(arrays["avg_loss"], dtype=float)
        self.acc = np.array(arrays["step_acc"], dtype=float)
        return self


#: The saved arrays :meth:`_Aligned.of_arrays` reads (older states may lack some: general path).
_FAST_ARRAYS = ("w", "scale", "bias", "avg_w", "avg_bias", "avg_loss", "step_acc", "avg_count")


def _same_layout(
    base: OnlineMKL, base_meta: Mapping[str, Any], states: Sequence[tuple[Mapping, Mapping]]
) -> bool:
    """Whether every state (the base's among them) has the base's layout, so that its saved
    arrays (trimmed to the columns its inputs fill, whatever room its layout kept) are already
    on the merged model's columns: the same configuration, fitted bandwidths, inputs in the
    same order and outputs, and explicit blocks only (support sets merge by identity)."""
    if not base.feature_keys or base.layout is None or base.layout.im_blocks.size:
        return False
    return _on_layout_of(base_meta, states)


#: What a saved state's meta says of its layout (:func:`_on_layout_of`).
_LAYOUT_META = ("config", "bandwidths", "feature_keys", "n_outputs", "version", "draws")


def _on_layout_of(reference: Mapping[str, Any], states: Sequence[tuple[Mapping, Mapping]]) -> bool:
    """Whether every state's meta says what ``reference`` says of the layout (as JSON: a live
    model's meta has tuples where a saved one has lists) and its arrays are the fast path's."""
    for meta, arrays in states:
        if any(not same_meta(meta.get(key), reference.get(key)) for key in _LAYOUT_META):
            return False
        if any(name not in arrays for name in _FAST_ARRAYS):
            return False
    return True


class _Target:
    """The merged model's shape: the base's bank and inputs plus the members' new inputs."""

    def __init__(self, base: OnlineMKL, members: Sequence[OnlineMKL]):
        new = sorted({k for m in members for k in m.feature_keys} - set(base.feature_keys))
        self.keys = list(base.feature_keys) + new
        self.kernels = base.kernels
        self.names = [k.name for k in base.kernels]
        self.n_outputs = max([base.n_outputs, *(m.n_outputs for m in members)])
        self.n_averages = len(base.averages)
        if not new and base.layout is not None and base.layout.capacity == len(self.keys):
            self.layout = base.layout  # what build_layout would give (base is not used after)
        else:
            index = {k: i for i, k in enumerate(self.keys)}
            self.layout = build_layout(
                self.kernels, len(self.keys), base.seed, index, self.keys, draws=base.draws
            )

    @cached_property
    def column_index(self) -> dict[tuple, int]:
        """Every explicit column's key (:func:`column_keys`) -> its column."""
        cols = column_keys(self.kernels, self.keys, self.layout)
        return {key: j for j, key in enumerate(cols)}


def merge(
    base_meta: Mapping[str, Any],
    base_arrays: Mapping[str, np.ndarray],
    rounds: Sequence[MemberRound],
    stats: dict[str, float] | None = None,
    dual: str = "sum",
    prox: bool = True,
    fast: bool = True,
    base_model: OnlineMKL | None = None,
) -> OnlineMKL:
    """The next base: the merged model of the members' rounds from this base (see the module's
    docstring). The result does not depend on the order of ``rounds``.

    ``stats``, if given, receives ``delta_norm`` (the norm of the example-weighted mean change of
    theta, before the prox; kernelized blocks included), ``active_before`` and ``active_after``
    (blocks with a non-zero norm before and after the prox) and, with kernelized blocks,
    ``support_union``, ``support_pairs``, ``budget_steps`` and ``support_seconds``
    (:func:`streammkl.core.support_merge.merge_support`).

    ``dual="mean"`` averages (example-weighted) the FTRL dual increments, the squared-gradient
    sums and the schedule's round counts instead of adding them: the members then count as one
    learner that took their mean steps (mini-batch-like). Adding ("sum", the default) makes the
    merged model the learner that took all the examples' gradients, which is best while rounds
    are short; averaging is steadier when rounds are long (members' gradients, taken from the
    same stale base, repeat each other) — measured in benchmarks/results/scale_out.md.

    ``prox=False`` leaves out the regularizer's prox steps of a mirror-descent schedule (FTRL's
    weights are always the prox of its dual: its closed form, not an extra step): a *rebase*
    (one member, since = the state it published, weight 1) moves a member's own progress onto
    a merged model whose prox was applied, and the member's next rounds take their own.

    ``fast``: when every state has the base's layout (the same inputs in the same order, the
    same outputs, fitted bandwidths and explicit blocks: a settled group's every round), the
    saved arrays are merged as they are, without building a model or a layout per state or
    matching columns by what they read; the result is the same, bit for bit, as the general
    path's (``fast=False``, which the tests compare it with).

    ``base_model``: a model of ``(base_meta, base_arrays)``'s layout (its configuration,
    kernels, inputs, outputs and layout: its round counts and arrays are not read), built by
    the caller (a group merges onto the same base twice: its member's rebase, then the next
    round's close). The fast path only reads it (the merged model may share its layout, which
    is never changed in place) and takes the counts from the saved state; the general path
    builds its own."""
    if dual not in ("sum", "mean"):
        raise ValueError(f"dual must be 'sum' or 'mean', got {dual!r}")
    base = (
        OnlineMKL.from_state(dict(base_meta), dict(base_arrays))
        if base_model is None
        else base_model
    )
    check_mixable(base)
    rounds = sorted(rounds, key=lambda r: (r.member, r.since is None))
    for r in rounds:
        if r.examples < 0:
            raise ValueError(f"member {r.member!r}: examples must be >= 0, got {r.examples}")
    states = [(base_meta, base_arrays)] + [(r.meta, r.arrays) for r in rounds]
    states += [r.since for r in rounds if r.since is not None]
    if fast and _same_layout(base, base_meta, states):
        # the steady state of a group: the members' arrays are already on the merged columns
        target = _Target(base, [])
        if np.asarray(base_arrays["w"]).shape[-1] == target.layout.width:
            ref = _Aligned.of_arrays(base_meta, base_arrays, target)
            aligned = [_Aligned.of_arrays(r.meta, r.arrays, target) for r in rounds]
            refs = [ref if r.since is None else _Aligned.of_arrays(*r.since, target)
                    for r in rounds]  # fmt: skip
            counts = (int(base_meta["t"]), float(np.asarray(base_arrays["avg_count"])[0]))
            return _merged(base, rounds, target, ref, aligned, refs, stats, dual, prox,
                           counts=counts)  # fmt: skip
    if base_model is not None:  # (the general path may hand the base back, or align it)
        base = OnlineMKL.from_state(dict(base_meta), dict(base_arrays))
    models = [OnlineMKL.from_state(dict(r.meta), dict(r.arrays)) for r in rounds]
    sinces = [OnlineMKL.from_state(dict(r.since[0]), dict(r.since[1])) if r.since else None
              for r in rounds]  # fmt: skip
    olds = [old for old in sinces if old is not None]
    for r, model in zip(rounds, models, strict=True):
        if (
            _config_key(r.meta) != _config_key(base_meta)
            or model.names != base.names
            or model.draws != base.draws
        ):
            raise ForeignDelta(
                f"member {r.member!r} learns with another configuration or kernel bank than the "
                "base: every member of a group must share them (same seeds, same maps)"
            )
        if bandwidth.fits(model.kernels) != bandwidth.fits(base.kernels):
            raise ValueError(
                f"member {r.member!r} learns over other fitted bandwidths than the base (same "
                "names, other random features): align them first (core.mixing_bandwidth)"
            )
    if base.feature_keys == [] and not any(m.feature_keys for m in models):
        return base
    target = _Target(base, models + olds)
    ref = _Aligned(base, target)  # (read only: the models are built once per merge)
    aligned = [_Aligned(m, target) for m in models]
    refs = [ref if old is None else _Aligned(old, target) for old in sinces]
    support = [(r.examples, m, old) for r, m, old in zip(rounds, models, sinces, strict=True)]
    return _merged(base, rounds, target, ref, aligned, refs, stats, dual, prox, support)


def rebase_onto(
    model: OnlineMKL,
    base: tuple[Mapping[str, Any], Mapping[str, np.ndarray]],
    since: tuple[Mapping[str, Any], Mapping[str, np.ndarray]],
    examples: int,
) -> bool:
    """Move ``model``'s own progress onto a merged model, in place: ``w <- w_base + (w_model -
    w_since)`` for every part of the state (weights or FTRL's dual, AdaGrad's sums, biases,
    averaged iterates, the round counts), where ``since`` is the state (``to_state()``) the
    model's owner published and ``examples`` what it learned after it. The model then holds,
    bit for bit, what ``merge(*base, [MemberRound("", examples, *model.to_state(), since)],
    prox=False)`` (a group member's *rebase*) returns saved and loaded again, without building
    a model, a layout or a saved state.

    Only where the three share one layout: the same configuration, fitted bandwidths (none
    pending, no warm-up inputs kept), inputs in the same order and outputs, a bank of explicit
    blocks, and a model whose layout keeps no room for inputs to come. Otherwise (new inputs,
    another bank or bandwidth, kernelized blocks with their support sets) the model is left
    untouched and False is returned: the caller takes the general path (:func:`merge`).
    """
    layout, state = model.layout, model.state
    if (
        layout is None
        or state is None
        or layout.im_blocks.size
        or not model.feature_keys
        or examples < 0
        or layout.capacity != len(model.feature_keys)
        or layout.used_columns().size != layout.width
        or bandwidth.has_pending(model.kernels)
        or model.warmup_rows.shape[0]
        or state.w.shape[-1] != layout.width
    ):
        return False
    try:
        check_mixable(model)
    except ValueError:
        return False
    mine = {
        "config": model.config(),
        "bandwidths": bandwidth.saved(model.kernels),
        "feature_keys": list(model.feature_keys),
        "n_outputs": model.n_outputs,
        "version": STATE_VERSION,
        "draws": model.draws,
    }
    if not _on_layout_of(mine, (base, since)):
        return False
    for _, arrays in (base, since):
        if "warmup_inputs" in arrays or np.asarray(arrays["w"]).shape[-1] != layout.width:
            return False
    live = {"t": model.t, "schedule_t": model.schedule.t}
    saved = {name: getattr(state, name) for name in _FAST_ARRAYS}
    flat = FlatLayout.of(model)
    if flat is not None and all(flat.fits(a) for a in (base[1], since[1], saved)):
        # the three laid out flat (merge_saved's numbers: one member, weight 1, no prox)
        ftrl = isinstance(model.schedule, schedules_mod.FTRL)
        out, summed = flat.merged(base[1], [(1.0 if examples else 0.0, saved, since[1])],
                                  ftrl, False)  # fmt: skip
        schedule_t = _schedule_t_of(
            int(base[0]["schedule_t"]), [model.schedule.t], [int(since[0]["schedule_t"])], None
        )
        count = float(np.asarray(base[1]["avg_count"])[0]) + examples
        model.t = int(base[0]["t"]) + examples
        model.schedule.t = schedule_t
        merged = _flat_finish(model, flat, out, summed, count, schedule_t, ftrl, False)[0]
        merged.resize_support(max(budgets.initial_capacity(model.budget), merged.n_support))
        model.adopt(layout, merged)
        model.keep_warmup(None)
        return True
    target = _Target(model, [])
    ref = _Aligned.of_arrays(base[0], base[1], target)
    aligned = [_Aligned.of_arrays(live, saved, target)]
    refs = [_Aligned.of_arrays(since[0], since[1], target)]
    rounds = [MemberRound("", examples, live, saved, since)]
    count = float(np.asarray(base[1]["avg_count"])[0])
    merged, _, _ = _merged_state(
        model, int(base[0]["t"]), count, rounds, target, ref, aligned, refs, None, "sum", False
    )  # fmt: skip
    merged.resize_support(max(budgets.initial_capacity(model.budget), merged.n_support))
    model.adopt(layout, merged)
    model.keep_warmup(None)
    return True


def merge_saved(
    base_meta: Mapping[str, Any],
    base_arrays: Mapping[str, np.ndarray],
    rounds: Sequence[MemberRound],
    shape: OnlineMKL,
    stats: dict[str, float] | None = None,
    dual: str = "sum",
    prox: bool = True,
) -> tuple[dict[str, Any], dict[str, np.ndarray]] | None:
    """``merge(...).to_state()``, bit for bit, for a settled group's round (every state on
    the base's layout: :func:`merge`'s fast path), without building the merged model: the
    states' saved arrays are laid end to end in one flat float64 vector each, merged with a
    few whole-vector operations, and the merged arrays saved as :meth:`OnlineMKL.to_state`
    saves them. ``shape``: a model of the base's layout (its configuration, kernels, inputs,
    outputs and layout; its round counts and arrays are not read: they come from
    ``base_meta`` and ``base_arrays``). None where the fast path does not apply (the caller
    takes :func:`merge`); raises what :func:`merge` raises."""
    if dual not in ("sum", "mean"):
        raise ValueError(f"dual must be 'sum' or 'mean', got {dual!r}")
    flat = FlatLayout.of(shape)
    if flat is None or not flat.mixable:
        check_mixable(shape)
        if flat is not None:
            flat.mixable = True  # (checked once per layout: its model is never changed)
    rounds = sorted(rounds, key=lambda r: (r.member, r.since is None))
    for r in rounds:
        if r.examples < 0:
            raise ValueError(f"member {r.member!r}: examples must be >= 0, got {r.examples}")
    if flat is None or shape.draws != DRAWS:  # (the merged model a merge builds draws anew: DRAWS)
        return None
    states = [(base_meta, base_arrays)] + [(r.meta, r.arrays) for r in rounds]
    states += [r.since for r in rounds if r.since is not None]
    if not _same_layout(shape, base_meta, states):
        return None
    if any(not flat.fits(arrays) for _, arrays in states):
        return None
    ftrl = isinstance(shape.schedule, schedules_mod.FTRL)
    mean = dual == "mean"
    N = sum(r.examples for r in rounds)
    weights = [r.examples / N for r in rounds] if N > 0 else [0.0] * len(rounds)
    # the example-weighted part (what _merged_state's weighted() does) and the added one
    # (added(), or weighted too: dual="mean")
    out, summed = flat.merged(
        base_arrays,
        [(w, r.arrays, None if r.since is None else r.since[1])
         for w, r in zip(weights, rounds, strict=True)],
        ftrl,
        mean,
    )  # fmt: skip
    schedule_t = _schedule_t_of(
        int(base_meta["schedule_t"]),
        [int(r.meta["schedule_t"]) for r in rounds],
        [int(base_meta["schedule_t"] if r.since is None else r.since[0]["schedule_t"])
         for r in rounds],
        weights if mean else None,
    )  # fmt: skip
    L = flat.layout
    count = float(np.asarray(base_arrays["avg_count"])[0]) + N
    state, theta, before = _flat_finish(shape, flat, out, summed, count, schedule_t, ftrl, prox)
    if stats is not None:
        ref_theta = flat.theta(base_arrays)
        kernelized = stats.pop("delta_sqnorm", 0.0)
        stats["delta_norm"] = float(np.sqrt(np.linalg.norm(theta - ref_theta) ** 2 + kernelized))
        stats["active_before"] = int(before.sum())
        stats["active_after"] = int((state.norms > 0).sum())
    meta = {
        "format": FORMAT,
        "version": STATE_VERSION,
        "config": flat.config,
        "bandwidths": flat.bandwidths,
        "feature_keys": list(shape.feature_keys),
        "capacity": L.capacity,
        "n_outputs": flat.K,
        "t": int(base_meta["t"]) + N,
        "schedule_t": schedule_t,
        "draws": DRAWS,
    }
    return meta, flat.saved(state)


def _flat_finish(
    shape: OnlineMKL,
    flat: FlatLayout,
    out: np.ndarray,
    summed: np.ndarray,
    count: float,
    schedule_t: int,
    ftrl: bool,
    prox: bool,
) -> tuple[BlockState, np.ndarray, np.ndarray]:
    """The merged state on the merge's vectors (:meth:`FlatLayout.merged`), its averages'
    count and round count given: FTRL's weights from the summed dual, or theta and the prox
    (what :func:`_merged_state` does after its sums). Returns (the state, theta before the
    prox, the blocks active before it)."""
    L = flat.layout
    state = flat.state(out, summed)  # (its biases, averages and sums: views of the two)
    theta = flat.weighted_parts(out)[4]
    state.avg_count[:] = count
    stored = flat.added_parts(summed)[1]
    if ftrl:  # (the stored dual's block norms: computed once, for both)
        norms = _block_norms(L, stored)
        before = norms > 0
        _ftrl_theta(shape, L, state, stored, schedule_t, norms)
    else:
        before = _block_norms(L, theta) > 0  # (the merged state's norms are zeros here)
        _prox_theta(shape, L, state, theta, schedule_t, prox)
    return state, theta, before


def _merged(
    base: OnlineMKL,
    rounds: Sequence[MemberRound],
    target: _Target,
    ref: _Aligned,
    aligned: Sequence[_Aligned],
    refs: Sequence[_Aligned],
    stats: dict[str, float] | None,
    dual: str,
    prox: bool,
    support: list | None = None,
    counts: tuple[int, float] | None = None,
) -> OnlineMKL:
    """The merged model from the states on the target's columns (:func:`merge`); ``support``:
    (examples, model, the model it learned from) of every member, for the kernelized blocks;
    ``counts``: the base's round count and averages' count, from its saved state (the fast
    path's ``base`` is a model of its layout only), else the base model's."""
    merged = OnlineMKL(**base.config())
    merged.feature_keys = list(target.keys)
    merged.n_outputs = target.n_outputs
    merged.kernels = target.kernels
    if counts is None:
        count = float(base.state.avg_count[0]) if base.state is not None else None
        counts = (base.t, count)  # type: ignore[assignment]
    assert counts is not None
    state, theta, before = _merged_state(
        merged, counts[0], counts[1], rounds, target, ref, aligned, refs, stats, dual, prox,
        None if support is None else (base, support),
    )  # fmt: skip
    merged.adopt(target.layout, state)
    if stats is not None:
        kernelized = stats.pop("delta_sqnorm", 0.0)
        stats["delta_norm"] = float(np.sqrt(np.linalg.norm(theta - ref.theta) ** 2 + kernelized))
        stats["active_before"] = int(before.sum())
        stats["active_after"] = int((np.asarray(merged.block_norms) > 0).sum())
    return merged


def _merged_state(
    merged: OnlineMKL,
    base_t: int,
    base_count: float | None,
    rounds: Sequence[MemberRound],
    target: _Target,
    ref: _Aligned,
    aligned: Sequence[_Aligned],
    refs: Sequence[_Aligned],
    stats: dict[str, float] | None,
    dual: str,
    prox: bool,
    support: tuple[OnlineMKL, list] | None = None,
) -> tuple[BlockState, np.ndarray, np.ndarray]:
    """The merged arrays (and theta before the prox, and the blocks active before it) for
    ``merged``, a model of the base's configuration whose round counts this sets (``base_t``:
    the base's; ``base_count``: its averages' count, None before its first input)."""
    N = sum(r.examples for r in rounds)
    weights = [r.examples / N for r in rounds] if N > 0 else [0.0] * len(rounds)

    def weighted(attr: str) -> np.ndarray:
        out = getattr(ref, attr).copy()
        for w, a, r in zip(weights, aligned, refs, strict=True):
            out += w * (getattr(a, attr) - getattr(r, attr))
        return out

    def added(attr: str) -> np.ndarray:
        out = getattr(ref, attr).copy()
        for a, r in zip(aligned, refs, strict=True):
            out += getattr(a, attr) - getattr(r, attr)
        return out

    state = BlockState.empty(target.layout, target.n_outputs, 0, merged.average, target.n_averages)
    state.bias[:] = weighted("bias")
    state.avg_w[:] = weighted("avg_w")
    state.avg_bias[:] = weighted("avg_bias")
    state.avg_loss[:] = weighted("avg_loss")
    state.avg_count[:] = base_count + N if base_count is not None else N
    mean = dual == "mean"
    state.step_acc[:] = weighted("acc") if mean else added("acc")
    schedule_t = _merged_schedule_t(ref, aligned, refs, weights if mean else None)
    merged.t = base_t + N
    merged.schedule.t = schedule_t
    theta = weighted("theta")
    if target.layout.im_blocks.size:
        assert support is not None  # (the fast path takes explicit blocks only)
        merge_support(state, target.layout, target.keys, support[0], support[1], stats)
    before = (_block_norms(target.layout, theta) > 0) | (state.norms > 0)
    if isinstance(merged.schedule, schedules_mod.FTRL):
        stored = weighted("stored") if mean else added("stored")
        before = _block_norms(target.layout, stored) > 0
        _ftrl_theta(merged, target.layout, state, stored, schedule_t)
    else:
        _prox_theta(merged, target.layout, state, theta, schedule_t, prox)
    return state, theta, before


def _merged_schedule_t(
    ref: _Aligned,
    aligned: Sequence[_Aligned],
    refs: Sequence[_Aligned],
    weights: Sequence[float] | None = None,
) -> int:
    """Rounds since the schedule's (re)start: the base's plus every member's (counted from the
    base it learned from), or, where a member restarted during the round, that member's count
    since its restart."""
    return _schedule_t_of(
        ref.schedule_t, [a.schedule_t for a in aligned], [r.schedule_t for r in refs], weights
    )


def _schedule_t_of(
    ref: int, ends: Sequence[int], starts: Sequence[int], weights: Sequence[float] | None
) -> int:
    """:func:`_merged_schedule_t` on the round counts: the base's (``ref``), and every
    member's at its round's end and at the state it learned from."""
    pairs = list(zip(ends, starts, strict=True))
    ws = [1.0] * len(pairs) if weights is None else list(weights)
    restarted = [a for a, r in pairs if a < r]
    grown = round(
        sum(w * (a - r) for w, (a, r) in zip(ws, pairs, strict=True) if a >= r)
    )  # fmt: skip
    if restarted:
        return max(restarted) + grown
    return ref + grown


def _block_norms(layout: Layout, W: np.ndarray) -> np.ndarray:
    M = layout.kinds.shape[0]
    return np.array(
        [np.linalg.norm(W[:, layout.ex_off[m] : layout.ex_off[m + 1]]) for m in range(M)]
    )


def _steps(model: OnlineMKL, S: BlockState, schedule_t: int) -> np.ndarray:
    """The step of the merged model's next round for every block (and the bias), the
    schedule at round ``schedule_t`` (``model``: of the merged model's configuration; its own
    round count is not read)."""
    sched = model.schedule
    M = len(model.kernels)
    if sched.adaptive:
        c = sched.constants
        return c[0] / np.sqrt(c[1] + S.step_acc)
    t = max(schedule_t, 1)
    return np.full(M + 1, sched.eta(t))


def _prox_theta(
    model: OnlineMKL, L: Layout, S: BlockState, theta: np.ndarray, schedule_t: int,
    prox: bool = True,
) -> None:  # fmt: skip
    """theta merged into ``S``, then (``prox``) the regularizer's prox steps (and the
    projection) at the step the next round would take."""
    S.w[:] = theta
    S.scale[:] = 1.0  # kernelized blocks: their merged coefficients are already scaled
    S.norms[L.ex_blocks] = _block_norms(L, theta)[L.ex_blocks]
    if not prox:
        return
    from streammkl.core.update import step_arrays

    codes, params, groups = step_arrays(model.regularizers, len(model.kernels), model.names)
    nb.apply_prox_steps(
        _steps(model, S, schedule_t), codes, params, groups, model.radius, L.is_explicit,
        L.ex_blocks, L.ex_off, S.w, S.scale, S.norms, S.coef, S.n_support,
        np.zeros(len(model.kernels)),
    )  # fmt: skip


def _ftrl_theta(
    model: OnlineMKL, L: Layout, S: BlockState, stored: np.ndarray, schedule_t: int,
    norms: np.ndarray | None = None,
) -> None:  # fmt: skip
    """FTRL from the merged dual into ``S``: theta_m = eta_m u_m b_m / c_m with c_m = eta_m
    ||u_m|| and b the prox of t Omega in the metric of the steps (the round's own closed
    form). ``norms``: the stored dual's block norms, if the caller has them."""
    etas = _steps(model, S, schedule_t)
    M = len(model.kernels)
    S.w[:] = stored
    S.stored_norms[:] = _block_norms(L, stored) if norms is None else norms
    S.step_prev[:] = etas[:M]
    c = etas[:M] * S.stored_norms
    t = max(schedule_t, 1)
    b = c.copy()
    for reg in model.regularizers:
        b = reg.prox_norms(b, t * etas[:M])
    if model.radius:
        from streammkl.core.regularizers import Ball

        b = Ball(model.radius).prox_norms(b, etas[:M])
    S.norms[:] = b
    S.scale[:] = np.where((S.stored_norms > 0) & (b > 0), b / np.where(c > 0, c, 1.0), 0.0)
    S.scale[:] *= np.where(S.stored_norms > 0, etas[:M], 0.0)
