"""The ``state`` section of a declarative workflow, read and written.

Each field has a type from a small closed grammar (parsed here, never
evaluated)::

    type := item ("|" item)*
    item := str | int | float | bool | any | None | list ["[" type "]"]
          | dict ["[" "str" "," type "]"]

and optionally a ``reducer`` (``append``, ``add``, ``merge`` or ``none`` =
last-write-wins), a ``default`` (else the type's empty value: ``""``, ``0``,
``[]``, ``None`` for optional types ...) and a ``description``. A field given
as a plain string is just its type. The section becomes a ``Blackboard``
subclass built with ``pydantic.create_model``; without it the blackboard is
``FreeBlackboard`` (any key, last-write-wins).
"""

from __future__ import annotations

import functools
import keyword
import operator
import re
import types
from collections.abc import Mapping
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import Field, TypeAdapter, create_model

from ...model._blackboard import Blackboard, FreeBlackboard, StateSchema, schema_for
from ...model._reducers import Reducer, add, append, last_write_wins, merge

__all__ = ["dump_state", "has_field", "parse_state", "parse_type", "type_name"]

_FIELD_KEYS = frozenset({"type", "reducer", "default", "description"})
_REDUCERS: dict[str, Reducer | None] = {"append": append, "add": add, "merge": merge, "none": None}
_REDUCER_NAMES: dict[Reducer, str] = {append: "append", add: "add", merge: "merge",
                                      last_write_wins: "none"}
_FITS: dict[Reducer, tuple[type, ...]] = {append: (list,), add: (int, float, str, list),
                                          merge: (dict,)}
_SIMPLE: dict[str, Any] = {"str": str, "int": int, "float": float, "bool": bool, "any": Any,
                           "None": type(None), "list": list[Any], "dict": dict[str, Any]}
_MAX_TYPE = 200


def parse_state(raw: Any, name: str, problems: list[str]) -> type[Blackboard]:
    """The blackboard class of a ``state`` section (``FreeBlackboard`` when absent)."""
    if raw is None:
        return FreeBlackboard
    if not isinstance(raw, Mapping):
        problems.append(f"state: must be an object of field name to type, not {type(raw).__name__}")
        return FreeBlackboard
    fields: dict[str, Any] = {}
    for key, spec in raw.items():
        built = _parse_field(key, spec, problems)
        if built is not None:
            fields[key] = built
    cls_name = "".join(c if c.isalnum() else "_" for c in name)[:60] + "State"
    try:
        return create_model(cls_name, __base__=Blackboard, **fields)
    except Exception as exc:  # a name pydantic refuses that the checks let through
        problems.append(f"state: {type(exc).__name__}: {exc}")
        return FreeBlackboard


def _parse_field(key: Any, spec: Any, problems: list[str]) -> tuple[Any, Any] | None:
    loc = f"state.{key}"
    if not (isinstance(key, str) and key.isidentifier() and not keyword.iskeyword(key)
            and not key.startswith(("_", "model_")) and not hasattr(Blackboard, key)
            and key not in Blackboard.model_fields):
        problems.append(f"state: {key!r:.60} is not a usable field name (an identifier, not a "
                        "Python keyword, not starting with '_' or 'model_', not a Blackboard "
                        "attribute such as 'messages')")
        return None
    spec = spec if isinstance(spec, Mapping) else {"type": spec}
    problems.extend(f"{loc}: unknown key {k!r:.60}" for k in spec if k not in _FIELD_KEYS)
    tp = _field_type(spec.get("type"), f"{loc}.type", problems)
    fn = _field_reducer(spec.get("reducer"), tp, f"{loc}.reducer", problems)
    description = spec.get("description")
    if description is not None and not isinstance(description, str):
        problems.append(f"{loc}.description: must be a string")
        description = None
    if tp is None:
        return None
    default = _default(tp, spec["default"], f"{loc}.default", problems) \
        if "default" in spec else _zero(tp)
    info = Field(default=default, description=description)
    return (Annotated[tp, fn] if fn is not None else tp), info


def _field_type(text: Any, loc: str, problems: list[str]) -> Any:
    if not isinstance(text, str):
        problems.append(f"{loc}: must be a type name such as 'str' or 'list[int]', "
                        f"not {type(text).__name__}")
        return None
    try:
        return parse_type(text)
    except ValueError as exc:
        problems.append(f"{loc}: {text[:_MAX_TYPE]!r}: {exc}")
        return None


def _field_reducer(name: Any, tp: Any, loc: str, problems: list[str]) -> Reducer | None:
    if name is None:
        return None
    if not isinstance(name, str) or name not in _REDUCERS:
        problems.append(f"{loc}: must be one of {', '.join(_REDUCERS)}, not {name!r:.40}")
        return None
    fn = _REDUCERS[name]
    if fn is not None and tp is not None and (get_origin(tp) or tp) not in _FITS[fn]:
        problems.append(f"{loc}: {name} does not fit type {type_name(tp)!r}")
    return fn


