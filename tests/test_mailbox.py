"""Events for runs: ``ctx.wait_event`` and ``Runtime.send_event`` on memory, SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Annotated, Any

import pytest
from pydantic import BaseModel
from waitkit import eventually, serving, store_dump

from durable_flow import (
    END,
    Blackboard,
    EventTimeoutError,
    InvalidInputError,
    InvalidResponseError,
    RunNotFoundError,
    RunNotResumableError,
    RunStatus,
    Runtime,
    Worker,
    WorkflowBuilder,
    append,
)
from durable_flow.store._protocols import CheckpointStore


class Paid(BaseModel):
    amount: int
    ref: str = ""


class Order(Blackboard):
    got: Annotated[list[Any], append] = []
    timed_out: bool = False


def waiting_for(name: str, times: int = 1, *, timeout: float | None = None,
                response_type: Any = Any) -> Any:
    """One node waiting ``times`` times for event ``name``."""
    b = WorkflowBuilder(f"wait-{name}-{times}", state=Order)

    @b.node()
    async def listen(state: Order, ctx: Any) -> dict[str, Any]:
        got = []
        try:
            for _ in range(times):
                got.append(await ctx.wait_event(name, response_type=response_type,
                                                timeout=timeout))
        except EventTimeoutError:
            return {"got": got, "timed_out": True}
        return {"got": got}

    b.set_entry("listen").add_edge("listen", END)
    return b.build()


async def test_a_run_waiting_for_an_event_gets_it_and_the_run_is_queued(rt: Runtime) -> None:
    wf = waiting_for("paid", response_type=Paid)
    result = await rt.run(wf)
    assert result.status is RunStatus.WAITING and result.pending_requests == ()
    assert (await rt.get_run(result.run_id)).wake_at is None
    await rt.send_event(result.run_id, "paid", {"amount": 5, "ref": "tx1"})
    assert (await rt.get_run(result.run_id)).status is RunStatus.QUEUED
    done = await rt.resume(wf, result.run_id)
    assert done.status is RunStatus.COMPLETED and done.state.got == [Paid(amount=5, ref="tx1")]


async def test_an_event_sent_before_the_node_waits_is_kept_for_it(rt: Runtime) -> None:
    b = WorkflowBuilder("kept", state=Order)

    @b.node()
    async def ask(state: Order, ctx: Any) -> dict[str, Any]:
        return {"got": [await ctx.request({"q": "ship?"}, response_type=bool)]}

    @b.node()
    async def listen(state: Order, ctx: Any) -> dict[str, Any]:
        return {"got": [await ctx.wait_event("paid")]}

    b.set_entry("ask").add_edge("ask", "listen").add_edge("listen", END)
    wf = b.build()
    result = await rt.run(wf)
    await rt.send_event(result.run_id, "paid", 7)  # nobody waits for it yet
    assert (await rt.get_run(result.run_id)).status is RunStatus.WAITING
    [req] = result.pending_requests
    done = await rt.resume(wf, result.run_id, responses={req.id: True})
    assert done.status is RunStatus.COMPLETED and done.state.got == [True, 7]
    [mail] = await rt.store.get_mail(result.run_id)
    assert mail.request_id == "listen@2#0"


async def test_events_are_delivered_in_the_order_sent_each_to_one_wait(rt: Runtime) -> None:
    wf = waiting_for("tick", times=3)
    result = await rt.run(wf)
    for n in (1, 2, 3, 4):
        await rt.send_event(result.run_id, "tick", n)
    # the first is delivered to the open wait, the next two to the waits as they come
    result = await rt.resume(wf, result.run_id)
    assert result.status is RunStatus.COMPLETED and result.state.got == [1, 2, 3]
    mail = await rt.store.get_mail(result.run_id)
    assert [(m.seq, m.request_id) for m in mail] == [
        (1, "listen@1#0"), (2, "listen@1#1"), (3, "listen@1#2"), (4, None)]


async def test_two_waits_for_one_name_each_take_a_different_event(rt: Runtime) -> None:
    b = WorkflowBuilder("pair", state=Order)
    for name in ("left", "right"):
        async def listen(state: Order, ctx: Any) -> dict[str, Any]:
            return {"got": [await ctx.wait_event("job")]}

        b.add_node(name, listen)
    b.add_node("start", lambda s: {})
    b.set_entry("start").add_edge("start", "left").add_edge("start", "right")
    wf = b.build()
    result = await rt.run(wf)
    await rt.send_event(result.run_id, "job", "first")
    await rt.send_event(result.run_id, "job", "second")
    done = await rt.resume(wf, result.run_id)
    assert done.status is RunStatus.COMPLETED
    assert sorted(done.state.got) == ["first", "second"]
    taken = {m.payload: m.request_id for m in await rt.store.get_mail(result.run_id)}
    assert len(set(taken.values())) == 2  # one wait each, none twice


async def test_no_event_by_the_timeout_raises_event_timeout_error(rt: Runtime) -> None:
    wf = waiting_for("late", times=1, timeout=0.2)
    result = await rt.run(wf)
    info = await rt.get_run(result.run_id)
    assert info.wake_at is not None  # the wait's deadline
    await asyncio.sleep(0.3)
    done = await rt.resume(wf, result.run_id)
    assert done.status is RunStatus.COMPLETED
    assert done.state.timed_out and done.state.got == []
    # the run has ended: no later event is taken
    with pytest.raises(RunNotResumableError):
        await rt.send_event(result.run_id, "late", 1)


async def test_an_event_after_a_timed_out_wait_goes_to_the_next_wait(rt: Runtime) -> None:
    b = WorkflowBuilder("retry-wait", state=Order)

    @b.node()
    async def first(state: Order, ctx: Any) -> dict[str, Any]:
        try:
            return {"got": [await ctx.wait_event("ping", timeout=0.2)]}
        except EventTimeoutError:
            return {"timed_out": True}

    @b.node()
    async def second(state: Order, ctx: Any) -> dict[str, Any]:
        return {"got": [await ctx.wait_event("ping")]}

    b.set_entry("first").add_edge("first", "second").add_edge("second", END)
    wf = b.build()
    result = await rt.run(wf)
    await asyncio.sleep(0.3)
    await rt.send_event(result.run_id, "ping", "after the deadline")
    done = await rt.resume(wf, result.run_id)
    assert done.status is RunStatus.COMPLETED
    assert done.state.timed_out and done.state.got == ["after the deadline"]
    [mail] = await rt.store.get_mail(result.run_id)
    assert mail.request_id == "second@2#0"


async def test_resuming_a_run_that_waits_for_an_event_delivers_nothing_twice(rt: Runtime) -> None:
    wf = waiting_for("once", times=2)
    result = await rt.run(wf)
    await rt.send_event(result.run_id, "once", "a")
    mid = await rt.resume(wf, result.run_id)
    assert mid.status is RunStatus.WAITING
    before = await store_dump(rt.store, result.run_id)
    # without an event there is nothing to give the second wait
    assert (await rt.resume(wf, result.run_id)).status is RunStatus.WAITING
    await rt.send_event(result.run_id, "once", "b")
    done = await rt.resume(wf, result.run_id)
    assert done.state.got == ["a", "b"]
    assert before[3][0].request_id == "listen@1#0"


async def test_a_worker_continues_a_run_the_moment_its_event_comes(
        store_factory: Callable[[], CheckpointStore]) -> None:
    wf = waiting_for("webhook")
    async with Runtime(store_factory()) as rt, Worker(store_factory(), [wf], poll_interval=0.05) as w:
        async with serving(w):
            info = await rt.submit(wf)
            assert (await rt.wait(info.run_id, timeout=10)).status is RunStatus.WAITING
            await rt.send_event(info.run_id, "webhook", {"ok": True})

            async def completed() -> bool:
                return (await rt.get_run(info.run_id)).status is RunStatus.COMPLETED

            await eventually(completed)
        assert (await rt.get_state(info.run_id)).values["got"] == [{"ok": True}]


async def test_an_event_that_does_not_fit_the_waiting_node_is_refused_and_nothing_stored(
        rt: Runtime) -> None:
    wf = waiting_for("paid", response_type=Paid)
    result = await rt.run(wf)
    before = await store_dump(rt.store, result.run_id)
    with pytest.raises(InvalidResponseError, match="does not fit the type node 'listen'"):
        await rt.send_event(result.run_id, "paid", {"amount": "lots"})
    with pytest.raises(InvalidResponseError):
        await rt.send_event(result.run_id, "paid", None)
    assert await store_dump(rt.store, result.run_id) == before
    await rt.send_event(result.run_id, "paid", {"amount": 3})
    done = await rt.resume(wf, result.run_id)
    assert done.status is RunStatus.COMPLETED
    assert done.state.got == [Paid(amount=3)]


async def test_a_kept_event_that_does_not_fit_is_dropped_and_the_wait_goes_on(
        rt: Runtime) -> None:
    b = WorkflowBuilder("ask-then-pay", state=Order)

    @b.node()
    async def ask(state: Order, ctx: Any) -> dict[str, Any]:
        return {"got": [await ctx.request({"q": "go?"}, response_type=bool)]}

    b.add_node("listen", waiting_for("paid", response_type=Paid).nodes["listen"].fn)
    b.set_entry("ask").add_edge("ask", "listen").add_edge("listen", END)
    wf = b.build()
    first = await rt.run(wf)
    await rt.send_event(first.run_id, "paid", {"amount": "lots"})  # no wait yet: kept
    [req] = first.pending_requests
    waiting = await rt.resume(wf, first.run_id, responses={req.id: True})
    assert waiting.status is RunStatus.WAITING  # the bad event was dropped; it waits on
    assert (await rt.get_run(first.run_id)).status is RunStatus.WAITING
    await rt.send_event(first.run_id, "paid", {"amount": 7})
    assert (await rt.get_run(first.run_id)).status is RunStatus.QUEUED
    done = await rt.resume(wf, first.run_id)
    assert done.status is RunStatus.COMPLETED and done.state.got == [True, Paid(amount=7)]


async def test_send_event_refuses_unknown_and_finished_runs_and_bad_payloads(
        rt: Runtime) -> None:
    with pytest.raises(RunNotFoundError):
        await rt.send_event("nope", "paid", 1)
    wf = waiting_for("paid")
    result = await rt.run(wf)
    with pytest.raises(InvalidInputError):
        await rt.send_event(result.run_id, "paid", object())
    with pytest.raises(InvalidInputError):
        await rt.send_event(result.run_id, "", 1)
    assert await rt.store.get_mail(result.run_id) == []
    await rt.cancel(result.run_id)
    with pytest.raises(RunNotResumableError):
        await rt.send_event(result.run_id, "paid", 1)
