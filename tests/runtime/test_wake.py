"""Workers wake for the earliest due time the store knows of, not only on their poll."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from durable_flow import END, Blackboard, RunStatus, Runtime, Worker, WorkflowBuilder
from durable_flow.model._clock import utcnow

POLL = 30.0  # far longer than any wait below: only the wake-up can explain an early finish


class Nap(Blackboard):
    slept: float = 0.0


def napping(seconds: float) -> Any:
    b = WorkflowBuilder("nap", state=Nap)

    @b.node()
    async def nap(state: Nap, ctx: Any) -> dict[str, Any]:
        t0 = time.monotonic()
        await ctx.sleep(seconds)
        return {"slept": time.monotonic() - t0}

    b.set_entry("nap").add_edge("nap", END)
    return b.build()


@asynccontextmanager
async def serving(worker: Worker) -> AsyncIterator[Worker]:
    task = asyncio.create_task(worker.serve())
    try:
        yield worker
    finally:
        await worker.stop()
        await asyncio.wait_for(task, 5)


async def test_an_idle_worker_wakes_when_a_timer_comes_due(
        store_factory: Callable[[], Any]) -> None:
    wf = napping(0.5)
    store = store_factory()  # one object: the submit wakes the worker at once
    async with Runtime(store) as rt, Worker(store, [wf], poll_interval=POLL) as w, serving(w):
        await asyncio.sleep(0.1)  # the worker is idle, sleeping its poll
        t0 = time.monotonic()
        await rt.submit(wf, {}, run_id="nap-1")
        info = await rt.wait("nap-1", timeout=10)
        while info.status is RunStatus.WAITING:
            info = await rt.wait("nap-1", timeout=10)
            if info.status is RunStatus.WAITING:
                await asyncio.sleep(0.05)
        assert info.status is RunStatus.COMPLETED
        assert time.monotonic() - t0 < 5.0  # not the 30 s poll


async def test_a_worker_that_did_not_see_the_run_wait_wakes_for_its_timer(
        store_factory: Callable[[], Any]) -> None:
    """The timer was set by another runtime: the worker learns it from the store."""
    wf = napping(0.8)
    async with Runtime(store_factory()) as rt:
        result = await rt.run(wf, {}, run_id="nap-2")
        assert result.status is RunStatus.WAITING
        t0 = time.monotonic()
        async with Worker(store_factory(), [wf], poll_interval=POLL) as w, serving(w):
            while (await rt.get_run("nap-2")).status is not RunStatus.COMPLETED:
                assert time.monotonic() - t0 < 6.0, "the worker slept through the timer"
                await asyncio.sleep(0.05)


async def test_next_wake_is_the_earliest_future_due_time(
        store_factory: Callable[[], Any]) -> None:
    store = store_factory()
    wf = napping(60)
    async with Runtime(store) as rt:
        assert await store.next_wake("w") is None
        await rt.run(wf, {}, run_id="far")
        far = (await rt.get_run("far")).wake_at
        assert far is not None
        assert await store.next_wake("w") == far
        await rt.run(napping(20), {}, run_id="near")
        near = (await rt.get_run("near")).wake_at
        assert near is not None and near < far
        assert await store.next_wake("w") == near
        assert near - utcnow() < timedelta(seconds=21)
