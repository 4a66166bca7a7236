"""Serialization: orjson bytes with a small, explicit registry of tagged types.

JSON-native values are stored as they are. A few types JSON lacks are stored
as tagged objects ``{"__df__": TAG, "v": ...}``: datetimes, dates, times,
timedeltas, bytes, sets and decimals. Pydantic models and dataclasses are
stored as their fields; enums as their value. Typed objects are rebuilt by
validating against the workflow's ``Blackboard`` schema, so the schema is the
type registry: nothing is ever imported by a name read from the store, and
nothing is pickled.

A value that cannot be encoded raises ``TypeError`` here; callers turn it into
``SerializationError`` naming the node and field, at write time.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import orjson
from pydantic import BaseModel

from ._messages import Message

__all__ = ["TAG", "TAG_BYTES", "UnknownTagError", "decode", "encode"]

TAG = "__df__"
_TAG_BYTES = b'"__df__":'
TAG_BYTES = _TAG_BYTES
"""How a tagged object starts in encoded bytes: absent means plain JSON."""
_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | \
    orjson.OPT_NON_STR_KEYS


class UnknownTagError(ValueError):
    """A stored tagged object names a type this code does not know."""


def _tagged(tag: str, value: Any) -> dict[str, Any]:
    return {TAG: tag, "v": value}


_ENCODERS: list[tuple[type, Callable[[Any], Any]]] = [
    (Message, lambda m: m.model_dump(exclude_defaults=True)),
    (BaseModel, lambda m: m.model_dump()),
    (datetime, lambda d: _tagged("datetime", d.isoformat())),
    (date, lambda d: _tagged("date", d.isoformat())),
    (time, lambda t: _tagged("time", t.isoformat())),
    (timedelta, lambda t: _tagged("timedelta", t.total_seconds())),
    (bytes, lambda b: _tagged("bytes", base64.b64encode(b).decode("ascii"))),
    (bytearray, lambda b: _tagged("bytes", base64.b64encode(bytes(b)).decode("ascii"))),
    (frozenset, lambda s: _tagged("set", _sorted(s))),
    (set, lambda s: _tagged("set", _sorted(s))),
    (Decimal, lambda d: _tagged("decimal", str(d))),
]

_DECODERS: dict[str, Callable[[Any], Any]] = {
    "datetime": datetime.fromisoformat,
    "date": date.fromisoformat,
    "time": time.fromisoformat,
    "timedelta": lambda s: timedelta(seconds=s),
    "bytes": base64.b64decode,
    "set": set,
    "decimal": Decimal,
}


def _sorted(items: Any) -> list[Any]:
    try:
        return sorted(items)
    except TypeError:
        return list(items)


class _Encoder:
    """Counts the tags it emits, so a user key named like the tag is caught."""

    __slots__ = ("tags",)

    def __init__(self) -> None:
        self.tags = 0

    def __call__(self, obj: Any) -> Any:
        for cls, fn in _ENCODERS:
            if isinstance(obj, cls):
                out = fn(obj)
                if isinstance(out, dict) and TAG in out:
                    self.tags += 1
                return out
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        raise TypeError(f"values of type {type(obj).__name__} cannot be stored")


def encode(value: Any) -> bytes:
    """Encode ``value`` to bytes; raises ``TypeError`` if it cannot be stored."""
    enc = _Encoder()
    try:
        data = orjson.dumps(value, default=enc, option=_OPTIONS)
    except orjson.JSONEncodeError as exc:
        raise TypeError(str(exc)) from None
    if data.count(_TAG_BYTES) != enc.tags:
        raise TypeError(f"the key {TAG!r} is reserved and cannot appear in stored values")
    return data


def decode(data: bytes) -> Any:
    """Decode bytes written by :func:`encode`.

    Raises ``orjson.JSONDecodeError`` on bad bytes and :class:`UnknownTagError`
    on a tag this code does not know.
    """
    value = orjson.loads(data)
    if _TAG_BYTES in data:
        return _untag(value)
    return value


def _untag(value: Any) -> Any:
    if isinstance(value, dict):
        tag = value.get(TAG)
        if tag is not None:
            fn = _DECODERS.get(tag) if isinstance(tag, str) else None
            if fn is None:
                raise UnknownTagError(f"unknown type tag {tag!r}")
            try:
                return fn(value.get("v"))
            except (TypeError, ValueError) as exc:
                raise UnknownTagError(f"bad {tag} value: {exc}") from None
        return {k: _untag(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_untag(v) for v in value]
    return value
