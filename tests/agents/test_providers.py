"""PydanticAIModel and LangChainModel, tested with those libraries' own test models:
text, tools, structured output and streaming, through agent nodes.

pydantic-ai and LangChain are imported by the tests that use them (fixtures
``pai`` and ``lc``), not when the file is collected: importing both costs
about 1.3 s of CPU, which every test process would pay at collection.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest
from pydantic import BaseModel

from durable_flow import (
    END,
    Blackboard,
    LangChainModel,
    Message,
    ModelError,
    PydanticAIModel,
    RunStatus,
    Runtime,
    StreamingChatModel,
    WorkflowBuilder,
)
from durable_flow.testing import MemoryStore

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage, ModelResponse
    from pydantic_ai.models.function import AgentInfo


@pytest.fixture(scope="module")
def pai() -> SimpleNamespace:
    """pydantic-ai's test models and message parts."""
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import DeltaToolCall, FunctionModel
    from pydantic_ai.models.test import TestModel

    return SimpleNamespace(ModelResponse=ModelResponse, TextPart=TextPart,
                           ToolCallPart=ToolCallPart, DeltaToolCall=DeltaToolCall,
                           FunctionModel=FunctionModel, TestModel=TestModel)


@pytest.fixture(scope="module")
def lc() -> SimpleNamespace:
    """LangChain's generic fake chat model, one that records its tools, and AIMessage."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    class ToolFake(GenericFakeChatModel):
        """The generic fake, recording the tools it is bound to."""

        bound: list[Any] = []

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            self.bound.append(tools)
            return self

    return SimpleNamespace(GenericFakeChatModel=GenericFakeChatModel, AIMessage=AIMessage,
                           ToolFake=ToolFake)


class Trip(Blackboard):
    question: str = ""
    answer: str = ""


class Mood(BaseModel):
    mood: str


class Judged(Blackboard):
    question: str = ""
    mood: str = ""
    result: Mood | None = None


def weather(city: str) -> str:
    """The forecast for a city."""
    return f"sunny in {city}"


def one(model: Any, state: type[Blackboard] = Trip, **options: Any) -> Any:
    b = WorkflowBuilder("p", state=state)
    b.add_agent("agent", model, instructions="Be brief.", **options)
    b.set_entry("agent")
    b.add_edge("agent", END)
    return b.build()


async def run_events(wf: Any, values: dict[str, Any]) -> tuple[Any, list[str]]:
    async with Runtime(MemoryStore()) as rt:
        events = [e async for e in rt.stream(wf, values)]
    deltas = [e.data["text"] for e in events if e.kind == "model_delta"]
    return events[-1].result, deltas


# --- pydantic-ai ------------------------------------------------------------------------------


async def test_pydantic_ai_test_model_calls_the_tool_then_answers_streamed(pai: SimpleNamespace) -> None:
    model = PydanticAIModel(pai.TestModel())
    assert isinstance(model, StreamingChatModel)
    result, deltas = await run_events(one(model, tools=[weather]), {"question": "Oslo?"})
    assert result.status is RunStatus.COMPLETED, result.error
    tool_results = [m for m in result.state.messages if m.role == "assistant"]
    assert result.state.answer.startswith('{"weather":"sunny in a"}')
    assert "".join(deltas) == result.state.answer and len(deltas) > 1
    assert tool_results[-1].metadata["usage"]["input_tokens"] > 0


async def test_pydantic_ai_function_model_sees_the_conversation_and_tools(pai: SimpleNamespace) -> None:
    seen: list[tuple[list[ModelMessage], AgentInfo]] = []

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append((messages, info))
        if len(seen) == 1:
            return pai.ModelResponse(parts=[pai.ToolCallPart("weather", {"city": "Bergen"}, "c7")])
        return pai.ModelResponse(parts=[pai.TextPart("take an umbrella")])

    wf = one(PydanticAIModel(pai.FunctionModel(reply), streaming=False), tools=[weather])
    async with Runtime(MemoryStore()) as rt:
        r = await rt.run(wf, {"question": "Bergen?"})
    assert r.status is RunStatus.COMPLETED, r.error
    assert r.state.answer == "take an umbrella"
    assert [t.name for t in seen[0][1].function_tools] == ["weather"]
    last = seen[1][0][-1]
    assert last.parts[-1].content == "sunny in Bergen" and last.parts[-1].tool_call_id == "c7"


async def test_pydantic_ai_structured_output_and_streamed_tool_calls(pai: SimpleNamespace) -> None:
    async def stream(messages: list[ModelMessage], info: AgentInfo) -> Any:
        assert [t.name for t in info.output_tools] == ["final_result"]
        yield {0: pai.DeltaToolCall(name="final_result", json_args='{"mo', tool_call_id="o1")}
        yield {0: pai.DeltaToolCall(json_args='od": "calm"}')}

    wf = one(PydanticAIModel(pai.FunctionModel(stream_function=stream)), Judged, output=Mood)
    result, _ = await run_events(wf, {"question": "how?"})
    assert result.status is RunStatus.COMPLETED, result.error
    assert result.state.mood == "calm" and result.state.result == Mood(mood="calm")


async def test_pydantic_ai_streamed_text_keeps_its_first_piece(pai: SimpleNamespace) -> None:
    async def stream(messages: list[ModelMessage], info: AgentInfo) -> Any:
        for piece in ("first ", "second ", "third"):
            yield piece  # pydantic-ai sends the first inside the part's start event

    def whole(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise AssertionError("the agent streams")

    wf = one(PydanticAIModel(pai.FunctionModel(whole, stream_function=stream)), output_key="answer")
    async with Runtime(MemoryStore()) as rt:
        events = [e async for e in rt.stream(wf, {"question": "?"}, run_id="s")]
        logged = [e.data["text"] for e in await rt.read_stream("s") if e.kind == "model_delta"]
    deltas = [e.data["text"] for e in events if e.kind == "model_delta"]
    assert events[-1].result.state.answer == "first second third"
    assert deltas == logged == ["first ", "second ", "third"]


async def test_pydantic_ai_errors_become_model_errors(pai: SimpleNamespace) -> None:
    def broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise RuntimeError("boom")

    with pytest.raises(ModelError, match="RuntimeError: boom"):
        await PydanticAIModel(pai.FunctionModel(broken)).complete([Message.user("hi")])


# --- LangChain ---------------------------------------------------------------------------------


async def test_langchain_fake_model_streams_text(lc: SimpleNamespace) -> None:
    model = LangChainModel(lc.GenericFakeChatModel(messages=iter([lc.AIMessage("hello there world")])))
    result, deltas = await run_events(one(model), {"question": "hi"})
    assert result.status is RunStatus.COMPLETED, result.error
    assert result.state.answer == "hello there world"
    assert deltas == ["hello", " ", "there", " ", "world"]


async def test_langchain_tools_and_structured_output(lc: SimpleNamespace) -> None:
    fake = lc.ToolFake(bound=[], messages=iter([
        lc.AIMessage("", tool_calls=[{"name": "weather", "args": {"city": "Oslo"}, "id": "c1"}]),
        lc.AIMessage("", tool_calls=[{"name": "final_result", "args": {"mood": "sunny"}, "id": "o"}]),
    ]))
    # the generic fake streams text only, so this reply comes whole
    wf = one(LangChainModel(fake, streaming=False), Judged, output=Mood, tools=[weather])
    async with Runtime(MemoryStore()) as rt:
        r = await rt.run(wf, {"question": "Oslo?"})
    assert r.status is RunStatus.COMPLETED, r.error
    assert r.state.mood == "sunny"
    names = [t["function"]["name"] for t in fake.bound[0]]
    assert names == ["weather", "final_result"]
    assert fake.bound[1] == fake.bound[0]  # the same tools on the second round


async def test_langchain_calls_without_ids_each_run_once_with_their_own_result(lc: SimpleNamespace) -> None:
    ran: list[str] = []

    def visit(city: str) -> str:
        """Visit a city."""
        ran.append(city)
        return f"visited {city}"

    idless = [{"name": "visit", "args": {"city": c}, "id": None, "type": "tool_call"}
              for c in ("Oslo", "Bergen", "Tromso")]
    fake = lc.ToolFake(bound=[], messages=iter([lc.AIMessage("", tool_calls=idless),
                                             lc.AIMessage("all visited")]))
    wf = one(LangChainModel(fake, streaming=False), tools=[visit])
    async with Runtime(MemoryStore()) as rt:
        r = await rt.run(wf, {"question": "go"})
        history = (await rt.get_state(r.run_id)).node_histories["agent"]
    assert r.status is RunStatus.COMPLETED, r.error
    assert ran == ["Oslo", "Bergen", "Tromso"]
    results = [(m.tool_call_id, m.content) for m in history if m.role == "tool"]
    assert results == [("visit", "visited Oslo"), ("visit#2", "visited Bergen"),
                       ("visit#3", "visited Tromso")]


async def test_langchain_without_bind_tools_is_a_model_error(lc: SimpleNamespace) -> None:
    model = LangChainModel(lc.GenericFakeChatModel(messages=iter([lc.AIMessage("x")])))
    with pytest.raises(ModelError, match="cannot bind tools"):
        await model.complete([Message.user("hi")], output_schema={"type": "object"})
