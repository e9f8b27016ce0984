"""The base of every settings section, and the validator that reads a comma-separated list."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    """A settings section: frozen, and an unknown key is an error (a typo is never ignored)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def comma_list(value: Any) -> Any:
    """A ``before`` validator: ``"a, b"`` (an environment variable) becomes ``("a", "b")``."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value
