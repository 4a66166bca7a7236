"""A ``waits="branch"`` sub-workflow with several parked tasks: each answer lets its branch go on.

Whatever the parent's waits, answering one of two parked requests inside the
sub-workflow runs that inner task (and what follows it) while the other
request stays open; answering the other then finishes the sub-workflow.
"""

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
    append,
)


class S(Blackboard):
    log: Annotated[list[str], append] = []


def two_askers_inside(parent: str) -> Workflow:
    inner = WorkflowBuilder("inner", state=S, waits="branch")

    def asker(name: str) -> Any:
        async def ask(s: S, ctx: NodeContext) -> dict[str, Any]:
            answer = await ctx.request({"question": f"{name}?"}, response_type=str)
            return {"log": [f"{name}={answer}"]}
        return ask

    inner.add_node("split", lambda s: {"log": ["split"]})
    inner.add_node("ask1", asker("ask1")).add_node("ask2", asker("ask2"))
    inner.add_node("after1", lambda s: {"log": ["after1"]})
    inner.set_entry("split").add_edge("split", "ask1").add_edge("split", "ask2")
    inner.add_edge("ask1", "after1")
    outer = WorkflowBuilder("outer", state=S, waits=parent)  # type: ignore[arg-type]
    outer.add_subworkflow("review", inner.build(), inputs=["log"], outputs=["log"])
    outer.add_node("done", lambda s: {"log": ["done"]})
    outer.set_entry("review").add_edge("review", "done").add_edge("done", END)
    return outer.build()


@pytest.mark.parametrize("parent", ["superstep", "branch"])
async def test_one_of_two_inner_parked_answers_runs_its_branch(rt: Runtime, parent: str) -> None:
    wf = two_askers_inside(parent)
    r = await rt.run(wf, {}, run_id="in2")
    ids = sorted(q.id for q in r.pending_requests)
    assert ids == ["review@1/ask1@2#0", "review@1/ask2@2#0"]
    assert (await rt.respond("in2", {ids[0]: "yes"})).status is RunStatus.QUEUED
    r = await rt.resume(wf, "in2")
    assert r.status is RunStatus.WAITING
    assert [q.id for q in r.pending_requests] == [ids[1]]
    inside = (await rt.get_state("in2")).subworkflows["review"]
    assert list(inside.values["log"]) == ["split", "ask1=yes", "after1"]
    again = await rt.resume(wf, "in2")  # nothing new: it stays waiting, nothing runs twice
    assert again.status is RunStatus.WAITING
    assert list((await rt.get_state("in2")).subworkflows["review"].values["log"]) == [
        "split", "ask1=yes", "after1"]
    done = await rt.resume(wf, "in2", responses={ids[1]: "no"})
    assert done.status is RunStatus.COMPLETED, done.error
    assert sorted(done.state.log) == sorted(["split", "ask1=yes", "after1", "ask2=no", "done"])
    assert done.state.log[-1] == "done"
