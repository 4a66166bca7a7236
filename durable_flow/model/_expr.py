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
"""

from __future__ import annotations

import keyword
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from pydantic import BaseModel

from ..errors import ExpressionError

__all__ = ["MAX_DEPTH", "MAX_LENGTH", "Expression", "parse_expression", "resolve_path"]

MAX_LENGTH = 2000
"""Longest expression source accepted, in characters."""

MAX_DEPTH = 50
"""Deepest nesting accepted (parentheses, list brackets and ``not``)."""


# --------------------------------------------------------------------------
# path resolution
# --------------------------------------------------------------------------

_MISSING: Any = object()


def _is_index(segment: str) -> bool:
    return 0 < len(segment) <= 18 and segment.isascii() and segment.isdigit()


def _step(value: object, segment: str) -> object:
    """Read one path segment out of ``value`` (data only), or ``_MISSING``."""
    if not segment or segment.startswith("_"):
        return _MISSING
    if isinstance(value, BaseModel):
        if segment in type(value).model_fields:
            return value.__dict__.get(segment, _MISSING)
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


def _resolve(state: object, segments: tuple[str, ...]) -> object:
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
    return _resolve(state, tuple(path.split(".")))


# --------------------------------------------------------------------------
# safe operations
# --------------------------------------------------------------------------


def _truthy(value: object) -> bool:
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


# --------------------------------------------------------------------------
# syntax tree
# --------------------------------------------------------------------------


class _Node:
    __slots__ = ()

    def evaluate(self, state: object) -> object:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class _Literal(_Node):
    value: object

    def evaluate(self, state: object) -> object:
        return self.value


@dataclass(frozen=True, slots=True)
class _Path(_Node):
    segments: tuple[str, ...]

    def evaluate(self, state: object) -> object:
        return _resolve(state, self.segments)


@dataclass(frozen=True, slots=True)
class _List(_Node):
    items: tuple[_Node, ...]

    def evaluate(self, state: object) -> object:
        return [item.evaluate(state) for item in self.items]


@dataclass(frozen=True, slots=True)
class _Not(_Node):
    operand: _Node

    def evaluate(self, state: object) -> object:
        return not _truthy(self.operand.evaluate(state))


@dataclass(frozen=True, slots=True)
class _And(_Node):
    operands: tuple[_Node, ...]

    def evaluate(self, state: object) -> object:
        return all(_truthy(op.evaluate(state)) for op in self.operands)


@dataclass(frozen=True, slots=True)
class _Or(_Node):
    operands: tuple[_Node, ...]

    def evaluate(self, state: object) -> object:
        return any(_truthy(op.evaluate(state)) for op in self.operands)


@dataclass(frozen=True, slots=True)
class _Compare(_Node):
    op: str
    left: _Node
    right: _Node

    def evaluate(self, state: object) -> object:
        return _COMPARE[self.op](self.left.evaluate(state), self.right.evaluate(state))


# --------------------------------------------------------------------------
# tokenizer
# --------------------------------------------------------------------------


class _Token(NamedTuple):
    kind: str  # num str path kw op ( ) [ ] , - err eof
    value: Any
    pos: int
    text: str


_KEYWORDS = frozenset({"and", "or", "not", "in"})
_LITERALS: dict[str, object] = {
    "true": True,
    "True": True,
    "false": False,
    "False": False,
    "null": None,
    "None": None,
}
_WHITESPACE = " \t\r\n\f\v"
_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_NAME_CHARS = _NAME_START | frozenset("0123456789")
_DIGITS = frozenset("0123456789")
_PUNCT = {"(": "(", ")": ")", "[": "[", "]": "]", ",": ",", "-": "-"}
_BAD_CHARS = {
    "+": "arithmetic operator '+' is not supported",
    "*": "arithmetic operator '*' is not supported",
    "/": "arithmetic operator '/' is not supported",
    "%": "arithmetic operator '%' is not supported",
    "=": "'=' is not an operator; use '==' to compare",
    "!": "'!' is not an operator; use 'not' or '!='",
    "&": "'&' is not an operator; use 'and'",
    "|": "'|' is not an operator; use 'or'",
    "{": "dict and set literals are not supported",
    "}": "dict and set literals are not supported",
    ":": "':' is not supported (no slices, lambdas or dicts)",
    "`": "'`' is not supported",
}
_PY_KEYWORD_REASONS = {
    "lambda": "lambda expressions are not supported",
    "if": "conditional expressions are not supported",
    "else": "conditional expressions are not supported",
    "is": "'is' is not supported; use '==' or '!='",
    "for": "comprehensions are not supported",
}
_VALUE_KINDS = frozenset({"num", "str", "lit", ")", "]"})


def _python_keyword_reason(name: str) -> str | None:
    if name in _PY_KEYWORD_REASONS:
        return _PY_KEYWORD_REASONS[name]
    if keyword.iskeyword(name) and name not in _KEYWORDS and name not in _LITERALS:
        return f"{name!r} is a Python keyword and is not supported"
    return None


class _Lexer:
    """Turns source into tokens; stops at the first bad character with an ``err`` token."""

    def __init__(self, source: str) -> None:
        self.src = source
        self.pos = 0
        self.tokens: list[_Token] = []

    def run(self) -> list[_Token]:
        src = self.src
        n = len(src)
        while True:
            while self.pos < n and src[self.pos] in _WHITESPACE:
                self.pos += 1
            if self.pos >= n:
                self.tokens.append(_Token("eof", None, n, "end of input"))
                return self.tokens
            token = self._next()
            self.tokens.append(token)
            if token.kind == "err":
                self.tokens.append(_Token("eof", None, n, "end of input"))
                return self.tokens

    def _err(self, reason: str, pos: int) -> _Token:
        return _Token("err", reason, pos, "")

    def _next(self) -> _Token:
        src = self.src
        start = self.pos
        ch = src[start]
        if ch in _NAME_START:
            return self._path()
        if ch in _DIGITS:
            return self._number()
        if ch in "'\"":
            return self._string()
        if ch in "=!<>":
            two = src[start : start + 2]
            if two in ("==", "!=", "<=", ">="):
                self.pos += 2
                return _Token("op", two, start, two)
            if ch in "<>":
                self.pos += 1
                return _Token("op", ch, start, ch)
        if ch in _PUNCT:
            self.pos += 1
            return _Token(_PUNCT[ch], ch, start, ch)
        if ch == ".":
            previous = self.tokens[-1] if self.tokens else None
            if previous is not None and previous.kind in _VALUE_KINDS:
                return self._err("attribute access is only allowed on paths", start)
            if previous is not None and previous.kind == "path":
                return self._err("unexpected '.'; a dotted path cannot contain spaces", start)
            return self._err("unexpected '.'", start)
        if ch in _BAD_CHARS:
            if src.startswith("**", start) or src.startswith("//", start):
                return self._err(f"arithmetic operator {src[start : start + 2]!r} is not supported", start)
            return self._err(_BAD_CHARS[ch], start)
        return self._err(f"unexpected character {ch!r}", start)

    def _name(self) -> str:
        src = self.src
        start = self.pos
        self.pos += 1
        while self.pos < len(src) and src[self.pos] in _NAME_CHARS:
            self.pos += 1
        return src[start : self.pos]

    def _path(self) -> _Token:
        src = self.src
        n = len(src)
        start = self.pos
        first = self._name()
        if self.pos >= n or src[self.pos] != ".":
            if first in _KEYWORDS:
                return _Token("kw", first, start, first)
            if first in _LITERALS:
                return _Token("lit", _LITERALS[first], start, first)
        if first in _KEYWORDS or first in _LITERALS:
            return self._err(f"attribute access on {first!r} is not allowed", self.pos)
        reason = _python_keyword_reason(first)
        if reason is not None:
            return self._err(reason, start)
        if first.startswith("_"):
            return self._err(f"names starting with '_' cannot be read: {first!r}", start)
        segments = [first]
        while self.pos < n and src[self.pos] == ".":
            dot = self.pos
            self.pos += 1
            seg_start = self.pos
            if self.pos < n and src[self.pos] in _NAME_START:
                segment = self._name()
                if segment.startswith("_"):
                    return self._err(f"names starting with '_' cannot be read: {segment!r}", seg_start)
            elif self.pos < n and src[self.pos] in _DIGITS:
                while self.pos < n and src[self.pos] in _DIGITS:
                    self.pos += 1
                segment = src[seg_start : self.pos]
                if self.pos < n and src[self.pos] in _NAME_CHARS:
                    return self._err("a path segment must be a name or an integer index", seg_start)
            else:
                return self._err("expected a name or an index after '.'", dot)
            segments.append(segment)
        return _Token("path", tuple(segments), start, src[start : self.pos])

    def _digits(self) -> bool:
        src = self.src
        start = self.pos
        while self.pos < len(src) and src[self.pos] in _DIGITS:
            self.pos += 1
        return self.pos > start

    def _number(self) -> _Token:
        src = self.src
        n = len(src)
        start = self.pos
        self._digits()
        is_float = False
        if self.pos < n and src[self.pos] == ".":
            dot = self.pos
            self.pos += 1
            if not self._digits():
                if self.pos < n and src[self.pos] in _NAME_START:
                    return self._err("attribute access is only allowed on paths", dot)
                return self._err("invalid number: expected digits after '.'", start)
            is_float = True
        if self.pos < n and src[self.pos] in "eE":
            self.pos += 1
            if self.pos < n and src[self.pos] in "+-":
                self.pos += 1
            if not self._digits():
                return self._err("invalid number: expected digits in the exponent", start)
            is_float = True
        if self.pos < n and (src[self.pos] in _NAME_CHARS or src[self.pos] == "."):
            if src[self.pos] == ".":
                return self._err("attribute access is only allowed on paths", self.pos)
            return self._err("invalid number", start)
        text = src[start : self.pos]
        value: object = float(text) if is_float else int(text)
        return _Token("num", value, start, text)

    def _string(self) -> _Token:
        src = self.src
        n = len(src)
        start = self.pos
        quote = src[start]
        self.pos += 1
        parts: list[str] = []
        while self.pos < n:
            ch = src[self.pos]
            if ch == quote:
                self.pos += 1
                return _Token("str", "".join(parts), start, src[start : self.pos])
            if ch == "\\":
                nxt = src[self.pos + 1] if self.pos + 1 < n else ""
                if nxt not in ("\\", "'", '"'):
                    return self._err(
                        "unsupported escape sequence; only \\\\, \\' and \\\" are allowed",
                        self.pos,
                    )
                parts.append(nxt)
                self.pos += 2
                continue
            parts.append(ch)
            self.pos += 1
        return self._err("unterminated string", start)


# --------------------------------------------------------------------------
# parser
# --------------------------------------------------------------------------


def _describe(token: _Token) -> str:
    if token.kind == "eof":
        return "end of input"
    return repr(token.text)


class _Parser:
    def __init__(self, source: str, tokens: list[_Token]) -> None:
        self.source = source
        self.tokens = tokens
        self.index = 0
        self.depth = 0
        self.paths: set[str] = set()

    # -- helpers --------------------------------------------------------
    def error(self, reason: str, pos: int) -> ExpressionError:
        return ExpressionError(self.source, reason, pos)

    def peek(self, offset: int = 0) -> _Token:
        token = self.tokens[min(self.index + offset, len(self.tokens) - 1)]
        if token.kind == "err":
            raise self.error(token.value, token.pos)
        return token

    def advance(self) -> _Token:
        token = self.peek()
        if token.kind != "eof":
            self.index += 1
        return token

    def is_kw(self, word: str, offset: int = 0) -> bool:
        token = self.peek(offset)
        return token.kind == "kw" and token.value == word

    def enter(self, token: _Token) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(f"expression is nested deeper than {MAX_DEPTH} levels", token.pos)

    # -- grammar --------------------------------------------------------
    def parse(self) -> _Node:
        if self.peek().kind == "eof":
            raise self.error("empty expression", 0)
        node = self.or_expr()
        token = self.peek()
        if token.kind != "eof":
            raise self.error(f"unexpected {_describe(token)} after a complete expression", token.pos)
        return node

    def or_expr(self) -> _Node:
        operands = [self.and_expr()]
        while self.is_kw("or"):
            self.advance()
            operands.append(self.and_expr())
        return operands[0] if len(operands) == 1 else _Or(tuple(operands))

    def and_expr(self) -> _Node:
        operands = [self.not_expr()]
        while self.is_kw("and"):
            self.advance()
            operands.append(self.not_expr())
        return operands[0] if len(operands) == 1 else _And(tuple(operands))

    def not_expr(self) -> _Node:
        if self.is_kw("not"):
            token = self.advance()
            self.enter(token)
            operand = self.not_expr()
            self.depth -= 1
            return _Not(operand)
        return self.comparison()

    def comparison_op(self) -> tuple[str, _Token] | None:
        token = self.peek()
        if token.kind == "op":
            return str(token.value), token
        if self.is_kw("in"):
            return "in", token
        if self.is_kw("not") and self.is_kw("in", 1):
            return "not in", token
        return None

    def comparison(self) -> _Node:
        left = self.operand()
        found = self.comparison_op()
        if found is None:
            return left
        op = found[0]
        self.index += 2 if op == "not in" else 1
        right = self.operand()
        again = self.comparison_op()
        if again is not None:
            raise self.error("chained comparisons are not supported; combine them with 'and'", again[1].pos)
        return _Compare(op, left, right)

    def operand(self) -> _Node:
        node = self.primary()
        token = self.peek()
        if token.kind == "(":
            raise self.error("function calls are not supported", token.pos)
        if token.kind == "[":
            raise self.error("subscripts are not supported; use a dotted path like 'items.0'", token.pos)
        if token.kind == "-":
            raise self.error("arithmetic operator '-' is not supported", token.pos)
        if token.kind in ("num", "str", "lit", "path"):
            raise self.error(f"unexpected {_describe(token)}; expected an operator", token.pos)
        return node

    def primary(self) -> _Node:
        token = self.advance()
        kind = token.kind
        if kind in ("num", "str", "lit"):
            return _Literal(token.value)
        if kind == "path":
            self.paths.add(token.text)
            return _Path(token.value)
        if kind == "-":
            number = self.peek()
            if number.kind != "num":
                raise self.error("unary minus applies only to number literals", token.pos)
            self.advance()
            return _Literal(-number.value)
        if kind == "(":
            self.enter(token)
            node = self.or_expr()
            self.expect(")", "')' to close the '(' at offset " + str(token.pos))
            self.depth -= 1
            return node
        if kind == "[":
            self.enter(token)
            items: list[_Node] = []
            while self.peek().kind != "]":
                items.append(self.or_expr())
                if self.peek().kind == ",":
                    self.advance()
                    continue
                break
            self.expect("]", "']' or ',' in the list opened at offset " + str(token.pos))
            self.depth -= 1
            return _List(tuple(items))
        if kind == "eof":
            raise self.error("unexpected end of input; expected a value", token.pos)
        raise self.error(f"expected a value, found {_describe(token)}", token.pos)

    def expect(self, kind: str, what: str) -> None:
        token = self.peek()
        if token.kind != kind:
            raise self.error(f"expected {what}, found {_describe(token)}", token.pos)
        self.advance()


# --------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------


class Expression:
    """A parsed, immutable condition; build one with :func:`parse_expression`.

    ``Expression(source)`` parses too. Two expressions are equal when their
    sources are equal.
    """

    __slots__ = ("_node", "_paths", "_source")

    _source: str
    _paths: frozenset[str]
    _node: _Node

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
        return _truthy(self.evaluate(state))

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


def _parse(source: str) -> tuple[_Node, frozenset[str]]:
    if not isinstance(source, str):
        raise ExpressionError(repr(source), f"an expression must be a string, not {type(source).__name__}", 0)
    if len(source) > MAX_LENGTH:
        raise ExpressionError(source, f"expression is longer than {MAX_LENGTH} characters", MAX_LENGTH)
    parser = _Parser(source, _Lexer(source).run())
    node = parser.parse()
    return node, frozenset(parser.paths)


def parse_expression(source: str) -> Expression:
    """Parse a condition such as ``"confidence > 0.8"`` into an :class:`Expression`.

    Raises :class:`~durable_flow.errors.ExpressionError` (with ``reason`` and
    ``position``) for anything outside the grammar, for empty input, for input
    over :data:`MAX_LENGTH` characters and for nesting deeper than
    :data:`MAX_DEPTH` levels.
    """
    return Expression(source)
