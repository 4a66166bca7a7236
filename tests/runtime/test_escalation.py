"""Approvals past the first answer: escalation, timeouts, policies, reassignment (every store)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from durable_flow import (
    END,
    Blackboard,
    InvalidInputError,
    NotAuthorizedError,
    Policy,
    Principal,
    RunStatus,
    Runtime,
    UnknownRequestError,
    WorkflowBuilder,
)
from durable_flow.model._clock import utcnow
from durable_flow.model._decisions import verify_chain
from durable_flow.model._records import PendingRequest

MANAGER = Principal("mia", roles=("manager",))


class Expense(Blackboard):
    amount: int = 40
    approved: bool | None = None


def flow(**request: Any) -> Any:
    b = WorkflowBuilder("expense", state=Expense)

    @b.node()
    async def approve(state: Expense, ctx: Any) -> dict[str, Any]:
        payload = {"question": f"Approve {state.amount} EUR?", "amount": state.amount}
        return {"approved": await ctx.request(payload, bool, **request)}

    b.set_entry("approve")
    b.add_edge("approve", END)
    return b.build()


async def past(pending: PendingRequest) -> None:
    """Wait until the request's deadline has passed."""
    assert pending.expires_at is not None
    await asyncio.sleep(max(0.0, (pending.expires_at - utcnow()).total_seconds()) + 0.02)


async def _escalating(rt: Runtime, **extra: Any) -> tuple[Any, str, PendingRequest]:
    wf = flow(assignees=["alice"], timeout=0.4, escalate_to=["role:manager", "bob"], **extra)
    result = await rt.run(wf, {})
    assert result.status is RunStatus.WAITING
    return wf, result.run_id, result.pending_requests[0]


async def test_at_the_deadline_the_request_moves_to_the_escalation_targets(rt: Runtime) -> None:
    wf, run_id, first = await _escalating(rt)
    await past(first)
    result = await rt.resume(wf, run_id)  # a claim settles the deadline
    assert result.status is RunStatus.WAITING
    (moved,) = await rt.pending_requests()
    assert (moved.id, moved.assignees, moved.roles, moved.escalated) == (
        first.id, ("bob",), ("manager",), True)
    assert moved.expires_at is not None and first.expires_at is not None
    window = (first.expires_at - first.created_at).total_seconds()
    assert abs((moved.expires_at - utcnow()).total_seconds() - window) < 0.35
    with pytest.raises(NotAuthorizedError):
        await rt.respond(run_id, {first.id: True}, by="alice")
    await rt.respond(run_id, {first.id: True}, by=MANAGER)
    assert (await rt.resume(wf, run_id)).state.approved is True
    chain = await rt.decisions(run_id)
    assert [(d.kind, d.by, d.via) for d in chain] == [
        ("escalation", None, "runtime"), ("answer", "mia", "api")]
    assert chain[0].answer == {"assignees": ["bob"], "roles": ["manager"]}
    assert verify_chain(chain) is None
    kinds = [n.kind for n in await rt.store.notifications(run_id)]
    assert kinds == ["opened", "escalated"]


async def test_before_the_escalation_is_recorded_the_first_assignee_may_answer(rt: Runtime) -> None:
    wf, run_id, first = await _escalating(rt)
    await past(first)
    await rt.respond(run_id, {first.id: False}, by="alice")  # late, but not yet escalated
    result = await rt.resume(wf, run_id)
    assert result.state.approved is False
    assert [d.kind for d in await rt.decisions(run_id)] == ["answer"]


