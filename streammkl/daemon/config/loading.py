"""Loading the settings: a TOML file < ``STREAMMKL_*`` variables < command-line flags, and an
error that names every invalid field and where its value came from."""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from streammkl.daemon.config.security import SECRET_FIELDS
from streammkl.daemon.config.settings import Settings

ENV_PREFIX = "STREAMMKL_"


class ConfigError(ValueError):
    """Invalid settings; the message names each offending field and its source."""


def _env_value(raw: str) -> Any:  # a JSON value, of any type
    text = raw.strip()
    if text == "":
        return None
    if text[0] in "[{":
        try:
            return json.loads(text)
        except ValueError:
            return raw
    return raw


def _set(tree: dict[str, Any], path: tuple[str, ...], value: object) -> None:
    node = tree
    for key in path[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = {}
            node[key] = child
        node = child
    node[path[-1]] = value


def _flatten(tree: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    out: dict[tuple[str, ...], Any] = {}
    for key, value in tree.items():
        path = (*prefix, key)
        # Sections are tables; a learner component table is a value, not a section.
        if isinstance(value, Mapping) and len(path) == 1:
            out.update(_flatten(value, path))
        else:
            out[path] = value
    return out


def load_settings(
    config: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Build the settings: file < environment < overrides.

    Parameters
    ----------
    config
        A TOML file (``None``: ``$STREAMMKL_CONFIG`` if set, else defaults only).
    env
        The environment (default ``os.environ``); only ``STREAMMKL_*`` names are read.
    overrides
        Values from command-line flags, keyed by dotted path (``"kafka.topics"``); ``None``
        values are ignored (flag not given).

    Raises
    ------
    ConfigError
        Naming every invalid field and the source of its value.
    """
    env = os.environ if env is None else env
    tree: dict[str, Any] = {}
    sources: dict[tuple[str, ...], str] = {}
    path = config if config is not None else env.get(f"{ENV_PREFIX}CONFIG")
    if path:
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except OSError as exc:
            raise ConfigError(f"config file {path}: {exc.strerror or exc}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path}: invalid TOML: {exc}") from exc
        for key, value in _flatten(data).items():
            _set(tree, key, value)
            sources[key] = f"file {path}"
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX) or name == f"{ENV_PREFIX}CONFIG":
            continue
        if name.startswith(f"{ENV_PREFIX}TANSU"):  # read by the broker module, not a setting
            continue
        key = tuple(part.lower() for part in name[len(ENV_PREFIX) :].split("__"))
        _set(tree, key, _env_value(env[name]))
        sources[key] = f"environment {name}"
    for dotted, value in (overrides or {}).items():
        if value is None:
            continue
        key = tuple(dotted.split("."))
        _set(tree, key, value)
        sources[key] = "command line"
    try:
        return Settings.model_validate(tree)
    except ValidationError as exc:
        raise ConfigError(_explain(exc, sources)) from None


def _explain(exc: ValidationError, sources: Mapping[tuple[str, ...], str]) -> str:
    lines = [f"invalid settings ({exc.error_count()} error(s)):"]
    for err in exc.errors():
        loc = tuple(str(p) for p in err["loc"])
        field = ".".join(loc) or "(settings)"
        source = next(
            (sources[loc[:i]] for i in range(len(loc), 0, -1) if loc[:i] in sources), None
        )
        if source is None and loc:  # a whole section: any value under it
            source = next((v for k, v in sources.items() if k[: len(loc)] == loc), None)
        origin = f" [from {source}]" if source else ""
        value = "" if err["type"] == "missing" else f" = {err.get('input')!r}"
        if isinstance(err.get("input"), Mapping):
            value = ""
        elif loc and loc[-1] in SECRET_FIELDS:
            value = " = '***'"  # a secret is never echoed
        lines.append(f"  {field}{value}: {err['msg']}{origin}")
    return "\n".join(lines)
