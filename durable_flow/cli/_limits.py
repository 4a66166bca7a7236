"""``--limit NAME=SPEC`` of ``durable-flow worker``: named limits from the command line."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import InvalidInputError
from ..runtime._limits import Limit
from ._support import CliError

__all__ = ["parse_limits"]

_FIELDS = {"concurrency": int, "per_second": float, "per_minute": float}


def parse_limits(specs: Sequence[str]) -> dict[str, Limit]:
    """``["api=concurrency:4,per_minute:60"]`` as ``{"api": Limit(concurrency=4, per_minute=60)}``."""
    limits: dict[str, Limit] = {}
    for spec in specs:
        name, sep, body = spec.partition("=")
        if not sep or not name or not body or name in limits:
            raise CliError(f"--limit takes NAME=concurrency:N,per_second:N,per_minute:N once per "
                           f"name, got {spec!r}")
        values: dict[str, float | int] = {}
        for part in body.split(","):
            key, sep, text = part.partition(":")
            kind = _FIELDS.get(key.strip())
            if kind is None or not sep:
                raise CliError(f"--limit {name}: unknown part {part!r} (known: {', '.join(_FIELDS)})")
            try:
                values[key.strip()] = kind(text)
            except ValueError:
                raise CliError(f"--limit {name}: {key} takes a number, got {text!r}") from None
        try:
            limits[name] = Limit(**values)  # type: ignore[arg-type]
        except InvalidInputError as exc:
            raise CliError(f"--limit {name}: {exc}") from None
    return limits
