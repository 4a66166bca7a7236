"""Agents under a limit: a 429 with Retry-After slows every task of that limit, not only its own."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from durable_flow import END, Blackboard, Limit, ModelError, RunStatus, Runtime, Worker, WorkflowBuilder
from durable_flow.testing import ScriptedModel


class Chat(Blackboard):
    note: str = ""


@asynccontextmanager
async def serving(worker: Worker) -> AsyncIterator[None]:
    task = asyncio.create_task(worker.serve())
    try:
        yield
    finally:
        await worker.stop()
        await asyncio.wait_for(task, 10)


def agent(name: str, reply: Callable[[Any], Any]) -> Any:
    b = WorkflowBuilder(name, state=Chat)
    b.add_agent("ask", ScriptedModel(reply), instructions="Say something.", output_key="note",
                uses=("openai",))
    b.set_entry("ask").add_edge("ask", END)
    return b.build()


async def test_a_retry_after_pauses_the_other_tasks_of_the_limit(
        store_factory: Callable[[], Any]) -> None:
    calls: dict[str, list[float]] = {"first": [], "other": []}
    refused_at: list[float] = []

    def first(_: Any) -> str:
        calls["first"].append(time.monotonic())
        if len(calls["first"]) == 1:
            refused_at.append(time.monotonic())
            raise ModelError("rate limited", transient=True, retry_after=1.5)
        return "done"

    def other(_: Any) -> str:
        calls["other"].append(time.monotonic())
        return "done too"

    wf1, wf2 = agent("first", first), agent("other", other)
    store = store_factory()
    async with Runtime(store) as rt, Worker(store, [wf1, wf2], poll_interval=0.05,
                                            limits={"openai": Limit(concurrency=5)}) as w, \
            serving(w):
        await rt.submit(wf1, {}, run_id="a")
        while not refused_at:
            await asyncio.sleep(0.02)
        await rt.submit(wf2, {}, run_id="b")  # its own calls had no 429
        for run_id in ("a", "b"):
            assert (await rt.wait(run_id, timeout=30)).status is RunStatus.COMPLETED
    assert len(calls["first"]) == 2 and len(calls["other"]) == 1
    assert calls["other"][0] - refused_at[0] >= 1.3  # it waited out the other task's Retry-After
    assert calls["first"][1] - refused_at[0] >= 1.3
