"""Theoretical regret bounds of Prop. 3 ([001] eqs 15-17) for the configured schedule.

All three assume R >= 0, R(0) = 0 and theta_1 = 0; G bounds the norm of the loss subgradient
w.r.t. theta (``lipschitz(loss) * max_x ||phi(x)||``) and F is the diameter of the feasible set
(``2 * radius`` for the ball projection).
"""

from __future__ import annotations

import math


def regret_bound(
    schedule_type: str,
    T: int,
    G: float,
    *,
    eta: float | None = None,
    F: float | None = None,
    theta_star_norm: float | None = None,
    sigma: float | None = None,
) -> float:
    """Upper bound on Reg_T against the best fixed hypothesis.

    - ``Constant``: ``(eta T / 2) G^2 + ||theta*||^2 / (2 eta)`` (``||theta*|| <= F/2`` if unknown)
    - ``InvSqrt`` (eta0 = ``eta``): ``(F^2 / (2 eta0) + G^2 eta0) sqrt(T)``
    - ``InvT`` (strongly convex, modulus ``sigma``): ``G^2 (1 + log T) / (2 sigma)``
    """
    if T <= 0:
        return 0.0
    if schedule_type == "Constant":
        if eta is None:
            raise ValueError("Constant schedule bound needs eta")
        if theta_star_norm is None:
            if F is None:
                raise ValueError("Constant schedule bound needs ||theta*|| or the diameter F")
            theta_star_norm = F / 2
        return eta * T * G * G / 2 + theta_star_norm**2 / (2 * eta)
    if schedule_type == "InvSqrt":
        if eta is None or F is None:
            raise ValueError("InvSqrt bound needs eta0 and a bounded feasible set (F = 2 radius)")
        return (F * F / (2 * eta) + G * G * eta) * math.sqrt(T)
    if schedule_type == "InvT":
        if sigma is None:
            raise ValueError("InvT bound needs the strong-convexity modulus sigma")
        return G * G * (1 + math.log(T)) / (2 * sigma)
    raise ValueError(f"no regret bound for schedule {schedule_type!r}")
