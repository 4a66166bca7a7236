"""Chat models from other libraries: any pydantic-ai model, any LangChain chat model.

``PydanticAIModel(model)`` (extra ``durable-flow[pydantic-ai]``) calls a
pydantic-ai ``Model`` (or a name such as ``"openai:gpt-4o"``) directly,
without a pydantic-ai agent: the agent node keeps the tool loop, so each tool
call stays a durable step. ``LangChainModel(chat_model)`` (extra
``durable-flow[langchain]``) does the same for a LangChain ``BaseChatModel``.
Both stream (unless ``streaming=False``), offer tools, and ask for structured output through an output
tool named ``final_result`` whose arguments become the reply's JSON text.
Their libraries' errors become :class:`~durable_flow.ModelError`, marked
``transient`` for rate limits, timeouts, lost connections and 5xx.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import orjson

from ..errors import ModelError
from ..model._messages import Message, ToolCall
from ._models import ChatChunk, ChatResponse, ToolSpec, Usage

__all__ = ["OUTPUT_TOOL", "LangChainModel", "PydanticAIModel"]

OUTPUT_TOOL = "final_result"
_TRANSIENT_NAMES = ("RateLimit", "Timeout", "Connection", "Overloaded", "ServerError",
                    "Unavailable", "InternalServer", "APIConnection")


def _output_parameters(schema: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """The output tool's parameters, and whether the schema was wrapped (not an object)."""
    if schema.get("type") == "object":
        return dict(schema), False
    return {"type": "object", "properties": {"response": dict(schema)},
            "required": ["response"]}, True


def _reply(text: str, calls: list[ToolCall], usage: Usage, wrapped: bool) -> ChatResponse:
    """A reply where a call of the output tool becomes the JSON text."""
    output = [c for c in calls if c.name == OUTPUT_TOOL]
    if output:
        args = output[0].arguments
        text = orjson.dumps(args.get("response") if wrapped else dict(args)).decode()
        calls = []
    return ChatResponse(Message(role="assistant", content=text, tool_calls=calls), usage)


def _model_error(where: str, exc: Exception) -> ModelError:
    status = getattr(exc, "status_code", None)
    named = any(n in type(exc).__name__ for n in _TRANSIENT_NAMES)
    transient = named or (isinstance(status, int) and (status == 429 or status >= 500))
    return ModelError(f"{where}: {type(exc).__name__}: {exc}"[:2000], transient=transient)


class PydanticAIModel:
    """A :class:`ChatModel` over a pydantic-ai model (see the module docstring)."""

    def __init__(self, model: Any, *, settings: Mapping[str, Any] | None = None,
                 streaming: bool = True) -> None:
        from pydantic_ai.models import infer_model

        self.model = infer_model(model)
        self.streaming = streaming
        self.settings: Any = dict(settings) if settings else None  # a pydantic-ai ModelSettings
        self.name = str(getattr(self.model, "model_name", None) or type(self.model).__name__)

    def __repr__(self) -> str:
        return f"PydanticAIModel({self.name!r})"

    async def complete(self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] = (),
                       output_schema: Mapping[str, Any] | None = None) -> ChatResponse:
        """One request to the pydantic-ai model."""
        params, wrapped = self._parameters(tools, output_schema)
        try:
            response = await self.model.request(self._history(messages), self.settings, params)
        except ModelError:
            raise
        except Exception as exc:
            raise _model_error(self.name, exc) from None
        return self._read(response, wrapped)

    async def stream(self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] = (),
                     output_schema: Mapping[str, Any] | None = None) -> AsyncIterator[ChatChunk]:
        """A streamed request: text deltas, then the whole reply."""
        params, wrapped = self._parameters(tools, output_schema)
        try:
            async with self.model.request_stream(self._history(messages), self.settings,
                                                 params) as streamed:
                async for event in streamed:
                    if text := _streamed_text(event):
                        yield ChatChunk(text=text)
                response = streamed.get()
        except ModelError:
            raise
        except Exception as exc:
            raise _model_error(self.name, exc) from None
        yield ChatChunk(response=self._read(response, wrapped))

    def _parameters(self, tools: Sequence[ToolSpec],
                    output_schema: Mapping[str, Any] | None) -> tuple[Any, bool]:
        from pydantic_ai.models import ModelRequestParameters
        from pydantic_ai.tools import ToolDefinition

        functions = [ToolDefinition(name=t.name, description=t.description,
                                    parameters_json_schema=dict(t.parameters) or
                                    {"type": "object", "properties": {}}) for t in tools]
        if output_schema is None:
            return ModelRequestParameters(function_tools=functions), False
        parameters, wrapped = _output_parameters(output_schema)
        output = ToolDefinition(name=OUTPUT_TOOL, parameters_json_schema=parameters,
                                description="The final answer.", kind="output")
        return ModelRequestParameters(function_tools=functions, output_mode="tool",
                                      output_tools=[output], allow_text_output=False), wrapped

    @staticmethod
    def _history(messages: Sequence[Message]) -> list[Any]:
        from pydantic_ai import messages as pm

        out: list[Any] = []
        parts: list[Any] = []
        for m in messages:
            if m.role == "assistant":
                if parts:
                    out.append(pm.ModelRequest(parts=parts))
                    parts = []
                reply: list[Any] = [pm.TextPart(content=m.content)] if m.content else []
                reply += [pm.ToolCallPart(tool_name=c.name, args=dict(c.arguments),
                                          tool_call_id=c.id) for c in m.tool_calls]
                out.append(pm.ModelResponse(parts=reply))
            elif m.role == "system":
                parts.append(pm.SystemPromptPart(content=m.content))
            elif m.role == "tool":
                parts.append(pm.ToolReturnPart(tool_name=m.name or "tool", content=m.content,
                                               tool_call_id=m.tool_call_id or ""))
            else:
                parts.append(pm.UserPromptPart(content=m.content))
        if parts:
            out.append(pm.ModelRequest(parts=parts))
        return out

    @staticmethod
    def _read(response: Any, wrapped: bool) -> ChatResponse:
        from pydantic_ai.messages import TextPart, ToolCallPart

        text = "".join(p.content for p in response.parts if isinstance(p, TextPart))
        calls = [ToolCall(id=p.tool_call_id, name=p.tool_name, arguments=p.args_as_dict())
                 for p in response.parts if isinstance(p, ToolCallPart)]
        usage = Usage(int(response.usage.input_tokens or 0), int(response.usage.output_tokens or 0))
        return _reply(text, calls, usage, wrapped)


