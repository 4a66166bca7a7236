"""Serialization: orjson bytes with a small, explicit registry of tagged types.

JSON-native values are stored as they are. Values JSON lacks, or that orjson
would silently change, are stored as tagged objects ``{"__df__": TAG, "v": ...}``:

======================  ============  =========================================
value                   tag           ``v``
======================  ============  =========================================
datetime, date, time    ``datetime``  ISO 8601 text (``date``, ``time``)
timedelta               ``timedelta`` seconds, or ``[days, seconds, micros]``
                                      when a float would lose microseconds
bytes, bytearray        ``bytes``     base64 text
set                     ``set``       the items
frozenset               ``frozenset`` the items
Decimal                 ``decimal``   its text
NaN, +inf, -inf         ``float``     ``"nan"``, ``"inf"``, ``"-inf"``
int beyond 64 bits      ``int``       its decimal text
dict with a non-str     ``dict``      ``[[key, value], ...]``
key
======================  ============  =========================================

Pydantic models and dataclasses are stored as their fields, enums as their
value, UUIDs and ``str`` subclasses as strings, tuples as arrays. Typed
objects are rebuilt by validating against the workflow's ``Blackboard``
schema, so the schema is the type registry: nothing is ever imported by a
name read from the store, and nothing is pickled.

What the codec guarantees, for every value :func:`encode` accepts:

* ``decode(encode(v))`` equals ``v`` for JSON-native data and every tagged
  type above, at any depth (in lists, dict values and keys, sets, model and
  dataclass fields); NaN and infinities come back as the same float, a
  ``{1: "a", "1": "b"}`` keeps both keys, a tuple used as a dict key or set
  item comes back as a tuple;
* validated against the value's declared type (a blackboard field, a model
  field, a step's return annotation, a request's ``response_type``), the
  decoded value equals the original and has its type: models, dataclasses,
  enums, UUIDs and tuples come back as they were written. Where the type is
  ``Any`` (or in ``get_state``'s plain values) they stay in their stored
  form: dicts, values, strings, lists;
* an aware datetime or time comes back as the same instant with a fixed UTC
  offset.

Everything else raises ``TypeError`` here, naming the problem; callers turn
it into ``SerializationError`` naming the node and field, at write time:
values of other types, strings with lone surrogates, integers too long for
their decimal text (over 4300 digits), nesting deeper than 254 levels
(a cycle), and user dicts with the reserved key ``"__df__"``.

The common case stays on orjson's C path: the exact (Python) path runs only
when orjson refuses the value (a non-str key, a huge integer) or its output
holds a ``null`` that a walk of the value finds to be a non-finite float.
"""

from __future__ import annotations

import base64
import dataclasses
import math
from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from enum import Enum
from functools import cache
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["TAG", "TAG_BYTES", "UnknownTagError", "as_bytes", "decode", "encode"]

TAG = "__df__"
_TAG_BYTES = b'"__df__":'
TAG_BYTES = _TAG_BYTES
"""How a tagged object starts in encoded bytes: absent means plain JSON."""
# No OPT_NON_STR_KEYS: orjson refusing a non-str key is how the exact path is chosen.
_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
_MAX_DEPTH = 254  # orjson's own limit: deeper values (and cycles) are refused alike
_INT64_MIN, _UINT64_MAX = -(2**63), 2**64 - 1
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


class UnknownTagError(ValueError):
    """A stored tagged object names a type this code does not know, or a bad value."""


class _Tagged(dict[str, Any]):
    """A tagged object this module made (orjson writes it as a plain object)."""


def _tagged(tag: str, value: Any) -> _Tagged:
    return _Tagged({TAG: tag, "v": value})


def _timedelta(t: timedelta) -> _Tagged:
    seconds = t.total_seconds()
    if timedelta(seconds=seconds) == t:
        return _tagged("timedelta", seconds)
    return _tagged("timedelta", [t.days, t.seconds, t.microseconds])


@cache
def _encoders() -> list[tuple[type, Callable[[Any], Any]]]:
    """How values JSON lacks are stored; pydantic models first, a message before any model.

    pydantic and the message models are imported here, by the first value that
    needs them: reading a store (``decode``, ``as_bytes``) never imports them.
    """
    from ._messages import Message

    models: list[tuple[type, Callable[[Any], Any]]] = [
        (Message, lambda m: m.model_dump(exclude_defaults=True)),
        (_base_model(), lambda m: m.model_dump())]
    return models + _ENCODERS


@cache
def _base_model() -> type[BaseModel]:
    from pydantic import BaseModel

    return BaseModel


