"""Parked tasks (``waits="branch"``): a waiting task lets the other branches go on."""

from __future__ import annotations

import asyncio
import collections
from typing import Any

from parkkit import Board, fork_join

from durable_flow import (
    END,
    NodeContext,
    ParkedTask,
    RunStatus,
    Runtime,
    Workflow,
    WorkflowBuilder,
)


async def test_other_branches_finish_while_a_request_waits_and_the_join_waits_for_it(
        rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = fork_join(calls)
    r = await rt.run(wf, {}, run_id="p1")
    assert r.status is RunStatus.WAITING
    assert list(r.state.log) == ["start", "w1", "w2", "w3"]  # the chain went on
    assert not r.state.joined  # the fan-in waits for the parked task
    assert [q.id for q in r.pending_requests] == ["ask@2#0"]
    snap = await rt.get_state("p1")
    assert snap.next_tasks == ()
    assert snap.parked == (ParkedTask(node="ask", kind="request", waits_for=("ask@2#0",),
                                      since_superstep=2),)
    assert [q.id for q in snap.pending_requests] == ["ask@2#0"]
    assert [q.id for q in await rt.pending_requests()] == ["ask@2#0"]
    r = await rt.resume(wf, "p1", responses={"ask@2#0": "yes"})
    assert r.status is RunStatus.COMPLETED, r.error
    assert r.state.answer == "yes" and r.state.joined
    # it ran again from the top on the snapshot of the superstep it ran in
    assert list(r.state.log) == ["start", "w1", "w2", "w3", "ask saw 4", "join"]
    assert calls == {"start": 1, "w1": 1, "w2": 1, "w3": 1, "ask": 2, "join": 1}
    assert (await rt.get_state("p1")).parked == ()


async def test_every_checkpoint_while_parked_records_the_parked_task(rt: Runtime) -> None:
    await rt.run(fork_join(), {}, run_id="p2")
    history = await rt.history("p2")
    parked = [(await rt.get_state("p2", info.id)).parked for info in reversed(history)]
    # input, superstep 1 (start), then the three supersteps after ``ask`` parked
    assert [len(p) for p in parked] == [0, 0, 1, 1, 1]
    assert all(p[0].node == "ask" and p[0].since_superstep == 2 for p in parked[2:])


async def test_the_default_waits_for_the_whole_superstep(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    r = await rt.run(fork_join(calls, waits="superstep"), {}, run_id="p3")
    assert r.status is RunStatus.WAITING
    assert list(r.state.log) == ["start"] and calls["w2"] == 0
    assert (await rt.get_state("p3")).parked == ()


async def test_an_answer_given_while_other_branches_run_is_taken_at_the_next_barrier(
        rt: Runtime) -> None:
    async def answer(ctx: NodeContext) -> None:
        info = await rt.respond(ctx.run_id, {"ask@2#0": "mid-run"})
        assert info.status is RunStatus.RUNNING  # recorded, the run not stolen

    calls: collections.Counter[str] = collections.Counter()
    wf = fork_join(calls, on_w2=answer)
    r = await rt.run(wf, {}, run_id="p4")
    assert r.status is RunStatus.COMPLETED, r.error
    assert r.state.answer == "mid-run" and r.state.joined
    # w2 ran in superstep 3; ``ask`` ran again in superstep 4, on its snapshot (3 entries)
    assert list(r.state.log) == ["start", "w1", "w2", "ask saw 3", "w3", "join"]
    assert calls["ask"] == 2


async def test_partial_answers_leave_the_task_parked_until_its_next_request(rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = fork_join(calls, asks=2)
    r = await rt.run(wf, {}, run_id="p5")
    r = await rt.resume(wf, "p5", responses={"ask@2#0": "a"})
    # the first answer is kept; the same task asks its second question, same superstep id
    assert r.status is RunStatus.WAITING
    assert [q.id for q in r.pending_requests] == ["ask@2#1"]
    assert (await rt.get_state("p5")).parked[0].waits_for == ("ask@2#1",)
    r = await rt.resume(wf, "p5", responses={"ask@2#1": "b"})
    assert r.status is RunStatus.COMPLETED and r.state.answer == "a+b"
    assert calls["ask"] == 3


async def test_respond_queues_a_waiting_run_with_only_parked_tasks_left(rt: Runtime) -> None:
    wf = fork_join()
    await rt.run(wf, {}, run_id="p6")
    info = await rt.respond("p6", {"ask@2#0": "later"})
    assert info.status is RunStatus.QUEUED
    r = await rt.resume(wf, "p6")
    assert r.status is RunStatus.COMPLETED and r.state.answer == "later"


async def test_an_event_sent_while_other_branches_run_wakes_the_parked_task(
        rt: Runtime) -> None:
    async def paid(state: Board, ctx: NodeContext) -> str:
        return str(await ctx.wait_event("paid", response_type=int))

    async def send(ctx: NodeContext) -> None:
        await rt.send_event(ctx.run_id, "paid", 5)

    r = await rt.run(fork_join(wait=paid, on_w2=send), {}, run_id="e1")
    assert r.status is RunStatus.COMPLETED, r.error
    assert r.state.answer == "5" and r.state.joined
    assert list(r.state.log) == ["start", "w1", "w2", "ask saw 3", "w3", "join"]


async def test_a_parked_event_wait_makes_the_run_wait_then_an_event_queues_it(
        rt: Runtime) -> None:
    async def paid(state: Board, ctx: NodeContext) -> str:
        return str(await ctx.wait_event("paid", response_type=int))

    wf = fork_join(wait=paid)
    r = await rt.run(wf, {}, run_id="e2")
    assert r.status is RunStatus.WAITING and list(r.state.log)[-1] == "w3"
    snap = await rt.get_state("e2")
    assert [(p.node, p.kind, p.events) for p in snap.parked] == [("ask", "event", ("paid",))]
    await rt.send_event("e2", "paid", 7)
    assert (await rt.get_state("e2")).status is RunStatus.QUEUED
    r = await rt.resume(wf, "e2")
    assert r.status is RunStatus.COMPLETED and r.state.answer == "7"


async def test_a_timer_that_comes_due_while_other_branches_run_is_taken_at_a_barrier(
        rt: Runtime) -> None:
    async def nap(state: Board, ctx: NodeContext) -> str:
        await ctx.sleep(0.3)
        return "rested"

    r = await rt.run(fork_join(wait=nap, delay=0.25), {}, run_id="t1")
    assert r.status is RunStatus.COMPLETED, r.error
    assert r.state.answer == "rested" and r.state.joined
    log = list(r.state.log)
    # the timer came due while the chain ran: the nap finished before the chain's end
    assert any(entry.startswith("ask saw") for entry in log[:log.index("w3")]), log


async def test_a_parked_timer_sets_wake_at_and_a_resume_after_it_finishes(rt: Runtime) -> None:
    async def nap(state: Board, ctx: NodeContext) -> str:
        await ctx.sleep(1.5)
        return "rested"

    wf = fork_join(wait=nap)
    r = await rt.run(wf, {}, run_id="t2")
    assert r.status is RunStatus.WAITING
    info = (await rt.list_runs())[0]
    assert info.wake_at is not None
    [parked] = (await rt.get_state("t2")).parked
    assert parked.kind == "timer" and parked.wake_at == info.wake_at
    await asyncio.sleep(1.6)
    r = await rt.resume(wf, "t2")
    assert r.status is RunStatus.COMPLETED and r.state.answer == "rested"


async def test_a_parked_request_past_its_deadline_while_the_run_runs_gets_its_default(
        rt: Runtime) -> None:
    async def ask(state: Board, ctx: NodeContext) -> str:
        return str(await ctx.request({"question": "ok?"}, response_type=str, timeout=0.2,
                                     default="no answer"))

    r = await rt.run(fork_join(wait=ask, delay=0.2), {}, run_id="d1")
    assert r.status is RunStatus.COMPLETED, r.error
    assert r.state.answer == "no answer" and r.state.joined


async def test_a_parked_request_escalates_at_its_deadline_while_the_run_runs(
        rt: Runtime) -> None:
    async def ask(state: Board, ctx: NodeContext) -> str:
        return str(await ctx.request({"question": "ok?"}, response_type=str, timeout=1.0,
                                     assignees=("alice",), escalate_to=("bob",)))

    # w1 outlasts the deadline: the barrier after it escalates; the second deadline is ahead
    wf = fork_join(wait=ask, delay={"w1": 1.3})
    r = await rt.run(wf, {}, run_id="d2")
    assert r.status is RunStatus.WAITING and list(r.state.log)[-1] == "w3"
    [req] = r.pending_requests
    assert req.escalated and req.assignees == ("bob",)
    decisions = await rt.decisions("d2")
    assert [d.kind for d in decisions] == ["escalation"]
    r = await rt.resume(wf, "d2", responses={req.id: "fine"}, by="bob")
    assert r.status is RunStatus.COMPLETED and r.state.answer == "fine"


async def test_prune_keeps_the_anchor_of_a_parked_task_with_its_answer(rt: Runtime) -> None:
    wf = fork_join()
    await rt.run(wf, {}, run_id="pr1")
    await rt.respond("pr1", {"ask@2#0": "kept"})  # answered: no open request holds the anchor
    removed = await rt.prune("pr1", keep_last=1)
    assert removed > 0
    r = await rt.resume(wf, "pr1")
    assert r.status is RunStatus.COMPLETED, r.error
    assert r.state.answer == "kept"  # found at its anchor, not asked again


async def test_an_older_checkpoint_shows_what_its_parked_task_waited_for_then(
        rt: Runtime) -> None:
    wf = fork_join(asks=2)
    await rt.run(wf, {}, run_id="h1")
    r = await rt.resume(wf, "h1", responses={"ask@2#0": "a"})
    history = await rt.history("h1")
    then = await rt.get_state("h1", next(i for i in history if i.superstep == 4).id)
    assert [p.waits_for for p in then.parked] == [("ask@2#0",)]
    # what was open then, although answered since
    assert [q.id for q in then.pending_requests] == ["ask@2#0"]
    now = await rt.get_state("h1", r.checkpoint_id)
    assert [p.waits_for for p in now.parked] == [("ask@2#1",)]


def two_asks() -> Workflow:
    """start -> a, b (each asks); fan-in [a, b] -> join."""
    b = WorkflowBuilder("two-asks", state=Board, waits="branch")

    def asking(name: str) -> Any:
        async def fn(state: Board, ctx: NodeContext) -> dict[str, Any]:
            got = await ctx.request({"question": name}, response_type=str)
            return {"log": [f"{name}={got}"]}
        return fn

    b.add_node("start", lambda s: {"log": ["start"]})
    b.add_node("a", asking("a")).add_node("b", asking("b"))
    b.add_node("join", lambda s: {"joined": True})
    b.set_entry("start").add_edge("start", "a").add_edge("start", "b")
    b.add_fan_in(["a", "b"], "join").add_edge("join", END)
    return b.build()


async def test_answering_one_of_two_parked_tasks_queues_the_run_for_that_branch(
        rt: Runtime) -> None:
    wf = two_asks()
    r = await rt.run(wf, {}, run_id="two")
    assert sorted(q.id for q in r.pending_requests) == ["a@2#0", "b@2#0"]
    info = await rt.respond("two", {"b@2#0": "B"})
    assert info.status is RunStatus.QUEUED  # b can go on although a still waits
    r = await rt.resume(wf, "two")
    assert r.status is RunStatus.WAITING and list(r.state.log) == ["start", "b=B"]
    assert [p.node for p in (await rt.get_state("two")).parked] == ["a"]
    assert not r.state.joined
    r = await rt.resume(wf, "two", responses={"a@2#0": "A"})
    assert r.status is RunStatus.COMPLETED and r.state.joined
    assert list(r.state.log) == ["start", "b=B", "a=A"]


async def test_a_run_left_with_only_parked_tasks_is_saved_waiting_at_once(rt: Runtime) -> None:
    await rt.run(two_asks(), {}, run_id="w1")
    history = await rt.history("w1")
    # input, start, then a and b park: the barrier that parks them saves the run waiting
    assert [(c.superstep, c.status) for c in reversed(history)] == [
        (0, RunStatus.RUNNING), (1, RunStatus.RUNNING), (2, RunStatus.WAITING)]
