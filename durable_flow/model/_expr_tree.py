"""The condition language's syntax tree and its evaluation, which never raises.

Every operation is guarded: comparing incomparable values is ``False``,
``in`` on something that is not a container is ``False``, a value whose
truth cannot be decided is falsy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ._paths import resolve_segments

__all__ = ["And", "Compare", "List", "Literal", "Node", "Not", "Or", "Path", "truthy"]


def truthy(value: object) -> bool:
    """``bool(value)``, or False when that raises."""
    try:
        return bool(value)
    except Exception:
        return False


def _eq(left: object, right: object) -> bool:
    try:
        return bool(left == right)
    except Exception:
        return False


def _ne(left: object, right: object) -> bool:
    return not _eq(left, right)


def _lt(left: Any, right: Any) -> bool:
    try:
        return bool(left < right)
    except Exception:
        return False


def _le(left: Any, right: Any) -> bool:
    try:
        return bool(left <= right)
    except Exception:
        return False


def _gt(left: Any, right: Any) -> bool:
    try:
        return bool(left > right)
    except Exception:
        return False


def _ge(left: Any, right: Any) -> bool:
    try:
        return bool(left >= right)
    except Exception:
        return False


_CONTAINERS = (str, list, tuple, set, frozenset, Mapping)


def _in(left: object, right: object) -> bool:
    try:
        if not isinstance(right, _CONTAINERS):
            return False
        return bool(left in right)
    except Exception:
        return False


def _not_in(left: object, right: object) -> bool:
    return not _in(left, right)


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "==": _eq,
    "!=": _ne,
    "<": _lt,
    "<=": _le,
    ">": _gt,
    ">=": _ge,
    "in": _in,
    "not in": _not_in,
}


class Node:
    """A node of the syntax tree; ``evaluate`` reads the state and never raises."""

    __slots__ = ()

    def evaluate(self, state: object) -> object:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class Literal(Node):
    """A number, string, boolean or null written in the source."""

    value: object

    def evaluate(self, state: object) -> object:
        return self.value


@dataclass(frozen=True, slots=True)
class Path(Node):
    """A dotted path into the state."""

    segments: tuple[str, ...]

    def evaluate(self, state: object) -> object:
        return resolve_segments(state, self.segments)


@dataclass(frozen=True, slots=True)
class List(Node):
    """A ``[...]`` list of expressions."""

    items: tuple[Node, ...]

    def evaluate(self, state: object) -> object:
        return [item.evaluate(state) for item in self.items]


@dataclass(frozen=True, slots=True)
class Not(Node):
    """``not operand``."""

    operand: Node

    def evaluate(self, state: object) -> object:
        return not truthy(self.operand.evaluate(state))


@dataclass(frozen=True, slots=True)
class And(Node):
    """``a and b and ...``: true when every operand is truthy."""

    operands: tuple[Node, ...]

    def evaluate(self, state: object) -> object:
        return all(truthy(op.evaluate(state)) for op in self.operands)


@dataclass(frozen=True, slots=True)
class Or(Node):
    """``a or b or ...``: true when some operand is truthy."""

    operands: tuple[Node, ...]

    def evaluate(self, state: object) -> object:
        return any(truthy(op.evaluate(state)) for op in self.operands)


@dataclass(frozen=True, slots=True)
class Compare(Node):
    """One comparison (``==``, ``<``, ``in``, ``not in``, ...)."""

    op: str
    left: Node
    right: Node

    def evaluate(self, state: object) -> object:
        return _COMPARE[self.op](self.left.evaluate(state), self.right.evaluate(state))