async def test_between_the_deadline_and_the_escalation_the_inbox_lists_it_to_the_first_people(
        rt: Runtime) -> None:
    plain = await rt.run(flow(assignees=["alice"], timeout=0.2), {})  # closes at its deadline
    wf, run_id, first = await _escalating(rt)
    await past(first)
    await past(plain.pending_requests[0])
    fresh = await rt.run(flow(), {})
    listed = await rt.pending_requests()
    assert [(p.id, p.run_id, p.assignees, p.escalated) for p in listed] == [
        (first.id, run_id, ("alice",), False), (fresh.pending_requests[0].id, fresh.run_id, (),
                                                 False)]
    assert [p.id for p in (await rt.get_state(run_id)).pending_requests] == [first.id]
    # a page of one skips the request no one may answer any more and still holds one
    (page,) = await rt.store.pending_requests(limit=1)
    assert page.run_id == run_id
    (following,) = await rt.store.pending_requests(
        limit=1, after=(page.created_at, page.run_id, page.id))
    assert following.run_id == fresh.run_id
    await rt.respond(run_id, {first.id: True}, by="alice", comment="just in time")
    assert [p.run_id for p in await rt.pending_requests()] == [fresh.run_id]
    assert (await rt.resume(wf, run_id)).state.approved is True
    (decision,) = await rt.decisions(run_id)
    assert (decision.kind, decision.by, decision.comment) == ("answer", "alice", "just in time")


async def test_titles_that_spell_the_approval_s_fields_do_not_fool_the_inbox(rt: Runtime) -> None:
    tricky = ['"escalated":false', '"escalate_to":[]', '","escalated":false,"x":"',
              "%_ \\ '; --"]
    late: dict[str, bool] = {}
    for title in tricky:
        for escalates in (False, True):
            extra: dict[str, Any] = {"escalate_to": [title + "@x"]} if escalates else {}
            result = await rt.run(flow(assignees=[title + "@a"], title=title, timeout=0.3,
                                       **extra), {})
            late[result.run_id] = escalates
    await past((await rt.pending_requests())[-1])
    listed = {p.run_id for p in await rt.pending_requests()}
    assert listed == {run for run, escalates in late.items() if escalates}


async def test_after_the_escalation_only_the_new_people_see_and_answer_it(rt: Runtime) -> None:
    wf, run_id, first = await _escalating(rt)
    await past(first)
    await rt.resume(wf, run_id)  # the escalation is recorded
    (moved,) = await rt.pending_requests()
    assert (moved.assignees, moved.roles, moved.escalated) == (("bob",), ("manager",), True)
    with pytest.raises(NotAuthorizedError):
        await rt.respond(run_id, {first.id: True}, by="alice")
    await past(moved)  # escalated once: past its second deadline it is no one's to answer
    assert await rt.pending_requests() == []
    with pytest.raises(UnknownRequestError):
        await rt.respond(run_id, {first.id: True}, by="bob")


async def test_at_the_second_deadline_the_default_applies_and_a_timeout_is_recorded(
        rt: Runtime) -> None:
    wf, run_id, first = await _escalating(rt, default=False)
    await past(first)
    await rt.resume(wf, run_id)
    await past((await rt.pending_requests())[0])
    result = await rt.resume(wf, run_id)
    assert result.status is RunStatus.COMPLETED and result.state.approved is False
    assert [(d.kind, d.via) for d in await rt.decisions(run_id)] == [
        ("escalation", "runtime"), ("timeout", "runtime")]


async def test_a_plain_deadline_records_a_timeout(rt: Runtime) -> None:
    wf = flow(timeout=0.2, default=True)
    result = await rt.run(wf, {})
    await past(result.pending_requests[0])
    assert (await rt.resume(wf, result.run_id)).state.approved is True
    (decision,) = await rt.decisions(result.run_id)
    assert (decision.kind, decision.answer, decision.by) == ("timeout", None, None)


async def test_a_policy_answers_at_once_and_is_recorded(rt: Runtime) -> None:
    wf = flow(roles=["finance"], policy=Policy("small", "amount < 100", True))
    result = await rt.run(wf, {"amount": 40})
    assert result.status is RunStatus.COMPLETED and result.state.approved is True
    (decision,) = await rt.decisions(result.run_id)
    assert (decision.kind, decision.by, decision.via, decision.answer) == (
        "policy", "policy:small", "policy", True)
    big = await rt.run(wf, {"amount": 500})
    assert big.status is RunStatus.WAITING and await rt.decisions(big.run_id) == []


async def test_a_policy_answer_that_does_not_fit_fails_the_node(rt: Runtime) -> None:
    wf = flow(policy=Policy("odd", "amount < 100", {"not": "a bool"}))
    result = await rt.run(wf, {})
    assert result.status is RunStatus.FAILED
    assert result.error is not None and "policy 'odd'" in result.error.message


