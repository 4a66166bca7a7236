"""Chat models: the ``ChatModel`` protocol, its records, and an OpenAI-compatible adapter.

An agent node talks to any object with an async ``complete`` method (see
:class:`ChatModel`). The OpenAI adapter speaks the ``/chat/completions`` wire
format used by OpenAI and by most local servers (vLLM, llama.cpp, Ollama);
it needs ``httpx``, the optional extra ``durable-flow[openai]``, imported only
when a request is made.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import orjson

from ..errors import ModelError
from ..model._messages import Message, ToolCall

if TYPE_CHECKING:
    import httpx

__all__ = ["ChatModel", "ChatResponse", "OpenAIChatModel", "ToolSpec", "Usage", "model_name"]


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


class OpenAIChatModel:
    """A :class:`ChatModel` for any OpenAI-compatible ``/chat/completions`` endpoint.

    ``api_key`` defaults to the ``OPENAI_API_KEY`` environment variable (a
    local server may need none). Structured output is requested as
    ``response_format`` ``json_schema`` (or ``json_object`` for servers that
    only know that). ``extra`` is merged into every request body
    (``temperature``, ``seed``, ...). HTTP and protocol failures raise
    :class:`~durable_flow.ModelError` carrying the response body.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        timeout: float = 60.0,
        headers: Mapping[str, str] | None = None,
        extra: Mapping[str, Any] | None = None,
        response_format: Literal["json_schema", "json_object"] = "json_schema",
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.name = model
        self.url = base_url.rstrip("/") + "/chat/completions"
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.timeout = timeout
        self.headers = dict(headers or {})
        self.extra = dict(extra or {})
        self.response_format = response_format
        self._transport = transport

    def __repr__(self) -> str:
        return f"OpenAIChatModel({self.name!r}, url={self.url!r})"

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        output_schema: Mapping[str, Any] | None = None,
    ) -> ChatResponse:
        """POST one chat completion and turn the first choice into a ``ChatResponse``."""
        httpx = _httpx()
        body = self.request_body(messages, tools, output_schema)
        headers = {"Content-Type": "application/json", **self.headers}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        try:
            async with httpx.AsyncClient(timeout=self.timeout, transport=self._transport) as client:
                resp = await client.post(self.url, content=orjson.dumps(body), headers=headers)
        except httpx.HTTPError as exc:
            raise ModelError(f"{self.name}: request to {self.url} failed: {exc!r}") from None
        if resp.status_code >= 400:
            raise ModelError(f"{self.name}: HTTP {resp.status_code} from {self.url}",
                             raw=resp.text[:4000])
        try:
            data = orjson.loads(resp.content)
        except orjson.JSONDecodeError:
            raise ModelError(f"{self.name}: the response is not JSON", raw=resp.text[:4000]) from None
        return parse_completion(data)

    def request_body(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec],
        output_schema: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        """The JSON body sent for one call."""
        body: dict[str, Any] = {"model": self.name, "messages": [to_openai(m) for m in messages]}
        if tools:
            body["tools"] = [{"type": "function", "function": {
                "name": t.name, "description": t.description, "parameters": dict(t.parameters)}}
                for t in tools]
        if output_schema is not None:
            if self.response_format == "json_object":
                body["response_format"] = {"type": "json_object"}
            else:
                body["response_format"] = {"type": "json_schema", "json_schema": {
                    "name": "output", "schema": dict(output_schema), "strict": False}}
        return {**body, **self.extra}


def _httpx() -> Any:
    try:
        import httpx
    except ImportError:  # pragma: no cover - depends on the environment
        raise ModelError("OpenAIChatModel needs httpx: pip install 'durable-flow[openai]'") from None
    return httpx


def to_openai(message: Message) -> dict[str, Any]:
    """One message in the OpenAI wire format."""
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.name and message.role in ("user", "assistant", "system"):
        out["name"] = message.name
    if message.role == "tool":
        out["tool_call_id"] = message.tool_call_id
    if message.tool_calls:
        out["content"] = message.content or None
        out["tool_calls"] = [{"id": c.id, "type": "function", "function": {
            "name": c.name, "arguments": orjson.dumps(c.arguments).decode()}}
            for c in message.tool_calls]
    return out


def parse_completion(data: Any) -> ChatResponse:
    """Turn a ``/chat/completions`` response into a ``ChatResponse``."""
    raw = orjson.dumps(data).decode()[:4000]
    try:
        msg = data["choices"][0]["message"]
        calls = [_tool_call(c, raw) for c in msg.get("tool_calls") or []]
        message = Message(role="assistant", content=msg.get("content") or "", tool_calls=calls)
    except (KeyError, IndexError, TypeError, AttributeError):
        raise ModelError("the response has no choices[0].message", raw=raw) from None
    usage = data.get("usage") or {}
    return ChatResponse(message, Usage(int(usage.get("prompt_tokens") or 0),
                                       int(usage.get("completion_tokens") or 0)))


def _tool_call(call: Mapping[str, Any], raw: str) -> ToolCall:
    fn = call["function"]
    args = fn.get("arguments") or "{}"
    if isinstance(args, str):
        try:
            args = orjson.loads(args)
        except orjson.JSONDecodeError:
            raise ModelError(f"tool call {fn.get('name')!r} has arguments that are not JSON",
                             raw=raw) from None
    if not isinstance(args, dict):
        raise ModelError(f"tool call {fn.get('name')!r} has arguments that are not an object",
                         raw=raw)
    return ToolCall(id=str(call.get("id") or fn["name"]), name=fn["name"], arguments=args)
