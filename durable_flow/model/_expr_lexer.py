"""The condition language's tokenizer: source text to tokens, stopping at the first bad one."""

from __future__ import annotations

import keyword
from typing import Any, NamedTuple

__all__ = ["Lexer", "Token"]


class Token(NamedTuple):
    """One token: its kind, value, offset in the source and text."""

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


class Lexer:
    """Turns source into tokens; stops at the first bad character with an ``err`` token."""

    def __init__(self, source: str) -> None:
        self.src = source
        self.pos = 0
        self.tokens: list[Token] = []

    def run(self) -> list[Token]:
        src = self.src
        n = len(src)
        while True:
            while self.pos < n and src[self.pos] in _WHITESPACE:
                self.pos += 1
            if self.pos >= n:
                self.tokens.append(Token("eof", None, n, "end of input"))
                return self.tokens
            token = self._next()
            self.tokens.append(token)
            if token.kind == "err":
                self.tokens.append(Token("eof", None, n, "end of input"))
                return self.tokens

    def _err(self, reason: str, pos: int) -> Token:
        return Token("err", reason, pos, "")

    def _next(self) -> Token:
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
                return Token("op", two, start, two)
            if ch in "<>":
                self.pos += 1
                return Token("op", ch, start, ch)
        if ch in _PUNCT:
            self.pos += 1
            return Token(_PUNCT[ch], ch, start, ch)
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

    def _path(self) -> Token:
        src = self.src
        n = len(src)
        start = self.pos
        first = self._name()
        if self.pos >= n or src[self.pos] != ".":
            if first in _KEYWORDS:
                return Token("kw", first, start, first)
            if first in _LITERALS:
                return Token("lit", _LITERALS[first], start, first)
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
        return Token("path", tuple(segments), start, src[start : self.pos])

    def _digits(self) -> bool:
        src = self.src
        start = self.pos
        while self.pos < len(src) and src[self.pos] in _DIGITS:
            self.pos += 1
        return self.pos > start

    def _number(self) -> Token:
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
        return Token("num", value, start, text)

    def _string(self) -> Token:
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
                return Token("str", "".join(parts), start, src[start : self.pos])
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
