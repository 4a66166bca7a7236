"""Parked tasks in other shapes: ``Send`` instances, sub-workflows, forks (every store)."""

from __future__ import annotations

import collections
from typing import Annotated, Any

from parkkit import Board, fork_join

from durable_flow import (
    END,
    Blackboard,
    Command,
    NodeContext,
    RunStatus,
    Runtime,
    Send,
    Workflow,
    WorkflowBuilder,
    append,
)


class Lines(Blackboard):
    items: list[int] = []
    approved: Annotated[list[int], append] = []
    charged: Annotated[list[str], append] = []
    audited: bool = False
    totals: Annotated[list[int], append] = []


def approvals(calls: collections.Counter[str], side_effects: list[str]) -> Workflow:
    """split -> check[i] (asks for items over 100, charges each) and audit; fan-in -> total."""
    b = WorkflowBuilder("approvals", state=Lines, waits="branch")

    @b.node(goto=["check", "audit"])
    def split(state: Lines) -> Command:
        return Command(goto=[*(Send("check", amount) for amount in state.items), "audit"])

    async def check(state: Lines, ctx: NodeContext) -> dict[str, Any]:
        calls[ctx.node] += 1

        def charge() -> str:
            side_effects.append(ctx.node)
            return f"{ctx.node}:{ctx.arg}"

        receipt = await ctx.step("charge", charge)
        if ctx.arg > 100 and not await ctx.request({"amount": ctx.arg}, response_type=bool):
            return {"charged": [receipt]}
        return {"approved": [ctx.arg], "charged": [receipt]}

    b.add_node("check", check, arg_type=int)
    b.add_node("audit", lambda s: {"audited": True})
    b.add_node("total", lambda s: {"totals": [sum(s.approved)]})
    b.set_entry("split").add_fan_in(["check", "audit"], "total").add_edge("total", END)
    return b.build()


