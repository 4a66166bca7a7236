"""Agent tools: plain functions compiled into what the model sees and how to call them.

A tool's argument schema comes from its signature and type hints (through a
pydantic model); a parameter annotated ``NodeContext`` receives the node's
context and is not shown to the model. A function marked with
``durable_flow.tool`` brings its approval and in-doubt options along.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from ..engine._context import NodeContext
from ..model._effects import Approval, InDoubt
from ._approval import options_of
from ._models import ToolSpec

__all__ = ["Tool", "compile_tool", "compile_tools", "validation_errors"]


def validation_errors(exc: ValidationError) -> str:
    """A pydantic validation error in one short line (at most five problems)."""
    parts = [f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in exc.errors()[:5]]
    return "; ".join(parts)

@dataclass(frozen=True, slots=True)
class Tool:
    """A compiled tool: what the model sees and how to call it."""

    spec: ToolSpec
    fn: Callable[..., Any]
    args: type[BaseModel]
    ctx_param: str | None = None
    approval: Approval | None = None
    in_doubt: InDoubt = "rerun"


def compile_tools(fns: Sequence[Callable[..., Any]], where: str) -> tuple[dict[str, Tool], list[str]]:
    """Compile tool functions; returns them by name, and the problems found."""
    tools: dict[str, Tool] = {}
    problems: list[str] = []
    for fn in fns:
        try:
            tool = compile_tool(fn)
        except (TypeError, ValueError) as exc:
            problems.append(f"{where}: tool {fn!r}: {exc}")
            continue
        if tool.spec.name in tools:
            problems.append(f"{where}: two tools are named {tool.spec.name!r}")
        tools[tool.spec.name] = tool
    return tools, problems


def compile_tool(fn: Callable[..., Any]) -> Tool:
    """Derive a tool's argument schema from its signature and type hints (via pydantic)."""
    if not callable(fn):
        raise TypeError("a tool must be a function")
    name = getattr(fn, "__name__", "")
    if not re.fullmatch(r"[A-Za-z0-9_\-]{1,64}", name):
        raise ValueError(f"tool name {name!r} must be 1-64 letters, digits, '_' or '-'")
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception:
        hints = {}
    fields: dict[str, Any] = {}
    ctx_param = None
    for p in inspect.signature(fn).parameters.values():
        annotation = hints.get(p.name, p.annotation)
        if _is_context(annotation):
            ctx_param = p.name
            continue
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            raise TypeError(f"parameter {p.name!r}: tools take named parameters only")
        if annotation is p.empty or isinstance(annotation, str):
            annotation = Any
        fields[p.name] = (annotation, ... if p.default is p.empty else p.default)
    config = ConfigDict(protected_namespaces=(), arbitrary_types_allowed=True)
    args: type[BaseModel] = create_model(f"{name}_arguments", __config__=config, **fields)
    schema = args.model_json_schema()
    schema.pop("title", None)
    doc = (inspect.getdoc(fn) or "").strip().split("\n\n")[0].replace("\n", " ")
    options = options_of(fn)
    return Tool(ToolSpec(name, doc, MappingProxyType(schema)), fn, args, ctx_param,
                options.approval, options.in_doubt)


def _is_context(annotation: Any) -> bool:
    if isinstance(annotation, str):
        return annotation.split(".")[-1] == "NodeContext"
    return isinstance(annotation, type) and issubclass(annotation, NodeContext)