async def test_an_admin_reassigns_an_open_request(rt: Runtime) -> None:
    wf = flow(assignees=["alice"])
    result = await rt.run(wf, {})
    rid = result.pending_requests[0].id
    with pytest.raises(InvalidInputError):  # a channel people act through, nothing else
        await rt.reassign(result.run_id, rid, assignees=["carol"], by="admin", via="policy")
    moved = await rt.reassign(result.run_id, rid, assignees=["carol"], by="admin", via="cli")
    assert (moved.assignees, moved.roles) == (("carol",), ())
    with pytest.raises(NotAuthorizedError):
        await rt.respond(result.run_id, {rid: True}, by="alice")
    await rt.respond(result.run_id, {rid: True}, by="carol", via="ui")
    chain = await rt.decisions(result.run_id)
    assert [(d.kind, d.by, d.via) for d in chain] == [("reassign", "admin", "cli"),
                                                      ("answer", "carol", "ui")]
    assert [n.kind for n in await rt.store.notifications(result.run_id)] == [
        "opened", "reassigned"]
    with pytest.raises(UnknownRequestError):
        await rt.reassign(result.run_id, rid, roles=["x"], by="admin")
    with pytest.raises(InvalidInputError):
        await rt.reassign(result.run_id, rid, by="admin")


async def test_escalate_to_needs_a_timeout(rt: Runtime) -> None:
    result = await rt.run(flow(escalate_to=["bob"]), {})
    assert result.status is RunStatus.FAILED
    assert result.error is not None and "escalate_to" in result.error.message


async def test_an_approval_link_is_signed_for_someone_who_may_answer(rt: Runtime) -> None:
    from durable_flow.runtime.people._links import LinkSigner

    result = await rt.run(flow(roles=["finance"]), {})
    rid = result.pending_requests[0].id
    with pytest.raises(NotAuthorizedError):
        await rt.approval_link(result.run_id, rid, for_="bob", base_url="http://x", secret="k")
    url = await rt.approval_link(result.run_id, rid, for_=Principal("fay", ("finance",)),
                                 base_url="http://x", secret="k")
    token = url.split("token=", 1)[1]
    assert LinkSigner("k").check(token, result.run_id, rid).principal == "fay"
    with pytest.raises(UnknownRequestError):
        await rt.approval_link(result.run_id, "nope", for_="fay", base_url="http://x", secret="k")


async def test_an_answer_waits_for_an_execution_that_holds_the_run_for_a_moment(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker holding a waiting run (escalating it, waking it at a deadline) delays an answer."""
    from durable_flow import RunLockedError
    from durable_flow.runtime import _approvals
    from durable_flow.store._protocols import Claim

    wf = flow(assignees=["alice"])
    waiting = await rt.run(wf, {})
    request = waiting.pending_requests[0]
    lease = await rt.store.claim(Claim(waiting.run_id, "worker:elsewhere:1:x", 30))

    async def let_go_soon() -> None:
        await asyncio.sleep(0.4)
        await rt.store.release_lease(lease)

    releasing = asyncio.create_task(let_go_soon())
    info = await rt.respond(waiting.run_id, {request.id: True}, by="alice")
    await releasing
    assert info.status is RunStatus.QUEUED  # recorded once the holder let go
    assert [d.by for d in await rt.decisions(waiting.run_id) if d.kind == "answer"] == ["alice"]

    # a holder that keeps the run past the wait: RunLockedError, nothing recorded
    again = await rt.run(wf, {})
    held = await rt.store.claim(Claim(again.run_id, "worker:elsewhere:1:y", 30))
    monkeypatch.setattr(_approvals, "RESPOND_LOCK_WAIT", 0.3)
    with pytest.raises(RunLockedError):
        await rt.respond(again.run_id, {again.pending_requests[0].id: True}, by="alice")
    await rt.store.release_lease(held)
    assert [d for d in await rt.decisions(again.run_id) if d.kind == "answer"] == []
