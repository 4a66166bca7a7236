"""Handoffs: an agent that ends by transferring to one of the nodes it names.

``add_agent(..., handoffs=["billing", "support"])`` gives the model one
generated tool per target, ``transfer_to_<id>(reason)``. The model may call
its other tools first; its final reply must call exactly one transfer tool
(and nothing else), else it is sent back with the problem (the agent's
``output_retries``). The node then returns a ``Command`` going to that node,
with the model's reason as the routing reason; the transfer is answered in
the messages, so the next agent's history stays well formed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from types import MappingProxyType

from ..model._graph import Command
from ..model._messages import Message, ToolCall
from ._models import ToolSpec

__all__ = ["PREFIX", "Handoffs"]

PREFIX = "transfer_to_"
_NAME = re.compile(r"[A-Za-z0-9_\-]{1,52}")
_PARAMETERS = MappingProxyType({
    "type": "object",
    "properties": {"reason": {"type": "string", "description": "Why this node should take over."}},
    "required": ["reason"],
})


class Handoffs:
    """The transfer tools of one agent and the rules of its final reply."""

    def __init__(self, targets: Sequence[str]) -> None:
        self.targets = tuple(targets)
        self.by_tool = {PREFIX + t: t for t in self.targets}
        self.specs = [ToolSpec(PREFIX + t, f"Hand the conversation over to {t!r}.", _PARAMETERS)
                      for t in self.targets]

    def __bool__(self) -> bool:
        return bool(self.targets)

    @staticmethod
    def problems(targets: Sequence[str], where: str, *, has_output: bool) -> list[str]:
        """Configuration mistakes, reported by ``build()``."""
        out = [f"{where}: handoff target {t!r} must be a node id of 1-52 letters, digits, '_' "
               f"or '-'" for t in targets if not (isinstance(t, str) and _NAME.fullmatch(t))]
        if len(set(targets)) != len(targets):
            out.append(f"{where}: a handoff target is named twice")
        if targets and has_output:
            out.append(f"{where}: an agent with handoffs routes instead of returning "
                       f"structured output (drop output= or handoffs=)")
        return out

    def transfers(self, reply: Message) -> list[ToolCall]:
        """The transfer calls of a reply."""
        return [c for c in reply.tool_calls if c.name in self.by_tool]

    def chosen(self, reply: Message) -> ToolCall | None:
        """The transfer a usable final reply makes, else None."""
        calls = self.transfers(reply) if self.targets else []
        return calls[0] if len(calls) == 1 and len(reply.tool_calls) == 1 else None

    def problem(self, reply: Message) -> str | None:
        """Why a reply does not hand off properly (None for a proper one, or plain tool calls)."""
        calls = self.transfers(reply)
        if not calls and reply.tool_calls:
            return None  # other tools first: the transfer comes later
        if len(calls) == 1 and len(reply.tool_calls) == 1:
            return None
        names = ", ".join(s.name for s in self.specs)
        if not calls:
            return f"you must hand off by calling exactly one of {names}"
        return f"call exactly one of {names}, and no other tool with it"

    def command(self, reply: Message, call: ToolCall, output_key: str) -> Command:
        """The node's return value for a reply that transfers with ``call``."""
        target = self.by_tool[call.name]
        reason = str(call.arguments.get("reason") or f"handoff to {target}")
        done = Message.tool(f"transferred to {target}", tool_call_id=call.id, name=call.name)
        update = {"messages": [reply, done], output_key: reply.content}
        return Command(update=update, goto=target, reason=reason)
