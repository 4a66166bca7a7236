"""Tests for the safe condition language in durable_flow.model._expr."""

from __future__ import annotations

import copy
import math
import pickle
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict

from durable_flow.errors import ExpressionError, WorkflowValidationError
from durable_flow.model._expr import (
    MAX_DEPTH,
    MAX_LENGTH,
    Expression,
    parse_expression,
    resolve_path,
)

# --------------------------------------------------------------------------
# fixtures / models
# --------------------------------------------------------------------------


class Flags(BaseModel):
    skip_meal: bool = False
    tags: list[str] = []


class State(BaseModel):
    confidence: float = 0.0
    flags: Flags = Flags()
    matched_type: str | None = None
    items: list[int] = []
    status: str | None = None

    @property
    def secret(self) -> str:
        raise AssertionError("properties must never be read")

    def method(self) -> str:
        raise AssertionError("methods must never be read")


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")

    declared: int = 1


def rejects(source: str) -> ExpressionError:
    with pytest.raises(ExpressionError) as info:
        parse_expression(source)
    err = info.value
    assert err.source == source
    assert isinstance(err.reason, str) and err.reason
    assert 0 <= err.position <= len(source)
    return err


# --------------------------------------------------------------------------
# the documented examples
# --------------------------------------------------------------------------


def test_confidence_greater_than_threshold() -> None:
    expr = parse_expression("confidence > 0.8")
    assert expr(State(confidence=0.9)) is True
    assert expr(State(confidence=0.8)) is False
    assert expr({"confidence": 0.95}) is True
    assert expr({}) is False


def test_bare_dotted_path_is_truthiness() -> None:
    expr = parse_expression("flags.skip_meal")
    assert expr(State(flags=Flags(skip_meal=True))) is True
    assert expr(State()) is False
    assert expr.evaluate(State(flags=Flags(skip_meal=True))) is True
    assert expr({"flags": {"skip_meal": 1}}) is True


def test_string_equality() -> None:
    expr = parse_expression("matched_type == 'MathRoute'")
    assert expr(State(matched_type="MathRoute")) is True
    assert expr(State(matched_type="Other")) is False
    assert expr(State()) is False


def test_in_list_and_not() -> None:
    expr = parse_expression("x in ['a', 'b'] and not done")
    assert expr({"x": "a", "done": False}) is True
    assert expr({"x": "b"}) is True
    assert expr({"x": "c", "done": False}) is False
    assert expr({"x": "a", "done": True}) is False


def test_not_equal_null() -> None:
    expr = parse_expression("status != null")
    assert expr(State(status="ok")) is True
    assert expr(State()) is False
    assert expr({}) is False
    assert parse_expression("status == None")({}) is True


def test_numeric_index_segment() -> None:
    expr = parse_expression("items.0 == 1")
    assert expr(State(items=[1, 2])) is True
    assert expr(State(items=[2, 1])) is False
    assert expr(State(items=[])) is False
    assert expr({"items": (1,)}) is True


# --------------------------------------------------------------------------
# literals and operators
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "value"),
    [
        ("1", 1),
        ("-7", -7),
        ("- 7", -7),
        ("2.5", 2.5),
        ("-0.25", -0.25),
        ("1e3", 1000.0),
        ("1.5E-2", 0.015),
        ("'single'", "single"),
        ('"double"', "double"),
        ("'it\\'s'", "it's"),
        ('"say \\"hi\\""', 'say "hi"'),
        ("'back\\\\slash'", "back\\slash"),
        ("''", ""),
        ("true", True),
        ("True", True),
        ("false", False),
        ("False", False),
        ("null", None),
        ("None", None),
        ("[]", []),
        ("[1, 'a', [true, null],]", [1, "a", [True, None]]),
        ("(((3)))", 3),
    ],
)
def test_literal_values(source: str, value: object) -> None:
    assert parse_expression(source).evaluate({}) == value


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("x == 3", True),
        ("x != 3", False),
        ("x < 4", True),
        ("x <= 3", True),
        ("x > 3", False),
        ("x >= 3", True),
        ("x in [1, 2, 3]", True),
        ("x not in [1, 2, 3]", False),
        ("'ell' in name", True),
        ("'k' in mapping", True),
        ("'z' not in mapping", True),
        ("-1 < x", True),
        ("x == 3.0", True),
    ],
)
def test_comparison_operators(source: str, expected: bool) -> None:
    state = {"x": 3, "name": "hello", "mapping": {"k": 1}}
    assert parse_expression(source)(state) is expected


