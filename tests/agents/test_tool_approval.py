"""Agent tools a person approves: ``durable_flow.tool(approval=...)``, ``ToolDecision``.

Each call of an approved tool is a ``tool_approval`` request with the tool and
its exact arguments, answered through ``Runtime.respond``/``resume`` like any
request (assignees and roles included); approved calls run once with the
approved (or edited) arguments, refused ones never run and the model is told.
"""

from __future__ import annotations

from typing import Any

import pytest

from durable_flow import (
    END,
    Approval,
    Blackboard,
    InvalidResponseError,
    Message,
    NotAuthorizedError,
    Principal,
    RunStatus,
    Runtime,
    ToolCall,
    ToolDecision,
    WorkflowBuilder,
    tool,
)
from durable_flow.model._effects import arguments_digest
from durable_flow.testing import ScriptedModel


class Desk(Blackboard):
    question: str = ""
    answer: str = ""


def desk(refunds: list[tuple[str, int]], *, approval: Any = True, seen: list[str] | None = None,
         in_doubt: str = "rerun") -> Any:
    @tool(approval=approval, in_doubt=in_doubt)  # type: ignore[arg-type]
    def refund(order: str, amount: int) -> str:
        """Refund an order."""
        refunds.append((order, amount))
        return f"refunded {amount} on {order}"

    def lookup(order: str) -> str:
        """Look an order up (no approval needed)."""
        return f"{order}: 2 items"

    def script(messages: list[Message]) -> Any:
        results = [m for m in messages if m.role == "tool"]
        if not results:
            return Message.assistant(tool_calls=[
                ToolCall(id="c1", name="lookup", arguments={"order": "A-7"}),
                ToolCall(id="c2", name="refund", arguments={"order": "A-7", "amount": "40"})])
        if seen is not None:
            seen.extend(m.content for m in results)
        return "done: " + results[-1].content

    b = WorkflowBuilder("desk", state=Desk)
    b.add_agent("desk", ScriptedModel(script), instructions="", tools=[lookup, refund])
    b.set_entry("desk")
    b.add_edge("desk", END)
    return b.build()


async def test_each_call_is_a_request_with_the_exact_arguments_and_runs_once_approved(
        rt: Runtime) -> None:
    refunds: list[tuple[str, int]] = []
    wf = desk(refunds)
    r = await rt.run(wf, {"question": "refund A-7"}, run_id="d1")
    assert r.status is RunStatus.WAITING and refunds == []
    [req] = r.pending_requests
    assert req.payload == {"kind": "tool_approval", "tool": "refund", "call_id": "c2",
                           "arguments": {"order": "A-7", "amount": 40}}
    assert req.title == "Approve refund"
    # the answer's form has each argument, typed, filled in with the proposal
    props = req.response_schema["properties"]
    assert "approve" in props and "arguments" in props
    r = await rt.resume(wf, "d1", responses={req.id: ToolDecision(approve=True)})
    assert r.status is RunStatus.COMPLETED and r.state.answer == "done: refunded 40 on A-7"
    assert refunds == [("A-7", 40)]
    [decision] = [d for d in await rt.decisions("d1") if d.kind == "answer"]
    assert decision.answer["arguments"] == {"order": "A-7", "amount": 40}
    assert decision.answer["arguments_digest"] == arguments_digest({"order": "A-7", "amount": 40})


async def test_edited_arguments_are_the_ones_that_run(rt: Runtime) -> None:
    refunds: list[tuple[str, int]] = []
    wf = desk(refunds)
    r = await rt.run(wf, {"question": "refund A-7"}, run_id="d2")
    [req] = r.pending_requests
    edit = {"approve": True, "arguments": {"order": "A-7", "amount": 25}, "comment": "partial"}
    r = await rt.resume(wf, "d2", responses={req.id: edit})
    assert r.status is RunStatus.COMPLETED and refunds == [("A-7", 25)]
    [decision] = [d for d in await rt.decisions("d2") if d.kind == "answer"]
    assert decision.answer["arguments_digest"] == arguments_digest({"order": "A-7", "amount": 25})


