"""Schedules: each due tick starts one run across workers, after restarts too; catch-up modes."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import croniter  # noqa: F401  # imported at collection: its import runs `file` once
import pytest

from durable_flow import (
    END,
    Blackboard,
    InvalidInputError,
    RunStatus,
    Runtime,
    ScheduleInfo,
    Worker,
    WorkflowBuilder,
)
from durable_flow.model._clock import utcnow
from durable_flow.model._schedules import tick_run_id

EVERY_SECOND = "* * * * * *"


class Report(Blackboard):
    n: int = 0
    done: bool = False


def report(executed: collections.Counter[str]) -> Any:
    b = WorkflowBuilder("report", state=Report)

    @b.node()
    async def build(state: Report, ctx: Any) -> dict[str, Any]:
        executed[ctx.run_id] += 1
        return {"done": True}

    b.set_entry("build").add_edge("build", END)
    return b.build()


@asynccontextmanager
async def serving(worker: Worker) -> AsyncIterator[Worker]:
    task = asyncio.create_task(worker.serve())
    try:
        yield worker
    finally:
        await worker.stop()
        await asyncio.wait_for(task, 5)


async def test_schedule_list_pause_and_remove(store: Any) -> None:
    wf = report(collections.Counter())
    async with Runtime(store) as rt:
        info = await rt.schedule(wf, cron="0 9 * * 1-5", input={"n": 2}, schedule_id="daily",
                                 timezone="Europe/Paris", catch_up="all")
        assert isinstance(info, ScheduleInfo)
        assert (info.workflow_name, info.cron, info.timezone, info.catch_up, info.input) == \
            ("report", "0 9 * * 1-5", "Europe/Paris", "all", {"n": 2})
        assert info.next_tick is not None and info.next_tick > utcnow()
        assert info.next_tick.astimezone(__import__("zoneinfo").ZoneInfo("Europe/Paris")).hour == 9
        assert [s.schedule_id for s in await rt.schedules()] == ["daily"]
        paused = await rt.pause_schedule("daily")
        assert paused.paused
        resumed = await rt.pause_schedule("daily", paused=False)
        assert not resumed.paused and resumed.next_tick == info.next_tick
        assert await rt.unschedule("daily") is True
        assert await rt.unschedule("daily") is False
        assert await rt.schedules() == []


async def test_bad_schedules_change_nothing(store: Any) -> None:
    wf = report(collections.Counter())
    async with Runtime(store) as rt:
        for kwargs in ({"cron": "soon"}, {"cron": "* * * * *", "timezone": "Nowhere/At_All"},
                       {"cron": "* * * * *", "input": {"n": "many"}},
                       {"cron": "* * * * *", "catch_up": "sometimes"}):
            with pytest.raises(InvalidInputError):
                await rt.schedule(wf, schedule_id="bad", **{"input": None, **kwargs})
        with pytest.raises(InvalidInputError):
            await rt.pause_schedule("bad")
        assert await rt.schedules() == []


async def test_two_workers_start_each_tick_once(store_factory: Callable[[], Any]) -> None:
    executed: collections.Counter[str] = collections.Counter()
    wf = report(executed)
    async with Runtime(store_factory()) as rt:
        # catch_up="all": a tick a loaded machine starts late is still started, once
        await rt.schedule(wf, cron=EVERY_SECOND, input={"n": 1}, schedule_id="tick",
                          labels={"team": "ops"}, catch_up="all")
        # polls far apart: only waking at each tick starts runs within seconds
        async with Worker(store_factory(), [wf], poll_interval=60.0) as w1, \
                Worker(store_factory(), [wf], poll_interval=60.0) as w2, serving(w1), serving(w2):
            deadline = asyncio.get_running_loop().time() + 20.0
            while asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.5)
                if len([r for r in await rt.list_runs() if r.run_id.startswith("tick@")]) >= 3:
                    break
        runs = [r for r in await rt.list_runs() if r.run_id.startswith("tick@")]
        started = sorted(r.run_id for r in runs)
        assert len(started) >= 3  # a worker woke for each tick, not on its minute's poll
        assert len(set(started)) == len(started)
        # each tick's run carries the schedule's labels and its id: found by label
        assert all(r.labels == {"team": "ops", "schedule": "tick"} for r in runs)
        assert {r.run_id for r in await rt.list_runs(labels={"schedule": "tick"})} == set(started)
        assert all(count == 1 for count in executed.values()), executed
        info = (await rt.schedules())[0]
        assert info.last_tick is not None and tick_run_id("tick", info.last_tick) == started[-1]
        # the ticks follow one another with none left out
        ticks = [info.last_tick - timedelta(seconds=i) for i in range(len(started))]
        assert sorted(tick_run_id("tick", t) for t in ticks) == started


@pytest.mark.parametrize(("catch_up", "expected"), [("all", 4), ("one", 1), ("skip", 0)])
async def test_ticks_missed_while_no_worker_ran_follow_catch_up(
        store_factory: Callable[[], Any], catch_up: str, expected: int) -> None:
    executed: collections.Counter[str] = collections.Counter()
    wf = report(executed)
    store = store_factory()
    async with Runtime(store) as rt:
        # hourly, half an hour away from now: the latest missed tick is ~30 min late
        # whatever the time the test runs at (never inside the skip grace of a minute)
        minute = (datetime.now(UTC).minute + 30) % 60
        info = await rt.schedule(wf, cron=f"{minute} * * * *", input={}, schedule_id="q",
                                 catch_up=catch_up)  # type: ignore[arg-type]
        # as if the fleet was down for four hours: four ticks were missed
        assert info.next_tick is not None
        await store.set_schedule_paused("q", False, info.next_tick - timedelta(hours=4))
        async with Worker(store_factory(), [wf], poll_interval=0.2) as w, serving(w):
            for _ in range(100):
                if sum(executed.values()) >= expected and (await rt.schedules())[0].next_tick \
                        == info.next_tick:
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)
        runs = [r for r in await rt.list_runs() if r.run_id.startswith("q@")]
        assert len(runs) == expected
        assert all(r.status is RunStatus.COMPLETED for r in runs)
        assert (await rt.schedules())[0].next_tick == info.next_tick  # caught up to now


async def test_a_restarted_worker_does_not_start_a_tick_again(
        store_factory: Callable[[], Any]) -> None:
    executed: collections.Counter[str] = collections.Counter()
    wf = report(executed)
    async with Runtime(store_factory()) as rt:
        await rt.schedule(wf, cron=EVERY_SECOND, input={}, schedule_id="r")
        for _ in range(3):  # three short lives, one after the other
            async with Worker(store_factory(), [wf], poll_interval=5.0) as w, serving(w):
                await asyncio.sleep(1.3)
        # and one that finds the next tick put back (a stale reader): the id holds
        info = (await rt.schedules())[0]
        assert info.last_tick is not None
        await rt.store.set_schedule_paused("r", False, info.last_tick)
        async with Worker(store_factory(), [wf], poll_interval=5.0) as w, serving(w):
            await asyncio.sleep(0.5)
        started = [r.run_id for r in await rt.list_runs() if r.run_id.startswith("r@")]
        assert len(started) >= 3 and len(set(started)) == len(started)
        assert all(count == 1 for count in executed.values()), executed


async def test_a_worker_without_the_workflow_leaves_the_schedule_alone(
        store_factory: Callable[[], Any]) -> None:
    wf = report(collections.Counter())
    other = WorkflowBuilder("other", state=Report)
    other.add_node("x", lambda state: None).set_entry("x").add_edge("x", END)
    async with Runtime(store_factory()) as rt:
        info = await rt.schedule(wf, cron=EVERY_SECOND, input={}, schedule_id="s")
        async with Worker(store_factory(), [other.build()], poll_interval=0.1) as w, serving(w):
            await asyncio.sleep(1.5)
        assert [r for r in await rt.list_runs() if r.run_id.startswith("s@")] == []
        assert (await rt.schedules())[0].next_tick == info.next_tick


async def test_a_schedule_added_while_a_worker_serves_starts_on_time(
        store_factory: Callable[[], Any]) -> None:
    executed: collections.Counter[str] = collections.Counter()
    wf = report(executed)
    store = store_factory()  # the same object: the schedule wakes this process's worker
    async with Runtime(store) as rt, Worker(store, [wf], poll_interval=30.0) as w, serving(w):
        await asyncio.sleep(0.2)  # idle, in its 30 s poll
        await rt.schedule(wf, cron=EVERY_SECOND, input={}, schedule_id="late")
        for _ in range(60):
            if executed:
                break
            await asyncio.sleep(0.05)
        assert executed, "the tick waited for the poll"