def _streamed_text(event: Any) -> str:
    """The text a pydantic-ai stream event adds to the reply ("" for any other event).

    A text part starts with a ``PartStartEvent`` that already holds its first
    piece; only the pieces after it come as ``PartDeltaEvent``s.
    """
    from pydantic_ai.messages import PartDeltaEvent, PartStartEvent, TextPart, TextPartDelta

    if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
        return event.part.content
    if isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
        return event.delta.content_delta
    return ""


class LangChainModel:
    """A :class:`ChatModel` over a LangChain chat model (see the module docstring)."""

    def __init__(self, chat_model: Any, *, name: str | None = None, streaming: bool = True) -> None:
        self.chat_model = chat_model
        self.streaming = streaming
        self.name = name or str(getattr(chat_model, "model_name", None) or
                                getattr(chat_model, "model", None) or type(chat_model).__name__)

    def __repr__(self) -> str:
        return f"LangChainModel({self.name!r})"

    async def complete(self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] = (),
                       output_schema: Mapping[str, Any] | None = None) -> ChatResponse:
        """One call of the chat model (``ainvoke``)."""
        runnable, wrapped = self._bound(tools, output_schema)
        try:
            reply = await runnable.ainvoke(self._history(messages))
        except Exception as exc:
            raise _model_error(self.name, exc) from None
        return self._read(reply, wrapped)

    async def stream(self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] = (),
                     output_schema: Mapping[str, Any] | None = None) -> AsyncIterator[ChatChunk]:
        """A streamed call (``astream``): text deltas, then the chunks added into one reply."""
        runnable, wrapped = self._bound(tools, output_schema)
        whole: Any = None
        try:
            async for chunk in runnable.astream(self._history(messages)):
                whole = chunk if whole is None else whole + chunk
                if isinstance(chunk.content, str) and chunk.content:
                    yield ChatChunk(text=chunk.content)
        except Exception as exc:
            raise _model_error(self.name, exc) from None
        if whole is None:
            raise ModelError(f"{self.name}: the stream ended without a reply", transient=True)
        yield ChatChunk(response=self._read(whole, wrapped))

    def _bound(self, tools: Sequence[ToolSpec],
               output_schema: Mapping[str, Any] | None) -> tuple[Any, bool]:
        specs = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                   "parameters": dict(t.parameters)}}
                 for t in tools]
        wrapped = False
        if output_schema is not None:
            parameters, wrapped = _output_parameters(output_schema)
            specs.append({"type": "function", "function": {
                "name": OUTPUT_TOOL, "description": "The final answer.", "parameters": parameters}})
        if not specs:
            return self.chat_model, False
        try:
            return self.chat_model.bind_tools(specs), wrapped
        except NotImplementedError:
            raise ModelError(f"{self.name}: this chat model cannot bind tools") from None

    @staticmethod
    def _history(messages: Sequence[Message]) -> list[Any]:
        from langchain_core import messages as lm

        out: list[Any] = []
        for m in messages:
            if m.role == "system":
                out.append(lm.SystemMessage(content=m.content))
            elif m.role == "assistant":
                out.append(lm.AIMessage(content=m.content, tool_calls=[
                    {"name": c.name, "args": dict(c.arguments), "id": c.id} for c in m.tool_calls]))
            elif m.role == "tool":
                out.append(lm.ToolMessage(content=m.content, tool_call_id=m.tool_call_id or ""))
            else:
                out.append(lm.HumanMessage(content=m.content))
        return out

    @staticmethod
    def _read(reply: Any, wrapped: bool) -> ChatResponse:
        content = reply.content if isinstance(reply.content, str) else "".join(
            p.get("text", "") if isinstance(p, dict) else str(p) for p in reply.content)
        raw = getattr(reply, "tool_calls", None) or []
        ids = _call_ids([str(c["id"]) if c.get("id") else None for c in raw],
                        [c["name"] for c in raw])
        calls = [ToolCall(id=i, name=c["name"], arguments=dict(c.get("args") or {}))
                 for i, c in zip(ids, raw, strict=True)]
        meta = getattr(reply, "usage_metadata", None) or {}
        usage = Usage(int(meta.get("input_tokens") or 0), int(meta.get("output_tokens") or 0))
        return _reply(content, calls, usage, wrapped)


def _call_ids(given: Sequence[str | None], names: Sequence[str]) -> list[str]:
    """Each call's id: its own, else its tool's name, numbered when a reply repeats it.

    LangChain allows calls without an id; their results must still be told
    apart (``weather``, ``weather#2``, ...), and an id-less call keeps the same
    id on every execution of the recorded reply.
    """
    seen: dict[str, int] = {}
    out = []
    for call_id, name in zip(given, names, strict=True):
        base = call_id or name
        seen[base] = seen.get(base, 0) + 1
        out.append(base if call_id or seen[base] == 1 else f"{base}#{seen[base]}")
    return out
