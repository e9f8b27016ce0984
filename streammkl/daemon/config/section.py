"""The base of every settings section, the validator that reads a comma-separated list, and the
one place a renamed key is still accepted (:func:`renamed`)."""

from __future__ import annotations

import warnings
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """A settings section: frozen, and an unknown key is an error (a typo is never ignored)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def comma_list(value: object) -> object:
    """A ``before`` validator: ``"a, b"`` (an environment variable) becomes ``("a", "b")``."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


def renamed(section: str, old: str, new: str) -> Callable[[object], object]:
    """A ``before`` model validator: the key ``old`` of ``[section]`` (an older name of ``new``)
    is read as ``new``, with a :class:`FutureWarning` naming both; giving both is an error."""

    def accept(data: object) -> object:
        if not isinstance(data, dict) or old not in data:
            return data
        if new in data:
            raise ValueError(f"{section}.{old} is the old name of {section}.{new}: give only one")
        warnings.warn(
            f"{section}.{old} is deprecated: it is now {section}.{new} (the old name still works)",
            FutureWarning,
            stacklevel=2,
        )
        data = dict(data)
        data[new] = data.pop(old)
        return data

    return accept
