"""The command line shows map instances: show, history, inbox, respond and graph."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clikit import cli, project_db

MODULE = "mapflows"

FLOWS = textwrap.dedent('''
    from typing import Annotated

    from durable_flow import Blackboard, Command, Send, WorkflowBuilder, append

    class Batch(Blackboard):
        items: list[int] = []
        approved: Annotated[list[int], append] = []

    async def check(state: Batch, ctx) -> dict:
        if ctx.arg > 100:
            if not await ctx.request({"amount": ctx.arg}, response_type=bool):
                return {}
        return {"approved": [ctx.arg]}

    b = WorkflowBuilder("lines", state=Batch)
    b.add_node("split", lambda s: Command(goto=[Send("check", n) for n in s.items]),
               goto=["check"])
    b.add_node("check", check, arg_type=int, max_concurrency=3)
    b.set_entry("split")
    workflow = b.build()
''')


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sqlite_at_head: Path) -> Iterator[Path]:
    yield from project_db(tmp_path, monkeypatch, MODULE, FLOWS, sqlite_at_head)



def started(db: Path) -> str:
    out = cli(db, "run", f"{MODULE}:workflow", "--input",
              json.dumps({"items": [5, 500, 7, 900, 11, 13]}), "--json").stdout
    run_id: str = json.loads(out)["run_id"]
    return run_id


def test_show_groups_the_instances_and_counts_those_waiting(db: Path) -> None:
    run_id = started(db)
    text = cli(db, "show", run_id).stdout
    assert "check[0..5]" in text
    assert "check: 6 instances, 2 waiting for input" in text
    snap: dict[str, Any] = json.loads(cli(db, "show", run_id, "--json").stdout)["snapshot"]
    assert snap["next_tasks"] == [f"check[{i}]" for i in range(6)]  # JSON keeps every id


def test_history_groups_the_instances_that_ran(db: Path) -> None:
    run_id = started(db)
    cli(db, "respond", run_id, "check[1]@2#0", "--value", "true")
    cli(db, "respond", run_id, "check[3]@2#0", "--value", "false")
    table = cli(db, "history", run_id).stdout
    assert "check[0..5]" in table
    rows: list[dict[str, Any]] = json.loads(cli(db, "history", run_id, "--json").stdout)
    assert rows[0]["nodes"] == [f"check[{i}]" for i in range(6)]


def test_inbox_lists_each_instance_request_and_respond_answers_it(db: Path) -> None:
    run_id = started(db)
    items = json.loads(cli(db, "inbox", "--json").stdout)
    assert sorted((r["id"], r["node"]) for r in items) == [("check[1]@2#0", "check[1]"),
                                                           ("check[3]@2#0", "check[3]")]
    text = cli(db, "inbox").stdout
    assert "check[1]@2#0" in text and "check[3]@2#0" in text
    data = json.loads(cli(db, "respond", run_id, "check[3]@2#0", "--value", "true",
                          "--json").stdout)
    assert data["status"] == "waiting"
    assert [r["id"] for r in data["pending_requests"]] == ["check[1]@2#0"]


def test_graph_draws_the_map_node_as_a_stack(db: Path) -> None:
    mermaid = cli(db, "graph", f"{MODULE}:workflow").stdout
    assert "@{ shape: procs" in mermaid and "at most 3 at once" in mermaid
