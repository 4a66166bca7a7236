"""Forms generated from a request's JSON Schema, and the answer read back from one.

A form field is named by where its value sits in the answer: ``answer`` is
the answer itself, ``answer/approved`` a property of it, ``answer/tags/0``
an item of a list (RFC 6901 escapes in each part). An array's rows are
listed, in the order shown, by the values of its ``<name>#rows`` inputs, so
rows can be added and removed in the page without renumbering.

Reading a form back never trusts the browser: every value is parsed by its
schema here, then the whole answer is checked with the JSON Schema validator
the runtime itself uses, and every problem is reported against the field it
belongs to.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import jsonschema
import orjson

# the format checks the runtime applies to answers, so a form never accepts what respond refuses
from ..runtime._responses import format_checker

__all__ = ["ROOT", "Form", "FormField", "build_form", "read_answer"]

ROOT = "answer"
FieldKind = Literal["boolean", "enum", "string", "integer", "number", "object", "array", "json"]
Raw = Mapping[str, list[str]]
_MISSING: Any = object()
# The index of an array row the page has not added yet: one per nesting depth, so
# adding an outer row fills in its own index and leaves the inner rows' alone.
_ROW = re.compile(r"__i\d+__")


@dataclass(slots=True)
class FormField:
    """One input (or group of inputs) of a generated form."""

    name: str
    label: str
    kind: FieldKind
    required: bool = True
    nullable: bool = False
    description: str | None = None
    input_type: str = "text"
    options: list[tuple[str, str]] = field(default_factory=list)
    children: list[FormField] = field(default_factory=list)
    rows: list[FormField] = field(default_factory=list)
    row_template: FormField | None = None
    value: str = ""
    error: str | None = None

    @property
    def rows_key(self) -> str:
        """The input listing an array's rows."""
        return f"{self.name}#rows"

    @property
    def dom_id(self) -> str:
        """An HTML id for this field (unique within its form's prefix)."""
        return "f-" + "".join(c if c.isalnum() else "-" for c in self.name)


@dataclass(slots=True)
class Form:
    """A generated form: its root field and the problems that belong to no field."""

    root: FormField
    errors: list[str] = field(default_factory=list)

    @property
    def has_errors(self) -> bool:
        """True when any field, or the form, shows a problem."""
        return bool(self.errors) or _any_error(self.root)


def _any_error(f: FormField) -> bool:
    return f.error is not None or any(_any_error(c) for c in (*f.children, *f.rows))


def _escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")


def _child(name: str, part: str | int) -> str:
    return f"{name}/{_escape(str(part))}"


# -- schema shapes ------------------------------------------------------------------------


def _resolve(schema: Any, root: Mapping[str, Any]) -> dict[str, Any]:
    """Follow local ``$ref``s (``#/$defs/...``), keeping the referring schema's own keys."""
    seen = 0
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and seen < 32:
        target: Any = root
        for part in schema["$ref"].lstrip("#").strip("/").split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            target = target.get(part, {}) if isinstance(target, dict) else {}
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        seen += 1
    return schema if isinstance(schema, dict) else {}


def _unwrap_null(schema: dict[str, Any], root: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """``X | None`` (``anyOf`` with a null branch, or a type list with null) as (X, True)."""
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list):
            others = [b for b in branches if _resolve(b, root).get("type") != "null"]
            if len(others) == 1 and len(others) < len(branches):
                rest = {k: v for k, v in schema.items() if k != key}
                return {**_resolve(others[0], root), **rest}, True
    kinds = schema.get("type")
    if isinstance(kinds, list) and "null" in kinds:
        left = [k for k in kinds if k != "null"]
        if len(left) == 1:
            return {**schema, "type": left[0]}, True
    return schema, False


def _kind(schema: Mapping[str, Any]) -> FieldKind:
    if isinstance(schema.get("enum"), list) or "const" in schema:
        return "enum"
    kind = schema.get("type")
    if kind in ("boolean", "string", "integer", "number"):
        return kind  # type: ignore[no-any-return]
    if kind == "object" and isinstance(schema.get("properties"), dict) \
            and not schema.get("additionalProperties"):
        return "object"
    if kind == "array" and isinstance(schema.get("items"), dict):
        return "array"
    return "json"


