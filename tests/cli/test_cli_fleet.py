"""The fleet commands: runs filters, and bulk cancel, pause, unpause and retry."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner, Result

from durable_flow import END, Blackboard, Runtime, WorkflowBuilder
from durable_flow.cli import app
from durable_flow.store.sqlite._sqlite import SqliteStore


class Job(Blackboard):
    name: str = ""


def job(fail: bool = False) -> Any:
    b = WorkflowBuilder("failing" if fail else "jobs", state=Job)

    @b.node()
    async def work(state: Job) -> dict[str, Any]:
        if fail:
            raise RuntimeError("provider down")
        return {"name": state.name.upper()}

    b.set_entry("work").add_edge("work", END)
    return b.build()


def cli(db: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["--db", str(db), *args])


def seed(db: Path) -> dict[str, list[str]]:
    """Three queued runs of acme, one of globex, two failed runs of acme."""
    async def go() -> dict[str, list[str]]:
        async with Runtime(SqliteStore(db)) as rt:
            acme = [(await rt.submit(job(), {"name": f"a{i}"},
                                     labels={"customer": "acme"})).run_id for i in range(3)]
            globex = [(await rt.submit(job(), {"name": "g"},
                                       labels={"customer": "globex"})).run_id]
            failed = [(await rt.run(job(fail=True), {"name": f"f{i}"},
                                    labels={"customer": "acme"})).run_id for i in range(2)]
            return {"acme": acme, "globex": globex, "failed": failed}
    return asyncio.run(go())


def statuses(db: Path) -> dict[str, str]:
    async def go() -> dict[str, str]:
        async with Runtime(SqliteStore(db)) as rt:
            return {r.run_id: r.status.value for r in await rt.list_runs()}
    return asyncio.run(go())


def test_runs_filters_by_label_status_and_error_type(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    ids = seed(db)
    found = json.loads(cli(db, "runs", "--label", "customer=acme", "--json").stdout)
    assert {r["run_id"] for r in found} == {*ids["acme"], *ids["failed"]}
    assert all(r["labels"] == {"customer": "acme"} for r in found)
    found = json.loads(cli(db, "runs", "--error-type", "RuntimeError", "--since", "1h",
                           "--json").stdout)
    assert {r["run_id"] for r in found} == set(ids["failed"])
    table = cli(db, "runs", "--label", "customer=globex")
    assert table.exit_code == 0 and ids["globex"][0] in table.stdout
    assert "customer=globex" in table.stdout
    bad = cli(db, "runs", "--label", "nolabel")
    assert bad.exit_code == 2 and "KEY=VALUE" in bad.stderr


def test_bulk_pause_needs_yes_lists_on_dry_run_and_is_safe_to_run_again(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    ids = seed(db)
    refused = cli(db, "pause", "--label", "customer=acme", "--status", "queued")
    assert refused.exit_code == 1 and "--yes" in refused.stderr
    dry = cli(db, "pause", "--label", "customer=acme", "--status", "queued", "--dry-run")
    assert dry.exit_code == 0 and "3 run(s) selected" in dry.stdout
    assert set(statuses(db).values()) == {"queued", "failed"}  # nothing changed
    done = cli(db, "pause", "--label", "customer=acme", "--reason", "outage", "--by", "ops",
               "--yes")
    assert done.exit_code == 0, done.output
    # the failed runs of acme match the label too: their status does not allow a pause
    assert "pause: 3 done, 2 skipped (status did not allow it), 0 failed" in done.stdout
    now = statuses(db)
    assert all(now[r] == "paused" for r in ids["acme"]) and now[ids["globex"][0]] == "queued"
    again = cli(db, "pause", *ids["acme"], "--yes", "--json")
    assert json.loads(again.stdout) == {"action": "pause", "done": [],
                                        "skipped": ids["acme"], "failed": {}}
    back = json.loads(cli(db, "unpause", "--status", "paused", "--yes", "--json").stdout)
    assert sorted(back["done"]) == sorted(ids["acme"])
    assert all(statuses(db)[r] == "queued" for r in ids["acme"])


def test_bulk_retry_queues_failed_runs_and_cancel_takes_ids(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    ids = seed(db)
    out = json.loads(cli(db, "retry", "--status", "failed", "--yes", "--json").stdout)
    assert sorted(out["done"]) == sorted(ids["failed"])
    assert all(statuses(db)[r] == "queued" for r in ids["failed"])
    again = json.loads(cli(db, "retry", *ids["failed"], "--yes", "--json").stdout)
    assert again["done"] == [] and sorted(again["skipped"]) == sorted(ids["failed"])
    one = cli(db, "cancel", ids["globex"][0])
    assert one.exit_code == 0 and "cancelled" in one.stdout
    both = cli(db, "cancel", "--label", "customer=globex", "--yes")
    assert "cancel: 0 done, 1 skipped" in both.stdout
    mixed = cli(db, "cancel", ids["acme"][0], "--status", "queued")
    assert mixed.exit_code == 2 and "not both" in mixed.stderr
    nothing = cli(db, "cancel")
    assert nothing.exit_code == 2 and "needs run ids or filters" in nothing.stderr


def test_show_and_inbox_say_a_run_is_paused_and_why(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    b = WorkflowBuilder("asks", state=Job)

    @b.node()
    async def ask(state: Job, ctx: Any) -> dict[str, Any]:
        return {"name": str(await ctx.request({"q": "ok?"}, response_type=bool))}

    b.set_entry("ask").add_edge("ask", END)
    wf = b.build()

    async def go() -> str:
        async with Runtime(SqliteStore(db)) as rt:
            run_id = (await rt.run(wf, {}, labels={"ticket": "T-7"})).run_id
            await rt.pause(run_id, reason="checking the ticket")
            return run_id
    run_id = asyncio.run(go())
    shown = cli(db, "show", run_id)
    assert shown.exit_code == 0, shown.output
    assert "checking the ticket" in shown.stdout and "ticket=T-7" in shown.stdout
    inbox = cli(db, "inbox")
    assert inbox.exit_code == 0 and "paused" in inbox.stdout
    listed = cli(db, "runs", "--status", "paused")
    assert run_id in listed.stdout and "paused: checking the ticket" in listed.stdout


def asks() -> Any:
    b = WorkflowBuilder("asks", state=Job)

    @b.node()
    async def ask(state: Job, ctx: Any) -> dict[str, Any]:
        return {"name": str(await ctx.request({"q": "ok?"}, response_type=bool))}

    b.set_entry("ask").add_edge("ask", END)
    return b.build()


def test_bulk_resume_hands_failed_and_paused_runs_to_workers_and_leaves_waiting_ones(
        tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    ids = seed(db)

    async def more() -> tuple[str, str]:
        async with Runtime(SqliteStore(db)) as rt:
            waiting = (await rt.run(asks(), {}, labels={"customer": "acme"})).run_id
            await rt.pause(ids["acme"][0], reason="outage", by="ops")
            return waiting, ids["acme"][0]
    waiting, paused = asyncio.run(more())
    refused = cli(db, "resume", "--label", "customer=acme")
    assert refused.exit_code == 1 and "--yes" in refused.stderr
    dry = cli(db, "resume", "--label", "customer=acme", "--dry-run")
    assert dry.exit_code == 0 and "6 run(s) selected" in dry.stdout
    assert statuses(db)[paused] == "paused"  # nothing changed
    done = cli(db, "resume", "--label", "customer=acme", "--by", "ops", "--yes")
    assert done.exit_code == 0, done.output
    # the two failed and the paused one go to workers; two are queued already; one waits
    assert ("resume: 3 done, 2 skipped (status did not allow it), 1 waiting (nothing to "
            "resume them with yet), 0 failed") in done.stdout
    now = statuses(db)
    assert all(now[r] == "queued" for r in [*ids["failed"], *ids["acme"]])
    assert now[waiting] == "waiting" and now[ids["globex"][0]] == "queued"
    audit = json.loads(cli(db, "audit", paused, "--json").stdout)
    assert [(d["kind"], d["by"]) for d in audit][-2:] == [
        ("pause", "ops"), ("unpause", "ops")]
    # the same command again: nothing left to do, and the waiting run said so again
    again = json.loads(cli(db, "resume", "--label", "customer=acme", "--yes",
                           "--json").stdout)
    assert again["done"] == [] and again["waiting"] == [waiting] and again["failed"] == {}
    assert sorted(again["skipped"]) == sorted([*ids["failed"], *ids["acme"]])


def test_bulk_resume_takes_ids_and_keeps_the_one_run_resume(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    ids = seed(db)
    out = json.loads(cli(db, "resume", *ids["failed"], "--yes", "--json").stdout)
    assert sorted(out["done"]) == sorted(ids["failed"]) and out["waiting"] == []
    mixed = cli(db, "resume", ids["acme"][0], "--status", "queued")
    assert mixed.exit_code == 2 and "not both" in mixed.stderr
    nothing = cli(db, "resume")
    assert nothing.exit_code == 2 and "--workflow-name" in nothing.stderr
    code = cli(db, "resume", *ids["acme"][:2], "--workflow", "x:y", "--yes")
    assert code.exit_code == 2 and "resume one run here" in code.stderr
    by_name = json.loads(cli(db, "resume", "--workflow-name", "jobs", "--status", "queued",
                             "--dry-run", "--json").stdout)
    assert sorted(r["run_id"] for r in by_name["runs"]) == sorted(
        [*ids["acme"], *ids["globex"]])  # the failed runs are of "failing"


def test_show_says_a_runs_concurrency_key_and_the_limit_its_task_waits_for(
        tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    wf = job()

    async def go() -> str:
        async with Runtime(SqliteStore(db)) as rt:
            run_id = (await rt.submit(wf, {"name": "a"}, concurrency_key="acme")).run_id
            await rt.store.claim_next("w1", 30, [(wf.name, wf.version)], limit=1)
            for grant, run, task in (("held", "other", "call"), ("mine", run_id, "work")):
                await rt.store.request_grant(  # type: ignore[attr-defined]
                    grant, "api", run_id=run, task=task, owner="w1", ttl=30.0, concurrency=1,
                    per_second=None, per_minute=None)
            return run_id
    run_id = asyncio.run(go())
    shown = cli(db, "show", run_id)
    assert shown.exit_code == 0, shown.output
    assert "concurrency key" in shown.stdout and "acme" in shown.stdout
    assert "waiting for api: 1 of 1 in use (node work)" in shown.stdout
    data = json.loads(cli(db, "show", run_id, "--json").stdout)
    assert data["run"]["concurrency_key"] == "acme"
    assert data["limit_waits"] == [{"limit": "api", "node": "work", "in_use": 1, "capacity": 1}]