def test_precedence_not_binds_tighter_than_and_than_or() -> None:
    state = {"a": True, "b": False, "c": False}
    assert parse_expression("a or b and c")(state) is True  # a or (b and c)
    assert parse_expression("(a or b) and c")(state) is False
    assert parse_expression("not b and a")(state) is True  # (not b) and a
    assert parse_expression("not a == b")(state) is True  # not (a == b)
    assert parse_expression("not not a")(state) is True


def test_and_or_return_bools() -> None:
    state = {"a": 0, "b": "text", "c": [1]}
    assert parse_expression("a or b").evaluate(state) is True
    assert parse_expression("b and c").evaluate(state) is True
    assert parse_expression("b and a").evaluate(state) is False
    assert parse_expression("not c").evaluate(state) is False


def test_and_or_short_circuit() -> None:
    calls: list[object] = []

    class Spy:
        def __eq__(self, other: object) -> bool:
            calls.append(other)
            return True

        __hash__ = object.__hash__

    state = {"yes": True, "no": False, "spy": Spy()}
    assert parse_expression("yes or spy == 1")(state) is True
    assert parse_expression("no and spy == 1")(state) is False
    assert calls == []
    assert parse_expression("no or spy == 1")(state) is True
    assert calls == [1]


def test_evaluate_returns_the_value_and_call_returns_bool() -> None:
    state = {"items": [1, 2], "name": "n"}
    expr = parse_expression("items")
    assert expr.evaluate(state) == [1, 2]
    assert expr(state) is True
    assert parse_expression("[name, 1]").evaluate(state) == ["n", 1]
    assert parse_expression("missing")(state) is False


# --------------------------------------------------------------------------
# path resolution
# --------------------------------------------------------------------------


def test_resolve_path_over_pydantic_model() -> None:
    state = State(confidence=0.5, flags=Flags(skip_meal=True, tags=["x", "y"]), items=[4])
    assert resolve_path(state, "confidence") == 0.5
    assert resolve_path(state, "flags.skip_meal") is True
    assert resolve_path(state, "flags.tags.1") == "y"
    assert resolve_path(state, "items.0") == 4
    assert resolve_path(state, "items.1") is None
    assert resolve_path(state, "nope") is None


def test_resolve_path_never_reads_non_field_attributes() -> None:
    state = State()
    # properties and methods would raise AssertionError if they were read
    assert resolve_path(state, "secret") is None
    assert resolve_path(state, "method") is None
    assert resolve_path(state, "model_dump") is None
    assert resolve_path(state, "model_fields") is None
    assert resolve_path(state, "model_config") is None
    assert parse_expression("secret or method")(state) is False


def test_resolve_path_reads_model_extra() -> None:
    loose = Loose(declared=2, extra_field={"deep": [7]})
    assert resolve_path(loose, "declared") == 2
    assert resolve_path(loose, "extra_field.deep.0") == 7
    assert resolve_path(loose, "not_there") is None


def test_resolve_path_over_dict() -> None:
    state = {"a": {"b": {"c": 3}}, "lst": [10, [20, 30]], "tup": (1, 2), 0: "int-key"}
    assert resolve_path(state, "a.b.c") == 3
    assert resolve_path(state, "a.b") == {"c": 3}
    assert resolve_path(state, "lst.1.0") == 20
    assert resolve_path(state, "tup.1") == 2
    assert resolve_path(state, "0") == "int-key"
    assert resolve_path(state, "a.x.c") is None
    assert resolve_path(state, "lst.9") is None
    assert resolve_path(state, "lst.x") is None


