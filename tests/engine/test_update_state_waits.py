"""``update_state`` keeps open requests open, in either waits mode (parked ones included)."""

from __future__ import annotations

import collections
from typing import Any

import pytest
from parkkit import fork_join

from durable_flow import (
    END,
    Blackboard,
    InvalidInputError,
    NodeContext,
    RunStatus,
    Runtime,
    WorkflowBuilder,
)


class Note(Blackboard):
    note: str = ""
    answer: str = ""


def asking(waits: str = "superstep") -> Any:
    b = WorkflowBuilder("upd-asking", state=Note, waits=waits)  # type: ignore[arg-type]

    @b.node()
    async def ask(state: Note, ctx: NodeContext) -> dict[str, Any]:
        answer = await ctx.request({"question": "ok?"}, response_type=str)
        return {"answer": f"{answer} ({state.note})"}

    b.set_entry("ask")
    b.add_edge("ask", END)
    return b.build()


async def test_update_state_keeps_the_open_request_of_a_waiting_run(rt: Runtime) -> None:
    wf = asking()
    waiting = await rt.run(wf, {}, run_id="us1")
    (req,) = waiting.pending_requests
    await rt.update_state(wf, "us1", {"note": "edited"})
    info = (await rt.list_runs())[0]
    assert info.status is RunStatus.WAITING
    assert [p.id for p in await rt.pending_requests()] == [req.id]
    assert [p.id for p in (await rt.get_state("us1")).pending_requests] == [req.id]
    done = await rt.resume(wf, "us1", responses={req.id: "yes"})
    assert done.status is RunStatus.COMPLETED, done.error
    assert done.state.answer == "yes (edited)"  # the task ran again on the updated state


async def test_respond_after_update_state_queues_the_run(rt: Runtime) -> None:
    wf = asking()
    waiting = await rt.run(wf, {}, run_id="us2")
    (req,) = waiting.pending_requests
    await rt.update_state(wf, "us2", {"note": "n"})
    info = await rt.respond("us2", {req.id: "fine"})
    assert info.status is RunStatus.QUEUED
    done = await rt.resume(wf, "us2")
    assert done.state.answer == "fine (n)"


async def test_update_state_as_a_node_drops_the_heads_own_request(rt: Runtime) -> None:
    wf = asking()
    await rt.run(wf, {}, run_id="us3")
    await rt.update_state(wf, "us3", {"answer": "by hand"}, as_node="ask")
    assert await rt.pending_requests() == []
    assert (await rt.list_runs())[0].status is RunStatus.COMPLETED


async def test_update_state_on_a_run_waiting_on_a_parked_task_keeps_it_waiting(
        rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = fork_join(calls)
    r = await rt.run(wf, {}, run_id="us4")
    (req,) = r.pending_requests
    assert r.status is RunStatus.WAITING and not r.state.joined
    await rt.update_state(wf, "us4", {"log": ["by hand"]})
    info = (await rt.list_runs())[0]
    assert info.status is RunStatus.WAITING
    snap = await rt.get_state("us4")
    assert [p.node for p in snap.parked] == ["ask"]
    assert [p.id for p in snap.pending_requests] == [req.id]
    assert [p.id for p in await rt.pending_requests()] == [req.id]
    done = await rt.resume(wf, "us4", responses={req.id: "yes"})
    assert done.status is RunStatus.COMPLETED, done.error
    assert done.state.answer == "yes" and done.state.joined
    assert calls["ask"] == 2 and calls["join"] == 1
    assert "by hand" in done.state.log


async def test_update_state_then_respond_queues_a_parked_run(rt: Runtime) -> None:
    wf = fork_join()
    r = await rt.run(wf, {}, run_id="us5")
    (req,) = r.pending_requests
    await rt.update_state(wf, "us5", {"log": ["x"]})
    assert (await rt.respond("us5", {req.id: "ok"})).status is RunStatus.QUEUED
    # an answered parked task would be left waiting by a new head: refused until resumed
    with pytest.raises(InvalidInputError, match="answered parked task 'ask'"):
        await rt.update_state(wf, "us5", {"log": ["y"]})
    done = await rt.resume(wf, "us5")
    assert done.status is RunStatus.COMPLETED and done.state.answer == "ok"
