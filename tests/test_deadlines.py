"""Request deadlines: ``ctx.request(..., timeout=, default=)`` on memory, SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from waitkit import eventually, serving, store_dump

from durable_flow import (
    END,
    Blackboard,
    RequestTimeoutError,
    RunStatus,
    Runtime,
    UnknownRequestError,
    Worker,
    WorkflowBuilder,
)
from durable_flow.model._clock import utcnow
from durable_flow.store._protocols import CheckpointStore

_NONE = object()


class Ask(Blackboard):
    answer: Any = None
    escalated: bool = False


def asking(timeout: float | timedelta, default: Any = _NONE) -> Any:
    b = WorkflowBuilder("asking", state=Ask)

    @b.node()
    async def ask(state: Ask, ctx: Any) -> dict[str, Any]:
        kwargs = {} if default is _NONE else {"default": default}
        try:
            answer = await ctx.request({"q": "ok?"}, response_type=bool, timeout=timeout,
                                       **kwargs)
        except RequestTimeoutError as exc:
            return {"escalated": True, "answer": exc.request_id}
        return {"answer": answer}

    b.set_entry("ask").add_edge("ask", END)
    return b.build()


async def test_a_request_with_a_deadline_shows_it_in_the_inbox(rt: Runtime) -> None:
    started = utcnow()
    result = await rt.run(asking(timedelta(days=2)))
    [req] = result.pending_requests
    assert req.expires_at is not None
    assert started + timedelta(days=2) <= req.expires_at <= utcnow() + timedelta(days=2)
    [listed] = await rt.pending_requests()
    assert listed.expires_at == req.expires_at
    assert (await rt.get_run(result.run_id)).wake_at == req.expires_at
    assert (await rt.get_state(result.run_id)).pending_requests[0].expires_at == req.expires_at


async def test_an_answer_before_the_deadline_is_taken(rt: Runtime) -> None:
    wf = asking(30)
    result = await rt.run(wf)
    [req] = result.pending_requests
    done = await rt.resume(wf, result.run_id, responses={req.id: True})
    assert done.status is RunStatus.COMPLETED and done.state.answer is True


async def test_unanswered_by_the_deadline_the_request_returns_its_default(rt: Runtime) -> None:
    wf = asking(0.2, default=False)
    result = await rt.run(wf)
    await asyncio.sleep(0.3)
    assert await rt.pending_requests() == []  # past its deadline: nobody can answer it now
    done = await rt.resume(wf, result.run_id)
    assert done.status is RunStatus.COMPLETED and done.state.answer is False


async def test_without_a_default_the_node_gets_request_timeout_error(rt: Runtime) -> None:
    wf = asking(0.2)
    result = await rt.run(wf)
    await asyncio.sleep(0.3)
    done = await rt.resume(wf, result.run_id)
    assert done.status is RunStatus.COMPLETED
    assert done.state.escalated and done.state.answer == "ask@1#0"


async def test_an_uncaught_request_timeout_fails_the_run(rt: Runtime) -> None:
    b = WorkflowBuilder("strict", state=Ask)

    @b.node()
    async def ask(state: Ask, ctx: Any) -> dict[str, Any]:
        return {"answer": await ctx.request("ok?", response_type=bool, timeout=0.1)}

    b.set_entry("ask")
    wf = b.build()
    result = await rt.run(wf)
    await asyncio.sleep(0.2)
    failed = await rt.resume(wf, result.run_id)
    assert failed.status is RunStatus.FAILED and failed.error is not None
    assert failed.error.type == "RequestTimeoutError" and failed.error.node == "ask"


@pytest.mark.parametrize("via", ["resume", "respond"])
async def test_a_late_answer_is_refused_and_writes_nothing(rt: Runtime, via: str) -> None:
    wf = asking(0.2, default=False)
    result = await rt.run(wf)
    [req] = result.pending_requests
    await asyncio.sleep(0.3)
    before = await store_dump(rt.store, result.run_id)
    with pytest.raises(UnknownRequestError):
        if via == "resume":
            await rt.resume(wf, result.run_id, responses={req.id: True})
        else:
            await rt.respond(result.run_id, {req.id: True})
    assert await store_dump(rt.store, result.run_id) == before
    done = await rt.resume(wf, result.run_id)  # the deadline is now recorded
    with pytest.raises(UnknownRequestError):
        await rt.respond(result.run_id, {req.id: False})  # even the default's value
    assert done.state.answer is False


async def test_a_worker_runs_the_node_again_at_the_deadline(
        store_factory: Callable[[], CheckpointStore]) -> None:
    wf = asking(0.5, default="nobody answered")
    async with Runtime(store_factory()) as rt, Worker(store_factory(), [wf], poll_interval=0.05) as w:
        async with serving(w):
            info = await rt.submit(wf)
            assert (await rt.wait(info.run_id, timeout=10)).status is RunStatus.WAITING

            async def completed() -> bool:
                return (await rt.get_run(info.run_id)).status is RunStatus.COMPLETED

            await eventually(completed)
        assert (await rt.get_state(info.run_id)).values["answer"] == "nobody answered"
