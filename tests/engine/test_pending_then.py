"""``Snapshot.pending_requests`` of an older checkpoint: the requests open at it.

Answered since, they are still what was being asked at that moment, at the
top level and inside sub-workflows; the head lists what is open now.
"""

from __future__ import annotations

from typing import Any

from durable_flow import END, NodeContext, RunStatus, Runtime, WorkflowBuilder
from engine.test_history_chains import S, nested


async def test_an_older_checkpoint_lists_the_requests_open_then(rt: Runtime) -> None:
    wf = nested()
    r = await rt.run(wf, {}, run_id="p")
    asked = (await rt.get_run("p")).head_checkpoint_id
    assert asked is not None
    both = ["sub@2/ask@2#0", "top@2#0"]
    r = await rt.resume(wf, "p", responses={"sub@2/ask@2#0": "a"})
    later = (await rt.get_run("p")).head_checkpoint_id
    assert later is not None
    assert [q.id for q in (await rt.get_state("p")).pending_requests] == ["top@2#0"]
    assert sorted(q.id for q in (await rt.get_state("p", asked)).pending_requests) == both
    r = await rt.resume(wf, "p", responses={"top@2#0": "b"})
    assert r.status is RunStatus.COMPLETED
    assert (await rt.get_state("p")).pending_requests == ()
    assert sorted(q.id for q in (await rt.get_state("p", asked)).pending_requests) == both
    assert [q.id for q in (await rt.get_state("p", later)).pending_requests] == ["top@2#0"]
    # inside the sub-workflow: its waiting checkpoint still shows its question
    waiting = [m for m in await rt.store.list_checkpoints("p", namespace="sub")
               if m.status is RunStatus.WAITING]
    assert waiting
    inner = await rt.get_state("p", waiting[-1].id)  # where it first waited
    assert [q.id for q in inner.pending_requests] == ["sub@2/ask@2#0"]


async def test_an_older_default_checkpoint_lists_its_answered_request(rt: Runtime) -> None:
    b = WorkflowBuilder("plain", state=S)

    async def ask(s: S, ctx: NodeContext) -> dict[str, Any]:
        return {"log": [await ctx.request({"q": 1}, response_type=str)]}

    b.add_node("ask", ask).set_entry("ask").add_edge("ask", END)
    wf = b.build()
    r = await rt.run(wf, {}, run_id="q")
    at = (await rt.get_run("q")).head_checkpoint_id
    assert at is not None and [q.id for q in r.pending_requests] == ["ask@1#0"]
    r = await rt.resume(wf, "q", responses={"ask@1#0": "yes"})
    assert r.status is RunStatus.COMPLETED and r.state.log == ["yes"]
    assert [q.id for q in (await rt.get_state("q", at)).pending_requests] == ["ask@1#0"]
    assert (await rt.get_state("q")).pending_requests == ()