def test_resolve_path_nested_model_in_dict() -> None:
    state = {"run": {"model": State(flags=Flags(skip_meal=True))}, "models": [Flags(tags=["t"])]}
    assert resolve_path(state, "run.model.flags.skip_meal") is True
    assert resolve_path(state, "models.0.tags.0") == "t"
    assert parse_expression("run.model.flags.skip_meal and models.0.tags.0 == 't'")(state)


def test_resolve_path_private_and_dunder_segments_are_none() -> None:
    state = {"_private": 1, "__class__": 2, "a": {"_b": 3}}
    assert resolve_path(state, "_private") is None
    assert resolve_path(state, "__class__") is None
    assert resolve_path(state, "a._b") is None
    assert resolve_path(State(), "__dict__") is None
    assert resolve_path(State(), "__pydantic_extra__") is None


def test_resolve_path_never_calls_getattr_on_other_objects() -> None:
    touched: list[str] = []

    class Trap:
        value = 1

        def __getattr__(self, name: str) -> object:
            touched.append(name)
            raise AssertionError(name)

        @property
        def prop(self) -> int:
            touched.append("prop")
            return 1

    assert resolve_path(Trap(), "value") is None
    assert resolve_path(Trap(), "prop") is None
    assert resolve_path(Trap(), "anything") is None
    assert resolve_path({"t": Trap()}, "t.value") is None
    assert touched == []


def test_resolve_path_on_scalars_strings_and_bad_paths() -> None:
    assert resolve_path("abc", "0") is None
    assert resolve_path(5, "x") is None
    assert resolve_path(None, "x") is None
    assert resolve_path({"a": 1}, "") is None
    assert resolve_path({"a": 1}, "a..b") is None
    assert resolve_path({"": 1}, "") is None
    assert resolve_path([1], "9" * 5000) is None
    assert resolve_path([1], "\u0660") is None  # non-ASCII digit is not an index


def test_resolve_path_survives_hostile_mappings() -> None:
    class Hostile(dict[str, Any]):
        def __contains__(self, key: object) -> bool:
            raise RuntimeError("boom")

    assert resolve_path(Hostile(a=1), "a") is None
    assert parse_expression("a == 1")(Hostile(a=1)) is False


# --------------------------------------------------------------------------
# .paths, equality, immutability
# --------------------------------------------------------------------------


def test_paths_lists_every_dotted_path_read() -> None:
    expr = parse_expression(
        "flags.skip_meal and confidence > 0.8 or x in [a.b, 'c', items.0] or not flags.skip_meal"
    )
    assert expr.paths == frozenset({"flags.skip_meal", "confidence", "x", "a.b", "items.0"})
    assert parse_expression("1 == 1").paths == frozenset()
    assert isinstance(expr.paths, frozenset)


def test_expression_equality_hash_and_repr() -> None:
    a = parse_expression("x > 1")
    b = Expression("x > 1")
    assert a == b
    assert hash(a) == hash(b)
    assert a != parse_expression("x >  1")
    assert a != "x > 1"
    assert repr(a) == "Expression('x > 1')"
    assert a.source == "x > 1"
    assert len({a, b}) == 1


def test_expression_is_immutable_and_picklable() -> None:
    expr = parse_expression("x > 1")
    with pytest.raises(AttributeError):
        expr.source = "y"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        expr.anything = 1
    with pytest.raises(AttributeError):
        del expr.source
    clone = pickle.loads(pickle.dumps(expr))
    assert clone == expr and clone({"x": 2}) is True
    assert copy.deepcopy(expr) == expr


