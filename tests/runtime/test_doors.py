"""Who may do what in the library: ``by=``, ``started_by``, acts on a run recorded (every store)."""

from __future__ import annotations

from typing import Any

import pytest

from durable_flow import (
    END,
    Blackboard,
    Budget,
    NotAuthorizedError,
    Principal,
    RunStatus,
    Runtime,
    StateUpdateError,
    WorkflowBuilder,
    WorkflowValidationError,
)
from durable_flow.model._access import Access, access_of
from durable_flow.model._decisions import payload_digest, verify_chain
from durable_flow.runtime._doors import run_access


class Claim(Blackboard):
    amount: int = 0
    approved: bool | None = None
    paid: bool = False


def claim_flow(**builder: Any) -> Any:
    b = WorkflowBuilder("claim", state=Claim, **builder)

    @b.node()
    async def approve(state: Claim, ctx: Any) -> dict[str, Any]:
        answer = await ctx.request({"question": f"Pay {state.amount}?"}, bool, roles=["cfo"])
        return {"approved": answer}

    @b.node()
    async def pay(state: Claim) -> dict[str, Any]:
        return {"paid": bool(state.approved)}

    b.set_entry("approve")
    b.add_edge("approve", "pay")
    b.add_edge("pay", END)
    return b.build()


async def test_run_and_submit_record_who_started_them(rt: Runtime) -> None:
    wf = claim_flow()
    started = await rt.run(wf, {"amount": 5}, by=Principal("carol", ("sales",)))
    assert (await rt.get_run(started.run_id)).started_by == "carol"
    queued = await rt.submit(wf, {"amount": 6}, by="dave")
    assert queued.started_by == "dave"
    listed = {i.run_id: i.started_by for i in await rt.list_runs()}
    assert listed == {started.run_id: "carol", queued.run_id: "dave"}
    anonymous = await rt.run(wf, {"amount": 7})
    assert (await rt.get_run(anonymous.run_id)).started_by is None


async def test_operators_and_viewers_are_kept_with_each_run(rt: Runtime) -> None:
    wf = claim_flow(operators=("ops",), viewers=["audit", "audit"])
    assert (wf.operators, wf.viewers) == (("ops",), ("audit",))
    result = await rt.run(wf, {"amount": 5}, by="carol")
    record = await rt.store.get_run(result.run_id)
    access = await run_access(rt.store, record)
    assert (access.operators, access.viewers, access.started_by) == (("ops",), ("audit",), "carol")
    assert access.requests == (((), ("cfo",)),)


def test_bad_operators_are_build_problems() -> None:
    with pytest.raises(WorkflowValidationError) as err:
        claim_flow(operators=("ops", ""), viewers=42)
    text = " ".join(err.value.problems)
    assert "operators must be non-empty role names" in text
    assert "viewers must be role names" in text


async def test_cancel_is_a_decision_by_who_cancelled(rt: Runtime) -> None:
    result = await rt.run(claim_flow(), {"amount": 5})
    info = await rt.cancel(result.run_id, by=Principal("olga", ("ops",)), comment="duplicate")
    assert info.status is RunStatus.CANCELLED
    (decision,) = await rt.decisions(result.run_id)
    assert (decision.kind, decision.by, decision.via, decision.comment) == (
        "cancel", "olga", "api", "duplicate")
    assert (decision.request_id, decision.node) == ("", "")
    assert verify_chain(await rt.decisions(result.run_id)) is None


