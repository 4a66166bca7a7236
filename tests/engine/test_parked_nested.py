"""A parked sub-workflow that goes on over several barriers: old checkpoint ids keep
the nested state they were written with (``get_state`` and ``fork``), every store."""

from __future__ import annotations

import collections
from typing import Any

import pytest
from parkkit import Board

from durable_flow import END, NodeContext, RunStatus, Runtime, Workflow, WorkflowBuilder


def inner_twice() -> Workflow:
    """a1 asks, then a2 asks: two inner supersteps, each a wait."""
    b = WorkflowBuilder("twice", state=Board, waits="branch")

    async def a1(state: Board, ctx: NodeContext) -> dict[str, Any]:
        return {"log": [f"a1:{await ctx.request({'q': 'first'}, response_type=str)}"]}

    async def a2(state: Board, ctx: NodeContext) -> dict[str, Any]:
        second = await ctx.request({"q": "second", "seen": list(state.log)}, response_type=str)
        return {"answer": f"{state.log[-1]}+{second}"}

    b.add_node("a1", a1).add_node("a2", a2)
    b.set_entry("a1").add_edge("a1", "a2").add_edge("a2", END)
    return b.build()


def parent(calls: collections.Counter[str]) -> Workflow:
    """start -> review (the inner workflow) and w1 -> w2; fan-in [review, w2] -> join."""
    b = WorkflowBuilder("parent_twice", state=Board, waits="branch")

    def step(name: str) -> Any:
        def fn(state: Board) -> dict[str, Any]:
            calls[name] += 1
            return {"log": [name], **({"joined": True} if name == "join" else {})}
        return fn

    for name in ("start", "w1", "w2", "join"):
        b.add_node(name, step(name))
    b.add_subworkflow("review", inner_twice(), inputs=["log"], outputs=["answer"])
    b.set_entry("start").add_edge("start", "review").add_edge("start", "w1")
    b.add_edge("w1", "w2").add_fan_in(["review", "w2"], "join").add_edge("join", END)
    return b.build()


FIRST, SECOND = "review@2/a1@1#0", "review@2/a2@3#0"


async def test_an_older_checkpoint_shows_and_forks_the_sub_workflow_as_it_stood(
        rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = parent(calls)
    r = await rt.run(wf, {}, run_id="s1")
    assert [q.id for q in r.pending_requests] == [FIRST]
    r = await rt.resume(wf, "s1", responses={FIRST: "one"})
    assert r.status is RunStatus.WAITING and [q.id for q in r.pending_requests] == [SECOND]
    old = r.checkpoint_id  # the top-level checkpoint after the first inner answer
    then = (await rt.get_state("s1", old)).subworkflows["review"]
    assert list(then.values["log"]) == ["start", "a1:one"] and then.values["answer"] == ""
    assert [p.node for p in then.parked] == ["a2"]

    done = await rt.resume(wf, "s1", responses={SECOND: "two"})
    assert done.status is RunStatus.COMPLETED, done.error
    assert done.state.answer == "a1:one+two" and done.state.joined

    # the old id still shows the sub-workflow as it was when it was written
    again = await rt.get_state("s1", old)
    assert [p.node for p in again.parked] == ["review"]
    inside = again.subworkflows["review"]
    assert list(inside.values["log"]) == ["start", "a1:one"]
    assert inside.values["answer"] == "" and [p.node for p in inside.parked] == ["a2"]
    assert inside.status is not RunStatus.COMPLETED

    # a fork from it asks the second inner question again and ends like the original
    fork = await rt.fork(wf, "s1", old)
    assert fork.status is RunStatus.WAITING, fork.error
    assert [q.id for q in fork.pending_requests] == [SECOND]
    fork = await rt.resume(wf, fork.run_id, responses={SECOND: "two"})
    assert fork.status is RunStatus.COMPLETED, fork.error
    assert fork.state == done.state
    assert calls == {"start": 1, "w1": 1, "w2": 1, "join": 2}  # one join each


async def test_a_superstep_run_again_after_the_move_finds_the_copy(
        store: Any, monkeypatch: Any) -> None:
    """The barrier after the move is lost (like a crash): the run goes on from the moved head."""
    from durable_flow.errors import StoreError

    real = store.commit
    moved: list[str] = []

    async def commit(c: Any) -> None:
        if c.nested and c.carry is not None and not moved:  # the move onto a new head
            moved.append(c.nested[0][0].meta.thread)
            await real(c)
            return
        if len(moved) == 1 and c.checkpoint is not None and not c.checkpoint.meta.thread:
            moved.append("lost")
            raise StoreError.lost("PostgreSQL is unreachable (retried for 30s): refused")
        await real(c)

    monkeypatch.setattr(store, "commit", commit)
    async with Runtime(store) as rt:
        calls: collections.Counter[str] = collections.Counter()
        wf = parent(calls)
        await rt.run(wf, {}, run_id="s2")
        with pytest.raises(StoreError):
            await rt.resume(wf, "s2", responses={FIRST: "one"})
        assert moved[1:] == ["lost"] and moved[0].endswith("/review")
        r = await rt.resume(wf, "s2")
        assert r.status is RunStatus.WAITING, r.error
        assert [q.id for q in r.pending_requests] == [SECOND]
        inside = (await rt.get_state("s2")).subworkflows["review"]
        assert list(inside.values["log"]) == ["start", "a1:one"]
        done = await rt.resume(wf, "s2", responses={SECOND: "two"})
        assert done.status is RunStatus.COMPLETED, done.error
        assert done.state.answer == "a1:one+two" and done.state.joined
