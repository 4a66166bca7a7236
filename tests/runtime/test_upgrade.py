"""``check_upgrade``: can new code continue the runs that are paused now? Nothing is written."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

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
    append,
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
            await paused(rt, "a", "b")

    asyncio.run(start())
    runner = CliRunner()
    ok = runner.invoke(app, ["--db", str(db), "check-upgrade", "runtime.test_upgrade:V2_RENAMED"])
    assert ok.exit_code == 0, ok.output
    assert "every unfinished run of 'doc' can continue on version '2'" in ok.stdout
    bad = runner.invoke(app, ["--db", str(db), "check-upgrade", "runtime.test_upgrade:V2_UNMAPPED"])
    assert bad.exit_code == 1
    lines = bad.stdout.splitlines()  # one reason, the runs it breaks grouped under it
    assert lines[0] == "version 1: version '2' has no node 'approve' (the node of next task " \
        "'approve'; map it with migrate(..., nodes=...))" or "has no node 'approve'" in lines[0]
    assert lines[1] == "  2 run(s): run-a (waiting), run-b (waiting)"
    assert sum("has no node 'approve'" in line for line in lines) == 1
    assert "2 unfinished run(s) of 'doc' would break on version '2'" in bad.stdout
    data = runner.invoke(app, ["check-upgrade", "runtime.test_upgrade:V2_UNMAPPED", "--db", str(db),
                               "--json"])
    assert data.exit_code == 1
    problems = orjson.loads(data.stdout)["problems"]
    assert [(p["run_id"], p["status"]) for p in problems] == [("run-a", "waiting"),
                                                              ("run-b", "waiting")]


V2_UNMAPPED = version_2(nodes={})


class DocMore(Blackboard):
    title: str = ""
    approved: bool = False
    trail: Annotated[list[str], append] = []
    reviewer: str = "nobody yet"  # new in this code, with a default


def with_a_new_field(state: type[Blackboard] = DocMore) -> Any:
    """Version 1's graph on a blackboard that gained a field."""
    b = WorkflowBuilder("doc", state=state, version="1")
    b.add_node("write", lambda s: {"trail": ["write"]})

    async def approve(state: Any, ctx: Any) -> dict[str, Any]:
        return {"approved": await ctx.request({"title": state.title}, response_type=bool)}

    b.add_node("approve", approve)
    b.set_entry("write").add_edge("write", "approve").add_edge("approve", END)
    return b.build()


async def test_a_new_field_with_a_default_is_no_graph_change(rt: Runtime) -> None:
    [run_id] = await paused(rt, "a")
    new = with_a_new_field()
    assert await rt.check_upgrade(new) == []
    [req] = (await rt.get_state(run_id)).pending_requests
    done = await rt.resume(new, run_id, responses={req.id: True})
    assert done.status is RunStatus.COMPLETED and done.state.approved
    assert done.state.reviewer == "nobody yet"


class DocNeeds(Blackboard):
    title: str = ""
    approved: bool = False
    trail: Annotated[list[str], append] = []
    reviewer: str  # new and required: old runs hold no value for it


async def test_a_new_required_field_or_a_removed_one_is_a_graph_change(rt: Runtime) -> None:
    await paused(rt, "a")
    [needs] = await rt.check_upgrade(with_a_new_field(DocNeeds))
    assert "state field 'reviewer' is only in the workflow given" in needs.reason
    [fewer] = await rt.check_upgrade(with_a_new_field(DocFewer))
    assert "state field 'trail' is only in the run's graph" in fewer.reason


class DocFewer(Blackboard):
    title: str = ""
    approved: bool = False


def test_new_defaulted_fields_inside_a_sub_workflow_are_no_graph_change() -> None:
    from durable_flow.model._versions import only_new_defaults

    def parent(inner_state: type[Blackboard]) -> Any:
        inner = WorkflowBuilder("inner", state=inner_state)
        inner.add_node("approve", lambda s: None)
        inner.set_entry("approve")
        outer = WorkflowBuilder("outer", state=Doc)
        outer.add_subworkflow("review", inner.build(), inputs=["title"], outputs=["approved"])
        outer.set_entry("review")
        return outer.build()

    old = parent(Doc).describe()
    assert only_new_defaults(old, parent(DocMore))
    assert not only_new_defaults(old, parent(DocNeeds))
    assert not only_new_defaults(old, parent(DocFewer))
