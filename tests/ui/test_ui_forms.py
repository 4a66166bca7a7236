"""Forms generated from a request's JSON Schema, and answers read back from submitted forms."""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, Field, TypeAdapter

from durable_flow.ui._forms import build_form, read_answer


def schema(tp: Any) -> dict[str, Any]:
    return TypeAdapter(tp).json_schema()


class Color(str, Enum):
    RED = "red"
    BLUE = "blue"


class Address(BaseModel):
    city: str
    zip: int | None = None


class Order(BaseModel):
    qty: int = Field(ge=1, le=10)
    price: float
    rush: bool = False
    color: Color
    size: Literal["S", "M", "L"] = "M"
    note: str | None = None
    tags: list[str] = []
    ship_to: Address
    extra: dict[str, int] = {}


def test_a_boolean_is_a_yes_no_choice_read_as_a_bool() -> None:
    form = build_form(schema(bool))
    assert form.root.kind == "boolean" and form.root.required
    assert read_answer(schema(bool), {"answer": ["true"]}) == (True, {})
    assert read_answer(schema(bool), {"answer": ["false"]}) == (False, {})
    assert read_answer(schema(bool), {}) == (None, {"answer": "this field is required"})
    assert read_answer(schema(bool), {"answer": ["maybe"]})[1] == {"answer": "choose yes or no"}


def test_every_property_of_a_model_gets_its_kind_of_field() -> None:
    form = build_form(schema(Order))
    kinds = {f.name: f.kind for f in form.root.children}
    assert kinds == {"answer/qty": "integer", "answer/price": "number", "answer/rush": "boolean",
                     "answer/color": "enum", "answer/size": "enum", "answer/note": "string",
                     "answer/tags": "array", "answer/ship_to": "object", "answer/extra": "json"}
    by_name = {f.name: f for f in form.root.children}
    assert by_name["answer/color"].options == [('"red"', "red"), ('"blue"', "blue")]
    assert by_name["answer/size"].value == '"M"'  # the default is preselected
    assert by_name["answer/rush"].value == "false"
    assert not by_name["answer/note"].required and by_name["answer/note"].nullable
    assert [c.name for c in by_name["answer/ship_to"].children] == [
        "answer/ship_to/city", "answer/ship_to/zip"]
    assert by_name["answer/qty"].description is None
    assert by_name["answer/tags"].row_template is not None


def _order_form(**over: list[str]) -> dict[str, list[str]]:
    raw = {"answer/qty": ["3"], "answer/price": ["9.5"], "answer/rush": ["true"],
           "answer/color": ['"blue"'], "answer/size": ['"L"'], "answer/note": [""],
           "answer/tags#rows": ["0", "n7"], "answer/tags/0": ["a"], "answer/tags/n7": ["b"],
           "answer/ship_to/city": ["Oslo"], "answer/ship_to/zip": [""],
           "answer/extra": ['{"x": 1}']}
    return {**raw, **over}


def test_a_filled_form_reads_back_as_the_typed_answer() -> None:
    value, errors = read_answer(schema(Order), _order_form())
    assert errors == {}
    assert value == {"qty": 3, "price": 9.5, "rush": True, "color": "blue", "size": "L",
                     "note": None, "tags": ["a", "b"], "ship_to": {"city": "Oslo", "zip": None},
                     "extra": {"x": 1}}
    assert Order.model_validate(value).color is Color.BLUE


def test_problems_are_reported_against_their_fields() -> None:
    _, errors = read_answer(schema(Order), _order_form(**{
        "answer/qty": ["three"], "answer/price": ["cheap"], "answer/ship_to/city": [""],
        "answer/extra": ["{not json"], "answer/color": ['"green"']}))
    assert errors == {
        "answer/qty": "enter a whole number, not 'three'",
        "answer/price": "enter a number, not 'cheap'",
        "answer/ship_to/city": "this field is required",
        "answer/extra": 'enter valid JSON (for example {"key": 1} or [1, 2])',
        "answer/color": "choose one of the options",
    }


def test_the_json_schema_constraints_are_checked_at_the_field() -> None:
    value, errors = read_answer(schema(Order), _order_form(**{"answer/qty": ["11"]}))
    assert value is None
    assert errors == {"answer/qty": "11 is greater than the maximum of 10"}
    _, errors = read_answer(schema(Order), _order_form(**{"answer/extra": ['{"x": "one"}']}))
    assert list(errors) == ["answer/extra"]  # inside a JSON field: reported on that field


