"""Parked tasks with workers (memory, SQLite, PostgreSQL): answers while a worker runs the run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from parkkit import fork_join
from waitkit import eventually, serving

from durable_flow import RunStatus, Runtime, Worker


async def test_an_answer_while_a_worker_runs_other_branches_is_taken_without_a_pause(
        store_factory: Callable[[], Any]) -> None:
    wf = fork_join(delay={"w2": 1.0, "w3": 0.3})
    async with Runtime(store_factory()) as rt, \
            Worker(store_factory(), [wf], poll_interval=0.05) as worker, serving(worker):
        await rt.submit(wf, {}, run_id="wk1")

        async def asked() -> bool:
            return [q.id for q in await rt.pending_requests()] == ["ask@2#0"]

        await eventually(asked)  # parked, listed in the inbox while the run runs
        info = await rt.respond("wk1", {"ask@2#0": "from the inbox"})
        assert info.status is RunStatus.RUNNING  # recorded; the worker keeps the run
        done = await rt.wait("wk1", timeout=20)
        assert done.status is RunStatus.COMPLETED, done.error
        state = await rt.get_state("wk1")
        assert state.values["answer"] == "from the inbox" and state.values["joined"]
        # the run never stopped for the answer: no checkpoint of it was left waiting
        assert RunStatus.WAITING not in [c.status for c in await rt.history("wk1")]


async def test_a_run_left_with_only_parked_tasks_is_continued_by_a_worker_once_answered(
        store_factory: Callable[[], Any]) -> None:
    wf = fork_join()
    async with Runtime(store_factory()) as rt, \
            Worker(store_factory(), [wf], poll_interval=0.05) as worker, serving(worker):
        await rt.submit(wf, {}, run_id="wk2")
        waiting = await rt.wait("wk2", timeout=20)
        assert waiting.status is RunStatus.WAITING
        assert [p.node for p in (await rt.get_state("wk2")).parked] == ["ask"]
        await rt.respond("wk2", {"ask@2#0": "later"})
        done = await rt.wait("wk2", timeout=20)
        assert done.status is RunStatus.COMPLETED, done.error
        assert (await rt.get_state("wk2")).values["answer"] == "later"


async def test_a_parked_timer_of_a_waiting_run_wakes_it_on_a_worker(
        store_factory: Callable[[], Any]) -> None:
    async def nap(state: Any, ctx: Any) -> str:
        await ctx.sleep(0.5)
        return "rested"

    wf = fork_join(wait=nap)
    async with Runtime(store_factory()) as rt, \
            Worker(store_factory(), [wf], poll_interval=0.05) as worker, serving(worker):
        await rt.submit(wf, {}, run_id="wk3")
        await eventually(lambda: _status_is(rt, "wk3", RunStatus.COMPLETED), timeout=20)
        state = await rt.get_state("wk3")
        assert state.values["answer"] == "rested" and state.values["joined"]


async def _status_is(rt: Runtime, run_id: str, status: RunStatus) -> bool:
    record = await rt.store.get_run(run_id)
    return record is not None and record.status is status


async def test_a_parked_request_deadline_of_a_waiting_run_is_kept_by_a_worker(
        store_factory: Callable[[], Any]) -> None:
    async def ask(state: Any, ctx: Any) -> str:
        return str(await ctx.request({"question": "ok?"}, response_type=str, timeout=2.0,
                                     default="nobody answered"))

    wf = fork_join(wait=ask)
    async with Runtime(store_factory()) as rt, \
            Worker(store_factory(), [wf], poll_interval=0.05) as worker, serving(worker):
        await rt.submit(wf, {}, run_id="wk4")
        waiting = await rt.wait("wk4", timeout=20)
        assert waiting.status is RunStatus.WAITING and waiting.wake_at is not None
        await eventually(lambda: _status_is(rt, "wk4", RunStatus.COMPLETED), timeout=20)
        state = await rt.get_state("wk4")
        assert state.values["answer"] == "nobody answered" and state.values["joined"]
