"""Answers recorded while the run runs other branches are never stranded.

An answer to a request that is answerable while the run executes (a parked
task's, or one inside a ``waits="branch"`` sub-workflow) may land after the
engine last looked and before it saves the run ``waiting``: the run must then
go on (in process for ``run``/``resume``, or ``queued`` for a worker), never
``waiting`` on nothing.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import pytest

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


def answering_mid_superstep(rt: Runtime, parent: str, child: str) -> Workflow:
    inner = WorkflowBuilder("inner", state=S, waits=child)  # type: ignore[arg-type]

    async def approve(s: S, ctx: NodeContext) -> dict[str, Any]:
        return {"answer": await ctx.request({"question": "fine?"}, response_type=str)}

    inner.add_node("approve", approve).set_entry("approve").add_edge("approve", END)
    outer = WorkflowBuilder("outer", state=S, waits=parent)  # type: ignore[arg-type]

    async def slow(s: S, ctx: NodeContext) -> dict[str, Any]:
        for _ in range(200):  # the inner request exists: answer it while this task runs
            if pending := await rt.pending_requests():
                break
            await asyncio.sleep(0.02)
        info = await rt.respond(ctx.run_id, {pending[0].id: "yes"})
        assert info.status is RunStatus.RUNNING
        await asyncio.sleep(0.05)
        return {"log": ["slow"]}

    outer.add_node("start", lambda s: {"log": ["start"]}).add_node("slow", slow)
    outer.add_subworkflow("review", inner.build(), inputs=["log"], outputs=["answer"])
    outer.set_entry("start").add_edge("start", "review").add_edge("start", "slow")
    outer.add_edge("review", END).add_edge("slow", END)
    return outer.build()


@pytest.mark.parametrize(("parent", "child"), [("superstep", "branch"), ("branch", "branch"),
                                               ("branch", "superstep")])
async def test_an_inner_answer_given_mid_superstep_is_taken(rt: Runtime, parent: str,
                                                            child: str) -> None:
    wf = answering_mid_superstep(rt, parent, child)
    r = await rt.run(wf, {}, run_id="mid")
    assert r.status is RunStatus.COMPLETED, (r.status, r.error)
    assert r.state.answer == "yes" and "slow" in r.state.log
    assert await rt.pending_requests() == []
    info = await rt.get_run("mid")
    assert info.status is RunStatus.COMPLETED and info.wake_at is None