def test_an_empty_array_row_is_required_and_rows_keep_their_order() -> None:
    raw = _order_form(**{"answer/tags#rows": ["n2", "0"], "answer/tags/n2": ["z"],
                         "answer/tags/0": [""]})
    _, errors = read_answer(schema(Order), raw)
    assert errors == {"answer/tags/0": "this field is required"}
    raw["answer/tags/0"] = ["a"]
    value, _ = read_answer(schema(Order), raw)
    assert value["tags"] == ["z", "a"]


def test_a_submitted_form_is_shown_again_with_its_values_and_problems() -> None:
    raw = _order_form(**{"answer/qty": ["three"]})
    _, errors = read_answer(schema(Order), raw)
    form = build_form(schema(Order), raw, errors)
    by_name = {f.name: f for f in form.root.children}
    assert by_name["answer/qty"].value == "three"
    assert by_name["answer/qty"].error == "enter a whole number, not 'three'"
    assert [r.name for r in by_name["answer/tags"].rows] == ["answer/tags/0", "answer/tags/n7"]
    assert [r.value for r in by_name["answer/tags"].rows] == ["a", "b"]
    assert form.has_errors and not build_form(schema(Order)).has_errors


def test_scalars_enums_and_free_json_at_the_top_level() -> None:
    assert read_answer(schema(int), {"answer": [" 42 "]}) == (42, {})
    assert read_answer(schema(float), {"answer": ["2"]}) == (2, {})
    assert read_answer(schema(float), {"answer": ["nan"]})[1] == {"answer": "enter a finite number"}
    assert read_answer(schema(str), {"answer": ["hi <b>"]}) == ("hi <b>", {})
    assert read_answer(schema(Color), {"answer": ['"red"']}) == ("red", {})
    assert read_answer(schema(dict[str, Any]), {"answer": ['{"a": [1]}']}) == ({"a": [1]}, {})
    assert read_answer(schema(int | str), {"answer": ["7"]}) == (7, {})  # a union: JSON
    assert build_form(schema(int | str)).root.kind == "json"


def test_a_schema_string_format_is_checked_like_the_runtime_checks_it() -> None:
    from datetime import date

    assert build_form(schema(date)).root.input_type == "date"
    assert read_answer(schema(date), {"answer": ["2024-05-01"]}) == ("2024-05-01", {})
    _, errors = read_answer(schema(date), {"answer": ["May first"]})
    assert list(errors) == ["answer"]


def test_nested_arrays_of_objects_get_their_own_row_placeholders() -> None:
    class Line(BaseModel):
        sku: str
        notes: list[str] = []

    form = build_form(schema(list[Line]))
    template = form.root.row_template
    assert template is not None and template.name == "answer/__i0__"
    inner = {c.name: c for c in template.children}["answer/__i0__/notes"]
    assert inner.row_template is not None
    assert inner.row_template.name == "answer/__i0__/notes/__i1__"
    filled = build_form(schema(list[Line]), {"answer#rows": ["4"], "answer/4/sku": ["x"]})
    [row] = filled.root.rows
    notes = {c.name: c for c in row.children}["answer/4/notes"]
    assert notes.row_template is not None and notes.row_template.name == "answer/4/notes/__i0__"


class FinanceAnswer(BaseModel):
    approved: bool
    note: str = Field(max_length=5)
    ship_to: Address


def test_a_form_is_headed_by_words_not_by_the_class_names_of_its_models() -> None:
    form = build_form(schema(FinanceAnswer))
    assert form.root.label == "Answer"
    assert {f.name: f.label for f in form.root.children} == {
        "answer/approved": "Approved", "answer/note": "Note", "answer/ship_to": "ship_to"}
    assert build_form(schema(FinanceAnswer), label="Details").root.label == "Details"


def test_every_problem_of_a_form_is_reported_in_one_round() -> None:
    # a field that does not parse, one too long and one missing: all three at once
    _, errors = read_answer(schema(FinanceAnswer), {
        "answer/approved": ["perhaps"], "answer/note": ["far too long"],
        "answer/ship_to/city": ["Oslo"], "answer/ship_to/zip": ["x"]})
    assert errors == {"answer/approved": "choose yes or no",
                      "answer/note": "'far too long' is too long",
                      "answer/ship_to/zip": "enter a whole number, not 'x'"}
    _, errors = read_answer(schema(Order), _order_form(**{
        "answer/qty": ["11"], "answer/price": ["cheap"]}))
    assert errors == {"answer/qty": "11 is greater than the maximum of 10",
                      "answer/price": "enter a number, not 'cheap'"}
