"""Pausing runs: never claimed while paused, stopped after the superstep in flight, unpaused."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from durable_flow import (
    END,
    Blackboard,
    InvalidInputError,
    RunStatus,
    Runtime,
    Worker,
    WorkflowBuilder,
)


class Job(Blackboard):
    name: str = ""
    log: list[str] = []
    approved: bool = False


def steps(calls: collections.Counter[str], n: int = 3, pause: float = 0.0) -> Any:
    """A chain of ``n`` nodes, each counting its runs and sleeping ``pause``."""
    b = WorkflowBuilder("chain", state=Job)
    names = [f"s{i}" for i in range(n)]
    for name in names:
        def make(node: str) -> Any:
            async def step(state: Job) -> dict[str, Any]:
                calls[node] += 1
                await asyncio.sleep(pause)
                return {"log": [*state.log, node]}
            step.__name__ = node
            return step
        b.add_node(name, make(name))
    b.set_entry(names[0])
    for a, c in zip(names, [*names[1:], END], strict=True):
        b.add_edge(a, c)
    return b.build()


def approval() -> Any:
    b = WorkflowBuilder("approve", state=Job)

    @b.node()
    async def ask(state: Job, ctx: Any) -> dict[str, Any]:
        ok = await ctx.request({"q": f"ship {state.name}?"}, response_type=bool)
        return {"approved": ok}

    b.set_entry("ask").add_edge("ask", END)
    return b.build()


@asynccontextmanager
async def serving(worker: Worker) -> AsyncIterator[Worker]:
    task = asyncio.create_task(worker.serve())
    try:
        yield worker
    finally:
        await worker.stop()
        await asyncio.wait_for(task, 5)


async def test_a_paused_run_is_never_claimed_until_unpaused(
        store_factory: Callable[[], Any]) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = steps(calls)
    async with Runtime(store_factory()) as rt:
        info = await rt.submit(wf, {"name": "a"})
        paused = await rt.pause(info.run_id, reason="provider outage", by="ops-alice")
        assert paused.status is RunStatus.PAUSED and paused.pause_reason == "provider outage"
        async with Worker(store_factory(), [wf], poll_interval=0.02) as w, serving(w):
            await asyncio.sleep(0.3)
            assert (await rt.get_run(info.run_id)).status is RunStatus.PAUSED
            assert not calls
            back = await rt.unpause(info.run_id, by="ops-bob")
            assert back.status is RunStatus.QUEUED and back.pause_reason is None
            done = await rt.wait(info.run_id, timeout=10)
        assert done.status is RunStatus.COMPLETED
        assert calls == {"s0": 1, "s1": 1, "s2": 1}
        kinds = [(d.kind, d.by, d.comment) for d in await rt.decisions(info.run_id)]
        assert kinds == [("pause", "ops-alice", "provider outage"), ("unpause", "ops-bob", None)]


async def test_pausing_twice_changes_nothing_and_final_runs_cannot_be_paused(
        store_factory: Callable[[], Any]) -> None:
    wf = steps(collections.Counter(), n=1)
    async with Runtime(store_factory()) as rt:
        info = await rt.submit(wf, {"name": "a"})
        await rt.pause(info.run_id, reason="first")
        again = await rt.pause(info.run_id, reason="second")
        assert again.pause_reason == "first"
        assert [d.kind for d in await rt.decisions(info.run_id)] == ["pause"]
        done = await rt.run(wf, {"name": "b"})
        with pytest.raises(InvalidInputError, match="completed"):
            await rt.pause(done.run_id)
        assert (await rt.get_run(done.run_id)).status is RunStatus.COMPLETED
        # unpausing a run that is not paused is a no-op, recorded as nothing
        assert (await rt.unpause(done.run_id)).status is RunStatus.COMPLETED
        assert await rt.decisions(done.run_id) == []


async def test_a_run_executing_here_stops_after_its_superstep_and_resumes_where_it_stopped(
        store_factory: Callable[[], Any]) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = steps(calls, n=4, pause=0.15)
    async with Runtime(store_factory()) as rt:
        task = asyncio.create_task(rt.run(wf, {"name": "a"}, run_id="r1"))
        while not calls:
            await asyncio.sleep(0.01)
        await rt.pause("r1", reason="look first")
        result = await asyncio.wait_for(task, 5)
        assert result.status is RunStatus.PAUSED
        assert calls == {"s0": 1}  # s0's superstep finished and committed; s1 never started
        assert result.state.log == ["s0"]
        await rt.unpause("r1")
        done = await rt.resume(wf, "r1")
        assert done.status is RunStatus.COMPLETED
        assert done.state.log == ["s0", "s1", "s2", "s3"]
        assert calls == {"s0": 1, "s1": 1, "s2": 1, "s3": 1}  # nothing repeated


async def test_a_run_on_a_worker_stops_within_one_lease_renewal(
        store_factory: Callable[[], Any]) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = steps(calls, n=6, pause=0.2)
    async with Runtime(store_factory()) as rt:
        info = await rt.submit(wf, {"name": "a"})
        async with Worker(store_factory(), [wf], poll_interval=0.02, lease_ttl=0.9) as w, \
                serving(w):
            while not calls:
                await asyncio.sleep(0.01)
            await rt.pause(info.run_id, reason="inspect")
            await asyncio.sleep(0.9)  # a renewal every lease_ttl / 3, and a superstep
            seen = sum(calls.values())
            record = await rt.store.get_run(info.run_id)
            assert record.status is RunStatus.PAUSED
            assert record.lease_owner is None  # the holder gave it back
            await asyncio.sleep(0.5)
            assert sum(calls.values()) == seen < 6  # no superstep after it stopped
            await rt.unpause(info.run_id)
            done = await rt.wait(info.run_id, timeout=10)
        assert done.status is RunStatus.COMPLETED
        assert all(n == 1 for n in calls.values()) and len(calls) == 6
        assert (await rt.get_state(info.run_id)).values["log"] == [f"s{i}" for i in range(6)]


async def test_answers_are_recorded_while_paused_and_the_run_goes_on_after_unpause(
        store_factory: Callable[[], Any]) -> None:
    wf = approval()
    async with Runtime(store_factory()) as rt:
        first = await rt.run(wf, {"name": "a"})
        assert first.status is RunStatus.WAITING
        await rt.pause(first.run_id)
        (req,) = first.pending_requests
        await rt.respond(first.run_id, {req.id: True})
        assert (await rt.get_run(first.run_id)).status is RunStatus.PAUSED
        back = await rt.unpause(first.run_id)
        assert back.status is RunStatus.QUEUED  # the answer came: it has work to do
        done = await rt.resume(wf, first.run_id)
        assert done.status is RunStatus.COMPLETED and done.state.approved is True
        # a paused run still waiting goes back to waiting
        second = await rt.run(wf, {"name": "b"})
        await rt.pause(second.run_id)
        assert (await rt.unpause(second.run_id)).status is RunStatus.WAITING


def flaky(calls: collections.Counter[str], broken: list[bool]) -> Any:
    """``ok`` and ``flaky`` run side by side, then ``after``; ``flaky`` raises while ``broken``."""
    b = WorkflowBuilder("flaky", state=Job, on_failure="pause")

    @b.node()
    async def start(state: Job) -> dict[str, Any]:
        calls["start"] += 1
        return {}

    @b.node()
    async def ok(state: Job) -> dict[str, Any]:
        calls["ok"] += 1
        return {"name": "ok"}

    @b.node()
    async def shaky(state: Job) -> dict[str, Any]:
        calls["shaky"] += 1
        if broken[0]:
            raise RuntimeError("provider down")
        return {"approved": True}

    @b.node()
    async def after(state: Job) -> dict[str, Any]:
        calls["after"] += 1
        return {"log": [*state.log, "after"]}

    b.set_entry("start").add_edge("start", "ok").add_edge("start", "shaky")
    b.add_fan_in(["ok", "shaky"], "after").add_edge("after", END)
    return b.build()


@pytest.mark.parametrize("how", ["unpause", "resume"])
async def test_on_failure_pause_dead_letters_and_runs_only_the_failed_task_again(
        store_factory: Callable[[], Any], how: str) -> None:
    calls: collections.Counter[str] = collections.Counter()
    broken = [True]
    wf = flaky(calls, broken)
    async with Runtime(store_factory()) as rt:
        result = await rt.run(wf, {}, run_id="dl")
        assert result.status is RunStatus.PAUSED
        info = await rt.get_run("dl")
        assert info.status is RunStatus.PAUSED
        assert info.error is not None and info.error.type == "RuntimeError"
        assert info.error.node == "shaky"
        assert await rt.select_runs(status="paused", error_type="RuntimeError") == ["dl"]
        broken[0] = False  # the fix
        if how == "unpause":
            assert (await rt.unpause("dl")).status is RunStatus.QUEUED
            async with Worker(store_factory(), [wf], poll_interval=0.02) as w, serving(w):
                done = await rt.wait("dl", timeout=10)
        else:
            done = await rt.get_run((await rt.resume(wf, "dl")).run_id)
        assert done.status is RunStatus.COMPLETED and done.error is None
        assert calls == {"start": 1, "ok": 1, "shaky": 2, "after": 1}
