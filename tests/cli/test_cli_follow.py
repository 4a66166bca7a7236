"""`durable-flow follow RUN`: what a run's agents streamed, printed; --after skips what was seen."""

from __future__ import annotations

import asyncio
import json
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from clikit import cli
from typer.testing import CliRunner

from durable_flow import (
    END,
    Blackboard,
    Message,
    RunNotFoundError,
    Runtime,
    SqliteStore,
    ToolCall,
    WorkflowBuilder,
)
from durable_flow.cli import app
from durable_flow.testing import ScriptedModel


class Trip(Blackboard):
    question: str = ""
    answer: str = ""


def weather(city: str) -> str:
    """The forecast."""
    return f"sunny in {city}"


def streamed_run(db: Path) -> str:
    call = Message.assistant(tool_calls=[ToolCall(id="c1", name="weather",
                                                  arguments={"city": "Oslo"})])
    b = WorkflowBuilder("trip", state=Trip)
    b.add_agent("planner", ScriptedModel([call, "Pack sunglasses"], streaming=True),
                instructions="Plan.", tools=[weather])
    b.set_entry("planner")
    b.add_edge("planner", END)

    async def go() -> str:
        async with Runtime(SqliteStore(db)) as rt:
            return (await rt.run(b.build(), {"question": "Oslo?"})).run_id

    return asyncio.run(go())


def test_follow_prints_tool_calls_and_text_of_a_finished_run(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = streamed_run(db)
    out = cli(db, "follow", run_id).output
    assert "-> weather({'city': 'Oslo'})" in out
    assert "<- weather: sunny in Oslo" in out
    assert "[planner]" in out and "Pack sunglasses" in out
    rest = cli(db, "follow", run_id, "--after", "3").output
    assert rest.strip() == "[planner]  sunglasses"  # the delta " sunglasses" alone


def test_follow_json_prints_one_entry_per_line(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    run_id = streamed_run(db)
    lines = cli(db, "follow", run_id, "--json").output.splitlines()
    entries = [json.loads(line) for line in lines]
    assert [e["seq"] for e in entries] == list(range(1, len(entries) + 1))
    assert entries[0]["kind"] == "tool_started" and entries[0]["data"]["tool"] == "weather"
    text = "".join(e["data"]["text"] for e in entries if e["kind"] == "model_delta")
    assert text == "Pack sunglasses" and all(e["run_id"] == run_id for e in entries)
    assert [json.loads(x)["seq"] for x in cli(db, "follow", run_id, "--after", "3",
                                               "--json").output.splitlines()] == [4]


@pytest.mark.process
def test_follow_into_a_reader_that_stops_early_ends_quietly(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    streamed_run(db)
    run_id = json.loads(cli(db, "runs", "--json").output)[0]["run_id"]
    exe = Path(sys.executable).with_name("durable-flow")
    proc = subprocess.run(f"{shlex.quote(str(exe))} --db {shlex.quote(str(db))} follow "
                          f"{run_id} --json | head -n 1", shell=True, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) == 1
    assert proc.stderr == "", proc.stderr


HANGS = """
import asyncio, sys
from durable_flow import END, Blackboard, Runtime, SqliteStore, WorkflowBuilder

class S(Blackboard):
    x: int = 0

async def talk(state, ctx):
    ctx.publish("model_delta", text="thinking", round=0, attempt=1)
    await asyncio.sleep(3600)
    return {}

b = WorkflowBuilder("hangs", state=S)
b.add_node("talk", talk)
b.set_entry("talk")
b.add_edge("talk", END)

async def main():
    async with Runtime(SqliteStore(sys.argv[1]), lease_ttl=1.0) as rt:
        await rt.run(b.build(), {}, run_id="h1")

asyncio.run(main())
"""


async def _streamed(db: Path, run_id: str) -> bool:
    if not db.exists():
        return False
    async with Runtime(SqliteStore(db)) as rt:
        try:
            return bool(await rt.read_stream(run_id))
        except RunNotFoundError:
            return False


@pytest.mark.crash
def test_follow_of_a_run_whose_process_died_returns_and_says_how_to_go_on(
        tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    (tmp_path / "hangs.py").write_text(HANGS)
    child = subprocess.Popen([sys.executable, str(tmp_path / "hangs.py"), str(db)])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not asyncio.run(_streamed(db, "h1")):
            time.sleep(0.1)  # until the child stored its delta
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    started = time.monotonic()
    result = CliRunner().invoke(app, ["--db", str(db), "follow", "h1"])
    assert time.monotonic() - started < 10  # not forever: the lease (1 s) runs out
    assert result.exit_code == 1
    assert "thinking" in result.output
    assert "nobody executes it" in result.output and "resume h1" in result.output
