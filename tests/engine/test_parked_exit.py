"""Reaching an exit ends a ``waits="branch"`` run: parked tasks are withdrawn, recorded as such."""

from __future__ import annotations

from typing import Annotated, Any

import pytest

from durable_flow import (
    END,
    Blackboard,
    NodeContext,
    RunNotResumableError,
    RunStatus,
    Runtime,
    UnknownRequestError,
    Workflow,
    WorkflowBuilder,
    append,
)


class S(Blackboard):
    log: Annotated[list[str], append] = []


def exit_beside_parked(*, slow_exit: bool = False) -> Workflow:
    b = WorkflowBuilder("ex", state=S, waits="branch")

    async def ask(s: S, ctx: NodeContext) -> dict[str, Any]:
        await ctx.request({"question": "?"}, response_type=str)
        return {"log": ["ask"]}

    async def fin(s: S) -> dict[str, Any]:
        return {"log": ["fin"]}

    def mid(s: S) -> dict[str, Any]:
        return {"log": ["mid"]}

    b.add_node("start", lambda s: {"log": ["start"]}).add_node("ask", ask)
    b.add_node("fin", fin)
    if slow_exit:
        b.add_node("mid", mid)
    b.add_node("after_ask", lambda s: {"log": ["after_ask"]})
    b.set_entry("start").add_edge("start", "ask").add_edge("start", "mid" if slow_exit else "fin")
    if slow_exit:
        b.add_edge("mid", "fin")
    b.add_edge("ask", "after_ask").add_edge("after_ask", END).set_exit("fin")
    return b.build()


async def test_an_exit_in_the_superstep_a_task_parks_ends_the_run(rt: Runtime) -> None:
    r = await rt.run(exit_beside_parked(), {}, run_id="ex1")
    assert r.status is RunStatus.COMPLETED, r.error
    assert list(r.state.log) == ["start", "fin"]
    assert r.pending_requests == () and await rt.pending_requests() == []
    assert (await rt.get_state("ex1")).parked == ()
    [decision] = await rt.decisions("ex1")
    assert decision.kind == "withdrawn" and decision.request_id == "ask@2#0"
    assert decision.via == "runtime" and decision.by is None


async def test_an_exit_reached_later_withdraws_the_parked_request(rt: Runtime) -> None:
    r = await rt.run(exit_beside_parked(slow_exit=True), {}, run_id="ex2")
    assert r.status is RunStatus.COMPLETED, r.error
    assert list(r.state.log) == ["start", "mid", "fin"]  # after_ask never ran
    assert await rt.pending_requests() == []
    assert [d.kind for d in await rt.decisions("ex2")] == ["withdrawn"]
    with pytest.raises((UnknownRequestError, RunNotResumableError)):
        await rt.respond("ex2", {"ask@2#0": "late"})
    assert (await rt.get_run("ex2")).status is RunStatus.COMPLETED
