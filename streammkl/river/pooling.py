"""The input standardisation of a mixing group: the members' running statistics, pooled.

A learner with ``standardize`` keeps per input a count, a mean and a sum of squared deviations
(``_scaling.InputScaler``). Members of a group start a round from the base's statistics and
count their own inputs on top; the group's statistics are those of every input counted once, as
one learner that saw them all would hold: each member's own part is recovered from its
statistics and the base's (Chan et al.'s pairwise update, inverted), and the parts are added to
the base's with the same update (exact up to rounding, whatever the order of the inputs).

An input stays *binary* (left at 0/1, not centred: ``_scaling``) while every value counted for
it was 0 or 1 and it is rare; a member's flag only ever goes from binary to standardised, so the
group's input is binary when it is binary for the base and for every member (the flags'
minimum): an input that took another value anywhere is standardised, as for the one learner
that saw every value. An input rare for each member but frequent in the pooled statistics stays
binary until its next count, which finds it frequent and clears the flag. An input a learner has
not counted yet is binary for it; a state saved before the rule (no flags) has none of its
counted inputs binary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["SCALER_PREFIX", "has_scaler", "pool_scalers", "split_scaler"]

#: State arrays of a learner's input standardisation (``count``, ``mean``, ``m2``).
SCALER_PREFIX = "inputs."
_FIELDS = ("count", "mean", "m2")

#: (input names, state arrays) of a learner: the learner state's ``features`` and arrays.
Stats = tuple[Sequence[str], Mapping[str, np.ndarray]]


def split_scaler(
    arrays: Mapping[str, np.ndarray],
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """A learner state's arrays as (the core model's, the standardisation's)."""
    core = {k: v for k, v in arrays.items() if not k.startswith(SCALER_PREFIX)}
    scaler = {k: v for k, v in arrays.items() if k.startswith(SCALER_PREFIX)}
    return core, scaler


def has_scaler(arrays: Mapping[str, np.ndarray]) -> bool:
    """Whether a learner state's arrays hold a standardisation (:func:`split_scaler`'s second
    part is not empty), read from the names alone."""
    return any(name.startswith(SCALER_PREFIX) for name in arrays)


def _on(stats: Stats, keys: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    names, arrays = stats
    if _same_inputs(names, keys, arrays.get(SCALER_PREFIX + "count")):
        got = [arrays.get(SCALER_PREFIX + field) for field in _FIELDS]
        if all(a is not None and np.shape(a) == (len(keys),) for a in got):
            # (a settled group's every state: its inputs are the keys, in their order)
            return tuple(np.array(a, dtype=np.float64) for a in got)  # type: ignore[return-value]
    out = [np.zeros(len(keys)) for _ in _FIELDS]
    where = {k: j for j, k in enumerate(keys)}
    for f, field in enumerate(_FIELDS):
        a = np.asarray(arrays.get(SCALER_PREFIX + field, np.zeros(0)), dtype=np.float64)
        for j, name in enumerate(list(names)[: a.shape[0]]):
            if name in where:
                out[f][where[name]] = a[j]
    return out[0], out[1], out[2]


def _same_inputs(names: Sequence[str], keys: Sequence[str], count: np.ndarray | None) -> bool:
    """Whether statistics over ``names`` (``count``: their counts) are over exactly ``keys``,
    in their order: :func:`_on` and :func:`_binary_on` then read them as they are."""
    return (
        count is not None
        and np.shape(count) == (len(keys),)
        and len(names) >= len(keys)
        and list(names[: len(keys)]) == list(keys)
    )


def _binary_on(stats: Stats, keys: Sequence[str]) -> np.ndarray:
    """The binary flags of ``stats`` over ``keys`` (1.0 for an input it has not counted; 0.0 for
    every counted one of a state without flags)."""
    names, arrays = stats
    out = np.ones(len(keys))
    count = arrays.get(SCALER_PREFIX + "count")
    if count is None:
        return out
    flags = arrays.get(SCALER_PREFIX + "binary")
    if flags is not None and np.shape(flags) == (len(keys),) and _same_inputs(names, keys, count):
        return np.array(flags, dtype=np.float64)
    flags = np.zeros(0) if flags is None else np.asarray(flags, dtype=np.float64)
    where = {k: j for j, k in enumerate(keys)}
    for j, name in enumerate(list(names)[: np.asarray(count).shape[0]]):
        if name in where:
            out[where[name]] = flags[j] if j < flags.shape[0] else 0.0
    return out


def pool_scalers(
    base: Stats, members: Sequence[tuple[Stats, Stats | None]], keys: Sequence[str]
) -> dict[str, np.ndarray]:
    """The group's standardisation arrays over the inputs ``keys``: the base's statistics plus
    every member's own part (its statistics minus those of the base it started from: ``None``
    for the current base, else an older one). Members are added in the order given. An input is
    binary when the base and every member hold it binary."""
    c, mean, m2 = _on(base, keys)
    binary = _binary_on(base, keys)
    for stats, since in members:
        c0, mean0, m20 = _on(base if since is None else since, keys)
        ci, meani, m2i = _on(stats, keys)
        n = ci - c0
        has = n > 0
        safe_n = np.where(has, n, 1.0)
        safe_ci = np.where(has, ci, 1.0)
        part_mean = mean0 + (meani - mean0) * safe_ci / safe_n
        part_m2 = np.maximum(m2i - m20 - (part_mean - mean0) ** 2 * c0 * n / safe_ci, 0.0)
        total = c + n
        safe_total = np.where(has, total, 1.0)
        delta = part_mean - mean
        mean = np.where(has, mean + delta * n / safe_total, mean)
        m2 = np.where(has, m2 + part_m2 + delta**2 * c * n / safe_total, m2)
        c = np.where(has, total, c)
        binary = np.minimum(binary, _binary_on(stats, keys))
    return {
        SCALER_PREFIX + "count": c,
        SCALER_PREFIX + "mean": mean,
        SCALER_PREFIX + "m2": m2,
        SCALER_PREFIX + "binary": binary,
    }