# --------------------------------------------------------------------------
# rejected constructs
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "position", "reason_part"),
    [
        ("a < b < c", 6, "chained"),
        ("a == b != c", 7, "chained"),
        ("f(x)", 1, "function call"),
        ("len(items) > 0", 3, "function call"),
        ("a[0]", 1, "subscript"),
        ("a + 1", 2, "arithmetic"),
        ("a - 1", 2, "arithmetic"),
        ("a * 2", 2, "arithmetic"),
        ("a / 2", 2, "arithmetic"),
        ("a % 2", 2, "arithmetic"),
        ("a ** 2", 2, "arithmetic"),
        ("a // 2", 2, "arithmetic"),
        ("-x", 0, "unary minus"),
        ("--1", 0, "unary minus"),
        ("__import__('os')", 0, "'_'"),
        ("a.__class__", 2, "'_'"),
        ("_private", 0, "'_'"),
        ("lambda: 1", 0, "lambda"),
        ("lambda x: x", 0, "lambda"),
        ("x if y else z", 2, "conditional"),
        ("x is None", 2, "'is'"),
        ("import os", 0, "keyword"),
        ("'abc'.upper", 5, "attribute"),
        ("'abc'.upper()", 5, "attribute"),
        ("1.real", 1, "attribute"),
        ("true.x", 4, "attribute"),
        ("null.x", 4, "attribute"),
        ("(a).b", 3, "attribute"),
        ("[1].x", 3, "attribute"),
        ("a = 1", 2, "=="),
        ("!a", 0, "not"),
        ("a && b", 2, "and"),
        ("a || b", 2, "or"),
        ("{'a': 1}", 0, "dict"),
        ("x[1:2]", 1, "subscript"),
        ("a .b", 2, "."),
        ("a.", 1, "after '.'"),
        ("a.0b", 2, "segment"),
        ("1abc", 0, "invalid number"),
        ("1.", 0, "invalid number"),
        ("1e", 0, "exponent"),
        ("0x1f", 0, "invalid number"),
        ("'unterminated", 0, "unterminated"),
        ("'bad \\n escape'", 5, "escape"),
        ("(a", 2, "')'"),
        ("a)", 1, "unexpected"),
        ("[1, 2", 5, "']'"),
        ("[1 2]", 3, "operator"),
        ("a b", 2, "operator"),
        ("a and", 5, "end of input"),
        ("or a", 0, "expected a value"),
        ("not", 3, "end of input"),
        ("a not b", 2, "unexpected"),
        ("a == not b", 5, "expected a value"),
        ("x in", 4, "end of input"),
        ("$x", 0, "unexpected character"),
        ("é == 1", 0, "unexpected character"),
    ],
)
def test_rejected_construct_reports_reason_and_position(source: str, position: int, reason_part: str) -> None:
    err = rejects(source)
    assert err.position == position, err.reason
    assert reason_part in err.reason
    assert f"offset {position}" in str(err)


@pytest.mark.parametrize(("source", "position"), [
    ("x == '\ud800'", 6),
    ("name in ['ok', 'a\udfffb']", 17),
    ("x == 1 and y == '\ud83d\ude00'", 17),  # a surrogate pair is no character either
])
def test_a_surrogate_code_point_is_rejected_where_it_is(source: str, position: int) -> None:
    err = rejects(source)
    assert err.position == position
    assert "surrogate" in err.reason and "not valid Unicode" in err.reason
    str(err).encode("utf-8")  # the message escapes it


def test_expression_error_is_a_validation_error() -> None:
    err = rejects("f(x)")
    assert isinstance(err, WorkflowValidationError)
    assert err.problems and "f(x)" in err.problems[0]


@pytest.mark.parametrize("source", ["", "   ", "\n\t"])
def test_empty_input_is_rejected(source: str) -> None:
    err = rejects(source)
    assert "empty" in err.reason
    assert err.position == 0


def test_non_string_input_is_rejected() -> None:
    with pytest.raises(ExpressionError):
        parse_expression(42)  # type: ignore[arg-type]


def test_input_over_the_length_limit_is_rejected() -> None:
    assert parse_expression("x" * MAX_LENGTH).paths == frozenset({"x" * MAX_LENGTH})
    err = rejects("x" * (MAX_LENGTH + 1))
    assert "longer" in err.reason
    assert err.position == MAX_LENGTH