async def test_edited_arguments_that_do_not_fit_the_tool_are_refused_at_the_answer(
        rt: Runtime) -> None:
    wf = desk([])
    r = await rt.run(wf, {"question": "refund A-7"}, run_id="d3")
    [req] = r.pending_requests
    with pytest.raises(InvalidResponseError):
        await rt.respond("d3", {req.id: {"approve": True, "arguments": {"order": "A-7"}}})
    assert [p.id for p in await rt.pending_requests()] == [req.id]


async def test_a_refused_call_never_runs_and_the_model_is_told_why(rt: Runtime) -> None:
    refunds: list[tuple[str, int]] = []
    seen: list[str] = []
    wf = desk(refunds, seen=seen)
    r = await rt.run(wf, {"question": "refund A-7"}, run_id="d4")
    [req] = r.pending_requests
    r = await rt.resume(wf, "d4", responses={
        req.id: {"approve": False, "comment": "outside the refund window"}})
    assert r.status is RunStatus.COMPLETED and refunds == []
    assert "refused" in seen[-1] and "outside the refund window" in seen[-1]
    assert seen[0] == "A-7: 2 items"  # the unapproved tool ran as before


async def test_only_the_assigned_people_may_approve(rt: Runtime) -> None:
    refunds: list[tuple[str, int]] = []
    wf = desk(refunds, approval=Approval(title="Refund?", roles=["finance"]))
    r = await rt.run(wf, {"question": "refund A-7"}, run_id="d5")
    [req] = r.pending_requests
    assert req.roles == ("finance",) and req.title == "Refund?"
    with pytest.raises(NotAuthorizedError):
        await rt.respond("d5", {req.id: {"approve": True}}, by=Principal("mallory"))
    await rt.respond("d5", {req.id: {"approve": True}}, by=Principal("fiona", ("finance",)))
    r = await rt.resume(wf, "d5")
    assert r.status is RunStatus.COMPLETED and refunds == [("A-7", 40)]
    [decision] = [d for d in await rt.decisions("d5") if d.kind == "answer"]
    assert decision.by == "fiona"


async def test_an_approval_nobody_gives_in_time_is_a_refusal(rt: Runtime) -> None:
    import asyncio

    refunds: list[tuple[str, int]] = []
    seen: list[str] = []
    wf = desk(refunds, approval=Approval(timeout=0.2), seen=seen)
    r = await rt.run(wf, {"question": "refund A-7"}, run_id="d6")
    assert r.status is RunStatus.WAITING
    await asyncio.sleep(0.4)
    r = await rt.resume(wf, "d6")
    assert r.status is RunStatus.COMPLETED and refunds == []
    assert "no one approved it in time" in seen[-1]


async def test_a_resumed_task_neither_asks_again_nor_runs_an_approved_call_twice(
        rt: Runtime) -> None:
    refunds: list[tuple[str, int]] = []
    b = WorkflowBuilder("two", state=Desk)
    inner = desk(refunds)
    b.add_node("desk", inner.nodes["desk"].fn)

    @b.node()
    async def confirm(state: Desk, ctx: Any) -> dict[str, Any]:
        await ctx.request({"question": "send the summary?"}, bool)
        return {}

    b.set_entry("desk")
    b.add_edge("desk", "confirm")
    b.add_edge("confirm", END)
    wf = b.build()
    r = await rt.run(wf, {"question": "refund A-7"}, run_id="d7")
    [req] = r.pending_requests
    r = await rt.resume(wf, "d7", responses={req.id: {"approve": True}})
    [ask] = r.pending_requests
    assert ask.node == "confirm"
    r = await rt.resume(wf, "d7", responses={ask.id: True})
    assert r.status is RunStatus.COMPLETED and refunds == [("A-7", 40)]


def test_tool_marks_a_copy_and_checks_its_options() -> None:
    from durable_flow.agents._approval import options_of
    from durable_flow.errors import InvalidInputError

    def plain(x: int) -> int:
        return x

    marked = tool(plain, approval=True, in_doubt="ask")
    assert marked(2) == 2 and marked.__name__ == "plain"
    assert options_of(marked).approval == Approval() and options_of(marked).in_doubt == "ask"
    assert options_of(plain).approval is None  # the function itself is unchanged
    with pytest.raises(InvalidInputError):
        tool(plain, in_doubt="maybe")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        tool(plain, approval="yes")  # type: ignore[arg-type]
