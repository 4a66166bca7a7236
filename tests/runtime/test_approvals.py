"""Approvals in the runtime: who may answer, decisions written with the answers (every store)."""

from __future__ import annotations

from typing import Any

import pytest

from durable_flow import (
    END,
    Blackboard,
    InvalidInputError,
    NotAuthorizedError,
    Principal,
    RunStatus,
    Runtime,
    WorkflowBuilder,
)
from durable_flow.model._decisions import payload_digest, verify_chain

PAYLOAD = {"question": "Approve 40 EUR for Alice's taxi?", "amount": 40, "claimant": "alice"}


class Expense(Blackboard):
    approved: bool | None = None


def expense_flow(**request: Any) -> Any:
    b = WorkflowBuilder("expense", state=Expense)

    @b.node()
    async def approve(state: Expense, ctx: Any) -> dict[str, Any]:
        return {"approved": await ctx.request(PAYLOAD, bool, **request)}

    b.set_entry("approve")
    b.add_edge("approve", END)
    return b.build()


async def _waiting(rt: Runtime, **request: Any) -> tuple[Any, str]:
    wf = expense_flow(**request)
    result = await rt.run(wf, {})
    assert result.status is RunStatus.WAITING
    return wf, result.pending_requests[0].id


async def test_a_request_names_its_title_assignees_and_roles(rt: Runtime) -> None:
    _, rid = await _waiting(rt, assignees=["alice@example.com"], roles=["finance"])
    (pending,) = await rt.pending_requests()
    assert (pending.id, pending.title) == (rid, "Approve 40 EUR for Alice's taxi?")
    assert (pending.assignees, pending.roles) == (("alice@example.com",), ("finance",))
    assert pending.escalated is False


async def test_an_explicit_title_wins_and_unassigned_requests_have_none(rt: Runtime) -> None:
    wf = expense_flow(title="Taxi expense")
    await rt.run(wf, {})
    (pending,) = await rt.pending_requests()
    assert (pending.title, pending.assignees, pending.roles) == ("Taxi expense", (), ())


async def test_someone_else_is_refused_and_nothing_changes(rt: Runtime) -> None:
    _, rid = await _waiting(rt, assignees=["alice@example.com"], roles=["finance"])
    run_id = (await rt.pending_requests())[0].run_id
    for by in (None, "bob@example.com", Principal("bob", roles=("legal",))):
        with pytest.raises(NotAuthorizedError) as caught:
            await rt.respond(run_id, {rid: True}, by=by)
        assert caught.value.request_id == rid
        assert caught.value.allowed == "'alice@example.com' or role 'finance'"
        assert "only 'alice@example.com' or role 'finance' may" in str(caught.value)
        assert ("nobody was named" in str(caught.value)) is (by is None)
    assert [p.id for p in await rt.pending_requests()] == [rid]
    assert await rt.decisions(run_id) == []
    assert (await rt.get_run(run_id)).status is RunStatus.WAITING


async def test_an_answer_is_recorded_as_a_decision_by_who_via_what(rt: Runtime) -> None:
    wf, rid = await _waiting(rt, roles=["finance"])
    run_id = (await rt.pending_requests())[0].run_id
    await rt.respond(run_id, {rid: True}, by=Principal("carol", roles=("finance",)), via="ui",
                     comment="fine")
    assert (await rt.pending_requests()) == []
    (decision,) = await rt.decisions(run_id)
    assert (decision.seq, decision.request_id, decision.node, decision.kind) == (1, rid, "approve", "answer")
    assert (decision.answer, decision.by, decision.via, decision.comment) == (True, "carol", "ui", "fine")
    assert decision.payload_digest == payload_digest(PAYLOAD)
    assert verify_chain(await rt.decisions(run_id)) is None
    result = await rt.resume(wf, run_id)
    assert result.state.approved is True


async def test_resume_checks_by_and_records_the_answer_in_its_claim(rt: Runtime) -> None:
    wf, rid = await _waiting(rt, assignees=["alice@example.com"])
    run_id = (await rt.pending_requests())[0].run_id
    with pytest.raises(NotAuthorizedError):
        await rt.resume(wf, run_id, responses={rid: False}, by="mallory")
    assert (await rt.get_run(run_id)).status is RunStatus.WAITING
    result = await rt.resume(wf, run_id, responses={rid: False}, by="alice@example.com")
    assert result.status is RunStatus.COMPLETED and result.state.approved is False
    (decision,) = await rt.decisions(run_id)
    assert (decision.by, decision.via, decision.answer) == ("alice@example.com", "api", False)


async def test_resume_records_its_comment_and_channel(rt: Runtime) -> None:
    wf, rid = await _waiting(rt, roles=["finance"])
    run_id = (await rt.pending_requests())[0].run_id
    with pytest.raises(InvalidInputError):
        await rt.resume(wf, run_id, responses={rid: True}, by="fay", via="policy")
    result = await rt.resume(wf, run_id, responses={rid: True}, via="cli", comment="seen it",
                             by=Principal("fay", roles=("finance",)))
    assert result.status is RunStatus.COMPLETED
    (decision,) = await rt.decisions(run_id)
    assert (decision.by, decision.via, decision.comment) == ("fay", "cli", "seen it")


async def test_unassigned_requests_take_anonymous_answers_and_chain_them(rt: Runtime) -> None:
    b = WorkflowBuilder("two", state=Expense)

    @b.node()
    async def approve(state: Expense, ctx: Any) -> dict[str, Any]:
        first = await ctx.request({"step": 1}, bool)
        second = await ctx.request({"step": 2}, bool)
        return {"approved": first and second}

    b.set_entry("approve")
    b.add_edge("approve", END)
    wf = b.build()
    run = await rt.run(wf, {})
    run = await rt.resume(wf, run.run_id, responses={run.pending_requests[0].id: True})
    run = await rt.resume(wf, run.run_id, responses={run.pending_requests[0].id: True}, by="dave")
    assert run.state.approved is True
    chain = await rt.decisions(run.run_id)
    assert [(d.seq, d.by) for d in chain] == [(1, None), (2, "dave")]
    assert chain[1].digest != chain[0].digest and verify_chain(chain) is None


async def test_bad_approval_arguments_are_refused(rt: Runtime) -> None:
    _, rid = await _waiting(rt)
    run_id = (await rt.pending_requests())[0].run_id
    with pytest.raises(InvalidInputError):
        await rt.respond(run_id, {rid: True}, via="policy")
    with pytest.raises(InvalidInputError):
        await rt.respond(run_id, {rid: True}, by=3)  # type: ignore[arg-type]
