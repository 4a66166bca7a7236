"""Reading a dotted path (``"flags.skip_meal"``, ``"items.0"``) out of a state: data only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

__all__ = ["resolve_path", "resolve_segments"]

_MISSING: Any = object()


def _is_index(segment: str) -> bool:
    return 0 < len(segment) <= 18 and segment.isascii() and segment.isdigit()


def _step(value: object, segment: str) -> object:
    """Read one path segment out of ``value`` (data only), or ``_MISSING``."""
    if not segment or segment.startswith("_"):
        return _MISSING
    if isinstance(value, BaseModel):
        if segment in type(value).model_fields:
            got = value.__dict__.get(segment, _MISSING)
            if got is _MISSING:  # a field the engine left out until read (a long log)
                got = getattr(value, segment, _MISSING)
            return got
        extra = value.__pydantic_extra__
        if isinstance(extra, dict):
            return extra.get(segment, _MISSING)
        return _MISSING
    if isinstance(value, Mapping):
        if segment in value:
            return value[segment]
        if _is_index(segment):
            index = int(segment)
            if index in value:
                return value[index]
        return _MISSING
    if isinstance(value, list | tuple) and _is_index(segment):
        index = int(segment)
        if index < len(value):
            return value[index]
    return _MISSING


def resolve_segments(state: object, segments: tuple[str, ...]) -> object:
    """Follow ``segments`` from ``state`` like :func:`resolve_path`; None when one is missing."""
    value = state
    try:
        for segment in segments:
            value = _step(value, segment)
            if value is _MISSING:
                return None
    except Exception:
        return None
    return value


def resolve_path(state: object, path: str) -> object:
    """Resolve a dotted ``path`` (``"flags.skip_meal"``, ``"items.0"``) in ``state``.

    Only data is read: the declared fields and ``model_extra`` of pydantic
    models, the keys of mappings, and the items of lists and tuples (a numeric
    segment is an index). Anything else, a missing key or index, and any
    segment starting with ``_`` resolves to ``None``. Never raises.
    """
    if not isinstance(path, str) or not path:
        return None
    return resolve_segments(state, tuple(path.split(".")))
