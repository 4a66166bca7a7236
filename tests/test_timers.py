"""Durable timers: ``ctx.sleep`` and ``ctx.sleep_until`` on memory, SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from waitkit import eventually, serving, store_dump

from durable_flow import (
    END,
    Blackboard,
    InvalidInputError,
    RunStatus,
    Runtime,
    Worker,
    WorkflowBuilder,
)
from durable_flow.model._clock import utcnow
from durable_flow.store._protocols import CheckpointStore


class Nap(Blackboard):
    seconds: float = 0.3
    log: list[str] = []


def napping(calls: list[str]) -> Any:
    """before -> nap (sleeps ``seconds``) -> after."""
    b = WorkflowBuilder("napping", state=Nap)

    @b.node()
    async def before(state: Nap) -> dict[str, Any]:
        calls.append("before")
        return {"log": [*state.log, "before"]}

    @b.node()
    async def nap(state: Nap, ctx: Any) -> dict[str, Any]:
        calls.append("nap")
        await ctx.sleep(state.seconds)
        calls.append("woke")
        return {"log": [*state.log, "napped"]}

    @b.node()
    async def after(state: Nap) -> dict[str, Any]:
        calls.append("after")
        return {"log": [*state.log, "after"]}

    b.set_entry("before").add_edge("before", "nap").add_edge("nap", "after")
    b.add_edge("after", END)
    return b.build()


async def test_a_sleeping_run_waits_without_a_lease_until_its_wake_time(rt: Runtime) -> None:
    calls: list[str] = []
    started = utcnow()
    result = await rt.run(napping(calls), {"seconds": 30})
    assert result.status is RunStatus.WAITING and result.pending_requests == ()
    info = await rt.get_run(result.run_id)
    assert info.status is RunStatus.WAITING and info.wake_at is not None
    assert started + timedelta(seconds=29) < info.wake_at <= utcnow() + timedelta(seconds=30)
    record = await rt.store.get_run(result.run_id)
    assert record is not None and record.lease_owner is None
    assert await rt.pending_requests() == []  # a timer is no question for the inbox
    assert calls == ["before", "nap"]


async def test_resume_before_the_wake_time_writes_nothing(rt: Runtime) -> None:
    calls: list[str] = []
    wf = napping(calls)
    result = await rt.run(wf, {"seconds": 30})
    before = await store_dump(rt.store, result.run_id)
    again = await rt.resume(wf, result.run_id)
    assert again.status is RunStatus.WAITING and again.checkpoint_id == result.checkpoint_id
    assert await store_dump(rt.store, result.run_id) == before
    assert calls == ["before", "nap"]


async def test_resumed_after_the_wake_time_the_sleep_returns_at_once(rt: Runtime) -> None:
    calls: list[str] = []
    wf = napping(calls)
    result = await rt.run(wf, {"seconds": 0.2})
    await asyncio.sleep(0.3)
    done = await rt.resume(wf, result.run_id)
    assert done.status is RunStatus.COMPLETED, done.error
    assert done.state.log == ["before", "napped", "after"]
    # the node ran once to set the timer and once past it; it never waited twice
    assert calls == ["before", "nap", "nap", "woke", "after"]
    timers = [r for r in await rt.store.get_requests(result.run_id) if r.kind == "timer"]
    assert len(timers) == 1 and timers[0].timed_out
    info = await rt.get_run(result.run_id)
    assert info.wake_at is None


@pytest.mark.parametrize("duration", [0, -5, timedelta(0), timedelta(seconds=-1)])
async def test_a_sleep_of_zero_or_less_returns_at_once(rt: Runtime, duration: Any) -> None:
    b = WorkflowBuilder("zero", state=Nap)

    @b.node()
    async def nap(state: Nap, ctx: Any) -> dict[str, Any]:
        await ctx.sleep(duration)
        await ctx.sleep_until(datetime(2000, 1, 1, tzinfo=UTC))
        return {"log": ["done"]}

    b.set_entry("nap").add_edge("nap", END)
    result = await rt.run(b.build())
    assert result.status is RunStatus.COMPLETED
    assert await rt.store.get_requests(result.run_id) == []


async def test_sleep_until_wakes_at_the_given_time(rt: Runtime) -> None:
    b = WorkflowBuilder("until", state=Nap)
    when = utcnow() + timedelta(seconds=0.3)

    @b.node()
    async def nap(state: Nap, ctx: Any) -> dict[str, Any]:
        await ctx.sleep_until(when)
        return {"log": [f"woke at or after {when.isoformat()}"]}

    b.set_entry("nap").add_edge("nap", END)
    wf = b.build()
    result = await rt.run(wf)
    assert (await rt.get_run(result.run_id)).wake_at == when
    await asyncio.sleep(0.4)
    assert (await rt.resume(wf, result.run_id)).status is RunStatus.COMPLETED


async def test_a_worker_continues_a_sleeping_run_when_it_is_due_and_not_before(
        store_factory: Callable[[], CheckpointStore]) -> None:
    calls: list[str] = []
    wf = napping(calls)
    async with Runtime(store_factory()) as rt, \
            Worker(store_factory(), [wf], poll_interval=0.05) as w, serving(w):
        info = await rt.submit(wf, {"seconds": 0.6})
        slept = await rt.wait(info.run_id, timeout=10)
        assert slept.status is RunStatus.WAITING and slept.wake_at is not None
        await asyncio.sleep(0.2)
        assert (await rt.get_run(info.run_id)).status is RunStatus.WAITING  # not yet

        async def completed() -> bool:
            return (await rt.get_run(info.run_id)).status is RunStatus.COMPLETED

        await eventually(completed)
    assert utcnow() >= slept.wake_at
    assert calls == ["before", "nap", "nap", "woke", "after"]


async def test_a_timer_inside_a_subworkflow_sets_the_runs_wake_time(rt: Runtime) -> None:
    inner = WorkflowBuilder("inner-nap", state=Nap)

    @inner.node()
    async def nap(state: Nap, ctx: Any) -> dict[str, Any]:
        await ctx.sleep(0.2)
        return {"log": ["inner napped"]}

    inner.set_entry("nap")
    outer = WorkflowBuilder("outer-nap", state=Nap)
    outer.add_subworkflow("review", inner.build(), inputs=["seconds"], outputs=["log"])
    outer.set_entry("review")
    wf = outer.build()
    result = await rt.run(wf)
    info = await rt.get_run(result.run_id)
    assert info.status is RunStatus.WAITING and info.wake_at is not None
    await asyncio.sleep(0.3)
    done = await rt.resume(wf, result.run_id)
    assert done.status is RunStatus.COMPLETED and done.state.log == ["inner napped"]


async def test_requests_sleeps_and_event_waits_of_one_node_keep_their_order(rt: Runtime) -> None:
    b = WorkflowBuilder("mixed", state=Nap)

    @b.node()
    async def mixed(state: Nap, ctx: Any) -> dict[str, Any]:
        first = await ctx.request({"q": "first?"}, response_type=str)
        await ctx.sleep(0.2)
        second = await ctx.wait_event("go", response_type=str)
        return {"log": [first, second]}

    b.set_entry("mixed").add_edge("mixed", END)
    wf = b.build()
    result = await rt.run(wf)
    [req] = result.pending_requests
    assert req.id == "mixed@1#0"
    result = await rt.resume(wf, result.run_id, responses={req.id: "a"})
    assert result.status is RunStatus.WAITING
    await rt.send_event(result.run_id, "go", "b")  # kept: the node sleeps first
    await asyncio.sleep(0.3)
    done = await rt.resume(wf, result.run_id)
    assert done.status is RunStatus.COMPLETED and done.state.log == ["a", "b"]
    kinds = [(r.id, r.kind) for r in await rt.store.get_requests(result.run_id)]
    assert kinds == [("mixed@1#0", "request"), ("mixed@1#1", "timer"), ("mixed@1#2", "event")]


async def test_a_bad_duration_fails_the_node_naming_it(rt: Runtime) -> None:
    b = WorkflowBuilder("bad-nap", state=Nap)

    @b.node()
    async def nap(state: Nap, ctx: Any) -> dict[str, Any]:
        await ctx.sleep("soon")
        return {}

    b.set_entry("nap")
    result = await rt.run(b.build())
    assert result.status is RunStatus.FAILED and result.error is not None
    assert result.error.type == InvalidInputError.__name__ and "soon" in result.error.message


async def test_a_node_whose_calls_changed_order_fails_naming_the_recorded_wait(
        rt: Runtime) -> None:
    calls = {"sleep_first": False}
    b = WorkflowBuilder("reordered", state=Nap)

    @b.node()
    async def step(state: Nap, ctx: Any) -> dict[str, Any]:
        if calls["sleep_first"]:
            await ctx.sleep(0.1)
        await ctx.request("ok?", response_type=bool)
        return {}

    b.set_entry("step")
    wf = b.build()
    result = await rt.run(wf)
    [req] = result.pending_requests
    calls["sleep_first"] = True  # the code changed while the run waited
    failed = await rt.resume(wf, result.run_id, responses={req.id: True})
    assert failed.status is RunStatus.FAILED and failed.error is not None
    assert "called ctx.sleep where it recorded a request ('step@1#0')" in failed.error.message