def _choices(schema: Mapping[str, Any]) -> list[Any]:
    return list(schema["enum"]) if isinstance(schema.get("enum"), list) else [schema.get("const")]


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _shown(value: Any, kind: FieldKind) -> str:
    """How a value (a default) reads in a text input."""
    if value is None:
        return ""
    if kind == "string" and isinstance(value, str):
        return value
    if kind == "boolean":
        return "true" if value else "false"
    if kind in ("integer", "number") and isinstance(value, int | float):
        return str(value)
    return _json(value)


# -- building a form -------------------------------------------------------------------------


def build_form(schema: Mapping[str, Any], raw: Raw | None = None,
               errors: Mapping[str, str] | None = None, label: str = "Answer") -> Form:
    """The form for answers of ``schema``, filled with ``raw`` (a submission) or the defaults.

    The whole form is headed ``label``: a model's class name (the schema's
    ``title``, such as ``FinanceAnswer``) means nothing to the person answering.
    """
    root = {k: v for k, v in schema.items() if k != "title"}
    built = _build(root, root, ROOT, label, True, raw, errors or {}, _MISSING)
    return Form(built, [m for k, m in (errors or {}).items() if k == ""])


def _build(schema: Mapping[str, Any], root: Mapping[str, Any], name: str, label: str,
           required: bool, raw: Raw | None, errors: Mapping[str, str], default: Any) -> FormField:
    spec, nullable = _unwrap_null(_resolve(schema, root), root)
    kind = _kind(spec)
    if default is _MISSING:
        default = spec.get("default", _MISSING)
    f = FormField(name=name, label=_label(schema, spec, label), kind=kind,
                  required=required and not nullable, nullable=nullable,
                  description=spec.get("description"), error=errors.get(name))
    if kind == "object":
        wanted = set(spec.get("required") or ())
        defaults = default if isinstance(default, dict) else {}
        f.children = [_build(sub, root, _child(name, prop), str(prop), prop in wanted, raw, errors,
                             defaults.get(prop, _MISSING))
                      for prop, sub in spec["properties"].items()]
    elif kind == "array":
        _build_rows(f, spec, root, raw, errors, default)
    else:
        _fill_scalar(f, spec, raw, default)
    return f


def _label(schema: Mapping[str, Any], spec: Mapping[str, Any], fallback: str) -> str:
    """A field's label: its own title, else its name; never a referenced model's class name."""
    if isinstance(schema, Mapping) and schema.get("title"):
        return str(schema["title"])
    if _refers(schema):  # {"$ref": "#/$defs/LineItem"}: "LineItem" names a class, not the field
        return fallback
    return str(spec.get("title") or fallback)


def _refers(schema: Any) -> bool:
    """Whether ``schema`` is (or wraps, as ``X | None``) a ``$ref`` to another schema."""
    if not isinstance(schema, Mapping):
        return False
    if "$ref" in schema:
        return True
    return any(isinstance(b, Mapping) and "$ref" in b
               for key in ("anyOf", "oneOf", "allOf") for b in schema.get(key) or ())


def _build_rows(f: FormField, spec: Mapping[str, Any], root: Mapping[str, Any], raw: Raw | None,
                errors: Mapping[str, str], default: Any) -> None:
    item = spec["items"]
    if raw is not None:
        rows: list[tuple[str, Any]] = [(i, _MISSING) for i in raw.get(f.rows_key, [])]
    else:
        values = default if isinstance(default, list) else []
        count = max(len(values), int(spec.get("minItems") or 0))
        rows = [(str(i), values[i] if i < len(values) else _MISSING) for i in range(count)]
    f.rows = [_build(item, root, _child(f.name, i), f"item {n + 1}", True, raw, errors, value)
              for n, (i, value) in enumerate(rows)]
    placeholder = f"__i{len(_ROW.findall(f.name))}__"
    f.row_template = _build(item, root, _child(f.name, placeholder), "new item", True, None, {},
                            _MISSING)


def _fill_scalar(f: FormField, spec: Mapping[str, Any], raw: Raw | None, default: Any) -> None:
    if f.kind == "enum":
        f.options = [(_json(v), str(v) if isinstance(v, str) else _json(v)) for v in _choices(spec)]
    elif f.kind == "string" and spec.get("format") in ("date", "time", "email"):
        f.input_type = str(spec["format"])
    if raw is not None:
        f.value = (raw.get(f.name) or [""])[-1]
    elif default is not _MISSING:
        f.value = _json(default) if f.kind == "enum" else _shown(default, f.kind)


