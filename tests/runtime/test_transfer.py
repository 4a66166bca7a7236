"""``export_run`` / ``import_run``: a run as one JSON document, SQLite -> PostgreSQL -> SQLite.

The run moved has a sub-workflow, log segments (more than eight supersteps),
a recorded step, a finished sibling's saved write, an open request, an open
event wait and a kept event: after each move every checkpoint reads the same
and the run resumes to the same end as the original.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any

import orjson
import pytest
from pgdb import empty_tables
from typer.testing import CliRunner
from waitkit import store_dump

from durable_flow import (
    Blackboard,
    InvalidInputError,
    NodeContext,
    PostgresStore,
    RunExistsError,
    RunStatus,
    Runtime,
    SqliteStore,
    WorkflowBuilder,
    add,
    append,
    export_run,
    import_run,
)
from durable_flow.cli import app


class Inner(Blackboard):
    trail: Annotated[list[str], append] = []


class Work(Blackboard):
    count: Annotated[int, add] = 0
    trail: Annotated[list[str], append] = []
    fetched: str = ""
    approved: bool = False
    pinged: str = ""


def build() -> Any:
    ib = WorkflowBuilder("transfer-inner", state=Inner)
    ib.add_node("one", lambda s: {"trail": ["one"]})
    ib.add_node("two", lambda s: {"trail": ["two"]})
    ib.set_entry("one").add_edge("one", "two")
    b = WorkflowBuilder("transfer", state=Work)
    b.add_subworkflow("inner", ib.build(), outputs=["trail"])
    b.add_node("loop", lambda s: {"count": 1, "trail": [f"loop {s.count}"]})

    @b.node()
    async def fetch(state: Work, ctx: NodeContext) -> dict[str, Any]:
        return {"fetched": await ctx.step("get", lambda: "page")}

    @b.node()
    async def approve(state: Work, ctx: NodeContext) -> dict[str, Any]:
        return {"approved": await ctx.request({"q": "ok?"}, response_type=bool)}

    @b.node()
    async def listen(state: Work, ctx: NodeContext) -> dict[str, Any]:
        return {"pinged": await ctx.wait_event("ping", response_type=str)}

    b.set_entry("inner").add_edge("inner", "loop")
    b.add_switch("loop", [("count < 10", "loop")], default="fetch")
    b.add_edge("loop", "approve", when="count >= 10")
    b.add_edge("loop", "listen", when="count >= 10")
    return b.build()


WORKFLOW = build()


@pytest.fixture
async def pg(pg_dsn: str) -> AsyncIterator[PostgresStore]:
    store = PostgresStore(pg_dsn, max_size=4)
    await store.setup()
    await empty_tables(pg_dsn)
    yield store
    await store.close()


async def paused(store: Any) -> str:
    """A run waiting for its answer and its event, with a kept event nobody waits for."""
    rt = Runtime(store)  # the store is set up, and stays open
    result = await rt.run(WORKFLOW, {}, run_id="moved")
    assert result.status is RunStatus.WAITING
    await rt.send_event("moved", "unrelated", {"kept": True})
    return result.run_id


async def states(store: Any, run_id: str) -> list[Any]:
    """``get_state`` at every checkpoint of every namespace."""
    rt = Runtime(store)
    out = []
    for namespace in ("", "inner"):
        for cp in await rt.history(run_id, namespace=namespace):
            out.append(await rt.get_state(run_id, cp.id, namespace=namespace))
    return out


async def finish(store: Any, run_id: str) -> dict[str, Any]:
    rt = Runtime(store)
    await rt.send_event(run_id, "ping", "pong")
    [req] = (await rt.get_state(run_id)).pending_requests
    result = await rt.resume(WORKFLOW, run_id, responses={req.id: True})
    assert result.status is RunStatus.COMPLETED, result.error
    return (await rt.get_state(run_id)).values


def without_time(document: dict[str, Any]) -> dict[str, Any]:
    """The document without its time, and without what each import adds to the audit chain
    (its ``import`` decision and the run row's anchor)."""
    tables = {name: rows for name, rows in document["tables"].items() if name != "decisions"}
    tables["runs"] = [{k: v for k, v in row.items() if not k.startswith("audit_")}
                      for row in tables["runs"]]
    return {k: v for k, v in document.items() if k != "exported_at"} | {"tables": tables}


async def test_a_run_goes_to_postgresql_and_back_and_resumes(tmp_path: Path,
                                                             pg: PostgresStore) -> None:
    first = SqliteStore(tmp_path / "first.db")
    await first.setup()  # stores are closed with the test's event loop
    run_id = await paused(first)
    document = orjson.loads(orjson.dumps(await export_run(first, run_id)))
    tables = document["tables"]
    assert document["version"] == 1 and document["run_id"] == run_id
    assert {len(tables[t]) > 0 for t in ("checkpoints", "channel_values", "log_chunks",
                                          "task_writes", "steps", "requests", "mailbox",
                                          "graphs")} == {True}
    assert (await import_run(pg, document)).status is RunStatus.WAITING
    assert await states(pg, run_id) == await states(first, run_id)
    back = await export_run(pg, run_id)
    assert without_time(back) == without_time(document)
    assert [d["kind"] for d in back["tables"]["decisions"]] == ["import"]
    last = SqliteStore(tmp_path / "last.db")
    await last.setup()
    await import_run(last, back)
    assert await states(last, run_id) == await states(first, run_id)
    expected = await finish(first, run_id)
    assert await finish(last, run_id) == expected
    assert expected["pinged"] == "pong" and expected["count"] == 10
    await first.close()
    await last.close()


async def test_importing_a_run_that_exists_writes_nothing(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "runs.db")
    async with store:
        run_id = await paused(store)
        document = await export_run(store, run_id)
        before = await store_dump(store, run_id)
        with pytest.raises(RunExistsError):
            await import_run(store, document)
        assert await store_dump(store, run_id) == before


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.update(version=2), "exported by a newer durable-flow"),
    (lambda d: d.update(format="other"), "not an exported run"),
    (lambda d: d["tables"].update(verdicts=[{"id": 1}]), "table 'verdicts' is unknown"),
    (lambda d: d["tables"]["steps"][0].update(run_id="other"), "belongs to run 'other'"),
    (lambda d: d["tables"]["steps"][0].pop("name"), "missing or unknown: name"),
    (lambda d: d["tables"]["checkpoints"][0].update(seq="1"), "checkpoints.seq holds '1'"),
    (lambda d: d["tables"]["graphs"][0].update(signature="x"), "graph of its own signature"),
])
async def test_a_document_that_does_not_fit_is_refused_before_writing(
        tmp_path: Path, change: Any, message: str) -> None:
    async with SqliteStore(tmp_path / "a.db") as store:
        document = await export_run(store, await paused(store))
    change(document)
    async with SqliteStore(tmp_path / "b.db") as other:
        with pytest.raises(InvalidInputError, match=message):
            await import_run(other, document)
        assert await other.get_run("moved") is None


