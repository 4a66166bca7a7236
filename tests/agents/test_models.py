"""Chat models: ScriptedModel, the ChatModel protocol, and the OpenAI-compatible adapter."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from openaikit import serving
from pydantic import BaseModel

from durable_flow import (
    END,
    Blackboard,
    ChatModel,
    ChatResponse,
    Message,
    ModelError,
    OpenAIChatModel,
    RunStatus,
    Runtime,
    ToolCall,
    ToolSpec,
    Usage,
    WorkflowBuilder,
)
from durable_flow.testing import MemoryStore, ScriptedModel

# --- ScriptedModel ---------------------------------------------------------------------


async def test_scripted_model_plays_replies_in_order_and_records_calls() -> None:
    model = ScriptedModel(["one", Message.assistant("two")])
    tools = [ToolSpec("t", "a tool", {"type": "object"})]
    r1 = await model.complete([Message.user("hi there")], tools=tools)
    r2 = await model.complete([Message.user("again")], output_schema={"type": "object"})
    assert (r1.message.content, r2.message.content) == ("one", "two")
    assert r1.usage == Usage(input_tokens=2, output_tokens=1) and r1.usage.total_tokens == 3
    assert model.calls[0].messages == [Message.user("hi there")]
    assert model.calls[0].tools == tools and model.calls[0].output_schema is None
    assert model.calls[1].output_schema == {"type": "object"}


async def test_scripted_model_running_out_of_replies_is_a_model_error() -> None:
    model = ScriptedModel(["only"])
    await model.complete([])
    with pytest.raises(ModelError, match="no reply left"):
        await model.complete([])


async def test_scripted_model_answers_from_a_function_sync_or_async() -> None:
    async def later(messages: list[Message]) -> str:
        return f"async {len(messages)}"

    sync = ScriptedModel(lambda msgs: msgs[-1].content.upper())
    assert (await sync.complete([Message.user("shout")])).message.content == "SHOUT"
    assert (await ScriptedModel(later).complete([Message.user("x")])).message.content == "async 1"


async def test_scripted_model_rejects_a_non_assistant_reply() -> None:
    with pytest.raises(ModelError, match="assistant"):
        await ScriptedModel([Message.user("wrong role")]).complete([])


def test_models_satisfy_the_chat_model_protocol() -> None:
    assert isinstance(ScriptedModel([]), ChatModel)
    assert isinstance(OpenAIChatModel("m", base_url="http://127.0.0.1:1"), ChatModel)
    assert not isinstance(object(), ChatModel)


# --- a stub OpenAI-compatible server ---------------------------------------------------


class Stub:
    """Canned responses, and the requests the server received."""

    def __init__(self) -> None:
        self.responses: list[tuple[int, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.url = ""


@pytest.fixture
def stub() -> Iterator[Stub]:
    state = Stub()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            state.requests.append({"path": self.path, "headers": dict(self.headers),
                                   "body": json.loads(self.rfile.read(length))})
            status, body = state.responses.pop(0)
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    with serving(Handler) as url:
        state.url = url
        yield state


def completion(message: dict[str, Any], prompt: int = 11, completion: int = 4) -> dict[str, Any]:
    return {"id": "x", "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", **message},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion}}


async def test_openai_adapter_sends_messages_and_parses_text_and_usage(stub: Stub) -> None:
    stub.responses.append((200, completion({"content": "Paris."})))
    model = OpenAIChatModel("gpt-test", base_url=stub.url + "/", api_key="sk-test",
                            extra={"temperature": 0})
    out = await model.complete([Message.system("be brief"), Message.user("Capital?", name="u1")])
    assert out == ChatResponse(Message.assistant("Paris."), Usage(11, 4))
    [req] = stub.requests
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == "Bearer sk-test"
    assert req["body"] == {"model": "gpt-test", "temperature": 0, "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "Capital?", "name": "u1"}]}


async def test_openai_adapter_sends_tools_and_tool_history_and_parses_tool_calls(
        stub: Stub) -> None:
    stub.responses.append((200, completion({"content": None, "tool_calls": [
        {"id": "call_9", "type": "function",
         "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}]})))
    model = OpenAIChatModel("m", base_url=stub.url, api_key="")
    history = [Message.user("weather?"),
               Message.assistant(tool_calls=[ToolCall(id="c1", name="weather",
                                                       arguments={"city": "Bergen"})]),
               Message.tool("rain", tool_call_id="c1", name="weather")]
    tool = ToolSpec("weather", "Forecast.", {"type": "object",
                                              "properties": {"city": {"type": "string"}}})
    out = await model.complete(history, tools=[tool])
    assert out.message.tool_calls == [ToolCall(id="call_9", name="weather",
                                               arguments={"city": "Oslo"})]
    body = stub.requests[0]["body"]
    assert "Authorization" not in stub.requests[0]["headers"]
    assert body["tools"] == [{"type": "function", "function": {
        "name": "weather", "description": "Forecast.", "parameters": tool.parameters}}]
    assert body["messages"][1] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function",
         "function": {"name": "weather", "arguments": '{"city":"Bergen"}'}}]}
    assert body["messages"][2] == {"role": "tool", "content": "rain", "tool_call_id": "c1"}


async def test_openai_adapter_asks_for_structured_output(stub: Stub) -> None:
    stub.responses += [(200, completion({"content": "{}"}))] * 2
    schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
    await OpenAIChatModel("m", base_url=stub.url).complete([], output_schema=schema)
    await OpenAIChatModel("m", base_url=stub.url, response_format="json_object").complete(
        [], output_schema=schema)
    assert stub.requests[0]["body"]["response_format"] == {
        "type": "json_schema", "json_schema": {"name": "output", "schema": schema,
                                               "strict": False}}
    assert stub.requests[1]["body"]["response_format"] == {"type": "json_object"}


@pytest.mark.parametrize(("status", "body", "match"), [
    (500, {"error": {"message": "overloaded"}}, "HTTP 500.*overloaded"),
    (200, "this is not json", "not JSON.*this is not json"),
    (200, {"choices": []}, "no choices"),
    (200, completion({"tool_calls": [{"id": "1", "function": {"name": "f",
                                                             "arguments": "{broken"}}]}),
     "not JSON"),
])
async def test_openai_adapter_failures_are_model_errors_with_the_raw_body(
        stub: Stub, status: int, body: Any, match: str) -> None:
    stub.responses.append((status, body))
    with pytest.raises(ModelError, match=match) as info:
        await OpenAIChatModel("m", base_url=stub.url).complete([Message.user("hi")])
    assert info.value.raw


async def test_openai_adapter_unreachable_server_is_a_model_error() -> None:
    model = OpenAIChatModel("m", base_url="http://127.0.0.1:9", timeout=2)
    with pytest.raises(ModelError, match=r"request to http://127\.0\.0\.1:9/chat/completions failed"):
        await model.complete([Message.user("hi")])


class Sentiment(BaseModel):
    mood: str


class Feedback(Blackboard):
    question: str = ""
    mood: str = ""
    result: Sentiment | None = None


async def test_an_agent_runs_on_the_openai_adapter(stub: Stub) -> None:
    stub.responses.append((200, completion({"content": '{"mood": "happy"}'}, 30, 5)))
    b = WorkflowBuilder("openai", state=Feedback)
    b.add_agent("judge", OpenAIChatModel("gpt-test", base_url=stub.url, streaming=False),
                instructions="Judge the mood.", output=Sentiment)
    b.set_entry("judge")
    b.add_edge("judge", END)
    async with Runtime(MemoryStore()) as rt:
        r = await rt.run(b.build(), {"question": "I love it"})
    assert r.status is RunStatus.COMPLETED, r.error
    assert r.state.mood == "happy" and r.state.result == Sentiment(mood="happy")
    assert r.state.messages[-1].metadata == {
        "model": "gpt-test", "usage": {"input_tokens": 30, "output_tokens": 5}}
    body = stub.requests[0]["body"]
    assert body["messages"] == [{"role": "system", "content": "Judge the mood."},
                                {"role": "user", "content": "I love it"}]
    assert body["response_format"]["json_schema"]["schema"] == Sentiment.model_json_schema()
