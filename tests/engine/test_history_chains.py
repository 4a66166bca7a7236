"""Each namespace's history is one chain, through parked sub-workflows, forks and resumes.

A parked sub-workflow that goes on is copied onto a new checkpoint; the copy
continues the history it was copied from (its parent is the copied head), so
walking a namespace's parents from its head reaches every checkpoint once.
"""

from __future__ import annotations

import collections
from typing import Annotated, Any

from chainkit import assert_one_chain, chain_problems, histories
from store.builders import at

from durable_flow import END, Blackboard, NodeContext, RunStatus, Runtime, WorkflowBuilder, append
from durable_flow.model._graph import Workflow
from durable_flow.store._protocols import CheckpointMeta


class S(Blackboard):
    log: Annotated[list[str], append] = []


def _note(name: str) -> Any:
    return lambda s: {"log": [name]}


def nested(waits: str = "branch", calls: collections.Counter[str] | None = None) -> Workflow:
    """``start`` fans out to a sub-workflow (``split`` -> ``ask`` | ``i1 -> i2``) and ``w1..w3``."""
    inner = WorkflowBuilder("inner", state=S, waits="branch")
    counts = calls if calls is not None else collections.Counter()

    async def ask(s: S, ctx: NodeContext) -> dict[str, Any]:
        counts["ask"] += 1
        return {"log": [f"ask={await ctx.request({'q': 1}, response_type=str)}"]}

    inner.add_node("split", lambda s: {"log": ["split"]}).add_node("ask", ask)
    inner.add_node("i1", lambda s: {"log": ["i1"]}).add_node("i2", lambda s: {"log": ["i2"]})
    inner.set_entry("split").add_edge("split", "ask").add_edge("split", "i1")
    inner.add_edge("i1", "i2").add_edge("i2", END).add_edge("ask", END)
    b = WorkflowBuilder("outer", state=S, waits=waits)  # type: ignore[arg-type]

    async def top(s: S, ctx: NodeContext) -> dict[str, Any]:
        return {"log": [f"top={await ctx.request({'q': 2}, response_type=str)}"]}

    b.add_node("start", lambda s: {"log": ["start"]}).add_node("top", top)
    b.add_subworkflow("sub", inner.build(), inputs=["log"], outputs=["log"])
    for n in ("w1", "w2", "w3"):
        b.add_node(n, _note(n))
    b.add_node("join", lambda s: {"log": ["join"]})
    b.set_entry("start").add_edge("start", "sub").add_edge("start", "w1")
    b.add_edge("start", "top").add_edge("w1", "w2").add_edge("w2", "w3")
    b.add_fan_in(["sub", "w3", "top"], "join").add_edge("join", END)
    return b.build()


def meta(cid: str, *, thread: str, seq: int, parent_id: str | None = None) -> CheckpointMeta:
    return CheckpointMeta(id=cid, run_id="r", thread=thread, namespace="sub",
                          parent_id=parent_id, seq=seq, superstep=seq, created_at=at(seq),
                          status=RunStatus.RUNNING, source="loop")


def test_the_check_finds_a_second_root_and_a_branch() -> None:
    a = meta("a", thread="t", seq=0)
    b = meta("b", thread="t", seq=1, parent_id="a")
    assert chain_problems([a, b]) == []
    orphan = meta("c", thread="u", seq=0)
    assert any("2 roots" in p for p in chain_problems([a, b, orphan]))
    fork = meta("d", thread="u", seq=0, parent_id="a")
    assert any("a has 2 children" in p for p in chain_problems([a, b, fork]))


async def test_a_parked_sub_workflow_going_on_continues_its_history(rt: Runtime) -> None:
    wf = nested()
    r = await rt.run(wf, {}, run_id="r")
    assert r.status is RunStatus.WAITING
    assert sorted(q.id for q in r.pending_requests) == ["sub@2/ask@2#0", "top@2#0"]
    await assert_one_chain(rt.store, "r")
    r = await rt.resume(wf, "r", responses={"sub@2/ask@2#0": "a"})
    assert r.status is RunStatus.WAITING, r.error
    moved = await histories(rt.store, "r")
    assert len({m.thread for m in moved["sub"]}) == 2  # the sub-workflow was copied on
    await assert_one_chain(rt.store, "r")
    r = await rt.resume(wf, "r", responses={"top@2#0": "b"})
    assert r.status is RunStatus.COMPLETED, r.error
    assert {"ask=a", "top=b", "join"} <= set(r.state.log)
    await assert_one_chain(rt.store, "r")


async def test_forks_of_every_checkpoint_are_one_chain_each(rt: Runtime) -> None:
    wf = nested()
    r = await rt.run(wf, {}, run_id="src")
    await rt.resume(wf, "src", responses={"sub@2/ask@2#0": "a"})
    checkpoints = await rt.store.list_checkpoints("src")
    assert len(checkpoints) > 8
    for i, cp in enumerate(checkpoints):
        f = await rt.fork(wf, "src", cp.id, new_run_id=f"f{i}")
        for _ in range(3):  # each answer lets one more branch go on
            if f.status is not RunStatus.WAITING:
                break
            await assert_one_chain(rt.store, f.run_id)
            f = await rt.resume(wf, f.run_id, responses={f.pending_requests[0].id: "x"})
        assert f.status is RunStatus.COMPLETED, (cp.namespace, cp.superstep, f.error)
        await assert_one_chain(rt.store, f.run_id)
    assert r.status is RunStatus.WAITING
    await assert_one_chain(rt.store, "src")


async def test_a_fork_of_a_waiting_inner_checkpoint_runs_its_parked_task_once_more(
        rt: Runtime) -> None:
    calls: collections.Counter[str] = collections.Counter()
    wf = nested(calls=calls)
    await rt.run(wf, {}, run_id="s")
    await rt.resume(wf, "s", responses={"sub@2/ask@2#0": "a"})
    inner = [m for m in await rt.store.list_checkpoints("s", namespace="sub")
             if m.status is RunStatus.WAITING and m.source == "loop"][-1]
    calls.clear()
    f = await rt.fork(wf, "s", inner.id, new_run_id="f")
    assert sorted(q.id for q in f.pending_requests) == ["sub@2/ask@2#0", "top@2#0"]
    assert calls["ask"] == 0  # parked: nothing answered it yet
    f = await rt.resume(wf, "f", responses={"sub@2/ask@2#0": "x"})
    assert f.status is RunStatus.WAITING and "ask=x" in f.state.log
    assert calls["ask"] == 1
    f = await rt.resume(wf, "f", responses={"top@2#0": "y"})
    assert f.status is RunStatus.COMPLETED and calls["ask"] == 1
    await assert_one_chain(rt.store, "f")


async def test_a_default_parent_resumed_inside_its_sub_workflow_is_one_chain(
        rt: Runtime) -> None:
    wf = nested("superstep")
    r = await rt.run(wf, {}, run_id="d")
    assert r.status is RunStatus.WAITING
    r = await rt.resume(wf, "d", responses={"sub@2/ask@2#0": "a"})
    r = await rt.resume(wf, "d", responses={q.id: "b" for q in r.pending_requests})
    assert r.status is RunStatus.COMPLETED, r.error
    lengths = await assert_one_chain(rt.store, "d")
    assert lengths["sub"] >= 4
