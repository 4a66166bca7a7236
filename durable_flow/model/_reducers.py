"""Reducers: how a field merges the writes of one superstep.

A reducer is any ``(current, update) -> new`` function, attached to a field
with ``Annotated[T, reducer]``. Fields without one are last-write-wins.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

__all__ = ["Reducer", "add", "append", "last_write_wins", "merge"]

Reducer: TypeAlias = Callable[[Any, Any], Any]


def last_write_wins(current: Any, update: Any) -> Any:
    """Replace the value (the default; two writers in one superstep conflict)."""
    return update


def add(current: Any, update: Any) -> Any:
    """Sum: ``current + update`` (counters, totals)."""
    return current + update


def append(current: Sequence[Any], update: Sequence[Any]) -> list[Any]:
    """Append the update's items to the list.

    Stored as deltas: each checkpoint keeps only the items it appended.
    """
    return [*current, *update]


def merge(current: Mapping[Any, Any], update: Mapping[Any, Any]) -> dict[Any, Any]:
    """Merge keys: ``{**current, **update}``."""
    return {**current, **update}
