"""Agent options of a declarative node: ``handoffs`` and ``context``.

A node whose registry entry is an :class:`~durable_flow.Agent` may say::

    - id: triage
      agent_name: triage
      handoffs: [billing, support]
      context: window(6) + user_only() + from_state(brief, style)

``context`` is read by a small grammar (terms joined by ``+``: ``window(N)``,
``user_only()``, ``none()``, ``from_state(name, ...)`` with bare or quoted
names), never evaluated. The options replace the agent's own for that node,
and are written back by ``dump_workflow``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any

from ...model._graph import NodeSpec

__all__ = ["KEYS", "agent_maker", "dump_options", "parse_context", "read_options"]

KEYS = ("handoffs", "context")
_TERM = re.compile(r"\s*(window|user_only|none|from_state)\s*\(([^()]*)\)\s*")
_NAME = re.compile(r"""\s*(?:'([^']+)'|"([^"]+)"|([A-Za-z_][A-Za-z0-9_.]*))\s*""")


def parse_context(text: str) -> Any:
    """A ``Context`` from its written form; ``ValueError`` naming the first bad term."""
    from ...agents import context as policies

    out: Any = None
    for term in text.split("+"):
        match = _TERM.fullmatch(term)
        if match is None:
            raise ValueError(f"{term.strip()!r} is not window(N), user_only(), none() or "
                             f"from_state(name, ...)")
        name, args = match.group(1), match.group(2).strip()
        if name == "window":
            if not args.isdigit():
                raise ValueError(f"window({args}) takes a whole number")
            part = policies.window(int(args))
        elif name == "from_state":
            part = policies.from_state(*_names(args))
        elif args:
            raise ValueError(f"{name}() takes no arguments")
        else:
            part = policies.user_only() if name == "user_only" else policies.none()
        out = part if out is None else out + part
    return out


def _names(args: str) -> list[str]:
    names = []
    for item in args.split(","):
        match = _NAME.fullmatch(item)
        if match is None:
            raise ValueError(f"from_state: {item.strip()!r} is not a field name")
        names.append(next(g for g in match.groups() if g))
    return names


def read_options(raw: Mapping[str, Any], loc: str, problems: list[str]) -> dict[str, Any]:
    """The node's ``handoffs`` and ``context`` as written, each misfit a located problem."""
    out: dict[str, Any] = {}
    handoffs = raw.get("handoffs")
    if handoffs is not None:
        if isinstance(handoffs, list | tuple) and all(isinstance(h, str) for h in handoffs):
            out["handoffs"] = list(handoffs)
        else:
            problems.append(f"{loc}.handoffs: must be a list of node ids")
    context = raw.get("context")
    if context is not None:
        try:
            if not isinstance(context, str):
                raise ValueError("must be a string such as 'window(6) + user_only()'")
            parse_context(context)
            out["context"] = context
        except ValueError as exc:
            problems.append(f"{loc}.context: {exc}")
    return out


def agent_maker(value: Any, options: Mapping[str, Any], make: Callable[[str], Any],
                loc: str, problems: list[str]) -> Callable[[str], Any]:
    """``make`` for a registry entry, with the node's agent options applied to it."""
    given = {k: options[k] for k in KEYS if k in options}
    if not given:
        return make
    from ...agents._agent import Agent

    if not isinstance(value, Agent):
        problems.append(f"{loc}: {', '.join(given)} apply to agent nodes (an Agent in the "
                        f"registry) only")
        return make
    changes: dict[str, Any] = {}
    if "handoffs" in given:
        changes["handoffs"] = tuple(given["handoffs"])
    if "context" in given:
        changes["context"] = parse_context(given["context"])
    return dataclasses.replace(value, **changes).node_spec


def dump_options(spec: NodeSpec, written: Mapping[str, Any]) -> dict[str, Any]:
    """The agent options to write for a node (those of its agent, else as they were read)."""
    agent = spec.meta.get("agent") if spec.kind == "agent" else None
    out = {k: written[k] for k in KEYS if k in written}
    handoffs: tuple[str, ...] = tuple(getattr(agent, "handoffs", None) or ())
    if handoffs:
        out["handoffs"] = list(handoffs)
    if "context" in spec.meta and "context" not in out:
        out["context"] = spec.meta["context"]
    return out
