"""A small, safe expression language for workflow conditions.

Conditions such as ``"confidence > 0.8"``, ``"flags.skip_meal"`` or
``"x in ['a', 'b'] and not done"`` are parsed by a hand-written tokenizer and
recursive-descent parser (never ``eval``) into a tree that only reads data out
of the state: fields of pydantic models, keys of mappings and items of lists.

Grammar, lowest precedence first::

    expression := or_expr
    or_expr    := and_expr ("or" and_expr)*
    and_expr   := not_expr ("and" not_expr)*
    not_expr   := "not" not_expr | comparison
    comparison := primary [("==" | "!=" | "<" | "<=" | ">" | ">=" | "in" | "not" "in") primary]
    primary    := literal | path | "(" or_expr ")" | "[" [or_expr ("," or_expr)* [","]] "]"
    literal    := number | "-" number | string | true | false | True | False
                | null | None
    path       := name ("." (name | digits))*

Comparisons are not chained (``a < b < c`` is an error). Names are
``[A-Za-z_][A-Za-z0-9_]*``; names starting with ``_`` (private, dunder) and
Python keywords are rejected, as are calls, subscripts and arithmetic.

Evaluation never raises: a path that does not resolve reads as ``None``,
comparisons between incomparable values are ``False``, ``in`` on something
that is not a container is ``False`` (and ``not in`` is its negation).

The pieces: :mod:`._expr_lexer` (tokens), :mod:`._expr_parser` (grammar),
:mod:`._expr_tree` (the tree and its guarded evaluation) and :mod:`._paths`
(reading a dotted path out of the state).
"""

from __future__ import annotations

from ..errors import ExpressionError
from ._expr_lexer import Lexer
from ._expr_parser import MAX_DEPTH, Parser
from ._expr_tree import Node, truthy
from ._paths import resolve_path
from ._text import surrogate_at

__all__ = ["MAX_DEPTH", "MAX_LENGTH", "Expression", "parse_expression", "resolve_path"]

MAX_LENGTH = 2000
"""Longest expression source accepted, in characters."""


class Expression:
    """A parsed, immutable condition; build one with :func:`parse_expression`.

    ``Expression(source)`` parses too. Two expressions are equal when their
    sources are equal.
    """

    __slots__ = ("_node", "_paths", "_source")

    _source: str
    _paths: frozenset[str]
    _node: Node

    def __init__(self, source: str) -> None:
        node, paths = _parse(source)
        object.__setattr__(self, "_source", source)
        object.__setattr__(self, "_paths", paths)
        object.__setattr__(self, "_node", node)

    @property
    def source(self) -> str:
        """The text the expression was parsed from."""
        return self._source

    @property
    def paths(self) -> frozenset[str]:
        """Every dotted path the expression reads, e.g. ``{"flags.skip_meal"}``."""
        return self._paths

    def evaluate(self, state: object) -> object:
        """Evaluate against ``state`` and return the value; never raises."""
        return self._node.evaluate(state)

    def __call__(self, state: object) -> bool:
        """Evaluate against ``state`` and return the truthiness of the value."""
        return truthy(self.evaluate(state))

    def __repr__(self) -> str:
        return f"Expression({self._source!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Expression):
            return NotImplemented
        return self._source == other._source

    def __hash__(self) -> int:
        return hash(self._source)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Expression is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Expression is immutable")

    def __reduce__(self) -> tuple[type[Expression], tuple[str]]:
        return (Expression, (self._source,))


def _parse(source: str) -> tuple[Node, frozenset[str]]:
    if not isinstance(source, str):
        raise ExpressionError(repr(source), f"an expression must be a string, not {type(source).__name__}", 0)
    if len(source) > MAX_LENGTH:
        raise ExpressionError(source, f"expression is longer than {MAX_LENGTH} characters", MAX_LENGTH)
    bad = surrogate_at(source)
    if bad is not None:  # it would parse, then fail when a run stores the condition
        raise ExpressionError(source, f"the surrogate code point {source[bad]!r} is not valid "
                                      "Unicode text", bad)
    parser = Parser(source, Lexer(source).run())
    node = parser.parse()
    return node, frozenset(parser.paths)


def parse_expression(source: str) -> Expression:
    """Parse a condition such as ``"confidence > 0.8"`` into an :class:`Expression`.

    Raises :class:`~durable_flow.errors.ExpressionError` (with ``reason`` and
    ``position``) for anything outside the grammar, for empty input, for text
    that is not valid Unicode (a surrogate code point), for input
    over :data:`MAX_LENGTH` characters and for nesting deeper than
    :data:`MAX_DEPTH` levels.
    """
    return Expression(source)
