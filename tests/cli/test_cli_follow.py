"""`durable-flow follow RUN`: what a run's agents streamed, printed; --after skips what was seen."""

from __future__ import annotations

import asyncio
from pathlib import Path

from clikit import cli

from durable_flow import END, Blackboard, Message, Runtime, SqliteStore, ToolCall, WorkflowBuilder
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
