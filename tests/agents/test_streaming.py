"""Streaming agents against a local OpenAI-compatible server: deltas, tool calls and structured
output assembled from them, events through Runtime.stream, transient errors retried (429 with
Retry-After, a stream cut off in the middle), others not."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from openaikit import Reply, Server, serve, text_events, tool_events
from pydantic import BaseModel

from durable_flow import (
    END,
    Blackboard,
    ChatChunk,
    Message,
    ModelError,
    OpenAIChatModel,
    RunStatus,
    Runtime,
    StreamingChatModel,
    ToolCall,
    ToolSpec,
    Usage,
    WorkflowBuilder,
)
from durable_flow.testing import MemoryStore, ScriptedModel


@pytest.fixture
def server() -> Iterator[Server]:
    yield from serve()


async def collect(model: OpenAIChatModel, messages: list[Message], **kw: Any) -> list[ChatChunk]:
    return [chunk async for chunk in model.stream(messages, **kw)]


async def test_the_adapter_streams_text_deltas_then_the_whole_reply(server: Server) -> None:
    server.replies.append(Reply(events=text_events("Par", "is", ".", usage=(12, 3))))
    model = OpenAIChatModel("gpt-test", base_url=server.url, api_key="k")
    assert isinstance(model, StreamingChatModel)
    chunks = await collect(model, [Message.user("Capital?")])
    assert [c.text for c in chunks[:-1]] == ["Par", "is", "."]
    assert chunks[-1].response is not None
    assert chunks[-1].response.message == Message.assistant("Paris.")
    assert chunks[-1].response.usage == Usage(12, 3)
    body = server.requests[0]["body"]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


async def test_tool_calls_are_assembled_from_their_fragments(server: Server) -> None:
    server.replies.append(Reply(events=tool_events("call_1", "weather", '{"ci', 'ty": "Os', 'lo"}')))
    tool = ToolSpec("weather", "Forecast.", {"type": "object"})
    chunks = await collect(OpenAIChatModel("m", base_url=server.url), [Message.user("w?")],
                           tools=[tool])
    assert [c.text for c in chunks] == [""]  # no text, only the assembled reply
    assert chunks[-1].response is not None
    assert chunks[-1].response.message.tool_calls == [
        ToolCall(id="call_1", name="weather", arguments={"city": "Oslo"})]


async def test_a_stream_cut_in_the_middle_is_a_transient_model_error(server: Server) -> None:
    server.replies.append(Reply(events=text_events("one", " two", " three"), cut_after=2))
    with pytest.raises(ModelError, match="stream ended before the reply") as info:
        await collect(OpenAIChatModel("m", base_url=server.url), [Message.user("count")])
    assert info.value.transient


@pytest.mark.parametrize(("status", "transient"), [(429, True), (503, True), (400, False),
                                                   (401, False)])
async def test_http_errors_say_whether_they_are_transient(server: Server, status: int,
                                                          transient: bool) -> None:
    server.replies.append(Reply(status=status, body={"error": "x"}, headers={"Retry-After": "7"}))
    with pytest.raises(ModelError, match=f"HTTP {status}") as info:
        await collect(OpenAIChatModel("m", base_url=server.url), [Message.user("hi")])
    assert info.value.transient is transient and info.value.retry_after == 7.0


# --- agents streaming through the runtime ---------------------------------------------------


class Trip(Blackboard):
    question: str = ""
    answer: str = ""


def weather(city: str) -> str:
    """The forecast for a city."""
    return f"sunny in {city}"


def trip_workflow(model: Any, **options: Any) -> Any:
    b = WorkflowBuilder("trip", state=Trip)
    b.add_agent("planner", model, instructions="Plan.", tools=[weather], **options)
    b.set_entry("planner")
    b.add_edge("planner", END)
    return b.build()


async def test_runtime_stream_yields_deltas_and_tool_events_with_the_node(server: Server) -> None:
    server.replies += [Reply(events=tool_events("c1", "weather", '{"city":', ' "Oslo"}')),
                       Reply(events=text_events("Pack ", "sunglasses."))]
    wf = trip_workflow(OpenAIChatModel("gpt-test", base_url=server.url))
    async with Runtime(MemoryStore()) as rt:
        events = [e async for e in rt.stream(wf, {"question": "Oslo trip?"})]
    mine = [(e.kind, e.node, e.data) for e in events
            if e.kind in ("model_delta", "tool_started", "tool_finished")]
    assert mine == [
        ("tool_started", "planner", {"tool": "weather", "call_id": "c1",
                                     "arguments": {"city": "Oslo"}}),
        ("tool_finished", "planner", {"tool": "weather", "call_id": "c1",
                                      "result": "sunny in Oslo"}),
        ("model_delta", "planner", {"text": "Pack ", "round": "1", "attempt": 1}),
        ("model_delta", "planner", {"text": "sunglasses.", "round": "1", "attempt": 1}),
    ]
    result = events[-1].result
    assert result is not None and result.status is RunStatus.COMPLETED
    assert result.state.answer == "Pack sunglasses."
    tool_result = server.requests[1]["body"]["messages"][-1]
    assert tool_result == {"role": "tool", "content": "sunny in Oslo", "tool_call_id": "c1"}


class Mood(BaseModel):
    mood: str
    score: int


class Judged(Blackboard):
    question: str = ""
    mood: str = ""
    score: int = 0
    result: Mood | None = None


async def test_structured_output_is_assembled_from_streamed_deltas(server: Server) -> None:
    server.replies.append(Reply(events=text_events('{"mo', 'od": "calm", ', '"score": 4}')))
    b = WorkflowBuilder("judge", state=Judged)
    b.add_agent("judge", OpenAIChatModel("m", base_url=server.url), instructions="Judge.",
                output=Mood)
    b.set_entry("judge")
    b.add_edge("judge", END)
    async with Runtime(MemoryStore()) as rt:
        r = await rt.run(b.build(), {"question": "how?"})
    assert r.status is RunStatus.COMPLETED, r.error
    assert (r.state.mood, r.state.score) == ("calm", 4)
    assert server.requests[0]["body"]["response_format"]["json_schema"]["schema"] == \
        Mood.model_json_schema()


async def test_a_429_is_retried_after_its_retry_after(server: Server) -> None:
    server.replies += [Reply(status=429, body={"error": "slow down"}, headers={"Retry-After": "1"}),
                       Reply(events=text_events("done"))]
    async with Runtime(MemoryStore()) as rt:
        started = time.monotonic()
        r = await rt.run(trip_workflow(OpenAIChatModel("m", base_url=server.url)), {"question": "?"})
        waited = time.monotonic() - started
    assert r.status is RunStatus.COMPLETED, r.error
    assert r.state.answer == "done" and len(server.requests) == 2
    assert waited >= 1.0


async def test_a_stream_cut_off_is_asked_again_and_its_deltas_say_which_attempt(
        server: Server) -> None:
    server.replies += [Reply(events=text_events("Hel", "lo", " world"), cut_after=2),
                       Reply(events=text_events("Hello", " world"))]
    wf = trip_workflow(OpenAIChatModel("m", base_url=server.url))
    async with Runtime(MemoryStore()) as rt:
        events = [e async for e in rt.stream(wf, {"question": "?"})]
    deltas = [(e.data["attempt"], e.data["text"]) for e in events if e.kind == "model_delta"]
    assert deltas == [(1, "Hel"), (2, "Hello"), (2, " world")]
    result = events[-1].result
    assert result is not None and result.state.answer == "Hello world"


async def test_an_error_that_is_not_transient_is_not_retried(server: Server) -> None:
    server.replies.append(Reply(status=400, body={"error": "bad request"}))
    async with Runtime(MemoryStore()) as rt:
        r = await rt.run(trip_workflow(OpenAIChatModel("m", base_url=server.url)), {"question": "?"})
    assert r.status is RunStatus.FAILED and r.error is not None
    assert "HTTP 400" in r.error.message and len(server.requests) == 1


async def test_transient_errors_stop_after_model_retries(server: Server) -> None:
    server.replies += [Reply(status=503, body={}, headers={"Retry-After": "0"})] * 2
    async with Runtime(MemoryStore()) as rt:
        r = await rt.run(trip_workflow(OpenAIChatModel("m", base_url=server.url), model_retries=1),
                         {"question": "?"})
    assert r.status is RunStatus.FAILED and r.error is not None and "HTTP 503" in r.error.message
    assert len(server.requests) == 2


async def test_a_scripted_model_can_stream_word_by_word() -> None:
    model = ScriptedModel(["three little words"], streaming=True)
    async with Runtime(MemoryStore()) as rt:
        events = [e async for e in rt.stream(trip_workflow(model), {"question": "?"})]
    assert [e.data["text"] for e in events if e.kind == "model_delta"] == \
        ["three", " little", " words"]
    assert events[-1].result is not None and events[-1].result.state.answer == "three little words"
