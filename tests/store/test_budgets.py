"""Budgets on every store: usage summed per run from every model call and stored with it;
a model call about to start past the budget asks a person first (a request of kind budget);
raising the limit continues, stop fails the run with BudgetExceededError."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from genai_prices import Usage as Tokens
from genai_prices import calc_price

from durable_flow import (
    END,
    Blackboard,
    Budget,
    BudgetDecision,
    InvalidInputError,
    LeaseLostError,
    Message,
    RunStatus,
    Runtime,
    RunUsage,
    ToolCall,
    WorkflowBuilder,
    WorkflowValidationError,
)
from durable_flow.store._protocols import CheckpointStore
from durable_flow.testing import ScriptedModel

ran: list[str] = []


class Chat(Blackboard):
    question: str = ""
    answer: str = ""


def lookup(city: str) -> str:
    """Forecast for a city."""
    ran.append(city)
    return f"sunny in {city}"


def weather_agent(model: ScriptedModel, budget: Budget | None = None) -> Any:
    b = WorkflowBuilder("weather", Chat, budget=budget)
    b.add_agent("agent", model=model, instructions="Answer about the weather.", tools=[lookup])
    b.add_edge("agent", END)
    b.set_entry("agent")
    return b.build()


def two_calls(name: str = "scripted") -> ScriptedModel:
    """One call asks for the tool (2 words out), the next answers (3 words)."""
    return ScriptedModel([
        Message.assistant("checking now", tool_calls=[
            ToolCall(id="c1", name="lookup", arguments={"city": "Oslo"})]),
        "It is sunny."], name=name)


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ran.clear()


async def test_usage_is_summed_from_every_model_call_and_stored_with_the_run(
        store: CheckpointStore) -> None:
    model = two_calls("gpt-4o")
    async with Runtime(store) as rt:
        result = await rt.run(weather_agent(model), {"question": "Weather in Oslo?"})
        assert result.status is RunStatus.COMPLETED
        info = await rt.get_run(result.run_id)
        listed = [r for r in await rt.list_runs() if r.run_id == result.run_id]
        record = await store.get_run(result.run_id)
    words_in = sum(len(m.content.split()) for call in model.calls for m in call.messages)
    assert info.usage.input_tokens == words_in
    assert info.usage.output_tokens == 2 + 3
    expected = sum(float(calc_price(Tokens(input_tokens=len_in, output_tokens=out),
                                    model_ref="gpt-4o").total_price)
                   for len_in, out in [(sum(len(m.content.split()) for m in c.messages), o)
                                       for c, o in zip(model.calls, (2, 3), strict=True)])
    assert info.usage.usd == pytest.approx(expected) and info.usage.usd > 0
    assert info.budget is None
    assert record is not None and record.usage == info.usage == listed[0].usage


async def test_an_unknown_model_adds_tokens_but_no_dollars(store: CheckpointStore) -> None:
    async with Runtime(store) as rt:
        result = await rt.run(weather_agent(two_calls("no-such-model")), {"question": "Oslo?"})
        usage = (await rt.get_run(result.run_id)).usage
    assert usage.total_tokens > 0 and usage.usd == 0.0


async def test_a_call_past_the_budget_asks_and_raising_the_limit_continues(
        store: CheckpointStore) -> None:
    model = two_calls()
    async with Runtime(store) as rt:
        first = await rt.run(weather_agent(model), {"question": "Weather in Oslo?"},
                             budget=Budget(max_tokens=5))
        assert first.status is RunStatus.WAITING
        assert len(model.calls) == 1 and ran == ["Oslo"]  # the tool ran; call two did not start
        (asked,) = first.pending_requests
        used = (await rt.get_run(first.run_id)).usage
        assert asked.payload == {"kind": "budget", "used": used.to_dict(),
                                 "limit": {"max_tokens": 5, "max_usd": None}}
        assert asked.response_schema["title"] == "BudgetDecision"
        assert [p.id for p in await rt.pending_requests()] == [asked.id]
        done = await rt.resume(weather_agent(model), first.run_id,
                               responses={asked.id: {"raise_to_tokens": 1000}})
        assert done.status is RunStatus.COMPLETED and done.state.answer == "It is sunny."
        info = await rt.get_run(first.run_id)
    assert len(model.calls) == 2 and ran == ["Oslo"]  # neither call nor tool made twice
    assert info.budget == Budget(max_tokens=1000)
    assert info.usage.output_tokens == 5


async def test_stop_fails_the_run_with_budget_exceeded(store: CheckpointStore) -> None:
    model = two_calls()
    async with Runtime(store) as rt:
        first = await rt.run(weather_agent(model), {"question": "Oslo?"},
                             budget=Budget(max_tokens=1))
        (asked,) = first.pending_requests
        info = await rt.respond(first.run_id, {asked.id: BudgetDecision(stop=True).model_dump()})
        assert info.status is RunStatus.QUEUED
        stopped = await rt.resume(weather_agent(model), first.run_id)
    assert stopped.status is RunStatus.FAILED
    assert stopped.error is not None and stopped.error.type == "BudgetExceededError"
    assert "stopped at its budget" in stopped.error.message
    assert len(model.calls) == 1  # no call after stop, and the node was not retried


async def test_a_budget_reached_at_the_start_asks_before_the_first_call(
        store: CheckpointStore) -> None:
    model = two_calls()
    flow = weather_agent(model, budget=Budget(max_usd=0.0))  # the workflow's default
    async with Runtime(store) as rt:
        first = await rt.run(flow, {"question": "Oslo?"})
        assert first.status is RunStatus.WAITING and model.calls == []
        assert first.pending_requests[0].payload["limit"] == {"max_tokens": None, "max_usd": 0.0}
        # an answer that raises nothing lets this one call go ahead; the next asks again
        again = await rt.resume(flow, first.run_id,
                                responses={first.pending_requests[0].id: {}})
        assert again.status is RunStatus.WAITING and len(model.calls) == 1
        assert again.pending_requests[0].id != first.pending_requests[0].id
        queued = await rt.submit(flow, {"question": "x"}, budget=Budget(max_tokens=7))
    assert queued.budget == Budget(max_tokens=7) and queued.usage == RunUsage()


async def test_usage_and_budget_writes_need_the_lease(store: CheckpointStore) -> None:
    model = two_calls()
    async with Runtime(store) as rt:
        first = await rt.run(weather_agent(model), {"question": "Oslo?"},
                             budget=Budget(max_tokens=1))
        record = await store.get_run(first.run_id)
        assert record is not None
        from durable_flow.store._protocols import Lease
        stale = Lease(first.run_id, "someone", record.lease_epoch, record.updated_at)
        with pytest.raises(LeaseLostError):
            await store.add_usage(stale, RunUsage(1, 1, 0.0))
        with pytest.raises(LeaseLostError):
            await store.set_budget(stale, Budget(max_tokens=9))
        after = await rt.get_run(first.run_id)
    assert after.usage == replace(record.usage) and after.budget == Budget(max_tokens=1)


def test_budgets_are_checked() -> None:
    with pytest.raises(InvalidInputError):
        Budget(max_tokens=-1)
    with pytest.raises(InvalidInputError):
        Budget(max_usd=float("nan"))
    b = WorkflowBuilder("w", budget=5)  # type: ignore[arg-type]
    b.add_node("n", lambda s: {})
    b.set_entry("n")
    b.add_edge("n", END)
    with pytest.raises(WorkflowValidationError, match="budget must be a Budget"):
        b.build()


async def test_run_refuses_a_budget_that_is_not_one(store: CheckpointStore) -> None:
    async with Runtime(store) as rt:
        with pytest.raises(InvalidInputError, match="budget must be a Budget"):
            await rt.run(weather_agent(two_calls()), {"question": "x"},
                         budget={"max_tokens": 3})  # type: ignore[arg-type]
