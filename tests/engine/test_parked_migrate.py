"""``check_upgrade`` and ``resume(migrate=True)`` cover parked tasks (``waits="branch"``)."""

from __future__ import annotations

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
    WorkflowMismatchError,
    append,
)


class S(Blackboard):
    log: Annotated[list[str], append] = []
    answer: str = ""


def versioned(version: str, ask_id: str, renames: dict[str, str] | None = None) -> Workflow:
    b = WorkflowBuilder("mig", state=S, waits="branch", version=version)

    async def ask(s: S, ctx: NodeContext) -> dict[str, Any]:
        first = await ctx.step("fetch", lambda: f"fetched by {ask_id}")
        answer = await ctx.request({"question": "ok?"}, response_type=str)
        return {"answer": f"{answer}, {first}", "log": [ask_id]}

    b.add_node("start", lambda s: {"log": ["start"]}).add_node(ask_id, ask)
    b.add_node("other", lambda s: {"log": ["other"]})
    b.set_entry("start").add_edge("start", ask_id).add_edge("start", "other")
    b.add_edge(ask_id, END).add_edge("other", END)
    if version != "1":
        b.migrate("1", lambda v: v, nodes=renames)
    return b.build()


async def test_a_parked_node_the_new_version_lacks_is_a_clear_problem(rt: Runtime) -> None:
    r = await rt.run(versioned("1", "ask"), {}, run_id="m1")
    assert r.status is RunStatus.WAITING
    v2 = versioned("2", "confirm")
    [problem] = await rt.check_upgrade(v2)
    assert "'ask'" in problem.reason and "parked" in problem.reason
    before = await rt.history("m1")
    with pytest.raises(WorkflowMismatchError, match="'ask'"):
        await rt.resume(v2, "m1", migrate=True, responses={"ask@2#0": "yes"})
    info = await rt.get_run("m1")
    assert info.status is RunStatus.WAITING and info.workflow_version == "1"
    assert await rt.history("m1") == before  # nothing was written


async def test_a_renamed_parked_task_goes_on_under_its_new_id(rt: Runtime) -> None:
    r = await rt.run(versioned("1", "ask"), {}, run_id="m2")
    assert [q.id for q in r.pending_requests] == ["ask@2#0"]
    v2 = versioned("2", "confirm", {"ask": "confirm"})
    assert await rt.check_upgrade(v2) == []
    snap = await rt.resume(v2, "m2", migrate=True)
    assert snap.status is RunStatus.WAITING
    assert [p.node for p in (await rt.get_state("m2")).parked] == ["confirm"]
    assert [q.id for q in await rt.pending_requests()] == ["ask@2#0"]
    done = await rt.resume(v2, "m2", responses={"ask@2#0": "yes"})
    assert done.status is RunStatus.COMPLETED, done.error
    # the step recorded by v1's task is not run again
    assert done.state.answer == "yes, fetched by ask" and "confirm" in done.state.log
    assert (await rt.get_run("m2")).workflow_version == "2"


def nested(version: str) -> Workflow:
    inner = WorkflowBuilder("inner", state=S)

    async def approve(s: S, ctx: NodeContext) -> dict[str, Any]:
        return {"answer": await ctx.request({"question": "fine?"}, response_type=str)}

    inner.add_node("approve", approve).set_entry("approve").add_edge("approve", END)
    b = WorkflowBuilder("nest", state=S, waits="branch", version=version)
    b.add_node("start", lambda s: {"log": ["start"]}).add_node("other", lambda s: {"log": ["o"]})
    b.add_subworkflow("review", inner.build(), inputs=["log"], outputs=["answer"])
    b.set_entry("start").add_edge("start", "review").add_edge("start", "other")
    b.add_edge("review", END).add_edge("other", END)
    if version != "1":
        b.migrate("1", lambda v: v)
    return b.build()


async def test_a_parked_sub_workflow_in_flight_is_refused_like_a_running_one(
        rt: Runtime) -> None:
    await rt.run(nested("1"), {}, run_id="m3")
    [problem] = await rt.check_upgrade(nested("2"))
    assert "'review'" in problem.reason and "in flight" in problem.reason
    with pytest.raises(WorkflowMismatchError, match="in flight"):
        await rt.resume(nested("2"), "m3", migrate=True)
    assert (await rt.get_run("m3")).workflow_version == "1"
