"""Support-set budget: bounded memory for kernelized blocks.

Without a budget the support set grows by one pair per update (the paper's behaviour) and its
arrays double when full. With ``budget=B`` the arrays hold exactly B pairs; when full, the
policy makes room for the new pair with an exact update of every block norm
(``_numba.budget_step``):

- ``"merge"``: the pair with the smallest contribution is merged with the partner that loses
  least into one pair on the segment between them (budgeted SGD, Wang, Crammer & Vucetic 2012);
  O(|S|) per step;
- ``"project"``: the pair whose projection onto the span of the others loses least is replaced by
  that projection (Projectron, Orabona, Keshet & Caputo 2009); keeps each kernelized block's Gram
  matrix and its inverse, so O(|S|^2) time per update and O(M |S|^2) memory;
- ``"smallest"``: the pair whose term ``sum_m ||scale_m coef_ms phi_m(x_s) (x) v_s||^2`` is
  smallest is removed, i.e. the one whose removal perturbs theta least;
- ``"oldest"``: the pair inserted first is removed (FIFO, as in the Forgetron / budgeted
  Pegasos).

Merging and projection keep what removal throws away: ``benchmarks/budget.py`` measures all four
against the unbounded model.
"""

from __future__ import annotations

from streammkl.core import _numba as nb

POLICIES = {
    "oldest": nb.B_OLDEST,
    "smallest": nb.B_SMALLEST,
    "merge": nb.B_MERGE,
    "project": nb.B_PROJECT,
}
INITIAL_CAPACITY = 64


def policy_code(policy: str) -> int:
    try:
        return POLICIES[policy]
    except KeyError:
        raise ValueError(
            f"unknown budget policy {policy!r}; expected one of {sorted(POLICIES)}"
        ) from None


def keeps_gram(budget: int | None, policy: str) -> bool:
    """Whether the state keeps Gram matrices and their inverses (projection under a budget)."""
    return budget is not None and policy_code(policy) == nb.B_PROJECT


def check_budget(budget: int | None) -> None:
    if budget is not None and (int(budget) != budget or budget < 1):
        raise ValueError(f"budget must be a positive integer or None, got {budget!r}")


def initial_capacity(budget: int | None) -> int:
    return int(budget) if budget is not None else INITIAL_CAPACITY


def capacity_limit(budget: int | None) -> int:
    """The support-set size at which the round starts evicting (never, without a budget)."""
    return int(budget) if budget is not None else 2**62


def needs_growth(n_support: int, capacity: int, budget: int | None, incoming: int = 1) -> int:
    """New capacity if ``incoming`` more pairs may not fit (0 if they fit)."""
    if budget is not None or n_support + incoming <= capacity:
        return 0
    cap = max(capacity, 1)
    while cap < n_support + incoming:
        cap *= 2
    return cap
