"""Workers: submitted runs are claimed by priority then age, executed, answered and given back."""

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
    InvalidResponseError,
    MemoryStore,
    RunStatus,
    Runtime,
    Worker,
    WorkflowBuilder,
)


class Job(Blackboard):
    name: str = ""
    log: list[str] = []
    approved: bool = False


def two_steps(order: list[str], *, pause: float = 0.0, version: str = "1") -> Any:
    b = WorkflowBuilder("jobs", state=Job, version=version)

    @b.node()
    async def first(state: Job) -> dict[str, Any]:
        order.append(state.name)
        await asyncio.sleep(pause)
        return {"log": [*state.log, f"first@v{version}"]}

    @b.node()
    async def second(state: Job) -> dict[str, Any]:
        return {"log": [*state.log, "second"]}

    b.set_entry("first").add_edge("first", "second").add_edge("second", END)
    return b.build()


def approval(calls: collections.Counter[str]) -> Any:
    b = WorkflowBuilder("approve", state=Job)

    @b.node()
    async def ask(state: Job, ctx: Any) -> dict[str, Any]:
        ok = await ctx.request({"q": f"ship {state.name}?"}, response_type=bool)
        calls["answered"] += 1
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
        await asyncio.wait_for(task, 5)  # serve returns once stopped


async def test_submitted_runs_are_executed_by_a_worker(store_factory: Callable[[], Any]) -> None:
    order: list[str] = []
    wf = two_steps(order)
    async with Runtime(store_factory()) as rt:
        infos = [await rt.submit(wf, {"name": f"j{i}"}) for i in range(5)]
        assert all(i.status is RunStatus.QUEUED for i in infos)
        async with Worker(store_factory(), [wf], poll_interval=0.05) as worker, serving(worker):
            done = [await rt.wait(i.run_id, timeout=10) for i in infos]
        assert all(d.status is RunStatus.COMPLETED for d in done)
        for info in infos:
            state = await rt.get_state(info.run_id)
            assert state.values["log"] == ["first@v1", "second"]
    assert sorted(order) == [f"j{i}" for i in range(5)]


async def test_claims_take_priority_then_age(store_factory: Callable[[], Any]) -> None:
    order: list[str] = []
    wf = two_steps(order)
    async with Runtime(store_factory()) as rt:
        for name, priority in [("old-low", 0), ("high", 5), ("new-low", 0), ("mid", 1)]:
            await rt.submit(wf, {"name": name}, priority=priority)
            await asyncio.sleep(0.002)  # distinct creation times
        async with Worker(store_factory(), [wf], concurrency=1, poll_interval=0.05) as w, \
                serving(w):
            for run in await rt.list_runs():
                await rt.wait(run.run_id, timeout=10)
    assert order == ["high", "mid", "old-low", "new-low"]


async def test_no_more_than_concurrency_runs_at_once(store_factory: Callable[[], Any]) -> None:
    live = 0
    peak = 0
    b = WorkflowBuilder("slow", state=Job)

    @b.node()
    async def work(state: Job) -> dict[str, Any]:
        nonlocal live, peak
        live += 1
        peak = max(peak, live)
        await asyncio.sleep(0.05)
        live -= 1
        return {}

    b.set_entry("work").add_edge("work", END)
    wf = b.build()
    async with Runtime(store_factory()) as rt:
        infos = [await rt.submit(wf, {"name": str(i)}) for i in range(7)]
        async with Worker(store_factory(), [wf], concurrency=2, poll_interval=0.02) as w, \
                serving(w):
            for info in infos:
                assert (await rt.wait(info.run_id, timeout=10)).status is RunStatus.COMPLETED
    assert peak == 2


async def test_runs_of_unknown_workflows_stay_queued(store_factory: Callable[[], Any]) -> None:
    known, other = two_steps([]), approval(collections.Counter())
    async with Runtime(store_factory()) as rt:
        theirs = await rt.submit(other, {"name": "x"})
        mine = await rt.submit(known, {"name": "y"})
        await rt.submit(other, {"name": "z"})  # a second run of the same unknown version
        async with Worker(store_factory(), [known], poll_interval=0.02) as w, serving(w):
            assert (await rt.wait(mine.run_id, timeout=10)).status is RunStatus.COMPLETED
            await asyncio.sleep(0.1)
        assert (await rt.get_run(theirs.run_id)).status is RunStatus.QUEUED
        assert w.unknown == {("approve", "1")}  # noticed, and logged once for both runs


async def test_each_run_executes_on_the_version_that_started_it(
    store_factory: Callable[[], Any],
) -> None:
    order: list[str] = []
    v1, v2 = two_steps(order, version="1"), two_steps(order, version="2")
    async with Runtime(store_factory()) as rt:
        old = await rt.submit(v1, {"name": "old"})
        new = await rt.submit(v2, {"name": "new"})
        assert (old.workflow_version, new.workflow_version) == ("1", "2")
        async with Worker(store_factory(), [v1, v2], poll_interval=0.02) as w, serving(w):
            await rt.wait(old.run_id, timeout=10)
            await rt.wait(new.run_id, timeout=10)
        assert (await rt.get_state(old.run_id)).values["log"] == ["first@v1", "second"]
        assert (await rt.get_state(new.run_id)).values["log"] == ["first@v2", "second"]


