"""``import`` trusts nothing: signed exports, every row checked, no recorded code (every store)."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from durable_flow import (
    END,
    Blackboard,
    InvalidInputError,
    MemoryStore,
    NodeContext,
    Principal,
    RunStatus,
    Runtime,
    SqliteStore,
    WorkflowBuilder,
    export_run,
    import_run,
)
from durable_flow.cli import app

SECRET = "export-secret-0123456789"


class Claim(Blackboard):
    claimant: str = ""
    approved: bool | None = None
    ref: str = ""


def claim_flow() -> Any:
    b = WorkflowBuilder("claim", state=Claim)

    @b.node()
    async def approve(state: Claim, ctx: NodeContext) -> dict[str, Any]:
        return {"approved": await ctx.request({"question": "Pay?"}, bool, roles=["cfo"])}

    @b.node()
    async def pay(state: Claim, ctx: NodeContext) -> dict[str, Any]:
        return {"ref": await ctx.step("transfer", lambda: "paid to the claimant")}

    @b.node()
    async def confirm(state: Claim, ctx: NodeContext) -> dict[str, Any]:
        await ctx.request({"question": "Received?"}, bool)
        return {}

    b.set_entry("approve").add_edge("approve", "pay").add_edge("pay", "confirm")
    b.add_edge("confirm", END)
    return b.build()


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DURABLE_FLOW_SECRET", SECRET)


@pytest.fixture
def unkeyed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DURABLE_FLOW_SECRET", raising=False)


async def _exported(run_id: str = "src", *, answered: bool = True) -> dict[str, Any]:
    """A run the CFO approved (one decision), paid, waiting on the claimant; from its own store.

    A document keeps its run id (the decision chain covers it), so each test
    imports into the store under test a run made elsewhere.
    """
    async with Runtime(MemoryStore()) as rt:
        wf = claim_flow()
        r = await rt.run(wf, {"claimant": "erik"}, run_id=run_id)
        if answered:
            r = await rt.resume(wf, run_id, responses={r.pending_requests[0].id: True},
                                by=Principal("cfo", ("cfo",)))
        return await export_run(rt.store, run_id)


async def _refused(rt: Runtime, doc: dict[str, Any], fragment: str, **kw: Any) -> None:
    with pytest.raises(InvalidInputError, match=fragment):
        await import_run(rt.store, doc, **kw)
    assert await rt.list_runs() == []  # nothing written


async def test_an_export_is_signed_and_imports_under_the_same_secret(
        rt: Runtime, keyed: None) -> None:
    doc = await _exported()
    assert doc["signature"].startswith("hmac-sha256:")
    unsigned = {k: v for k, v in doc.items() if k != "signature"}
    await _refused(rt, unsigned, "not signed")
    info = await import_run(rt.store, doc)
    assert info.run_id == "src" and info.status is RunStatus.WAITING
    *_, noted = await rt.decisions("src")  # the import is recorded in the chain
    assert (noted.kind, noted.answer["signed"], noted.digest[:12]) == ("import", True,
                                                                       "hmac-sha256:")
    report = await rt.verify_audit("src")
    assert (report.ok, report.keyed, report.decisions) == (True, True, 2)


async def test_a_forged_step_result_in_a_signed_export_is_refused(rt: Runtime, keyed: None) -> None:
    doc = await _exported()
    forged = copy.deepcopy(doc)
    (step,) = forged["tables"]["steps"]
    step["data"] = "paid to IBAN XX00 ATTACKER"
    await _refused(rt, forged, "signature does not match")
    await _refused(rt, doc, "signature does not match", secret="another secret")


async def test_a_signed_export_without_the_secret_needs_unsigned(
        rt: Runtime, keyed: None, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = await _exported()
    monkeypatch.delenv("DURABLE_FLOW_SECRET")
    await _refused(rt, doc, "cannot be checked")
    await import_run(rt.store, doc, unsigned=True)
    report = await rt.verify_audit("src")  # a keyed chain cannot be checked without the key
    assert not report.ok and "no key is given" in report.problems[0]


async def test_a_forged_answer_is_refused(rt: Runtime, unkeyed: None) -> None:
    doc = await _exported()
    (answered,) = [r for r in doc["tables"]["requests"] if r["answer"] is not None]
    answered["answer"] = False
    await _refused(rt, doc, "is not the one its decision 1 records")


async def test_a_deleted_or_resealed_decision_is_refused(rt: Runtime, keyed: None) -> None:
    doc = await _exported()
    del doc["signature"]  # an edited document cannot keep it: imported with unsigned=True
    cut = copy.deepcopy(doc)
    cut["tables"]["decisions"] = []
    await _refused(rt, cut, "every decision deleted", unsigned=True)
    garbage = copy.deepcopy(doc)
    garbage["tables"]["decisions"][0]["digest"] = "0" * 64
    await _refused(rt, garbage, "decision 1 was changed", unsigned=True)
    renamed = copy.deepcopy(doc)  # the chain covers the run id: a copy under a new id fails
    renamed["run_id"] = "other"
    for rows in renamed["tables"].values():
        for row in rows:
            if "run_id" in row:
                row["run_id"] = "other"
    # the checkpoint rows' own digests cover the run id too: whichever is checked first
    await _refused(rt, renamed, "decision 1 was changed|does not match its digest",
                   unsigned=True)


@pytest.mark.parametrize(("table", "column", "value", "fragment"), [
    ("runs", "status", "zombie", "'zombie' is not a valid RunStatus"),
    ("checkpoints", "status", "zombie", "'zombie' is not a valid RunStatus"),
    ("checkpoints", "source", "dream", "cannot be read back"),
    ("checkpoints", "next_tasks", "{not json", "cannot be read back"),
    ("requests", "kind", "prayer", "cannot be read back"),
    ("decisions", "kind", "veto", "decision kind 'veto' is unknown"),
    ("decisions", "via", "pigeon", "decision via 'pigeon' is unknown"),
    ("runs", "head_checkpoint_id", "nowhere", "head 'nowhere' is not among its checkpoints"),
    ("steps", "checkpoint_id", "nowhere", "names checkpoint 'nowhere'"),
    ("checkpoints", "parent_id", "nowhere", "continues 'nowhere'"),
])
async def test_a_row_the_store_could_not_hold_is_refused(
        rt: Runtime, unkeyed: None, table: str, column: str, value: Any, fragment: str) -> None:
    doc = await _exported()
    row = doc["tables"][table][-1]
    row[column] = value
    if table == "checkpoints":  # the row's own digest refuses any edit: past it (a row of
        del row["row_digest"]   # before digests), the reference itself is checked
    await _refused(rt, doc, fragment)
    assert await rt.list_runs() == []  # and the store still reads


async def test_an_edited_checkpoint_row_is_refused_by_its_digest(
        rt: Runtime, unkeyed: None) -> None:
    doc = await _exported()
    doc["tables"]["checkpoints"][-1]["parent_id"] = "nowhere"
    await _refused(rt, doc, "does not match its digest")
    assert await rt.list_runs() == []


async def test_two_rows_with_one_key_are_refused(rt: Runtime, unkeyed: None) -> None:
    doc = await _exported()
    doc["tables"]["requests"].append(dict(doc["tables"]["requests"][0]))
    await _refused(rt, doc, "two rows of 'requests' have the key")


async def test_recorded_workflow_refs_are_dropped_unless_kept(rt: Runtime, unkeyed: None) -> None:
    for run_id, keep in (("ref", False), ("kept", True)):
        doc = await _exported(run_id)
        doc["tables"]["runs"][0]["workflow_ref"] = "report_helpers:payout"
        await import_run(rt.store, doc, keep_workflow_refs=keep)
    assert (await rt.store.get_run("ref")).workflow_ref is None
    assert (await rt.store.get_run("kept")).workflow_ref == "report_helpers:payout"


async def test_a_run_with_a_field_set_to_none_moves_and_resumes(rt: Runtime,
                                                               unkeyed: None) -> None:
    doc = await _exported(answered=False)
    values = [r["data"] for r in doc["tables"]["channel_values"]]
    assert None in values  # the None field, a JSON null where SQL NULL cannot be
    await import_run(rt.store, doc)
    state = await rt.get_state("src")
    assert state.values["approved"] is None and state.values["claimant"] == "erik"
    r = await rt.resume(claim_flow(), "src", by=Principal("cfo", ("cfo",)),
                        responses={state.pending_requests[0].id: False})
    assert r.status is RunStatus.WAITING and r.state.approved is False
    assert (await rt.verify_audit("src")).ok


def test_the_import_command_takes_unsigned_and_keep_workflow_refs(
        tmp_path: Path, keyed: None) -> None:
    doc = asyncio.run(_exported())
    doc["tables"]["runs"][0]["workflow_ref"] = "report_helpers:payout"
    del doc["signature"]
    path = tmp_path / "run.json"
    path.write_bytes(orjson.dumps(doc))
    runner, db = CliRunner(), str(tmp_path / "b.db")
    refused = runner.invoke(app, ["--db", db, "import", str(path)])
    assert refused.exit_code == 1 and "not signed" in refused.output
    loaded = runner.invoke(app, ["--db", db, "import", str(path), "--unsigned",
                                 "--keep-workflow-refs"])
    assert loaded.exit_code == 0, loaded.output

    async def ref() -> str | None:
        async with SqliteStore(db) as store:
            record = await store.get_run("src")
            assert record is not None
            return record.workflow_ref
    assert asyncio.run(ref()) == "report_helpers:payout"
    signed = runner.invoke(app, ["--db", db, "export", "src"])
    assert orjson.loads(signed.stdout)["signature"].startswith("hmac-sha256:")