@pytest.mark.parametrize(
    ("open_", "close"),
    [("(", ")"), ("[", "]"), ("not ", ""), ("not (", ")")],
)
def test_nesting_up_to_the_limit_is_accepted(open_: str, close: str) -> None:
    levels = MAX_DEPTH if open_ != "not (" else MAX_DEPTH // 2
    parse_expression(open_ * levels + "x" + close * levels)


@pytest.mark.parametrize("open_", ["(", "[", "not ", "not (", "[(", "-("])
@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 400, 1000])
def test_deep_nesting_is_an_expression_error_not_recursion_error(open_: str, levels: int) -> None:
    source = (open_ * levels + "x")[:MAX_LENGTH]
    err = rejects(source)
    if open_ != "-(":
        assert "nested deeper" in err.reason


# --------------------------------------------------------------------------
# incomparable values and hostile state never raise
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "x < 1",
        "x <= 1",
        "x > 1",
        "x >= 1",
        "s < 1",
        "1 > s",
        "s >= x",
        "lst < 1",
        "mixed < [1, 2]",
        "1 in s",
        "'a' in n",
        "'a' in x",
        "[1] in st",
        "n in obj",
    ],
)
def test_incomparable_comparisons_are_false(source: str) -> None:
    state = {
        "x": None,
        "s": "a",
        "n": 5,
        "lst": [1],
        "mixed": [None],
        "st": {1, 2},
        "obj": object(),
    }
    assert parse_expression(source).evaluate(state) is False


def test_not_in_is_the_negation_of_in() -> None:
    assert parse_expression("'a' not in n")({"n": 5}) is True
    assert parse_expression("'a' not in missing")({}) is True


class Explosive:
    """A value whose every operation raises, like an array with no truth value."""

    def __bool__(self) -> bool:
        raise ValueError("ambiguous truth value")

    def __eq__(self, other: object) -> bool:
        raise ValueError("no ==")

    def __lt__(self, other: object) -> bool:
        raise ValueError("no <")

    def __gt__(self, other: object) -> bool:
        raise ValueError("no >")

    def __le__(self, other: object) -> bool:
        raise ValueError("no <=")

    def __ge__(self, other: object) -> bool:
        raise ValueError("no >=")

    def __contains__(self, item: object) -> bool:
        raise ValueError("no in")

    def __hash__(self) -> int:
        raise ValueError("no hash")


@pytest.mark.parametrize(
    "source",
    [
        "bomb",
        "not bomb",
        "bomb and 1",
        "bomb or 0",
        "bomb == 1",
        "bomb != 1",
        "bomb < 1",
        "1 <= bomb",
        "bomb > 1",
        "bomb >= 1",
        "bomb in [1, 2]",
        "1 in bomb",
        "bomb in lst",
        "bomb in st",
        "bomb.x",
        "[bomb] == [bomb]",
    ],
)
def test_hostile_values_never_raise(source: str) -> None:
    state = {"bomb": Explosive(), "lst": [Explosive()], "st": {1}}
    expr = parse_expression(source)
    expr.evaluate(state)
    assert isinstance(expr(state), bool)
    assert isinstance(expr(Explosive()), bool)


# --------------------------------------------------------------------------
# hypothesis fuzzing
# --------------------------------------------------------------------------

TOKENS = [
    "(", ")", "[", "]", ",", ".", "-", "not", "and", "or", "in", "not in",
    "==", "!=", "<", "<=", ">", ">=", "=", "!", "+", "*", "/", "%",
    "0", "1", "12", "2.5", "1e3", "1e", "1.", "'s'", '"t"', "'", '"', "\\", "\\'",
    "x", "a.b", "items.0", "a.", "_x", "__import__", "true", "False", "null", "None",
    "lambda", "is", "if", ":", "{", "}", "f(", "é", " ", "\n", "\t",
]  # fmt: skip

token_text = st.lists(st.sampled_from(TOKENS), max_size=120).flatmap(
    lambda parts: st.sampled_from([" ".join(parts), "".join(parts)])
)
deep_text = st.tuples(st.integers(0, 120), st.sampled_from(["(", "[", "not ", "-", "not ("]), token_text).map(
    lambda t: t[1] * t[0] + t[2]
)

