"""Limits across workers: concurrency and rate hold, dead workers' grants return, waits are visible."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from durable_flow import (
    END,
    Blackboard,
    InvalidInputError,
    Limit,
    RunStatus,
    Runtime,
    Worker,
    WorkflowBuilder,
)
from durable_flow.runtime._limits import limit_waits


class Call(Blackboard):
    n: int = 0


class Journal:
    """When each call began and ended (monotonic seconds), and how many ran at once."""

    def __init__(self) -> None:
        self.spans: list[tuple[float, float]] = []
        self.active = 0
        self.peak = 0

    def peak_from_spans(self) -> int:
        edges = sorted([(s, 1) for s, _ in self.spans] + [(e, -1) for _, e in self.spans],
                       key=lambda p: (p[0], p[1]))
        now = top = 0
        for _, step in edges:
            now += step
            top = max(top, now)
        return top


def calling(journal: Journal, *, seconds: float = 0.15, uses: tuple[str, ...] = ("api",)) -> Any:
    b = WorkflowBuilder("calls", state=Call)

    @b.node(uses=uses)
    async def call(state: Call) -> dict[str, Any]:
        began = time.monotonic()
        journal.active += 1
        journal.peak = max(journal.peak, journal.active)
        try:
            await asyncio.sleep(seconds)
        finally:
            journal.active -= 1
            journal.spans.append((began, time.monotonic()))
        return {"n": 1}

    b.set_entry("call").add_edge("call", END)
    return b.build()


@asynccontextmanager
async def serving(*workers: Worker) -> AsyncIterator[None]:
    tasks = [asyncio.create_task(w.serve()) for w in workers]
    try:
        yield
    finally:
        for w in workers:
            await w.stop()
        await asyncio.wait_for(asyncio.gather(*tasks), 10)


async def _finish(rt: Runtime, ids: list[str]) -> None:
    for run_id in ids:
        info = await rt.wait(run_id, timeout=60)
        assert info.status is RunStatus.COMPLETED, info


async def test_concurrency_holds_across_two_workers(store_factory: Callable[[], Any]) -> None:
    journal = Journal()
    wf = calling(journal)
    limits = {"api": Limit(concurrency=2)}
    async with Runtime(store_factory()) as rt:
        ids = [(await rt.submit(wf, {}, run_id=f"c{i}")).run_id for i in range(10)]
        async with Worker(store_factory(), [wf], poll_interval=0.05, limits=limits) as w1, \
                Worker(store_factory(), [wf], poll_interval=0.05, limits=limits) as w2, \
                serving(w1, w2):
            await _finish(rt, ids)
    assert len(journal.spans) == 10
    assert journal.peak == 2 == journal.peak_from_spans()


async def test_a_rate_window_holds(store_factory: Callable[[], Any]) -> None:
    journal = Journal()
    wf = calling(journal, seconds=0.01)
    async with Runtime(store_factory()) as rt:
        ids = [(await rt.submit(wf, {}, run_id=f"r{i}")).run_id for i in range(6)]
        async with Worker(store_factory(), [wf], poll_interval=0.05,
                          limits={"api": Limit(per_second=2)}) as w, serving(w):
            await _finish(rt, ids)
    starts = sorted(s for s, _ in journal.spans)
    # no three calls began within one second of each other (less the time a granted
    # task takes to start its node, which varies from one task to the next)
    gaps = [later - first for first, later in zip(starts, starts[2:], strict=False)]
    assert min(gaps) >= 0.7, gaps  # a loaded machine delays some starts a little
    assert starts[-1] - starts[0] >= 1.9  # six calls at two a second: three windows


async def test_a_dead_workers_grant_returns_after_its_lease(
        store_factory: Callable[[], Any]) -> None:
    journal = Journal()
    wf = calling(journal, seconds=0.01)
    store = store_factory()
    await store.setup()
    # a worker took the only slot and died: its grant counts until its lease runs out
    taken = await store.request_grant("dead-grant", "api", run_id="gone", task="call",
                                      owner="dead-worker", ttl=1.0, concurrency=1,
                                      per_second=None, per_minute=None)
    assert taken.granted
    async with Runtime(store_factory()) as rt:
        await rt.submit(wf, {}, run_id="after")
        t0 = time.monotonic()
        async with Worker(store_factory(), [wf], poll_interval=0.05,
                          limits={"api": Limit(concurrency=1)}) as w, serving(w):
            await _finish(rt, ["after"])
        waited = time.monotonic() - t0
    assert 0.5 <= waited < 10.0
    assert len(journal.spans) == 1


async def test_a_waiting_task_is_visible_and_holds_only_its_own_run(
        store_factory: Callable[[], Any]) -> None:
    journal = Journal()
    wf = calling(journal, seconds=0.01)
    store = store_factory()
    await store.setup()
    await store.request_grant("held", "api", run_id="other", task="call", owner="someone",
                              ttl=30.0, concurrency=1, per_second=None, per_minute=None)
    async with Runtime(store_factory()) as rt:
        await rt.submit(wf, {}, run_id="blocked")
        async with Worker(store_factory(), [wf], poll_interval=0.05,
                          limits={"api": Limit(concurrency=1)}) as w, serving(w):
            for _ in range(100):
                waits = await store.run_grants("blocked")
                if waits:
                    break
                await asyncio.sleep(0.05)
            [wait] = waits
            assert (wait["name"], wait["task"], wait["granted_at"]) == ("api", "call", None)
            use = await store.limit_use("api")
            assert (use.in_use, use.waiting) == (1, 1)
            [shown] = await limit_waits(store, "blocked")
            assert shown.describe() == "waiting for api: 1 of 1 in use (node call)"
            assert (await rt.get_run("blocked")).status is RunStatus.RUNNING
            assert w.running == ["blocked"]  # it holds its run's lease, and nothing else
            await store.release_grant("held", "api")
            await _finish(rt, ["blocked"])
        assert await store.run_grants("blocked") == []
        assert await limit_waits(store, "blocked") == []
        assert (await store.limit_use("api")).in_use == 0


async def test_a_provider_pause_holds_every_task_of_the_limit(
        store_factory: Callable[[], Any]) -> None:
    from datetime import timedelta

    from durable_flow.model._clock import utcnow

    journal = Journal()
    wf = calling(journal, seconds=0.01)
    store = store_factory()
    await store.setup()
    await store.pace_limit("api", utcnow() + timedelta(seconds=1.0))
    async with Runtime(store_factory()) as rt:
        ids = [(await rt.submit(wf, {}, run_id=f"p{i}")).run_id for i in range(3)]
        t0 = time.monotonic()
        async with Worker(store_factory(), [wf], poll_interval=0.05,
                          limits={"api": Limit(concurrency=5)}) as w, serving(w):
            await _finish(rt, ids)
    assert min(s for s, _ in journal.spans) - t0 >= 0.8


def test_limits_are_checked_when_the_worker_is_made() -> None:
    from durable_flow import MemoryStore

    wf = calling(Journal(), uses=("api", "db"))
    with pytest.raises(InvalidInputError, match="db"):
        Worker(MemoryStore(), [wf], limits={"api": Limit(concurrency=1)})
    with pytest.raises(InvalidInputError, match="Limit"):
        Worker(MemoryStore(), [wf], limits={"api": 3})  # type: ignore[dict-item]
    for bad in ({}, {"concurrency": 0}, {"per_second": 0.5}, {"per_minute": float("inf")},
                {"concurrency": True}):
        with pytest.raises(InvalidInputError):
            Limit(**bad)


async def test_without_a_worker_a_node_with_uses_runs_at_once(store: Any) -> None:
    journal = Journal()
    async with Runtime(store) as rt:
        result = await rt.run(calling(journal, seconds=0.0), {})
    assert result.status is RunStatus.COMPLETED and len(journal.spans) == 1
