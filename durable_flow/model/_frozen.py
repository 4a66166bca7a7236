"""Deeply read-only values: the blackboard as nodes (and results) see it.

A value enters the engine's state once (run input, a merged write, a
decoded checkpoint) and :func:`freeze` makes it read-only at every depth,
so one value can be shared by every task, every later superstep and
``RunResult.state`` without copying. Lists, dicts and sets become
:class:`FrozenList`, :class:`FrozenDict` and :class:`FrozenSet`: subclasses of
the builtins, so reading, equality with plain containers, ``isinstance``,
orjson and pydantic validation behave as before, while every method that
would change them in place raises ``TypeError``. A pydantic model whose class
is not frozen becomes an instance of a read-only subclass (assignment raises
pydantic's frozen-instance ``ValidationError``); a dataclass likewise
(assignment raises ``TypeError``). Tuples are rebuilt with frozen items.

Operations that build a new value give plain, mutable objects, as they do
for the builtins: ``state.notes + [x]``, ``dict(state.d)``, ``{**state.d}``,
``list.copy()``, slicing, ``copy.copy`` and ``copy.deepcopy`` (which thaws
every level, so ``model_copy(deep=True)`` is a fully mutable copy).

Freezing an already frozen container costs nothing (its items were frozen
when it was built), so the engine freezes only what changed.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from enum import Enum
from functools import cache
from pathlib import PurePath
from typing import Any, NoReturn, Self
from uuid import UUID

from pydantic import BaseModel, ConfigDict

__all__ = [
    "Deferred", "FrozenDict", "FrozenList", "FrozenSet", "LogBuffer", "freeze", "freeze_appended",
    "frozen_when",
]

_HINT = "; return a new value (a node's update) instead of changing it in place"


def _refuse(kind: str) -> Callable[..., NoReturn]:
    def method(self: Any, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(f"this {kind} is part of a read-only state snapshot{_HINT}")

    return method


class FrozenList(list[Any]):
    """A list whose items are frozen and which cannot change in place."""

    __slots__ = ()

    def __new__(cls, items: Iterable[Any] = ()) -> FrozenList:
        return cls._wrap([freeze(v) for v in items])

    def __init__(self, items: Iterable[Any] = ()) -> None:
        pass  # filled by __new__; calling __init__ again must not refill it

    @classmethod
    def _wrap(cls, frozen_items: Iterable[Any]) -> Self:
        out = list.__new__(cls)
        list.extend(out, frozen_items)
        return out

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(v, memo) for v in self]

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenList, (list(self),))

    _refused = _refuse("list")
    append = extend = insert = remove = pop = clear = sort = reverse = _refused
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refused
    del _refused


class LogBuffer(FrozenList):
    """The engine's append-only buffer of one ``append`` field or node history.

    Read-only to everyone else, like a :class:`FrozenList`, but the engine
    grows it in place at each superstep's barrier (:meth:`grow`), so merging
    an append costs O(items appended) however long the log is, and every
    superstep's snapshot shares the one buffer instead of copying it. A
    snapshot is a view of the log as its superstep began only while that
    superstep runs: keep ``list(state.field)`` to hold on to it longer.

    :func:`freeze` never keeps a buffer inside another value: a buffer
    written to another field (or nested in one) is copied into a
    :class:`FrozenList`, so no other value changes when the log grows.
    """

    __slots__ = ()

    @classmethod
    def of(cls, current: Iterable[Any]) -> LogBuffer:
        """A buffer holding ``current`` (copied once; a frozen list's items are not walked)."""
        if type(current) is FrozenList:
            return cls._wrap(current)
        return cls._wrap(FrozenList(current))

    @classmethod
    def adopt(cls, frozen_items: Iterable[Any]) -> LogBuffer:
        """A buffer of items that are frozen already (they are not walked again)."""
        return cls._wrap(frozen_items)

    def grow(self, items: Iterable[Any]) -> None:
        """Append ``items`` (frozen on the way in): the engine's merge, nobody else's."""
        list.extend(self, [freeze(v) for v in items])

    def shrink(self, length: int) -> None:
        """Drop every item from ``length`` on: undoes a merge that was not committed."""
        list.__delitem__(self, slice(length, None))

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenList, (list(self),))


class FrozenDict(dict[Any, Any]):
    """A dict whose values are frozen and which cannot change in place."""

    __slots__ = ()

    def __new__(cls, *args: Any, **kwargs: Any) -> FrozenDict:
        return cls._wrap({k: freeze(v) for k, v in dict(*args, **kwargs).items()})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass  # filled by __new__; calling __init__ again must not refill it

    @classmethod
    def _wrap(cls, frozen_items: dict[Any, Any]) -> FrozenDict:
        out = dict.__new__(cls)
        dict.update(out, frozen_items)
        return out

    @classmethod
    def fromkeys(cls, keys: Iterable[Any], value: Any = None) -> FrozenDict:
        """A frozen dict mapping every key to ``value``."""
        return cls(dict.fromkeys(keys, value))

    def __copy__(self) -> dict[Any, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[Any, Any]:
        return {copy.deepcopy(k, memo): copy.deepcopy(v, memo) for k, v in self.items()}

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))

    _refused = _refuse("dict")
    update = pop = popitem = setdefault = clear = _refused
    __setitem__ = __delitem__ = __ior__ = _refused
    del _refused


