"""Chat models: the ``ChatModel`` protocol and its records.

An agent node talks to any object with an async ``complete`` method (see
:class:`ChatModel`); a model that also has ``stream`` (see
:class:`StreamingChatModel`) is streamed, its text deltas reaching
``Runtime.stream`` and the run's stream log as they come. The adapters live
beside this module: OpenAI-compatible HTTP (``_openai``), pydantic-ai and
LangChain (``_providers``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ..model._messages import Message

__all__ = ["ChatChunk", "ChatModel", "ChatResponse", "StreamingChatModel", "ToolSpec", "Usage",
           "model_name", "streams"]


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of one model call."""

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, int]:
        """Plain form, kept in the reply message's ``metadata["usage"]``."""
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens}


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as the model sees it: name, description and a JSON Schema of its arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ChatResponse:
    """What a model call returns: an assistant message (text or tool calls) and its usage."""

    message: Message
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True, slots=True)
class ChatChunk:
    """One piece of a streamed reply.

    ``text`` is a text delta (possibly empty). The last chunk carries the
    whole reply in ``response`` (tool calls and structured output assembled
    from the deltas, and the usage); a stream that ends without one is read
    as a text reply made of its deltas.
    """

    text: str = ""
    response: ChatResponse | None = None


@runtime_checkable
class ChatModel(Protocol):
    """A chat model an agent node can call.

    ``complete`` receives the conversation, the tools the model may call and,
    for structured output, a JSON Schema the reply must follow; it returns an
    assistant :class:`~durable_flow.Message` with text or ``tool_calls``, and
    the token usage. It raises :class:`~durable_flow.ModelError` when the call
    fails. An optional ``name`` attribute is shown by ``Workflow.explain()``.
    """

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        output_schema: Mapping[str, Any] | None = None,
    ) -> ChatResponse:
        """Answer ``messages``; see the class docstring."""
        ...


def model_name(model: object) -> str:
    """A readable name of a model: its ``name`` attribute, else its class name."""
    name = getattr(model, "name", None)
    return name if isinstance(name, str) and name else type(model).__name__


@runtime_checkable
class StreamingChatModel(ChatModel, Protocol):
    """A :class:`ChatModel` that can also stream its reply as :class:`ChatChunk` values.

    Agent nodes stream a model that has ``stream`` (unless its ``streaming``
    attribute is False); ``complete`` is then not called.
    """

    def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        output_schema: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[ChatChunk]:
        """Answer ``messages`` piece by piece; the last chunk carries the whole response."""
        ...


def streams(model: object) -> bool:
    """Whether an agent node streams ``model``: it has ``stream`` and has not switched it off."""
    return callable(getattr(model, "stream", None)) and getattr(model, "streaming", True) is not False
