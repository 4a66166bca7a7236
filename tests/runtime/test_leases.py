"""One writer per run: live leases lock, expired leases are taken over, stale holders write nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from structlog.testing import capture_logs

from durable_flow import (
    END,
    Blackboard,
    LeaseLostError,
    RunLockedError,
    RunStatus,
    Runtime,
    StoreError,
    WorkflowBuilder,
)
from durable_flow.store._protocols import Claim


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


# keeping the lease, and losing it ------------------------------------------------------


def sleeper(seen: list[str], started: asyncio.Event, *, name: str = "sleeper") -> Any:
    """One node that sleeps for a long time and notes what happened to it."""
    b = WorkflowBuilder(name, state=Box)

    @b.node()
    async def nap(state: Box) -> dict[str, Any]:
        seen.append("started")
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        seen.append("side effect after the sleep")
        return {"value": "done"}

    b.set_entry("nap")
    b.add_edge("nap", END)
    return b.build()


def flaky_renewal(store: Any, monkeypatch: pytest.MonkeyPatch, failures: int) -> dict[str, int]:
    """Make ``store.renew_lease`` fail with a passing StoreError the next ``failures`` times."""
    renew = store.renew_lease
    left = {"failures": failures}

    async def flaky(lease: Any, ttl: float) -> Any:
        if left["failures"] > 0:
            left["failures"] -= 1
            raise StoreError("SQLite failed: database is locked")
        return await renew(lease, ttl)

    monkeypatch.setattr(store, "renew_lease", flaky)
    return left


async def test_a_failed_renewal_is_retried_and_logged_so_no_one_takes_the_run_over(
        store_factory: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> None:
    gate, started = asyncio.Event(), asyncio.Event()
    wf = gated(gate, started)
    store_a = store_factory()
    async with Runtime(store_a, owner="A", lease_ttl=0.6) as a, \
            Runtime(store_factory(), owner="B") as b:
        flaky_renewal(store_a, monkeypatch, failures=2)
        with capture_logs() as logs:
            running = asyncio.create_task(a.run(wf, {}, run_id="r1"))
            await started.wait()
            for _ in range(8):  # four lease lifetimes
                await asyncio.sleep(0.3)
                with pytest.raises(RunLockedError):
                    await asyncio.wait_for(b.resume(wf, "r1"), 2)
            gate.set()
            result = await running
    assert result.status is RunStatus.COMPLETED
    failed = [e for e in logs if e["event"] == "lease_renew_failed"]
    assert [(e["log_level"], e["run_id"], e["attempt"]) for e in failed] == [
        ("warning", "r1", 1), ("warning", "r1", 2)]
    assert "database is locked" in failed[0]["error"]


async def test_a_lease_taken_over_after_expiry_stops_the_nodes_at_once_and_writes_nothing(
        store_factory: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    started = asyncio.Event()
    wf = sleeper(seen, started)
    store_a = store_factory()
    async with Runtime(store_a, owner="A", lease_ttl=0.3) as a, \
            Runtime(store_factory(), owner="B") as b:
        left = flaky_renewal(store_a, monkeypatch, failures=1_000)  # A cannot renew for a while
        running = asyncio.create_task(a.run(wf, {}, run_id="r1"))
        await started.wait()
        await asyncio.sleep(0.45)  # A's lease expires
        await b.store.claim(Claim("r1", "B", 30))  # B takes it over: the epoch moves on
        history = [cp.id for cp in await b.history("r1")]
        left["failures"] = 0  # A's next renewal gets through and finds the lease lost
        with pytest.raises(LeaseLostError):
            await asyncio.wait_for(running, 2)
        assert seen == ["started", "cancelled"]
        await asyncio.sleep(0.1)
        assert [cp.id for cp in await b.history("r1")] == history
        assert await b.store.get_task_writes("r1", history[0]) == []
        assert (await b.get_run("r1")).status is RunStatus.RUNNING


async def test_a_run_cancelled_by_another_runtime_stops_within_one_renewal(
        store_factory: Callable[[], Any]) -> None:
    seen: list[str] = []
    started = asyncio.Event()
    wf = sleeper(seen, started)
    async with Runtime(store_factory(), owner="A", lease_ttl=1.5) as a, \
            Runtime(store_factory(), owner="B") as b:
        running = asyncio.create_task(a.run(wf, {}, run_id="r1"))
        await started.wait()
        assert (await b.cancel("r1")).status is RunStatus.CANCELLED
        result = await asyncio.wait_for(running, 5)
    assert result.status is RunStatus.CANCELLED
    assert seen == ["started", "cancelled"]


async def test_a_lost_lease_stops_the_nodes_inside_sub_workflows_too(
        store_factory: Callable[[], Any]) -> None:
    seen: list[str] = []
    started = asyncio.Event()
    inner = sleeper(seen, started, name="inner")
    b = WorkflowBuilder("outer", state=Box)
    b.add_subworkflow("review", inner, inputs=[], outputs=["value"])
    b.set_entry("review")
    b.add_edge("review", END)
    wf = b.build()
    async with Runtime(store_factory(), owner="A", lease_ttl=1.5) as a, \
            Runtime(store_factory(), owner="B") as other:
        running = asyncio.create_task(a.run(wf, {}, run_id="r1"))
        await started.wait()
        await other.cancel("r1")
        result = await asyncio.wait_for(running, 5)
    assert result.status is RunStatus.CANCELLED
    assert seen == ["started", "cancelled"]


async def test_a_write_that_finds_the_lease_lost_stops_the_sibling_tasks_at_once(
        store_factory: Callable[[], Any]) -> None:
    seen: list[str] = []
    started, finish_quick = asyncio.Event(), asyncio.Event()
    b = WorkflowBuilder("siblings", state=Box)

    @b.node()
    async def start(state: Box) -> None:
        return None

    @b.node()
    async def quick(state: Box) -> dict[str, Any]:
        await finish_quick.wait()
        return {}

    inner = sleeper(seen, started)
    b.add_subworkflow("slow", inner, inputs=[], outputs=["value"])
    b.set_entry("start")
    b.add_edge("start", "quick").add_edge("start", "slow")
    wf = b.build()
    async with Runtime(store_factory(), owner="A", lease_ttl=600) as a, \
            Runtime(store_factory(), owner="B") as other:
        running = asyncio.create_task(a.run(wf, {}, run_id="r1"))
        await started.wait()
        await other.store.cancel_run("r1")  # fenced; A's renewal will not notice for minutes
        finish_quick.set()  # quick's write is refused, which must stop 'slow' as well
        result = await asyncio.wait_for(running, 2)
    assert result.status is RunStatus.CANCELLED
    assert seen == ["started", "cancelled"]