class FrozenSet(set[Any]):
    """A set of frozen items which cannot change in place."""

    __slots__ = ()

    def __new__(cls, items: Iterable[Any] = ()) -> FrozenSet:
        return cls._wrap([freeze(v) for v in items])

    def __init__(self, items: Iterable[Any] = ()) -> None:
        pass  # filled by __new__; calling __init__ again must not refill it

    @classmethod
    def _wrap(cls, frozen_items: Iterable[Any]) -> FrozenSet:
        out = set.__new__(cls)
        set.update(out, frozen_items)
        return out

    def __copy__(self) -> set[Any]:
        return set(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> set[Any]:
        return {copy.deepcopy(v, memo) for v in self}

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenSet, (set(self),))

    _refused = _refuse("set")
    add = discard = remove = pop = clear = update = _refused
    difference_update = intersection_update = symmetric_difference_update = _refused
    __ior__ = __iand__ = __isub__ = __ixor__ = _refused
    del _refused


_DONE: frozenset[type] = frozenset({
    str, int, float, bool, bytes, type(None), complex, Decimal, UUID,
    datetime, date, time, timedelta, FrozenList, FrozenDict, FrozenSet,
})
"""Types whose values are immutable all the way down: freezing returns them."""

_IMMUTABLE = (str, int, float, bytes, complex, Decimal, UUID, date, time, timedelta,
              Enum, PurePath, range)


_FROZEN_WHEN: dict[type, Callable[[Any], bool]] = {}
"""Frozen model classes whose instances are read-only all the way down when a cheap
check holds (``Message``: its two containers are frozen ones), by exact type."""


def frozen_when(cls: type, check: Callable[[Any], bool]) -> None:
    """Let :func:`freeze` return instances of ``cls`` as they are when ``check`` holds.

    For frozen classes whose validators already freeze every container field
    (a long history is then not walked message by message); ``check`` must
    confirm those fields are frozen containers, since ``model_construct`` and
    ``model_copy(update=...)`` skip the validators.
    """
    _FROZEN_WHEN[cls] = check


def freeze(value: Any) -> Any:
    """A deeply read-only value equal to ``value`` (``value`` itself is not changed).

    Values that are already immutable, and containers this module built, are
    returned as they are.
    """
    kind = type(value)
    if kind in _DONE:
        return value
    check = _FROZEN_WHEN.get(kind)
    if check is not None and check(value):
        return value
    return _freeze_slow(value)


def freeze_appended(current: Iterable[Any], items: Iterable[Any]) -> FrozenList:
    """``current`` followed by ``items``; only ``items`` are walked.

    ``current`` is normally a frozen list already (then it is copied, not
    walked); the engine calls this for ``append`` fields and node histories.
    """
    out = FrozenList._wrap(current if type(current) is FrozenList else freeze(list(current)))
    list.extend(out, [freeze(v) for v in items])
    return out


class Deferred:
    """A value the engine builds only when it is first read (``resolve``).

    The engine holds a long log it loaded but no task has read yet as one;
    ``StateSchema.build`` leaves such a field out of the blackboard until the
    field is read, and :func:`freeze` resolves it.
    """

    __slots__ = ()

    def resolve(self) -> Any:
        """The value, built on the first call (then kept)."""
        raise NotImplementedError


