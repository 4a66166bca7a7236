"""One writer per run: live leases lock, expired leases are taken over, stale holders write nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from durable_flow import (
    END,
    Blackboard,
    LeaseLostError,
    RunLockedError,
    RunStatus,
    Runtime,
    WorkflowBuilder,
)


class Box(Blackboard):
    value: str = ""


def gated(gate: asyncio.Event, started: asyncio.Event) -> Any:
    b = WorkflowBuilder("gated", state=Box)

    @b.node()
    async def slow(state: Box) -> dict[str, Any]:
        started.set()
        await gate.wait()
        return {"value": "done"}

    b.set_entry("slow")
    b.add_edge("slow", END)
    return b.build()


async def test_a_live_lease_locks_the_run_for_another_runtime(
        store_factory: Callable[[], Any]) -> None:
    gate, started = asyncio.Event(), asyncio.Event()
    wf = gated(gate, started)
    async with Runtime(store_factory(), owner="A") as a, Runtime(store_factory(), owner="B") as b:
        running = asyncio.create_task(a.run(wf, {}, run_id="r1"))
        await started.wait()
        with pytest.raises(RunLockedError) as info:
            await b.resume(wf, "r1")
        assert info.value.owner == "A"
        assert await b.recover(wf) == []  # recover leaves runs with a live lease alone
        with pytest.raises(RunLockedError):
            await a.resume(wf, "r1")  # the same runtime does not run it twice either
        gate.set()
        assert (await running).status is RunStatus.COMPLETED


async def test_an_expired_lease_is_taken_over_and_the_stale_holder_writes_nothing(
        store_factory: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> None:
    gate, started = asyncio.Event(), asyncio.Event()
    wf = gated(gate, started)
    store_a = store_factory()
    async with Runtime(store_a, owner="A", lease_ttl=0.3) as a, \
            Runtime(store_factory(), owner="B") as b:

        async def stalled(lease: Any, ttl: float) -> Any:  # A stops renewing (a long GC pause)
            await asyncio.sleep(3600)

        monkeypatch.setattr(store_a, "renew_lease", stalled)
        running = asyncio.create_task(a.run(wf, {}, run_id="r1"))
        await started.wait()
        await asyncio.sleep(0.4)  # A's lease expires
        started.clear()
        taken = asyncio.create_task(b.resume(wf, "r1"))
        await started.wait()  # B runs the node again under a higher epoch
        gate.set()
        result = await taken
        assert result.status is RunStatus.COMPLETED
        history_after_b = [cp.id for cp in await b.history("r1")]
        with pytest.raises(LeaseLostError):
            await running
        assert [cp.id for cp in await b.history("r1")] == history_after_b
        assert (await b.get_run("r1")).status is RunStatus.COMPLETED


async def test_a_waiting_run_holds_no_lease(store_factory: Callable[[], Any]) -> None:
    b = WorkflowBuilder("asks", state=Box)

    @b.node()
    async def ask(state: Box, ctx: Any) -> dict[str, Any]:
        return {"value": await ctx.request("ok?", response_type=str)}

    b.set_entry("ask")
    wf = b.build()
    async with Runtime(store_factory(), owner="A", lease_ttl=600) as a, \
            Runtime(store_factory(), owner="B") as other:
        result = await a.run(wf, {})
        assert result.status is RunStatus.WAITING
        [req] = result.pending_requests
        done = await other.resume(wf, result.run_id, responses={req.id: "yes"})
        assert done.status is RunStatus.COMPLETED and done.state.value == "yes"  # type: ignore[attr-defined]
