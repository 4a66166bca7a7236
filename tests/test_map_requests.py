"""Map instances pause, answer, record steps and fork on their own (every store)."""

from __future__ import annotations

import collections
from typing import Annotated, Any

from durable_flow import (
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
    done: bool = False


def approvals(calls: collections.Counter[str], side_effects: list[str]) -> Workflow:
    """split -> check[i] (asks a person for items over 100, charges each) -> total."""
    b = WorkflowBuilder("approvals", state=Lines)

    @b.node(goto=["check"])
    def split(state: Lines) -> Command:
        return Command(goto=[Send("check", amount) for amount in state.items])

    async def check(state: Lines, ctx: NodeContext) -> dict[str, Any]:
        calls[ctx.node] += 1

        def charge() -> str:
            side_effects.append(ctx.node)
            return f"{ctx.node}:{ctx.arg}"

        receipt = await ctx.step("charge", charge)
        if ctx.arg > 100:
            ok = await ctx.request({"amount": ctx.arg}, response_type=bool)
            if not ok:
                return {"charged": [receipt]}
        return {"approved": [ctx.arg], "charged": [receipt]}

    b.add_node("check", check, arg_type=int)
    b.add_node("total", lambda s: {"done": True})
    b.set_entry("split").add_edge("check", "total")
    return b.build()


async def test_each_instance_asks_on_its_own_with_an_instance_request_id(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = approvals(calls, [])
    r = await rt.run(wf, {"items": [5, 500, 7, 900]})
    assert r.status is RunStatus.WAITING
    assert sorted((q.id, q.node, q.payload["amount"]) for q in r.pending_requests) == [
        ("check[1]@2#0", "check[1]", 500), ("check[3]@2#0", "check[3]", 900)]
    inbox = await rt.pending_requests()
    assert sorted(q.id for q in inbox) == ["check[1]@2#0", "check[3]@2#0"]


async def test_partial_answers_run_only_those_instances_and_leave_the_rest_waiting(
        rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    charged: list[str] = []
    wf = approvals(calls, charged)
    r = await rt.run(wf, {"items": [5, 500, 7, 900]})
    r = await rt.resume(wf, r.run_id, responses={"check[3]@2#0": False})
    assert r.status is RunStatus.WAITING
    assert [q.id for q in r.pending_requests] == ["check[1]@2#0"]
    assert calls == {"check[0]": 1, "check[1]": 1, "check[2]": 1, "check[3]": 2}
    r = await rt.resume(wf, r.run_id, responses={"check[1]@2#0": True})
    assert r.status is RunStatus.COMPLETED, r.error
    assert calls == {"check[0]": 1, "check[1]": 2, "check[2]": 1, "check[3]": 2}
    assert list(r.state.approved) == [5, 500, 7]
    assert list(r.state.charged) == ["check[0]:5", "check[1]:500", "check[2]:7", "check[3]:900"]
    assert sorted(charged) == ["check[0]", "check[1]", "check[2]", "check[3]"]  # each once
    assert r.state.done


async def test_respond_records_answers_per_instance_without_running(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = approvals(calls, [])
    r = await rt.run(wf, {"items": [500, 900]})
    info = await rt.respond(r.run_id, {"check[0]@2#0": True})
    assert info.status is RunStatus.WAITING  # check[1] still asks
    info = await rt.respond(r.run_id, {"check[1]@2#0": True})
    assert info.status is RunStatus.QUEUED
    r = await rt.resume(wf, r.run_id)
    assert list(r.state.approved) == [500, 900]


async def test_get_state_and_fork_see_every_instance_where_it_stands(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = approvals(calls, [])
    r = await rt.run(wf, {"items": [5, 500, 900]})
    r = await rt.resume(wf, r.run_id, responses={"check[1]@2#0": True})
    snap = await rt.get_state(r.run_id)
    assert snap.next_tasks == ("check[0]", "check[1]", "check[2]")
    assert [q.id for q in snap.pending_requests] == ["check[2]@2#0"]
    forked = await rt.fork(wf, r.run_id, r.checkpoint_id)
    assert [q.id for q in forked.pending_requests] == ["check[2]@2#0"]
    before = calls.copy()
    done = await rt.resume(wf, forked.run_id, responses={"check[2]@2#0": False})
    assert done.status is RunStatus.COMPLETED, done.error
    assert list(done.state.approved) == [5, 500]
    assert calls - before == {"check[2]": 1}  # the fork re-ran only the waiting instance
    original = await rt.resume(wf, r.run_id, responses={"check[2]@2#0": True})
    assert list(original.state.approved) == [5, 500, 900]


async def test_a_fork_from_the_checkpoint_that_sends_runs_every_instance_again(
        rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = approvals(calls, [])
    r = await rt.run(wf, {"items": [1, 2]})
    sending = next(c for c in await rt.history(r.run_id) if c.nodes == ("split",))
    forked = await rt.fork(wf, r.run_id, sending.id)
    assert forked.status is RunStatus.COMPLETED, forked.error
    assert list(forked.state.approved) == [1, 2]
    assert calls == {"check[0]": 2, "check[1]": 2}


async def test_update_state_keeps_the_instances_and_their_args(rt: Runtime) -> None:
    async def ask(state: Lines, ctx: NodeContext) -> dict[str, Any]:
        ok = await ctx.request({"amount": ctx.arg}, response_type=bool)
        return {"approved": [ctx.arg] if ok else []}

    b = WorkflowBuilder("asks", state=Lines)
    b.add_node("split", lambda s: Command(goto=[Send("ask", x) for x in s.items]), goto=["ask"])
    b.add_node("ask", ask, arg_type=int)
    b.set_entry("split")
    wf = b.build()
    r = await rt.run(wf, {"items": [500, 900]})
    await rt.update_state(wf, r.run_id, {"done": True})
    snap = await rt.get_state(r.run_id)
    assert snap.next_tasks == ("ask[0]", "ask[1]") and snap.values["done"] is True
    result = await rt.resume(wf, r.run_id)
    assert sorted(q.payload["amount"] for q in result.pending_requests) == [500, 900]