FUZZ = settings(
    max_examples=300,
    deadline=500,
    suppress_health_check=[HealthCheck.too_slow],
)


def _parse_or_error(source: str) -> None:
    try:
        expr = parse_expression(source)
    except ExpressionError as err:
        assert err.source == source
        assert 0 <= err.position <= len(source)
        assert err.reason
    else:
        assert isinstance(expr, Expression)
        assert expr.source == source
        expr.evaluate({})
        assert isinstance(expr({"x": 1, "a": {"b": [1]}}), bool)


@FUZZ
@given(st.text(max_size=300))
def test_fuzz_any_text_parses_or_raises_expression_error(source: str) -> None:
    _parse_or_error(source)


@FUZZ
@given(st.one_of(token_text, deep_text))
def test_fuzz_grammar_tokens_parse_or_raise_expression_error(source: str) -> None:
    _parse_or_error(source)


NAMES = ["x", "y", "flags", "items", "status", "a"]

paths = st.builds(
    lambda head, rest: ".".join([head, *rest]),
    st.sampled_from(NAMES),
    st.lists(st.one_of(st.sampled_from(NAMES), st.integers(0, 3).map(str)), max_size=3),
)


def _quote(text: str) -> str:
    quote = "'" if len(text) % 2 else '"'
    return quote + text.replace("\\", "\\\\").replace(quote, "\\" + quote) + quote


atoms = st.one_of(
    paths,
    st.integers(-(10**30), 10**30).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.text(max_size=6).map(_quote),
    st.sampled_from(["true", "false", "True", "False", "null", "None"]),
)
COMPARISONS = ["==", "!=", "<", "<=", ">", ">=", "in", "not in"]


def _draw_expression(draw: st.DrawFn, depth: int) -> str:
    """Draw source text from the grammar: or_expr, nested at most ``depth`` levels."""

    def primary() -> str:
        kind = draw(st.integers(0, 2)) if depth > 0 else 0
        if kind == 1:
            return "(" + _draw_expression(draw, depth - 1) + ")"
        if kind == 2:
            count = draw(st.integers(0, 2))
            return "[" + ", ".join(_draw_expression(draw, depth - 1) for _ in range(count)) + "]"
        return draw(atoms)

    def comparison() -> str:
        left = primary()
        if draw(st.booleans()):
            return f"{left} {draw(st.sampled_from(COMPARISONS))} {primary()}"
        return left

    def negated() -> str:
        return "not " * draw(st.integers(0, 2)) + comparison()

    def conj() -> str:
        return " and ".join(negated() for _ in range(draw(st.integers(1, 2))))

    return " or ".join(conj() for _ in range(draw(st.integers(1, 2))))


@st.composite
def well_formed(draw: st.DrawFn) -> str:
    source = _draw_expression(draw, draw(st.integers(0, 3)))
    assume(len(source) <= MAX_LENGTH)
    return source


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=5),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(NAMES), st.text(max_size=3)), children, max_size=4),
    ),
    max_leaves=12,
)
states = st.one_of(
    st.dictionaries(st.sampled_from(NAMES), json_values, max_size=6),
    json_values,
)


@settings(FUZZ, max_examples=120)
@given(well_formed(), states)
def test_fuzz_well_formed_expressions_evaluate_without_raising(source: str, state: Any) -> None:
    expr = parse_expression(source)
    assert expr.source == source
    expr.evaluate(state)
    assert isinstance(expr(state), bool)
    for path in expr.paths:
        resolve_path(state, path)


@settings(max_examples=100, deadline=500)
@given(st.text(max_size=20), st.floats(allow_nan=False, allow_infinity=False), st.integers())
def test_fuzz_literals_round_trip(text: str, number: float, integer: int) -> None:
    assert parse_expression(_quote(text)).evaluate(None) == text
    value = parse_expression(repr(number)).evaluate(None)
    assert isinstance(value, float) and math.isclose(value, number, abs_tol=0.0)
    assert parse_expression(str(integer)).evaluate(None) == integer