async def test_send_instances_park_and_finish_one_by_one_and_the_fan_in_waits_for_all(
        rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    charged: list[str] = []
    wf = approvals(calls, charged)
    r = await rt.run(wf, {"items": [5, 500, 7, 900]}, run_id="s1")
    assert r.status is RunStatus.WAITING
    assert sorted(q.id for q in r.pending_requests) == ["check[1]@2#0", "check[3]@2#0"]
    assert sorted(r.state.approved) == [5, 7] and r.state.audited and not r.state.totals
    assert [p.node for p in (await rt.get_state("s1")).parked] == ["check[1]", "check[3]"]
    r = await rt.resume(wf, "s1", responses={"check[3]@2#0": True})
    assert r.status is RunStatus.WAITING and not r.state.totals  # check[1] still parked
    assert [p.node for p in (await rt.get_state("s1")).parked] == ["check[1]"]
    r = await rt.resume(wf, "s1", responses={"check[1]@2#0": False})
    assert r.status is RunStatus.COMPLETED, r.error
    assert list(r.state.totals) == [5 + 7 + 900]  # the fan-in ran once, after every instance
    # each side effect ran once; the instances that re-ran found their recorded step
    assert sorted(charged) == ["check[0]", "check[1]", "check[2]", "check[3]"]
    assert calls == {"check[0]": 1, "check[1]": 2, "check[2]": 1, "check[3]": 2}


def inner_review() -> Workflow:
    b = WorkflowBuilder("review", state=Board)

    async def approve(state: Board, ctx: NodeContext) -> dict[str, Any]:
        ok = await ctx.request({"question": "fine?"}, response_type=str)
        return {"answer": ok}

    b.add_node("approve", approve).set_entry("approve").add_edge("approve", END)
    return b.build()


def parent(calls: collections.Counter[str], on_w2: Any = None) -> Workflow:
    """start -> review (a sub-workflow asking) and w1 -> w2; fan-in [review, w2] -> join."""
    b = WorkflowBuilder("parent", state=Board, waits="branch")

    def step(name: str) -> Any:
        async def fn(state: Board, ctx: NodeContext) -> dict[str, Any]:
            calls[name] += 1
            if name == "w2" and on_w2 is not None:
                await on_w2(ctx)
            return {"log": [name], **({"joined": True} if name == "join" else {})}
        return fn

    for name in ("start", "w1", "w2", "join"):
        b.add_node(name, step(name))
    b.add_subworkflow("review", inner_review(), inputs=["log"], outputs=["answer"])
    b.set_entry("start").add_edge("start", "review").add_edge("start", "w1")
    b.add_edge("w1", "w2").add_fan_in(["review", "w2"], "join").add_edge("join", END)
    return b.build()


async def test_a_parked_sub_workflow_lets_the_parents_other_branches_go_on(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = parent(calls)
    r = await rt.run(wf, {}, run_id="n1")
    assert r.status is RunStatus.WAITING
    assert list(r.state.log) == ["start", "w1", "w2"] and not r.state.joined
    [req] = r.pending_requests
    assert (req.id, req.node) == ("review@2/approve@1#0", "review.approve")
    snap = await rt.get_state("n1")
    [parked] = snap.parked
    assert (parked.node, parked.kind, parked.waits_for) == ("review", "request", (req.id,))
    assert "review" in snap.subworkflows
    assert [q.id for q in snap.pending_requests] == [req.id]
    r = await rt.resume(wf, "n1", responses={req.id: "ok"})
    assert r.status is RunStatus.COMPLETED, r.error
    assert r.state.answer == "ok" and r.state.joined
    assert calls == {"start": 1, "w1": 1, "w2": 1, "join": 1}


async def test_an_inner_request_answered_while_the_parent_runs_is_taken_at_its_barrier(
        rt: Runtime) -> None:
    async def answer(ctx: NodeContext) -> None:
        await rt.respond(ctx.run_id, {"review@2/approve@1#0": "mid-run"})

    r = await rt.run(parent(collections.Counter(), answer), {}, run_id="n2")
    assert r.status is RunStatus.COMPLETED, r.error
    assert r.state.answer == "mid-run" and r.state.joined


async def test_a_fork_of_a_checkpoint_with_a_parked_task_waits_for_it_again(
        rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = fork_join(calls, asks=2)
    await rt.run(wf, {}, run_id="f1")
    await rt.resume(wf, "f1", responses={"ask@2#0": "a"})
    history = await rt.history("f1")
    # the checkpoint after w3: ``ask`` parked with its first request still open
    before = next(i for i in history if i.superstep == 4)
    fork = await rt.fork(wf, "f1", before.id)
    assert fork.status is RunStatus.WAITING
    assert [q.id for q in fork.pending_requests] == ["ask@2#0"]  # as it stood then
    fork = await rt.resume(wf, fork.run_id, responses={"ask@2#0": "x"})
    assert [q.id for q in fork.pending_requests] == ["ask@2#1"]
    fork = await rt.resume(wf, fork.run_id, responses={"ask@2#1": "y"})
    assert fork.status is RunStatus.COMPLETED and fork.state.answer == "x+y"
    # the original is untouched: still waiting for its second request
    assert [q.id for q in (await rt.get_state("f1")).pending_requests] == ["ask@2#1"]


async def test_a_fork_of_the_head_keeps_the_answers_given_before(rt: Runtime) -> None:
    wf = fork_join(asks=2)
    await rt.run(wf, {}, run_id="f2")
    r = await rt.resume(wf, "f2", responses={"ask@2#0": "a"})
    fork = await rt.fork(wf, "f2", r.checkpoint_id)
    assert [q.id for q in fork.pending_requests] == ["ask@2#1"]
    fork = await rt.resume(wf, fork.run_id, responses={"ask@2#1": "b"})
    assert fork.status is RunStatus.COMPLETED and fork.state.answer == "a+b"


async def test_a_sub_workflow_that_parks_inside_a_default_parent(rt: Runtime) -> None:
    inner = WorkflowBuilder("inner", state=Board, waits="branch")

    async def approve(state: Board, ctx: NodeContext) -> dict[str, Any]:
        return {"answer": await ctx.request({"question": "fine?"}, response_type=str)}

    inner.add_node("split", lambda s: {"log": ["split"]}).add_node("approve", approve)
    inner.add_node("note", lambda s: {"log": ["note"]})
    inner.set_entry("split").add_edge("split", "approve").add_edge("split", "note")
    outer = WorkflowBuilder("outer", state=Board)
    outer.add_subworkflow("review", inner.build(), inputs=["log"], outputs=["answer", "log"])
    outer.set_entry("review").add_edge("review", END)
    wf = outer.build()
    r = await rt.run(wf, {}, run_id="n3")
    assert r.status is RunStatus.WAITING
    [req] = r.pending_requests
    assert req.id == "review@1/approve@2#0"
    inside = (await rt.get_state("n3")).subworkflows["review"]
    assert list(inside.values["log"]) == ["split", "note"]  # the inner branch went on
    assert [p.node for p in inside.parked] == ["approve"]
    r = await rt.resume(wf, "n3", responses={req.id: "yes"})
    assert r.status is RunStatus.COMPLETED, r.error
    assert r.state.answer == "yes" and list(r.state.log) == ["split", "note"]
