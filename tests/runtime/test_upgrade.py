"""``check_upgrade``: can new code continue the runs that are paused now? Nothing is written."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
from engine.test_versions import Doc, version_1, version_2
from typer.testing import CliRunner
from waitkit import store_dump

from durable_flow import (
    END,
    Blackboard,
    RunStatus,
    Runtime,
    SqliteStore,
    WorkflowBuilder,
)
from durable_flow.cli import app


class DocCount(Blackboard):
    title: int = 0
    approved: bool = False
    trail: list[str] = []


def retyped() -> Any:
    """Version 2 keeps the nodes but ``title`` becomes an int: the migration cannot fit it."""
    b = WorkflowBuilder("doc", state=DocCount, version="2")
    b.add_node("write", lambda s: None)
    b.add_node("approve", lambda s: None)
    b.set_entry("write").add_edge("write", "approve").add_edge("approve", END)
    b.migrate("1", lambda values: values)
    return b.build()


def dropped() -> Any:
    """Version 2 without ``approve``, the node whose request the paused runs wait in."""
    b = WorkflowBuilder("doc", state=Doc, version="2")
    b.add_node("write", lambda s: None)
    b.set_entry("write").add_edge("write", END)
    b.migrate("1", lambda values: values)
    return b.build()


def changed_in_place() -> Any:
    """Version 1 again, with a node added: a new graph without a new version."""
    b = WorkflowBuilder("doc", state=Doc, version="1")
    for name in ("write", "approve", "notify"):
        b.add_node(name, lambda s: None)
    b.set_entry("write").add_edge("write", "approve").add_edge("approve", "notify")
    return b.build()


V1 = version_1()
V2_RENAMED = version_2()


async def paused(rt: Runtime, *titles: str) -> list[str]:
    """Runs of version 1 waiting in ``approve``."""
    ids = []
    for title in titles:
        result = await rt.run(V1, {"title": title}, run_id=f"run-{title}")
        assert result.status is RunStatus.WAITING
        ids.append(result.run_id)
    return ids


async def test_a_rename_mapped_with_nodes_can_continue_every_run(rt: Runtime) -> None:
    ids = await paused(rt, "a", "b")
    before = [await store_dump(rt.store, i) for i in ids]
    assert await rt.check_upgrade(V2_RENAMED) == []
    assert await rt.check_upgrade(V1) == []
    assert [await store_dump(rt.store, i) for i in ids] == before  # nothing was written


async def test_a_rename_without_nodes_breaks_each_paused_run(rt: Runtime) -> None:
    await paused(rt, "a", "b")
    problems = await rt.check_upgrade(version_2(nodes={}))
    assert [p.run_id for p in problems] == ["run-a", "run-b"]
    first = problems[0]
    assert (first.status, first.run_version, first.workflow_version) == (
        RunStatus.WAITING, "1", "2")
    assert first.reason.startswith("version '2' has no node 'approve'")


async def test_a_dropped_node_with_a_pending_request_breaks_the_run(rt: Runtime) -> None:
    await paused(rt, "a")
    [problem] = await rt.check_upgrade(dropped())
    assert "has no node 'approve'" in problem.reason


async def test_a_field_whose_type_changed_breaks_the_run(rt: Runtime) -> None:
    await paused(rt, "a")
    [problem] = await rt.check_upgrade(retyped())
    assert "do not fit DocCount of version '2'" in problem.reason
    assert "title" in problem.reason


async def test_no_migration_and_a_graph_changed_in_place_are_named(rt: Runtime) -> None:
    await paused(rt, "a")
    [missing] = await rt.check_upgrade(version_2(migrate=False))
    assert missing.reason.startswith("version '2' declares no migration from version '1'")
    [changed] = await rt.check_upgrade(changed_in_place())
    assert changed.reason == ("the graph changed without a new version: "
                              "node 'notify' is only in the workflow given")


async def test_a_failing_migration_is_named(rt: Runtime) -> None:
    await paused(rt, "a")

    def broken(values: dict[str, Any]) -> dict[str, Any]:
        raise KeyError("headline")

    [problem] = await rt.check_upgrade(version_2(fn=broken))
    assert "failed: KeyError" in problem.reason and "nothing was written" not in problem.reason


async def test_finished_runs_and_other_workflows_are_not_checked(rt: Runtime) -> None:
    [run_id] = await paused(rt, "a")
    other = WorkflowBuilder("other", state=Doc)
    other.add_node("write", lambda s: None)
    other.set_entry("write")
    await rt.run(other.build(), {})
    [req] = (await rt.get_state(run_id)).pending_requests
    assert (await rt.resume(V1, run_id, responses={req.id: True})).status is RunStatus.COMPLETED
    assert await rt.check_upgrade(dropped()) == []


def test_the_command_exits_1_listing_each_run_that_would_break(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"

    async def start() -> None:
        async with Runtime(SqliteStore(db)) as rt:
            await paused(rt, "a")

    asyncio.run(start())
    runner = CliRunner()
    ok = runner.invoke(app, ["--db", str(db), "check-upgrade", "runtime.test_upgrade:V2_RENAMED"])
    assert ok.exit_code == 0, ok.output
    assert "every unfinished run of 'doc' can continue on version '2'" in ok.stdout
    bad = runner.invoke(app, ["--db", str(db), "check-upgrade", "runtime.test_upgrade:V2_UNMAPPED"])
    assert bad.exit_code == 1
    assert "run run-a (waiting, version 1): version '2' has no node 'approve'" in bad.stdout
    assert "1 unfinished run(s) of 'doc' would break on version '2'" in bad.stdout
    data = runner.invoke(app, ["check-upgrade", "runtime.test_upgrade:V2_UNMAPPED", "--db", str(db),
                               "--json"])
    assert data.exit_code == 1
    [problem] = orjson.loads(data.stdout)["problems"]
    assert problem["run_id"] == "run-a" and problem["status"] == "waiting"


V2_UNMAPPED = version_2(nodes={})
