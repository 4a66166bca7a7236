"""The run filters of ``runs`` and the bulk commands: labels, age, error type.

Kept apart from the bulk commands so that ``runs`` parses them without
importing the engine.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer

from ..model._clock import utcnow
from ._support import fail

__all__ = ["ErrorTypeOpt", "LabelOpt", "SinceOpt", "parse_labels", "parse_since"]

LabelOpt = Annotated[list[str] | None, typer.Option(
    "--label", "-l", metavar="KEY=VALUE", show_default=False,
    help="Only runs with this label (repeat for several: all must match).")]
SinceOpt = Annotated[str | None, typer.Option(
    "--since", metavar="AGE", show_default=False,
    help="Only runs created within this age (30m, 6h, 2d, 1w) or since an ISO 8601 time.")]
ErrorTypeOpt = Annotated[str | None, typer.Option(
    "--error-type", metavar="TYPE", show_default=False,
    help="Only runs whose error is of this type (e.g. RuntimeError).")]

_AGE = re.compile(r"^(\d+(?:\.\d+)?)([smhdw])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_labels(values: Sequence[str] | None) -> dict[str, str] | None:
    """``--label k=v`` options as a mapping (None when none); exits 2 on a malformed one."""
    if not values:
        return None
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"--label takes KEY=VALUE, got {item!r}", 2)
        out[key] = value
    return out


def parse_since(value: str | None, now: datetime | None = None) -> datetime | None:
    """``--since``: an age (``30m``, ``6h``, ``2d``, ``1w``) before now, or an ISO 8601 time."""
    if value is None:
        return None
    if (m := _AGE.match(value.strip())) is not None:
        return (now or utcnow()) - timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2)])
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        fail(f"--since takes an age (30m, 6h, 2d, 1w) or an ISO 8601 time, got {value!r}", 2)
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)
