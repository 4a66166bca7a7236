"""A node routed to again while its task is parked (``waits="branch"``), every store.

A routed task whose id is parked waits until the parked task finished (it
stays a next task); ``Send`` instances sent to a node with instances parked
fail the run with an error naming the node.
"""

from __future__ import annotations

import collections
from typing import Any

from parkkit import Board

from durable_flow import (
    END,
    Command,
    NodeContext,
    RunStatus,
    Runtime,
    Send,
    Workflow,
    WorkflowBuilder,
)


def loop_back(calls: collections.Counter[str]) -> Workflow:
    """start -> ask (asks) and w1 -> w2 -> ask: ``ask`` is routed to while it waits."""
    b = WorkflowBuilder("loop_back", state=Board, waits="branch")

    async def ask(state: Board, ctx: NodeContext) -> dict[str, Any]:
        calls["ask"] += 1
        said = await ctx.request({"seen": list(state.log)}, response_type=str)
        return {"log": [f"ask:{said}"]}

    b.add_node("start", lambda s: {"log": ["start"]}).add_node("ask", ask)
    b.add_node("w1", lambda s: {"log": ["w1"]}).add_node("w2", lambda s: {"log": ["w2"]})
    b.set_entry("start").add_edge("start", "ask").add_edge("start", "w1")
    b.add_edge("w1", "w2").add_edge("w2", "ask").add_edge("ask", END)
    return b.build()


async def test_a_node_routed_to_while_its_task_is_parked_runs_after_it(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = loop_back(calls)
    r = await rt.run(wf, {}, run_id="a1")
    assert r.status is RunStatus.WAITING
    assert [q.id for q in r.pending_requests] == ["ask@2#0"]  # one ask at a time
    snap = await rt.get_state("a1")
    assert [p.node for p in snap.parked] == ["ask"]
    assert [str(t) for t in snap.next_tasks] == ["ask"]  # the second waits its turn
    r = await rt.resume(wf, "a1", responses={"ask@2#0": "a"})
    assert r.status is RunStatus.WAITING, r.error
    assert list(r.state.log) == ["start", "w1", "w2", "ask:a"]
    [q] = r.pending_requests
    assert q.id == "ask@5#0" and q.payload == {"seen": ["start", "w1", "w2", "ask:a"]}
    r = await rt.resume(wf, "a1", responses={"ask@5#0": "b"})
    assert r.status is RunStatus.COMPLETED, r.error
    assert list(r.state.log) == ["start", "w1", "w2", "ask:a", "ask:b"]
    assert calls["ask"] == 4  # each asked, then ran again with its answer


async def test_a_node_routed_to_while_its_parked_task_was_answered_mid_run(
        rt: Runtime) -> None:
    b = WorkflowBuilder("loop_mid", state=Board, waits="branch")

    async def ask(state: Board, ctx: NodeContext) -> dict[str, Any]:
        return {"log": [f"ask:{await ctx.request({}, response_type=str)}"]}

    async def w2(state: Board, ctx: NodeContext) -> dict[str, Any]:
        await rt.respond(ctx.run_id, {"ask@2#0": "early"})
        return {"log": ["w2"]}

    b.add_node("start", lambda s: {"log": ["start"]}).add_node("ask", ask).add_node("w2", w2)
    b.add_node("w1", lambda s: {"log": ["w1"]})
    b.set_entry("start").add_edge("start", "ask").add_edge("start", "w1")
    b.add_edge("w1", "w2").add_edge("w2", "ask").add_edge("ask", END)
    wf = b.build()
    r = await rt.run(wf, {}, run_id="a2")
    # the parked ask is taken in superstep 4 while the routed one waits for superstep 5
    assert r.status is RunStatus.WAITING, r.error
    assert list(r.state.log) == ["start", "w1", "w2", "ask:early"]
    assert [q.id for q in r.pending_requests] == ["ask@5#0"]
    r = await rt.resume(wf, "a2", responses={"ask@5#0": "late"})
    assert r.status is RunStatus.COMPLETED, r.error
    assert list(r.state.log) == ["start", "w1", "w2", "ask:early", "ask:late"]


async def test_send_instances_to_a_node_with_parked_instances_start_beside_them(
        rt: Runtime) -> None:
    b = WorkflowBuilder("resend", state=Board, waits="branch")

    @b.node(goto=["check", "w1"])
    def split(state: Board) -> Command:
        return Command(goto=[Send("check", {"n": 1}), "w1"])

    @b.node(goto=["check"])
    def w1(state: Board) -> Command:
        return Command(goto=[Send("check", {"n": 2}), Send("check", {"n": 3})])

    async def check(state: Board, ctx: NodeContext) -> dict[str, Any]:
        return {"log": [await ctx.request(ctx.arg, response_type=str)]}

    b.add_node("check", check, arg_type=dict)
    b.set_entry("split")
    wf = b.build()
    r = await rt.run(wf, {}, run_id="a3")
    assert r.status is RunStatus.WAITING, r.error
    asked = {q.id: q.payload["n"] for q in r.pending_requests}
    # the new instances are numbered after the parked one: three tasks, three ids
    assert asked == {"check[0]@2#0": 1, "check[1]@3#0": 2, "check[2]@3#0": 3}
    assert sorted(p.node for p in (await rt.get_state("a3")).parked) == [
        "check[0]", "check[1]", "check[2]"]
    r = await rt.resume(wf, "a3", responses={rid: f"a{n}" for rid, n in asked.items()})
    assert r.status is RunStatus.COMPLETED, r.error
    assert sorted(r.state.log) == ["a1", "a2", "a3"]