def _freeze_slow(value: Any) -> Any:
    """Freeze a value that may hold mutable parts (the one deep walk)."""
    if isinstance(value, Deferred):
        return freeze(value.resolve())
    if type(value) is LogBuffer:  # a log written elsewhere: a copy that will not grow
        return FrozenList._wrap(value)
    if isinstance(value, list):
        return FrozenList._wrap([v if type(v) in _DONE else freeze(v) for v in value])
    if isinstance(value, dict):
        return FrozenDict._wrap({k: v if type(v) in _DONE else freeze(v)
                                 for k, v in value.items()})
    if isinstance(value, BaseModel):
        return _freeze_model(value)
    if isinstance(value, set):
        return FrozenSet._wrap([freeze(v) for v in value])
    if isinstance(value, tuple | frozenset):
        return _freeze_items(value)
    if isinstance(value, _IMMUTABLE):
        return value
    if isinstance(value, bytearray):
        return bytes(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _freeze_dataclass(value)
    return value


def _freeze_items(value: tuple[Any, ...] | frozenset[Any]) -> Any:
    items = [freeze(v) for v in value]
    if all(a is b for a, b in zip(items, value, strict=True)):
        return value
    if isinstance(value, frozenset):
        return frozenset(items)
    make = getattr(type(value), "_make", None)  # a NamedTuple keeps its type
    return make(items) if make is not None else tuple(items)


def _freeze_model(model: BaseModel) -> BaseModel:
    cls = type(model)
    fields = model.__dict__
    new = {k: freeze(v) for k, v in fields.items()}
    root = cls.__pydantic_root_model__  # a RootModel has no extra or private slots
    extra = None if root else model.__pydantic_extra__
    new_extra = None if extra is None else FrozenDict._wrap({k: freeze(v) for k, v in extra.items()})
    frozen_cls = bool(cls.model_config.get("frozen"))
    if frozen_cls and _same(new, fields) and (
            extra is None or (type(extra) is FrozenDict and _same(new_extra or {}, extra))):
        return model
    target = cls if frozen_cls else _readonly_model_class(cls)
    out = target.__new__(target)
    object.__setattr__(out, "__dict__", new)
    object.__setattr__(out, "__pydantic_fields_set__", set(model.__pydantic_fields_set__))
    if not root:
        private = getattr(model, "__pydantic_private__", None)
        object.__setattr__(out, "__pydantic_extra__", new_extra)
        object.__setattr__(out, "__pydantic_private__", None if private is None else dict(private))
    return out


def _same(new: dict[str, Any], old: dict[str, Any]) -> bool:
    return all(new[k] is v for k, v in old.items())


@cache
def _readonly_model_class(cls: type[BaseModel]) -> type[BaseModel]:
    """A frozen subclass of ``cls`` that compares equal to ``cls`` instances.

    Copies (``copy``, ``deepcopy``, ``model_copy``) are instances of ``cls``
    again, so a copy can be changed.
    """
    def __eq__(self: Any, other: Any) -> bool:
        if type(other) is not type(self) and type(other) is not cls:
            return NotImplemented
        return bool(self.__dict__ == other.__dict__
                    and (self.__pydantic_extra__ or {}) == (other.__pydantic_extra__ or {})
                    and getattr(self, "__pydantic_private__", None)
                    == getattr(other, "__pydantic_private__", None))

    def __copy__(self: Any) -> Any:
        return _as(cls, cls.__copy__(self))

    def __deepcopy__(self: Any, memo: dict[int, Any] | None = None) -> Any:
        return _as(cls, cls.__deepcopy__(self, memo))

    namespace = {
        "__module__": cls.__module__, "__qualname__": cls.__qualname__, "__doc__": cls.__doc__,
        "model_config": ConfigDict(frozen=True), "__hash__": cls.__hash__,
        "__eq__": __eq__, "__copy__": __copy__, "__deepcopy__": __deepcopy__,
    }
    meta: Any = type(cls)
    sub: type[BaseModel] = meta(cls.__name__, (cls,), namespace)
    return sub


def _as(cls: type, obj: Any) -> Any:
    object.__setattr__(obj, "__class__", cls)
    return obj


def _freeze_dataclass(value: Any) -> Any:
    cls: Any = type(value)
    params = getattr(cls, "__dataclass_params__", None)
    frozen_cls = bool(params is not None and params.frozen)
    names = [f.name for f in dataclasses.fields(value)]
    state = {n: freeze(getattr(value, n)) for n in names}
    extra = {k: freeze(v) for k, v in getattr(value, "__dict__", {}).items() if k not in state}
    if frozen_cls and all(state[n] is getattr(value, n) for n in names) and not extra:
        return value
    target = cls if frozen_cls or getattr(cls, "_df_readonly", False) \
        else _readonly_dataclass(cls)
    out: Any = object.__new__(target)
    for name, item in (state | extra).items():
        object.__setattr__(out, name, item)
    return out


@cache
def _readonly_dataclass(cls: Any) -> type:
    """A subclass of the dataclass ``cls`` whose instances refuse assignment.

    Calling it (as ``dataclasses.replace`` does) builds a plain ``cls``.
    """
    def __new__(sub: type, *args: Any, **kwargs: Any) -> Any:
        return cls(*args, **kwargs)

    def __eq__(self: Any, other: object) -> bool:
        if type(other) is not type(self) and type(other) is not cls:
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name)
                   for f in dataclasses.fields(self) if f.compare)

    def _copy(self: Any, deep: bool, memo: dict[int, Any] | None) -> Any:
        out: Any = object.__new__(cls)
        names = [f.name for f in dataclasses.fields(self)]
        state = {n: getattr(self, n) for n in names} | dict(getattr(self, "__dict__", {}))
        for name, item in state.items():
            object.__setattr__(out, name, copy.deepcopy(item, memo) if deep else item)
        return out

    refuse = _refuse(f"{cls.__name__} object")
    namespace = {
        "__module__": cls.__module__, "__qualname__": cls.__qualname__, "__doc__": cls.__doc__,
        "__slots__": (), "_df_readonly": True, "__new__": __new__, "__eq__": __eq__,
        "__hash__": cls.__hash__, "__setattr__": refuse, "__delattr__": refuse,
        "__copy__": lambda self: _copy(self, False, None),
        "__deepcopy__": lambda self, memo: _copy(self, True, memo),
    }
    sub: type = type(cls)(cls.__name__, (cls,), namespace)
    return sub
