"""The scenario registry: ``get(name, seed=..., **params)`` and ``names()``.

Examples
--------
>>> "kernel-drift" in names()
True
>>> sim = get("label-noise", seed=1, base="kernel-drift", flip_rate=0.2, phase_length=50)
>>> len(sim), sim.ground_truth()["flip_rate"]
(150, 0.2)
"""

from __future__ import annotations

from typing import Any

from .base import Param, Scenario
from .conllu_replay import ConlluReplay
from .digit_strings import DigitStrings
from .kernel_drift import KernelDrift
from .replay import (
    Bananas,
    ChickWeights,
    Digits,
    ImageSegments,
    Phishing,
    Shuttle,
    TrumpApproval,
)
from .synthetic import LabelNoise, StationaryMixture

__all__ = ["get", "names", "params_of", "scenario_class"]

_REGISTRY: dict[str, type[Scenario]] = {
    cls.name: cls
    for cls in (
        KernelDrift,
        StationaryMixture,
        LabelNoise,
        DigitStrings,
        Digits,
        Bananas,
        Phishing,
        ImageSegments,
        Shuttle,
        TrumpApproval,
        ChickWeights,
        ConlluReplay,
    )
}


def names() -> list[str]:
    """Registered scenario names, synthetic first, then replays."""
    return list(_REGISTRY)


def scenario_class(name: str) -> type[Scenario]:
    """The class registered under ``name``."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown scenario {name!r}; expected one of {names()}") from None


def params_of(name: str, base: str | None = None) -> dict[str, Param]:
    """Parameters ``name`` accepts (for ``label-noise``: its own plus its base scenario's)."""
    params = dict(scenario_class(name).params)
    if name == LabelNoise.name:
        base_name = base or params["base"].default
        if base_name == name:
            raise ValueError("base: label-noise cannot wrap itself")
        params = {**scenario_class(base_name).params, **params}
    return params


def get(name: str, seed: int = 0, **params: Any) -> Scenario:
    """Build scenario ``name`` with ``seed`` and ``params`` (unknown parameters are an error).

    Raises
    ------
    ValueError
        If ``name`` is unknown, or a parameter does not apply to it (the message names both).
    """
    base = params.get("base")
    if isinstance(base, Scenario):  # a ready-made base takes no parameters of its own here
        accepted: dict[str, Any] = dict(scenario_class(name).params)
    else:
        accepted = params_of(name, base)
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise ValueError(
            f"scenario {name!r} has no parameter {unknown[0]!r}; it takes {sorted(accepted)}"
        )
    return scenario_class(name)(seed=seed, **params)
