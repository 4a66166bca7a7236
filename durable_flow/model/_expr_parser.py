"""The condition language's recursive-descent parser: tokens to a syntax tree."""

from __future__ import annotations

from ..errors import ExpressionError
from . import _expr_tree as tree
from ._expr_lexer import Token

__all__ = ["MAX_DEPTH", "Parser"]

MAX_DEPTH = 50
"""Deepest nesting accepted (parentheses, list brackets and ``not``)."""


def _describe(token: Token) -> str:
    if token.kind == "eof":
        return "end of input"
    return repr(token.text)


class Parser:
    """Parses one expression's tokens; :meth:`parse` returns the tree, ``paths`` what it reads."""

    def __init__(self, source: str, tokens: list[Token]) -> None:
        self.source = source
        self.tokens = tokens
        self.index = 0
        self.depth = 0
        self.paths: set[str] = set()

    # -- helpers --------------------------------------------------------
    def error(self, reason: str, pos: int) -> ExpressionError:
        return ExpressionError(self.source, reason, pos)

    def peek(self, offset: int = 0) -> Token:
        token = self.tokens[min(self.index + offset, len(self.tokens) - 1)]
        if token.kind == "err":
            raise self.error(token.value, token.pos)
        return token

    def advance(self) -> Token:
        token = self.peek()
        if token.kind != "eof":
            self.index += 1
        return token

    def is_kw(self, word: str, offset: int = 0) -> bool:
        token = self.peek(offset)
        return token.kind == "kw" and token.value == word

    def enter(self, token: Token) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(f"expression is nested deeper than {MAX_DEPTH} levels", token.pos)

    # -- grammar --------------------------------------------------------
    def parse(self) -> tree.Node:
        if self.peek().kind == "eof":
            raise self.error("empty expression", 0)
        node = self.or_expr()
        token = self.peek()
        if token.kind != "eof":
            raise self.error(f"unexpected {_describe(token)} after a complete expression", token.pos)
        return node

    def or_expr(self) -> tree.Node:
        operands = [self.and_expr()]
        while self.is_kw("or"):
            self.advance()
            operands.append(self.and_expr())
        return operands[0] if len(operands) == 1 else tree.Or(tuple(operands))

    def and_expr(self) -> tree.Node:
        operands = [self.not_expr()]
        while self.is_kw("and"):
            self.advance()
            operands.append(self.not_expr())
        return operands[0] if len(operands) == 1 else tree.And(tuple(operands))

    def not_expr(self) -> tree.Node:
        if self.is_kw("not"):
            token = self.advance()
            self.enter(token)
            operand = self.not_expr()
            self.depth -= 1
            return tree.Not(operand)
        return self.comparison()

    def comparison_op(self) -> tuple[str, Token] | None:
        token = self.peek()
        if token.kind == "op":
            return str(token.value), token
        if self.is_kw("in"):
            return "in", token
        if self.is_kw("not") and self.is_kw("in", 1):
            return "not in", token
        return None

    def comparison(self) -> tree.Node:
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
        return tree.Compare(op, left, right)

    def operand(self) -> tree.Node:
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

    def primary(self) -> tree.Node:
        token = self.advance()
        kind = token.kind
        if kind in ("num", "str", "lit"):
            return tree.Literal(token.value)
        if kind == "path":
            self.paths.add(token.text)
            return tree.Path(token.value)
        if kind == "-":
            number = self.peek()
            if number.kind != "num":
                raise self.error("unary minus applies only to number literals", token.pos)
            self.advance()
            return tree.Literal(-number.value)
        if kind == "(":
            self.enter(token)
            node = self.or_expr()
            self.expect(")", "')' to close the '(' at offset " + str(token.pos))
            self.depth -= 1
            return node
        if kind == "[":
            self.enter(token)
            items: list[tree.Node] = []
            while self.peek().kind != "]":
                items.append(self.or_expr())
                if self.peek().kind == ",":
                    self.advance()
                    continue
                break
            self.expect("]", "']' or ',' in the list opened at offset " + str(token.pos))
            self.depth -= 1
            return tree.List(tuple(items))
        if kind == "eof":
            raise self.error("unexpected end of input; expected a value", token.pos)
        raise self.error(f"expected a value, found {_describe(token)}", token.pos)

    def expect(self, kind: str, what: str) -> None:
        token = self.peek()
        if token.kind != kind:
            raise self.error(f"expected {what}, found {_describe(token)}", token.pos)
        self.advance()