_ENCODERS: list[tuple[type, Callable[[Any], Any]]] = [
    (datetime, lambda d: _tagged("datetime", d.isoformat())),
    (date, lambda d: _tagged("date", d.isoformat())),
    (time, lambda t: _tagged("time", t.isoformat())),
    (timedelta, _timedelta),
    (bytes, lambda b: _tagged("bytes", base64.b64encode(b).decode("ascii"))),
    (bytearray, lambda b: _tagged("bytes", base64.b64encode(bytes(b)).decode("ascii"))),
    (frozenset, lambda s: _tagged("frozenset", _sorted(s))),
    (set, lambda s: _tagged("set", _sorted(s))),
    (Decimal, lambda d: _tagged("decimal", str(d))),
]


def _sorted(items: Any) -> list[Any]:
    try:
        return sorted(items)
    except TypeError:
        return list(items)


def _convert(obj: Any) -> Any:
    """What a non-JSON object is stored as (a tagged dict, a model's fields, ...)."""
    for cls, fn in _encoders():
        if isinstance(obj, cls):
            return fn(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    raise TypeError(f"values of type {type(obj).__name__} cannot be stored")


class _Encoder:
    """orjson's ``default``; counts the tags it emits, so a user key named like the tag is caught."""

    __slots__ = ("tags",)

    def __init__(self) -> None:
        self.tags = 0

    def __call__(self, obj: Any) -> Any:
        out = _convert(obj)
        if type(out) is _Tagged:
            self.tags += 1
        return out


def encode(value: Any) -> bytes:
    """Encode ``value`` to bytes; raises ``TypeError`` if it cannot be stored exactly."""
    enc = _Encoder()
    try:
        data = orjson.dumps(value, default=enc, option=_OPTIONS)
    except TypeError:
        # a non-str key, an integer beyond 64 bits, or a value nothing stores:
        # the exact path stores the first two and names the problem otherwise
        return _Exact().encode(value)
    kind = type(value)
    if kind is str or kind is int or kind is bool or kind is float or value is None:
        if data == b"null" and value is not None:
            return _Exact().encode(value)  # orjson writes NaN and infinities as null
        return data  # no tag can hide in these
    if data.find(b"null") != -1 and _has_non_finite(value):
        return _Exact().encode(value)  # orjson writes NaN and infinities as null
    if enc.tags != data.count(_TAG_BYTES):
        raise TypeError(_reserved())
    return data


def _reserved() -> str:
    return f"the key {TAG!r} is reserved and cannot appear in stored values"


def _has_non_finite(value: Any) -> bool:
    """Whether a NaN or infinity hides in ``value`` (walked as the encoder sees it).

    Runs only when orjson's output holds a ``null``, so it is written for the
    common shapes first: plain dicts, lists and scalars. orjson has already
    accepted the value, so its depth is bounded.
    """
    kind = type(value)
    if kind is dict:
        items: Any = value.values()
    elif kind is list or kind is tuple:
        items = value
    else:
        items = (_unusual(value),)
    for item in items:
        kind = type(item)
        if kind is float:
            if item - item != 0:  # nan - nan and inf - inf are nan; finite gives 0.0
                return True
        elif kind is str or item is None or kind is int or kind is bool:
            continue
        elif _has_non_finite(item):
            return True
    return False


def _unusual(item: Any) -> Any:
    """What the walk looks into for anything but plain dicts, lists and scalars."""
    if isinstance(item, float):
        return math.nan if not math.isfinite(item) else 0.0
    if isinstance(item, list | tuple):
        return list(item)
    if isinstance(item, dict):
        return list(item.values())
    if isinstance(item, Enum):
        return item.value
    if isinstance(item, str | int):
        return None
    if isinstance(item, _base_model()) and _plain_model(type(item)):
        return [*item.__dict__.values(), *(item.__pydantic_extra__ or {}).values()]
    try:
        return _convert(item)
    except TypeError:
        return None  # orjson stores it natively (a UUID, ...)


@cache
def _plain_model(cls: type[BaseModel]) -> bool:
    """Whether a model dumps exactly its field values (no serializers, no computed fields)."""
    hooks = cls.__pydantic_decorators__
    return not (hooks.field_serializers or hooks.model_serializers or cls.model_computed_fields)


class _Exact:
    """The Python encoding path: turns a value into JSON-native data, tags included."""

    __slots__ = ("tags",)

    def __init__(self) -> None:
        self.tags = 0

    def encode(self, value: Any) -> bytes:
        enc = _Encoder()
        try:
            data = orjson.dumps(self.prepare(value, 0), default=enc, option=_OPTIONS)
        except RecursionError:
            raise TypeError("the value is nested too deeply (or contains itself)") from None
        if data.count(_TAG_BYTES) != self.tags + enc.tags:
            raise TypeError(_reserved())
        return data

    def tag(self, tag: str, value: Any) -> _Tagged:
        self.tags += 1
        return _tagged(tag, value)

    def prepare(self, value: Any, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            raise TypeError("the value is nested too deeply (or contains itself)")
        if isinstance(value, str) or value is None or isinstance(value, bool):
            return value
        if isinstance(value, Enum):
            return self.prepare(value.value, depth)
        if isinstance(value, int):
            return self.integer(value)
        if isinstance(value, float):
            return value if math.isfinite(value) else self.tag("float", repr(float(value)))
        if isinstance(value, dict):
            return self.mapping(value, depth + 1)
        if isinstance(value, list | tuple):
            return [self.prepare(v, depth + 1) for v in value]
        try:
            out = _convert(value)
        except TypeError:
            return value  # left to orjson: a type it stores natively, or its own error
        if type(out) is _Tagged:
            return self.tag(out[TAG], self.prepare(out["v"], depth + 1))
        return self.prepare(out, depth)

    def integer(self, value: int) -> Any:
        if _INT64_MIN <= value <= _UINT64_MAX:
            return int(value)
        try:
            return self.tag("int", str(int(value)))
        except ValueError:
            raise TypeError(f"an integer of {value.bit_length()} bits is too long to store "
                            "(at most 4300 decimal digits)") from None

    def mapping(self, value: dict[Any, Any], depth: int) -> Any:
        if all(isinstance(k, str) for k in value):
            if TAG in value:
                raise TypeError(_reserved())
            return {str.__str__(k): self.prepare(v, depth) for k, v in value.items()}
        return self.tag("dict", [[self.prepare(k, depth), self.prepare(v, depth)]
                                 for k, v in value.items()])


# -- decoding -------------------------------------------------------------------------


def _frozen(value: Any) -> Any:
    """A decoded dict key or set item: arrays were tuples (a list cannot be one)."""
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


def _items(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"expected an array, got {type(value).__name__}")
    return [_frozen(v) for v in value]


def _dict(value: Any) -> dict[Any, Any]:
    if not isinstance(value, list) or not all(
            isinstance(p, list) and len(p) == 2 for p in value):
        raise TypeError("expected an array of [key, value] pairs")
    return {_frozen(k): v for k, v in value}


def _float(value: Any) -> float:
    if not isinstance(value, str) or value not in _NON_FINITE:
        raise TypeError(f"expected one of {sorted(_NON_FINITE)}, got {value!r:.40}")
    return _NON_FINITE[value]


def _int(value: Any) -> int:
    if not isinstance(value, str):
        raise TypeError(f"expected decimal text, got {type(value).__name__}")
    return int(value)


def _duration(value: Any) -> timedelta:
    if isinstance(value, list) and len(value) == 3:
        return timedelta(days=value[0], seconds=value[1], microseconds=value[2])
    if isinstance(value, int | float) and not isinstance(value, bool):
        return timedelta(seconds=value)
    raise TypeError(f"expected seconds or [days, seconds, microseconds], got {value!r:.40}")


def _text(parse: Callable[[str], Any]) -> Callable[[Any], Any]:
    def decode_text(value: Any) -> Any:
        if not isinstance(value, str):
            raise TypeError(f"expected text, got {type(value).__name__}")
        return parse(value)

    return decode_text


_DECODERS: dict[str, Callable[[Any], Any]] = {
    "datetime": _text(datetime.fromisoformat),
    "date": _text(date.fromisoformat),
    "time": _text(time.fromisoformat),
    "timedelta": _duration,
    "bytes": _text(lambda s: base64.b64decode(s, validate=True)),
    "set": lambda v: set(_items(v)),
    "frozenset": lambda v: frozenset(_items(v)),
    "decimal": _text(Decimal),
    "float": _float,
    "int": _int,
    "dict": _dict,
}


def as_bytes(data: object) -> bytes:
    """Stored data as bytes, whatever a driver hands back; :class:`UnknownTagError` if none.

    PostgreSQL drivers may return a ``memoryview``; SQLite returns ``str`` for
    a cell written as text into a BLOB column (its UTF-8 bytes are the data).
    """
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    if isinstance(data, str):
        try:
            return data.encode()
        except UnicodeEncodeError as exc:
            raise UnknownTagError(f"stored text is not UTF-8: {exc}") from None
    raise UnknownTagError(f"stored data is {type(data).__name__}, not bytes")


def decode(data: bytes) -> Any:
    """Decode bytes written by :func:`encode`.

    Raises ``orjson.JSONDecodeError`` on bad bytes and :class:`UnknownTagError`
    on a tag this code does not know, a tagged value it cannot read, or data
    that is not bytes; all are ``ValueError``s.
    """
    if type(data) is not bytes:
        data = as_bytes(data)
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
                raise UnknownTagError(f"unknown type tag {tag!r:.40}")
            try:
                return fn(_untag(value.get("v")))
            except (TypeError, ValueError, ArithmeticError) as exc:
                raise UnknownTagError(f"bad {tag} value: {exc}") from None
        return {k: _untag(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_untag(v) for v in value]
    return value
