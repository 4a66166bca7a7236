"""``show`` and ``history`` show parked tasks (``waits="branch"``), in text and in JSON."""

from __future__ import annotations

import asyncio
import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uikit
from clikit import cli, project_db
from typer.testing import Result

from durable_flow import RunStatus, Runtime, SqliteStore

MODULE = "parkedflows"

FLOWS = textwrap.dedent('''
    from typing import Annotated

    from durable_flow import END, Blackboard, WorkflowBuilder, append

    class Study(Blackboard):
        topic: str = ""
        notes: Annotated[list[str], append] = []
        approved: bool = False
        paid: int = 0

    b = WorkflowBuilder("research", state=Study, waits="branch")

    async def brief(state):
        return {}

    async def approve(state, ctx):
        return {"approved": await ctx.request({"question": f"Fund {state.topic}?"},
                                              response_type=bool)}

    async def pay(state, ctx):
        return {"paid": await ctx.wait_event("paid", response_type=int)}

    def research(name):
        async def node(state):
            return {"notes": [name]}
        return node

    async def report(state):
        return {"notes": ["report"]}

    b.add_node("brief", brief).add_node("approve", approve).add_node("pay", pay)
    b.add_node("market", research("market")).add_node("check", research("check"))
    b.add_node("report", report)
    b.set_entry("brief")
    for target in ("approve", "pay", "market"):
        b.add_edge("brief", target)
    b.add_edge("market", "check")
    b.add_fan_in(["approve", "pay", "check"], "report")
    b.add_edge("report", END)
    flow = b.build()
''')


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sqlite_at_head: Path) -> Iterator[Path]:
    yield from project_db(tmp_path, monkeypatch, MODULE, FLOWS, sqlite_at_head)


def as_json(result: Result) -> Any:
    return json.loads(result.stdout)


def started(db: Path) -> str:
    """A run whose research went on while ``approve`` and ``pay`` are parked; the request id."""
    run = as_json(cli(db, "run", f"{MODULE}:flow", "-i", '{"topic": "roofs"}', "--run-id", "r1",
                      "--json"))
    assert run["status"] == "waiting", run
    assert sorted(run["state"]["notes"]) == ["check", "market"]  # the other branch went on
    [request] = run["pending_requests"]
    return str(request["id"])


def test_show_lists_each_parked_task_since_when_and_what_it_waits_for(db: Path) -> None:
    request_id = started(db)
    out = cli(db, "show", "r1").stdout
    lines = [line.split(None, 1)[1].rstrip() for line in out.splitlines() if line.startswith("parked")]
    assert lines == [f"approve since superstep 2, waits for request {request_id}",
                     "pay since superstep 2, waits for event pay@2#0"]


def test_show_json_carries_the_parked_tasks(db: Path) -> None:
    request_id = started(db)
    snap = as_json(cli(db, "show", "r1", "--json"))["snapshot"]
    assert snap["parked"] == [
        {"node": "approve", "kind": "request", "waits_for": [request_id], "since_superstep": 2,
         "wake_at": None, "events": []},
        {"node": "pay", "kind": "event", "waits_for": ["pay@2#0"], "since_superstep": 2,
         "wake_at": None, "events": ["paid"]}]


def test_history_shows_which_tasks_were_parked_at_each_checkpoint(db: Path) -> None:
    request_id = started(db)
    found = as_json(cli(db, "history", "r1", "--json"))
    parked = {c["superstep"]: c["parked"] for c in found}
    assert parked[0] == []
    assert parked[max(parked)] == ["approve", "pay"]
    cli(db, "respond", "r1", request_id, "--value", "true")
    cli(db, "send-event", "r1", "paid", "--value", "3")
    done = as_json(cli(db, "resume", "r1", "--json"))
    assert done["status"] == "completed" and done["state"]["paid"] == 3
    table = cli(db, "history", "r1").stdout.splitlines()
    header = next(line for line in table if "superstep" in line and "checkpoint" in line)
    assert "parked" in header
    assert any("approve, pay" in row for row in table)  # the checkpoint they were parked at
    newest = as_json(cli(db, "history", "r1", "--json"))[0]
    assert newest["parked"] == []


async def test_inbox_shows_a_parked_request_with_its_run_still_running(db: Path) -> None:
    uikit.research_gate = gate = asyncio.Event()  # holds the research branch
    try:
        async with Runtime(SqliteStore(db)) as rt:
            running = asyncio.create_task(rt.run(uikit.research, {"topic": "roofs"}))
            while not (asked := await rt.pending_requests()):
                assert not running.done(), running.result()
                await asyncio.sleep(0.01)
            [request] = asked
            table = (await asyncio.to_thread(cli, db, "inbox")).stdout.splitlines()
            header = next(line for line in table if "request" in line and "node" in line)
            assert "run status" in header
            [row] = [line for line in table if request.id in line]
            assert " running " in row
            gate.set()
            result = await asyncio.wait_for(running, 30)
    finally:
        uikit.research_gate = None
    assert result.status is RunStatus.WAITING  # answered by nobody yet: only approve is left
    table = (await asyncio.to_thread(cli, db, "inbox")).stdout.splitlines()
    [row] = [line for line in table if request.id in line]
    assert " waiting " in row