async def test_a_fork_starts_its_chain_with_the_update_digest(rt: Runtime) -> None:
    wf = claim_flow()
    source = await rt.run(wf, {"amount": 900})
    rid = source.pending_requests[0].id
    done = await rt.resume(wf, source.run_id, responses={rid: False},
                           by=Principal("cfo-ann", ("cfo",)))
    assert done.status is RunStatus.COMPLETED and done.state.paid is False
    source_chain = await rt.decisions(source.run_id)
    after_refusal = (await rt.history(source.run_id))[0].id
    fork = await rt.fork(wf, source.run_id, after_refusal, update={"approved": True}, by="bob")
    first = (await rt.decisions(fork.run_id))[0]
    assert (first.kind, first.by, first.seq) == ("fork", "bob", 1)
    assert first.answer["source_run_id"] == source.run_id
    assert first.answer["checkpoint_id"] == after_refusal
    assert first.answer["source_head"] == source_chain[-1].digest
    assert first.answer["update_digest"] == payload_digest({"approved": True})
    assert first.payload_digest == payload_digest({"approved": True})
    assert first.answer["fields"] == ["approved"]
    assert (await rt.get_run(fork.run_id)).started_by == "bob"
    assert await rt.decisions(source.run_id) == source_chain  # the source is untouched


async def test_update_state_is_a_decision_in_its_commit(rt: Runtime) -> None:
    wf = claim_flow()
    result = await rt.run(wf, {"amount": 5})
    before = await rt.get_state(result.run_id)
    new_head = await rt.update_state(wf, result.run_id, {"amount": 6}, by="olga", via="cli")
    (decision,) = await rt.decisions(result.run_id)
    assert (decision.kind, decision.by, decision.via) == ("update", "olga", "cli")
    assert decision.answer == {"fields": ["amount"], "as_node": None,
                               "update_digest": payload_digest({"amount": 6})}
    assert new_head != before.checkpoint_id
    assert (await rt.get_run(result.run_id)).head_checkpoint_id == new_head


async def test_a_refused_update_records_nothing(rt: Runtime) -> None:
    wf = claim_flow()
    result = await rt.run(wf, {"amount": 5})
    with pytest.raises(StateUpdateError):
        await rt.update_state(wf, result.run_id, {"nope": 1}, by="olga")
    assert await rt.decisions(result.run_id) == []


async def test_a_fork_keeps_the_source_s_budget(rt: Runtime) -> None:
    wf = claim_flow(budget=Budget(max_tokens=5))
    from_builder = await rt.run(wf, {"amount": 5})
    given = await rt.run(claim_flow(), {"amount": 5}, budget=Budget(max_usd=1.0))
    for source, budget in ((from_builder, Budget(max_tokens=5)), (given, Budget(max_usd=1.0))):
        head = (await rt.history(source.run_id))[-1].id  # the input checkpoint
        fork = await rt.fork(wf if source is from_builder else claim_flow(), source.run_id, head)
        assert (await rt.get_run(fork.run_id)).budget == budget


async def test_an_identical_answer_is_refused_to_someone_who_may_not_answer(rt: Runtime) -> None:
    wf = claim_flow()
    result = await rt.run(wf, {"amount": 5})
    rid = result.pending_requests[0].id
    await rt.respond(result.run_id, {rid: True}, by=Principal("ann", ("cfo",)))
    with pytest.raises(NotAuthorizedError):
        await rt.respond(result.run_id, {rid: True}, by="bob")
    with pytest.raises(NotAuthorizedError):
        await rt.resume(wf, result.run_id, responses={rid: True}, by="bob")
    again = await rt.respond(result.run_id, {rid: True}, by=Principal("ann", ("cfo",)))
    assert again.run_id == result.run_id  # the no-op, for someone who may
    assert [(d.kind, d.by) for d in await rt.decisions(result.run_id)] == [("answer", "ann")]


async def test_who_had_a_request_before_a_reassignment_stays_a_participant(rt: Runtime) -> None:
    result = await rt.run(claim_flow(), {"amount": 5})
    rid = result.pending_requests[0].id
    await rt.reassign(result.run_id, rid, assignees=["carol"], by="admin")
    access = await run_access(rt.store, await rt.store.get_run(result.run_id))
    assert access.requests == ((("carol",), ()), ((), ("cfo",)))
    assert access_of(Principal("ann", ("cfo",)), access) is Access.PARTICIPANT
    assert access_of(Principal("bob"), access) is Access.NOBODY
