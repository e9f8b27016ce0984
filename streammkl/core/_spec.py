"""What the option objects (kernels, losses, regularizers, schedules) share: a JSON-able spec.

``params()`` returns the constructor arguments; ``to_spec()`` adds the class name; ``repr``,
equality and hashing follow from them, and ``build`` turns a spec back into an object.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

T = TypeVar("T")


class Spec:
    def params(self) -> dict[str, Any]:
        raise NotImplementedError

    def to_spec(self) -> dict[str, Any]:
        return {"type": type(self).__name__, **self.params()}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items() if v is not None)
        return f"{type(self).__name__}({args})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.to_spec() == other.to_spec()

    def __hash__(self) -> int:
        return hash(repr(self))


def build(
    spec: Mapping[str, Any] | T,
    base: type[T],
    types: Mapping[str, type[T]],
    what: str,
    prepare: Callable[[dict[str, Any]], None] | None = None,
) -> T:
    """An object of ``types`` from ``{"type": name, **params}`` (objects pass through)."""
    if isinstance(spec, base):
        return spec
    params = dict(spec)  # type: ignore[arg-type]
    kind = params.pop("type", None)
    if kind not in types:
        raise ValueError(f"unknown {what} type {kind!r}; expected one of {sorted(types)}")
    if prepare is not None:
        prepare(params)
    try:
        return types[kind](**params)
    except TypeError as exc:
        raise ValueError(f"bad parameters for {what} {kind}: {exc}") from None