async def test_an_empty_table_of_a_newer_durable_flow_is_fine(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "a.db") as store:
        document = await export_run(store, await paused(store))
    document["tables"]["verdicts"] = []
    del document["tables"]["mailbox"]  # a table the document lacks reads as empty
    async with SqliteStore(tmp_path / "b.db") as other:
        await import_run(other, document)
        assert await other.get_mail("moved") == []


async def test_a_document_written_before_digests_imports_and_resumes(tmp_path: Path) -> None:
    """Checkpoint rows without ``digests`` (migration 0011) or ``row_digest`` (0019) import."""
    async with SqliteStore(tmp_path / "a.db") as store:
        run_id = await paused(store)
        document = await export_run(store, run_id)
        expected = await finish(store, run_id)
    assert any(row["digests"] for row in document["tables"]["checkpoints"])
    for row in document["tables"]["checkpoints"]:
        del row["digests"], row["row_digest"]
    async with SqliteStore(tmp_path / "b.db") as other:
        await import_run(other, document)
        assert all(cp.digests == {} for cp in await other.list_checkpoints(run_id))
        assert await finish(other, run_id) == expected


def test_the_commands_export_and_import(tmp_path: Path) -> None:
    source, target = tmp_path / "a.db", tmp_path / "b.db"

    async def start() -> None:
        async with SqliteStore(source) as store:
            await paused(store)

    asyncio.run(start())
    runner = CliRunner()
    printed = runner.invoke(app, ["--db", str(source), "export", "moved"])
    assert printed.exit_code == 0, printed.output
    assert orjson.loads(printed.stdout)["run_id"] == "moved"
    out = tmp_path / "moved.json"
    written = runner.invoke(app, ["--db", str(source), "export", "moved", "-o", str(out)])
    assert written.exit_code == 0, written.output
    loaded = runner.invoke(app, ["--db", str(target), "import", str(out)])
    assert loaded.exit_code == 0, loaded.output
    assert "imported run moved (waiting, workflow 'transfer')" in loaded.stdout
    again = runner.invoke(app, ["--db", str(target), "import", str(out)])
    assert again.exit_code == 1 and "run moved already exists" in again.output


async def test_a_run_moves_with_its_decisions_and_notifications(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "a.db") as store:
        run_id = await paused(store)
        rt = Runtime(store)
        (request,) = [r for r in await rt.pending_requests() if r.run_id == run_id]
        await rt.respond(run_id, {request.id: True}, by="fay", comment="fine")
        chain = await rt.decisions(run_id)
        opened = [n.id for n in await store.notifications(run_id)]
        document = await export_run(store, run_id)
    assert [d.by for d in chain] == ["fay"] and opened
    async with SqliteStore(tmp_path / "b.db") as other:
        await import_run(other, document)
        *imported, noted = await Runtime(other).decisions(run_id)
        assert imported == chain and (noted.kind, noted.seq) == ("import", 2)
        assert (await Runtime(other).verify_audit(run_id)).ok
        assert [n.id for n in await other.notifications(run_id)] == opened
