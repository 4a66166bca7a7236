"""An OpenAI-compatible chat model over httpx: plain calls and server-sent event streams.

The adapter speaks the ``/chat/completions`` wire format used by OpenAI and
by most local servers (vLLM, llama.cpp, Ollama); it needs ``httpx``, the
optional extra ``durable-flow[openai]``, imported only when a request is
made. A streamed reply (``"stream": true``) is read event by event: text
deltas are yielded as they come, tool calls are assembled from their
fragments (by ``index``), and the last chunk carries the whole reply with its
usage. Failures are :class:`~durable_flow.ModelError`; timeouts, lost
connections (also in the middle of a stream), 408, 429 and 5xx are marked
``transient`` with the server's ``Retry-After``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, Literal

import orjson

from ..errors import ModelError
from ..model._messages import Message, ToolCall
from ._models import ChatChunk, ChatResponse, ToolSpec, Usage

if TYPE_CHECKING:
    import httpx

__all__ = ["OpenAIChatModel", "parse_completion", "retry_after", "to_openai"]

_TRANSIENT_STATUS = frozenset({408, 409, 425, 429})


class OpenAIChatModel:
    """A :class:`ChatModel` for any OpenAI-compatible ``/chat/completions`` endpoint.

    ``api_key`` defaults to the ``OPENAI_API_KEY`` environment variable (a
    local server may need none). Structured output is requested as
    ``response_format`` ``json_schema`` (or ``json_object`` for servers that
    only know that). ``extra`` is merged into every request body
    (``temperature``, ``seed``, ...). Agent nodes stream the reply (server-sent
    events) unless ``streaming=False``. HTTP and protocol failures raise
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
        streaming: bool = True,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.name = model
        self.url = base_url.rstrip("/") + "/chat/completions"
        self._api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.timeout = timeout
        self.headers = dict(headers or {})
        self.extra = dict(extra or {})
        self.response_format = response_format
        self.streaming = streaming
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
        try:
            async with httpx.AsyncClient(timeout=self.timeout, transport=self._transport) as client:
                resp = await client.post(self.url, content=orjson.dumps(body),
                                         headers=self._headers())
        except httpx.HTTPError as exc:
            raise self._failed(exc) from None
        if resp.status_code >= 400:
            raise self._status_error(resp, resp.text)
        try:
            data = orjson.loads(resp.content)
        except orjson.JSONDecodeError:
            raise ModelError(f"{self.name}: the response is not JSON", raw=resp.text[:4000]) from None
        return parse_completion(data)

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        output_schema: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[ChatChunk]:
        """POST a streamed chat completion; yield text deltas, then the assembled reply."""
        httpx = _httpx()
        body = {**self.request_body(messages, tools, output_schema), "stream": True}
        body.setdefault("stream_options", {"include_usage": True})
        reply = _StreamedReply(self.name)
        try:
            async with httpx.AsyncClient(timeout=self.timeout, transport=self._transport) as client, \
                    client.stream("POST", self.url, content=orjson.dumps(body),
                                  headers=self._headers()) as resp:
                if resp.status_code >= 400:
                    text = (await resp.aread()).decode("utf-8", "replace")
                    raise self._status_error(resp, text)
                async for line in resp.aiter_lines():
                    delta = reply.feed(line)
                    if delta:
                        yield ChatChunk(text=delta)
                    if reply.done:
                        break
        except httpx.HTTPError as exc:
            raise self._failed(exc) from None
        yield ChatChunk(response=reply.response())

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

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", **self.headers}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _failed(self, exc: Exception) -> ModelError:
        return ModelError(f"{self.name}: request to {self.url} failed: {exc!r}", transient=True)

    def _status_error(self, resp: httpx.Response, text: str) -> ModelError:
        status = resp.status_code
        return ModelError(f"{self.name}: HTTP {status} from {self.url}", raw=text[:4000],
                          transient=status >= 500 or status in _TRANSIENT_STATUS,
                          retry_after=retry_after(resp.headers.get("Retry-After")))


class _StreamedReply:
    """A streamed reply assembled from its server-sent events."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.usage = Usage()
        self.finished = False
        self.done = False

    def feed(self, line: str) -> str:
        """Read one line of the event stream; returns its text delta."""
        if not line.startswith("data:"):
            return ""  # blank separators, comments (": ping"), event names
        payload = line[5:].strip()
        if payload == "[DONE]":
            self.done = True
            return ""
        try:
            data = orjson.loads(payload)
        except orjson.JSONDecodeError:
            raise ModelError(f"{self.name}: a streamed event is not JSON", raw=payload[:4000]) from None
        if data.get("usage"):
            usage = data["usage"]
            self.usage = Usage(int(usage.get("prompt_tokens") or 0),
                               int(usage.get("completion_tokens") or 0))
        choices = data.get("choices") or []
        if not choices:
            return ""
        choice = choices[0]
        self.finished = self.finished or bool(choice.get("finish_reason"))
        delta = choice.get("delta") or {}
        for part in delta.get("tool_calls") or []:
            call = self.calls.setdefault(int(part.get("index", len(self.calls))),
                                         {"id": "", "name": "", "arguments": ""})
            fn = part.get("function") or {}
            call["id"] = part.get("id") or call["id"]
            call["name"] += fn.get("name") or ""
            call["arguments"] += fn.get("arguments") or ""
        text = delta.get("content") or ""
        if text:
            self.text.append(text)
        return str(text)

    def response(self) -> ChatResponse:
        """The whole reply; a stream cut before its end is a transient ``ModelError``."""
        if not (self.done or self.finished):
            raise ModelError(f"{self.name}: the stream ended before the reply did",
                             raw="".join(self.text)[:4000], transient=True)
        raw = orjson.dumps(list(self.calls.values())).decode()[:4000]
        calls = [_tool_call({"id": c["id"], "function": {"name": c["name"],
                                                          "arguments": c["arguments"]}}, raw)
                 for _, c in sorted(self.calls.items())]
        return ChatResponse(Message(role="assistant", content="".join(self.text), tool_calls=calls),
                            self.usage)


def retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (seconds or an HTTP date), or None."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


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