def _default(tp: Any, value: Any, loc: str, problems: list[str]) -> Any:
    try:
        return TypeAdapter(tp).validate_python(value)
    except Exception as exc:  # pydantic's ValidationError, or worse on odd input
        last = str(exc).strip().splitlines()[-1].strip() if str(exc).strip() else type(exc).__name__
        problems.append(f"{loc}: does not fit the type: {last[:120]}")
        return _zero(tp)


def parse_type(text: str) -> Any:
    """Parse a type name (``"list[str]"``, ``"float | None"``); raises ValueError."""
    tokens = re.findall(r"[A-Za-z_]+|\S", text[:_MAX_TYPE])
    if len(text) > _MAX_TYPE or not tokens:
        raise ValueError("expected a type such as str, int, list[str] or float | None")
    parser = _TypeParser(tokens)
    result = parser.union(0)
    if parser.pos != len(tokens):
        raise ValueError(f"unexpected {tokens[parser.pos]!r}")
    return result


class _TypeParser:
    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.pos = 0

    def peek(self) -> str:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else "end of text"

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if (expected is not None and tok != expected) or self.pos >= len(self.tokens):
            raise ValueError(f"expected {expected or 'a type'!r}, found {tok!r}")
        self.pos += 1
        return tok

    def union(self, depth: int) -> Any:
        if depth > 8:
            raise ValueError("nested too deeply")
        parts = [self.item(depth)]
        while self.peek() == "|":
            self.take("|")
            parts.append(self.item(depth))
        return functools.reduce(operator.or_, parts) if len(parts) > 1 else parts[0]

    def item(self, depth: int) -> Any:
        name = self.take()
        if name not in _SIMPLE:
            raise ValueError(f"unknown type {name!r} (known: {', '.join(_SIMPLE)})")
        if name not in ("list", "dict") or self.peek() != "[":
            return _SIMPLE[name]
        self.take("[")
        if name == "dict":
            self.take("str")
            self.take(",")
        inner = self.union(depth + 1)
        self.take("]")
        return list[inner] if name == "list" else dict[str, inner]  # type: ignore[valid-type]


def _members(tp: Any) -> tuple[Any, ...]:
    return get_args(tp) if get_origin(tp) in (Union, types.UnionType) else (tp,)


def type_name(tp: Any) -> str | None:
    """The inverse of :func:`parse_type`; None for a type the grammar cannot name."""
    if len(_members(tp)) > 1:
        names = [type_name(m) for m in _members(tp)]
        return None if None in names else " | ".join(n for n in names if n)
    for name, simple in _SIMPLE.items():
        if tp is simple or tp == simple:
            return name
    origin, args = get_origin(tp) or tp, get_args(tp)
    if origin is list and len(args) <= 1:
        inner = type_name(args[0]) if args else "any"
        return None if inner is None else ("list" if inner == "any" else f"list[{inner}]")
    if origin is dict and (not args or (len(args) == 2 and args[0] is str)):
        inner = type_name(args[1]) if args else "any"
        return None if inner is None else ("dict" if inner == "any" else f"dict[str, {inner}]")
    return None


def _zero(tp: Any) -> Any:
    members = _members(tp)
    if Any in members or type(None) in members:
        return None
    origin = get_origin(members[0]) or members[0]
    return {str: "", int: 0, float: 0.0, bool: False, list: [], dict: {}}.get(origin)


def has_field(schema: StateSchema, name: str) -> bool:
    """True when ``name`` is a field of ``schema`` (any plain name on a free-form one)."""
    return name in schema.fields or (schema.free_form and name.isidentifier()
                                     and not name.startswith(("_", "model_")))


def dump_state(cls: type[Blackboard], problems: list[str]) -> dict[str, Any] | None:
    """The ``state`` section describing ``cls`` (None for a free-form blackboard)."""
    schema = schema_for(cls)
    declared = {k: v for k, v in cls.model_fields.items() if k != "messages"}
    if schema.free_form:
        if declared:
            problems.append("state: a free-form blackboard with declared fields cannot be written")
        return None
    out: dict[str, Any] = {}
    for name, info in declared.items():
        loc, annotation = f"state.{name}", info.annotation if info.annotation is not None else Any
        tname = type_name(annotation)
        reducer = _REDUCER_NAMES.get(schema.fields[name].reducer)
        if tname is None or reducer is None or info.is_required():
            what = "its type" if tname is None else "its reducer" if reducer is None else "no default"
            problems.append(f"{loc}: cannot be written ({what} has no declarative form)")
            continue
        default = info.get_default(call_default_factory=True, validated_data={})
        entry: dict[str, Any] = {"type": tname}
        if reducer != "none":
            entry["reducer"] = reducer
        zero = _zero(annotation)
        if not (type(default) is type(zero) and default == zero):
            entry["default"] = TypeAdapter(annotation).dump_python(default, mode="json")
        if info.description:
            entry["description"] = info.description
        out[name] = tname if len(entry) == 1 else entry
    return out