async def test_respond_queues_an_answered_run_for_a_worker(
    store_factory: Callable[[], Any],
) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = approval(calls)
    async with Runtime(store_factory()) as rt:
        info = await rt.submit(wf, {"name": "a"})
        async with Worker(store_factory(), [wf], poll_interval=0.02) as w, serving(w):
            waiting = await rt.wait(info.run_id, timeout=10)
            assert waiting.status is RunStatus.WAITING
            [req] = await rt.pending_requests()
            before = await rt.get_run(info.run_id)
            with pytest.raises(InvalidResponseError):  # checked against the stored schema
                await rt.respond(info.run_id, {req.id: "not a bool"})
            assert await rt.get_run(info.run_id) == before
            queued = await rt.respond(info.run_id, {req.id: True})
            assert queued.status in (RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.COMPLETED)
            done = await rt.wait(info.run_id, timeout=10)
        assert done.status is RunStatus.COMPLETED and calls["answered"] == 1
        assert (await rt.get_state(info.run_id)).values["approved"] is True
        again = await rt.respond(info.run_id, {req.id: True})  # a repeat: a no-op
        assert again.status is RunStatus.COMPLETED and calls["answered"] == 1
        with pytest.raises(InvalidInputError):
            await rt.respond(info.run_id, {})


async def test_stop_gives_unfinished_runs_back_to_the_queue(
    store_factory: Callable[[], Any],
) -> None:
    order: list[str] = []
    slow = two_steps(order, pause=5.0)
    async with Runtime(store_factory()) as rt:
        info = await rt.submit(slow, {"name": "long"})
        worker = Worker(store_factory(), [slow], poll_interval=0.02, grace_period=0.1)
        async with worker:
            task = asyncio.create_task(worker.serve())
            while not order:
                await asyncio.sleep(0.01)
            await worker.stop()
            await task
        record = await rt.get_run(info.run_id)
        assert record.status is RunStatus.QUEUED
        fast = two_steps(order)
        async with Worker(store_factory(), [fast], poll_interval=0.02) as w2, serving(w2):
            assert (await rt.wait(info.run_id, timeout=10)).status is RunStatus.COMPLETED
    assert order == ["long", "long"]


async def test_a_run_cancelled_elsewhere_stops_on_its_worker(
    store_factory: Callable[[], Any],
) -> None:
    order: list[str] = []
    slow = two_steps(order, pause=30.0)
    async with Runtime(store_factory()) as rt:
        info = await rt.submit(slow, {"name": "doomed"})
        async with Worker(store_factory(), [slow], lease_ttl=0.3, poll_interval=0.02) as w, \
                serving(w):
            while not order:
                await asyncio.sleep(0.01)
            assert (await rt.cancel(info.run_id)).status is RunStatus.CANCELLED
            for _ in range(100):
                if not w.running:
                    break
                await asyncio.sleep(0.02)
            assert w.running == []  # stopped within about one renewal
        assert (await rt.get_run(info.run_id)).status is RunStatus.CANCELLED


async def test_a_run_whose_holder_died_is_taken_over(store_factory: Callable[[], Any]) -> None:
    order: list[str] = []
    wf = two_steps(order, pause=0.0)
    store = store_factory()
    async with Runtime(store, lease_ttl=0.2) as dead:
        stuck = asyncio.create_task(dead.run(two_steps([], pause=30.0), {"name": "x"},
                                             run_id="orphan"))
        await asyncio.sleep(0.1)
        stuck.cancel()  # the caller is gone; the lease is released, the run stays running
        with pytest.raises(asyncio.CancelledError):
            await stuck
        assert (await dead.get_run("orphan")).status is RunStatus.RUNNING
        async with Worker(store_factory(), [wf], poll_interval=0.02) as w, serving(w):
            assert (await dead.wait("orphan", timeout=10)).status is RunStatus.COMPLETED


async def test_wait_times_out_and_checks_its_argument(rt: Runtime) -> None:
    info = await rt.submit(two_steps([]), {"name": "never"})
    with pytest.raises(TimeoutError):
        await rt.wait(info.run_id, timeout=0.05)
    with pytest.raises(InvalidInputError):
        await rt.wait(info.run_id, timeout=-1)


def test_worker_arguments_are_checked() -> None:
    from durable_flow import MemoryStore

    wf = two_steps([])
    for kwargs in ({"concurrency": 0}, {"poll_interval": float("nan")}, {"grace_period": -1}):
        with pytest.raises(InvalidInputError):
            Worker(MemoryStore(), [wf], **kwargs)
    with pytest.raises(InvalidInputError):
        Worker(MemoryStore(), [])
    with pytest.raises(InvalidInputError):
        Worker(MemoryStore(), [wf, wf])


class _ListeningMemoryStore(MemoryStore):
    """A memory store that, like PostgreSQL, hears runs queued by other processes."""

    def __init__(self) -> None:
        super().__init__()
        self.wakes: list[Callable[[], None]] = []

    async def listen(self, wake: Callable[[], None]) -> None:
        self.wakes.append(wake)


class _OtherProcess:
    """The same data seen through another object: its submits wake no worker of ``store``."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


async def test_a_worker_listens_and_wakes_when_its_store_hears_of_a_run() -> None:
    store = _ListeningMemoryStore()
    wf = two_steps([])
    async with Worker(store, [wf], poll_interval=30) as w, serving(w), \
            Runtime(_OtherProcess(store)) as elsewhere:  # type: ignore[arg-type]
        for _ in range(100):
            if store.wakes:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # the worker found nothing and sleeps for its poll interval
        info = await elsewhere.submit(wf, {"name": "heard"})
        [wake] = store.wakes
        wake()
        assert (await elsewhere.wait(info.run_id, timeout=5)).status is RunStatus.COMPLETED
