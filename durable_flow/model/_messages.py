"""Chat messages shared by the blackboard, node histories and agents."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Message", "Role", "ToolCall"]

Role = Literal["system", "user", "assistant", "tool"]


class ToolCall(BaseModel):
    """A tool invocation requested by an assistant message."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Message(BaseModel):
    """One chat message: the unit of the global list and of node histories."""

    model_config = ConfigDict(frozen=True)

    role: Role
    content: str = ""
    name: str | None = None
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

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
