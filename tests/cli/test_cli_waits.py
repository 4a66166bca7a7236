"""The command line of durable time and versions: send-event, versions and deadlines shown."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clikit import cli, project_db
from typer.testing import CliRunner, Result

from durable_flow.cli import app

MODULE = "waitflows"

FLOWS = textwrap.dedent('''
    from durable_flow import END, Blackboard, WorkflowBuilder

    class Order(Blackboard):
        item: str = ""
        ok: bool = False
        paid: int = 0

    def build(version):
        b = WorkflowBuilder("order", state=Order, version=version)

        async def approve(state, ctx):
            return {"ok": await ctx.request({"item": state.item}, response_type=bool,
                                            timeout=3600)}

        async def pay(state, ctx):
            return {"paid": await ctx.wait_event("paid", response_type=int)}

        b.add_node("approve" if version == "1" else "sign", approve)
        b.add_node("pay", pay)
        first = "approve" if version == "1" else "sign"
        b.set_entry(first).add_edge(first, "pay").add_edge("pay", END)
        if version == "2":
            b.migrate("1", dict, nodes={"approve": "sign"})
        return b.build()

    v1 = build("1")
    v2 = build("2")
''')


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sqlite_at_head: Path) -> Iterator[Path]:
    yield from project_db(tmp_path, monkeypatch, MODULE, FLOWS, sqlite_at_head)



def as_json(result: Result) -> Any:
    return json.loads(result.stdout)


def test_send_event_queues_a_waiting_run_and_resume_finishes_it(db: Path) -> None:
    run = as_json(cli(db, "run", f"{MODULE}:v1", "-i", '{"item": "desk"}', "--run-id", "r1",
                      "--json"))
    [req] = run["pending_requests"]
    waiting = as_json(cli(db, "respond", "r1", req["id"], "--value", "true", "--json"))
    assert waiting["status"] == "waiting" and waiting["pending_requests"] == []
    sent = cli(db, "send-event", "r1", "paid", "--value", "12")
    assert "sent paid to run r1: now queued" in sent.stdout
    done = as_json(cli(db, "resume", "r1", "--json"))
    assert done["status"] == "completed" and done["state"]["paid"] == 12
    info = as_json(cli(db, "runs", "--json"))
    assert info[0]["workflow_version"] == "1"


def test_a_finished_run_refuses_an_event_with_one_line(db: Path) -> None:
    cli(db, "run", f"{MODULE}:v1", "--run-id", "r1", "--json")
    cli(db, "cancel", "r1")
    result = CliRunner().invoke(app, ["--db", str(db), "send-event", "r1", "paid", "--value", "1"])
    assert result.exit_code == 1
    assert result.stderr.strip().startswith("error: run r1 is cancelled")


def test_runs_show_the_version_and_the_inbox_shows_deadlines(db: Path) -> None:
    cli(db, "run", f"{MODULE}:v1", "-i", '{"item": "desk"}', "--run-id", "r1")
    table = cli(db, "runs").stdout
    assert "version" in table and "wakes" in table
    row = next(line for line in table.splitlines() if "r1" in line)
    assert " 1 " in row and "waiting" in row
    inbox = cli(db, "inbox").stdout
    assert "deadline" in inbox
    [req] = as_json(cli(db, "inbox", "--json"))
    assert req["expires_at"] is not None
    assert req["expires_at"][:10] in inbox.replace("\n", " ")


def test_resume_migrate_moves_a_run_onto_the_new_version(db: Path) -> None:
    cli(db, "run", f"{MODULE}:v1", "-i", '{"item": "desk"}', "--run-id", "r1")
    refused = CliRunner().invoke(app, ["--db", str(db), "resume", "r1", "--workflow",
                                       f"{MODULE}:v2"])
    assert refused.exit_code == 1 and "migrate" in refused.stderr
    moved = as_json(cli(db, "resume", "r1", "--workflow", f"{MODULE}:v2", "--migrate", "--json"))
    assert moved["status"] == "waiting"
    assert moved["pending_requests"][0]["node"] == "sign"
    [info] = as_json(cli(db, "runs", "--json"))
    assert info["workflow_version"] == "2"