# -- reading an answer back ------------------------------------------------------------------------


def read_answer(schema: Mapping[str, Any], raw: Raw) -> tuple[Any, dict[str, str]]:
    """The answer a submitted form holds, and the problems, keyed by field name.

    Each value is parsed by its schema (a number field must hold a number, a
    required field a value); then, when every field parsed, the answer is
    checked against the whole JSON Schema as the runtime will check it.
    """
    root = dict(schema)
    errors: dict[str, str] = {}
    names: set[str] = set()
    value = _read(root, root, ROOT, True, raw, errors, names)
    # the whole schema is checked even when some fields did not parse, so every problem is
    # reported in one round; a field that did not parse keeps its own problem
    holes: set[tuple[Any, ...]] = set()
    checked = _without_missing(value, (), holes)
    for path, message in _schema_problems(checked, root, names, holes):
        errors.setdefault(path, message)
    return (None, errors) if errors else (value, errors)


def _without_missing(value: Any, at: tuple[Any, ...], holes: set[tuple[Any, ...]]) -> Any:
    """The answer as read so far: values that did not parse left out.

    A list item that did not parse is None there, its position kept in ``holes``
    (its field has its problem already).
    """
    if isinstance(value, dict):
        return {k: _without_missing(v, (*at, k), holes) for k, v in value.items()
                if v is not _MISSING}
    if isinstance(value, list):
        return [_without_missing(v, (*at, i), holes) for i, v in enumerate(value)]
    if value is _MISSING:
        holes.add(at)
        return None
    return value


def _read(schema: Mapping[str, Any], root: Mapping[str, Any], name: str, required: bool,
          raw: Raw, errors: dict[str, str], names: set[str]) -> Any:
    spec, nullable = _unwrap_null(_resolve(schema, root), root)
    kind = _kind(spec)
    names.add(name)
    if kind == "object":
        wanted = set(spec.get("required") or ())
        out: dict[str, Any] = {}
        for prop, sub in spec["properties"].items():
            got = _read(sub, root, _child(name, prop), prop in wanted, raw, errors, names)
            if got is not _MISSING:
                out[prop] = got
        return out
    if kind == "array":
        rows = raw.get(f"{name}#rows", [])
        return [_read(spec["items"], root, _child(name, i), True, raw, errors, names) for i in rows]
    text = (raw.get(name) or [""])[-1].strip()
    if text == "":
        if nullable:
            return None
        if required:
            errors[name] = "this field is required"
        return _MISSING
    try:
        return _parse(kind, spec, text)
    except ValueError as exc:
        errors[name] = str(exc)
        return _MISSING


def _parse(kind: FieldKind, spec: Mapping[str, Any], text: str) -> Any:
    if kind == "boolean":
        if text not in ("true", "false"):
            raise ValueError("choose yes or no")
        return text == "true"
    if kind == "integer":
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"enter a whole number, not {text!r}") from None
    if kind == "number":
        return _number(text)
    if kind == "string":
        return text
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        if kind == "enum":
            raise ValueError("choose one of the options") from None
        raise ValueError("enter valid JSON (for example {\"key\": 1} or [1, 2])") from None
    if kind == "enum" and value not in _choices(spec):
        raise ValueError("choose one of the options")
    return value


def _number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        raise ValueError(f"enter a number, not {text!r}") from None
    if not math.isfinite(number):
        raise ValueError("enter a finite number")
    return number


def _schema_problems(value: Any, schema: Mapping[str, Any], names: set[str],
                     holes: set[tuple[Any, ...]]) -> Iterable[tuple[str, str]]:
    """Every JSON Schema problem of ``value``, at the nearest field that shows it.

    Problems of the ``holes`` (values that did not parse) are left out.
    """
    validator = jsonschema.validators.validator_for(schema)(schema, format_checker=format_checker())
    for error in sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path)):
        if tuple(error.absolute_path) in holes:
            continue
        path = ROOT + "".join(f"/{_escape(str(p))}" for p in error.absolute_path)
        if error.validator == "required" and isinstance(error.instance, dict):
            for prop in error.validator_value:  # type: ignore[union-attr]
                if prop not in error.instance:
                    yield _nearest(_child(path, prop), names), "this field is required"
            continue
        yield _nearest(path, names), error.message


def _nearest(path: str, names: set[str]) -> str:
    while path not in names and "/" in path:
        path = path.rsplit("/", 1)[0]
    return path
