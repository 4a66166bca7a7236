"""A scripted chat model for testing agents offline.

``ScriptedModel`` answers from a list (one reply per call, in order) or from
a function of the messages, and records every call it receives::

    model = ScriptedModel(["first answer", "second answer"])
    ...
    assert model.calls[0].messages[-1].content == "the question"
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..agents._models import ChatChunk, ChatResponse, ToolSpec, Usage
from ..errors import ModelError
from ..model._messages import Message

__all__ = ["ScriptedCall", "ScriptedModel"]

Reply = str | Message
ReplyFn = Callable[[list[Message]], Any]


@dataclass(frozen=True, slots=True)
class ScriptedCall:
    """One call a :class:`ScriptedModel` received."""

    messages: list[Message]
    tools: list[ToolSpec]
    output_schema: Mapping[str, Any] | None


class ScriptedModel:
    """A :class:`~durable_flow.ChatModel` that plays back scripted replies.

    ``replies`` is a list of ``str | Message`` used one per call (running out
    raises ``ModelError``), or a function ``(messages) -> str | Message``
    (it may be async). A ``str`` becomes an assistant message with that text.
    Usage is counted in words, so tests can check it is recorded. With
    ``streaming=True`` agent nodes stream it: each reply comes word by word
    (``ChatChunk``), then whole.
    """

    def __init__(self, replies: Sequence[Reply] | ReplyFn, *, name: str = "scripted",
                 streaming: bool = False) -> None:
        self.name = name
        self.streaming = streaming
        self._fn: ReplyFn | None = replies if callable(replies) else None
        self._replies: list[Reply] = [] if callable(replies) else list(replies)
        self.calls: list[ScriptedCall] = []

    def __repr__(self) -> str:
        return f"ScriptedModel(name={self.name!r}, calls={len(self.calls)})"

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        output_schema: Mapping[str, Any] | None = None,
    ) -> ChatResponse:
        """Record the call and return the next scripted reply."""
        sent = list(messages)
        self.calls.append(ScriptedCall(sent, list(tools), output_schema))
        reply = await self._next(sent)
        message = reply if isinstance(reply, Message) else Message.assistant(str(reply))
        if message.role != "assistant":
            raise ModelError(f"ScriptedModel reply must be an assistant message, got {message.role}")
        usage = Usage(sum(len(m.content.split()) for m in sent), len(message.content.split()))
        return ChatResponse(message, usage)

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        output_schema: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[ChatChunk]:
        """The next reply word by word (each word with the space before it), then whole."""
        response = await self.complete(messages, tools=tools, output_schema=output_schema)
        words = response.message.content.split(" ")
        for i, word in enumerate(words):
            piece = word if i == 0 else " " + word
            if piece:
                yield ChatChunk(text=piece)
        yield ChatChunk(response=response)

    async def _next(self, sent: list[Message]) -> Any:
        if self._fn is not None:
            reply = self._fn(sent)
            return await reply if inspect.isawaitable(reply) else reply
        index = len(self.calls) - 1
        if index >= len(self._replies):
            raise ModelError(f"ScriptedModel {self.name!r} has no reply left for call "
                             f"{index + 1} (it has {len(self._replies)})")
        return self._replies[index]
