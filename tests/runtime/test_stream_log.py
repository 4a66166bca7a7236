"""The durable stream log through the runtime: what agents streamed, read back after any
offset (a reconnecting client misses nothing), followed live, cut attempts marked; a run that
streams nothing writes nothing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from durable_flow import (
    END,
    Blackboard,
    ChatChunk,
    ChatResponse,
    MemoryStore,
    Message,
    ModelError,
    RunNotFoundError,
    RunStatus,
    Runtime,
    ToolCall,
    WorkflowBuilder,
)
from durable_flow.testing import ScriptedModel


class Trip(Blackboard):
    question: str = ""
    answer: str = ""


def weather(city: str) -> str:
    """The forecast."""
    return f"sunny in {city}"


def workflow(model: Any, **options: Any) -> Any:
    b = WorkflowBuilder("trip", state=Trip)
    b.add_agent("planner", model, instructions="Plan.", **options)
    b.set_entry("planner")
    b.add_edge("planner", END)
    return b.build()


class Slow:
    """Streams its words with a pause between them; the first attempt may break midway."""

    name = "slow"

    def __init__(self, words: list[str], *, pause: float = 0.0, break_after: int | None = None):
        self.words, self.pause, self.break_after = words, pause, break_after
        self.calls = 0

    async def complete(self, messages: Sequence[Message], **_: Any) -> ChatResponse:
        raise AssertionError("streamed models are not asked to complete")

    async def stream(self, messages: Sequence[Message], **_: Any) -> AsyncIterator[ChatChunk]:
        self.calls += 1
        for i, word in enumerate(self.words):
            if self.calls == 1 and i == self.break_after:
                raise ModelError("connection lost", transient=True, retry_after=0)
            await asyncio.sleep(self.pause)
            yield ChatChunk(text=word)
        yield ChatChunk(response=ChatResponse(Message.assistant("".join(self.words))))


async def test_what_an_agent_streamed_is_read_back_in_order_after_any_offset(rt: Runtime) -> None:
    tool_call = Message.assistant(tool_calls=[
        ToolCall(id="c1", name="weather", arguments={"city": "Oslo"})])
    model = ScriptedModel([tool_call, "Pack sunglasses now"], streaming=True)
    r = await rt.run(workflow(model, tools=[weather]), {"question": "Oslo?"})
    assert r.status is RunStatus.COMPLETED, r.error
    log = await rt.read_stream(r.run_id)
    assert [e.seq for e in log] == [1, 2, 3, 4, 5]
    assert [(e.kind, e.node) for e in log] == [("tool_started", "planner"),
                                              ("tool_finished", "planner")] + \
        [("model_delta", "planner")] * 3
    assert "".join(e.data["text"] for e in log if e.kind == "model_delta") == r.state.answer
    assert log[1].data["result"] == "sunny in Oslo" and not any(e.cut for e in log)
    assert [e.seq for e in await rt.read_stream(r.run_id, after=3)] == [4, 5]
    assert await rt.read_stream(r.run_id, after=5) == []


async def test_a_run_that_streams_nothing_writes_nothing(rt: Runtime, monkeypatch: Any) -> None:
    appended: list[Any] = []
    original = rt.store.append_stream

    async def spy(run_id: str, entries: Any) -> int:
        appended.append(entries)
        return int(await original(run_id, entries))

    monkeypatch.setattr(rt.store, "append_stream", spy)
    r = await rt.run(workflow(ScriptedModel(["plain answer"])), {"question": "?"})
    assert r.status is RunStatus.COMPLETED
    assert appended == [] and await rt.read_stream(r.run_id) == []


async def test_an_attempt_cut_off_is_marked_and_the_retry_counts(rt: Runtime) -> None:
    model = Slow(["one ", "two ", "three"], break_after=2)
    r = await rt.run(workflow(model), {"question": "count"})
    assert r.status is RunStatus.COMPLETED and r.state.answer == "one two three"
    log = await rt.read_stream(r.run_id)
    assert [(e.data["text"], e.data["attempt"], e.cut) for e in log] == [
        ("one ", 1, True), ("two ", 1, True),
        ("one ", 2, False), ("two ", 2, False), ("three", 2, False)]


async def test_following_a_run_live_and_reconnecting_loses_nothing(rt: Runtime) -> None:
    words = [f"w{i} " for i in range(12)]
    wf = workflow(Slow(words, pause=0.02))
    run = asyncio.create_task(rt.run(wf, {"question": "go"}, run_id="live-run"))
    while await rt.store.get_run("live-run") is None:
        await asyncio.sleep(0.01)
    first: list[int] = []
    async for entry in rt.follow_stream("live-run", poll=0.01):
        first.append(entry.seq)
        if len(first) == 4:
            break  # the client drops
    rest = [e.seq async for e in rt.follow_stream("live-run", after=first[-1], poll=0.01)]
    result = await run
    assert result.status is RunStatus.COMPLETED
    assert first + rest == list(range(1, 13))
    assert [e.data["text"] for e in await rt.read_stream("live-run")] == words


async def test_reading_the_stream_of_an_unknown_run_is_an_error(rt: Runtime) -> None:
    with pytest.raises(RunNotFoundError):
        await rt.read_stream("nope")
    with pytest.raises(RunNotFoundError):
        async for _ in rt.follow_stream("nope"):
            pass


class SlowStreamAppends(MemoryStore):
    """Each append to a stream log takes a while (a busy database)."""

    async def append_stream(self, run_id: str, entries: Any) -> int:
        await asyncio.sleep(0.2)
        return await super().append_stream(run_id, entries)


async def test_a_superstep_is_committed_after_the_stream_batch_a_flusher_is_appending() -> None:
    b = WorkflowBuilder("talk", state=Trip)

    @b.node()
    async def talk(state: Trip, ctx: Any) -> dict[str, Any]:
        ctx.publish("model_delta", text="hello")
        await asyncio.sleep(0.1)  # the flusher (every 0.05 s) took the entry: it is appending
        return {"answer": "hello"}

    b.set_entry("talk").add_edge("talk", END)
    async with Runtime(SlowStreamAppends()) as rt:
        run = await rt.run(b.build(), {})
        assert [e.data["text"] for e in await rt.read_stream(run.run_id)] == ["hello"]
