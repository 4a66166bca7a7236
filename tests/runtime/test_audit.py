"""The audit chain proves: keyed digests, the anchor in the run row, answers bound (every store)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from auditkit import rows, tamper
from migrationkit import downgrade_sqlite

from durable_flow import (
    END,
    AuditError,
    Blackboard,
    Principal,
    RunNotFoundError,
    RunStatus,
    Runtime,
    WorkflowBuilder,
)
from durable_flow.model._audit import audit_key
from durable_flow.model._decisions import KEYED_PREFIX, Decision, chain_digest

SECRET = "audit-secret-0123456789"


class Payout(Blackboard):
    checked: bool | None = None
    paid: bool | None = None
    ran_after: int = 0


def payout_flow() -> Any:
    b = WorkflowBuilder("payout", state=Payout)

    @b.node()
    async def check(state: Payout, ctx: Any) -> dict[str, Any]:
        return {"checked": await ctx.request({"question": "Checked?"}, bool, assignees=["ann"])}

    @b.node()
    async def approve(state: Payout, ctx: Any) -> dict[str, Any]:
        return {"paid": await ctx.request({"question": "Pay 10,000?"}, bool, roles=["cfo"])}

    @b.node()
    async def pay(state: Payout, ctx: Any) -> dict[str, Any]:
        return {"ran_after": 1}

    b.set_entry("check").add_edge("check", "approve").add_edge("approve", "pay")
    b.add_edge("pay", END)
    return b.build()


async def _two_decisions(rt: Runtime) -> tuple[Any, str, str]:
    """A run waiting on the CFO after ann checked it and the CFO refused once: 2 decisions."""
    wf = payout_flow()
    r = await rt.run(wf, {})
    r = await rt.resume(wf, r.run_id, responses={r.pending_requests[0].id: True}, by="ann")
    rid = r.pending_requests[0].id
    await rt.respond(r.run_id, {rid: False}, by=Principal("cfo", ("cfo",)), comment="no")
    return wf, r.run_id, rid


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DURABLE_FLOW_SECRET", SECRET)


@pytest.fixture
def unkeyed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DURABLE_FLOW_SECRET", raising=False)


async def test_with_a_secret_every_digest_is_an_hmac_and_the_report_says_keyed(
        rt: Runtime, keyed: None) -> None:
    _, run_id, _ = await _two_decisions(rt)
    chain = await rt.decisions(run_id)
    assert [d.digest.startswith(KEYED_PREFIX) for d in chain] == [True, True]
    report = await rt.verify_audit(run_id)
    assert (report.ok, report.keyed, report.decisions, report.problems) == (True, True, 2, ())
    other = await rt.verify_audit(run_id, secret="another secret")
    assert not other.ok and "decision 1 was changed" in other.problems[0]


async def test_without_a_secret_the_chain_is_plain_sha256_and_reported_unkeyed(
        rt: Runtime, unkeyed: None) -> None:
    _, run_id, _ = await _two_decisions(rt)
    assert not any(d.digest.startswith(KEYED_PREFIX) for d in await rt.decisions(run_id))
    report = await rt.verify_audit(run_id)
    assert (report.ok, report.keyed, report.decisions) == (True, False, 2)


async def test_the_run_row_anchors_the_count_and_head_digest(rt: Runtime, keyed: None) -> None:
    _, run_id, _ = await _two_decisions(rt)
    chain = await rt.decisions(run_id)
    assert await rows(rt.store, "SELECT audit_count, audit_head, audit_root FROM runs "
                      "WHERE run_id = ?", run_id) == [(2, chain[-1].digest, "")]


@pytest.mark.parametrize("where", ["seq = 2", "seq >= 1"], ids=["newest", "every"])
async def test_deleting_the_newest_or_every_decision_is_caught(
        rt: Runtime, keyed: None, where: str) -> None:
    _, run_id, _ = await _two_decisions(rt)
    await tamper(rt.store, f"DELETE FROM decisions WHERE run_id = ? AND {where}", run_id)
    report = await rt.verify_audit(run_id)
    assert not report.ok
    assert "the run records 2 decision(s)" in report.problems[0]
    assert "deleted" in report.problems[0]


async def test_a_decision_appended_after_a_deletion_leaves_the_gap(rt: Runtime, keyed: None) -> None:
    _wf, run_id, rid = await _two_decisions(rt)
    await tamper(rt.store, "DELETE FROM decisions WHERE run_id = ? AND seq = 2", run_id)
    await tamper(rt.store, "UPDATE requests SET answer = NULL, answered_at = NULL "
                 "WHERE run_id = ? AND request_id = ?", run_id, rid)
    await rt.respond(run_id, {rid: True}, by=Principal("cfo", ("cfo",)))
    assert [d.seq for d in await rt.decisions(run_id)] == [1, 3]
    report = await rt.verify_audit(run_id)
    assert not report.ok and "decision 2 is missing" in report.problems[0]


async def _reseal(rt: Runtime, run_id: str, key: bytes | None) -> None:
    """Rewrite decision 2 to an approval and recompute every digest and the anchor."""
    await tamper(rt.store, "UPDATE decisions SET answer = 'true', comment = 'approved' "
                 "WHERE run_id = ? AND seq = 2", run_id)
    previous = ""
    for d in await rt.store.decisions(run_id):
        digest = chain_digest(previous, Decision(**{**_fields(d), "digest": ""}).body(), key)
        await tamper(rt.store, "UPDATE decisions SET digest = ? WHERE run_id = ? AND seq = ?",
                     digest, run_id, d.seq)
        previous = digest
    await tamper(rt.store, "UPDATE runs SET audit_head = ? WHERE run_id = ?", previous, run_id)


def _fields(d: Decision) -> dict[str, Any]:
    return {name: getattr(d, name) for name in Decision.__slots__}  # type: ignore[attr-defined]


async def test_a_resealed_chain_without_the_key_fails_or_is_reported_unkeyed(
        rt: Runtime, keyed: None) -> None:
    _, run_id, _ = await _two_decisions(rt)
    await _reseal(rt, run_id, audit_key("a guessed secret"))
    guessed = await rt.verify_audit(run_id)
    assert not guessed.ok and "was changed" in guessed.problems[0]
    await _reseal(rt, run_id, None)  # plain sha256: anyone can compute it
    downgraded = await rt.verify_audit(run_id)
    assert downgraded.keyed is False  # what `audit --verify --require-keyed` refuses


async def test_resuming_on_an_answer_its_decision_does_not_record_raises_and_runs_nothing(
        rt: Runtime, keyed: None) -> None:
    wf, run_id, rid = await _two_decisions(rt)
    before = await rt.history(run_id)
    await tamper(rt.store, "UPDATE requests SET answer = ? WHERE run_id = ? AND request_id = ?",
                 b"true", run_id, rid)
    with pytest.raises(AuditError) as caught:
        await rt.resume(wf, run_id)
    assert caught.value.run_id == run_id
    assert f"the answer to {rid!r} is not the one its decision 2 records" in str(caught.value)
    assert [c.id for c in await rt.history(run_id)] == [c.id for c in before]
    info = (await rt.list_runs())[0]
    assert info.status is RunStatus.QUEUED and (await rt.get_state(run_id)).values["paid"] is None
    report = await rt.verify_audit(run_id)
    assert not report.ok and "is not the one its decision 2 records" in report.problems[0]


async def test_an_answer_whose_decision_was_deleted_stops_the_resume(rt: Runtime,
                                                                    unkeyed: None) -> None:
    wf, run_id, _rid = await _two_decisions(rt)
    await tamper(rt.store, "DELETE FROM decisions WHERE run_id = ?", run_id)
    await tamper(rt.store, "UPDATE runs SET audit_count = 0, audit_head = '' WHERE run_id = ?",
                 run_id)
    with pytest.raises(AuditError, match="has no decision"):
        await rt.resume(wf, run_id)


async def test_an_intact_trail_resumes_and_verifies(rt: Runtime, keyed: None) -> None:
    wf, run_id, _ = await _two_decisions(rt)
    r = await rt.resume(wf, run_id)
    assert r.status is RunStatus.COMPLETED and r.state.paid is False
    assert (await rt.verify_audit(run_id)).ok


async def test_a_forks_chain_starts_from_its_sources_head(rt: Runtime, keyed: None) -> None:
    wf = payout_flow()
    r = await rt.run(wf, {})
    r = await rt.resume(wf, r.run_id, responses={r.pending_requests[0].id: True}, by="ann")
    source_head = (await rt.decisions(r.run_id))[-1].digest
    fork = await rt.fork(wf, r.run_id, r.checkpoint_id)  # ann's answer is copied
    assert fork.status is RunStatus.WAITING
    assert await rows(rt.store, "SELECT audit_root FROM runs WHERE run_id = ?",
                      fork.run_id) == [(source_head,)]
    rid = fork.pending_requests[0].id
    done = await rt.resume(wf, fork.run_id, responses={rid: True}, by=Principal("c", ("cfo",)))
    assert done.status is RunStatus.COMPLETED and done.state.paid is True
    first, answer = await rt.decisions(fork.run_id)  # the fork itself, then the answer
    assert (first.kind, answer.kind) == ("fork", "answer")
    assert first.digest == chain_digest(source_head, first.body(), audit_key())
    assert (await rt.verify_audit(fork.run_id)).ok


async def test_a_forks_copied_answers_are_backed_by_its_sources_decisions(
        rt: Runtime, keyed: None) -> None:
    wf, run_id, rid = await _two_decisions(rt)
    fork = await rt.fork(wf, run_id, (await rt.history(run_id))[0].id)  # copies the refusal
    assert fork.status is RunStatus.COMPLETED and fork.state.paid is False
    assert await rows(rt.store, "SELECT answer FROM requests WHERE run_id = ? AND request_id = ?",
                      fork.run_id, rid) == [(b"false",)]
    assert (await rt.verify_audit(fork.run_id)).ok
    await tamper(rt.store, "UPDATE decisions SET answer = 'true' WHERE run_id = ? AND seq = 2",
                 run_id)
    report = await rt.verify_audit(fork.run_id)
    assert not report.ok and f"the answer to {rid!r} is not the one its decision 2" \
        in report.problems[0]


async def test_an_unknown_run_has_no_audit(rt: Runtime) -> None:
    with pytest.raises(RunNotFoundError):
        await rt.verify_audit("nope")


def test_keyed_digests_depend_on_the_secret() -> None:
    body = {"seq": 1, "answer": orjson.loads(b"true")}
    assert chain_digest("", body, audit_key("a")) != chain_digest("", body, audit_key("b"))
    assert chain_digest("", body, audit_key("a")).startswith(KEYED_PREFIX)
    assert not chain_digest("", body).startswith(KEYED_PREFIX)


async def test_upgrading_anchors_the_decisions_a_run_already_holds(
        tmp_path: Any, unkeyed: None) -> None:
    """Migration 0014 sets each run's anchor from its decisions: they verify, a deletion shows."""

    from durable_flow import SqliteStore

    db = tmp_path / "old.db"
    async with Runtime(SqliteStore(db)) as rt:
        _, run_id, _ = await _two_decisions(rt)
    downgrade_sqlite(db, "0013")  # before the anchor columns (migration 0014)
    async with Runtime(SqliteStore(db)) as rt:
        report = await rt.verify_audit(run_id)
        assert (report.ok, report.decisions) == (True, 2)
        await tamper(rt.store, "DELETE FROM decisions WHERE seq = 2")
        assert not (await rt.verify_audit(run_id)).ok
