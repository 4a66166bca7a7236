"""Chat messages shared by the blackboard, node histories and agents.

Messages are immutable all the way down: their ``metadata``, ``tool_calls``
and tool-call ``arguments`` are read-only containers from the moment they are
validated, so one message can be shared by the global list, node histories
and every task without a copy.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from ._frozen import FrozenDict, FrozenList, freeze, frozen_when

__all__ = ["Message", "Role", "ToolCall"]

Role = Literal["system", "user", "assistant", "tool"]

_Frozen = AfterValidator(freeze)
_NO_ARGUMENTS = FrozenDict()
_NO_CALLS = FrozenList()


def _no_arguments() -> dict[str, Any]:
    return _NO_ARGUMENTS  # shared: it is immutable


def _no_calls() -> list[ToolCall]:
    return _NO_CALLS


class ToolCall(BaseModel):
    """A tool invocation requested by an assistant message."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: Annotated[dict[str, Any], _Frozen] = Field(default_factory=_no_arguments)


class Message(BaseModel):
    """One chat message: the unit of the global list and of node histories."""

    model_config = ConfigDict(frozen=True)

    role: Role
    content: str = ""
    name: str | None = None
    tool_calls: Annotated[list[ToolCall], _Frozen] = Field(default_factory=_no_calls)
    tool_call_id: str | None = None
    metadata: Annotated[dict[str, Any], _Frozen] = Field(default_factory=_no_arguments)

    @classmethod
    def user(cls, content: str, **kw: Any) -> Message:
        """Build a user message."""
        return cls(role="user", content=content, **kw)

    @classmethod
    def assistant(cls, content: str = "", **kw: Any) -> Message:
        """Build an assistant message."""
        return cls(role="assistant", content=content, **kw)

    @classmethod
    def system(cls, content: str, **kw: Any) -> Message:
        """Build a system message."""
        return cls(role="system", content=content, **kw)

    @classmethod
    def tool(cls, content: str, *, tool_call_id: str, **kw: Any) -> Message:
        """Build a tool-result message answering ``tool_call_id``."""
        return cls(role="tool", content=content, tool_call_id=tool_call_id, **kw)


def _frozen_message(m: Message) -> bool:
    # a frozen list's items and a frozen dict's values are frozen by construction
    return type(m.metadata) is FrozenDict and type(m.tool_calls) is FrozenList


def _frozen_call(c: ToolCall) -> bool:
    return type(c.arguments) is FrozenDict


frozen_when(Message, _frozen_message)
frozen_when(ToolCall, _frozen_call)
