"""A fork of a parking run taken while a sub-workflow of it is in flight.

The fork's first checkpoint anchors the parked task it brings along; when the
fork goes on inside the sub-workflow it moves onto a new checkpoint, and the
parked task must move with what is recorded for it: its request stays
answerable and the task runs once more, with the answer.
"""

from __future__ import annotations

import asyncio
import collections
from typing import Annotated, Any

from durable_flow import (
    END,
    Blackboard,
    NodeContext,
    RunStatus,
    Runtime,
    Workflow,
    WorkflowBuilder,
    append,
)


class S(Blackboard):
    log: Annotated[list[str], append] = []
    answer: str = ""


def forky(calls: collections.Counter[str], started: asyncio.Event,
          gate: asyncio.Event) -> Workflow:
    inner = WorkflowBuilder("inner", state=S)

    async def slow(s: S) -> dict[str, Any]:
        calls["slow"] += 1
        if calls["slow"] == 1:  # the source run's first call stays in flight
            started.set()
            await gate.wait()
        return {"log": ["slow"]}

    inner.add_node("slow", slow).set_entry("slow").add_edge("slow", END)
    b = WorkflowBuilder("forky", state=S, waits="branch")

    async def ask(s: S, ctx: NodeContext) -> dict[str, Any]:
        calls["ask"] += 1
        return {"answer": await ctx.request({"question": "ok?"}, response_type=str)}

    b.add_node("start", lambda s: {"log": ["start"]}).add_node("ask", ask)
    b.add_node("w1", lambda s: {"log": ["w1"]})
    b.add_subworkflow("sub", inner.build(), inputs=["log"], outputs=["log"])
    b.set_entry("start").add_edge("start", "ask").add_edge("start", "w1")
    b.add_edge("w1", "sub").add_edge("sub", END).add_edge("ask", END)
    return b.build()


async def test_a_fork_with_a_sub_workflow_in_flight_keeps_its_parked_request(
        rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    started, gate = asyncio.Event(), asyncio.Event()
    wf = forky(calls, started, gate)
    src = asyncio.create_task(rt.run(wf, {}, run_id="src"))
    try:
        await asyncio.wait_for(started.wait(), 30)
        head = (await rt.get_run("src")).head_checkpoint_id
        assert head is not None
        f = await rt.fork(wf, "src", head)
        assert f.status is RunStatus.WAITING, f.error
        assert [q.id for q in f.pending_requests] == ["ask@2#0"]
        assert "slow" in f.state.log and calls["ask"] == 1
        g = await rt.resume(wf, f.run_id, responses={"ask@2#0": "yes"})
        assert g.status is RunStatus.COMPLETED, g.error
        assert g.state.answer == "yes" and calls["ask"] == 2
        assert (await rt.get_state(f.run_id)).parked == ()
    finally:
        gate.set()
        r = await src
    assert r.status is RunStatus.WAITING and [q.id for q in r.pending_requests] == ["ask@2#0"]


def approve_beside_research() -> Workflow:
    b = WorkflowBuilder("fork-parked", state=S, waits="branch")

    async def approve(s: S, ctx: NodeContext) -> dict[str, Any]:
        ok = await ctx.request({"question": "publish?"}, response_type=bool)
        return {"log": ["approved" if ok else "rejected"]}

    def noting(name: str) -> Any:
        return lambda s: {"log": [name]}

    for name in ("start", "research", "digest", "join"):
        b.add_node(name, noting(name))
    b.add_node("approve", approve)
    b.set_entry("start").add_edge("start", "approve").add_edge("start", "research")
    b.add_edge("research", "digest").add_fan_in(["research", "approve"], "join")
    b.add_edge("join", END)
    return b.build()


async def test_a_fork_of_the_checkpoint_where_a_task_parked_lists_it_once(
        rt: Runtime) -> None:
    wf = approve_beside_research()
    r = await rt.run(wf, {}, run_id="fp")
    assert r.status is RunStatus.WAITING
    parked_at = next(c for c in reversed(await rt.history("fp")) if "research" in c.nodes)
    f = await rt.fork(wf, "fp", parked_at.id)
    snap = await rt.get_state(f.run_id)
    assert [(p.node, p.since_superstep) for p in snap.parked] == [("approve", 2)]
    assert [q.id for q in f.pending_requests] == ["approve@2#0"]
    done = await rt.resume(wf, f.run_id, responses={"approve@2#0": True})
    assert done.status is RunStatus.COMPLETED, done.error
    assert list(done.state.log) == ["start", "research", "digest", "approved", "join"]


async def test_going_on_inside_a_sub_workflow_writes_a_resume_checkpoint(rt: Runtime) -> None:
    inner = WorkflowBuilder("inner", state=S)

    async def approve(s: S, ctx: NodeContext) -> dict[str, Any]:
        return {"answer": await ctx.request({"question": "fine?"}, response_type=str)}

    inner.add_node("approve", approve).set_entry("approve").add_edge("approve", END)
    b = WorkflowBuilder("outer", state=S)
    b.add_subworkflow("review", inner.build(), inputs=["log"], outputs=["answer"])
    b.set_entry("review").add_edge("review", END)
    wf = b.build()
    r = await rt.run(wf, {}, run_id="rs")
    [req] = r.pending_requests
    done = await rt.resume(wf, "rs", responses={req.id: "ok"})
    assert done.status is RunStatus.COMPLETED and done.state.answer == "ok"
    top = await rt.history("rs")
    resumed = [c for c in top if c.source == "resume"]
    assert len(resumed) == 1  # the run went on inside the sub-workflow: same superstep
    [paused] = [c for c in top if c.id == resumed[0].parent_id]
    assert paused.superstep == resumed[0].superstep and paused.id == r.checkpoint_id
    assert "resume" in {c.source for c in await rt.history("rs", namespace="review")}
